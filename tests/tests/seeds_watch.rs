//! The seeds' WATCH/MULTI/EXEC retry loops (002: logCommon, updateStats,
//! autocompleteOnPrefix, and the fair semaphore behind a lock released with
//! WATCH) run by ten client threads at once: every update lands exactly
//! once and the semaphore never has more holders than its limit.

use cinnabar_tests::Server;
use redis::{cmd, pipe, Connection, Value};
use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};

const THREADS: usize = 10;

macro_rules! r {
    ($c:expr, $name:expr $(, $a:expr)* $(,)?) => {
        cmd($name)$(.arg($a))*.query($c).unwrap()
    };
}

fn uuid() -> String {
    format!("{:032x}", rand::random::<u128>())
}

/// Runs `f(thread_index, connection)` on THREADS threads started together;
/// joins them all before reporting a failure.
fn run_threads<T: Send + 'static>(
    s: &Arc<Server>,
    f: impl Fn(usize, &mut Connection) -> T + Send + Sync + 'static,
) -> Vec<T> {
    let f = Arc::new(f);
    let barrier = Arc::new(Barrier::new(THREADS));
    let handles: Vec<_> = (0..THREADS)
        .map(|t| {
            let (s, f, barrier) = (s.clone(), f.clone(), barrier.clone());
            thread::spawn(move || {
                let mut c = s.redis();
                barrier.wait();
                f(t, &mut c)
            })
        })
        .collect();
    let results: Vec<_> = handles.into_iter().map(|h| h.join()).collect();
    assert!(results.iter().all(|r| r.is_ok()), "a client thread failed");
    results.into_iter().map(|r| r.unwrap()).collect()
}

/// logCommon(): returns the number of attempts.
fn log_common(c: &mut Connection, message: &str, hour_start: &str) -> usize {
    let common = "common:web:info";
    let start_key = "common:web:info:start";
    let mut attempts = 0;
    loop {
        attempts += 1;
        let _: () = r!(c, "WATCH", start_key);
        let existing: Option<String> = r!(c, "GET", start_key);
        let mut p = pipe();
        p.atomic();
        match existing {
            Some(e) if e.as_str() < hour_start => {
                p.cmd("RENAME").arg(common).arg(format!("{common}:last"));
                p.cmd("RENAME")
                    .arg(start_key)
                    .arg(format!("{common}:pstart"));
                p.cmd("SET").arg(start_key).arg(hour_start);
            }
            None => {
                p.cmd("SET").arg(start_key).arg(hour_start);
            }
            _ => {}
        }
        p.cmd("ZINCRBY").arg(common).arg(1).arg(message);
        p.cmd("LPUSH")
            .arg("recent:web:info")
            .arg(format!("{hour_start} {message}"));
        p.cmd("LTRIM").arg("recent:web:info").arg(0).arg(99);
        let res: Option<Vec<Value>> = p.query(c).unwrap();
        if res.is_some() {
            return attempts;
        }
    }
}

#[test]
fn log_common_concurrent_rollover_loses_nothing() {
    let s = Arc::new(Server::start(&[]));
    let (h1, h2) = ("2024-01-01T10:00:00", "2024-01-01T11:00:00");
    let per = 30;
    // One write in the first hour before the threads, so the rollover
    // happens exactly once, when the first thread reaches the second hour.
    log_common(&mut s.redis(), "m0", h1);
    let attempts = run_threads(&s, move |_, c| {
        (0..per)
            .map(|i| log_common(c, &format!("m{}", i % 3), if i < per / 2 { h1 } else { h2 }))
            .sum::<usize>()
    });
    let mut c = s.redis();
    let c = &mut c;
    let mut totals: HashMap<String, i64> = HashMap::new();
    for key in ["common:web:info", "common:web:info:last"] {
        let v: Vec<(String, i64)> = r!(c, "ZRANGE", key, 0, -1, "WITHSCORES");
        for (m, n) in v {
            *totals.entry(m).or_default() += n;
        }
    }
    let n = (THREADS * per / 3) as i64;
    let want: HashMap<String, i64> = [("m0", n + 1), ("m1", n), ("m2", n)]
        .iter()
        .map(|(k, v)| (k.to_string(), *v))
        .collect();
    assert_eq!(totals, want);
    let pstart: String = r!(c, "GET", "common:web:info:pstart");
    assert_eq!(pstart, h1);
    let start: String = r!(c, "GET", "common:web:info:start");
    assert_eq!(start, h2);
    let len: i64 = r!(c, "LLEN", "recent:web:info");
    assert_eq!(len, 100);
    let total_attempts: usize = attempts.iter().sum();
    assert!(total_attempts >= THREADS * per);
    eprintln!(
        "logCommon: {} retries for {} writes",
        total_attempts - THREADS * per,
        THREADS * per
    );
}

