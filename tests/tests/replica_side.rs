//! What a replica does on its own side of the link, as Redis 7.0.15: a
//! writable replica expires the keys with a TTL it wrote itself (its
//! master's keys wait for the master's DELs), its link to the master
//! leaves from `bind-source-addr`, and INFO shows a full sync's transfer.

use cinnabar_tests::*;
use std::thread;
use std::time::Duration;

/// A master (with DEBUG) and its writable replica, linked, and a
/// connection to each.
fn writable_replica() -> (Server, Server, RawClient, RawClient) {
    let m = Server::start(&[("enable-debug-command", "yes")]);
    let s = Server::start(&[
        ("replicaof", &format!("127.0.0.1 {}", m.port)),
        ("replica-read-only", "no"),
    ]);
    let (mc, mut sc) = (m.raw(), s.raw());
    wait_for("linked", || {
        info_field(&mut sc, "replication", "master_link_status") == "up"
    });
    (m, s, mc, sc)
}

/// A writable replica's own write to a key its master let expire deletes
/// it first: INCR starts from 0 and leaves no TTL; a read leaves the key.
#[test]
fn a_writable_replica_writes_over_an_expired_key_afresh() {
    let (_m, _s, mut mc, mut sc) = writable_replica();
    assert_eq!(mc.cmd(&["DEBUG", "SET-ACTIVE-EXPIRE", "0"]), ok());
    assert_eq!(mc.cmd(&["SET", "key1", "5", "PX", "10"]), ok());
    assert_eq!(mc.cmd(&["SET", "key2", "5", "PX", "10"]), ok());
    assert_eq!(mc.cmd(&["WAIT", "1", "5000"]), int(1));
    wait_for("expired", || sc.cmd(&["EXISTS", "key1", "key2"]) == int(0));
    assert_eq!(sc.cmd(&["DBSIZE"]), int(2));
    assert_eq!(sc.cmd(&["INCR", "key1"]), int(1));
    assert_eq!(sc.cmd(&["TTL", "key1"]), int(-1));
    assert_eq!(sc.cmd(&["GET", "key2"]), nil());
    assert_eq!(sc.cmd(&["DBSIZE"]), int(2));
}

#[test]
fn a_writable_replica_expires_the_keys_it_wrote() {
    let (_m, _s, mut mc, mut sc) = writable_replica();
    // The master's key: the replica leaves it to the master, which does
    // not expire it actively here.
    assert_eq!(mc.cmd(&["DEBUG", "SET-ACTIVE-EXPIRE", "0"]), ok());
    assert_eq!(mc.cmd(&["SET", "theirs", "v", "PX", "1"]), ok());
    assert_eq!(mc.cmd(&["WAIT", "1", "5000"]), int(1));

    assert_eq!(sc.cmd(&["SET", "mine", "v", "PX", "1"]), ok());
    assert_eq!(sc.cmd(&["SET", "kept", "v", "PX", "1"]), ok());
    assert_eq!(sc.cmd(&["PERSIST", "kept"]), int(1));
    assert_eq!(sc.cmd(&["SET", "later", "v"]), ok());
    assert_eq!(sc.cmd(&["PEXPIRE", "later", "1"]), int(1));
    wait_for("expired", || {
        info_field(&mut sc, "stats", "expired_keys") == "2"
    });
    thread::sleep(Duration::from_millis(300));
    assert_eq!(info_field(&mut sc, "stats", "expired_keys"), "2");
    // `theirs` and `kept` remain (`theirs` reads as missing).
    assert_eq!(sc.cmd(&["DBSIZE"]), int(2));
    assert_eq!(sc.cmd(&["GET", "theirs"]), nil());
    assert_eq!(sc.cmd(&["GET", "kept"]), bulk("v"));
    assert_eq!(sc.cmd(&["EXISTS", "mine", "later"]), int(0));
}

#[test]
fn the_link_to_the_master_leaves_from_bind_source_addr() {
    let m = Server::start(&[]);
    let s = Server::start(&[]);
    let (mut mc, mut sc) = (m.raw(), s.raw());
    assert_eq!(mc.cmd(&["CONFIG", "SET", "protected-mode", "no"]), ok());
    assert_eq!(
        sc.cmd(&["CONFIG", "SET", "bind-source-addr", "127.0.0.2"]),
        ok()
    );
    assert_eq!(
        sc.cmd(&["CONFIG", "GET", "bind-source-addr"]),
        RespFrame::Array(vec![bulk("bind-source-addr"), bulk("127.0.0.2")])
    );
    let port = m.port.to_string();
    assert_eq!(sc.cmd(&["REPLICAOF", "127.0.0.1", &port]), ok());
    wait_for("linked", || {
        info_field(&mut sc, "replication", "master_link_status") == "up"
    });
    let slave0 = info_field(&mut mc, "replication", "slave0");
    assert!(slave0.starts_with("ip=127.0.0.2,"), "{slave0}");
}

