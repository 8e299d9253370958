//! maxmemory and eviction against the built `cinnabar-server`: which keys
//! each policy chooses, OOM under noeviction (and in MULTI / scripts), the
//! `evicted` event, resident memory staying near the limit while writing
//! far past it, and the hit rate of a Zipf-distributed cache workload.
//!
//! Every expectation holds on Redis 7.0.15 too; run
//! `CINNABAR_BIN=$(command -v redis-server) cargo test -p cinnabar-tests
//! --test eviction` to check them again.

use cinnabar_tests::{encode, info_int, text, RawClient, RespFrame as Frame, Server};
use std::collections::HashSet;
use std::time::Duration;

const OOM: &str = "OOM command not allowed when used memory > 'maxmemory'.";

/// Sends all commands pipelined (in chunks) and returns the replies.
fn pipeline(c: &mut RawClient, cmds: &[Vec<Vec<u8>>]) -> Vec<Frame> {
    let mut out = Vec::with_capacity(cmds.len());
    for chunk in cmds.chunks(500) {
        let mut buf = Vec::new();
        for cmd in chunk {
            buf.extend_from_slice(&encode(cmd));
        }
        c.send(&buf);
        for _ in chunk {
            out.push(c.read());
        }
    }
    out
}

fn cmd(parts: &[&[u8]]) -> Vec<Vec<u8>> {
    parts.iter().map(|p| p.to_vec()).collect()
}

fn exists(c: &mut RawClient, key: &str) -> bool {
    c.cmd(&["EXISTS", key]) == Frame::Integer(1)
}

/// `n` keys `prefix:i` with 1000-byte values; with a TTL of `ttl(i)` if given.
fn load(c: &mut RawClient, prefix: &str, n: usize, ttl: Option<&dyn Fn(usize) -> u64>) {
    let val = vec![b'x'; 1000];
    let cmds: Vec<_> = (0..n)
        .map(|i| {
            let k = format!("{prefix}:{i}");
            match ttl {
                Some(f) => cmd(&[
                    b"SET",
                    k.as_bytes(),
                    &val,
                    b"EX",
                    f(i).to_string().as_bytes(),
                ]),
                None => cmd(&[b"SET", k.as_bytes(), &val]),
            }
        })
        .collect();
    for r in pipeline(c, &cmds) {
        assert_eq!(r, Frame::Simple("OK".into()));
    }
}

/// Lowers maxmemory `bytes` below current use and runs one write, which
/// evicts first. Returns the number of keys evicted.
fn squeeze(c: &mut RawClient, policy: &str, bytes: i64) -> i64 {
    assert_eq!(
        text(&c.cmd(&["CONFIG", "SET", "maxmemory-policy", policy])),
        "OK"
    );
    let used = info_int(c, "memory", "used_memory");
    let max = (used - bytes).to_string();
    assert_eq!(text(&c.cmd(&["CONFIG", "SET", "maxmemory", &max])), "OK");
    assert_eq!(text(&c.cmd(&["SET", "trigger", "1"])), "OK");
    // Redis may finish a long round in the background: let it settle.
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(text(&c.cmd(&["CONFIG", "SET", "maxmemory", "0"])), "OK");
    info_int(c, "stats", "evicted_keys")
}

fn survivors(c: &mut RawClient, prefix: &str, n: usize) -> Vec<usize> {
    let cmds: Vec<_> = (0..n)
        .map(|i| cmd(&[b"EXISTS", format!("{prefix}:{i}").as_bytes()]))
        .collect();
    pipeline(c, &cmds)
        .iter()
        .enumerate()
        .filter(|(_, r)| **r == Frame::Integer(1))
        .map(|(i, _)| i)
        .collect()
}

#[test]
fn volatile_policies_never_evict_keys_without_ttl() {
    for policy in [
        "volatile-lru",
        "volatile-lfu",
        "volatile-random",
        "volatile-ttl",
    ] {
        let s = Server::start(&[]);
        let mut c = s.raw();
        load(&mut c, "p", 1000, None);
        load(&mut c, "v", 1000, Some(&|_| 1000));
        let evicted = squeeze(&mut c, policy, 500_000);
        assert!(evicted > 100, "{policy}: evicted {evicted}");
        assert_eq!(survivors(&mut c, "p", 1000).len(), 1000, "{policy}");
        let v = survivors(&mut c, "v", 1000).len() as i64;
        assert_eq!(v, 1000 - evicted, "{policy}");
    }
}

