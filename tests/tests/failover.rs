//! FAILOVER (Redis 7.0): writes paused until a replica has the whole
//! stream, then the master becomes its replica with a PSYNC that says
//! FAILOVER, on which the target promotes itself; a real redis-server on
//! either side. Error texts are Redis 7.0.15's.

use cinnabar_tests::{tool, wait_for, Server};
use std::time::Duration;

fn replica_of(bin: Option<&std::path::Path>, m: &Server) -> Server {
    let opts = [
        ("replicaof", format!("127.0.0.1 {}", m.port)),
        ("enable-debug-command", "yes".to_string()),
    ];
    let opts: Vec<(&str, &str)> = opts.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let s = match bin {
        Some(b) => Server::start_bin(b, &opts),
        None => Server::start(&opts),
    };
    wait_for("link up", || {
        s.cli_out(&["INFO", "replication"])
            .contains("master_link_status:up")
    });
    s
}

fn state(s: &Server) -> String {
    let info = s.cli_out(&["INFO", "replication"]);
    info.lines()
        .find_map(|l| l.strip_prefix("master_failover_state:"))
        .unwrap()
        .to_string()
}

#[test]
fn failover_errors_as_redis() {
    let m = Server::start(&[("repl-diskless-sync-delay", "0")]);
    let e = |args: &[&str]| m.cli_out(args);
    assert_eq!(
        e(&["FAILOVER"]),
        "ERR FAILOVER requires connected replicas."
    );
    assert_eq!(e(&["FAILOVER", "ABORT"]), "ERR No failover in progress.");
    let r = replica_of(None, &m);
    let port = r.port.to_string();
    assert_eq!(
        e(&["FAILOVER", "TO", "invalidhost", &port]),
        "ERR FAILOVER target HOST and PORT is not a replica."
    );
    assert_eq!(
        e(&["FAILOVER", "TO", "127.0.0.1", "invalidport"]),
        "ERR value is not an integer or out of range"
    );
    let force = "ERR FAILOVER with force option requires both a timeout and target HOST and IP.";
    assert_eq!(e(&["FAILOVER", "FORCE", "TIMEOUT", "100"]), force);
    assert_eq!(e(&["FAILOVER", "TO", "127.0.0.1", &port, "FORCE"]), force);
    assert_eq!(
        e(&["FAILOVER", "TIMEOUT", "0"]),
        "ERR FAILOVER timeout must be greater than 0"
    );
    for bad in [
        &["FAILOVER", "ABORT", "TIMEOUT", "5"][..],
        &["FAILOVER", "TO", "127.0.0.1"],
        &["FAILOVER", "foo"],
        &["FAILOVER", "TIMEOUT", "1", "TIMEOUT", "2"],
        &["FAILOVER", "FORCE", "FORCE"],
    ] {
        assert_eq!(e(bad), "ERR syntax error", "{bad:?}");
    }
    assert_eq!(
        r.cli_out(&["FAILOVER"]),
        "ERR FAILOVER is not valid when server is a replica."
    );
    assert_eq!(
        r.raw().cmd(&["PSYNC", "x", "1", "FAILOVER"]),
        protocol::Frame::Error("ERR PSYNC FAILOVER replid must match my replid.".into())
    );
    assert_eq!(state(&m), "no-failover");
}