/// updateStats(): the replies of the three ZINCRBYs (count, sum, sumsq).
fn update_stats(c: &mut Connection, value: f64, hour_start: &str) -> (Vec<f64>, usize) {
    let dest = "stats:ProfilePage:AccessTime";
    let start_key = "stats:ProfilePage:AccessTime:start";
    let mut attempts = 0;
    loop {
        attempts += 1;
        let _: () = r!(c, "WATCH", start_key);
        let existing: Option<String> = r!(c, "GET", start_key);
        let mut p = pipe();
        p.atomic();
        match existing {
            Some(e) if e.as_str() < hour_start => {
                p.cmd("RENAME").arg(dest).arg(format!("{dest}:last"));
                p.cmd("RENAME").arg(start_key).arg(format!("{dest}:pstart"));
                p.cmd("SET").arg(start_key).arg(hour_start);
            }
            None => {
                p.cmd("SET").arg(start_key).arg(hour_start);
            }
            _ => {}
        }
        let (t1, t2) = (uuid(), uuid());
        p.cmd("ZADD").arg(&t1).arg(value).arg("min");
        p.cmd("ZADD").arg(&t2).arg(value).arg("max");
        p.cmd("ZUNIONSTORE")
            .arg(dest)
            .arg(2)
            .arg(dest)
            .arg(&t1)
            .arg("AGGREGATE")
            .arg("MIN");
        p.cmd("ZUNIONSTORE")
            .arg(dest)
            .arg(2)
            .arg(dest)
            .arg(&t2)
            .arg("AGGREGATE")
            .arg("MAX");
        p.cmd("DEL").arg(&t1).arg(&t2);
        p.cmd("ZINCRBY").arg(dest).arg(1).arg("count");
        p.cmd("ZINCRBY").arg(dest).arg(value).arg("sum");
        p.cmd("ZINCRBY").arg(dest).arg(value * value).arg("sumsq");
        let res: Option<Vec<Value>> = p.query(c).unwrap();
        if let Some(v) = res {
            let n = v.len();
            let last = v[n - 3..]
                .iter()
                .map(|x| redis::from_redis_value(x).unwrap())
                .collect();
            return (last, attempts);
        }
    }
}

#[test]
fn update_stats_concurrent_exact_aggregates() {
    let s = Arc::new(Server::start(&[]));
    let per = 20;
    let results = run_threads(&s, move |t, c| {
        (0..per)
            .map(|i| update_stats(c, (t * per + i + 1) as f64, "2024-01-01T10:00:00").0)
            .collect::<Vec<_>>()
    });
    // Each transaction saw its own count: 1..=200, each exactly once.
    let counts: BTreeSet<i64> = results.iter().flatten().map(|r| r[0] as i64).collect();
    let n = (THREADS * per) as i64;
    assert_eq!(counts, (1..=n).collect());
    let mut c = s.redis();
    let c = &mut c;
    let stats: Vec<(String, f64)> = r!(
        c,
        "ZRANGE",
        "stats:ProfilePage:AccessTime",
        0,
        -1,
        "WITHSCORES"
    );
    let stats: HashMap<String, f64> = stats.into_iter().collect();
    assert_eq!(stats["count"], n as f64);
    assert_eq!(stats["min"], 1.0);
    assert_eq!(stats["max"], n as f64);
    assert_eq!(stats["sum"], (n * (n + 1) / 2) as f64);
    assert_eq!(stats["sumsq"], (n * (n + 1) * (2 * n + 1) / 6) as f64);
    // No temporary key left behind.
    let keys: i64 = r!(c, "DBSIZE");
    assert_eq!(keys, 2);
}

const VALID_CHARACTERS: &str = "`abcdefghijklmnopqrstuvwxyz{";

fn find_prefix_range(prefix: &str) -> (String, String) {
    let last = prefix.chars().last().unwrap();
    let posn = VALID_CHARACTERS
        .chars()
        .position(|ch| ch >= last)
        .unwrap_or(VALID_CHARACTERS.len());
    let suffix = VALID_CHARACTERS
        .chars()
        .nth(if posn == 0 { 1 } else { posn } - 1)
        .unwrap();
    let head = &prefix[..prefix.len() - last.len_utf8()];
    (format!("{head}{suffix}{{"), format!("{prefix}{{"))
}