#[test]
fn volatile_ttl_evicts_the_shortest_ttl_first() {
    let s = Server::start(&[]);
    let mut c = s.raw();
    load(&mut c, "v", 2000, Some(&|i| 1000 + i as u64 * 10));
    let evicted = squeeze(&mut c, "volatile-ttl", 500_000) as usize;
    let alive: HashSet<usize> = survivors(&mut c, "v", 2000).into_iter().collect();
    assert_eq!(alive.len(), 2000 - evicted);
    // Sampling is approximate: nearly all victims come from the shortest
    // TTLs, and the longest TTLs all survive.
    let gone_early = (0..evicted * 2).filter(|i| !alive.contains(i)).count();
    assert!(gone_early * 100 >= evicted * 95, "{gone_early}/{evicted}");
    assert!((2000 - 500..2000).all(|i| alive.contains(&i)));
}

#[test]
fn allkeys_lru_keeps_recently_used_keys() {
    let s = Server::start(&[]);
    let mut c = s.raw();
    load(&mut c, "k", 2000, None);
    // The LRU clock ticks in seconds.
    std::thread::sleep(Duration::from_millis(2100));
    let hot: Vec<_> = (0..400)
        .map(|i| cmd(&[b"GET", format!("k:{i}").as_bytes()]))
        .collect();
    pipeline(&mut c, &hot);
    let evicted = squeeze(&mut c, "allkeys-lru", 800_000);
    assert!(evicted > 400, "evicted {evicted}");
    let alive = survivors(&mut c, "k", 2000);
    let hot_alive = alive.iter().filter(|&&i| i < 400).count();
    assert!(hot_alive >= 390, "hot keys kept: {hot_alive}/400");
}

#[test]
fn allkeys_lfu_keeps_frequently_used_keys() {
    let s = Server::start(&[("maxmemory-policy", "allkeys-lfu")]);
    let mut c = s.raw();
    load(&mut c, "k", 2000, None);
    let hot: Vec<_> = (0..10)
        .flat_map(|_| (0..400).map(|i| cmd(&[b"GET", format!("k:{i}").as_bytes()])))
        .collect();
    pipeline(&mut c, &hot);
    let evicted = squeeze(&mut c, "allkeys-lfu", 800_000);
    assert!(evicted > 400, "evicted {evicted}");
    let alive = survivors(&mut c, "k", 2000);
    let hot_alive = alive.iter().filter(|&&i| i < 400).count();
    assert!(hot_alive >= 390, "hot keys kept: {hot_alive}/400");
}

#[test]
fn allkeys_random_evicts_and_counts() {
    let s = Server::start(&[]);
    let mut c = s.raw();
    load(&mut c, "k", 1000, None);
    let evicted = squeeze(&mut c, "allkeys-random", 300_000);
    assert!(evicted > 100);
    // +1: the trigger key.
    assert_eq!(
        c.cmd(&["DBSIZE"]),
        Frame::Integer(1000 - evicted + 1),
        "evicted {evicted}"
    );
}

#[test]
fn noeviction_refuses_writes_but_serves_reads() {
    let s = Server::start(&[]);
    let mut c = s.raw();
    assert_eq!(text(&c.cmd(&["SET", "a", "1"])), "OK");
    assert_eq!(text(&c.cmd(&["CONFIG", "SET", "maxmemory", "1"])), "OK");
    assert_eq!(c.cmd(&["SET", "b", "1"]), Frame::Error(OOM.into()));
    assert_eq!(c.cmd(&["INCR", "a"]), Frame::Error(OOM.into()));
    assert_eq!(text(&c.cmd(&["GET", "a"])), "1");
    assert_eq!(c.cmd(&["DEL", "a"]), Frame::Integer(1));
    assert_eq!(text(&c.cmd(&["PING"])), "PONG");
    // Queuing uses memory: any command but EXEC/DISCARD is refused.
    assert_eq!(text(&c.cmd(&["MULTI"])), "OK");
    assert_eq!(c.cmd(&["GET", "a"]), Frame::Error(OOM.into()));
    assert_eq!(
        c.cmd(&["EXEC"]),
        Frame::Error("EXECABORT Transaction discarded because of previous errors.".into())
    );
    assert_eq!(text(&c.cmd(&["MULTI"])), "OK");
    assert_eq!(text(&c.cmd(&["DISCARD"])), "OK");
    // A script runs; its writes are refused.
    let e = text(&c.cmd(&["EVAL", "return redis.call('set','a','1')", "0"]));
    assert!(e.starts_with(OOM), "{e}");
    assert_eq!(
        c.cmd(&["EVAL", "return redis.call('get','a')", "0"]),
        Frame::Null
    );
    assert_eq!(info_int(&mut c, "stats", "evicted_keys"), 0);
    assert_eq!(text(&c.cmd(&["CONFIG", "SET", "maxmemory", "0"])), "OK");
    assert_eq!(text(&c.cmd(&["SET", "b", "1"])), "OK");
}

