//! Active expiry as Redis 7.0.15 paces it.

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