/// autocompleteOnPrefix(): returns the items and the attempts taken.
fn autocomplete_on_prefix(c: &mut Connection, guild: &str, prefix: &str) -> (Vec<String>, usize) {
    let (start, end) = find_prefix_range(prefix);
    let id = uuid();
    let (start, end) = (format!("{start}{id}"), format!("{end}{id}"));
    let zset = format!("members:{guild}");
    let _: i64 = r!(c, "ZADD", &zset, 0, &start);
    let _: i64 = r!(c, "ZADD", &zset, 0, &end);
    let mut attempts = 0;
    let items: Vec<String> = loop {
        attempts += 1;
        let _: () = r!(c, "WATCH", &zset);
        let sindex: i64 = r!(c, "ZRANK", &zset, &start);
        let eindex: i64 = r!(c, "ZRANK", &zset, &end);
        let erange = (sindex + 9).min(eindex - 2);
        let res: Option<(i64, i64, Vec<String>)> = pipe()
            .atomic()
            .cmd("ZREM")
            .arg(&zset)
            .arg(&start)
            .cmd("ZREM")
            .arg(&zset)
            .arg(&end)
            .cmd("ZRANGE")
            .arg(&zset)
            .arg(sindex)
            .arg(erange)
            .query(c)
            .unwrap();
        if let Some((1, 1, items)) = res {
            break items;
        }
        assert!(res.is_none(), "markers vanished: {res:?}");
    };
    (
        items.into_iter().filter(|x| !x.contains('{')).collect(),
        attempts,
    )
}

#[test]
fn autocomplete_on_prefix_concurrent() {
    let s = Arc::new(Server::start(&[]));
    let names: Vec<String> = (0..20).map(|i| format!("abc{i:02}")).collect();
    {
        let mut c = s.redis();
        let _: i64 = r!(&mut c, "ZADD", "members:g", 0, &names[0]);
        for n in &names[1..] {
            let _: i64 = r!(&mut c, "ZADD", "members:g", 0, n);
        }
    }
    let per = 20;
    let expected = names.clone();
    let attempts = run_threads(&s, move |t, c| {
        let mut attempts = 0;
        for i in 0..per {
            // joinGuild() of non-matching names: concurrent writes to the
            // watched zset.
            let _: i64 = r!(c, "ZADD", "members:g", 0, format!("t{t}x{i:02}"));
            let (items, a) = autocomplete_on_prefix(c, "g", "abc");
            attempts += a;
            // Other clients' markers may take slots in the window, never
            // show up in the result, never reorder it.
            assert!(!items.is_empty() && items.len() <= 10, "{items:?}");
            assert_eq!(items, expected[..items.len()]);
            let (items, a) = autocomplete_on_prefix(c, "g", &format!("t{t}x"));
            attempts += a;
            let mine: Vec<String> = (0..=i.min(9)).map(|k| format!("t{t}x{k:02}")).collect();
            assert_eq!(items, mine);
        }
        attempts
    });
    let mut c = s.redis();
    let all: Vec<String> = r!(&mut c, "ZRANGE", "members:g", 0, -1);
    assert_eq!(all.len(), 20 + THREADS * per, "markers left behind");
    assert!(all.iter().all(|m| !m.contains('{')));
    let total: usize = attempts.iter().sum();
    eprintln!(
        "autocompleteOnPrefix: {} retries for {} lookups",
        total - 2 * THREADS * per,
        2 * THREADS * per
    );
}

fn acquire_lock(c: &mut Connection, name: &str, timeout: Duration) -> Option<String> {
    let id = uuid();
    let end = Instant::now() + timeout;
    while Instant::now() < end {
        let got: i64 = r!(c, "SETNX", format!("lock:{name}"), &id);
        if got == 1 {
            return Some(id);
        }
        thread::sleep(Duration::from_millis(1));
    }
    None
}

