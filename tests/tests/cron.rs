//! What the cron does as Redis 7.0.15's: active expiry at its effort,
//! incremental rehashing unless `activerehashing no`.

use cinnabar_tests::*;
use std::time::{Duration, Instant};

/// 20,000 keys that live an hour and 1,000 that expire at once: 4.8% of
/// the keys with a TTL are stale, under the 10% that effort 1 tolerates
/// and over the 1% of effort 10. The effort-10 server reclaims nearly all
/// of them while the effort-1 server, sampling 20 keys a tick, reclaims
/// few. Both run side by side, so a slow machine slows both; holds for
/// redis-server 7.0.15 too.
#[test]
fn active_expire_effort_sets_how_many_expired_keys_stay() {
    let servers: Vec<Server> = ["1", "10"]
        .iter()
        .map(|e| Server::start(&[("active-expire-effort", e)]))
        .collect();
    let mut load = Vec::new();
    for i in 0..20_000 {
        load.extend(encode(&["SET", &format!("long:{i}"), "v", "EX", "3600"]));
    }
    for i in 0..1_000 {
        load.extend(encode(&["SET", &format!("short:{i}"), "v", "PX", "1"]));
    }
    let mut clients: Vec<RawClient> = servers.iter().map(|s| s.raw()).collect();
    for c in &mut clients {
        c.send(&load);
    }
    for c in &mut clients {
        for _ in 0..21_000 {
            assert_eq!(c.read(), ok());
        }
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    while info_int(&mut clients[1], "stats", "expired_keys") < 900 {
        assert!(Instant::now() < deadline, "effort 10 did not reclaim");
        std::thread::sleep(Duration::from_millis(20));
    }
    let low = info_int(&mut clients[0], "stats", "expired_keys");
    assert!(low < 500, "effort 1 reclaimed {low} of 1000");
}

/// 1,025 keys set one by one: the 1,025th grows the table from 1,024 to
/// 2,048 buckets and starts a rehash. The cron finishes it within a tick
/// (100 buckets a step for up to 1 ms), unless `activerehashing no`, when
/// only commands on the table would.
/// Holds for redis-server 7.0.15 too.
#[test]
fn activerehashing_no_leaves_the_rehash_to_commands() {
    for (on, rehashing) in [("yes", false), ("no", true)] {
        let s = Server::start(&[("activerehashing", on), ("enable-debug-command", "yes")]);
        let mut c = s.raw();
        let mut load = Vec::new();
        for i in 0..1025 {
            load.extend(encode(&["SET", &format!("k{i}"), "v"]));
        }
        c.send(&load);
        for _ in 0..1025 {
            assert_eq!(c.read(), ok());
        }
        // Two keys that expire at once, the second set once active expiry
        // took the first: the cron's tick after it has run in full.
        for n in 1..=2 {
            assert_eq!(c.cmd(&["SET", &format!("gone{n}"), "v", "PX", "1"]), ok());
            let deadline = Instant::now() + Duration::from_secs(30);
            while info_int(&mut c, "stats", "expired_keys") < n {
                assert!(Instant::now() < deadline, "no active expiry");
                std::thread::sleep(Duration::from_millis(10));
            }
        }
        let stats = text(&c.cmd(&["DEBUG", "HTSTATS", "0"]));
        assert_eq!(
            stats.contains("rehashing target"),
            rehashing,
            "{on}: {stats}"
        );
    }
}
