//! RDB persistence against the real Redis 7.0.15: files written by each
//! server load in the other with identical contents (DEBUG DIGEST, which
//! cinnabar computes with Redis's algorithm) and encodings; SAVE survives
//! SIGKILL; SIGTERM saves when save points are configured; corrupt and
//! truncated files are refused at start-up with the offset of the problem.

use cinnabar_tests::{
    free_port, is_real_redis, ok, server_bin, text, tool, wait_for, RawClient, RespFrame, Server,
    TempDir,
};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const DIGEST_TIMEOUT: Duration = Duration::from_secs(120);

fn cmd(c: &mut RawClient, args: &[&str]) -> RespFrame {
    c.cmd(args)
}

fn must(c: &mut RawClient, args: &[&str]) {
    let r = c.cmd(args);
    assert!(!matches!(r, RespFrame::Error(_)), "{args:?} -> {r:?}");
}

/// Every type in every encoding Redis 7.0 has, keys with TTLs, three dbs.
fn populate(c: &mut RawClient) {
    let big_list: Vec<String> = (0..2000).map(|i| format!("elem-{i}")).collect();
    let hash_big: Vec<String> = (0..200)
        .flat_map(|i| [format!("f{i}"), format!("v{i}")])
        .collect();
    let set_ints: Vec<String> = (0..100).map(|i| (i * 1000 - 7).to_string()).collect();
    let set_many_ints: Vec<String> = (0..600).map(|i| i.to_string()).collect();
    let zset_big: Vec<String> = (0..200)
        .flat_map(|i| [format!("{}", i as f64 / 3.0), format!("m{i}")])
        .collect();
    let long = "x".repeat(70);
    let mut run = |args: Vec<String>| {
        let a: Vec<&str> = args.iter().map(String::as_str).collect();
        must(c, &a);
    };
    let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    run(s(&["SELECT", "0"]));
    run(s(&["SET", "int", "12345"]));
    run(s(&["SET", "negint", "-70000"]));
    run(s(&["SET", "bigint", "123456789012345"]));
    run(s(&["SET", "emb", "hello world"]));
    run(s(&["SET", "raw", &"abc".repeat(40)]));
    run(s(&["SET", "bin", "\x00\x01\u{7f}\r\n"]));
    run(s(&["SET", "empty", ""]));
    run(s(&["APPEND", "appended", "12"]));
    run(s(&[
        "RPUSH",
        "list",
        "a",
        "1",
        "-5",
        "300",
        "70000",
        "5000000000",
        "hello",
    ]));
    let mut a = s(&["RPUSH", "biglist"]);
    a.extend(big_list.iter().cloned());
    run(a);
    run(s(&["LPUSH", "biglist", &"y".repeat(5000)]));
    run(s(&["HSET", "hlp", "a", "1", "b", "hello", "c", "-70000"]));
    let mut a = s(&["HSET", "hbig"]);
    a.extend(hash_big);
    run(a);
    run(s(&["HSET", "hlongval", "f", &long]));
    let mut a = s(&["SADD", "sint"]);
    a.extend(set_ints);
    run(a);
    run(s(&["SADD", "sint64", "1", "5000000000", "-5000000000"]));
    let mut a = s(&["SADD", "smanyint"]);
    a.extend(set_many_ints);
    run(a);
    run(s(&["SADD", "sstr", "a", "b", "c", "1"]));
    run(s(&[
        "ZADD", "zlp", "0.1", "a", "1.5", "b", "3", "c", "1e300", "d", "-inf", "e", "inf", "f",
    ]));
    let mut a = s(&["ZADD", "zbig"]);
    a.extend(zset_big);
    run(a);
    run(s(&["ZADD", "zlong", "1.25", &long, "2", "short"]));
    run(s(&"GEOADD geo 13.361389 38.115556 a -122.3 47.6 b"
        .split(' ')
        .collect::<Vec<_>>()));
    run(s(&["SET", "ttl1", "v", "PX", "3600000"]));
    run(s(&["RPUSH", "ttl2", "x"]));
    run(s(&["PEXPIREAT", "ttl2", "4102444800000"]));
    run(s(&["SELECT", "1"]));
    run(s(&["SET", "db1key", "one"]));
    run(s(&["HSET", "db1hash", "f", "v"]));
    run(s(&["EXPIRE", "db1hash", "1000"]));
    run(s(&["SELECT", "5"]));
    run(s(&["SADD", "db5set", "x", "y"]));
    run(s(&["ZADD", "db5z", "1", "one"]));
    run(s(&["SELECT", "0"]));
    // Function libraries are saved with the keys.
    run(s(&[
        "FUNCTION",
        "LOAD",
        "#!lua name=kept\nredis.register_function('kept', function() return 'still here' end)",
    ]));
}

