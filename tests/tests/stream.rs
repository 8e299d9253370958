//! Streams against the real Redis 7.0.15: a stream with several nodes,
//! deleted and trimmed entries, groups, consumers and pending entries
//! moves both ways through RDB files and DUMP/RESTORE with the same
//! contents (XINFO STREAM FULL, DEBUG DIGEST-VALUE); blocked XREAD and
//! XREADGROUP clients are served by writes from clients, MULTI and
//! scripts, and time out.

use cinnabar_tests::{is_real_redis, ok, text, tool, RawClient, RespFrame, Server, TempDir};
use std::time::Duration;

fn must(c: &mut RawClient, args: &[&str]) -> RespFrame {
    let r = c.cmd(args);
    assert!(!matches!(r, RespFrame::Error(_)), "{args:?} -> {r:?}");
    r
}

/// Small nodes, deleted and trimmed entries, two groups with consumers
/// and pending entries, one consumer without any, a NOACK read.
fn populate(c: &mut RawClient) {
    must(c, &["CONFIG", "SET", "stream-node-max-entries", "4"]);
    for i in 1..=40 {
        let id = format!("{}-{}", 1000 + i / 3, i % 3);
        if i % 5 == 0 {
            must(c, &["XADD", "s", &id, "other", &i.to_string()]);
        } else {
            must(c, &["XADD", "s", &id, "f", &i.to_string(), "g", "x"]);
        }
    }
    must(c, &["XDEL", "s", "1002-0", "1005-1", "1010-2"]);
    must(c, &["XTRIM", "s", "MAXLEN", "35"]);
    must(c, &["XGROUP", "CREATE", "s", "g1", "0"]);
    must(c, &["XGROUP", "CREATE", "s", "g2", "1007-0"]);
    must(
        c,
        &[
            "XREADGROUP",
            "GROUP",
            "g1",
            "alice",
            "COUNT",
            "5",
            "STREAMS",
            "s",
            ">",
        ],
    );
    must(
        c,
        &[
            "XREADGROUP",
            "GROUP",
            "g1",
            "bob",
            "COUNT",
            "3",
            "STREAMS",
            "s",
            ">",
        ],
    );
    must(
        c,
        &[
            "XREADGROUP",
            "GROUP",
            "g1",
            "bob",
            "NOACK",
            "COUNT",
            "2",
            "STREAMS",
            "s",
            ">",
        ],
    );
    must(
        c,
        &["XREADGROUP", "GROUP", "g2", "carol", "STREAMS", "s", ">"],
    );
    must(c, &["XACK", "s", "g2", "1008-0", "1009-1"]);
    must(c, &["XGROUP", "CREATECONSUMER", "s", "g2", "idle"]);
    must(c, &["XDEL", "s", "1008-1"]);
    must(c, &["XADD", "e", "1-1", "a", "b"]);
    must(c, &["XDEL", "e", "1-1"]);
    must(c, &["XGROUP", "CREATE", "e", "g", "$"]);
}

/// What must survive a move: the full introspection and the digest.
fn fingerprint(c: &mut RawClient) -> Vec<RespFrame> {
    let mut v = Vec::new();
    for k in ["s", "e"] {
        v.push(must(c, &["XINFO", "STREAM", k, "FULL", "COUNT", "0"]));
        v.push(must(c, &["DEBUG", "DIGEST-VALUE", k]));
        v.push(must(c, &["OBJECT", "ENCODING", k]));
    }
    v
}

fn redis(dir: &str) -> Option<Server> {
    let bin = tool("redis-server")?;
    Some(Server::start_bin(
        &bin,
        &[("dir", dir), ("enable-debug-command", "yes")],
    ))
}

fn cinnabar(dir: &str) -> Server {
    Server::start(&[("dir", dir), ("enable-debug-command", "yes")])
}

fn dump(c: &mut RawClient, k: &str) -> Vec<u8> {
    match c.cmd(&["DUMP", k]) {
        RespFrame::Bulk(p) => p.to_vec(),
        r => panic!("DUMP {k}: {r:?}"),
    }
}

#[test]
fn redis_rdb_and_dump_load_in_cinnabar() {
    if is_real_redis() {
        return;
    }
    let src = TempDir::new("stream-redis");
    let Some(r) = redis(src.dir()) else {
        eprintln!("redis-server not installed: skipped");
        return;
    };
    let mut rc = r.raw();
    populate(&mut rc);
    let theirs = fingerprint(&mut rc);
    assert_eq!(rc.cmd(&["SAVE"]), ok());
    let dst = TempDir::new("stream-from-redis");
    std::fs::copy(src.path().join("dump.rdb"), dst.path().join("dump.rdb")).unwrap();
    let s = cinnabar(dst.dir());
    let mut c = s.raw();
    assert_eq!(fingerprint(&mut c), theirs);
    // Redis's DUMP restores here, and ours there, byte for byte.
    for k in ["s", "e"] {
        let p = dump(&mut rc, k);
        let name = format!("copy:{k}");
        let r = c.cmd(&[b"RESTORE".as_slice(), name.as_bytes(), b"0", &p]);
        assert_eq!(r, ok());
        assert_eq!(dump(&mut c, &name), p, "{k}");
    }
}

