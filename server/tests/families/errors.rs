//! Type errors, bad numbers and bad arity across the families; every reply
//! checked with redis-server 7.0.15.

use cinnabar_server::testkit::*;

#[test]
fn wrong_type_in_every_direction() {
    let mut h = Harness::new();
    h.run(&["SET", "str", "10"]);
    for cmd in [
        &["LPUSH", "str", "a"][..],
        &["HGET", "str", "f"],
        &["SADD", "str", "m"],
        &["ZADD", "str", "1", "m"],
    ] {
        assert_eq!(h.run(cmd), err(WRONGTYPE), "{cmd:?}");
    }
    // Bitmaps are strings.
    assert_eq!(h.run(&["GETBIT", "str", "0"]), int(0));
    assert_eq!(h.run(&["SETBIT", "str", "0", "1"]), int(0));
    h.run(&["LPUSH", "l", "a"]);
    for cmd in [
        &["GET", "l"][..],
        &["INCR", "l"],
        &["APPEND", "l", "x"],
        &["SETRANGE", "l", "0", "x"],
        &["HSET", "l", "f", "v"],
        &["SCARD", "l"],
        &["ZCARD", "l"],
        &["BITCOUNT", "l"],
    ] {
        assert_eq!(h.run(cmd), err(WRONGTYPE), "{cmd:?}");
    }
    // Nothing was changed by the failed commands.
    assert_eq!(h.run(&["OBJECT", "ENCODING", "l"]), bulk("quicklist"));
    assert_eq!(h.run(&["TYPE", "l"]), simple("list"));
    assert_eq!(h.run(&["TYPE", "str"]), simple("string"));
    assert_eq!(h.run(&["TYPE", "nokey"]), simple("none"));
}

#[test]
fn bad_numbers_and_options() {
    let mut h = Harness::new();
    h.run(&["SET", "str", "10"]);
    h.run(&["LPUSH", "l", "a"]);
    let not_int = "ERR value is not an integer or out of range";
    let not_float = "ERR value is not a valid float";
    let cases: &[(&[&str], &str)] = &[
        (&["INCRBY", "str", "abc"], not_int),
        (&["INCRBYFLOAT", "str", "nan"], not_float),
        (&["EXPIRE", "str", "abc"], not_int),
        (
            &["SETBIT", "str", "4294967296", "1"],
            "ERR bit offset is not an integer or out of range",
        ),
        (
            &["SETBIT", "str", "0", "2"],
            "ERR bit is not an integer or out of range",
        ),
        (&["LRANGE", "l", "a", "1"], not_int),
        (&["LINDEX", "l", "x"], not_int),
        (&["SRANDMEMBER", "s", "-x"], not_int),
        (&["GETRANGE", "str", "a", "1"], not_int),
        (&["ZADD", "z", "x", "m"], not_float),
        (
            &["ZADD", "z", "NX", "XX", "1", "m"],
            "ERR XX and NX options at the same time are not compatible",
        ),
        (&["HINCRBY", "h", "f", "1.5"], not_int),
        (&["HINCRBYFLOAT", "h", "f", "x"], not_float),
        (
            &["SET", "k", "v", "EX", "0"],
            "ERR invalid expire time in 'set' command",
        ),
        (
            &["SET", "k", "v", "EX", "-1"],
            "ERR invalid expire time in 'set' command",
        ),
        (&["SET", "k", "v", "EX", "abc"], not_int),
        (
            &["SET", "k", "v", "PX", "9223372036854775807"],
            "ERR invalid expire time in 'set' command",
        ),
        (
            &["EXPIRE", "str", "9223372036854775807"],
            "ERR invalid expire time in 'expire' command",
        ),
        (&["RENAME", "nokey", "x"], "ERR no such key"),
        (&["LSET", "l", "5", "x"], "ERR index out of range"),
        (&["LSET", "nolist", "0", "x"], "ERR no such key"),
    ];
    for (cmd, e) in cases {
        assert_eq!(h.run(cmd), err(e), "{cmd:?}");
    }
    // A member named "nan" is fine.
    assert_eq!(h.run(&["ZINCRBY", "z", "1", "nan"]), bulk("1"));
    assert_eq!(h.run(&["DBSIZE"]), int(3));
}

#[test]
fn arity_and_unknown_commands() {
    let mut h = Harness::new();
    for (cmd, name) in [
        (&["GET"][..], "get"),
        (&["SET", "k"], "set"),
        (&["ZADD", "z", "1"], "zadd"),
        (&["HSET", "h", "f"], "hset"),
    ] {
        let e = format!("ERR wrong number of arguments for '{name}' command");
        assert_eq!(h.run(cmd), err(&e));
    }
    assert_eq!(
        h.run(&["FOO", "bar"]),
        err("ERR unknown command 'FOO', with args beginning with: 'bar' ")
    );
}

/// Found by the differential test: Redis answers a reversed negative range
/// before it reads the unit.
#[test]
fn bitcount_reversed_negative_range_ignores_the_unit() {
    let mut h = Harness::new();
    h.run(&["SET", "bk", "abcdef"]);
    assert_eq!(h.run(&["BITCOUNT", "bk", "-1", "-4", "foo"]), int(0));
    assert_eq!(h.run(&["BITCOUNT", "bk", "-1", "-4", "BIT"]), int(0));
    assert_eq!(
        h.run(&["BITCOUNT", "bk", "3", "1", "foo"]),
        err("ERR syntax error")
    );
    assert_eq!(
        h.run(&["BITPOS", "bk", "1", "-1", "-4", "foo"]),
        err("ERR syntax error")
    );
}