const KEYS: &[(usize, &str)] = &[
    (0, "int"),
    (0, "negint"),
    (0, "bigint"),
    (0, "emb"),
    (0, "raw"),
    (0, "bin"),
    (0, "empty"),
    (0, "appended"),
    (0, "list"),
    (0, "biglist"),
    (0, "hlp"),
    (0, "hbig"),
    (0, "hlongval"),
    (0, "sint"),
    (0, "sint64"),
    (0, "smanyint"),
    (0, "sstr"),
    (0, "zlp"),
    (0, "zbig"),
    (0, "zlong"),
    (0, "geo"),
    (0, "ttl1"),
    (0, "ttl2"),
    (1, "db1key"),
    (1, "db1hash"),
    (5, "db5set"),
    (5, "db5z"),
];

/// Digest, then per key: encoding, type and whether it has a TTL.
fn fingerprint(c: &mut RawClient) -> (String, Vec<String>) {
    let digest = text(&cmd(c, &["DEBUG", "DIGEST"]));
    let mut per_key = Vec::new();
    for &(db, k) in KEYS {
        must(c, &["SELECT", &db.to_string()]);
        let enc = text(&cmd(c, &["OBJECT", "ENCODING", k]));
        let ttl = match cmd(c, &["PTTL", k]) {
            RespFrame::Integer(n) => n > 0,
            _ => false,
        };
        let dv = text(&cmd(c, &["DEBUG", "DIGEST-VALUE", k]));
        per_key.push(format!("{db}/{k}: {enc} ttl={ttl} {dv}"));
    }
    must(c, &["SELECT", "0"]);
    per_key.push(format!("{:?}", cmd(c, &["FUNCTION", "LIST", "WITHCODE"])));
    (digest, per_key)
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

fn copy_rdb(from: &Path, to: &TempDir) -> PathBuf {
    let dst = to.path().join("dump.rdb");
    std::fs::copy(from.join("dump.rdb"), &dst).expect("dump.rdb written");
    dst
}

#[test]
fn cinnabar_rdb_loads_in_redis() {
    if is_real_redis() {
        return;
    }
    let Some(_) = tool("redis-server") else {
        eprintln!("redis-server not installed: skipped");
        return;
    };
    let src = TempDir::new("src");
    let s = cinnabar(src.dir());
    let mut c = s.raw();
    populate(&mut c);
    let ours = fingerprint(&mut c);
    assert_eq!(cmd(&mut c, &["SAVE"]), ok());
    let dst = TempDir::new("to-redis");
    let file = copy_rdb(src.path(), &dst);
    if let Some(check) = tool("redis-check-rdb") {
        let out = Command::new(check).arg(&file).output().unwrap();
        let log = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && log.contains("RDB looks OK"),
            "redis-check-rdb:\n{log}"
        );
    }
    let r = redis(dst.dir()).unwrap();
    let mut rc = r.raw();
    let theirs = fingerprint(&mut rc);
    assert_eq!(ours.1, theirs.1);
    assert_eq!(ours.0, theirs.0);
}

#[test]
fn redis_rdb_loads_in_cinnabar() {
    if is_real_redis() {
        return;
    }
    let src = TempDir::new("redis-src");
    let Some(r) = redis(src.dir()) else {
        eprintln!("redis-server not installed: skipped");
        return;
    };
    let mut rc = r.raw();
    populate(&mut rc);
    let theirs = fingerprint(&mut rc);
    assert_eq!(cmd(&mut rc, &["SAVE"]), ok());
    let dst = TempDir::new("from-redis");
    copy_rdb(src.path(), &dst);
    let s = cinnabar(dst.dir());
    let mut c = s.raw();
    let ours = fingerprint(&mut c);
    assert_eq!(ours.1, theirs.1);
    assert_eq!(ours.0, theirs.0);

    // DUMP payloads cross over both ways, key by key.
    for &(_, k) in KEYS.iter().filter(|(db, _)| *db == 0) {
        let (from, to) = (&mut rc, &mut c);
        let p = from.cmd(&["DUMP", k]);
        let RespFrame::Bulk(p) = p else {
            panic!("DUMP {k}: {p:?}")
        };
        let name = format!("copy:{k}");
        let r = to.cmd(&[b"RESTORE".as_slice(), name.as_bytes(), b"0", &p]);
        assert_eq!(r, ok(), "RESTORE of Redis's DUMP of {k}");
        let back = to.cmd(&["DUMP", &name]);
        let RespFrame::Bulk(back) = back else {
            panic!("DUMP {name}")
        };
        let r = from.cmd(&[b"RESTORE".as_slice(), name.as_bytes(), b"0", &back]);
        assert_eq!(r, ok(), "Redis RESTORE of our DUMP of {k}");
        let a = text(&from.cmd(&["DEBUG", "DIGEST-VALUE", k, &name]));
        let b = text(&to.cmd(&["DEBUG", "DIGEST-VALUE", k, &name]));
        assert_eq!(a, b, "{k}");
        let enc_from = text(&from.cmd(&["OBJECT", "ENCODING", &name]));
        let enc_to = text(&to.cmd(&["OBJECT", "ENCODING", &name]));
        assert_eq!(enc_from, enc_to, "{k}");
    }
}

