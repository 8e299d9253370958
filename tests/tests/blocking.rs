//! Blocking list pops against the built `cinnabar-server`: FIFO service,
//! timeouts, BLMOVE chains, dead waiters, pipelines after a blocking
//! command. Each test starts its own server on a free port.
//!
//! Expected replies are the bytes Redis 7.0.15 sends in the same scenario.
//! A short pause after sending a blocking command lets the server register
//! the waiter before the next client acts (the order under test).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const SETTLE: Duration = Duration::from_millis(150);

/// The server under test; `BLOCKING_TEST_SERVER` may name another binary
/// taking `--port` (e.g. `redis-server`, to check the expectations).
fn binary() -> PathBuf {
    if let Ok(bin) = std::env::var("BLOCKING_TEST_SERVER") {
        return PathBuf::from(bin);
    }
    let mut candidates = Vec::new();
    if let Ok(dir) = std::env::var("CARGO_TARGET_DIR") {
        candidates.push(PathBuf::from(dir).join("debug/cinnabar-server"));
    }
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    candidates.push(root.join("target/debug/cinnabar-server"));
    candidates
        .iter()
        .find(|p| p.exists())
        .cloned()
        .unwrap_or_else(|| panic!("cinnabar-server not built (looked at {candidates:?})"))
}

struct Server {
    child: Child,
    port: u16,
}