#[test]
fn an_unusable_bind_source_addr_is_not_used() {
    let m = Server::start(&[]);
    // Not an address of this host: the link leaves from any address.
    let s = Server::start(&[
        ("bind-source-addr", "192.0.2.1"),
        ("replicaof", &format!("127.0.0.1 {}", m.port)),
    ]);
    let mut sc = s.raw();
    wait_for("linked", || {
        info_field(&mut sc, "replication", "master_link_status") == "up"
    });
    let slave0 = info_field(&mut m.raw(), "replication", "slave0");
    assert!(slave0.starts_with("ip=127.0.0.1,"), "{slave0}");
}

/// INFO replication's fields while the master's RDB is on its way, as
/// Redis 7.0.15 shows them (checked against it with a slow master): a
/// disk-based sync before the RDB's header (size -1, perc -0.00), an
/// EOF-mark RDB going to disk (size 0, bytes counted), the same RDB
/// parsed from the socket (nothing counted); a link never up has been down
/// since -1.
#[test]
fn info_shows_the_transfer_of_a_full_sync() {
    let m = Server::start(&[
        ("enable-debug-command", "yes"),
        ("repl-diskless-sync", "no"),
        ("repl-diskless-sync-delay", "0"),
        ("rdb-key-save-delay", "200"),
    ]);
    m.cli_out(&["DEBUG", "POPULATE", "20000"]);
    let port = m.port.to_string();
    let cases = [
        ("no", "disabled", "-1", "0", "-1", "-0.00"),
        ("yes", "disabled", "0", "*", "*", "0.00"),
        ("yes", "swapdb", "0", "0", "0", "0.00"),
    ];
    for (diskless, load, total, read, left, perc) in cases {
        m.cli_out(&["CONFIG", "SET", "repl-diskless-sync", diskless]);
        // Redis answers while it parses the socket only between events.
        let r = Server::start(&[
            ("repl-diskless-load", load),
            ("key-load-delay", "50"),
            ("loading-process-events-interval-bytes", "1024"),
        ]);
        r.cli_out(&["REPLICAOF", "127.0.0.1", &port]);
        let mut c = r.raw();
        let field = |c: &mut RawClient, f: &str| info_field(c, "replication", f);
        wait_for("the transfer", || {
            field(&mut c, "master_sync_in_progress") == "1"
                && (total == "-1" || field(&mut c, "master_sync_total_bytes") != "-1")
                && (read != "*" || field(&mut c, "master_sync_read_bytes") != "0")
        });
        let got = field(&mut c, "master_sync_read_bytes");
        let n: i64 = got.parse().unwrap();
        assert_eq!(
            field(&mut c, "master_sync_total_bytes"),
            total,
            "{diskless}/{load}"
        );
        if read == "*" {
            assert!(n > 0);
            let left = field(&mut c, "master_sync_left_bytes")
                .parse::<i64>()
                .unwrap();
            assert!(left <= -n, "{left} after {n}");
        } else {
            assert_eq!(
                (
                    got.as_str(),
                    field(&mut c, "master_sync_left_bytes").as_str()
                ),
                (read, left)
            );
        }
        assert_eq!(field(&mut c, "master_sync_perc"), perc, "{diskless}/{load}");
        assert!(
            field(&mut c, "master_sync_last_io_seconds_ago")
                .parse::<i64>()
                .unwrap()
                >= 0
        );
        assert_eq!(field(&mut c, "master_link_down_since_seconds"), "-1");
        drop(r);
        // The master's snapshot for it ends before the next case.
        wait_for("no replica", || {
            m.cli_out(&["INFO", "persistence"])
                .contains("rdb_bgsave_in_progress:0")
        });
    }
}

