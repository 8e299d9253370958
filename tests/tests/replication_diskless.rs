//! Diskless replication (`repl-diskless-sync`, Redis 7.0's default): the
//! RDB streamed to the replicas' sockets between `$EOF:<mark>` and the
//! mark, one snapshot for the replicas arriving within
//! `repl-diskless-sync-delay`, the stream held until the replica's first
//! ACK; and cinnabar reading that form from a real Redis master.

use cinnabar_tests::{bulk, err, info_field, ok, tool, wait_for, RawClient, Server};
use protocol::Frame;
use std::io::Read;
use std::time::{Duration, Instant};

/// A replica by hand: `capa eof`, then PSYNC ? -1; returns the
/// FULLRESYNC line and the RDB's header line.
fn psync_eof(s: &Server) -> (RawClient, String, String) {
    let mut c = begin(s);
    let (full, head) = heads(&mut c);
    (c, full, head)
}

fn begin(s: &Server) -> RawClient {
    let mut c = s.raw();
    assert_eq!(
        c.cmd(&["REPLCONF", "capa", "eof", "capa", "psync2"]),
        Frame::Simple("OK".into())
    );
    c.send_cmd(&["PSYNC", "?", "-1"]);
    c
}

/// The FULLRESYNC line and the RDB's header line.
fn heads(c: &mut RawClient) -> (String, String) {
    let full = line(c);
    (full, line(c))
}

/// One line, skipping the newlines a master sends as keep-alives.
fn line(c: &mut RawClient) -> String {
    let mut v = Vec::new();
    let mut b = [0u8; 1];
    loop {
        c.sock.read_exact(&mut b).expect("line");
        match b[0] {
            b'\n' if v.is_empty() => {}
            b'\n' => break,
            x => v.push(x),
        }
    }
    String::from_utf8(v).unwrap().trim_end().to_string()
}

/// Reads up to and including `mark`.
fn until_mark(c: &mut RawClient, mark: &[u8]) -> Vec<u8> {
    let mut v = Vec::new();
    let mut b = [0u8; 4096];
    while !v.ends_with(mark) {
        let n = c.sock.read(&mut b).expect("rdb bytes");
        assert!(n > 0, "closed mid-transfer");
        v.extend_from_slice(&b[..n]);
    }
    v.truncate(v.len() - mark.len());
    v
}

#[test]
fn the_rdb_comes_between_eof_marks_and_the_stream_after_the_first_ack() {
    let s = Server::start(&[
        ("repl-diskless-sync-delay", "0"),
        ("repl-ping-replica-period", "3600"),
    ]);
    let mut w = s.raw();
    w.cmd(&["SET", "a", "1"]);
    let (mut r, full, head) = psync_eof(&s);
    assert!(full.starts_with("+FULLRESYNC "), "{full}");
    let mark = head.strip_prefix("$EOF:").expect("an EOF mark");
    assert_eq!(mark.len(), 40);
    let rdb = until_mark(&mut r, mark.as_bytes());
    assert_eq!(&rdb[..9], b"REDIS0010");
    // Written after the snapshot: held until the replica acknowledges.
    w.cmd(&["SET", "b", "2"]);
    r.expect_silence(Duration::from_millis(300));
    let info = s.cli_out(&["INFO", "replication"]);
    assert!(info.contains("state=online"), "{info}");
    r.send_cmd(&["REPLCONF", "ACK", "0"]);
    let want = "*2\r\n$6\r\nSELECT\r\n$1\r\n0\r\n*3\r\n$3\r\nSET\r\n$1\r\nb\r\n$1\r\n2\r\n";
    let mut got = vec![0u8; want.len()];
    r.sock.read_exact(&mut got).unwrap();
    assert_eq!(String::from_utf8_lossy(&got), want);
    assert!(s
        .log()
        .contains("Starting BGSAVE for SYNC with target: replicas sockets"));
}

#[test]
fn replicas_arriving_within_the_delay_share_one_snapshot() {
    let s = Server::start(&[("repl-diskless-sync-delay", "2")]);
    let mut w = s.raw();
    for i in 0..100 {
        w.cmd(&["SET", &format!("k{i}"), "v"]);
    }
    let (mut a, mut b) = (begin(&s), begin(&s));
    let ((fa, ha), (fb, hb)) = (heads(&mut a), heads(&mut b));
    assert_eq!(fa, fb, "one snapshot, one offset");
    assert_eq!(ha, hb, "one transfer, one mark");
    let mark = ha.strip_prefix("$EOF:").unwrap().to_string();
    assert_eq!(
        until_mark(&mut a, mark.as_bytes()),
        until_mark(&mut b, mark.as_bytes())
    );
    let starts = s.log().matches("Starting BGSAVE for SYNC").count();
    assert_eq!(starts, 1);
    // A replica without `capa eof` gets the file and its length.
    s.cli_out(&["CONFIG", "SET", "repl-diskless-sync-delay", "0"]);
    let mut c = s.raw();
    c.send_cmd(&["SYNC"]);
    let head = line(&mut c);
    assert!(head.starts_with('$') && !head.starts_with("$EOF"), "{head}");
    assert!(s
        .log()
        .contains("Starting BGSAVE for SYNC with target: disk"));
}

