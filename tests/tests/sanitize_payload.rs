//! `sanitize-dump-payload` as INFO's `dump_payload_sanitizations` shows
//! it: Redis 7.0.15 counts one sanitization per listpack or intset it
//! deep-checks (each node of a list or stream), under `yes` for every
//! RESTORE and every load, under `clients` for RESTOREs from clients but
//! its master and users flagged `skip-sanitize-payload`, under `no` never.
//! cinnabar checks every payload in full; the setting decides what counts.
//!
//! Run `CINNABAR_BIN=$(command -v redis-server) cargo test -p
//! cinnabar-tests --test sanitize_payload` to check them against Redis.

use cinnabar_tests::{
    err, info_field, info_int, int, ok, RawClient, RespFrame as Frame, Server, TempDir,
};

/// The listpacks and intsets of `fill`'s keys.
const BLOBS: i64 = 8;

fn sanitizations(c: &mut RawClient) -> i64 {
    info_int(c, "stats", "dump_payload_sanitizations")
}

fn set(c: &mut RawClient, name: &str, value: &str) {
    assert_eq!(c.cmd(&["CONFIG", "SET", name, value]), ok(), "{name}");
}

/// Keys of every kind: a hash listpack (1 blob), an intset (1), a list of
/// three nodes (3), a stream of three nodes (3), a string and a hash table
/// (none). The list's nodes are full at the default fill, so a save
/// writes the nodes it holds.
fn fill(c: &mut RawClient) -> Vec<&'static str> {
    set(c, "stream-node-max-entries", "2");
    let big = "v".repeat(3000);
    let long = "w".repeat(100);
    let cmds: Vec<Vec<&str>> = vec![
        vec!["HSET", "h", "a", "1", "b", "2"],
        vec!["SADD", "s", "1", "2", "3"],
        vec!["RPUSH", "l", &big, &big, &big, &big, &big, &big],
        vec!["XADD", "x", "1-1", "f", "v"],
        vec!["XADD", "x", "1-2", "f", "v"],
        vec!["XADD", "x", "1-3", "f", "v"],
        vec!["XADD", "x", "1-4", "f", "v"],
        vec!["XADD", "x", "1-5", "f", "v"],
        vec!["SET", "str", "hello"],
        vec!["HSET", "ht", "f", &long],
    ];
    for cmd in cmds {
        assert!(!matches!(c.cmd(&cmd), Frame::Error(_)), "{cmd:?}");
    }
    set(c, "stream-node-max-entries", "100");
    vec!["h", "s", "l", "x", "str", "ht"]
}

fn dump(c: &mut RawClient, key: &str) -> Vec<u8> {
    match c.cmd(&["DUMP", key]) {
        Frame::Bulk(b) => b.to_vec(),
        f => panic!("DUMP {key}: {f:?}"),
    }
}

fn restore(c: &mut RawClient, key: &str, payload: &[u8]) -> Frame {
    c.cmd(&[b"RESTORE", key.as_bytes(), b"0", payload, b"REPLACE"])
}

/// What restoring every payload through `how` adds to the count, read on
/// `admin`.
fn counted(
    admin: &mut RawClient,
    payloads: &[(&str, Vec<u8>)],
    mut how: impl FnMut(&str, &[u8]),
) -> i64 {
    let before = sanitizations(admin);
    for (k, p) in payloads {
        how(k, p);
    }
    sanitizations(admin) - before
}