#[test]
fn cinnabar_rdb_and_dump_load_in_redis() {
    if is_real_redis() {
        return;
    }
    if tool("redis-server").is_none() {
        eprintln!("redis-server not installed: skipped");
        return;
    }
    let src = TempDir::new("stream-ours");
    let s = cinnabar(src.dir());
    let mut c = s.raw();
    populate(&mut c);
    let ours = fingerprint(&mut c);
    assert_eq!(c.cmd(&["SAVE"]), ok());
    let dst = TempDir::new("stream-to-redis");
    let file = dst.path().join("dump.rdb");
    std::fs::copy(src.path().join("dump.rdb"), &file).unwrap();
    if let Some(check) = tool("redis-check-rdb") {
        let out = std::process::Command::new(check)
            .arg(&file)
            .output()
            .unwrap();
        let log = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && log.contains("RDB looks OK"),
            "{log}"
        );
    }
    let r = redis(dst.dir()).unwrap();
    let mut rc = r.raw();
    assert_eq!(fingerprint(&mut rc), ours);
    for k in ["s", "e"] {
        let p = dump(&mut c, k);
        let name = format!("copy:{k}");
        let r = rc.cmd(&[b"RESTORE".as_slice(), name.as_bytes(), b"0", &p]);
        assert_eq!(r, ok(), "Redis RESTORE of our DUMP of {k}");
        assert_eq!(
            text(&rc.cmd(&["DEBUG", "DIGEST-VALUE", &name])),
            text(&c.cmd(&["DEBUG", "DIGEST-VALUE", k]))
        );
    }
}

#[test]
fn blocked_readers_are_served_by_clients_multi_and_scripts() {
    let s = Server::start(&[]);
    let mut w = s.raw();
    must(&mut w, &["XADD", "s", "1-1", "a", "1"]);
    must(&mut w, &["XGROUP", "CREATE", "s", "g", "$"]);
    let mut r1 = s.raw();
    let mut r2 = s.raw();
    let mut r3 = s.raw();
    r1.send_cmd(&["XREAD", "BLOCK", "0", "STREAMS", "s", "$"]);
    r2.send_cmd(&[
        "XREADGROUP",
        "GROUP",
        "g",
        "c",
        "BLOCK",
        "0",
        "STREAMS",
        "s",
        ">",
    ]);
    r3.send_cmd(&["XREAD", "BLOCK", "50", "STREAMS", "nokey", "$"]);
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(r3.read(), RespFrame::Null);
    // A write in MULTI wakes both at EXEC.
    must(&mut w, &["MULTI"]);
    must(&mut w, &["XADD", "s", "2-1", "b", "2"]);
    must(&mut w, &["EXEC"]);
    for r in [&mut r1, &mut r2] {
        let got = format!("{:?}", r.read());
        assert!(got.contains("2-1"), "{got}");
    }
    // A script's write wakes a blocked reader after the script.
    r1.send_cmd(&["XREAD", "BLOCK", "0", "STREAMS", "s", "$"]);
    std::thread::sleep(Duration::from_millis(50));
    must(
        &mut w,
        &[
            "EVAL",
            "return redis.call('XADD', KEYS[1], '3-1', 'c', '3')",
            "1",
            "s",
        ],
    );
    let got = format!("{:?}", r1.read());
    assert!(got.contains("3-1"), "{got}");
    // Inside MULTI and scripts a BLOCK read answers at once.
    must(&mut w, &["MULTI"]);
    must(&mut w, &["XREAD", "BLOCK", "0", "STREAMS", "s", "$"]);
    let r = w.cmd(&["EXEC"]);
    assert_eq!(format!("{r:?}").matches("Null").count(), 1, "{r:?}");
    // The group's pending entries were propagated through the reads.
    let p = must(&mut w, &["XPENDING", "s", "g"]);
    assert!(format!("{p:?}").contains("2-1"), "{p:?}");
}

/// XINFO STREAM's `radix-tree-keys`: how many listpack nodes hold the
/// entries.
fn stream_nodes(c: &mut RawClient, key: &str) -> i64 {
    let RespFrame::Array(f) = must(c, &["XINFO", "STREAM", key]) else {
        panic!("XINFO STREAM {key}");
    };
    let at = f
        .iter()
        .position(|x| *x == RespFrame::Bulk("radix-tree-keys".into()))
        .expect("radix-tree-keys");
    match &f[at + 1] {
        RespFrame::Integer(n) => *n,
        x => panic!("{x:?}"),
    }
}

/// `stream-node-max-entries` and `stream-node-max-bytes` close a node
/// when it holds that many entries or bytes: seven entries make three
/// nodes of three under the one, four of under 60 bytes under the other,
/// as on redis-server 7.0.15.
#[test]
fn stream_node_limits_split_the_entries_into_nodes() {
    let s = Server::start(&[]);
    let mut c = s.raw();
    // The defaults (100 entries, 4096 bytes) keep them in one node.
    for (entries, bytes, key, nodes) in [
        ("100", "4096", "default", 1),
        ("3", "4096", "by-count", 3),
        ("100", "60", "by-size", 4),
    ] {
        assert_eq!(
            must(
                &mut c,
                &["CONFIG", "SET", "stream-node-max-entries", entries]
            ),
            ok()
        );
        assert_eq!(
            must(&mut c, &["CONFIG", "SET", "stream-node-max-bytes", bytes]),
            ok()
        );
        for _ in 0..7 {
            must(&mut c, &["XADD", key, "*", "field", "1234567890"]);
        }
        assert_eq!(stream_nodes(&mut c, key), nodes, "{key}");
    }
}