#[test]
fn max_replicas_starts_the_sync_before_the_delay() {
    let s = Server::start(&[
        ("repl-diskless-sync-delay", "60"),
        ("repl-diskless-sync-max-replicas", "2"),
    ]);
    let t = Instant::now();
    let (mut a, mut b) = (begin(&s), begin(&s));
    let ((fa, _), (fb, _)) = (heads(&mut a), heads(&mut b));
    assert!(fa.starts_with("+FULLRESYNC") && fa == fb);
    assert!(t.elapsed() < Duration::from_secs(10));
}

#[test]
fn the_last_replica_gone_ends_the_transfer() {
    let s = Server::start(&[
        ("repl-diskless-sync-delay", "0"),
        ("rdb-key-save-delay", "10000"),
    ]);
    let mut w = s.raw();
    for i in 0..200 {
        w.cmd(&["SET", &format!("k{i}"), "v"]);
    }
    let (r, _, head) = psync_eof(&s);
    assert!(head.starts_with("$EOF:"));
    drop(r);
    wait_for("the transfer goes on", || {
        s.log()
            .contains("Diskless rdb transfer, last replica dropped")
    });
    wait_for("a save still runs", || {
        s.cli_out(&["INFO", "persistence"])
            .contains("rdb_bgsave_in_progress:0")
    });
}

#[test]
fn a_real_redis_replica_syncs_disklessly() {
    let Some(redis) = tool("redis-server") else {
        eprintln!("skipped: no redis-server");
        return;
    };
    let m = Server::start(&[
        ("enable-debug-command", "yes"),
        ("repl-diskless-sync-delay", "0"),
    ]);
    let mut c = m.raw();
    for i in 0..2000 {
        c.cmd(&["SET", &format!("k{i}"), "v"]);
        c.cmd(&["RPUSH", "l", &i.to_string()]);
    }
    let port = m.port.to_string();
    let r = Server::start_bin(
        &redis,
        &[
            ("replicaof", &format!("127.0.0.1 {port}")),
            ("enable-debug-command", "yes"),
        ],
    );
    c.cmd(&["SET", "after", "1"]);
    wait_for("the replica has the data", || {
        m.cli_out(&["DEBUG", "DIGEST"]) == r.cli_out(&["DEBUG", "DIGEST"])
    });
    assert!(m
        .log()
        .contains("Starting BGSAVE for SYNC with target: replicas sockets"));
}

#[test]
fn cinnabar_follows_a_diskless_redis_master() {
    let Some(redis) = tool("redis-server") else {
        eprintln!("skipped: no redis-server");
        return;
    };
    let m = Server::start_bin(
        &redis,
        &[
            ("enable-debug-command", "yes"),
            ("repl-diskless-sync", "yes"),
            ("repl-diskless-sync-delay", "0"),
        ],
    );
    let mut c = m.raw();
    for i in 0..500 {
        c.cmd(&["HSET", "h", &format!("f{i}"), "v"]);
    }
    let s = Server::start(&[
        ("enable-debug-command", "yes"),
        ("replicaof", &format!("127.0.0.1 {}", m.port)),
    ]);
    c.cmd(&["SET", "after", "1"]);
    wait_for("the replica has the data", || {
        m.cli_out(&["DEBUG", "DIGEST"]) == s.cli_out(&["DEBUG", "DIGEST"])
    });
    assert!(m.log().contains("target: replicas sockets"));
}

#[test]
fn an_online_replica_past_its_output_limit_is_closed() {
    let s = Server::start(&[
        ("repl-diskless-sync-delay", "0"),
        ("client-output-buffer-limit", "replica 64kb 0 0"),
    ]);
    let (mut r, _, head) = psync_eof(&s);
    let mark = head.strip_prefix("$EOF:").unwrap().to_string();
    until_mark(&mut r, mark.as_bytes());
    r.send_cmd(&["REPLCONF", "ACK", "0"]);
    wait_for("online", || {
        s.cli_out(&["INFO", "replication"]).contains("state=online")
    });
    // The replica reads nothing more: its output grows past 64 kB.
    // More than the socket buffers take.
    let big = "x".repeat(200_000);
    let mut w = s.raw();
    for i in 0..60 {
        w.cmd(&["SET", &format!("big{i}"), &big]);
    }
    wait_for("the replica is closed", || {
        s.cli_out(&["INFO", "replication"])
            .contains("connected_slaves:0")
    });
    assert!(s
        .log()
        .contains("scheduled to be closed ASAP for overcoming of output buffer limits"));
}

