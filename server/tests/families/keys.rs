//! Keys and expiry, with the harness's clock.

use cinnabar_server::testkit::*;

#[test]
fn set_ex_expires_when_the_clock_passes_it() {
    let mut h = Harness::new();
    assert_eq!(h.run(&["SET", "k", "v", "EX", "10"]), ok());
    h.advance_ms(9_999);
    assert_eq!(h.run(&["GET", "k"]), bulk("v"));
    assert_eq!(h.run(&["PTTL", "k"]), int(1));
    h.advance_ms(2);
    assert_eq!(h.run(&["GET", "k"]), nil());
    assert_eq!(h.run(&["EXISTS", "k"]), int(0));
    assert_eq!(h.run(&["TTL", "k"]), int(-2));
}

#[test]
fn every_type_expires_lazily_and_is_recreated() {
    let mut h = Harness::new();
    h.run(&["RPUSH", "l", "a", "b"]);
    h.run(&["HSET", "h", "f", "v"]);
    h.run(&["SADD", "s", "m"]);
    h.run(&["ZADD", "z", "1", "m"]);
    h.run(&["SETBIT", "b", "7", "1"]);
    for k in ["l", "h", "s", "z", "b"] {
        assert_eq!(h.run(&["PEXPIRE", k, "100"]), int(1), "{k}");
    }
    assert_eq!(h.run(&["DBSIZE"]), int(5));
    h.advance_ms(101);
    assert_eq!(h.run(&["LLEN", "l"]), int(0));
    assert_eq!(h.run(&["HGETALL", "h"]), Frame::Array(vec![]));
    assert_eq!(h.run(&["SCARD", "s"]), int(0));
    assert_eq!(h.run(&["ZSCORE", "z", "m"]), nil());
    assert_eq!(h.run(&["GETBIT", "b", "7"]), int(0));
    // An expired key of another type does not make a WRONGTYPE.
    assert_eq!(h.run(&["SET", "l", "now a string"]), ok());
    assert_eq!(h.run(&["LPUSH", "h", "x"]), int(1));
    assert_eq!(h.run(&["TYPE", "h"]), simple("list"));
    assert_eq!(h.run(&["DBSIZE"]), int(2));
}

/// Each reply checked with redis-server 7.0.15 (same commands, real time).
#[test]
fn expire_options_persist_and_getex() {
    let mut h = Harness::new();
    assert_eq!(h.run(&["SET", "k", "v", "EX", "100"]), ok());
    assert_eq!(h.run(&["PERSIST", "k"]), int(1));
    assert_eq!(h.run(&["TTL", "k"]), int(-1));
    assert_eq!(h.run(&["PERSIST", "k"]), int(0));
    assert_eq!(h.run(&["EXPIRE", "k", "100", "XX"]), int(0));
    assert_eq!(h.run(&["EXPIRE", "k", "100", "NX"]), int(1));
    assert_eq!(h.run(&["EXPIRE", "k", "50", "GT"]), int(0));
    assert_eq!(h.run(&["EXPIRE", "k", "200", "GT"]), int(1));
    assert_eq!(h.run(&["EXPIRE", "k", "100", "LT"]), int(1));
    assert_eq!(h.run(&["TTL", "k"]), int(100));
    let at = (h.now_ms() + 100_000) / 1000;
    assert_eq!(h.run(&["EXPIRETIME", "k"]), int(at));
    assert_eq!(h.run(&["PEXPIRETIME", "k"]), int(h.now_ms() + 100_000));
    assert_eq!(h.run(&["GETEX", "k", "PERSIST"]), bulk("v"));
    assert_eq!(h.run(&["TTL", "k"]), int(-1));
    assert_eq!(h.run(&["GETEX", "k", "PX", "250"]), bulk("v"));
    h.advance_ms(200);
    assert_eq!(h.run(&["PTTL", "k"]), int(50));
    assert_eq!(h.run(&["SET", "k", "w", "KEEPTTL"]), ok());
    assert_eq!(h.run(&["PTTL", "k"]), int(50));
    h.advance_ms(51);
    assert_eq!(h.run(&["GET", "k"]), nil());
    assert_eq!(h.run(&["EXPIRETIME", "k"]), int(-2));
    h.run(&["SET", "k", "v"]);
    assert_eq!(h.run(&["EXPIRETIME", "k"]), int(-1));
    assert_eq!(h.run(&["EXPIRE", "k", "0"]), int(1));
    assert_eq!(h.run(&["EXISTS", "k"]), int(0));
    // An absolute time in the past deletes at once.
    assert_eq!(h.run(&["SET", "k", "v", "EXAT", "1"]), ok());
    assert_eq!(h.run(&["EXISTS", "k"]), int(0));
}

