//! Workloads from the seed articles (/work/shared/seeds) that need only
//! strings and generic key commands, written the way their Java/Python code
//! drives Redis (one client per thread, the redis crate standing in for
//! Jedis). The list/hash/set/zset/script workloads come with those types.

use cinnabar_tests::Server;
use redis::{cmd, Connection};
use std::collections::HashSet;
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

fn get(c: &mut Connection, k: &str) -> Option<String> {
    cmd("GET").arg(k).query(c).unwrap()
}

fn set(c: &mut Connection, k: &str, v: &str) {
    let _: () = cmd("SET").arg(k).arg(v).query(c).unwrap();
}

/// 002 ch.5 §4 isUnderMaintenance(): a flag string read at most once a second.
#[test]
fn seed002_maintenance_flag() {
    let s = Server::start(&[]);
    let mut c = s.redis();
    let under = |c: &mut Connection| get(c, "is-under-maintenance").as_deref() == Some("yes");
    assert!(!under(&mut c));
    set(&mut c, "is-under-maintenance", "yes");
    assert!(under(&mut c));
    set(&mut c, "is-under-maintenance", "no");
    assert!(!under(&mut c));
}

/// 002 ch.5 §4 setConfig()/getConfig()/redisConnection(): JSON config in a
/// string key; the component's connection SELECTs the configured db.
#[test]
fn seed002_config_in_redis_and_select_db() {
    let s = Server::start(&[]);
    let mut c = s.redis();
    let json = r#"{"db":3.0,"host":"127.0.0.1","name":"statistics \"main\" ✓"}"#;
    set(&mut c, "config:redis:statistics", json);
    assert_eq!(
        get(&mut c, "config:redis:statistics").as_deref(),
        Some(json)
    );
    assert_eq!(get(&mut c, "config:redis:missing"), None);

    // redisConnection(): a new connection on the configured db.
    let mut stats = s.redis();
    let _: () = cmd("SELECT").arg(3).query(&mut stats).unwrap();
    set(&mut stats, "stats:page", "42");
    assert_eq!(get(&mut stats, "stats:page").as_deref(), Some("42"));
    // Databases are separate keyspaces.
    assert_eq!(get(&mut c, "stats:page"), None);
    let _: () = cmd("SELECT").arg(3).query(&mut c).unwrap();
    assert_eq!(get(&mut c, "stats:page").as_deref(), Some("42"));
}

/// 002 ch.6 acquireLock(): SETNX "lock:<name>" with a unique identifier,
/// retried until a deadline; released by its owner. Threads contend for the
/// lock and update a shared string counter with GET then SET: no update is
/// lost only if SETNX is atomic.
#[test]
fn seed002_setnx_lock_mutual_exclusion() {
    let s = Arc::new(Server::start(&[]));
    let threads: Vec<_> = (0..4)
        .map(|t| {
            let s = s.clone();
            thread::spawn(move || {
                let mut c = s.redis();
                for i in 0..50 {
                    let id = format!("{t}-{i}");
                    let end = Instant::now() + Duration::from_secs(20);
                    loop {
                        let got: i64 = cmd("SETNX")
                            .arg("lock:market")
                            .arg(&id)
                            .query(&mut c)
                            .unwrap();
                        if got == 1 {
                            break;
                        }
                        assert!(Instant::now() < end, "lock never acquired");
                        thread::sleep(Duration::from_micros(200));
                    }
                    let n: i64 = get(&mut c, "counter").map_or(0, |v| v.parse().unwrap());
                    set(&mut c, "counter", &(n + 1).to_string());
                    assert_eq!(get(&mut c, "lock:market").as_deref(), Some(id.as_str()));
                    let del: i64 = cmd("DEL").arg("lock:market").query(&mut c).unwrap();
                    assert_eq!(del, 1);
                }
            })
        })
        .collect();
    // Join every thread before failing, so the server is not left running.
    let results: Vec<_> = threads.into_iter().map(|t| t.join()).collect();
    assert!(results.iter().all(|r| r.is_ok()), "a client thread failed");
    let mut c = s.redis();
    assert_eq!(get(&mut c, "counter").as_deref(), Some("200"));
    let exists: i64 = cmd("EXISTS").arg("lock:market").query(&mut c).unwrap();
    assert_eq!(exists, 0);
}