/// A master by hand: answers the handshake (+PONG to PING, +OK to the
/// rest) and hands the socket to `psync` when the replica sends PSYNC;
/// returns its port.
fn hand_master(psync: impl FnOnce(&mut std::net::TcpStream) + Send + 'static) -> u16 {
    use std::io::{BufRead, BufReader, Write};
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    std::thread::spawn(move || {
        let (sock, _) = l.accept().unwrap();
        let mut r = BufReader::new(sock.try_clone().unwrap());
        let mut w = sock;
        let mut line = String::new();
        // Each command is an array: its name is its second line's word.
        loop {
            line.clear();
            if r.read_line(&mut line).unwrap_or(0) == 0 {
                return;
            }
            let n: usize = line.trim_start_matches('*').trim().parse().unwrap_or(0);
            let mut words = Vec::new();
            for _ in 0..n * 2 {
                line.clear();
                r.read_line(&mut line).unwrap();
                words.push(line.trim().to_ascii_uppercase());
            }
            match words.get(1).map(String::as_str) {
                Some("PSYNC") => return psync(&mut w),
                Some("PING") => w.write_all(b"+PONG\r\n").unwrap(),
                _ => w.write_all(b"+OK\r\n").unwrap(),
            }
        }
    });
    port
}

/// A master that sends `rdb` as the full resync's image.
fn fake_master(rdb: Vec<u8>) -> u16 {
    hand_master(move |w| {
        use std::io::Write;
        let id = "a".repeat(40);
        write!(w, "+FULLRESYNC {id} 0\r\n${}\r\n", rdb.len()).unwrap();
        w.write_all(&rdb).unwrap();
        // Keep the link open while the replica loads.
        std::thread::sleep(Duration::from_secs(5));
    })
}

/// `repl-diskless-load`: `disabled` (the default) saves the master's RDB
/// as this server's file before loading it, `swapdb` does not and keeps
/// the old data when the master's image fails to load.
#[test]
fn diskless_load_modes() {
    // The master's image: a real one, from a server with one key.
    let m = Server::start(&[]);
    let mut c = m.raw();
    c.cmd(&["SET", "from-master", "1"]);
    c.cmd(&["SAVE"]);
    let good = std::fs::read(m.dir.join("dump.rdb")).unwrap();

    for (mode, bad) in [("disabled", false), ("swapdb", false), ("swapdb", true)] {
        let r = Server::start(&[("repl-diskless-load", mode)]);
        let mut rc = r.raw();
        rc.cmd(&["SET", "mine", "1"]);
        let mut rdb = good.clone();
        if bad {
            let n = rdb.len();
            rdb[n / 2] ^= 0x5a;
        }
        let port = fake_master(rdb).to_string();
        rc.cmd(&["REPLICAOF", "127.0.0.1", &port]);
        if bad {
            wait_for("the failed load", || {
                let log = r.log();
                log.contains("Failed trying to load the MASTER synchronization DB")
            });
            let kept = rc.cmd(&["EXISTS", "mine"]) == Frame::Integer(1);
            assert_eq!(kept, mode == "swapdb", "{mode}: {}", r.log());
        } else {
            wait_for("the sync", || {
                rc.cmd(&["EXISTS", "from-master"]) == Frame::Integer(1)
            });
            assert_eq!(rc.cmd(&["EXISTS", "mine"]), Frame::Integer(0));
            let saved = std::fs::read(r.dir.join("dump.rdb")).ok();
            assert_eq!(
                saved.as_deref() == Some(&good[..]),
                mode == "disabled",
                "{mode}"
            );
        }
    }
}

/// A master that starts a diskless full resync with replication ID `id`,
/// sends the first half of `rdb`, and cuts the link when told.
fn stalling_master(id: String, rdb: Vec<u8>, cut: std::sync::mpsc::Receiver<()>) -> u16 {
    hand_master(move |w| {
        use std::io::Write;
        let mark = "m".repeat(40);
        write!(w, "+FULLRESYNC {id} 0\r\n$EOF:{mark}\r\n").unwrap();
        w.write_all(&rdb[..rdb.len() / 2]).unwrap();
        let _ = cut.recv();
    })
}