#[test]
fn pexpireat_and_rename_carry_the_deadline() {
    let mut h = Harness::new();
    let at = h.now_ms() + 5_000;
    h.run(&["SET", "a", "1"]);
    assert_eq!(h.run(&["PEXPIREAT", "a", &at.to_string()]), int(1));
    assert_eq!(h.run(&["RENAME", "a", "b"]), ok());
    assert_eq!(h.run(&["PEXPIRETIME", "b"]), int(at));
    h.advance_ms(4_000);
    assert_eq!(h.run(&["COPY", "b", "c"]), int(1));
    assert_eq!(h.run(&["PTTL", "c"]), int(1_000));
    h.advance_ms(1_001);
    assert_eq!(h.run(&["MGET", "b", "c"]), Frame::Array(vec![nil(), nil()]));
}

/// Moved from the seed workloads (002 ch.6 acquireLockWithTimeout()):
/// SETNX then EXPIRE; a waiter that finds the lock without a TTL (holder
/// crashed between the two) sets one; a crashed holder's lock frees itself.
/// The lock's expiry is waited for on the harness's clock.
#[test]
fn seed002_lock_with_timeout() {
    let mut h = Harness::new();
    let a = h.client;
    let b = h.connect();
    let acquire = |h: &mut Harness, c: u64, id: &str, lock_timeout: i64| -> bool {
        if h.run_on(c, &["SETNX", "lock:job", id]) == int(1) {
            let t = lock_timeout.to_string();
            assert_eq!(h.run_on(c, &["EXPIRE", "lock:job", &t]), int(1));
            return true;
        }
        if h.run_on(c, &["TTL", "lock:job"]) == int(-1) {
            h.run_on(c, &["EXPIRE", "lock:job", &lock_timeout.to_string()]);
        }
        false
    };
    assert!(acquire(&mut h, a, "A", 1));
    assert!(!acquire(&mut h, b, "B", 1));
    assert_eq!(h.run_on(b, &["TTL", "lock:job"]), int(1));
    // A "crashes"; its lock expires and B gets it.
    let mut waited = 0;
    while !acquire(&mut h, b, "B", 10) {
        assert!(waited < 5_000, "expired lock never released");
        h.advance_ms(50);
        waited += 50;
    }
    assert!((1_000..=1_050).contains(&waited), "{waited}");
    assert_eq!(h.run_on(a, &["GET", "lock:job"]), bulk("B"));
    // A holder that died between SETNX and EXPIRE: the waiter adds the TTL.
    assert_eq!(h.run_on(a, &["SET", "lock:stuck", "X"]), ok());
    assert_eq!(h.run_on(a, &["TTL", "lock:stuck"]), int(-1));
    assert_eq!(h.run_on(b, &["EXPIRE", "lock:stuck", "10"]), int(1));
    assert_eq!(h.run_on(a, &["TTL", "lock:stuck"]), int(10));
}

/// Moved from the seed workloads (002 ch.5 §4 setConfig()/getConfig()/
/// redisConnection()): JSON config in a string key; the component's
/// connection SELECTs the configured db.
#[test]
fn seed002_config_in_redis_and_select_db() {
    let mut h = Harness::new();
    let c = h.client;
    let json = r#"{"db":3.0,"host":"127.0.0.1","name":"statistics \"main\" ✓"}"#;
    assert_eq!(h.run_on(c, &["SET", "config:redis:statistics", json]), ok());
    assert_eq!(h.run_on(c, &["GET", "config:redis:statistics"]), bulk(json));
    assert_eq!(h.run_on(c, &["GET", "config:redis:missing"]), nil());

    // redisConnection(): a new connection on the configured db.
    let stats = h.connect();
    assert_eq!(h.run_on(stats, &["SELECT", "3"]), ok());
    assert_eq!(h.run_on(stats, &["SET", "stats:page", "42"]), ok());
    assert_eq!(h.run_on(stats, &["GET", "stats:page"]), bulk("42"));
    // Databases are separate keyspaces.
    assert_eq!(h.run_on(c, &["GET", "stats:page"]), nil());
    assert_eq!(h.run_on(c, &["SELECT", "3"]), ok());
    assert_eq!(h.run_on(c, &["GET", "stats:page"]), bulk("42"));
}

/// Checked with redis-server 7.0.15 (active expiry off, PTTL polled): a key
/// lives through the millisecond of its deadline, PTTL 0, and is gone the
/// next one.
#[test]
fn a_key_lives_through_its_deadline_millisecond() {
    let mut h = Harness::new();
    assert_eq!(h.run(&["SET", "k", "v", "PX", "30"]), ok());
    h.advance_ms(30);
    assert_eq!(h.run(&["PTTL", "k"]), int(0));
    assert_eq!(h.run(&["GET", "k"]), bulk("v"));
    h.advance_ms(1);
    assert_eq!(h.run(&["PTTL", "k"]), int(-2));
}