#[test]
fn evicted_keys_are_announced_and_unwatched() {
    let s = Server::start(&[("notify-keyspace-events", "Ee")]);
    let mut c = s.raw();
    let mut sub = s.raw();
    sub.cmd(&["SUBSCRIBE", "__keyevent@0__:evicted"]);
    load(&mut c, "k", 200, None);
    let mut w = s.raw();
    assert_eq!(text(&w.cmd(&["WATCH", "k:0"])), "OK");
    // Everything goes, and then the write is refused.
    c.cmd(&["CONFIG", "SET", "maxmemory-policy", "allkeys-random"]);
    c.cmd(&["CONFIG", "SET", "maxmemory", "1"]);
    // A round that runs out of time lets the command through and goes on
    // in the background (Redis does the same); once all is gone, OOM.
    let refused = (0..200).any(|_| {
        if c.cmd(&["SET", "trigger", "1"]) == Frame::Error(OOM.into()) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(10));
        false
    });
    assert!(refused, "SET never refused");
    assert_eq!(c.cmd(&["DBSIZE"]), Frame::Integer(0));
    // 200, plus `trigger` if a SET got through before the end.
    assert!(info_int(&mut c, "stats", "evicted_keys") >= 200);
    let got = sub.read();
    match got {
        Frame::Array(v) | Frame::Push(v) => {
            assert_eq!(text(&v[0]), "message");
            assert!(text(&v[2]).starts_with("k:"));
        }
        other => panic!("{other:?}"),
    }
    assert!(!exists(&mut c, "k:0"));
    c.cmd(&["CONFIG", "SET", "maxmemory", "0"]);
    assert_eq!(text(&w.cmd(&["MULTI"])), "OK");
    assert_eq!(text(&w.cmd(&["PING"])), "QUEUED");
    assert_eq!(w.cmd(&["EXEC"]), Frame::Null);
}

/// As in Redis, whose Lua allocates outside its counted allocator: the
/// interpreter's memory is INFO's `used_memory_lua`, not part of
/// `used_memory`, so a script's garbage evicts no keys.
#[test]
fn lua_memory_is_reported_apart_from_used_memory() {
    let s = Server::start(&[]);
    let mut c = s.raw();
    c.cmd(&["SCRIPT", "LOAD", "return 1"]);
    assert_eq!(info_int(&mut c, "memory", "number_of_cached_scripts"), 1);
    let used = info_int(&mut c, "memory", "used_memory");
    let lua = info_int(&mut c, "memory", "used_memory_lua");
    // About 8 MB of strings, unreachable once the script returns.
    let big = "local t = {} for i = 1, 4000 do t[i] = string.rep('x', 2000) .. i end return #t";
    assert_eq!(c.cmd(&["EVAL", big, "0"]), Frame::Integer(4000));
    let lua_after = info_int(&mut c, "memory", "used_memory_lua");
    let used_after = info_int(&mut c, "memory", "used_memory");
    assert!(
        lua_after > lua + (4 << 20),
        "used_memory_lua {lua} -> {lua_after}"
    );
    assert!(
        used_after < used + (1 << 20),
        "used_memory {used} -> {used_after}"
    );
    assert_eq!(info_int(&mut c, "memory", "number_of_cached_scripts"), 2);
    c.cmd(&[
        "FUNCTION",
        "LOAD",
        "#!lua name=lib\nredis.register_function('f', function() return 1 end)",
    ]);
    assert_eq!(info_int(&mut c, "memory", "number_of_functions"), 1);
    assert_eq!(info_int(&mut c, "memory", "number_of_libraries"), 1);
    c.cmd(&["SCRIPT", "FLUSH"]);
    assert_eq!(info_int(&mut c, "memory", "number_of_cached_scripts"), 0);
}