/// 002 ch.6 acquireLockWithTimeout(): SETNX then EXPIRE; a waiter that finds
/// the lock without a TTL (holder crashed between the two) sets one; a
/// crashed holder's lock frees itself.
#[test]
fn seed002_lock_with_timeout() {
    let s = Server::start(&[]);
    let mut a = s.redis();
    let mut b = s.redis();
    let acquire = |c: &mut Connection, id: &str, lock_timeout: i64| -> bool {
        let got: i64 = cmd("SETNX").arg("lock:job").arg(id).query(c).unwrap();
        if got == 1 {
            let r: i64 = cmd("EXPIRE")
                .arg("lock:job")
                .arg(lock_timeout)
                .query(c)
                .unwrap();
            assert_eq!(r, 1);
            return true;
        }
        let ttl: i64 = cmd("TTL").arg("lock:job").query(c).unwrap();
        if ttl == -1 {
            let _: i64 = cmd("EXPIRE")
                .arg("lock:job")
                .arg(lock_timeout)
                .query(c)
                .unwrap();
        }
        false
    };
    assert!(acquire(&mut a, "A", 1));
    assert!(!acquire(&mut b, "B", 1));
    let ttl: i64 = cmd("TTL").arg("lock:job").query(&mut b).unwrap();
    assert_eq!(ttl, 1);
    // A "crashes"; its lock expires and B gets it.
    let end = Instant::now() + Duration::from_secs(5);
    while !acquire(&mut b, "B", 10) {
        assert!(Instant::now() < end, "expired lock never released");
        thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(get(&mut a, "lock:job").as_deref(), Some("B"));
    // A holder that died between SETNX and EXPIRE: the waiter adds the TTL.
    set(&mut a, "lock:stuck", "X");
    let ttl: i64 = cmd("TTL").arg("lock:stuck").query(&mut a).unwrap();
    assert_eq!(ttl, -1);
    let _: i64 = cmd("EXPIRE")
        .arg("lock:stuck")
        .arg(10)
        .query(&mut b)
        .unwrap();
    let ttl: i64 = cmd("TTL").arg("lock:stuck").query(&mut a).unwrap();
    assert_eq!(ttl, 10);
}

/// 000 postArticle() `INCR article:`, 002 ch.8 `INCR user:id`, ch.6 chat
/// `INCR ids:chat:`: ids handed out concurrently are unique and dense.
#[test]
fn seed_incr_id_counters() {
    let s = Arc::new(Server::start(&[]));
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let s = s.clone();
            thread::spawn(move || {
                let mut c = s.redis();
                (0..250)
                    .map(|_| cmd("INCR").arg("article:").query::<i64>(&mut c).unwrap())
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    let results: Vec<_> = threads.into_iter().map(|t| t.join()).collect();
    let ids: HashSet<i64> = results
        .into_iter()
        .flat_map(|r| r.expect("a client thread failed"))
        .collect();
    assert_eq!(ids, (1..=1000).collect());
    let mut c = s.redis();
    assert_eq!(get(&mut c, "article:").as_deref(), Some("1000"));
    let uid: i64 = cmd("INCR").arg("user:id").query(&mut c).unwrap();
    assert_eq!(uid, 1);
    let chat: i64 = cmd("INCR").arg("ids:chat:").query(&mut c).unwrap();
    let msg: i64 = cmd("INCR")
        .arg(format!("ids:{chat}"))
        .query(&mut c)
        .unwrap();
    assert_eq!((chat, msg), (1, 1));
}

/// 002 ch.6 copyLogsToRedis()/processLogsFromRedis()/RedisInputStream: a log
/// file is APPENDed to a key in 8 KB blocks, read back through STRLEN and
/// SUBSTR (byte at a time and in blocks), each reader INCRs
/// `<key>:done`, and the sender deletes both keys once all have finished.
#[test]
fn seed002_log_file_through_append_and_substr() {
    let s = Server::start(&[]);
    let mut c = s.redis();
    // Binary content like a .gz file: every byte value, not a multiple of 8 KB.
    let file: Vec<u8> = (0..50_000u32).map(|i| (i * 7 + i / 256) as u8).collect();
    let key = "1logs/access-1.log.gz";
    for block in file.chunks(8192) {
        let _: i64 = cmd("APPEND").arg(key).arg(block).query(&mut c).unwrap();
    }
    let readers = 3;
    for r in 0..readers {
        let mut rc = s.redis();
        let len: usize = cmd("STRLEN").arg(key).query(&mut rc).unwrap();
        assert_eq!(len, file.len());
        let mut pos = 0usize;
        let mut got = Vec::new();
        // read(): one byte; read(buf, off, len): a block.
        let first: Vec<u8> = cmd("SUBSTR")
            .arg(key)
            .arg(pos)
            .arg(pos)
            .query(&mut rc)
            .unwrap();
        got.extend_from_slice(&first);
        pos += 1;
        let block = 1000 + 3000 * r;
        loop {
            let b: Vec<u8> = cmd("SUBSTR")
                .arg(key)
                .arg(pos)
                .arg(pos + block - 1)
                .query(&mut rc)
                .unwrap();
            if b.is_empty() {
                break;
            }
            pos += b.len();
            got.extend_from_slice(&b);
        }
        assert_eq!(got, file, "reader {r}");
        let _: i64 = cmd("INCR")
            .arg(format!("{key}:done"))
            .query(&mut rc)
            .unwrap();
    }
    // clean(): the sender deletes the file once every reader is done.
    let done = get(&mut c, &format!("{key}:done"));
    assert_eq!(done, Some(readers.to_string()));
    let del: i64 = cmd("DEL")
        .arg(key)
        .arg(format!("{key}:done"))
        .query(&mut c)
        .unwrap();
    assert_eq!(del, 2);
    let len: i64 = cmd("STRLEN").arg(key).query(&mut c).unwrap();
    assert_eq!(len, 0);
}
