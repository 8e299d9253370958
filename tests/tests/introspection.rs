//! Introspection as in Redis 7.0.15: CONFIG SET of an unchanged value
//! applies nothing (setting `bind` and `port` to what they are keeps the
//! listeners); a slow active expiry cycle is a latency event.

use cinnabar_tests::*;

#[test]
fn config_set_to_the_current_bind_and_port() {
    let s = Server::start(&[]);
    let mut c = s.raw();
    let get = |c: &mut RawClient, name: &str| match c.cmd(&["CONFIG", "GET", name]) {
        RespFrame::Array(kv) => text(&kv[1]),
        f => panic!("{f:?}"),
    };
    let bind = get(&mut c, "bind");
    let port = get(&mut c, "port");
    assert_eq!(c.cmd(&["CONFIG", "SET", "bind", &bind]), ok());
    assert_eq!(
        c.cmd(&["CONFIG", "SET", "port", &port, "bind", &bind]),
        ok()
    );
    assert_eq!(s.raw().cmd(&["PING"]), simple("PONG"));
}

/// An active expiry cycle slower than latency-monitor-threshold is a
/// latency event (`expire-cycle`).
#[test]
fn slow_expire_cycle_is_a_latency_event() {
    let s = Server::start(&[]);
    let mut c = s.raw();
    assert_eq!(
        c.cmd(&["CONFIG", "SET", "latency-monitor-threshold", "1"]),
        ok()
    );
    let fill = "for i = 1, tonumber(ARGV[1]) do redis.call('sadd', KEYS[1], i) end";
    c.cmd(&["EVAL", fill, "1", "big", "100000"]);
    assert_eq!(c.cmd(&["PEXPIRE", "big", "20"]), int(1));
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while c.cmd(&["DBSIZE"]) != int(0) {
        assert!(std::time::Instant::now() < deadline, "never expired");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let latest = format!("{:?}", c.cmd(&["LATENCY", "LATEST"]));
    assert!(latest.contains("expire-cycle"), "{latest}");
}
