//! The append-only file: durability of acknowledged writes across SIGKILL
//! (`appendfsync always` and `everysec`), truncated and damaged files at
//! start-up, BGREWRITEAOF, turning the AOF on at run time, and interop with
//! the real redis-server 7.0.15 in both directions (its files load here,
//! ours load there and pass redis-check-aof).

use cinnabar_tests::{
    encode, is_real_redis, server_bin, tool, RawClient, RespFrame, Server, TempDir,
};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn start(bin: &Path, dir: &TempDir, extra: &[(&str, &str)]) -> Server {
    let mut opts = vec![
        ("dir", dir.dir()),
        ("appendonly", "yes"),
        ("enable-debug-command", "yes"),
    ];
    opts.extend_from_slice(extra);
    Server::start_bin(bin, &opts)
}

fn sigkill(s: &Server) {
    let _ = Command::new("kill")
        .args(["-9", &s.pid().to_string()])
        .status();
    std::thread::sleep(Duration::from_millis(50));
}

fn int(f: &RespFrame) -> i64 {
    match f {
        RespFrame::Integer(i) => *i,
        RespFrame::Bulk(b) => std::str::from_utf8(b).unwrap().parse().unwrap(),
        other => panic!("not an integer: {other:?}"),
    }
}

fn bulk(f: &RespFrame) -> Vec<u8> {
    match f {
        RespFrame::Bulk(b) => b.to_vec(),
        other => panic!("not a bulk: {other:?}"),
    }
}

/// Operation `i` of the workload: INCR, RPUSH or HSET by `i % 3`.
fn op(i: u64) -> Vec<String> {
    match i % 3 {
        0 => vec!["INCR".into(), "cnt".into()],
        1 => vec!["RPUSH".into(), "list".into(), i.to_string()],
        _ => vec!["HSET".into(), "hash".into(), format!("f{i}"), i.to_string()],
    }
}

/// How many of the first `p` operations are of kind `k`.
fn count(p: u64, k: u64) -> u64 {
    (p + 2 - k) / 3
}

/// The prefix length the restarted dataset holds (checked to be a prefix).
fn persisted_prefix(c: &mut RawClient, lo: u64, hi: u64) -> u64 {
    let cnt = match c.cmd(&["GET", "cnt"]) {
        RespFrame::Null => 0,
        f => int(&f) as u64,
    };
    let llen = int(&c.cmd(&["LLEN", "list"])) as u64;
    let hlen = int(&c.cmd(&["HLEN", "hash"])) as u64;
    let p = (lo..=hi)
        .find(|&p| count(p, 0) == cnt && count(p, 1) == llen && count(p, 2) == hlen)
        .unwrap_or_else(|| {
            panic!("cnt={cnt} llen={llen} hlen={hlen} is no prefix within {lo}..={hi}")
        });
    if llen > 0 {
        // The list's order is the operations' order.
        let last = bulk(&c.cmd(&["LINDEX", "list", "-1"]));
        let want = (0..p).rev().find(|i| i % 3 == 1).unwrap();
        assert_eq!(last, want.to_string().into_bytes());
    }
    p
}

/// Sends operations from `from` in pipelined batches until the connection
/// dies; `acked` counts replies received (as an absolute op index).
fn writer(port: u16, from: u64, acked: Arc<AtomicU64>, sent: Arc<AtomicU64>, stop_at: u64) {
    let mut c = RawClient::connect(port);
    c.set_timeout(Duration::from_secs(5));
    let mut next = from;
    while next < stop_at {
        let n = 32.min(stop_at - next);
        let mut buf = Vec::new();
        for i in next..next + n {
            buf.extend_from_slice(&encode(&op(i)));
        }
        sent.store(next + n, Ordering::SeqCst);
        if c.sock_write(&buf).is_err() {
            return;
        }
        for _ in 0..n {
            match c.try_read() {
                Ok(RespFrame::Error(e)) => panic!("error reply {e:?}"),
                Ok(_) => {
                    next += 1;
                    acked.store(next, Ordering::SeqCst);
                }
                Err(_) => return,
            }
        }
    }
}

trait SockWrite {
    fn sock_write(&mut self, b: &[u8]) -> std::io::Result<()>;
}

impl SockWrite for RawClient {
    fn sock_write(&mut self, b: &[u8]) -> std::io::Result<()> {
        use std::io::Write;
        self.sock.write_all(b)
    }
}

/// Runs `rounds` of: start, write, SIGKILL at a random moment, restart and
/// check; then a last round writes the rest up to `rounds * per_round`
/// operations and is killed after its last reply. Returns, per round,
/// (acknowledged, persisted, sent).
fn crash_rounds(fsync: &str, rounds: usize, per_round: u64) -> Vec<(u64, u64, u64)> {
    use rand::Rng;
    let mut rng = rand::thread_rng();
    let dir = TempDir::new(&format!("crash-{fsync}"));
    let bin = server_bin();
    let mut base = 0u64;
    let mut seen = Vec::new();
    for round in 0..=rounds {
        let s = start(&bin, &dir, &[("appendfsync", fsync)]);
        let mut c = s.raw();
        if round > 0 {
            assert_eq!(persisted_prefix(&mut c, base, base), base);
        }
        let acked = Arc::new(AtomicU64::new(base));
        let sent = Arc::new(AtomicU64::new(base));
        let target = (round as u64 + 1).min(rounds as u64) * per_round;
        let w = {
            let (a, sn, port) = (acked.clone(), sent.clone(), s.port);
            std::thread::spawn(move || writer(port, base, a, sn, target))
        };
        // A random moment in the round; the last round runs to its end.
        let kill_after = if round < rounds && base < target {
            rng.gen_range(base..target)
        } else {
            target
        };
        let deadline = Instant::now() + Duration::from_secs(20);
        while acked.load(Ordering::SeqCst) < kill_after && Instant::now() < deadline {
            std::thread::sleep(Duration::from_micros(200));
        }
        if round < rounds {
            // Somewhere inside the next batch.
            std::thread::sleep(Duration::from_micros(rng.gen_range(0..2000)));
        }
        sigkill(&s);
        w.join().unwrap();
        let (a, sn) = (acked.load(Ordering::SeqCst), sent.load(Ordering::SeqCst));
        drop(c);
        drop(s);
        let s = start(&bin, &dir, &[("appendfsync", fsync)]);
        let mut c = s.raw();
        let p = persisted_prefix(&mut c, base, sn);
        seen.push((a, p, sn));
        base = p;
        drop(s);
    }
    seen
}

#[test]
fn always_keeps_every_acknowledged_write_across_sigkill() {
    if is_real_redis() {
        return;
    }
    let rounds = crash_rounds("always", 5, 4000);
    eprintln!("always rounds (acked, persisted, sent): {rounds:?}");
    for (acked, persisted, sent) in &rounds {
        assert!(
            persisted >= acked && persisted <= sent,
            "acked {acked}, persisted {persisted}, sent {sent}: {rounds:?}"
        );
    }
    assert_eq!(rounds.last().unwrap().1, 20_000, "{rounds:?}");
}

