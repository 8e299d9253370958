//! MONITOR's view as Redis 7.0.15 gives it: a script runner before the
//! commands of its script (shown from `lua`), EXEC after the commands it
//! ran, passwords of AUTH and HELLO redacted.

use cinnabar_tests::*;

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
    for want in [
        r#"0 client "EVAL" "redis.call('set',KEYS[1],ARGV[1])" "1" "foo" "bar""#,
        r#"0 lua "set" "foo" "bar""#,
        r#"0 client "MULTI""#,
        r#"0 client "SET" "foo" "bar""#,
        r#"0 client "EXEC""#,
        r#"0 client "AUTH" "(redacted)" "(redacted)""#,
        r#"0 client "HELLO" "2" "SETNAME" "x" "AUTH" "(redacted)" "(redacted)""#,
    ] {
        assert_eq!(line(&mut m), want);
    }
}