#[test]
fn restores_count_by_the_setting_and_the_caller() {
    let s = Server::start(&[("enable-debug-command", "yes")]);
    let mut c = s.raw();
    let keys = fill(&mut c);
    let payloads: Vec<_> = keys.iter().map(|k| (*k, dump(&mut c, k))).collect();
    let rule = ["ACL", "SETUSER", "trusted", "on", "nopass", "+@all", "~*"];
    assert_eq!(
        c.cmd(&[&rule[..], &["skip-sanitize-payload"]].concat()),
        ok()
    );
    let mut trusted = s.raw();
    assert_eq!(trusted.cmd(&["AUTH", "trusted", "x"]), ok());
    let lua = "return redis.call('RESTORE', KEYS[1], 0, ARGV[1], 'REPLACE')";
    for (mode, by_client, by_trusted) in
        [("no", 0, 0), ("yes", BLOBS, BLOBS), ("clients", BLOBS, 0)]
    {
        set(&mut c, "sanitize-dump-payload", mode);
        let mut d = s.raw();
        let plain = counted(&mut c, &payloads, |k, p| {
            assert_eq!(restore(&mut d, k, p), ok())
        });
        let multi = counted(&mut c, &payloads, |k, p| {
            assert_eq!(d.cmd(&["MULTI"]), ok());
            restore(&mut d, k, p);
            assert_eq!(d.cmd(&["EXEC"]), Frame::Array(vec![ok()]));
        });
        let script = counted(&mut c, &payloads, |k, p| {
            let r = d.cmd(&[b"EVAL", lua.as_bytes(), b"1", k.as_bytes(), p]);
            assert_eq!(r, ok());
        });
        let skip = counted(&mut c, &payloads, |k, p| {
            assert_eq!(restore(&mut trusted, k, p), ok());
            let r = trusted.cmd(&[b"EVAL", lua.as_bytes(), b"1", k.as_bytes(), p]);
            assert_eq!(r, ok());
        });
        assert_eq!(
            (plain, multi, script, skip),
            (by_client, by_client, by_client, 2 * by_trusted),
            "sanitize-dump-payload {mode}"
        );
    }
    // A blob refused by its check counts; a payload refused for its
    // footer, or for a key in the way, is not read.
    assert_eq!(c.cmd(&["DEBUG", "SET-SKIP-CHECKSUM-VALIDATION", "1"]), ok());
    let dup = b"\x10\x17\x17\x00\x00\x00\x04\x00\x82a\x00\x03\x82b\x00\x03\x82a\x00\x03\x82d\x00\x03\xff\x0a\x00\xc0\xcf\xa6\x87\xe5\xa7\xc5\xbe";
    let n = sanitizations(&mut c);
    assert_eq!(restore(&mut c, "bad", dup), err("ERR Bad data format"));
    assert_eq!(sanitizations(&mut c), n + 1);
    assert_eq!(c.cmd(&["DEBUG", "SET-SKIP-CHECKSUM-VALIDATION", "0"]), ok());
    let mut wrong = payloads[0].1.clone();
    *wrong.last_mut().unwrap() ^= 1;
    let wrong_sum = err("ERR DUMP payload version or checksum are wrong");
    assert_eq!(restore(&mut c, "bad", &wrong), wrong_sum);
    let r = c.cmd(&[&b"RESTORE"[..], b"h", b"0", &payloads[0].1]);
    assert_eq!(r, err("BUSYKEY Target key name already exists."));
    assert_eq!(sanitizations(&mut c), n + 1);
    assert_eq!(c.cmd(&["CONFIG", "RESETSTAT"]), ok());
    assert_eq!(sanitizations(&mut c), 0);
}

#[test]
fn loads_count_only_under_yes() {
    let s = Server::start(&[("enable-debug-command", "yes")]);
    let mut c = s.raw();
    fill(&mut c);
    for (mode, counts) in [("no", 0), ("yes", BLOBS), ("clients", 0)] {
        set(&mut c, "sanitize-dump-payload", mode);
        let before = sanitizations(&mut c);
        assert_eq!(c.cmd(&["DEBUG", "RELOAD"]), ok());
        assert_eq!(
            sanitizations(&mut c) - before,
            counts,
            "DEBUG RELOAD, {mode}"
        );
    }
    assert_eq!(c.cmd(&["SAVE"]), ok());
    let file = std::fs::read(s.dir.join("dump.rdb")).expect("dump.rdb");
    for (mode, counts) in [("no", 0), ("yes", BLOBS), ("clients", 0)] {
        let dir = TempDir::new("sanitize-load");
        std::fs::write(dir.path().join("dump.rdb"), &file).unwrap();
        let r = Server::start(&[("dir", dir.dir()), ("sanitize-dump-payload", mode)]);
        let mut rc = r.raw();
        assert_eq!(rc.cmd(&["DBSIZE"]), int(6));
        assert_eq!(sanitizations(&mut rc), counts, "start-up load, {mode}");
    }
}

/// Under `clients` a replica trusts its master: neither the RDB of the
/// full sync nor a RESTORE in the stream counts; its own clients' do.
#[test]
fn a_replica_counts_its_master_only_under_yes() {
    let m = Server::start(&[]);
    let mut mc = m.raw();
    fill(&mut mc);
    let x = dump(&mut mc, "x");
    for (mode, from_master) in [("clients", 0), ("yes", BLOBS)] {
        let r = Server::start(&[
            ("sanitize-dump-payload", mode),
            ("replica-read-only", "no"),
            ("replicaof", &format!("127.0.0.1 {}", m.port)),
        ]);
        let mut rc = r.raw();
        cinnabar_tests::wait_for("the link", || {
            info_field(&mut rc, "replication", "master_link_status") == "up"
        });
        assert_eq!(sanitizations(&mut rc), from_master, "full sync, {mode}");
        let copy = format!("copy-{mode}");
        assert_eq!(restore(&mut mc, &copy, &x), ok());
        cinnabar_tests::wait_for("the RESTORE", || rc.cmd(&["EXISTS", &copy]) == int(1));
        let stream = sanitizations(&mut rc) - from_master;
        assert_eq!(stream, if mode == "yes" { 3 } else { 0 }, "stream, {mode}");
        let before = sanitizations(&mut rc);
        assert_eq!(restore(&mut rc, "mine", &x), ok());
        assert_eq!(
            sanitizations(&mut rc) - before,
            3,
            "replica's client, {mode}"
        );
        assert_eq!(mc.cmd(&["DEL", &copy]), int(1));
    }
}