/// `repl-diskless-load swapdb` loads the master's image beside the old
/// data: with the replica's own replication ID (the same history) the old
/// data stays in use (`async_loading`), refusing only what must wait;
/// with another ID the replica is `loading` and answers -LOADING. Either
/// way a transfer cut short leaves the old data in place.
#[test]
fn swapdb_keeps_the_old_data_until_the_new_has_loaded() {
    let m = Server::start(&[]);
    let mut c = m.raw();
    for i in 0..2000 {
        c.cmd(&["SET", &format!("from-master-{i}"), "x"]);
    }
    c.cmd(&["SAVE"]);
    let rdb = std::fs::read(m.dir.join("dump.rdb")).unwrap();
    const LOADING: &str = "LOADING Redis is loading the dataset in memory";

    for same_history in [true, false] {
        let r = Server::start(&[("repl-diskless-load", "swapdb")]);
        let mut rc = r.raw();
        rc.cmd(&["SET", "mine", "1"]);
        let id = if same_history {
            info_field(&mut rc, "replication", "master_replid")
        } else {
            "b".repeat(40)
        };
        let (cut, cut_rx) = std::sync::mpsc::channel();
        let port = stalling_master(id, rdb.clone(), cut_rx).to_string();
        rc.cmd(&["REPLICAOF", "127.0.0.1", &port]);
        let (on, off) = if same_history {
            ("async_loading", "loading")
        } else {
            ("loading", "async_loading")
        };
        wait_for(on, || info_field(&mut rc, "persistence", on) == "1");
        assert_eq!(info_field(&mut rc, "persistence", off), "0");
        assert!(r
            .log()
            .contains("MASTER <-> REPLICA sync: Loading DB in memory"));
        if same_history {
            assert_eq!(rc.cmd(&["GET", "mine"]), bulk("1"));
            assert_eq!(rc.cmd(&["DBSIZE"]), Frame::Integer(1));
            assert_eq!(rc.cmd(&["REPLICAOF", "NO", "ONE"]), err(LOADING));
            assert_eq!(rc.cmd(&["CONFIG", "SET", "appendonly", "no"]), err(LOADING));
            assert_eq!(rc.cmd(&["CONFIG", "SET", "save", ""]), ok());
        } else {
            assert_eq!(rc.cmd(&["GET", "mine"]), err(LOADING));
        }
        cut.send(()).unwrap();
        wait_for("the load to end", || {
            info_field(&mut rc, "persistence", on) == "0"
        });
        assert_eq!(rc.cmd(&["GET", "mine"]), bulk("1"));
        assert_eq!(rc.cmd(&["DBSIZE"]), Frame::Integer(1));
        let log = r.log();
        assert!(
            log.contains("Internal error in RDB reading offset"),
            "{log}"
        );
        assert!(
            log.contains("Discarding temporary DB in background"),
            "{log}"
        );
    }
}

/// A replica that turns to another master keeps its own replicas until
/// the history changes (Redis 7.0): a full sync that never completes
/// leaves them connected, with the same replication ID.
#[test]
fn replicas_stay_while_a_new_master_has_not_sent_its_rdb() {
    let m = Server::start(&[("repl-diskless-sync-delay", "0")]);
    m.raw().cmd(&["SET", "k", "v"]);
    let r = Server::start(&[
        ("replicaof", &format!("127.0.0.1 {}", m.port)),
        ("repl-diskless-load", "swapdb"),
        ("repl-diskless-sync-delay", "0"),
    ]);
    let sub = Server::start(&[("replicaof", &format!("127.0.0.1 {}", r.port))]);
    let (mut rc, mut sc) = (r.raw(), sub.raw());
    wait_for("the chain", || {
        info_field(&mut sc, "replication", "master_link_status") == "up"
            && sc.cmd(&["GET", "k"]) == bulk("v")
    });
    let id = info_field(&mut rc, "replication", "master_replid");
    let (cut, cut_rx) = std::sync::mpsc::channel();
    let port = stalling_master("c".repeat(40), vec![0; 64], cut_rx).to_string();
    rc.cmd(&["REPLICAOF", "127.0.0.1", &port]);
    wait_for("the transfer", || {
        info_field(&mut rc, "persistence", "loading") == "1"
    });
    assert_eq!(info_field(&mut rc, "replication", "connected_slaves"), "1");
    cut.send(()).unwrap();
    wait_for("the failed load", || {
        info_field(&mut rc, "persistence", "loading") == "0"
    });
    assert_eq!(info_field(&mut rc, "replication", "connected_slaves"), "1");
    assert_eq!(info_field(&mut rc, "replication", "master_replid"), id);
    assert_eq!(info_field(&mut sc, "replication", "master_replid"), id);
    assert_eq!(
        info_field(&mut sc, "replication", "master_link_status"),
        "up"
    );
}
