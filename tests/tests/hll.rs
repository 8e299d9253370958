//! HyperLogLogs move between cinnabar and the real Redis 7.0.15 — GET/SET,
//! DUMP/RESTORE, RDB and AOF, both ways — sparse and dense, with identical
//! bytes and counts. Skipped when redis-server is not installed.

use cinnabar_tests::{encode, is_real_redis, ok, tool, RawClient, RespFrame, Server, TempDir};

/// Cardinalities covering empty, sparse, the promotion and dense values.
const SIZES: [usize; 5] = [0, 1, 100, 10_000, 1_000_000];

fn redis(opts: &[(&str, &str)]) -> Option<Server> {
    if is_real_redis() {
        return None;
    }
    let Some(bin) = tool("redis-server") else {
        eprintln!("redis-server not installed: skipped");
        return None;
    };
    Some(Server::start_bin(&bin, opts))
}

fn bulk(f: RespFrame) -> Vec<u8> {
    match f {
        RespFrame::Bulk(b) => b.to_vec(),
        other => panic!("expected a bulk reply, got {other:?}"),
    }
}

/// PFADDs `n` elements to `key`, pipelined in batches of 1000.
fn fill(c: &mut RawClient, key: &str, n: usize) {
    c.cmd(&["PFADD", key]);
    let mut i = 0;
    while i < n {
        let mut wire = Vec::new();
        let mut sent = 0;
        while i < n && sent < 100 {
            let mut args = vec!["PFADD".to_string(), key.to_string()];
            args.extend((i..(i + 1000).min(n)).map(|j| format!("el:{j}")));
            wire.extend(encode(&args));
            i = (i + 1000).min(n);
            sent += 1;
        }
        c.send(&wire);
        for _ in 0..sent {
            assert!(matches!(c.read(), RespFrame::Integer(_)));
        }
    }
}

fn state(c: &mut RawClient, key: &str) -> (Vec<u8>, RespFrame, RespFrame) {
    let enc = c.cmd(&["PFDEBUG", "ENCODING", key]);
    let count = c.cmd(&["PFCOUNT", key]);
    (bulk(c.cmd(&["GET", key])), count, enc)
}

#[test]
fn same_elements_give_same_bytes_and_counts() {
    let Some(r) = redis(&[]) else { return };
    let s = Server::start(&[]);
    let (mut rc, mut sc) = (r.raw(), s.raw());
    for n in SIZES {
        let key = format!("h{n}");
        fill(&mut rc, &key, n);
        fill(&mut sc, &key, n);
        let (theirs, ours) = (state(&mut rc, &key), state(&mut sc, &key));
        assert_eq!(ours, theirs, "{n} elements");
        let dense = n >= 10_000;
        let enc = if dense { "dense" } else { "sparse" };
        assert_eq!(ours.2, RespFrame::Simple(enc.into()), "{n} elements");
    }
    let keys = ["PFCOUNT", "h1", "h100", "h10000", "h1000000"];
    assert_eq!(sc.cmd(&keys), rc.cmd(&keys));
    for c in [&mut rc, &mut sc] {
        assert_eq!(c.cmd(&["PFMERGE", "m", "h100", "h10000", "h0"]), ok());
    }
    assert_eq!(state(&mut sc, "m"), state(&mut rc, "m"));
}