/// `m` fails over to `to` (its only replica, or TO it): roles swap, the
/// old master continues partially.
fn fails_over(m: &Server, to: &Server, named: bool) {
    let mut c = m.raw();
    for i in 0..100 {
        c.cmd(&["SET", &format!("k{i}"), "v"]);
    }
    let port = to.port.to_string();
    let args: &[&str] = if named {
        &["FAILOVER", "TO", "127.0.0.1", &port]
    } else {
        &["FAILOVER"]
    };
    assert_eq!(m.cli_out(args), "OK");
    wait_for("the failover ends", || state(m) == "no-failover");
    wait_for("roles swap", || {
        m.cli_out(&["ROLE"]).starts_with("slave") && to.cli_out(&["ROLE"]).starts_with("master")
    });
    wait_for("the old master follows", || {
        m.cli_out(&["INFO", "replication"])
            .contains("master_link_status:up")
    });
    let stats = to.cli_out(&["INFO", "stats"]);
    assert!(stats.contains("sync_partial_ok:1"), "{stats}");
    assert!(stats.contains("sync_full:0"), "{stats}");
    assert_eq!(to.cli_out(&["SET", "after", "1"]), "OK");
    wait_for("the new master's writes arrive", || {
        m.cli_out(&["DEBUG", "DIGEST"]) == to.cli_out(&["DEBUG", "DIGEST"])
    });
}

#[test]
fn failover_to_a_cinnabar_replica() {
    let m = Server::start(&[
        ("repl-diskless-sync-delay", "0"),
        ("enable-debug-command", "yes"),
    ]);
    let r = replica_of(None, &m);
    fails_over(&m, &r, true);
    assert!(r.log().contains("Failover request received for replid"));
    assert!(m.log().contains("is synced, failing over."));
}

#[test]
fn failover_between_cinnabar_and_redis() {
    let Some(redis) = tool("redis-server") else {
        eprintln!("skipped: no redis-server");
        return;
    };
    let m = Server::start(&[
        ("repl-diskless-sync-delay", "0"),
        ("enable-debug-command", "yes"),
    ]);
    let r = replica_of(Some(&redis), &m);
    fails_over(&m, &r, false);
    // And back: Redis hands over to cinnabar.
    let stats = m.cli_out(&["INFO", "stats"]);
    assert!(stats.contains("sync_partial_ok:0"), "{stats}");
    assert_eq!(
        r.cli_out(&["FAILOVER", "TO", "127.0.0.1", &m.port.to_string()]),
        "OK"
    );
    wait_for("back", || {
        m.cli_out(&["ROLE"]).starts_with("master") && r.cli_out(&["ROLE"]).starts_with("slave")
    });
}

#[test]
fn a_failover_can_time_out_or_be_aborted() {
    let m = Server::start(&[("repl-diskless-sync-delay", "0")]);
    let r = replica_of(None, &m);
    // A replica that reads nothing never catches up.
    let mut stuck = m.raw();
    stuck.cmd(&["REPLCONF", "listening-port", "1"]);
    stuck.send_cmd(&["SYNC"]);
    wait_for("two replicas", || {
        m.cli_out(&["INFO", "replication"])
            .contains("slave1:ip=127.0.0.1,port=1,state=online")
    });
    m.cli_out(&["SET", "k", "v"]);
    assert_eq!(
        m.cli_out(&["FAILOVER", "TO", "127.0.0.1", "1", "TIMEOUT", "300"]),
        "OK"
    );
    assert_eq!(state(&m), "waiting-for-sync");
    assert_eq!(
        m.cli_out(&["FAILOVER"]),
        "ERR FAILOVER already in progress."
    );
    assert_eq!(m.cli_out(&["GET", "k"]), "v");
    wait_for("timed out", || state(&m) == "no-failover");
    assert!(m
        .log()
        .contains("FAILOVER aborted: Replica never caught up before timeout"));
    assert!(m.cli_out(&["ROLE"]).starts_with("master"));
    // A write waits while a failover waits; ABORT lets it run.
    assert_eq!(m.cli_out(&["FAILOVER", "TO", "127.0.0.1", "1"]), "OK");
    let mut w = m.raw();
    w.send_cmd(&["SET", "k", "2"]);
    w.expect_silence(Duration::from_millis(200));
    assert_eq!(m.cli_out(&["FAILOVER", "ABORT"]), "OK");
    assert_eq!(w.read(), protocol::Frame::Simple("OK".into()));
    assert_eq!(state(&m), "no-failover");
    assert!(r.cli_out(&["ROLE"]).starts_with("slave"));
}
