//! Workloads from the seed articles (/work/shared/seeds) that need only
//! strings and generic key commands, written the way their Java/Python code
//! drives Redis (one client per thread, the redis crate standing in for
//! Jedis). The list/hash/set/zset/script workloads come with those types;
//! the ones that need neither concurrency nor a socket run in-process in
//! server/tests/families (strings.rs, keys.rs).

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