fn release_lock(c: &mut Connection, name: &str, id: &str) -> bool {
    let lock = format!("lock:{name}");
    loop {
        let _: () = r!(c, "WATCH", &lock);
        let cur: Option<String> = r!(c, "GET", &lock);
        if cur.as_deref() != Some(id) {
            let _: () = r!(c, "UNWATCH");
            return false;
        }
        let res: Option<(i64,)> = pipe().atomic().cmd("DEL").arg(&lock).query(c).unwrap();
        if res.is_some() {
            return true;
        }
    }
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

fn acquire_fair_semaphore(
    c: &mut Connection,
    sem: &str,
    limit: i64,
    timeout: i64,
) -> Option<String> {
    let id = uuid();
    let czset = format!("{sem}:owner");
    let ctr = format!("{sem}:counter");
    let now = now_ms();
    let (_, _, counter): (i64, i64, i64) = pipe()
        .atomic()
        .cmd("ZREMRANGEBYSCORE")
        .arg(sem)
        .arg("-inf")
        .arg(now - timeout)
        .cmd("ZINTERSTORE")
        .arg(&czset)
        .arg(2)
        .arg(&czset)
        .arg(sem)
        .arg("WEIGHTS")
        .arg(1)
        .arg(0)
        .cmd("INCR")
        .arg(&ctr)
        .query(c)
        .unwrap();
    let (_, _, rank): (i64, i64, i64) = pipe()
        .atomic()
        .cmd("ZADD")
        .arg(sem)
        .arg(now)
        .arg(&id)
        .cmd("ZADD")
        .arg(&czset)
        .arg(counter)
        .arg(&id)
        .cmd("ZRANK")
        .arg(&czset)
        .arg(&id)
        .query(c)
        .unwrap();
    if rank < limit {
        return Some(id);
    }
    let _: (i64, i64) = pipe()
        .atomic()
        .cmd("ZREM")
        .arg(sem)
        .arg(&id)
        .cmd("ZREM")
        .arg(&czset)
        .arg(&id)
        .query(c)
        .unwrap();
    None
}

fn release_fair_semaphore(c: &mut Connection, sem: &str, id: &str) -> bool {
    let (_, owner): (i64, i64) = pipe()
        .atomic()
        .cmd("ZREM")
        .arg(sem)
        .arg(id)
        .cmd("ZREM")
        .arg(format!("{sem}:owner"))
        .arg(id)
        .query(c)
        .unwrap();
    owner == 1
}

/// acquireSemaphoreWithLock(): the fair semaphore taken under a lock whose
/// release is a WATCH loop.
fn acquire_semaphore_with_lock(c: &mut Connection, sem: &str, limit: i64) -> Option<String> {
    let lock = acquire_lock(c, sem, Duration::from_secs(10))?;
    let got = acquire_fair_semaphore(c, sem, limit, 10_000);
    assert!(release_lock(c, sem, &lock), "lost the lock");
    got
}

#[test]
fn fair_semaphore_never_over_acquired() {
    let s = Arc::new(Server::start(&[]));
    let limit = 3;
    let per = 20;
    let holders = Arc::new(AtomicUsize::new(0));
    let max_seen = Arc::new(AtomicUsize::new(0));
    let (h, m) = (holders.clone(), max_seen.clone());
    let acquired = run_threads(&s, move |_, c| {
        let mut mine = 0;
        for _ in 0..per {
            let Some(id) = acquire_semaphore_with_lock(c, "semaphore:remote", limit) else {
                thread::sleep(Duration::from_millis(1));
                continue;
            };
            mine += 1;
            let now = h.fetch_add(1, Ordering::SeqCst) + 1;
            m.fetch_max(now, Ordering::SeqCst);
            let _: i64 = r!(c, "INCR", "acquired:total");
            thread::sleep(Duration::from_millis(2));
            h.fetch_sub(1, Ordering::SeqCst);
            assert!(release_fair_semaphore(c, "semaphore:remote", &id));
        }
        mine
    });
    let total: i64 = acquired.iter().sum();
    let max = max_seen.load(Ordering::SeqCst);
    assert!(max <= limit as usize, "{max} holders at once");
    assert!(total > 0);
    let mut c = s.redis();
    let c = &mut c;
    let counted: i64 = r!(c, "GET", "acquired:total");
    assert_eq!(counted, total);
    let attempts: i64 = r!(c, "GET", "semaphore:remote:counter");
    assert_eq!(attempts, (THREADS * per) as i64);
    let left: i64 = r!(
        c,
        "EXISTS",
        "semaphore:remote",
        "semaphore:remote:owner",
        "lock:semaphore:remote"
    );
    assert_eq!(left, 0);
    eprintln!(
        "fair semaphore: {total} of {} attempts acquired, at most {max} holders",
        THREADS * per
    );
}