impl Server {
    fn start() -> Server {
        let bin = binary();
        for _ in 0..5 {
            // Below the ephemeral range: a client socket of another test
            // cannot hold it (an ephemeral one could, and the probe below
            // then connected to it while the server had failed to bind).
            let port = cinnabar_tests::free_port();
            let mut child = Command::new(&bin)
                .args(["--port", &port.to_string()])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("spawn cinnabar-server");
            let start = Instant::now();
            while start.elapsed() < Duration::from_secs(5) {
                // Ours, not another test's server that took the port first.
                if TcpStream::connect(("127.0.0.1", port)).is_ok_and(|s| serves(s, child.id())) {
                    return Server { child, port };
                }
                if child.try_wait().ok().flatten().is_some() {
                    break; // Port taken meanwhile: try another.
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
        panic!("cinnabar-server did not start");
    }

    fn raw(&self) -> Raw {
        let s = TcpStream::connect(("127.0.0.1", self.port)).expect("connect");
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        Raw {
            r: BufReader::new(s.try_clone().unwrap()),
            w: s,
        }
    }

    fn redis(&self) -> redis::Connection {
        redis::Client::open(format!("redis://127.0.0.1:{}/", self.port))
            .and_then(|c| c.get_connection())
            .expect("redis-rs connection")
    }
}

/// Whether the server on `s` is process `pid` (INFO's `process_id`).
fn serves(mut s: TcpStream, pid: u32) -> bool {
    let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
    if s.write_all(&encode(&["INFO", "server"])).is_err() {
        return false;
    }
    let mut r = BufReader::new(s);
    let mut head = String::new();
    if r.read_line(&mut head).is_err() {
        return false;
    }
    let n: usize = head.get(1..).unwrap_or("").trim_end().parse().unwrap_or(0);
    let mut body = vec![0u8; n];
    r.read_exact(&mut body).is_ok()
        && String::from_utf8_lossy(&body).contains(&format!("process_id:{pid}\r\n"))
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A client speaking RESP by hand, so replies are checked byte for byte.
struct Raw {
    r: BufReader<TcpStream>,
    w: TcpStream,
}

fn encode(args: &[&str]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        out.extend_from_slice(format!("${}\r\n{a}\r\n", a.len()).as_bytes());
    }
    out
}

impl Raw {
    fn send(&mut self, args: &[&str]) {
        self.w.write_all(&encode(args)).unwrap();
    }

    /// One complete reply, as the raw bytes.
    fn read(&mut self) -> String {
        let mut line = String::new();
        self.r.read_line(&mut line).expect("reply");
        assert!(!line.is_empty(), "connection closed");
        let mut out = line.clone();
        let n: i64 = line[1..].trim_end().parse().unwrap_or(0);
        match line.as_bytes()[0] {
            b'$' if n >= 0 => {
                let mut buf = vec![0; n as usize + 2];
                self.r.read_exact(&mut buf).unwrap();
                out.push_str(&String::from_utf8_lossy(&buf));
            }
            b'*' | b'%' | b'~' => {
                let items = if line.starts_with('%') { 2 * n } else { n };
                for _ in 0..items.max(0) {
                    out.push_str(&self.read());
                }
            }
            _ => {}
        }
        out
    }

    fn cmd(&mut self, args: &[&str]) -> String {
        self.send(args);
        self.read()
    }

    /// True if no reply arrives within `d`.
    fn silent_for(&mut self, d: Duration) -> bool {
        self.w.set_read_timeout(Some(d)).unwrap();
        let got = self.r.fill_buf().map(|b| b.len()).unwrap_or(0);
        self.w
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        got == 0
    }
}

fn pair(key: &str, val: &str) -> String {
    format!(
        "*2\r\n${}\r\n{key}\r\n${}\r\n{val}\r\n",
        key.len(),
        val.len()
    )
}

fn bulk(v: &str) -> String {
    format!("${}\r\n{v}\r\n", v.len())
}

#[test]
fn waiters_are_served_first_come_first_served() {
    let srv = Server::start();
    let mut w: Vec<Raw> = (0..3).map(|_| srv.raw()).collect();
    for c in &mut w {
        c.send(&["BLPOP", "q", "0"]);
        std::thread::sleep(SETTLE);
    }
    let mut p = srv.raw();
    assert_eq!(p.cmd(&["RPUSH", "q", "a", "b", "c"]), ":3\r\n");
    assert_eq!(w[0].read(), pair("q", "a"));
    assert_eq!(w[1].read(), pair("q", "b"));
    assert_eq!(w[2].read(), pair("q", "c"));
    assert_eq!(p.cmd(&["EXISTS", "q"]), ":0\r\n");

    // LPUSH of two elements to a key with two waiters: one each, in order.
    for c in &mut w[..2] {
        c.send(&["BRPOP", "k", "0"]);
        std::thread::sleep(SETTLE);
    }
    assert_eq!(p.cmd(&["LPUSH", "k", "x", "y"]), ":2\r\n");
    assert_eq!(w[0].read(), pair("k", "x"));
    assert_eq!(w[1].read(), pair("k", "y"));

    // More waiters than elements: the late one keeps waiting.
    for c in &mut w {
        c.send(&["BLPOP", "k", "0"]);
        std::thread::sleep(SETTLE);
    }
    assert_eq!(p.cmd(&["RPUSH", "k", "1", "2"]), ":2\r\n");
    assert_eq!(w[0].read(), pair("k", "1"));
    assert_eq!(w[1].read(), pair("k", "2"));
    assert!(w[2].silent_for(Duration::from_millis(200)));
    assert_eq!(p.cmd(&["RPUSH", "k", "3"]), ":1\r\n");
    assert_eq!(w[2].read(), pair("k", "3"));
}

/// INFO clients counts the waiters, and those with a timeout apart.
#[test]
fn info_counts_blocked_clients() {
    let srv = Server::start();
    let mut w: Vec<Raw> = (0..3).map(|_| srv.raw()).collect();
    w[0].send(&["BLPOP", "q1", "0"]);
    w[1].send(&["BRPOP", "q2", "30"]);
    w[2].send(&["BZPOPMIN", "z", "30"]);
    std::thread::sleep(SETTLE);
    let mut p = srv.raw();
    let info = p.cmd(&["INFO", "clients"]);
    assert!(info.contains("blocked_clients:3\r\n"), "{info}");
    assert!(info.contains("clients_in_timeout_table:2\r\n"), "{info}");
    let list = p.cmd(&["CLIENT", "LIST"]);
    assert_eq!(list.matches(" flags=b ").count(), 3, "{list}");
    p.cmd(&["RPUSH", "q1", "a"]);
    assert_eq!(w[0].read(), pair("q1", "a"));
    let info = p.cmd(&["INFO", "clients"]);
    assert!(info.contains("blocked_clients:2\r\n"), "{info}");
}

#[test]
fn timeout_reply_then_connection_still_usable() {
    let srv = Server::start();
    let mut c = srv.raw();
    let t = Instant::now();
    assert_eq!(c.cmd(&["BLPOP", "none", "0.2"]), "*-1\r\n");
    assert!(
        t.elapsed() >= Duration::from_millis(190),
        "{:?}",
        t.elapsed()
    );
    assert_eq!(c.cmd(&["BRPOPLPUSH", "none", "dst", "0.05"]), "*-1\r\n");
    assert_eq!(
        c.cmd(&["BLMOVE", "none", "dst", "LEFT", "RIGHT", "0.05"]),
        "*-1\r\n"
    );
    assert_eq!(c.cmd(&["BLMPOP", "0.05", "2", "a", "b", "LEFT"]), "*-1\r\n");
    assert_eq!(c.cmd(&["PING"]), "+PONG\r\n");
    assert_eq!(c.cmd(&["RPUSH", "l", "v"]), ":1\r\n");
    assert_eq!(c.cmd(&["BLPOP", "l", "0.1"]), pair("l", "v"));
    // RESP3: the timeout reply is the null type.
    c.cmd(&["HELLO", "3"]);
    assert_eq!(c.cmd(&["BRPOP", "none", "0.05"]), "_\r\n");
    assert_eq!(c.cmd(&["PING"]), "+PONG\r\n");

    // A real client library sees nil and carries on.
    let mut r = srv.redis();
    let got: Option<(String, String)> = redis::cmd("BLPOP")
        .arg("none")
        .arg(0.05)
        .query(&mut r)
        .unwrap();
    assert_eq!(got, None);
    let _: () = redis::cmd("RPUSH").arg("l").arg("w").query(&mut r).unwrap();
    let got: Option<(String, String)> = redis::cmd("BLPOP").arg("l").arg(1).query(&mut r).unwrap();
    assert_eq!(got, Some(("l".into(), "w".into())));
}

#[test]
fn blmove_push_wakes_a_client_blocked_on_the_destination() {
    let srv = Server::start();
    let mut mover = srv.raw();
    let mut end = srv.raw();
    let mut p = srv.raw();
    mover.send(&["BLMOVE", "a", "b", "RIGHT", "LEFT", "0"]);
    std::thread::sleep(SETTLE);
    end.send(&["BLPOP", "b", "0"]);
    std::thread::sleep(SETTLE);
    assert_eq!(p.cmd(&["RPUSH", "a", "x"]), ":1\r\n");
    assert_eq!(mover.read(), bulk("x"));
    assert_eq!(end.read(), pair("b", "x"));
    assert_eq!(p.cmd(&["EXISTS", "a", "b"]), ":0\r\n");

    // A longer chain: a -> b -> c, then BRPOPLPUSH c -> d.
    let mut m2 = srv.raw();
    mover.send(&["BLMOVE", "a", "b", "LEFT", "RIGHT", "0"]);
    std::thread::sleep(SETTLE);
    m2.send(&["BLMOVE", "b", "c", "LEFT", "RIGHT", "0"]);
    std::thread::sleep(SETTLE);
    end.send(&["BRPOPLPUSH", "c", "d", "0"]);
    std::thread::sleep(SETTLE);
    assert_eq!(p.cmd(&["LPUSH", "a", "y"]), ":1\r\n");
    assert_eq!(mover.read(), bulk("y"));
    assert_eq!(m2.read(), bulk("y"));
    assert_eq!(end.read(), bulk("y"));
    assert_eq!(p.cmd(&["LRANGE", "d", "0", "-1"]), "*1\r\n$1\r\ny\r\n");
    assert_eq!(p.cmd(&["EXISTS", "a", "b", "c"]), ":0\r\n");

    // A blocked BLMOVE whose destination turned into another type gets
    // WRONGTYPE when served, and the element stays in the source.
    mover.send(&["BLMOVE", "a", "s", "LEFT", "LEFT", "0"]);
    std::thread::sleep(SETTLE);
    assert_eq!(p.cmd(&["SET", "s", "str"]), "+OK\r\n");
    assert_eq!(p.cmd(&["RPUSH", "a", "z"]), ":1\r\n");
    assert_eq!(
        mover.read(),
        "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"
    );
    assert_eq!(p.cmd(&["LRANGE", "a", "0", "-1"]), "*1\r\n$1\r\nz\r\n");
}

#[test]
fn waiter_killed_mid_wait_loses_nothing() {
    let srv = Server::start();
    let mut p = srv.raw();
    let mut dead = srv.raw();
    let mut alive = srv.raw();
    dead.send(&["BLPOP", "k", "0"]);
    std::thread::sleep(SETTLE);
    alive.send(&["BLPOP", "k", "0"]);
    std::thread::sleep(SETTLE);
    dead.w.shutdown(Shutdown::Both).unwrap();
    drop(dead);
    std::thread::sleep(SETTLE);
    assert_eq!(p.cmd(&["RPUSH", "k", "v1"]), ":1\r\n");
    assert_eq!(alive.read(), pair("k", "v1"));

    // The only waiter gone: the element stays in the list.
    let mut dead = srv.raw();
    dead.send(&["BLMPOP", "0", "1", "k", "LEFT", "COUNT", "5"]);
    std::thread::sleep(SETTLE);
    drop(dead);
    std::thread::sleep(SETTLE);
    assert_eq!(p.cmd(&["RPUSH", "k", "v2"]), ":1\r\n");
    assert_eq!(p.cmd(&["LRANGE", "k", "0", "-1"]), "*1\r\n$2\r\nv2\r\n");

    // Killed by CLIENT KILL's path is covered by the connection closing;
    // the server keeps serving new waiters on the same key.
    let mut next = srv.raw();
    assert_eq!(next.cmd(&["BLPOP", "k", "0"]), pair("k", "v2"));
}

#[test]
fn pipelined_commands_after_a_blocking_command_run_after_it_is_served() {
    let srv = Server::start();
    let mut c = srv.raw();
    let mut p = srv.raw();
    let mut batch = encode(&["BLPOP", "k", "0"]);
    batch.extend(encode(&["RPUSH", "after", "1"]));
    batch.extend(encode(&["PING"]));
    batch.extend(encode(&["LLEN", "k"]));
    c.w.write_all(&batch).unwrap();
    std::thread::sleep(SETTLE);
    assert!(c.silent_for(Duration::from_millis(100)));
    // The commands after BLPOP have not run yet.
    assert_eq!(p.cmd(&["EXISTS", "after"]), ":0\r\n");
    assert_eq!(p.cmd(&["RPUSH", "k", "a", "b"]), ":2\r\n");
    assert_eq!(c.read(), pair("k", "a"));
    assert_eq!(c.read(), ":1\r\n");
    assert_eq!(c.read(), "+PONG\r\n");
    assert_eq!(c.read(), ":1\r\n");

    // Same after a timeout, with commands sent while it waits.
    c.send(&["BRPOP", "none", "0.2"]);
    std::thread::sleep(Duration::from_millis(50));
    c.send(&["LPOP", "k"]);
    assert_eq!(c.read(), "*-1\r\n");
    assert_eq!(c.read(), bulk("b"));
}

#[test]
fn priority_queue_served_from_the_first_non_empty_key() {
    let srv = Server::start();
    let mut p = srv.raw();
    let mut w = srv.raw();
    p.cmd(&["RPUSH", "queue:low", "l1", "l2"]);
    p.cmd(&["RPUSH", "queue:mid", "m1"]);
    let cmd = ["BLPOP", "queue:high", "queue:mid", "queue:low", "0"];
    assert_eq!(w.cmd(&cmd), pair("queue:mid", "m1"));
    assert_eq!(w.cmd(&cmd), pair("queue:low", "l1"));
    p.cmd(&["RPUSH", "queue:high", "h1"]);
    assert_eq!(w.cmd(&cmd), pair("queue:high", "h1"));
    assert_eq!(w.cmd(&cmd), pair("queue:low", "l2"));
    // Nothing left: it waits, and any of the keys wakes it.
    w.send(&cmd);
    std::thread::sleep(SETTLE);
    p.cmd(&["LPUSH", "queue:low", "late"]);
    assert_eq!(w.read(), pair("queue:low", "late"));
    // A wrong-typed key before a non-empty one is an error, after it is not.
    p.cmd(&["SET", "queue:high", "x"]);
    p.cmd(&["RPUSH", "queue:mid", "m2"]);
    assert_eq!(
        w.cmd(&cmd),
        "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"
    );
    assert_eq!(
        w.cmd(&["BLPOP", "queue:mid", "queue:high", "0"]),
        pair("queue:mid", "m2")
    );
}

#[test]
fn blmpop_served_with_its_count() {
    let srv = Server::start();
    let mut p = srv.raw();
    let mut w = srv.raw();
    w.send(&["BLMPOP", "0", "2", "x", "y", "RIGHT", "COUNT", "2"]);
    std::thread::sleep(SETTLE);
    p.cmd(&["RPUSH", "y", "1", "2", "3"]);
    assert_eq!(w.read(), "*2\r\n$1\r\ny\r\n*2\r\n$1\r\n3\r\n$1\r\n2\r\n");
    assert_eq!(p.cmd(&["LRANGE", "y", "0", "-1"]), "*1\r\n$1\r\n1\r\n");
}

/// CLIENT UNBLOCK ends a wait as its timeout would (the default and
/// TIMEOUT) or with an -UNBLOCKED error; 0 for a client that is not
/// blocked. Replies checked against redis-server 7.0.15.
#[test]
fn client_unblock_ends_a_wait() {
    let srv = Server::start();
    let mut w = srv.raw();
    let id = w.cmd(&["CLIENT", "ID"]);
    let id = id.trim_start_matches(':').trim_end().to_string();
    let mut p = srv.raw();
    for (how, reply) in [
        (None, "*-1\r\n".to_string()),
        (Some("TIMEOUT"), "*-1\r\n".to_string()),
        (
            Some("ERROR"),
            "-UNBLOCKED client unblocked via CLIENT UNBLOCK\r\n".to_string(),
        ),
    ] {
        w.send(&["BLPOP", "l", "0"]);
        std::thread::sleep(SETTLE);
        let mut args = vec!["CLIENT", "UNBLOCK", id.as_str()];
        args.extend(how);
        assert_eq!(p.cmd(&args), ":1\r\n");
        assert_eq!(w.read(), reply);
    }
    assert_eq!(p.cmd(&["CLIENT", "UNBLOCK", id.as_str()]), ":0\r\n");
    assert_eq!(p.cmd(&["CLIENT", "UNBLOCK", "12345"]), ":0\r\n");
    assert_eq!(
        p.cmd(&["CLIENT", "UNBLOCK", "asd"]),
        "-ERR value is not an integer or out of range\r\n"
    );
    assert_eq!(
        p.cmd(&["CLIENT", "UNBLOCK", id.as_str(), "FOO"]),
        "-ERR CLIENT UNBLOCK reason should be TIMEOUT or ERROR\r\n"
    );
    // The wait is gone: a push later is not taken by it.
    w.send(&["BLPOP", "l", "0"]);
    std::thread::sleep(SETTLE);
    assert_eq!(p.cmd(&["RPUSH", "l", "foo"]), ":1\r\n");
    assert_eq!(w.read(), pair("l", "foo"));
    assert_eq!(p.cmd(&["EXISTS", "l"]), ":0\r\n");
}