fn rss_bytes(pid: u32) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    s.lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

/// Zipf(1) ranks over `n` keys by inversion of the harmonic CDF.
struct Zipf {
    cdf: Vec<f64>,
    state: u64,
}

impl Zipf {
    fn new(n: usize) -> Zipf {
        let mut cdf = Vec::with_capacity(n);
        let mut acc = 0.0;
        for i in 1..=n {
            acc += 1.0 / i as f64;
            cdf.push(acc);
        }
        for x in &mut cdf {
            *x /= acc;
        }
        Zipf {
            cdf,
            state: 0x9e37_79b9_7f4a_7c15,
        }
    }
    fn next(&mut self) -> usize {
        // xorshift64*: deterministic, so runs compare.
        self.state ^= self.state >> 12;
        self.state ^= self.state << 25;
        self.state ^= self.state >> 27;
        let r = (self.state.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 11) as f64 / (1u64 << 53) as f64;
        self.cdf.partition_point(|&c| c < r)
    }
}

/// The fill test: writing 4x the limit keeps resident memory near
/// the limit, and a Zipf-distributed read-through cache keeps a good hit
/// rate. (bench/evict.sh compares both numbers with Redis.)
#[test]
fn fill_far_past_the_limit_keeps_memory_and_hit_rate() {
    let s = Server::start(&[("maxmemory-policy", "allkeys-lru"), ("appendonly", "no")]);
    let mut c = s.raw();
    c.set_timeout(Duration::from_secs(60));
    std::thread::sleep(Duration::from_millis(200));
    let base = rss_bytes(s.pid());
    let limit: u64 = 50 << 20;
    assert_eq!(text(&c.cmd(&["CONFIG", "SET", "maxmemory", "50mb"])), "OK");
    // 200 MB of 1000-byte values under distinct keys.
    let val = vec![b'v'; 1000];
    let mut i = 0;
    while i < 200_000 {
        let cmds: Vec<_> = (i..i + 5000)
            .map(|j| cmd(&[b"SET", format!("fill:{j}").as_bytes(), &val]))
            .collect();
        for r in pipeline(&mut c, &cmds) {
            assert_eq!(r, Frame::Simple("OK".into()));
        }
        i += 5000;
    }
    let used = info_int(&mut c, "memory", "used_memory") as u64;
    let rss = rss_bytes(s.pid());
    let evicted = info_int(&mut c, "stats", "evicted_keys");
    assert!(evicted > 100_000, "evicted {evicted}");
    assert!(used <= limit + limit / 20, "used_memory {used}");
    // Resident memory, not only the accounted kind, stays within 10% of
    // the limit (Redis: within ~1%).
    let grown = rss.saturating_sub(base);
    assert!(
        grown <= limit + limit / 10,
        "resident grew by {grown} (base {base}) for a limit of {limit}"
    );

    // Read-through cache: GET, and SET on a miss, over 100,000 keys of
    // 2000 bytes (200 MB wanted, 50 MB allowed), Zipf(1) ranks.
    let val = vec![b'z'; 2000];
    let mut z = Zipf::new(100_000);
    let (mut hits, mut gets) = (0u64, 0u64);
    for round in 0..60 {
        let keys: Vec<usize> = (0..1000).map(|_| z.next()).collect();
        let gets_cmds: Vec<_> = keys
            .iter()
            .map(|k| cmd(&[b"GET", format!("z:{k}").as_bytes()]))
            .collect();
        let replies = pipeline(&mut c, &gets_cmds);
        let mut sets = Vec::new();
        for (k, r) in keys.iter().zip(&replies) {
            if round >= 20 {
                gets += 1;
            }
            if *r == Frame::Null {
                sets.push(cmd(&[b"SET", format!("z:{k}").as_bytes(), &val]));
            } else if round >= 20 {
                hits += 1;
            }
        }
        pipeline(&mut c, &sets);
    }
    let rate = hits as f64 / gets as f64;
    // Keeping the 22,000 most popular keys would hit about 87%.
    assert!(rate > 0.7, "hit rate {rate:.3}");
}

