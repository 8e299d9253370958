//! MONITOR's view as Redis 7.0.15 gives it: a script runner before the
//! commands of its script (shown from `lua`), EXEC after the commands it
//! ran, passwords of AUTH and HELLO redacted. Also the slowlog of a
//! blocked command and LATENCY HISTOGRAM of a container command.

use cinnabar_tests::RespFrame as Frame;
use cinnabar_tests::*;
use std::time::{Duration, Instant};

/// The next monitor line without its timestamp and client address.
fn line(m: &mut RawClient) -> String {
    let l = text(&m.read());
    let (_, rest) = l.split_once(" [").expect("timestamp");
    let (db_addr, args) = rest.split_once("] ").expect("address");
    let db = db_addr.split(' ').next().unwrap();
    let from = if db_addr.ends_with(" lua") {
        "lua"
    } else {
        "client"
    };
    format!("{db} {from} {args}")
}

#[test]
fn monitor_order_and_redaction() {
    let s = Server::start(&[]);
    let mut m = s.raw();
    assert_eq!(m.cmd(&["MONITOR"]), ok());
    let mut c = s.raw();
    c.cmd(&[
        "EVAL",
        "redis.call('set',KEYS[1],ARGV[1])",
        "1",
        "foo",
        "bar",
    ]);
    assert_eq!(c.cmd(&["MULTI"]), ok());
    assert_eq!(c.cmd(&["SET", "foo", "bar"]), simple("QUEUED"));
    c.cmd(&["EXEC"]);
    c.cmd(&["AUTH", "a", "b"]);
    c.cmd(&["HELLO", "2", "SETNAME", "x", "AUTH", "u", "p"]);
    let port = free_port().to_string();
    c.cmd(&["MIGRATE", "127.0.0.1", &port, "k", "9", "5000", "AUTH", "p"]);
    let auth2 = ["AUTH2", "u", "p", "KEYS", "AUTH"];
    c.cmd(
        &[
            &["MIGRATE", "127.0.0.1", &port, "", "9", "5000"][..],
            &auth2,
        ]
        .concat(),
    );
    for want in [
        r#"0 client "EVAL" "redis.call('set',KEYS[1],ARGV[1])" "1" "foo" "bar""#,
        r#"0 lua "set" "foo" "bar""#,
        r#"0 client "MULTI""#,
        r#"0 client "SET" "foo" "bar""#,
        r#"0 client "EXEC""#,
        r#"0 client "AUTH" "(redacted)" "(redacted)""#,
        r#"0 client "HELLO" "2" "SETNAME" "x" "AUTH" "(redacted)" "(redacted)""#,
        &format!(r#"0 client "MIGRATE" "127.0.0.1" "{port}" "k" "9" "5000" "AUTH" "(redacted)""#),
        &format!(
            r#"0 client "MIGRATE" "127.0.0.1" "{port}" "" "9" "5000" "AUTH2" "(redacted)" "(redacted)" "KEYS" "AUTH""#
        ),
    ] {
        assert_eq!(line(&mut m), want);
    }
}

/// The slowlog hides the same arguments as MONITOR.
#[test]
fn slowlog_redacts_passwords() {
    let s = Server::start(&[]);
    let mut c = s.raw();
    assert_eq!(
        c.cmd(&["CONFIG", "SET", "slowlog-log-slower-than", "0"]),
        ok()
    );
    c.cmd(&[
        "MIGRATE",
        "127.0.0.1",
        "1",
        "k",
        "9",
        "5000",
        "AUTH2",
        "u",
        "p",
    ]);
    let Frame::Array(log) = c.cmd(&["SLOWLOG", "GET", "1"]) else {
        panic!("SLOWLOG GET")
    };
    let Frame::Array(entry) = &log[0] else {
        panic!("entry")
    };
    let want = [
        "MIGRATE",
        "127.0.0.1",
        "1",
        "k",
        "9",
        "5000",
        "AUTH2",
        "(redacted)",
        "(redacted)",
    ];
    assert_eq!(entry[3], Frame::Array(want.iter().map(bulk).collect()));
}

/// A blocked command is logged once served, with its own arguments.
#[test]
fn slowlog_logs_a_blocked_command_when_served() {
    let s = Server::start(&[]);
    let mut r = s.raw();
    let mut b = s.raw();
    assert_eq!(
        r.cmd(&["CONFIG", "SET", "slowlog-log-slower-than", "0"]),
        ok()
    );
    b.send_cmd(&["BLPOP", "l", "0"]);
    let deadline = Instant::now() + Duration::from_secs(5);
    while !text(&r.cmd(&["INFO", "clients"])).contains("blocked_clients:1") {
        assert!(Instant::now() < deadline, "BLPOP never blocked");
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(r.cmd(&["MULTI"]), ok());
    assert_eq!(r.cmd(&["LPUSH", "l", "foo"]), simple("QUEUED"));
    assert_eq!(r.cmd(&["SLOWLOG", "RESET"]), simple("QUEUED"));
    r.cmd(&["EXEC"]);
    assert_eq!(b.read(), Frame::Array(vec![bulk("l"), bulk("foo")]));
    let Frame::Array(log) = r.cmd(&["SLOWLOG", "GET"]) else {
        panic!("SLOWLOG GET")
    };
    let Frame::Array(entry) = &log[0] else {
        panic!("entry")
    };
    assert_eq!(
        entry[3],
        Frame::Array(vec![bulk("BLPOP"), bulk("l"), bulk("0")])
    );
}

/// LATENCY HISTOGRAM of a container command lists its subcommands.
#[test]
fn latency_histogram_of_a_container_command() {
    let s = Server::start(&[]);
    let mut r = s.raw();
    assert_eq!(r.cmd(&["CONFIG", "RESETSTAT"]), ok());
    r.cmd(&["CLIENT", "ID"]);
    r.cmd(&["CLIENT", "LIST"]);
    let names = |f: Frame| -> Vec<String> {
        let Frame::Array(kv) = f else { panic!("{f:?}") };
        let mut n: Vec<String> = kv.iter().step_by(2).map(text).collect();
        n.sort();
        n
    };
    assert_eq!(
        names(r.cmd(&["LATENCY", "HISTOGRAM", "client"])),
        ["client|id", "client|list"]
    );
    assert_eq!(
        names(r.cmd(&["LATENCY", "HISTOGRAM", "client|id", "cli"])),
        ["client|id"]
    );
}
