//! `client-output-buffer-limit` for normal clients: a client whose replies
//! pile up past its limit is closed with nothing more sent, the rest of its
//! pipeline does not run, a transaction still runs whole, and commands with
//! unbounded replies stop early instead of building them.
//!
//! Every expectation was checked against Redis 7.0.15; run
//! `CINNABAR_BIN=$(command -v redis-server) cargo test -p cinnabar-tests
//! --test obuf` to check them again.

use cinnabar_tests::{bulk, int, ok, simple, text, RawClient, Server};
use std::time::{Duration, Instant};

fn connected(c: &mut RawClient, name: &str) -> bool {
    text(&c.cmd(&["CLIENT", "LIST"])).contains(&format!(" name={name} "))
}

fn rss_kb(pid: u32) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = s.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

#[test]
fn pipeline_past_the_hard_limit_gets_no_reply_and_stops() {
    let s = Server::start(&[("client-output-buffer-limit", "normal 100000 0 0")]);
    let mut r = s.raw();
    assert_eq!(r.cmd(&["SET", "bigkey", &"x".repeat(10_000)]), ok());
    let mut c = s.raw();
    assert_eq!(c.cmd(&["CLIENT", "SETNAME", "piped"]), ok());
    let mut buf = Vec::new();
    for i in 0..15 {
        buf.extend(cinnabar_tests::encode(&["SET", &format!("k{i}"), "v"]));
        buf.extend(cinnabar_tests::encode(&["GET", "bigkey"]));
    }
    buf.extend(cinnabar_tests::encode(&["SET", "after", "1"]));
    c.send(&buf);
    c.expect_closed();
    assert!(!connected(&mut r, "piped"));
    // The limit was crossed at the 10th GET: what follows never ran.
    assert_eq!(
        r.cmd(&["EXISTS", "k0", "k9", "k10", "k14", "after"]),
        int(2)
    );
}

#[test]
fn transaction_runs_whole_though_its_reply_is_over_the_limit() {
    let s = Server::start(&[("client-output-buffer-limit", "normal 100000 0 0")]);
    let mut r = s.raw();
    let item = "x".repeat(1000);
    for _ in 0..150 {
        r.cmd(&["LPUSH", "mylist", &item]);
    }
    let mut c = s.raw();
    assert_eq!(c.cmd(&["SET", "k1", "v1"]), ok());
    assert_eq!(c.cmd(&["MULTI"]), ok());
    for cmd in [
        &["SET", "k2", "v2"][..],
        &["GET", "k2"],
        &["LRANGE", "mylist", "0", "-1"],
        &["SET", "k3", "v3"],
        &["DEL", "k1"],
    ] {
        assert_eq!(c.cmd(cmd), simple("QUEUED"));
    }
    c.send_cmd(&["EXEC"]);
    c.expect_closed();
    assert_eq!(r.cmd(&["MGET", "k1", "k2", "k3"]).clone(), {
        cinnabar_tests::RespFrame::Array(vec![cinnabar_tests::nil(), bulk("v2"), bulk("v3")])
    });
}

/// A reply of a billion random fields would take the server's memory; with
/// a limit it stops as soon as the limit is reached.
#[test]
fn unbounded_random_replies_stop_at_the_limit() {
    let s = Server::start(&[("client-output-buffer-limit", "normal 1000000 0 0")]);
    let mut r = s.raw();
    r.cmd(&["HSET", "h", "a", "b"]);
    r.cmd(&["SADD", "s", "a"]);
    r.cmd(&["ZADD", "z", "1", "a"]);
    for cmd in [
        &["HRANDFIELD", "h", "-999999999"][..],
        &["HRANDFIELD", "h", "-999999999", "WITHVALUES"],
        &["SRANDMEMBER", "s", "-999999999"],
        &["ZRANDMEMBER", "z", "-999999999"],
    ] {
        let mut c = s.raw();
        let t = Instant::now();
        c.send_cmd(cmd);
        c.expect_closed();
        assert!(t.elapsed() < Duration::from_secs(5), "{cmd:?}");
    }
    assert_eq!(r.cmd(&["PING"]), simple("PONG"));
}

/// The case that first showed the gap: 2,048 GETs of 64 KiB (128 MB of
/// replies) from a client that never reads. It is dropped, and the memory
/// its replies took goes back to the OS.
#[test]
fn reader_that_never_reads_is_dropped_and_its_memory_returned() {
    let s = Server::start(&[("client-output-buffer-limit", "normal 16mb 8mb 5")]);
    let mut r = s.raw();
    assert_eq!(r.cmd(&["SET", "big", &"x".repeat(64 * 1024)]), ok());
    let before = rss_kb(s.pid());
    let mut c = s.raw();
    assert_eq!(c.cmd(&["CLIENT", "SETNAME", "hog"]), ok());
    let mut buf = Vec::new();
    for _ in 0..2048 {
        buf.extend(cinnabar_tests::encode(&["GET", "big"]));
    }
    c.send(&buf);
    let t = Instant::now();
    while connected(&mut r, "hog") {
        assert!(t.elapsed() < Duration::from_secs(5), "still connected");
        std::thread::sleep(Duration::from_millis(50));
    }
    let t = Instant::now();
    while rss_kb(s.pid()) > before + 16 * 1024 {
        assert!(
            t.elapsed() < Duration::from_secs(15),
            "resident memory {} kB, was {before} kB",
            rss_kb(s.pid())
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}
