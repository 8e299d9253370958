//! The replication position across a restart: the RDB's `repl-stream-db`,
//! `repl-id` and `repl-offset` aux fields, so a restarted master's replicas
//! (cinnabar's and a real redis-server) and a restarted replica resync
//! partially, and the keys the restarted master finds expired are deleted
//! on its replicas too.

use cinnabar_tests::{tool, Server, TempDir};
use std::time::{Duration, Instant};

fn field(info: &str, name: &str) -> String {
    info.lines()
        .find_map(|l| l.strip_prefix(&format!("{name}:")))
        .unwrap_or_else(|| panic!("no {name} in {info}"))
        .to_string()
}

fn until(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !f() {
        assert!(Instant::now() < deadline, "timed out: {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn offset(s: &Server) -> String {
    field(&s.cli_out(&["INFO", "replication"]), "master_repl_offset")
}

fn same_digest(a: &Server, b: &Server) {
    until("equal digests", || {
        a.cli_out(&["DEBUG", "DIGEST"]) == b.cli_out(&["DEBUG", "DIGEST"])
    });
}

fn follow(r: &Server, m: &Server) {
    assert_eq!(
        r.cli_out(&["REPLICAOF", "127.0.0.1", &m.port.to_string()]),
        "OK"
    );
    until("link up", || {
        r.cli_out(&["INFO", "replication"])
            .contains("master_link_status:up")
    });
}

#[test]
fn a_restarted_master_resyncs_its_replicas_partially() {
    let dir = TempDir::new("rsi-master");
    let opts = [
        ("dir", dir.dir()),
        ("enable-debug-command", "yes"),
        ("repl-ping-replica-period", "3600"),
    ];
    let m = Server::start(&opts);
    let r = Server::start(&[("enable-debug-command", "yes")]);
    follow(&r, &m);
    let real = tool("redis-server").map(|bin| {
        let x = Server::start_bin(&bin, &[("enable-debug-command", "yes")]);
        follow(&x, &m);
        x
    });
    let mut c = m.raw();
    c.cmd(&["DEBUG", "SET-ACTIVE-EXPIRE", "0"]);
    for i in 0..40 {
        c.cmd(&["SELECT", &(i % 5).to_string()]);
        c.cmd(&["SET", &format!("k{i}"), "v"]);
        if i % 2 == 0 {
            c.cmd(&["SET", &format!("e{i}"), "v", "PX", "10"]);
        }
    }
    std::thread::sleep(Duration::from_millis(50));
    same_digest(&m, &r);
    let off = offset(&m);
    until("the replica's offset", || offset(&r) == off);
    assert_eq!(m.cli_out(&["SAVE"]), "OK");
    let info = m.cli_out(&["INFO", "replication"]);
    let id = field(&info, "master_replid");
    if let Some(check) = tool("redis-check-rdb") {
        let o = std::process::Command::new(check)
            .arg(dir.path().join("dump.rdb"))
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&o.stdout);
        for want in [
            "AUX FIELD repl-stream-db = '4'".to_string(),
            format!("AUX FIELD repl-id = '{id}'"),
            format!("AUX FIELD repl-offset = '{off}'"),
        ] {
            assert!(text.contains(&want), "{want} in {text}");
        }
    }
    drop(m);
    let m = Server::start(&opts);
    let info = m.cli_out(&["INFO", "replication"]);
    let off: u64 = off.parse().unwrap();
    assert_ne!(field(&info, "master_replid"), id);
    assert_eq!(field(&info, "master_replid2"), id);
    assert_eq!(field(&info, "second_repl_offset"), (off + 1).to_string());
    assert_eq!(field(&info, "repl_backlog_active"), "1");
    assert_eq!(
        field(&info, "repl_backlog_first_byte_offset"),
        (off + 1).to_string()
    );
    // The expired keys' DELs, with their SELECTs, are the backlog.
    let hist: u64 = field(&info, "repl_backlog_histlen").parse().unwrap();
    assert!(hist > 0, "{info}");
    assert_eq!(field(&info, "master_repl_offset"), (off + hist).to_string());
    let pers = m.cli_out(&["INFO", "persistence"]);
    assert_eq!(field(&pers, "rdb_last_load_keys_expired"), "20");
    follow(&r, &m);
    same_digest(&m, &r);
    let mut partial = 1;
    if let Some(x) = &real {
        follow(x, &m);
        same_digest(&m, x);
        partial += 1;
    }
    let stats = m.cli_out(&["INFO", "stats"]);
    assert_eq!(field(&stats, "sync_full"), "0");
    assert_eq!(field(&stats, "sync_partial_ok"), partial.to_string());
    assert_eq!(r.cli_out(&["DBSIZE"]), "8");
}

#[test]
fn a_restarted_replica_resyncs_partially() {
    let m = Server::start(&[("enable-debug-command", "yes")]);
    let dir = TempDir::new("rsi-replica");
    let opts = [
        ("dir", dir.dir()),
        ("enable-debug-command", "yes"),
        ("replicaof", &format!("127.0.0.1 {}", m.port)),
    ];
    let r = Server::start(&opts);
    let mut c = m.raw();
    c.cmd(&["SELECT", "2"]);
    for i in 0..50 {
        c.cmd(&["SET", &format!("k{i}"), "v"]);
    }
    same_digest(&m, &r);
    assert_eq!(r.cli_out(&["SAVE"]), "OK");
    drop(r);
    // Still in database 2: the stream goes on without a SELECT.
    c.cmd(&["SET", "after", "v"]);
    let r = Server::start(&opts);
    same_digest(&m, &r);
    assert_eq!(r.cli_out(&["-n", "2", "GET", "after"]), "v");
    let stats = m.cli_out(&["INFO", "stats"]);
    assert_eq!(field(&stats, "sync_full"), "1");
    assert_eq!(field(&stats, "sync_partial_ok"), "1");
}

#[test]
fn a_master_without_a_backlog_writes_no_position() {
    let Some(check) = tool("redis-check-rdb") else {
        eprintln!("skipped: no redis-check-rdb");
        return;
    };
    let dir = TempDir::new("rsi-plain");
    let m = Server::start(&[("dir", dir.dir())]);
    m.cli_out(&["SET", "a", "1"]);
    assert_eq!(m.cli_out(&["SAVE"]), "OK");
    let o = std::process::Command::new(check)
        .arg(dir.path().join("dump.rdb"))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("AUX FIELD used-mem"), "{text}");
    assert!(!text.contains("repl-"), "{text}");
    drop(m);
    let m = Server::start(&[("dir", dir.dir())]);
    let info = m.cli_out(&["INFO", "replication"]);
    assert_eq!(field(&info, "repl_backlog_active"), "0");
    assert_eq!(field(&info, "master_repl_offset"), "0");
}