#[test]
fn save_survives_sigkill_and_sigterm_saves() {
    if is_real_redis() {
        return;
    }
    let keep = TempDir::new("kill");
    let s = cinnabar(keep.dir());
    let mut c = s.raw();
    populate(&mut c);
    let before = fingerprint(&mut c);
    let t0 = match cmd(&mut c, &["LASTSAVE"]) {
        RespFrame::Integer(n) => n,
        f => panic!("{f:?}"),
    };
    assert_eq!(cmd(&mut c, &["SAVE"]), ok());
    let info = text(&cmd(&mut c, &["INFO", "persistence"]));
    assert!(info.contains("rdb_changes_since_last_save:0"), "{info}");
    assert!(matches!(cmd(&mut c, &["LASTSAVE"]), RespFrame::Integer(n) if n >= t0));
    // Written after the save: lost with the SIGKILL.
    must(&mut c, &["SET", "after-save", "1"]);
    Command::new("kill")
        .args(["-9", &s.pid().to_string()])
        .status()
        .unwrap();
    drop(s);
    let s = cinnabar(keep.dir());
    let mut c = s.raw();
    assert_eq!(fingerprint(&mut c), before);
    assert_eq!(
        cmd(&mut c, &["EXISTS", "after-save"]),
        RespFrame::Integer(0)
    );
    drop(s);

    // With save points configured, SIGTERM saves before exiting.
    let term = TempDir::new("term");
    let mut s = Server::start(&[("dir", term.dir()), ("save", "3600 1")]);
    let mut c = s.raw();
    must(&mut c, &["SET", "k", "v"]);
    Command::new("kill")
        .args(["-TERM", &s.pid().to_string()])
        .status()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while s.alive() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(term.path().join("dump.rdb").exists(), "{}", s.log());
    drop(s);
    let s = cinnabar(term.dir());
    assert_eq!(
        s.raw().cmd(&["GET", "k"]),
        RespFrame::Bulk(b"v".to_vec().into())
    );
    // SHUTDOWN NOSAVE does not.
    let mut c = s.raw();
    must(&mut c, &["SET", "k", "changed"]);
    c.send_cmd(&["SHUTDOWN", "NOSAVE"]);
    drop(s);
    let s = cinnabar(term.dir());
    assert_eq!(
        s.raw().cmd(&["GET", "k"]),
        RespFrame::Bulk(b"v".to_vec().into())
    );
}