/// A replica over its maxmemory evicts nothing while it ignores maxmemory
/// (the default): it holds every key of its master, which deletes for it.
/// Told not to ignore it, it evicts on its own, as Redis's replica does.
#[test]
fn a_replica_ignoring_maxmemory_keeps_every_key_of_its_master() {
    let m = Server::start(&[]);
    let s = Server::start(&[
        ("replicaof", &format!("127.0.0.1 {}", m.port)),
        ("maxmemory", "4mb"),
        ("maxmemory-policy", "allkeys-lru"),
    ]);
    let (mut mc, mut sc) = (m.raw(), s.raw());
    wait_for("linked", || {
        info_field(&mut sc, "replication", "master_link_status") == "up"
    });
    let value = "v".repeat(300);
    let write = |mc: &mut RawClient, from: usize, to: usize| {
        let mut batch = Vec::new();
        for i in from..to {
            batch.extend(encode(&["SET", &format!("key:{i}"), &value]));
        }
        mc.send(&batch);
        for _ in from..to {
            assert_eq!(mc.read(), ok());
        }
    };
    write(&mut mc, 0, 20_000);
    assert_eq!(mc.cmd(&["WAIT", "1", "10000"]), int(1));
    assert!(info_int(&mut sc, "memory", "used_memory") > 4 << 20);
    assert_eq!(sc.cmd(&["DBSIZE"]), int(20_000));
    assert_eq!(info_int(&mut sc, "stats", "evicted_keys"), 0);

    assert_eq!(
        sc.cmd(&["CONFIG", "SET", "replica-ignore-maxmemory", "no"]),
        ok()
    );
    write(&mut mc, 20_000, 20_100);
    assert_eq!(mc.cmd(&["WAIT", "1", "10000"]), int(1));
    assert!(info_int(&mut sc, "stats", "evicted_keys") > 0);
    assert_eq!(mc.cmd(&["DBSIZE"]), int(20_100));
}

/// INFO's `slave_expires_tracked_keys` counts a writable replica's own keys
/// with a TTL.
#[test]
fn info_counts_the_keys_a_writable_replica_tracks_for_expiry() {
    let (_m, _s, _mc, mut sc) = writable_replica();
    assert_eq!(info_int(&mut sc, "stats", "slave_expires_tracked_keys"), 0);
    assert_eq!(sc.cmd(&["SET", "a", "v", "EX", "100"]), ok());
    assert_eq!(sc.cmd(&["SET", "b", "v"]), ok());
    assert_eq!(sc.cmd(&["EXPIRE", "b", "100"]), int(1));
    assert_eq!(sc.cmd(&["SET", "c", "v"]), ok());
    assert_eq!(info_int(&mut sc, "stats", "slave_expires_tracked_keys"), 2);
}

/// Makes the server of `rc` a replica of `m` and waits for its link.
fn follow(rc: &mut RawClient, m: &Server) {
    let port = m.port.to_string();
    assert_eq!(rc.cmd(&["REPLICAOF", "127.0.0.1", &port]), ok());
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while info_field(rc, "replication", "master_link_status") != "up" {
        assert!(std::time::Instant::now() < deadline, "no sync");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `replica-lazy-flush`: the replica's old keys, dropped before its full
/// sync loads, are freed in the background (counted in INFO memory's
/// `lazyfreed_objects`) only when it is on; by default they are freed at
/// once, as Redis does.
#[test]
fn replica_lazy_flush_frees_the_old_keys_in_the_background() {
    for (lazy, want) in [("no", 0), ("yes", 100)] {
        let m = Server::start(&[]);
        let r = Server::start(&[("replica-lazy-flush", lazy)]);
        let mut rc = r.raw();
        for i in 0..100 {
            assert_eq!(rc.cmd(&["SET", &format!("old{i}"), "v"]), ok());
        }
        follow(&mut rc, &m);
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        loop {
            let freed: u64 = info_field(&mut rc, "memory", "lazyfreed_objects")
                .parse()
                .unwrap();
            if freed == want || std::time::Instant::now() > deadline {
                assert_eq!(freed, want, "replica-lazy-flush {lazy}");
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        assert_eq!(rc.cmd(&["DBSIZE"]), int(0));
    }
}

/// `rdb-del-sync-files`: with no persistence of its own, a master removes
/// the RDB it wrote for a disk-based sync once its replica has it, and the
/// replica removes the one it loaded; without it both keep them.
#[test]
fn rdb_del_sync_files_removes_the_sync_rdbs() {
    for del in ["yes", "no"] {
        let opts = [
            ("rdb-del-sync-files", del),
            ("repl-diskless-sync", "no"),
            ("appendonly", "no"),
        ];
        let m = Server::start(&opts);
        let r = Server::start(&opts);
        let mut mc = m.raw();
        assert_eq!(mc.cmd(&["SET", "k", "v"]), ok());
        let mut rc = r.raw();
        follow(&mut rc, &m);
        assert_eq!(rc.cmd(&["GET", "k"]), bulk("v"));
        let files = || {
            (
                m.dir.join("dump.rdb").exists(),
                r.dir.join("dump.rdb").exists(),
            )
        };
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        let want = (del == "no", del == "no");
        while files() != want {
            assert!(
                std::time::Instant::now() < deadline,
                "rdb-del-sync-files {del}: (master, replica) files {:?}",
                files()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        std::thread::sleep(Duration::from_millis(1200));
        assert_eq!(files(), want, "rdb-del-sync-files {del}");
    }
}
