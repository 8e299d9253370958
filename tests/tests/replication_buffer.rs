//! The replication buffer, as Redis 7.0 shares it: the backlog and every
//! replica's output are one copy of the stream, the backlog grows past
//! `repl-backlog-size` while a replica still needs older bytes (and a
//! partial resync can use them), it shrinks back once none does, and the
//! INFO and CLIENT LIST fields that show it.

use cinnabar_tests::{wait_for, Server};
use std::io::Read;

fn field(s: &Server, section: &str, name: &str) -> u64 {
    let info = s.cli_out(&["INFO", section]);
    info.lines()
        .find_map(|l| l.strip_prefix(&format!("{name}:")))
        .unwrap_or_else(|| panic!("no {name} in {info}"))
        .trim()
        .parse()
        .unwrap()
}

/// `n` SETs of 100 kB values, pipelined.
fn write_mb(s: &Server, n: usize) {
    let mut c = s.raw();
    let v = "v".repeat(100_000);
    for i in 0..n {
        c.send_cmd(&["SET", &format!("k{i}"), &v]);
    }
    for _ in 0..n {
        c.read();
    }
}

#[test]
fn stalled_replicas_share_one_copy_that_outgrows_the_backlog() {
    let s = Server::start(&[
        ("repl-backlog-size", "16384"),
        ("client-output-buffer-limit", "replica 0 0 0"),
        ("repl-ping-replica-period", "3600"),
    ]);
    let a = s.sync_replica();
    let b = s.sync_replica();
    // 40 MB: more than the sockets take.
    write_mb(&s, 400);
    let hist = field(&s, "replication", "repl_backlog_histlen");
    assert!(hist > 20_000_000, "{hist}");
    let total = field(&s, "memory", "mem_total_replication_buffers");
    assert!(total >= hist && total < hist + hist / 10, "{total} {hist}");
    let slaves = field(&s, "memory", "mem_clients_slaves");
    assert!(slaves > 20_000_000 && slaves < total, "{slaves} {total}");
    assert!(field(&s, "memory", "mem_not_counted_for_evict") >= slaves);
    let stats = s.cli_out(&["MEMORY", "STATS"]);
    let mut lines = stats.lines().skip_while(|l| *l != "clients.slaves");
    let in_stats: u64 = lines.nth(1).unwrap().parse().unwrap();
    assert!(in_stats > 20_000_000, "{stats}");
    // Each replica shows what it has not taken as its output.
    let list = s.cli_out(&["CLIENT", "LIST", "TYPE", "replica"]);
    for line in list.lines() {
        let omem: u64 = line
            .split(' ')
            .find_map(|f| f.strip_prefix("omem="))
            .unwrap()
            .parse()
            .unwrap();
        assert!(omem > 20_000_000, "{line}");
    }
    // One gone: the other still holds it all.
    drop(a);
    wait_for("one replica left", || {
        field(&s, "replication", "connected_slaves") == 1
    });
    assert!(field(&s, "replication", "repl_backlog_histlen") >= hist);
    // Both gone: back to the backlog's size, and no replica memory.
    drop(b);
    wait_for("no replica left", || {
        field(&s, "replication", "connected_slaves") == 0
    });
    assert!(field(&s, "replication", "repl_backlog_histlen") <= 2 * 16384);
    assert!(field(&s, "memory", "mem_total_replication_buffers") < 64 * 1024);
    assert_eq!(field(&s, "memory", "mem_clients_slaves"), 0);
}

#[test]
fn a_partial_resync_uses_what_a_slower_replica_holds() {
    let s = Server::start(&[
        ("repl-backlog-size", "16384"),
        ("client-output-buffer-limit", "replica 0 0 0"),
        ("repl-ping-replica-period", "3600"),
    ]);
    let _slow = s.sync_replica();
    // Far more than the backlog's size, and than the slow replica's
    // socket takes.
    write_mb(&s, 400);
    let id = s
        .cli_out(&["INFO", "replication"])
        .lines()
        .find_map(|l| l.strip_prefix("master_replid:"))
        .unwrap()
        .to_string();
    let first = field(&s, "replication", "repl_backlog_first_byte_offset");
    let hist = field(&s, "replication", "repl_backlog_histlen");
    assert!(hist > 100 * 16384, "{hist}");
    let mut r = s.raw();
    r.cmd(&["REPLCONF", "capa", "psync2"]);
    r.send_cmd(&["PSYNC", &id, &first.to_string()]);
    let mut line = vec![0u8; 52];
    r.sock.read_exact(&mut line).unwrap();
    assert_eq!(line, format!("+CONTINUE {id}\r\n").into_bytes());
    // It gets all of it.
    let mut got = vec![0u8; hist as usize];
    r.sock.read_exact(&mut got).unwrap();
    let last = b"$4\r\nk399\r\n$100000\r\n";
    assert!(got.windows(last.len()).any(|w| w == last));
    assert_eq!(field(&s, "stats", "sync_partial_ok"), 1);
}