/// Starts cinnabar on `dir` expecting it to refuse to start; returns its
/// output.
fn refused_start(dir: &str) -> String {
    let port = free_port().to_string();
    let mut child = Command::new(server_bin())
        .args([
            "--port",
            &port,
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--dir",
            dir,
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(st) = child.try_wait().unwrap() {
            let out = child.wait_with_output().unwrap();
            let log = format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
            assert!(!st.success(), "exit status {st}: {log}");
            return log;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("server started on a corrupt RDB file");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn corrupt_and_truncated_files_are_refused() {
    if is_real_redis() {
        return;
    }
    let src = TempDir::new("good");
    let s = cinnabar(src.dir());
    let mut c = s.raw();
    populate(&mut c);
    assert_eq!(cmd(&mut c, &["SAVE"]), ok());
    let good = std::fs::read(src.path().join("dump.rdb")).unwrap();
    drop(s);

    // A byte flipped at a few places (header, aux, keys, values, checksum).
    for pos in [3, 20, good.len() / 3, good.len() / 2, good.len() - 3] {
        let d = TempDir::new("flip");
        let mut bad = good.clone();
        bad[pos] ^= 0x5a;
        std::fs::write(d.path().join("dump.rdb"), &bad).unwrap();
        let log = refused_start(d.dir());
        assert!(
            log.contains("Terminating server after rdb file reading failure.")
                && log.contains("offset"),
            "flip at {pos}: {log}"
        );
    }
    // Only the stored checksum differs: Redis's "RDB CRC error".
    let d = TempDir::new("crc");
    let mut bad = good.clone();
    let n = bad.len();
    bad[n - 8..].copy_from_slice(b"foobar00");
    std::fs::write(d.path().join("dump.rdb"), &bad).unwrap();
    let log = refused_start(d.dir());
    assert!(log.contains("RDB CRC error"), "{log}");
    for cut in [5, good.len() / 2, good.len() - 1] {
        let d = TempDir::new("cut");
        std::fs::write(d.path().join("dump.rdb"), &good[..cut]).unwrap();
        let log = refused_start(d.dir());
        assert!(
            log.contains("offset") && (log.contains("end of file") || log.contains("short")),
            "cut at {cut}: {log}"
        );
    }
}

#[test]
fn debug_reload_keeps_the_dataset() {
    if is_real_redis() {
        return;
    }
    let d = TempDir::new("reload");
    let s = cinnabar(d.dir());
    let mut c = s.raw();
    populate(&mut c);
    let before = fingerprint(&mut c);
    assert_eq!(cmd(&mut c, &["DEBUG", "RELOAD"]), ok());
    assert_eq!(fingerprint(&mut c), before);
}

#[test]
fn restore_idletime_sets_the_access_clock() {
    let s = Server::start(&[]);
    let mut c = s.raw();
    must(&mut c, &["SET", "k", "v"]);
    let RespFrame::Bulk(p) = c.cmd(&["DUMP", "k"]) else {
        panic!("DUMP")
    };
    let r = c.cmd(&[&b"RESTORE"[..], b"k2", b"0", &p, b"IDLETIME", b"100"]);
    assert_eq!(r, ok());
    match c.cmd(&["OBJECT", "IDLETIME", "k2"]) {
        RespFrame::Integer(n) => assert!((100..=102).contains(&n), "{n}"),
        f => panic!("{f:?}"),
    }
}

// ------------------------------------------------------------------ BGSAVE

fn info_field(c: &mut RawClient, name: &str) -> String {
    let info = text(&cmd(c, &["INFO", "persistence"]));
    info.lines()
        .find_map(|l| l.strip_prefix(&format!("{name}:")))
        .unwrap_or_else(|| panic!("no {name} in INFO:\n{info}"))
        .trim()
        .to_string()
}

fn wait_bgsave(c: &mut RawClient) {
    let deadline = Instant::now() + Duration::from_secs(120);
    while info_field(c, "rdb_bgsave_in_progress") == "1" {
        assert!(Instant::now() < deadline, "BGSAVE did not finish");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A keyspace big enough for the background walk to take a while: strings
/// (DEBUG POPULATE), hashes, lists, sets, sorted sets, TTLs, two dbs.
fn big_dataset(c: &mut RawClient, strings: usize) {
    must(c, &["DEBUG", "POPULATE", &strings.to_string(), "k", "20"]);
    let mut batch = Vec::new();
    for i in 0..3000 {
        batch.extend(cinnabar_tests::encode(&[
            "HSET",
            &format!("h:{i}"),
            "f1",
            "a",
            "f2",
            &i.to_string(),
        ]));
        batch.extend(cinnabar_tests::encode(&[
            "RPUSH",
            &format!("l:{i}"),
            "x",
            "y",
            &i.to_string(),
        ]));
        batch.extend(cinnabar_tests::encode(&[
            "SADD",
            &format!("s:{i}"),
            "1",
            "2",
            "m",
        ]));
        batch.extend(cinnabar_tests::encode(&[
            "ZADD",
            &format!("z:{i}"),
            "1.5",
            "a",
            &i.to_string(),
            "b",
        ]));
        batch.extend(cinnabar_tests::encode(&[
            "SET",
            &format!("t:{i}"),
            "ttl",
            "EX",
            "100000",
        ]));
    }
    c.send(&batch);
    for _ in 0..3000 * 5 {
        let r = c.read();
        assert!(!matches!(r, RespFrame::Error(_)), "{r:?}");
    }
    must(c, &["SELECT", "3"]);
    must(c, &["DEBUG", "POPULATE", "30000", "d3", "10"]);
    must(c, &["SELECT", "9"]);
    must(c, &["DEBUG", "POPULATE", "5000", "d9", "10"]);
    must(c, &["SELECT", "0"]);
    must(c, &["SET", "counter", "0"]);
}

/// Every kind of write, pipelined, until the background save ends; returns
/// how many were acknowledged while it was still running.
fn write_during_bgsave(port: u16) -> u64 {
    let mut w = RawClient::connect(port);
    let mut probe = RawClient::connect(port);
    let mut during = 0u64;
    let mut round = 0u64;
    loop {
        let running = info_field(&mut probe, "rdb_bgsave_in_progress") == "1";
        if !running {
            return during;
        }
        let mut batch = Vec::new();
        let mut n = 0;
        for j in 0..50 {
            let i = round * 50 + j;
            let k = |p: &str, m: u64| format!("{p}:{}", (i * 7919) % m);
            let cmds: Vec<Vec<String>> = vec![
                vec!["INCR".into(), "counter".into()],
                vec!["SET".into(), k("k", 100_000), "overwritten".into()],
                vec!["DEL".into(), k("k", 90_000)],
                vec!["SET".into(), format!("new:{i}"), "n".into()],
                vec!["HSET".into(), k("h", 3000), "f1".into(), "changed".into()],
                vec!["RPUSH".into(), k("l", 3000), "more".into()],
                vec!["SREM".into(), k("s", 3000), "m".into()],
                vec!["ZINCRBY".into(), k("z", 3000), "10".into(), "a".into()],
                vec!["PERSIST".into(), k("t", 3000)],
                vec!["EXPIRE".into(), k("t", 2000), "5".into()],
                vec!["RENAME".into(), k("h", 2500), format!("renamed:{i}")],
                // Moves a database not walked yet below one being walked.
                vec!["SWAPDB".into(), "1".into(), "9".into()],
            ];
            for c in cmds {
                batch.extend(cinnabar_tests::encode(&c));
                n += 1;
            }
        }
        w.send(&batch);
        for _ in 0..n {
            w.read();
        }
        during += n;
        round += 1;
    }
}

#[test]
fn bgsave_is_a_point_in_time_image_while_clients_write() {
    if is_real_redis() {
        return;
    }
    let d = TempDir::new("pit");
    let s = cinnabar(d.dir());
    let mut c = s.raw();
    // DEBUG DIGEST of ~550,000 keys on a debug build under load.
    c.set_timeout(DIGEST_TIMEOUT);
    big_dataset(&mut c, 100_000);
    must(&mut c, &["SET", "marker", "before"]);
    let image = text(&cmd(&mut c, &["DEBUG", "DIGEST"]));
    let dbsize = cmd(&mut c, &["DBSIZE"]);
    assert_eq!(
        cmd(&mut c, &["BGSAVE"]),
        cinnabar_tests::simple("Background saving started")
    );
    must(&mut c, &["SET", "marker", "after"]);
    let during = write_during_bgsave(s.port);
    assert!(during > 0, "no write landed during the BGSAVE");
    wait_bgsave(&mut c);
    assert_eq!(info_field(&mut c, "rdb_last_bgsave_status"), "ok");
    // The live dataset did change.
    assert_ne!(text(&cmd(&mut c, &["DEBUG", "DIGEST"])), image);

    let dst = TempDir::new("pit-load");
    let file = copy_rdb(d.path(), &dst);
    if let Some(check) = tool("redis-check-rdb") {
        let out = Command::new(check).arg(&file).output().unwrap();
        let log = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && log.contains("RDB looks OK"),
            "redis-check-rdb:\n{log}"
        );
    }
    let s2 = cinnabar(dst.dir());
    let mut c2 = s2.raw();
    c2.set_timeout(DIGEST_TIMEOUT);
    assert_eq!(text(&cmd(&mut c2, &["DEBUG", "DIGEST"])), image);
    assert_eq!(cmd(&mut c2, &["DBSIZE"]), dbsize);
    assert_eq!(
        cmd(&mut c2, &["GET", "marker"]),
        cinnabar_tests::bulk("before")
    );
    assert_eq!(cmd(&mut c2, &["GET", "counter"]), cinnabar_tests::bulk("0"));
    // Real Redis reads the same image.
    if tool("redis-server").is_some() {
        let r = redis(dst.dir()).unwrap();
        let mut rc = r.raw();
        rc.set_timeout(DIGEST_TIMEOUT);
        // Redis answers DEBUG while it is still loading.
        while info_field(&mut rc, "loading") != "0" {
            std::thread::sleep(Duration::from_millis(20));
        }
        assert_eq!(text(&cmd(&mut rc, &["DEBUG", "DIGEST"])), image);
    }
}

#[test]
fn shutdown_during_bgsave_keeps_every_acknowledged_write() {
    if is_real_redis() {
        return;
    }
    let d = TempDir::new("shut");
    let s = Server::start(&[
        ("dir", d.dir()),
        ("enable-debug-command", "yes"),
        ("save", "3600 1"),
    ]);
    let mut c = s.raw();
    big_dataset(&mut c, 300_000);
    assert_eq!(
        cmd(&mut c, &["BGSAVE"]),
        cinnabar_tests::simple("Background saving started")
    );
    let mut w = s.raw();
    let mut acked = 0u64;
    for i in 0..200 {
        must(&mut w, &["INCR", "counter"]);
        must(&mut w, &["SET", &format!("w:{i}"), "v"]);
        acked += 1;
    }
    let in_progress = info_field(&mut c, "rdb_bgsave_in_progress");
    c.send(&cinnabar_tests::encode(&["SHUTDOWN"]));
    c.expect_closed();
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut s = s;
    while s.alive() {
        assert!(Instant::now() < deadline, "server did not exit");
        std::thread::sleep(Duration::from_millis(20));
    }
    let log = s.log();
    // The BGSAVE may also have finished between the INFO and the SHUTDOWN.
    if in_progress == "1" && !log.contains("Background saving terminated with success") {
        assert!(log.contains("Killing it"), "{log}");
    }
    assert!(log.contains("DB saved on disk"), "{log}");
    let s2 = cinnabar(d.dir());
    let mut c2 = s2.raw();
    assert_eq!(
        cmd(&mut c2, &["GET", "counter"]),
        cinnabar_tests::bulk(acked.to_string())
    );
    for i in 0..200 {
        assert_eq!(
            cmd(&mut c2, &["EXISTS", &format!("w:{i}")]),
            RespFrame::Integer(1)
        );
    }
    let entries = std::fs::read_dir(d.path()).unwrap().count();
    assert_eq!(entries, 1, "temporary files left behind");
}

#[test]
fn save_points_start_a_bgsave() {
    if is_real_redis() {
        return;
    }
    let d = TempDir::new("points");
    let s = Server::start(&[("dir", d.dir()), ("save", "1 1 100 100")]);
    let mut c = s.raw();
    let t0 = match cmd(&mut c, &["LASTSAVE"]) {
        RespFrame::Integer(n) => n,
        f => panic!("{f:?}"),
    };
    must(&mut c, &["SET", "a", "1"]);
    assert_eq!(info_field(&mut c, "rdb_changes_since_last_save"), "1");
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if matches!(cmd(&mut c, &["LASTSAVE"]), RespFrame::Integer(n) if n > t0) {
            break;
        }
        assert!(Instant::now() < deadline, "no save point fired");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(d.path().join("dump.rdb").exists());
    assert_eq!(info_field(&mut c, "rdb_changes_since_last_save"), "0");
    assert_eq!(info_field(&mut c, "rdb_saves"), "1");
    assert_eq!(info_field(&mut c, "rdb_last_bgsave_status"), "ok");
    assert!(s.log().contains("1 changes in 1 seconds. Saving..."));
}

/// Replies checked against redis-server 7.0.15.
#[test]
fn bgsave_replies_as_redis() {
    let d = TempDir::new("replies");
    let s = cinnabar(d.dir());
    let mut c = s.raw();
    let e = |m: &str| RespFrame::Error(m.to_string().into());
    assert_eq!(cmd(&mut c, &["BGSAVE", "foo"]), e("ERR syntax error"));
    assert_eq!(
        cmd(&mut c, &["BGSAVE", "schedule", "x"]),
        e("ERR syntax error")
    );
    assert_eq!(info_field(&mut c, "rdb_last_bgsave_time_sec"), "-1");
    must(&mut c, &["DEBUG", "POPULATE", "200000"]);
    assert_eq!(
        cmd(&mut c, &["BGSAVE"]),
        cinnabar_tests::simple("Background saving started")
    );
    if info_field(&mut c, "rdb_bgsave_in_progress") == "1" {
        let busy = e("ERR Background save already in progress");
        assert_eq!(cmd(&mut c, &["BGSAVE"]), busy);
        assert_eq!(cmd(&mut c, &["BGSAVE", "SCHEDULE"]), busy);
        assert_eq!(cmd(&mut c, &["SAVE"]), busy);
    }
    wait_bgsave(&mut c);
    assert_eq!(info_field(&mut c, "rdb_saves"), "1");
    assert_eq!(info_field(&mut c, "rdb_current_bgsave_time_sec"), "-1");
    assert_eq!(info_field(&mut c, "rdb_last_bgsave_time_sec").len(), 1);
    // Inside MULTI the save is scheduled, and the cron starts it.
    must(&mut c, &["MULTI"]);
    assert_eq!(cmd(&mut c, &["BGSAVE"]), cinnabar_tests::simple("QUEUED"));
    match cmd(&mut c, &["EXEC"]) {
        RespFrame::Array(v) => assert_eq!(
            v,
            vec![cinnabar_tests::simple("Background saving scheduled")]
        ),
        f => panic!("{f:?}"),
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    while info_field(&mut c, "rdb_saves") != "2" {
        assert!(Instant::now() < deadline, "scheduled BGSAVE never ran");
        std::thread::sleep(Duration::from_millis(20));
    }
    wait_bgsave(&mut c);
    assert_eq!(cmd(&mut c, &["SAVE"]), ok());
    assert_eq!(info_field(&mut c, "rdb_saves"), "3");
}

/// Checked against redis-server 7.0.15 with its directory removed.
#[test]
fn failed_bgsave_stops_writes_with_misconf() {
    let base = TempDir::new("misconf");
    let dir = base.path().join("data");
    std::fs::create_dir(&dir).unwrap();
    let s = Server::start(&[("dir", dir.to_str().unwrap()), ("save", "3600 1")]);
    let mut c = s.raw();
    must(&mut c, &["SET", "a", "1"]);
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(cmd(&mut c, &["SAVE"]), RespFrame::Error("ERR".into()));
    assert_eq!(info_field(&mut c, "rdb_last_bgsave_status"), "ok");
    assert_eq!(
        cmd(&mut c, &["BGSAVE"]),
        cinnabar_tests::simple("Background saving started")
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    while info_field(&mut c, "rdb_last_bgsave_status") != "err" {
        assert!(Instant::now() < deadline, "BGSAVE did not fail");
        std::thread::sleep(Duration::from_millis(20));
    }
    let misconf = RespFrame::Error(
        "MISCONF Redis is configured to save RDB snapshots, but it's currently unable to persist to disk. Commands that may modify the data set are disabled, because this instance is configured to report errors during writes if RDB snapshotting fails (stop-writes-on-bgsave-error option). Please check the Redis logs for details about the RDB error."
            .into(),
    );
    assert_eq!(cmd(&mut c, &["SET", "a", "2"]), misconf);
    assert_eq!(cmd(&mut c, &["DEL", "a"]), misconf);
    assert_eq!(cmd(&mut c, &["PING"]), misconf);
    assert_eq!(cmd(&mut c, &["GET", "a"]), cinnabar_tests::bulk("1"));
    assert_eq!(cmd(&mut c, &["PUBLISH", "ch", "m"]), RespFrame::Integer(0));
    // A script that declares flags is refused whole unless `no-writes`.
    assert_eq!(cmd(&mut c, &["EVAL", "#!lua\nreturn 1", "0"]), misconf);
    assert_eq!(
        cmd(&mut c, &["EVAL", "#!lua flags=no-writes\nreturn 1", "0"]),
        RespFrame::Integer(1)
    );
    must(&mut c, &["MULTI"]);
    assert_eq!(cmd(&mut c, &["SET", "a", "1"]), misconf);
    assert_eq!(
        cmd(&mut c, &["EXEC"]),
        RespFrame::Error("EXECABORT Transaction discarded because of previous errors.".into())
    );
    assert_eq!(info_field(&mut c, "rdb_changes_since_last_save"), "1");
    must(
        &mut c,
        &["CONFIG", "SET", "stop-writes-on-bgsave-error", "no"],
    );
    assert_eq!(cmd(&mut c, &["SET", "a", "3"]), ok());
    must(
        &mut c,
        &["CONFIG", "SET", "stop-writes-on-bgsave-error", "yes"],
    );
    must(&mut c, &["CONFIG", "SET", "save", ""]);
    assert_eq!(cmd(&mut c, &["SET", "a", "4"]), ok());
    must(&mut c, &["CONFIG", "SET", "save", "3600 1"]);
    assert_eq!(cmd(&mut c, &["SET", "a", "5"]), misconf);
    // The directory is back: the next save succeeds and writes resume.
    std::fs::create_dir(&dir).unwrap();
    if !is_real_redis() {
        assert_eq!(
            cmd(&mut c, &["BGSAVE"]),
            cinnabar_tests::simple("Background saving started")
        );
        wait_bgsave(&mut c);
        assert_eq!(info_field(&mut c, "rdb_last_bgsave_status"), "ok");
        assert_eq!(cmd(&mut c, &["SET", "a", "6"]), ok());
        assert!(dir.join("dump.rdb").exists());
    }
}

/// An AOF write that fails (here: the next incr file is /dev/full) stops
/// writes and PING with Redis's MISCONF naming the OS error, as Redis
/// 7.0.15 does with the same trick.
#[test]
fn failed_aof_write_stops_writes_with_misconf() {
    let dir = TempDir::new("aof-misconf");
    let s = Server::start(&[("dir", dir.dir()), ("appendonly", "yes")]);
    let mut c = s.raw();
    let aofdir = dir.path().join("appendonlydir");
    wait_for("the AOF to be created", || {
        aofdir.join("appendonly.aof.1.incr.aof").exists()
    });
    std::os::unix::fs::symlink("/dev/full", aofdir.join("appendonly.aof.2.incr.aof")).unwrap();
    assert_eq!(
        cmd(&mut c, &["BGREWRITEAOF"]),
        cinnabar_tests::simple("Background append only file rewriting started")
    );
    wait_for("the rewrite to end", || {
        info_field(&mut c, "aof_rewrite_in_progress") == "0"
            && info_field(&mut c, "aof_rewrite_scheduled") == "0"
    });
    assert_eq!(cmd(&mut c, &["SET", "a", "1"]), ok());
    wait_for("the write to fail", || {
        info_field(&mut c, "aof_last_write_status") == "err"
    });
    let misconf =
        RespFrame::Error("MISCONF Errors writing to the AOF file: No space left on device".into());
    assert_eq!(cmd(&mut c, &["SET", "b", "1"]), misconf);
    assert_eq!(cmd(&mut c, &["PING"]), misconf);
    assert_eq!(cmd(&mut c, &["GET", "a"]), cinnabar_tests::bulk("1"));
}

/// A replica that cannot persist (its BGSAVE failed) is sent a write by
/// its master: refusing it would make the replica diverge, so it crashes
/// with Redis's message, or with `replica-ignore-disk-write-errors yes`
/// logs and applies it. Checked against redis-server 7.0.15.
#[test]
fn a_replica_that_cannot_persist_crashes_or_applies() {
    for ignore in ["no", "yes"] {
        let master = Server::start(&[("repl-diskless-sync-delay", "0")]);
        let base = TempDir::new("replica-misconf");
        let data = base.path().join("data");
        std::fs::create_dir(&data).unwrap();
        let mut replica = Server::start(&[
            ("dir", data.to_str().unwrap()),
            ("save", "3600 1"),
            ("replica-ignore-disk-write-errors", ignore),
            ("replicaof", &format!("127.0.0.1 {}", master.port)),
        ]);
        let mut r = replica.raw();
        wait_for("the replica to sync", || {
            cinnabar_tests::info_field(&mut r, "replication", "master_link_status") == "up"
        });
        std::fs::remove_dir_all(&data).unwrap();
        must(&mut r, &["BGSAVE"]);
        wait_for("BGSAVE to fail", || {
            info_field(&mut r, "rdb_last_bgsave_status") == "err"
        });
        must(&mut master.raw(), &["SET", "a", "1"]);
        if ignore == "no" {
            wait_for("the replica to crash", || !replica.alive());
            assert!(
                replica
                    .log()
                    .contains("Replica was unable to write command to disk."),
                "{}",
                replica.log()
            );
        } else {
            wait_for("the write to arrive", || {
                cmd(&mut r, &["GET", "a"]) == cinnabar_tests::bulk("1")
            });
            assert!(replica.log().contains(
                "Replica is applying a command even though it is unable to write to disk."
            ));
        }
    }
}

/// The changes the save points count (`rdb_changes_since_last_save`): one
/// per element added, updated or removed, as Redis 7.0.15 counts them.
#[test]
fn changes_count_elements() {
    let s = Server::start(&[]);
    let mut c = s.raw();
    let changes = |c: &mut RawClient| -> i64 {
        let info = text(&c.cmd(&["INFO", "persistence"]));
        let v = info
            .lines()
            .find_map(|l| l.strip_prefix("rdb_changes_since_last_save:"));
        v.unwrap().trim().parse().unwrap()
    };
    for (want, cmd) in [
        (3, &["ZADD", "z", "1", "a", "2", "b", "3", "c"][..]),
        (2, &["ZADD", "z", "5", "a", "2", "b", "9", "d"]),
        (2, &["ZREM", "z", "a", "b", "zz"]),
        (1, &["ZREMRANGEBYRANK", "z", "0", "0"]),
        (3, &["SADD", "s", "a", "b", "c"]),
        (2, &["SREM", "s", "a", "b", "zz"]),
        (1, &["SPOP", "s", "5"]),
        (3, &["HSET", "h", "a", "1", "b", "2", "c", "3"]),
        (2, &["HSET", "h", "a", "5", "d", "4"]),
        (2, &["HDEL", "h", "a", "b", "zz"]),
        (3, &["RPUSH", "l", "a", "b", "c"]),
        (2, &["GEOADD", "g", "1", "1", "a", "2", "2", "b"]),
    ] {
        let before = changes(&mut c);
        c.cmd(cmd);
        assert_eq!(changes(&mut c) - before, want, "{cmd:?}");
    }
}

/// With save points, FLUSHALL saves the empty dataset at once: no change
/// is left to save, and the save is not counted as one of SAVE/BGSAVE's.
#[test]
fn flushall_with_save_points_saves_at_once() {
    let s = Server::start(&[("save", "3600 1")]);
    let mut c = s.raw();
    assert_eq!(cmd(&mut c, &["SET", "key", "value"]), ok());
    assert_eq!(info_field(&mut c, "rdb_changes_since_last_save"), "1");
    assert_eq!(cmd(&mut c, &["FLUSHALL"]), ok());
    assert_eq!(info_field(&mut c, "rdb_changes_since_last_save"), "0");
    assert_eq!(info_field(&mut c, "rdb_saves"), "0");
    assert!(s.dir.join("dump.rdb").exists());
    assert!(s.log().contains("DB saved on disk"));
    // Without save points it is a change like any other.
    assert_eq!(cmd(&mut c, &["CONFIG", "SET", "save", ""]), ok());
    assert_eq!(cmd(&mut c, &["SET", "key", "value"]), ok());
    assert_eq!(cmd(&mut c, &["FLUSHALL"]), ok());
    assert_eq!(info_field(&mut c, "rdb_changes_since_last_save"), "2");
}

/// `rdb-key-save-delay` is per key saved, keys that writes captured
/// before the walk reached them included, as a forked child's: a BGSAVE of
/// 10 keys at 0.2 s each still runs after 1 s though every key was
/// overwritten as it started (Redis's suite counts on such saves lasting).
#[test]
fn the_key_save_delay_counts_keys_captured_by_writes() {
    let s = Server::start(&[("rdb-key-save-delay", "200000")]);
    let mut c = s.raw();
    for i in 0..10 {
        must(&mut c, &["SET", &format!("k{i}"), "v"]);
    }
    cmd(&mut c, &["BGSAVE"]);
    for i in 0..10 {
        must(&mut c, &["SET", &format!("k{i}"), "w"]);
    }
    std::thread::sleep(std::time::Duration::from_secs(1));
    assert_eq!(info_field(&mut c, "rdb_bgsave_in_progress"), "1");
}

/// `dbfilename` names the file SAVE writes; `rdbchecksum no` (immutable)
/// leaves its last eight bytes, the CRC64, zero; `rdbcompression` packs a
/// long, repetitive string with LZF. Checked on redis-server 7.0.15 too.
#[test]
fn dbfilename_rdbchecksum_and_rdbcompression_shape_the_file() {
    let mut files = Vec::new();
    for checksum in ["no", "yes"] {
        let d = TempDir::new("rdbopts");
        let s = Server::start(&[
            ("dir", d.dir()),
            ("dbfilename", "other.rdb"),
            ("rdbchecksum", checksum),
            ("rdbcompression", "no"),
        ]);
        let mut c = s.raw();
        must(&mut c, &["SET", "k", &"a".repeat(10_000)]);
        must(&mut c, &["SAVE"]);
        let plain = std::fs::read(d.path().join("other.rdb")).expect("SAVE writes dbfilename");
        assert!(!d.path().join("dump.rdb").exists());
        must(&mut c, &["CONFIG", "SET", "rdbcompression", "yes"]);
        must(&mut c, &["SAVE"]);
        let packed = std::fs::read(d.path().join("other.rdb")).unwrap();
        files.push((checksum, plain, packed));
    }
    for (checksum, plain, packed) in files {
        assert!(plain.len() > 10_000, "{}", plain.len());
        assert!(packed.len() < 1_000, "{}", packed.len());
        for f in [plain, packed] {
            assert_eq!(
                f[f.len() - 8..] == [0; 8],
                checksum == "no",
                "rdbchecksum {checksum}"
            );
        }
    }
}