/// `lazyfree-lazy-eviction`: evicted values too large to free at once
/// (sets of 100 members: a table of 100 entries) go to the background,
/// counted in `lazyfreed_objects`; without it they are freed in place.
#[test]
fn lazyfree_lazy_eviction_frees_large_values_in_the_background() {
    for (lazy, background) in [("yes", true), ("no", false)] {
        let s = Server::start(&[
            ("maxmemory-policy", "allkeys-random"),
            ("lazyfree-lazy-eviction", lazy),
        ]);
        let mut c = s.raw();
        let fill = "for i = 1, 100 do redis.call('sadd', KEYS[1], 'member:' .. i) end";
        for k in 0..50 {
            c.cmd(&["EVAL", fill, "1", &format!("s{k}")]);
        }
        let used = info_int(&mut c, "memory", "used_memory");
        let max = (used - 200_000).to_string();
        assert!(matches!(
            c.cmd(&["CONFIG", "SET", "maxmemory", &max]),
            Frame::Simple(_)
        ));
        for k in 50..100 {
            c.cmd(&["EVAL", fill, "1", &format!("s{k}")]);
        }
        assert!(info_int(&mut c, "stats", "evicted_keys") > 0);
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while background && info_int(&mut c, "memory", "lazyfreed_objects") == 0 {
            assert!(
                std::time::Instant::now() < deadline,
                "nothing freed in the background"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        if !background {
            assert_eq!(info_int(&mut c, "memory", "lazyfreed_objects"), 0);
        }
    }
}

/// `maxmemory-samples`: with as many samples as keys each round sees them
/// all, so volatile-ttl evicts exactly the shortest TTLs; one sample a
/// round picks among few, and the victims stray from that order.
#[test]
fn maxmemory_samples_decides_how_precise_eviction_is() {
    // Values of 20 KB, so that what else the server allocates meanwhile
    // (buffers of a few KB) moves the count of victims by a key or two.
    let val = vec![b'x'; 20_000];
    let sets: Vec<_> = (0..60)
        .map(|i| {
            let (k, ttl) = (format!("v:{i}"), (1000 + i).to_string());
            cmd(&[b"SET", k.as_bytes(), &val, b"EX", ttl.as_bytes()])
        })
        .collect();
    for (samples, exact) in [("64", true), ("1", false)] {
        let s = Server::start(&[("maxmemory-samples", samples)]);
        let mut c = s.raw();
        pipeline(&mut c, &sets);
        let evicted = squeeze(&mut c, "volatile-ttl", 600_000) as usize;
        // Twenty victims or more: one sample a round giving exactly the
        // shortest TTLs is below one chance in 10^15.
        assert!((20..45).contains(&evicted), "samples {samples}: {evicted}");
        let shortest_gone: Vec<usize> = (evicted..60).collect();
        assert_eq!(
            survivors(&mut c, "v", 60) == shortest_gone,
            exact,
            "samples {samples}"
        );
    }
}

/// `maxmemory-eviction-tenacity`: at 0 a round ends after 16 evictions,
/// so each of pipelined commands (which run before the eviction timer
/// gets a turn) evicts 16 keys, and the timer evicts the rest between
/// commands; at 100 the first command evicts all it must. CONFIG SET
/// itself only starts the timer.
#[test]
fn maxmemory_eviction_tenacity_bounds_a_round() {
    for (tenacity, sizes) in [("0", [1984, 1968, 1952]), ("100", [0, 0, 0])] {
        let s = Server::start(&[
            ("maxmemory-policy", "allkeys-random"),
            ("maxmemory-eviction-tenacity", tenacity),
        ]);
        let mut c = s.raw();
        load(&mut c, "k", 2000, None);
        let mut cmds = vec![cmd(&[b"CONFIG", b"SET", b"maxmemory", b"1"])];
        cmds.extend(std::iter::repeat_n(cmd(&[b"DBSIZE"]), 3));
        let mut want = vec![Frame::Simple("OK".into())];
        want.extend(sizes.map(Frame::Integer));
        assert_eq!(pipeline(&mut c, &cmds), want, "tenacity {tenacity}");
        cinnabar_tests::wait_for("the timer to evict the rest", || {
            c.cmd(&["DBSIZE"]) == Frame::Integer(0)
        });
        assert_eq!(info_int(&mut c, "stats", "evicted_keys"), 2000);
    }
}