#[test]
fn everysec_loses_at_most_the_last_seconds() {
    if is_real_redis() {
        return;
    }
    // SIGKILL keeps what was written to the kernel, so at most the writer
    // thread's queue (well under a second of writes) can be missing.
    let rounds = crash_rounds("everysec", 2, 3000);
    for (acked, persisted, sent) in &rounds {
        assert!(persisted <= sent, "{rounds:?}");
        assert!(acked - persisted.min(acked) <= 3000, "{rounds:?}");
    }
}

fn write_sample(c: &mut RawClient) {
    for args in [
        vec!["SET", "s", "v"],
        vec!["SET", "ttl", "v", "EX", "1000"],
        vec!["RPUSH", "l", "a", "b", "c"],
        vec!["HSET", "h", "f", "1", "g", "2"],
        vec!["SADD", "set", "1", "2", "3"],
        vec!["ZADD", "z", "1", "a", "2.5", "b"],
        vec!["INCRBYFLOAT", "fl", "1.5"],
        vec!["HINCRBYFLOAT", "h", "f", "0.25"],
        vec!["EXPIRE", "l", "5000"],
        vec!["SELECT", "3"],
        vec!["SET", "in3", "x"],
        vec!["SELECT", "0"],
        vec![
            "EVAL",
            "redis.call('set','e1','1'); redis.call('incr','e1')",
            "0",
        ],
        vec!["LPOP", "l"],
        vec!["XADD", "st", "1-1", "a", "1"],
        vec!["XADD", "st", "2-1", "b", "2"],
        vec!["XGROUP", "CREATE", "st", "g", "0"],
        vec![
            "XREADGROUP",
            "GROUP",
            "g",
            "alice",
            "COUNT",
            "1",
            "STREAMS",
            "st",
            ">",
        ],
        vec!["XGROUP", "CREATECONSUMER", "st", "g", "bob"],
    ] {
        let r = c.cmd(&args);
        assert!(!matches!(r, RespFrame::Error(_)), "{args:?}: {r:?}");
    }
    c.send(b"MULTI\r\nSET m 1\r\nINCR m\r\nEXEC\r\n");
    for _ in 0..4 {
        c.read();
    }
}

/// DEBUG DIGEST hashes every key under the lock: a debug build on a busy
/// machine takes longer than the client's usual 10 s over 200,000 keys.
fn digest(c: &mut RawClient) -> RespFrame {
    c.set_timeout(Duration::from_secs(120));
    c.cmd(&["DEBUG", "DIGEST"])
}

#[test]
fn interop_with_real_redis_both_ways() {
    let (Some(redis), Some(check)) = (tool("redis-server"), tool("redis-check-aof")) else {
        return;
    };
    if is_real_redis() {
        return;
    }
    let ours = server_bin();
    // With the preamble off the base is commands (`.base.aof`).
    for preamble in ["yes", "no"] {
        for (writer_bin, reader_bin) in [(&ours, &redis), (&redis, &ours)] {
            let dir = TempDir::new("interop");
            let opts = [
                ("appendfsync", "always"),
                ("aof-use-rdb-preamble", preamble),
            ];
            let s = start(writer_bin, &dir, &opts);
            let mut c = s.raw();
            write_sample(&mut c);
            let lib =
                "#!lua name=lib\nredis.register_function('hello', function() return 'hi' end)";
            assert_eq!(
                c.cmd(&["FUNCTION", "LOAD", lib]),
                cinnabar_tests::bulk("lib")
            );
            assert_eq!(
                c.cmd(&["BGREWRITEAOF"]),
                cinnabar_tests::simple("Background append only file rewriting started")
            );
            wait_rewrites(&mut c);
            let ext = if preamble == "yes" { "rdb" } else { "aof" };
            assert!(aof_files(&dir).contains(&format!("appendonly.aof.2.base.{ext}")));
            c.cmd(&["SET", "after-rewrite", "1"]);
            // Geo writes as each server propagates them (ZADD, the commands).
            for line in [
                "GEOADD geo 13.361389 38.115556 a 15.087269 37.502669 b",
                "GEORADIUS geo 15 37 200 km STOREDIST geo-d",
                "GEOSEARCHSTORE geo-s geo FROMMEMBER a BYRADIUS 1 km",
            ] {
                c.cmd(&line.split(' ').collect::<Vec<_>>());
            }
            c.cmd(&["SELECT", "3"]);
            c.cmd(&["SET", "after-rewrite-3", "1"]);
            let want = digest(&mut c);
            drop(c);
            sigkill(&s);
            drop(s);
            let manifest = dir
                .path()
                .join("appendonlydir")
                .join("appendonly.aof.manifest");
            let out = Command::new(&check)
                .arg(&manifest)
                .stdin(Stdio::null())
                .output()
                .unwrap();
            let text = String::from_utf8_lossy(&out.stdout);
            assert!(
                text.contains("All AOF files and manifest are valid"),
                "{}: {text}",
                writer_bin.display()
            );
            let s = start(reader_bin, &dir, &[]);
            let mut c = s.raw();
            assert_eq!(
                digest(&mut c),
                want,
                "{} -> {}",
                writer_bin.display(),
                reader_bin.display()
            );
            assert_eq!(bulk(&c.cmd(&["GET", "fl"])), b"1.5");
            assert!(int(&c.cmd(&["TTL", "ttl"])) > 900);
            assert_eq!(c.cmd(&["FCALL", "hello", "0"]), cinnabar_tests::bulk("hi"));
        }
    }
}

/// `aof-timestamp-enabled yes`: the `#TS:` annotations either server
/// writes load in the other.
#[test]
fn timestamp_annotations_interop_with_real_redis() {
    let Some(redis) = tool("redis-server") else {
        return;
    };
    if is_real_redis() {
        return;
    }
    let ours = server_bin();
    for (writer_bin, reader_bin) in [(&redis, &ours), (&ours, &redis)] {
        let dir = TempDir::new("aof-ts");
        let s = start(
            writer_bin,
            &dir,
            &[("appendfsync", "always"), ("aof-timestamp-enabled", "yes")],
        );
        let mut c = s.raw();
        write_sample(&mut c);
        let want = digest(&mut c);
        drop(c);
        sigkill(&s);
        drop(s);
        let text = std::fs::read(incr_file(&dir)).unwrap();
        assert!(
            text.starts_with(b"#TS:"),
            "{}: {}",
            writer_bin.display(),
            String::from_utf8_lossy(&text)
        );
        let s = start(reader_bin, &dir, &[]);
        let mut c = s.raw();
        assert_eq!(digest(&mut c), want, "{}", reader_bin.display());
    }
}

