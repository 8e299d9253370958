//! CLIENT PAUSE WRITE as Redis 7.0.15 applies it: what waits (writes,
//! scripts not declared `no-writes`, an EXEC holding a write), what does
//! not, that waiting clients count as blocked in INFO, and that a paused
//! replica holds its master's stream back.

use cinnabar_tests::RespFrame as Frame;
use cinnabar_tests::*;
use std::thread;
use std::time::{Duration, Instant};

fn blocked_clients(c: &mut RawClient) -> i64 {
    let info = text(&c.cmd(&["INFO", "clients"]));
    info.lines()
        .find_map(|l| l.strip_prefix("blocked_clients:"))
        .expect("blocked_clients")
        .trim()
        .parse()
        .unwrap()
}

fn wait_blocked(c: &mut RawClient, n: i64) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while blocked_clients(c) != n {
        assert!(Instant::now() < deadline, "never {n} blocked clients");
        thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn pause_write_holds_back_what_may_write() {
    let s = Server::start(&[]);
    let mut r = s.raw();
    let mut tx = s.raw();
    assert_eq!(tx.cmd(&["MULTI"]), ok());
    assert_eq!(tx.cmd(&["SET", "foo", "bar"]), simple("QUEUED"));
    let ro_lib = "#!lua name=lib\nredis.register_function{function_name='ro', callback=function() return 'hi' end, flags={'no-writes'}}";
    assert_eq!(r.cmd(&["FUNCTION", "LOAD", ro_lib]), bulk("lib"));
    assert_eq!(r.cmd(&["CLIENT", "PAUSE", "60000", "WRITE"]), ok());

    // Not held back: reads, read-only scripts and functions.
    let mut q = s.raw();
    assert_eq!(q.cmd(&["GET", "foo"]), nil());
    assert_eq!(q.cmd(&["EVAL_RO", "return 1", "0"]), int(1));
    assert_eq!(
        q.cmd(&["EVAL", "#!lua flags=no-writes\nreturn 2", "0"]),
        int(2)
    );
    assert_eq!(q.cmd(&["FCALL", "ro", "0"]), bulk("hi"));
    // A read-only script may not publish either.
    match q.cmd(&["EVAL_RO", "return redis.call('publish','ch','m')", "0"]) {
        Frame::Error(e) => assert!(
            e.starts_with(b"ERR Write commands are not allowed from read-only scripts."),
            "{}",
            String::from_utf8_lossy(&e)
        ),
        f => panic!("{f:?}"),
    }

    // A malformed write is refused at once.
    assert_eq!(
        q.cmd(&["SET", "FOO"]),
        err("ERR wrong number of arguments for 'set' command")
    );

    // Held back: a write, scripts that may write, an EXEC holding a write.
    let mut w = s.raw();
    w.send_cmd(&["SET", "a", "1"]);
    let mut e1 = s.raw();
    e1.send_cmd(&["EVAL", "return 1", "0"]);
    let mut e2 = s.raw();
    e2.send_cmd(&["EVAL", "#!lua\nreturn 2", "0"]);
    tx.send_cmd(&["EXEC"]);
    wait_blocked(&mut r, 4);
    w.expect_silence(Duration::from_millis(50));
    assert_eq!(r.cmd(&["CLIENT", "UNPAUSE"]), ok());
    assert_eq!(w.read(), ok());
    assert_eq!(e1.read(), int(1));
    assert_eq!(e2.read(), int(2));
    assert_eq!(tx.read(), Frame::Array(vec![ok()]));
    assert_eq!(blocked_clients(&mut r), 0);
}

#[test]
fn pause_keeps_expired_keys_until_unpause() {
    let s = Server::start(&[]);
    let mut r = s.raw();
    let expired = |r: &mut RawClient| -> i64 {
        let info = text(&r.cmd(&["INFO", "stats"]));
        info.lines()
            .find_map(|l| l.strip_prefix("expired_keys:"))
            .unwrap()
            .trim()
            .parse()
            .unwrap()
    };
    assert_eq!(r.cmd(&["SET", "foo", "bar", "PX", "10"]), ok());
    assert_eq!(r.cmd(&["CLIENT", "PAUSE", "50000", "WRITE"]), ok());
    thread::sleep(Duration::from_millis(300));
    // Logically gone, yet neither the cron nor the read deletes it.
    assert_eq!(r.cmd(&["GET", "foo"]), nil());
    assert_eq!(r.cmd(&["EXISTS", "foo"]), int(0));
    assert_eq!(r.cmd(&["TTL", "foo"]), int(-2));
    assert_eq!(r.cmd(&["DBSIZE"]), int(1));
    assert_eq!(expired(&mut r), 0);
    assert_eq!(r.cmd(&["CLIENT", "UNPAUSE"]), ok());
    assert_eq!(r.cmd(&["GET", "foo"]), nil());
    assert_eq!(r.cmd(&["DBSIZE"]), int(0));
    assert_eq!(expired(&mut r), 1);
}

/// `field` of INFO replication ("" before a `replicaof` has taken effect).
fn repl_field(c: &mut RawClient, field: &str) -> String {
    info_field(c, "replication", field)
}

fn wait_field(c: &mut RawClient, field: &str, want: &str) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while repl_field(c, field) != want {
        assert!(Instant::now() < deadline, "{field} never {want}");
        thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_paused_replica_reads_but_does_not_apply_its_masters_writes() {
    let m = Server::start(&[]);
    let s = Server::start(&[("replicaof", &format!("127.0.0.1 {}", m.port))]);
    let (mut mc, mut sc) = (m.raw(), s.raw());
    wait_field(&mut sc, "master_link_status", "up");
    assert_eq!(mc.cmd(&["SET", "foo", "bar"]), ok());
    let applied = repl_field(&mut mc, "master_repl_offset");
    wait_field(&mut sc, "slave_repl_offset", &applied);

    assert_eq!(sc.cmd(&["CLIENT", "PAUSE", "100000", "WRITE"]), ok());
    assert_eq!(mc.cmd(&["SET", "foo2", "bar2"]), ok());
    assert_eq!(mc.cmd(&["SET", "foo3", "bar3"]), ok());
    let sent = repl_field(&mut mc, "master_repl_offset");
    wait_field(&mut sc, "slave_read_repl_offset", &sent);
    assert_eq!(repl_field(&mut sc, "slave_repl_offset"), applied);
    assert_eq!(repl_field(&mut sc, "master_repl_offset"), applied);
    assert_eq!(sc.cmd(&["GET", "foo2"]), nil());
    // The master's client waits as a paused client does.
    assert_eq!(blocked_clients(&mut sc), 1);
    let list = text(&sc.cmd(&["CLIENT", "LIST"]));
    assert!(list.contains("flags=Mb "), "{list}");

    assert_eq!(sc.cmd(&["CLIENT", "UNPAUSE"]), ok());
    wait_field(&mut sc, "slave_repl_offset", &sent);
    assert_eq!(sc.cmd(&["GET", "foo3"]), bulk("bar3"));
    assert_eq!(blocked_clients(&mut sc), 0);
}