#[test]
fn an_output_limit_below_the_backlog_counts_as_the_backlog() {
    let s = Server::start(&[
        ("repl-backlog-size", "100mb"),
        ("client-output-buffer-limit", "replica 64kb 0 0"),
        ("repl-ping-replica-period", "3600"),
    ]);
    let _slow = s.sync_replica();
    write_mb(&s, 200);
    let list = s.cli_out(&["CLIENT", "LIST", "TYPE", "replica"]);
    let omem: u64 = list
        .split(' ')
        .find_map(|f| f.strip_prefix("omem="))
        .unwrap()
        .parse()
        .unwrap();
    assert!(omem > 64 * 1024, "{list}");
    assert_eq!(field(&s, "replication", "connected_slaves"), 1);
}

#[test]
fn a_replica_resumes_in_its_database_after_another_replicaof() {
    let m = Server::start(&[]);
    let s = Server::start(&[("replicaof", &format!("127.0.0.1 {}", m.port))]);
    wait_for("linked", || {
        s.cli_out(&["INFO", "replication"])
            .contains("master_link_status:up")
    });
    let mut c = m.raw();
    c.cmd(&["SELECT", "9"]);
    c.cmd(&["INCR", "x"]);
    assert_eq!(c.cmd(&["WAIT", "1", "5000"]), protocol::Frame::Integer(1));
    // A master that is not there, then the first one again: the stream
    // goes on where it was, in database 9, without a SELECT.
    let nowhere = cinnabar_tests::free_port().to_string();
    s.cli_out(&["REPLICAOF", "127.0.0.1", &nowhere]);
    s.cli_out(&["REPLICAOF", "127.0.0.1", &m.port.to_string()]);
    wait_for("partial resync", || {
        field(&m, "stats", "sync_partial_ok") == 1
    });
    c.cmd(&["INCR", "x"]);
    assert_eq!(c.cmd(&["WAIT", "1", "5000"]), protocol::Frame::Integer(1));
    let mut r = s.raw();
    r.cmd(&["SELECT", "9"]);
    assert_eq!(r.cmd(&["GET", "x"]), protocol::Frame::Bulk("2".into()));
    assert_eq!(s.cli_out(&["DBSIZE"]), "0");
}

/// While a full sync runs, the stream its replica will read after the
/// RDB waits on disk beyond the backlog's size and 8 MB (a forked master
/// would hold it in memory on top of its copied pages); the replica gets
/// all of it, in order.
#[test]
fn a_full_sync_buffers_the_stream_on_disk() {
    for diskless in ["no", "yes"] {
        full_sync_under_writes(diskless);
    }
}

fn full_sync_under_writes(diskless: &str) {
    let m = Server::start(&[
        ("repl-diskless-sync", diskless),
        ("repl-diskless-sync-delay", "0"),
        ("repl-backlog-size", "16384"),
        ("client-output-buffer-limit", "replica 0 0 0"),
        ("rdb-key-save-delay", "50000"),
        ("enable-debug-command", "yes"),
    ]);
    let mut c = m.raw();
    for i in 0..100 {
        c.cmd(&["SET", &format!("pre{i}"), "v"]);
    }
    let r = Server::start(&[("enable-debug-command", "yes")]);
    r.cli_out(&["REPLICAOF", "127.0.0.1", &m.port.to_string()]);
    wait_for("the sync's save", || {
        field(&m, "persistence", "rdb_bgsave_in_progress") == 1
    });
    // 30 MB while the save runs (100 keys take 5 s).
    write_mb(&m, 300);
    assert_eq!(field(&m, "persistence", "rdb_bgsave_in_progress"), 1);
    let held = field(&m, "replication", "repl_backlog_histlen");
    assert!(held > 30_000_000, "{held}");
    let slaves = field(&m, "memory", "mem_clients_slaves");
    assert!(slaves < 10 << 20, "{slaves} in memory of {held}");
    // Offsets, not digests: a digest of 30 MB takes a debug build long.
    wait_for("the replica to catch up", || {
        r.cli_out(&["INFO", "replication"])
            .contains("master_link_status:up")
            && field(&r, "replication", "slave_repl_offset")
                == field(&m, "replication", "master_repl_offset")
    });
    assert_eq!(r.cli_out(&["DBSIZE"]), "400");
    assert_eq!(
        m.cli_out(&["DEBUG", "DIGEST"]),
        r.cli_out(&["DEBUG", "DIGEST"])
    );
    // Then the stream is the backlog's alone again.
    c.cmd(&["SET", "after", "1"]);
    wait_for("the buffer back to the backlog", || {
        field(&m, "replication", "repl_backlog_histlen") <= 2 * 16384
    });
}