#[test]
fn values_move_with_get_set_and_dump_restore() {
    let Some(r) = redis(&[]) else { return };
    let s = Server::start(&[]);
    let (mut rc, mut sc) = (r.raw(), s.raw());
    for n in SIZES {
        let key = format!("h{n}");
        // Written by Redis, read by cinnabar, and the reverse.
        fill(&mut rc, &key, n);
        let v = bulk(rc.cmd(&["GET", &key]));
        assert_eq!(sc.cmd(&[&b"SET"[..], key.as_bytes(), &v]), ok());
        let dump = bulk(rc.cmd(&["DUMP", &key]));
        let rkey = format!("r{n}");
        let restore = [&b"RESTORE"[..], rkey.as_bytes(), b"0", &dump];
        assert_eq!(sc.cmd(&restore), ok());
        assert_eq!(sc.cmd(&["PFCOUNT", &key]), rc.cmd(&["PFCOUNT", &key]));
        assert_eq!(sc.cmd(&["PFCOUNT", &rkey]), rc.cmd(&["PFCOUNT", &key]));
        for c in [&mut rc, &mut sc] {
            c.cmd(&["PFADD", &key, "one", "more", "of", "these"]);
        }
        let back = bulk(sc.cmd(&["GET", &key]));
        assert_eq!(back, bulk(rc.cmd(&["GET", &key])));
        let dump = bulk(sc.cmd(&["DUMP", &key]));
        let restore = [&b"RESTORE"[..], rkey.as_bytes(), b"0", &dump, b"REPLACE"];
        assert_eq!(rc.cmd(&restore), ok());
        assert_eq!(rc.cmd(&["PFCOUNT", &rkey]), sc.cmd(&["PFCOUNT", &key]));
    }
}

/// Writes HyperLogLogs (and commands that rewrite them) on `from`, then
/// starts `to` on the same directory and compares every value.
fn files_move(from_redis: bool, aof: bool) {
    let dir = TempDir::new("hll-files");
    let mut opts = vec![("dir", dir.dir())];
    if aof {
        opts.push(("appendonly", "yes"));
    }
    let start = |redis_side: bool| {
        if redis_side {
            redis(&opts)
        } else {
            Some(Server::start(&opts))
        }
    };
    let Some(a) = start(from_redis) else { return };
    let mut c = a.raw();
    let mut expect = Vec::new();
    for n in SIZES {
        let key = format!("h{n}");
        fill(&mut c, &key, n.min(20_000));
        c.cmd(&["PFCOUNT", &key]);
        expect.push(key);
    }
    c.cmd(&["PFMERGE", "m", "h1", "h100"]);
    c.cmd(&["PFDEBUG", "TODENSE", "h100"]);
    c.cmd(&["PFADD", "m", "x"]);
    expect.push("m".into());
    let values: Vec<_> = expect.iter().map(|k| state(&mut c, k)).collect();
    if !aof {
        assert_eq!(c.cmd(&["SAVE"]), ok());
    }
    drop(c);
    drop(a);
    let Some(b) = start(!from_redis) else { return };
    let mut c = b.raw();
    for (k, v) in expect.iter().zip(values) {
        assert_eq!(
            state(&mut c, k),
            v,
            "{k} (from redis: {from_redis}, aof: {aof})"
        );
    }
}

#[test]
fn rdb_moves_both_ways() {
    files_move(true, false);
    files_move(false, false);
}

#[test]
fn aof_moves_both_ways() {
    files_move(true, true);
    files_move(false, true);
}

#[test]
fn corrupt_and_foreign_values_are_refused() {
    let s = Server::start(&[]);
    let mut c = s.raw();
    c.cmd(&["PFADD", "h", "a", "b", "c"]);
    c.cmd(&["APPEND", "h", "hello"]);
    let corrupt = RespFrame::Error("INVALIDOBJ Corrupted HLL object detected".into());
    assert_eq!(c.cmd(&["PFCOUNT", "h"]), corrupt);
    c.cmd(&["SET", "s", "HYLL"]);
    let wrong = RespFrame::Error("WRONGTYPE Key is not a valid HyperLogLog string value.".into());
    assert_eq!(c.cmd(&["PFADD", "s", "x"]), wrong);
    // Random damage is an answer, never a crash.
    let mut v = bulk({
        c.cmd(&["PFADD", "d", "1", "2", "3", "4", "5", "6"]);
        c.cmd(&["GET", "d"])
    });
    for i in 16..v.len() {
        v[i] = v[i].wrapping_mul(31).wrapping_add(i as u8);
        c.cmd(&[&b"SET"[..], b"d", &v]);
        c.cmd(&["PFADD", "d", "z"]);
        c.cmd(&["PFCOUNT", "d", "h"]);
        c.cmd(&["PFDEBUG", "GETREG", "d"]);
    }
    assert_eq!(c.cmd(&["PING"]), RespFrame::Simple("PONG".into()));
}
