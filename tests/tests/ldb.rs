//! The Lua debugger (SCRIPT DEBUG SYNC, `redis-cli --ldb-sync-mode`): the
//! sessions of `tests/golden/ldb.txt`, replies recorded from Redis 7.0.15
//! (step, list, print, eval, redis, break, abort, maxlen, the protocol
//! parsing and stack overflow cases), then hostile clients: oversized and
//! malformed debugger input, and clients that leave mid-session. The server
//! must end each session as Redis does and never stay blocked.

use cinnabar_tests::golden::{compare, parse_script, render_mismatches, run_script};
use cinnabar_tests::RespFrame as Frame;
use cinnabar_tests::*;
use std::time::{Duration, Instant};

#[test]
fn sessions_match_redis() {
    let path = workspace_root().join("tests/golden/ldb.txt");
    let script = parse_script(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let expected = std::fs::read_to_string(path.with_extension("expected")).unwrap();
    let got = run_script(&server_bin(), &script);
    let (total, bad) = compare(&expected, &got);
    assert!(
        bad.is_empty(),
        "{} of {total} replies differ:\n{}",
        bad.len(),
        render_mismatches("ldb", &bad, 20)
    );
}

/// Starts a debugging session of `script` on a new connection; the first
/// stop's logs are checked.
fn session(s: &Server, script: &str) -> RawClient {
    let mut c = s.raw();
    assert_eq!(c.cmd(&["SCRIPT", "DEBUG", "SYNC"]), ok());
    match c.cmd(&["EVAL", script, "0"]) {
        Frame::Array(v) => assert_eq!(
            v.first(),
            Some(&simple("* Stopped at 1, stop reason = step over"))
        ),
        other => panic!("no session: {other:?}"),
    }
    c
}

/// The session ends: `<endsession>`, then `reply` (an error's start), then
/// the connection closes.
fn expect_end(c: &mut RawClient, reply: &str) {
    assert_eq!(c.read(), Frame::Array(vec![simple("<endsession>")]));
    let r = text(&c.read());
    assert!(r.starts_with(reply), "{r}");
    c.expect_closed();
}

fn ping_within(s: &Server, d: Duration) {
    let t = Instant::now();
    let mut c = s.raw();
    c.set_timeout(d);
    assert_eq!(c.cmd(&["PING"]), simple("PONG"));
    assert!(t.elapsed() < d);
}

#[test]
fn stack_overflow_case_answers_and_server_stays_up() {
    let s = Server::start(&[]);
    let mut c = session(&s, "return 'hello'");
    let mut cmd = b"*101\r\n$5\r\nredis\r\n".to_vec();
    cmd.extend(b"$4\r\ntest\r\n".repeat(100));
    c.send(&cmd);
    assert_eq!(
        c.read(),
        Frame::Array(vec![
            simple("<redis> test test test test test test test test test test ... (89 more)"),
            simple("<error> Unknown Redis command called from script"),
        ])
    );
    drop(c);
    ping_within(&s, Duration::from_secs(5));
}

#[test]
fn oversized_and_malformed_input_end_the_session() {
    let s = Server::start(&[]);
    // An argument over 1024 bytes (a huge `eval`), more than 1024
    // arguments, an empty or negative length, no multibulk at all: a
    // protocol error fails the script.
    let long = format!("e {}", "x".repeat(5000));
    let cases: Vec<Vec<u8>> = vec![
        encode(&["eval", &long]),
        [b"*1025\r\n".to_vec(), b"$1\r\nl\r\n".repeat(1025)].concat(),
        b"*1\r\n$0\r\n\r\n".to_vec(),
        b"*1\r\n$-1\r\n".to_vec(),
        b"*0\r\n".to_vec(),
        b"garbage with no multibulk\r\n".to_vec(),
        b"*1\r\n$1\r\nlx\r\n".to_vec(),
    ];
    for input in cases {
        let mut c = session(&s, "local a = 1\nreturn a");
        c.send(&input);
        expect_end(&mut c, "ERR protocol error script: ");
    }
    // More than 1 MB without a complete command.
    let mut c = session(&s, "local a = 1\nreturn a");
    let arg = [b"$1024\r\n".to_vec(), vec![b'x'; 1024], b"\r\n".to_vec()].concat();
    c.send(&[b"*1024\r\n".to_vec(), arg.repeat(1024)].concat());
    expect_end(&mut c, "ERR max client buffer reached script: ");
    // Garbage before a command is skipped.
    let mut c = session(&s, "local a = 1\nreturn a");
    c.send(b"noise*1\r\n$1\r\nc\r\n");
    assert_eq!(c.read(), Frame::Array(vec![simple("<endsession>")]));
    assert_eq!(c.read(), int(1));
    ping_within(&s, Duration::from_secs(5));
}

#[test]
fn garbage_commands_keep_the_session() {
    let s = Server::start(&[]);
    let mut c = session(&s, "local a = 1\nreturn a");
    let unknown = Frame::Array(vec![simple(
        "<error> Unknown Redis Lua debugger command or wrong number of arguments.",
    )]);
    for cmd in [&["\x01\x02"][..], &["stepx"], &["r"], &["redis"], &["\0s"]] {
        assert_eq!(c.cmd(cmd), unknown);
    }
    assert_eq!(
        c.cmd(&["p", "a"]),
        Frame::Array(vec![simple("No such variable.")])
    );
    c.send_cmd(&["c"]);
    assert_eq!(c.read(), Frame::Array(vec![simple("<endsession>")]));
    assert_eq!(c.read(), int(1));
    c.expect_closed();
}

#[test]
fn the_server_waits_for_a_sync_session_and_keeps_its_changes() {
    let s = Server::start(&[]);
    let mut c = session(&s, "redis.call('set', 'k', 'v')\nreturn 1");
    let mut other = s.raw();
    other.send_cmd(&["PING"]);
    other.expect_silence(Duration::from_millis(300));
    c.send_cmd(&["c"]);
    assert_eq!(c.read(), Frame::Array(vec![simple("<endsession>")]));
    assert_eq!(c.read(), int(1));
    c.expect_closed();
    assert_eq!(other.read(), simple("PONG"));
    assert_eq!(other.cmd(&["GET", "k"]), bulk("v"));
}

#[test]
fn a_client_leaving_mid_session_frees_the_server() {
    let s = Server::start(&[("busy-reply-threshold", "200")]);
    // Stopped at a line: the script runs to its end without stopping.
    let c = session(&s, "local a = 1\nredis.call('set', 'after', '1')\nreturn a");
    c.shutdown();
    drop(c);
    ping_within(&s, Duration::from_secs(5));
    assert_eq!(s.raw().cmd(&["GET", "after"]), bulk("1"));
    // An endless script whose client left is stopped at the next timeout.
    let mut c = session(&s, "local i = 0\nwhile true do i = i + 1 end");
    c.send_cmd(&["c"]);
    assert_eq!(
        c.read(),
        Frame::Array(vec![
            simple("* Stopped at 2, stop reason = timeout reached, infinite loop?"),
            simple("-> 2   while true do i = i + 1 end"),
        ])
    );
    c.shutdown();
    drop(c);
    ping_within(&s, Duration::from_secs(5));
    // Gone before the first stop's logs are read, in a loop too.
    let mut c = s.raw();
    assert_eq!(c.cmd(&["SCRIPT", "DEBUG", "SYNC"]), ok());
    c.send_cmd(&["EVAL", "while true do end", "0"]);
    c.shutdown();
    drop(c);
    ping_within(&s, Duration::from_secs(5));
}

#[test]
fn script_debug_yes_is_refused_not_run_as_sync() {
    if is_real_redis() {
        return;
    }
    let s = Server::start(&[]);
    let mut c = s.raw();
    let r = text(&c.cmd(&["SCRIPT", "DEBUG", "YES"]));
    assert!(r.starts_with("ERR SCRIPT DEBUG YES"), "{r}");
    // `redis-cli --ldb` ignores that reply: the script it sends next is
    // not run for real either (its changes would not be discarded).
    let r = text(&c.cmd(&["EVAL", "redis.call('set', 'k', 'v')", "0"]));
    assert!(r.starts_with("ERR SCRIPT DEBUG YES"), "{r}");
    assert_eq!(c.cmd(&["EXISTS", "k"]), int(0));
    assert_eq!(c.cmd(&["EVAL", "return 1", "0"]), int(1));
    // SCRIPT DEBUG NO takes it back.
    assert!(text(&c.cmd(&["SCRIPT", "DEBUG", "YES"])).starts_with("ERR"));
    assert_eq!(c.cmd(&["SCRIPT", "DEBUG", "NO"]), ok());
    assert_eq!(c.cmd(&["EVAL", "return 2", "0"]), int(2));
}