fn persistence(c: &mut RawClient) -> String {
    match c.cmd(&["INFO", "persistence"]) {
        RespFrame::Bulk(b) => String::from_utf8_lossy(&b).to_string(),
        f => panic!("{f:?}"),
    }
}

/// Waits until no rewrite runs or is scheduled.
fn wait_rewrites(c: &mut RawClient) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let info = persistence(c);
        if info.contains("aof_rewrite_in_progress:0") && info.contains("aof_rewrite_scheduled:0") {
            return;
        }
        assert!(Instant::now() < deadline, "rewrite never ended: {info}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn incr_file(dir: &TempDir) -> PathBuf {
    let m = std::fs::read_to_string(
        dir.path()
            .join("appendonlydir")
            .join("appendonly.aof.manifest"),
    )
    .unwrap();
    let name = m
        .lines()
        .rfind(|l| l.ends_with("type i"))
        .unwrap()
        .split_whitespace()
        .nth(1)
        .unwrap()
        .to_string();
    dir.path().join("appendonlydir").join(name)
}

/// Runs the server to completion (it must refuse to start); its output.
fn refused(dir: &TempDir, extra: &[&str]) -> String {
    let mut args = vec![
        "--port".to_string(),
        cinnabar_tests::free_port().to_string(),
        "--dir".into(),
        dir.dir().into(),
        "--appendonly".into(),
        "yes".into(),
    ];
    args.extend(extra.iter().map(|s| s.to_string()));
    let mut child = Command::new(server_bin())
        .args(&args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(st) = child.try_wait().unwrap() {
            assert!(!st.success());
            break;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("server started");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[test]
fn truncated_aof() {
    if is_real_redis() {
        return;
    }
    let dir = TempDir::new("trunc");
    let s = start(&server_bin(), &dir, &[("appendfsync", "always")]);
    let mut c = s.raw();
    c.cmd(&["SET", "a", "1"]);
    c.cmd(&["SET", "b", "2"]);
    sigkill(&s);
    drop(s);
    let f = incr_file(&dir);
    let len = std::fs::metadata(&f).unwrap().len();
    let file = std::fs::OpenOptions::new().write(true).open(&f).unwrap();
    file.set_len(len - 3).unwrap();
    drop(file);
    let log = refused(&dir, &["--aof-load-truncated", "no"]);
    assert!(
        log.contains("Unexpected end of file reading the append only file"),
        "{log}"
    );
    let s = start(&server_bin(), &dir, &[("aof-load-truncated", "yes")]);
    let mut c = s.raw();
    assert_eq!(bulk(&c.cmd(&["GET", "a"])), b"1");
    assert_eq!(c.cmd(&["GET", "b"]), RespFrame::Null);
    assert!(s
        .log()
        .contains("loaded anyway because aof-load-truncated is enabled"));
    // The cut tail is gone: what follows appends cleanly.
    c.cmd(&["SET", "c", "3"]);
    sigkill(&s);
    drop(s);
    let s = start(&server_bin(), &dir, &[("aof-load-truncated", "no")]);
    let mut c = s.raw();
    assert_eq!(bulk(&c.cmd(&["GET", "c"])), b"3");
}

#[test]
fn missing_manifest_and_missing_files() {
    if is_real_redis() {
        return;
    }
    let dir = TempDir::new("missing");
    let s = start(&server_bin(), &dir, &[]);
    let mut c = s.raw();
    c.cmd(&["SET", "a", "1"]);
    drop(c);
    drop(s);
    // A base file the manifest names is missing: refused, as Redis.
    let base = dir
        .path()
        .join("appendonlydir")
        .join("appendonly.aof.1.base.rdb");
    let saved = std::fs::read(&base).unwrap();
    std::fs::remove_file(&base).unwrap();
    let log = refused(&dir, &[]);
    assert!(
        log.contains("Unable to obtain the AOF file appendonly.aof.1.base.rdb length. stat: No such file or directory"),
        "{log}"
    );
    std::fs::write(&base, saved).unwrap();
    // Without a manifest Redis 7.0 starts empty and creates new files.
    std::fs::remove_file(
        dir.path()
            .join("appendonlydir")
            .join("appendonly.aof.manifest"),
    )
    .unwrap();
    let s = start(&server_bin(), &dir, &[]);
    let mut c = s.raw();
    assert_eq!(c.cmd(&["DBSIZE"]), RespFrame::Integer(0));
    assert!(s
        .log()
        .contains("Creating AOF base file appendonly.aof.1.base.rdb on server start"));
    assert!(dir
        .path()
        .join("appendonlydir")
        .join("appendonly.aof.manifest")
        .exists());
    // A damaged manifest is refused.
    drop(c);
    drop(s);
    std::fs::write(
        dir.path()
            .join("appendonlydir")
            .join("appendonly.aof.manifest"),
        "garbage line\n",
    )
    .unwrap();
    let log = refused(&dir, &[]);
    assert!(log.contains("Invalid AOF manifest file format"), "{log}");
}

#[test]
fn rewrite_and_enable_at_run_time() {
    if is_real_redis() {
        return;
    }
    let dir = TempDir::new("rewrite");
    let s = Server::start_bin(&server_bin(), &[("dir", dir.dir()), ("appendonly", "no")]);
    let mut c = s.raw();
    c.cmd(&["SET", "before", "1"]);
    assert_eq!(
        c.cmd(&["CONFIG", "SET", "appendonly", "yes"]),
        cinnabar_tests::ok()
    );
    c.cmd(&["SET", "after-on", "1"]);
    c.cmd(&["RPUSH", "l", "1", "2"]);
    wait_rewrites(&mut c);
    assert_eq!(
        c.cmd(&["BGREWRITEAOF"]),
        cinnabar_tests::simple("Background append only file rewriting started")
    );
    c.cmd(&["SET", "after-rewrite", "1"]);
    c.cmd(&["LPOP", "l"]);
    wait_rewrites(&mut c);
    let info = persistence(&mut c);
    assert!(info.contains("aof_enabled:1"), "{info}");
    assert!(info.contains("aof_last_bgrewrite_status:ok"), "{info}");
    assert!(info.contains("aof_rewrites:2"), "{info}");
    let m = std::fs::read_to_string(
        dir.path()
            .join("appendonlydir")
            .join("appendonly.aof.manifest"),
    )
    .unwrap();
    assert_eq!(
        m,
        "file appendonly.aof.2.base.rdb seq 2 type b\nfile appendonly.aof.2.incr.aof seq 2 type i\n"
    );
    // The base says it is one, as Redis's: aux field aof-base = 1.
    let base = std::fs::read(
        dir.path()
            .join("appendonlydir")
            .join("appendonly.aof.2.base.rdb"),
    )
    .unwrap();
    assert!(
        base.windows(10).any(|w| w == b"aof-base\xc0\x01"),
        "no aof-base 1"
    );
    wait_history_removed(&dir);
    sigkill(&s);
    drop(s);
    let s = start(&server_bin(), &dir, &[]);
    let mut c = s.raw();
    for k in ["before", "after-on", "after-rewrite"] {
        assert_eq!(bulk(&c.cmd(&["GET", k])), b"1", "{k}");
    }
    assert_eq!(int(&c.cmd(&["LLEN", "l"])), 1);
    // Turning it off stops appending.
    assert_eq!(
        c.cmd(&["CONFIG", "SET", "appendonly", "no"]),
        cinnabar_tests::ok()
    );
    c.cmd(&["SET", "while-off", "1"]);
    sigkill(&s);
    drop(s);
    let s = start(&server_bin(), &dir, &[]);
    let mut c = s.raw();
    assert_eq!(c.cmd(&["GET", "while-off"]), RespFrame::Null);
    sigkill(&s);
    drop(s);
    // Started with the AOF off, the manifest is still read (as Redis):
    // turning it on continues the numbering and removes the old files.
    let s = start(&server_bin(), &dir, &[("appendonly", "no")]);
    let mut c = s.raw();
    c.cmd(&["SET", "k", "1"]);
    assert_eq!(
        c.cmd(&["CONFIG", "SET", "appendonly", "yes"]),
        cinnabar_tests::ok()
    );
    wait_rewrites(&mut c);
    wait_history_removed(&dir);
    assert_eq!(
        aof_files(&dir),
        [
            "appendonly.aof.3.base.rdb",
            "appendonly.aof.3.incr.aof",
            "appendonly.aof.manifest"
        ]
    );
}

/// Waits until the AOF directory holds only what the manifest lists: the
/// history files are deleted just after a rewrite is reported done (Redis
/// unlinks them in a background thread), and a SIGKILL before that would
/// leave them behind, in Redis too.
fn wait_history_removed(dir: &TempDir) {
    let d = dir.path().join("appendonlydir");
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let m = std::fs::read_to_string(d.join("appendonly.aof.manifest")).unwrap_or_default();
        let listed = m.lines().count() + 1;
        if aof_files(dir).len() == listed || Instant::now() > deadline {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Writes a mix of commands over a small key space (overwrites, deletes,
/// expiry, aggregates, transactions, scripts, two databases) until `stop`;
/// returns how many were acknowledged.
fn mixed_writer(port: u16, seed: u64, stop: Arc<AtomicBool>) -> u64 {
    let mut c = RawClient::connect(port);
    let mut x = seed | 1;
    let mut acked = 0;
    while !stop.load(Ordering::Relaxed) {
        let mut buf = Vec::new();
        let mut n = 0;
        for _ in 0..16 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let k = format!("key:{:08}", x % 3000);
            let v = (x >> 20).to_string();
            let cmd: Vec<String> = match (x >> 8) % 12 {
                0 | 1 => vec!["SET".into(), k, v],
                2 => vec!["DEL".into(), k],
                3 => vec!["INCR".into(), format!("cnt:{}", x % 50)],
                4 => vec!["RPUSH".into(), format!("list:{}", x % 50), v],
                5 => vec!["HSET".into(), format!("hash:{}", x % 50), k, v],
                6 => vec!["SADD".into(), format!("set:{}", x % 50), v],
                7 => vec!["ZADD".into(), format!("zset:{}", x % 50), v, k],
                8 => vec!["EXPIRE".into(), k, "100000".into()],
                9 => vec!["INCRBYFLOAT".into(), format!("fl:{}", x % 20), "0.5".into()],
                10 => vec![
                    "EVAL".into(),
                    "redis.call('select', 1) redis.call('incr', KEYS[1]) return redis.call('lpop', 'list:1')".into(),
                    "1".into(),
                    k,
                ],
                _ => vec!["SET".into(), format!("key:{:08}", 1_000_000 + x % 100_000), v],
            };
            buf.extend_from_slice(&encode(&cmd));
            n += 1;
        }
        buf.extend_from_slice(b"MULTI\r\nSELECT 1\r\nINCR c1\r\nRPUSH l1 x\r\nEXEC\r\n");
        n += 5;
        if c.sock_write(&buf).is_err() {
            break;
        }
        for _ in 0..n {
            match c.try_read() {
                Ok(RespFrame::Error(e)) => {
                    let e = String::from_utf8_lossy(&e).to_string();
                    assert!(e.starts_with("WRONGTYPE"), "{e}");
                }
                Ok(_) => acked += 1,
                Err(_) => return acked,
            }
        }
    }
    acked
}

/// The files in appendonlydir, sorted.
fn aof_files(dir: &TempDir) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir.path().join("appendonlydir"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
        .collect();
    v.sort();
    v
}

/// After the load: the server is killed, its files checked by
/// redis-check-aof and loaded by a new cinnabar (and by the real Redis when
/// present); every one must hold `want`.
/// The AOF directory holds only base and incr file `seq` (history files
/// are gone); then the restart gives back the dataset.
fn files_then_restart(mut c: RawClient, s: Server, dir: &TempDir, seq: u32) {
    let want = digest(&mut c);
    wait_history_removed(dir);
    assert_eq!(
        aof_files(dir),
        [
            format!("appendonly.aof.{seq}.base.rdb"),
            format!("appendonly.aof.{seq}.incr.aof"),
            "appendonly.aof.manifest".to_string()
        ]
    );
    drop(c);
    restart_and_compare(s, dir, &want);
}

fn restart_and_compare(s: Server, dir: &TempDir, want: &RespFrame) {
    sigkill(&s);
    drop(s);
    if let Some(check) = tool("redis-check-aof") {
        let out = Command::new(&check)
            .arg(
                dir.path()
                    .join("appendonlydir")
                    .join("appendonly.aof.manifest"),
            )
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            text.contains("All AOF files and manifest are valid"),
            "{text}"
        );
    }
    let mut bins = vec![server_bin()];
    bins.extend(tool("redis-server"));
    for bin in bins {
        let s = start(&bin, dir, &[]);
        let mut c = s.raw();
        // Redis answers DEBUG while it is still loading.
        while persistence(&mut c).contains("loading:1") {
            std::thread::sleep(Duration::from_millis(20));
        }
        assert_eq!(&digest(&mut c), want, "loaded by {}", bin.display());
        drop(c);
        // Not SIGKILL: a clean stop, so the next reader finds the files
        // as they were.
        s.cli(&["SHUTDOWN", "NOSAVE"]);
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut s = s;
        while s.alive() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

#[test]
fn rewrite_under_write_load_loses_nothing() {
    if is_real_redis() {
        return;
    }
    let dir = TempDir::new("rewrite-load");
    let s = start(&server_bin(), &dir, &[("appendfsync", "everysec")]);
    let mut c = s.raw();
    // Not logged (as in Redis): only the new base can hold these.
    assert_eq!(
        c.cmd(&["DEBUG", "POPULATE", "60000", "key", "64"]),
        cinnabar_tests::ok()
    );
    let stop = Arc::new(AtomicBool::new(false));
    let writers: Vec<_> = (0..2)
        .map(|i| {
            let (port, stop) = (s.port, stop.clone());
            std::thread::spawn(move || mixed_writer(port, 0x9e37_79b9 + i, stop))
        })
        .collect();
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(
        c.cmd(&["BGREWRITEAOF"]),
        cinnabar_tests::simple("Background append only file rewriting started")
    );
    // Replies while it runs, as Redis 7.0.15's.
    let info = persistence(&mut c);
    // Rewrites started: this one, a second one below, and a third here if
    // the first ended before the second BGREWRITEAOF.
    let mut rewrites = 2;
    if info.contains("aof_rewrite_in_progress:1") {
        assert!(info.contains("aof_rewrites:1"), "{info}");
        // The rewrite may end between any two of these: each then finds
        // the engine idle and starts its job.
        let started = cinnabar_tests::simple("Background saving started");
        let r = c.cmd(&["BGREWRITEAOF"]);
        if r == cinnabar_tests::err("ERR Background append only file rewriting already in progress")
        {
            let r = c.cmd(&["BGSAVE"]);
            if r == cinnabar_tests::err("ERR Another child process is active (AOF?): can't BGSAVE right now. Use BGSAVE SCHEDULE in order to schedule a BGSAVE whenever possible.") {
                let r = c.cmd(&["BGSAVE", "SCHEDULE"]);
                assert!(
                    r == cinnabar_tests::simple("Background saving scheduled") || r == started,
                    "{r:?}"
                );
            } else {
                assert_eq!(r, started);
            }
        } else {
            assert_eq!(
                r,
                cinnabar_tests::simple("Background append only file rewriting started")
            );
            rewrites += 1;
        }
    }
    wait_rewrites(&mut c);
    // A second rewrite, started while the scheduled BGSAVE may run.
    let r = c.cmd(&["BGREWRITEAOF"]);
    assert!(
        r == cinnabar_tests::simple("Background append only file rewriting started")
            || r == cinnabar_tests::simple("Background append only file rewriting scheduled"),
        "{r:?}"
    );
    wait_rewrites(&mut c);
    std::thread::sleep(Duration::from_millis(100));
    stop.store(true, Ordering::Relaxed);
    let acked: u64 = writers.into_iter().map(|w| w.join().unwrap()).sum();
    assert!(acked > 1000, "{acked}");
    let info = persistence(&mut c);
    assert!(info.contains("aof_last_bgrewrite_status:ok"), "{info}");
    assert!(info.contains(&format!("aof_rewrites:{rewrites}")), "{info}");
    files_then_restart(c, s, &dir, rewrites + 1);
}

#[test]
fn enabling_under_write_load_loses_nothing() {
    if is_real_redis() {
        return;
    }
    let dir = TempDir::new("enable-load");
    let s = Server::start_bin(
        &server_bin(),
        &[
            ("dir", dir.dir()),
            ("appendonly", "no"),
            ("appendfsync", "always"),
            ("enable-debug-command", "yes"),
        ],
    );
    let mut c = s.raw();
    c.cmd(&["DEBUG", "POPULATE", "30000", "key", "64"]);
    let stop = Arc::new(AtomicBool::new(false));
    let w = {
        let (port, stop) = (s.port, stop.clone());
        std::thread::spawn(move || mixed_writer(port, 77, stop))
    };
    std::thread::sleep(Duration::from_millis(50));
    assert_eq!(
        c.cmd(&["CONFIG", "SET", "appendonly", "yes"]),
        cinnabar_tests::ok()
    );
    let info = persistence(&mut c);
    assert!(info.contains("aof_enabled:1"), "{info}");
    wait_rewrites(&mut c);
    std::thread::sleep(Duration::from_millis(100));
    stop.store(true, Ordering::Relaxed);
    assert!(w.join().unwrap() > 100);
    files_then_restart(c, s, &dir, 1);
}

#[test]
fn rewrite_waits_for_a_running_bgsave() {
    if is_real_redis() {
        return;
    }
    let dir = TempDir::new("rewrite-sched");
    let s = start(&server_bin(), &dir, &[]);
    let mut c = s.raw();
    c.cmd(&["DEBUG", "POPULATE", "200000", "key", "32"]);
    assert_eq!(
        c.cmd(&["BGSAVE"]),
        cinnabar_tests::simple("Background saving started")
    );
    let r = c.cmd(&["BGREWRITEAOF"]);
    if r == cinnabar_tests::simple("Background append only file rewriting scheduled") {
        let info = persistence(&mut c);
        assert!(info.contains("aof_rewrite_scheduled:1"), "{info}");
        assert!(info.contains("aof_pending_rewrite:1"), "{info}");
    } else {
        // The save was already over.
        assert_eq!(
            r,
            cinnabar_tests::simple("Background append only file rewriting started")
        );
    }
    c.send(b"MULTI\r\nBGREWRITEAOF\r\nEXEC\r\n");
    c.read();
    c.read();
    let exec = c.read();
    assert!(
        format!("{exec:?}").contains("rewriting scheduled")
            || format!("{exec:?}").contains("already in progress"),
        "{exec:?}"
    );
    wait_rewrites(&mut c);
    // One rewrite, or two when the first had started before the EXEC.
    let info = persistence(&mut c);
    assert!(
        info.contains("aof_rewrites:1") || info.contains("aof_rewrites:2"),
        "{info}"
    );
    let want = digest(&mut c);
    drop(c);
    restart_and_compare(s, &dir, &want);
}

/// As Redis: no exit while the first AOF after `appendonly yes` is being
/// written (the data would exist nowhere on disk), SHUTDOWN answers an
/// error and the server stays up; SHUTDOWN FORCE exits.
#[test]
fn shutdown_refused_while_the_first_aof_is_written() {
    let dir = TempDir::new("aof-initial-shutdown");
    let s = start(&server_bin(), &dir, &[("appendonly", "no")]);
    let mut c = s.raw();
    c.set_timeout(Duration::from_secs(60));
    assert_eq!(
        c.cmd(&["DEBUG", "POPULATE", "600000"]),
        RespFrame::Simple("OK".into())
    );
    // In one write, so the rewrite cannot end in between.
    let mut req = encode(&["CONFIG", "SET", "appendonly", "yes"]);
    req.extend(encode(&["SHUTDOWN", "NOSAVE"]));
    req.extend(encode(&["PING"]));
    c.send(&req);
    // On failure, what the server logged says why (it failed once under
    // the whole suite's load, with the connection closed: see the log).
    let mut next = |want: RespFrame| {
        let got = c.try_read();
        assert!(
            matches!(&got, Ok(f) if *f == want),
            "{got:?} instead of {want:?}; log:\n{}",
            s.log()
        );
    };
    next(RespFrame::Simple("OK".into()));
    next(RespFrame::Error(
        "ERR Errors trying to SHUTDOWN. Check logs.".into(),
    ));
    next(RespFrame::Simple("PONG".into()));
    assert!(s.log().contains("Writing initial AOF, can't exit."));
    c.send_cmd(&["SHUTDOWN", "FORCE"]);
    c.expect_closed();
}

/// Runs `args`, which must not fail; its reply.
fn must(c: &mut RawClient, args: &[&str]) -> RespFrame {
    let r = c.cmd(args);
    assert!(!matches!(r, RespFrame::Error(_)), "{args:?}: {r:?}");
    r
}

/// Waits until `field:want` shows in INFO `section`.
fn wait_info(c: &mut RawClient, section: &str, field: &str, want: i64) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let info = match c.cmd(&["INFO", section]) {
            RespFrame::Bulk(b) => String::from_utf8_lossy(&b).to_string(),
            f => panic!("{f:?}"),
        };
        if info.contains(&format!("{field}:{want}\r\n")) {
            return;
        }
        assert!(Instant::now() < deadline, "{field} never {want}: {info}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A blocking command served later: `waiter` blocks on it, `c` runs
/// `feed`, and the waiter's reply comes (not an error, not a timeout).
fn served_later(s: &Server, c: &mut RawClient, blocking: &[&str], feed: &[&str]) {
    let mut waiter = s.raw();
    waiter.send(&encode(blocking));
    wait_info(c, "clients", "blocked_clients", 1);
    must(c, feed);
    let r = waiter.read();
    assert!(
        !matches!(r, RespFrame::Error(_) | RespFrame::Null),
        "{blocking:?}: {r:?}"
    );
}

/// Every command that propagates a rewritten form (relative expiry made
/// absolute, float increments as their results, SPOP as SREM, blocking and
/// multi-key pops as plain pops, served at once and later, RESTORE with a
/// relative TTL), transactions and scripts, expired and evicted keys: the
/// AOF cinnabar writes, loaded by a fresh cinnabar and by the real Redis,
/// gives the dataset it had (DEBUG DIGEST covers values and expiry times).
#[test]
fn rewritten_commands_replay_to_the_same_dataset() {
    assert!(
        tool("redis-server").is_some(),
        "redis-server must be on PATH (test.sh installs it)"
    );
    let dir = TempDir::new("propagated");
    let s = start(&server_bin(), &dir, &[]);
    let mut c = s.raw();
    // Evicted keys are propagated as DEL.
    let big = "x".repeat(2000);
    for i in 0..20 {
        must(&mut c, &["SET", &format!("evict:{i}"), &big]);
    }
    must(
        &mut c,
        &["CONFIG", "SET", "maxmemory-policy", "allkeys-random"],
    );
    must(&mut c, &["CONFIG", "SET", "maxmemory", "1"]);
    c.cmd(&["SET", "trigger", "1"]);
    must(&mut c, &["CONFIG", "SET", "maxmemory", "0"]);
    assert_eq!(int(&c.cmd(&["DBSIZE"])), 0);

    let now_s = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    let (at_s, at_ms) = (
        (now_s + 1000).to_string(),
        ((now_s + 2000) * 1000).to_string(),
    );
    let past_ms = ((now_s - 10) * 1000).to_string();
    let workload: Vec<Vec<&str>> = vec![
        vec!["SET", "plain", "v"],
        vec!["SET", "k:ex", "v", "EX", "1000"],
        vec!["SET", "k:px", "v", "PX", "1000000"],
        vec!["SET", "k:exat", "v", "EXAT", &at_s],
        vec!["SET", "k:pxat", "v", "NX", "PXAT", &at_ms],
        vec!["SET", "k:ex", "v2", "GET"],
        vec!["SET", "k:px", "v3", "GET", "KEEPTTL"],
        vec!["SET", "k:px", "v4", "XX", "GET", "EX", "500"],
        vec!["SETEX", "k:setex", "1000", "v"],
        vec!["PSETEX", "k:psetex", "1000000", "v"],
        vec!["GETSET", "plain", "v2"],
        vec!["SET", "gd", "v"],
        vec!["GETDEL", "gd"],
        vec!["SET", "ge", "v"],
        vec!["GETEX", "ge", "EX", "1000"],
        vec!["SET", "ge2", "v", "EX", "100"],
        vec!["GETEX", "ge2", "PERSIST"],
        vec!["SET", "ge3", "v"],
        vec!["GETEX", "ge3", "PXAT", &past_ms],
        vec!["SET", "e1", "v"],
        vec!["EXPIRE", "e1", "1000"],
        vec!["SET", "e2", "v"],
        vec!["PEXPIRE", "e2", "1000000", "NX"],
        vec!["SET", "e3", "v"],
        vec!["EXPIREAT", "e3", &at_s],
        vec!["SET", "e4", "v"],
        vec!["PEXPIREAT", "e4", &at_ms],
        vec!["SET", "e5", "v"],
        vec!["EXPIRE", "e5", "-1"],
        vec!["INCRBYFLOAT", "f", "1.1"],
        vec!["INCRBYFLOAT", "f", "2.25"],
        vec!["SET", "f2", "1", "EX", "1000"],
        vec!["INCRBYFLOAT", "f2", "0.5"],
        vec!["HINCRBYFLOAT", "h", "f", "1.5"],
        vec!["HINCRBYFLOAT", "h", "f", "0.1"],
        vec!["SADD", "s", "a", "b", "c", "d", "e", "f", "g", "h"],
        vec!["SPOP", "s"],
        vec!["SPOP", "s", "3"],
        vec!["SADD", "s1", "x"],
        vec!["SPOP", "s1"],
        vec!["SADD", "s2", "x", "y"],
        vec!["SPOP", "s2", "5"],
        vec!["RPUSH", "l", "a", "b", "c", "d", "e", "f", "g", "h", "i"],
        vec!["BLPOP", "nol", "l", "0"],
        vec!["BRPOP", "l", "0"],
        vec!["BLMOVE", "l", "l2", "LEFT", "RIGHT", "0"],
        vec!["BRPOPLPUSH", "l", "l2", "0"],
        vec!["LMPOP", "2", "nol", "l", "LEFT", "COUNT", "2"],
        vec!["BLMPOP", "0", "1", "l", "RIGHT", "COUNT", "10"],
        vec![
            "ZADD", "z", "1", "a", "2", "b", "3", "c", "4", "d", "5", "e", "6", "f",
        ],
        vec!["BZPOPMIN", "z", "0"],
        vec!["BZPOPMAX", "noz", "z", "0"],
        vec!["ZMPOP", "1", "z", "MIN", "COUNT", "2"],
        vec!["BZMPOP", "0", "1", "z", "MAX", "COUNT", "10"],
        vec!["SET", "r", "v"],
    ];
    for args in &workload {
        must(&mut c, args);
    }
    let RespFrame::Bulk(dump) = must(&mut c, &["DUMP", "r"]) else {
        panic!("DUMP");
    };
    for (key, ttl, abs) in [
        ("r1", "1000000", false),
        ("r2", "0", false),
        ("r3", &*at_ms, true),
    ] {
        let mut args: Vec<&[u8]> = vec![b"RESTORE", key.as_bytes(), ttl.as_bytes(), &dump];
        if abs {
            args.push(b"ABSTTL");
        }
        let r = c.cmd(&args);
        assert_eq!(r, cinnabar_tests::ok(), "{key}");
    }
    served_later(
        &s,
        &mut c,
        &["BLPOP", "w1", "0"],
        &["RPUSH", "w1", "a", "b"],
    );
    served_later(&s, &mut c, &["BRPOP", "w2", "0"], &["LPUSH", "w2", "a"]);
    served_later(
        &s,
        &mut c,
        &["BLMOVE", "w3", "w3dst", "RIGHT", "LEFT", "0"],
        &["RPUSH", "w3", "a", "b"],
    );
    served_later(
        &s,
        &mut c,
        &["BRPOPLPUSH", "w4", "w4dst", "0"],
        &["RPUSH", "w4", "a"],
    );
    served_later(
        &s,
        &mut c,
        &["BLMPOP", "0", "1", "w5", "LEFT", "COUNT", "2"],
        &["RPUSH", "w5", "a", "b", "c"],
    );
    served_later(
        &s,
        &mut c,
        &["BZPOPMIN", "w6", "0"],
        &["ZADD", "w6", "1", "a", "2", "b"],
    );
    served_later(
        &s,
        &mut c,
        &["BZMPOP", "0", "1", "w7", "MAX", "COUNT", "5"],
        &["ZADD", "w7", "1", "a", "2", "b"],
    );
    // One unit each: a transaction and a script with several rewrites.
    c.send(
        &[
            encode(&["MULTI"]),
            encode(&["SET", "m1", "1", "PX", "1000000"]),
            encode(&["INCRBYFLOAT", "m2", "1.5"]),
            encode(&["SPOP", "s", "2"]),
            encode(&["EXPIRE", "m1", "1000"]),
            encode(&["EXEC"]),
        ]
        .concat(),
    );
    for _ in 0..5 {
        c.read();
    }
    assert!(matches!(c.read(), RespFrame::Array(v) if v.len() == 4));
    must(
        &mut c,
        &[
            "EVAL",
            "redis.call('set', KEYS[1], '1', 'EX', 1000) \
             redis.call('incrbyfloat', KEYS[2], '0.5') \
             redis.call('getex', KEYS[1], 'PX', 2000000) \
             redis.call('spop', KEYS[3]) \
             redis.call('lpush', KEYS[2] .. 'l', 'a', 'b') \
             redis.call('lmpop', 1, KEYS[2] .. 'l', 'RIGHT')",
            "3",
            "ev1",
            "ev2",
            "s",
        ],
    );
    must(&mut c, &["SELECT", "2"]);
    must(&mut c, &["SET", "in2", "v", "EX", "1000"]);
    must(&mut c, &["INCRBYFLOAT", "in2f", "1"]);
    // Expired keys, lazily (GET) and by the active cycle (in two
    // databases), are propagated as DEL.
    must(&mut c, &["SET", "active2", "v", "PX", "1"]);
    must(&mut c, &["SELECT", "0"]);
    must(&mut c, &["SET", "lazy", "v", "PX", "1"]);
    must(&mut c, &["SET", "active", "v", "PX", "1"]);
    std::thread::sleep(Duration::from_millis(20));
    assert_eq!(c.cmd(&["GET", "lazy"]), cinnabar_tests::nil());
    wait_info(&mut c, "stats", "expired_keys", 3);
    let want = digest(&mut c);

    // What was written holds no command whose replay would differ.
    let log = String::from_utf8_lossy(&std::fs::read(incr_file(&dir)).unwrap()).to_lowercase();
    let words: Vec<&str> = log.split("\r\n").filter(|w| w.len() < 100).collect();
    let replaced = "expire pexpire expireat getex getdel getset setex psetex incrbyfloat \
                    hincrbyfloat spop blpop brpop blmove brpoplpush lmpop blmpop zmpop \
                    bzmpop bzpopmin bzpopmax eval px ex get";
    for name in replaced.split_whitespace() {
        assert!(!words.contains(&name), "{name} in: {}", words.join(" "));
    }
    drop(c);
    restart_and_compare(s, &dir, &want);
}

/// `aof-disable-auto-gc yes`: a rewrite's old base and incr files stay,
/// listed as history (`type h`) in the manifest; set back to `no`, they are
/// removed and leave the manifest, as Redis 7.0.15 does.
#[test]
fn aof_disable_auto_gc_keeps_the_history_files() {
    let dir = TempDir::new("aof-gc");
    let s = start(&server_bin(), &dir, &[("aof-disable-auto-gc", "yes")]);
    let mut c = s.raw();
    let aof_dir = dir.path().join("appendonlydir");
    let files = || {
        let mut v: Vec<String> = std::fs::read_dir(&aof_dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    };
    let manifest = || std::fs::read_to_string(aof_dir.join("appendonly.aof.manifest")).unwrap();
    let rewritten = |c: &mut RawClient| {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let info = match c.cmd(&["INFO", "persistence"]) {
                RespFrame::Bulk(b) => String::from_utf8_lossy(&b).into_owned(),
                f => panic!("{f:?}"),
            };
            if info.contains("aof_rewrite_in_progress:0")
                && info.contains("aof_rewrite_scheduled:0")
            {
                return;
            }
            assert!(Instant::now() < deadline, "{info}");
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    rewritten(&mut c);
    c.cmd(&["SET", "k", "v"]);
    c.cmd(&["BGREWRITEAOF"]);
    rewritten(&mut c);
    let kept = files();
    assert!(
        kept.contains(&"appendonly.aof.1.base.rdb".to_string()),
        "{kept:?}"
    );
    assert!(
        kept.contains(&"appendonly.aof.1.incr.aof".to_string()),
        "{kept:?}"
    );
    assert_eq!(manifest().matches(" type h").count(), 2, "{}", manifest());
    assert!(matches!(
        c.cmd(&["CONFIG", "SET", "aof-disable-auto-gc", "no"]),
        RespFrame::Simple(_)
    ));
    let deadline = Instant::now() + Duration::from_secs(5);
    while files().iter().any(|f| f.starts_with("appendonly.aof.1.")) {
        assert!(Instant::now() < deadline, "{:?}", files());
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(!manifest().contains(" type h"), "{}", manifest());
}

/// The manifest's sequence numbers, as Redis 7.0.15 gives them (checked
/// on both): the base seq always rises; the incr seq counts on in memory
/// past a rewrite with the AOF off (which lists no incr file) and starts
/// again from the manifest whenever one is read (DEBUG LOADAOF,
/// start-up); a rewrite lists the old incr files, then the old base, in
/// front of the history already there; start-up with auto gc removes
/// the history.
#[test]
fn manifest_sequence_numbers() {
    let dir = TempDir::new("aof-seq");
    let s = start(&server_bin(), &dir, &[("appendonly", "no")]);
    let mut c = s.raw();
    let manifest = |dir: &TempDir| {
        let p = dir.path().join("appendonlydir/appendonly.aof.manifest");
        let text = std::fs::read_to_string(p).unwrap();
        let files = text.lines().map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            let kind = if w[1].contains(".base.") { "b" } else { "i" };
            format!("{kind}{}{}", w[3], if w[5] == "h" { "h" } else { "" })
        });
        files.collect::<Vec<_>>().join(" ")
    };
    let run = |c: &mut RawClient, args: &[&str]| {
        assert!(matches!(c.cmd(args), RespFrame::Simple(_)), "{args:?}");
        wait_rewrites(c);
    };
    c.cmd(&["SET", "k", "v"]);
    run(&mut c, &["CONFIG", "SET", "appendonly", "yes"]);
    assert_eq!(manifest(&dir), "b1 i1");
    run(&mut c, &["BGREWRITEAOF"]);
    assert_eq!(manifest(&dir), "b2 i2");
    run(&mut c, &["CONFIG", "SET", "appendonly", "no"]);
    run(&mut c, &["BGREWRITEAOF"]);
    assert_eq!(manifest(&dir), "b3");
    run(&mut c, &["CONFIG", "SET", "appendonly", "yes"]);
    assert_eq!(manifest(&dir), "b4 i3");
    run(&mut c, &["CONFIG", "SET", "appendonly", "no"]);
    run(&mut c, &["BGREWRITEAOF"]);
    run(&mut c, &["DEBUG", "LOADAOF"]);
    run(&mut c, &["CONFIG", "SET", "appendonly", "yes"]);
    assert_eq!(manifest(&dir), "b6 i1");
    run(&mut c, &["CONFIG", "SET", "aof-disable-auto-gc", "yes"]);
    run(&mut c, &["BGREWRITEAOF"]);
    assert_eq!(manifest(&dir), "b7 i1h b6h i2");
    run(&mut c, &["BGREWRITEAOF"]);
    assert_eq!(manifest(&dir), "b8 i2h b7h i1h b6h i3");
    drop(c);
    drop(s);
    let s = start(&server_bin(), &dir, &[]);
    let mut c = s.raw();
    let deadline = Instant::now() + Duration::from_secs(5);
    while manifest(&dir) != "b8 i3" {
        assert!(Instant::now() < deadline, "{}", manifest(&dir));
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(bulk(&c.cmd(&["GET", "k"])), b"v");
}

/// The incr seq starting again from the manifest may give a new incr file
/// the name of a history file. Redis 7.0.15 then appends to the old file
/// (its commands load again: here n came back as 3) and its auto gc later
/// deletes the live file (it no longer starts); here the new file starts
/// empty and stays.
#[test]
fn a_new_incr_file_never_reuses_a_history_files_commands() {
    if is_real_redis() {
        return;
    }
    let dir = TempDir::new("aof-reuse");
    let nogc = [("aof-disable-auto-gc", "yes")];
    let s = start(&server_bin(), &dir, &nogc);
    let mut c = s.raw();
    c.cmd(&["INCR", "n"]);
    c.cmd(&["CONFIG", "SET", "appendonly", "no"]);
    c.cmd(&["BGREWRITEAOF"]);
    wait_rewrites(&mut c);
    drop(c);
    drop(s);
    // The manifest lists 1.incr.aof as history only: the new one is 1 too.
    let s = start(&server_bin(), &dir, &nogc);
    let mut c = s.raw();
    assert_eq!(int(&c.cmd(&["INCR", "n"])), 2);
    assert!(incr_file(&dir).ends_with("appendonly.aof.1.incr.aof"));
    drop(c);
    drop(s);
    for _ in 0..2 {
        let s = start(&server_bin(), &dir, &[]);
        let mut c = s.raw();
        assert_eq!(int(&c.cmd(&["GET", "n"])), 2);
        wait_history_removed(&dir);
    }
}

fn files_in(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
        .collect();
    v.sort();
    v
}

/// `appenddirname` and `appendfilename` name the AOF's directory and the
/// files in it, as on redis-server 7.0.15.
#[test]
fn appenddirname_and_appendfilename_name_the_files() {
    let dir = TempDir::new("aofnames");
    let s = start(
        &server_bin(),
        &dir,
        &[("appenddirname", "mydir"), ("appendfilename", "x.aof")],
    );
    let mut c = s.raw();
    assert_eq!(
        c.cmd(&["SET", "named", "v"]),
        RespFrame::Simple("OK".into())
    );
    let aof = dir.path().join("mydir");
    assert_eq!(
        files_in(&aof),
        ["x.aof.1.base.rdb", "x.aof.1.incr.aof", "x.aof.manifest"]
    );
    let incr = std::fs::read(aof.join("x.aof.1.incr.aof")).unwrap();
    assert!(incr.windows(9).any(|w| w == b"$5\r\nnamed"));
    assert!(!dir.path().join("appendonlydir").exists());
}

/// `auto-aof-rewrite-percentage` and `auto-aof-rewrite-min-size`: once
/// the AOF is past the minimum size and has grown by the percentage over
/// its last rewrite, the cron starts a rewrite (a new base file).
#[test]
fn auto_aof_rewrite_starts_once_the_file_has_grown_enough() {
    let dir = TempDir::new("autorw");
    let s = start(&server_bin(), &dir, &[("auto-aof-rewrite-percentage", "0")]);
    let mut c = s.raw();
    for i in 0..100 {
        let r = c.cmd(&["SET", &format!("key{i}"), &"v".repeat(100)]);
        assert_eq!(r, RespFrame::Simple("OK".into()));
    }
    assert!(aof_files(&dir).contains(&"appendonly.aof.1.base.rdb".to_string()));
    for (k, v) in [
        ("auto-aof-rewrite-min-size", "1024"),
        ("auto-aof-rewrite-percentage", "100"),
    ] {
        let r = c.cmd(&["CONFIG", "SET", k, v]);
        assert_eq!(r, RespFrame::Simple("OK".into()));
    }
    let deadline = Instant::now() + Duration::from_secs(20);
    while !aof_files(&dir).contains(&"appendonly.aof.2.base.rdb".to_string()) {
        assert!(
            Instant::now() < deadline,
            "no rewrite: {:?}",
            aof_files(&dir)
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    wait_rewrites(&mut c);
}
