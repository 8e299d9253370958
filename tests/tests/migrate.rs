//! MIGRATE between two servers: moved and copied keys, REPLACE, AUTH and
//! AUTH2, the KEYS form, TTLs, the target's errors, time-outs and the
//! cached connection. The target is a second cinnabar, and also the real
//! Redis when installed.
//!
//! Every expectation was checked against Redis 7.0.15; run
//! `CINNABAR_BIN=$(command -v redis-server) cargo test -p cinnabar-tests
//! --test migrate` to check them again.

use cinnabar_tests::*;
use std::time::Duration;

fn migrate(c: &mut RawClient, port: u16, rest: &[&str]) -> RespFrame {
    let port = port.to_string();
    let mut args = vec!["MIGRATE", "127.0.0.1", &port];
    args.extend_from_slice(rest);
    c.cmd(&args)
}

fn cached(c: &mut RawClient) -> String {
    let info = text(&c.cmd(&["INFO", "stats"]));
    let line = info
        .lines()
        .find(|l| l.starts_with("migrate_cached_sockets:"));
    line.unwrap().to_string()
}

fn targets() -> Vec<Server> {
    let opts = [("requirepass", "foobar")];
    let mut v = vec![Server::start(&opts)];
    if let Some(redis) = tool("redis-server").filter(|_| !is_real_redis()) {
        v.push(Server::start_bin(&redis, &opts));
    }
    v
}

#[test]
fn keys_move_copy_and_replace() {
    let s = Server::start(&[]);
    for t in targets() {
        let mut c = s.raw();
        let mut d = t.raw();
        assert_eq!(d.cmd(&["AUTH", "foobar"]), ok());
        assert_eq!(c.cmd(&["FLUSHALL"]), ok());
        assert_eq!(d.cmd(&["FLUSHALL"]), ok());
        assert_eq!(c.cmd(&["RPUSH", "list", "a", "b", "c"]), int(3));
        assert_eq!(c.cmd(&["SET", "key", "v", "EX", "100"]), ok());
        // Without credentials the target refuses.
        assert_eq!(
            migrate(&mut c, t.port, &["list", "9", "5000", "COPY"]),
            err("ERR Target instance replied with error: NOAUTH Authentication required.")
        );
        assert_eq!(
            migrate(&mut c, t.port, &["list", "9", "5000", "COPY", "AUTH", "wrong"]),
            err("ERR Target instance replied with error: WRONGPASS invalid username-password pair or user is disabled.")
        );
        assert_eq!(
            migrate(
                &mut c,
                t.port,
                &["list", "9", "5000", "COPY", "AUTH", "foobar"]
            ),
            ok()
        );
        assert_eq!(c.cmd(&["EXISTS", "list"]), int(1));
        assert_eq!(
            migrate(
                &mut c,
                t.port,
                &["list", "9", "5000", "COPY", "AUTH", "foobar"]
            ),
            err("ERR Target instance replied with error: BUSYKEY Target key name already exists.")
        );
        let auth2 = ["list", "9", "5000", "REPLACE", "AUTH2", "default", "foobar"];
        assert_eq!(migrate(&mut c, t.port, &auth2), ok());
        assert_eq!(c.cmd(&["EXISTS", "list"]), int(0));
        assert_eq!(d.cmd(&["SELECT", "9"]), ok());
        assert_eq!(
            d.cmd(&["LRANGE", "list", "0", "-1"]),
            RespFrame::Array(vec![bulk("a"), bulk("b"), bulk("c")])
        );
        // The KEYS form moves the keys that exist and keeps the TTL.
        let keys = ["", "9", "5000", "AUTH", "foobar", "KEYS", "nokey", "key"];
        assert_eq!(migrate(&mut c, t.port, &keys), ok());
        let RespFrame::Integer(ttl) = d.cmd(&["PTTL", "key"]) else {
            panic!()
        };
        assert!((90_000..=100_000).contains(&ttl), "{ttl}");
        assert_eq!(migrate(&mut c, t.port, &keys), simple("NOKEY"));
        assert_eq!(cached(&mut c), "migrate_cached_sockets:1");
        // A key the target refuses stays; the others go.
        assert_eq!(c.cmd(&["SET", "key", "again"]), ok());
        assert_eq!(c.cmd(&["SET", "other", "x"]), ok());
        let both = ["", "9", "5000", "AUTH", "foobar", "KEYS", "key", "other"];
        assert_eq!(
            migrate(&mut c, t.port, &both),
            err("ERR Target instance replied with error: BUSYKEY Target key name already exists.")
        );
        assert_eq!(c.cmd(&["EXISTS", "key", "other"]), int(1));
        assert_eq!(
            migrate(&mut c, t.port, &["key", "99", "5000", "AUTH", "foobar"]),
            err("ERR Target instance replied with error: ERR DB index is out of range")
        );
        assert_eq!(c.cmd(&["EXISTS", "key"]), int(1));
    }
}

#[test]
fn argument_errors() {
    let s = Server::start(&[]);
    let mut c = s.raw();
    let port = free_port();
    assert_eq!(c.cmd(&["SET", "key", "v"]), ok());
    assert_eq!(
        migrate(&mut c, port, &["NotEmpty", "9", "5000", "KEYS", "a"]),
        err("ERR When using MIGRATE KEYS option, the key argument must be set to the empty string")
    );
    assert_eq!(
        migrate(&mut c, port, &["key", "abc", "5000"]),
        err("ERR value is not an integer or out of range")
    );
    assert_eq!(
        migrate(&mut c, port, &["key", "0", "100", "bogus"]),
        err("ERR syntax error")
    );
    assert_eq!(
        migrate(&mut c, port, &["nokey", "0", "100"]),
        simple("NOKEY")
    );
    // Nobody listens.
    assert_eq!(
        migrate(&mut c, port, &["key", "0", "100"]),
        err("IOERR error or timeout writing to target instance")
    );
    assert_eq!(
        c.cmd(&[
            "COMMAND", "GETKEYS", "MIGRATE", "h", "1", "", "0", "5", "AUTH", "keys", "KEYS", "a",
            "b"
        ]),
        RespFrame::Array(vec![bulk("a"), bulk("b")])
    );
}

/// A target that accepts and never answers: the time-out ends the wait,
/// and the connection is not kept.
#[test]
fn silent_target_times_out() {
    let s = Server::start(&[]);
    let mut c = s.raw();
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    assert_eq!(c.cmd(&["SET", "key", "v"]), ok());
    let t = std::time::Instant::now();
    assert_eq!(
        migrate(&mut c, port, &["key", "0", "300", "COPY"]),
        err("IOERR error or timeout reading to target instance")
    );
    assert!(t.elapsed() >= Duration::from_millis(250));
    assert_eq!(cached(&mut c), "migrate_cached_sockets:0");
    assert_eq!(c.cmd(&["EXISTS", "key"]), int(1));
}
