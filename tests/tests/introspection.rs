//! Introspection as in Redis 7.0.15: CONFIG SET of an unchanged value
//! applies nothing (setting `bind` and `port` to what they are keeps the
//! listeners); a slow active expiry cycle is a latency event; threaded
//! I/O's counters move under `io-threads` as Redis's do.

use cinnabar_tests::*;

#[test]
fn config_set_to_the_current_bind_and_port() {
    let s = Server::start(&[]);
    let mut c = s.raw();
    let get = |c: &mut RawClient, name: &str| match c.cmd(&["CONFIG", "GET", name]) {
        RespFrame::Array(kv) => text(&kv[1]),
        f => panic!("{f:?}"),
    };
    let bind = get(&mut c, "bind");
    let port = get(&mut c, "port");
    assert_eq!(c.cmd(&["CONFIG", "SET", "bind", &bind]), ok());
    assert_eq!(
        c.cmd(&["CONFIG", "SET", "port", &port, "bind", &bind]),
        ok()
    );
    assert_eq!(s.raw().cmd(&["PING"]), simple("PONG"));
}

/// An active expiry cycle slower than latency-monitor-threshold is a
/// latency event (`expire-cycle`).
#[test]
fn slow_expire_cycle_is_a_latency_event() {
    let s = Server::start(&[]);
    let mut c = s.raw();
    assert_eq!(
        c.cmd(&["CONFIG", "SET", "latency-monitor-threshold", "1"]),
        ok()
    );
    let fill = "for i = 1, tonumber(ARGV[1]) do redis.call('sadd', KEYS[1], i) end";
    c.cmd(&["EVAL", fill, "1", "big", "100000"]);
    assert_eq!(c.cmd(&["PEXPIRE", "big", "20"]), int(1));
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while c.cmd(&["DBSIZE"]) != int(0) {
        assert!(std::time::Instant::now() < deadline, "never expired");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let latest = format!("{:?}", c.cmd(&["LATENCY", "LATEST"]));
    assert!(latest.contains("expire-cycle"), "{latest}");
}

/// DEBUG OBJECT measures as Redis: the key's idle time and LRU clock (and
/// looking does not count as an access), the RDB length of every type;
/// INFO's `hz` follows `dynamic-hz` (doubled past 200 clients a tick);
/// `io_threads_active` says whether `io-threads` workers serve.
#[test]
fn debug_object_and_hz_measure() {
    let s = Server::start(&[("enable-debug-command", "yes")]);
    let mut c = s.raw();
    c.cmd(&["HSET", "h", "a", "1", "b", "2"]);
    c.cmd(&["SADD", "st", "1", "2", "3"]);
    c.cmd(&["SADD", "ss", "a", "b", "c"]);
    c.cmd(&["ZADD", "z", "1", "a", "2", "b"]);
    c.cmd(&["SET", "n", "12345"]);
    c.cmd(&["SET", "m", "5"]);
    let field = |c: &mut RawClient, key: &str, name: &str| -> String {
        let t = text(&c.cmd(&["DEBUG", "OBJECT", key]));
        t.split(' ')
            .find_map(|f| f.strip_prefix(&format!("{name}:")))
            .unwrap_or_else(|| panic!("{t}"))
            .to_string()
    };
    // Redis 7.0.15's figures for the same values.
    for (key, len) in [
        ("h", "18"),
        ("st", "15"),
        ("ss", "7"),
        ("z", "18"),
        ("n", "3"),
    ] {
        assert_eq!(field(&mut c, key, "serializedlength"), len, "{key}");
    }
    assert_eq!(field(&mut c, "n", "refcount"), "1");
    assert_eq!(field(&mut c, "m", "refcount"), "2147483647");
    let lru = field(&mut c, "h", "lru");
    std::thread::sleep(std::time::Duration::from_millis(2100));
    let idle: u64 = field(&mut c, "h", "lru_seconds_idle").parse().unwrap();
    assert!((2..=4).contains(&idle), "{idle}");
    assert_eq!(field(&mut c, "h", "lru"), lru);
    assert_eq!(c.cmd(&["OBJECT", "IDLETIME", "h"]), int(idle as i64));

    assert_eq!(info_field(&mut c, "server", "io_threads_active"), "0");
    assert_eq!(c.cmd(&["CONFIG", "SET", "hz", "1000"]), ok());
    assert_eq!(info_field(&mut c, "server", "configured_hz"), "500");
    assert_eq!(c.cmd(&["CONFIG", "SET", "hz", "1"]), ok());
    let _many: Vec<RawClient> = (0..205).map(|_| s.raw()).collect();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while info_field(&mut c, "server", "hz") != "2" {
        assert!(std::time::Instant::now() < deadline, "hz never doubled");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert_eq!(info_field(&mut c, "server", "configured_hz"), "1");
    assert_eq!(c.cmd(&["CONFIG", "SET", "dynamic-hz", "no"]), ok());
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while info_field(&mut c, "server", "hz") != "1" {
        assert!(std::time::Instant::now() < deadline, "hz stayed doubled");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

fn info(c: &mut RawClient, section: &str) -> String {
    text(&c.cmd(&["INFO", section]))
}

/// A blocked command counts when it ends, as Redis's: served, its latency
/// sample; failed by CLIENT UNBLOCK ... ERROR, its failed call and the
/// UNBLOCKED error.
#[test]
fn blocked_commands_count_when_they_end() {
    let s = Server::start(&[]);
    let mut c = s.raw();
    let mut rd = s.raw();
    let Ok(id) = text(&rd.cmd(&["CLIENT", "ID"])).parse::<i64>() else {
        panic!("CLIENT ID is not a number");
    };
    rd.send_cmd(&["BLPOP", "list1", "0"]);
    std::thread::sleep(std::time::Duration::from_millis(100));
    assert_eq!(c.cmd(&["LPUSH", "list1", "a"]), int(1));
    assert_eq!(rd.read(), RespFrame::Array(vec![bulk("list1"), bulk("a")]));
    assert!(info(&mut c, "latencystats").contains("latency_percentiles_usec_blpop:p50="));
    assert_eq!(c.cmd(&["CONFIG", "RESETSTAT"]), ok());
    rd.send_cmd(&["BLPOP", "list1", "0"]);
    std::thread::sleep(std::time::Duration::from_millis(100));
    assert_eq!(
        c.cmd(&["CLIENT", "UNBLOCK", &id.to_string(), "ERROR"]),
        int(1)
    );
    assert_eq!(
        rd.read(),
        err("UNBLOCKED client unblocked via CLIENT UNBLOCK")
    );
    let errors = info(&mut c, "errorstats");
    assert!(errors.contains("errorstat_UNBLOCKED:count=1"), "{errors}");
    let cmds = info(&mut c, "commandstats");
    assert!(
        cmds.contains("cmdstat_blpop:calls=1,")
            && cmds.contains(",rejected_calls=0,failed_calls=1"),
        "{cmds}"
    );
    assert!(info(&mut c, "stats").contains("total_error_replies:1"));
}

/// Snapshot jobs count as Redis's forks; CONFIG SET appendonly yes inside
/// a transaction schedules the rewrite for the cron.
#[test]
fn snapshot_jobs_count_as_forks() {
    let s = Server::start(&[]);
    let mut c = s.raw();
    let forks = |c: &mut RawClient| {
        let stats = info(c, "stats");
        let line = stats
            .lines()
            .find_map(|l| l.strip_prefix("total_forks:"))
            .map(|v| v.trim().to_string());
        line.and_then(|v| v.parse::<u64>().ok())
            .expect("total_forks")
    };
    assert_eq!(forks(&mut c), 0);
    assert_eq!(c.cmd(&["MULTI"]), ok());
    assert_eq!(c.cmd(&["SET", "foo", "bar"]), simple("QUEUED"));
    assert_eq!(
        c.cmd(&["CONFIG", "SET", "appendonly", "yes"]),
        simple("QUEUED")
    );
    assert_eq!(c.cmd(&["EXEC"]), RespFrame::Array(vec![ok(), ok()]));
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while forks(&mut c) == 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "the rewrite never started"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert!(s
        .log()
        .contains("AOF was enabled during a transaction. An AOF background was scheduled to start when possible."));
}

/// LATENCY HISTOGRAM reports the recorded latencies, not one bucket at the
/// mean: buckets double from 1024 ns, each named in microseconds by the
/// highest value its level stands for (Redis 7.0.15 named a KEYS call of
/// 63 ms `67633`, the 2^26 ns bucket), counts cumulative, only where they
/// grow. Commands never run and unknown names are left out.
#[test]
fn latency_histogram_has_the_recorded_buckets() {
    let s = Server::start(&[]);
    let mut c = s.raw();
    let fill = "for i = 1, 200000 do redis.call('set', 'k' .. i, 'v') end";
    c.cmd(&["EVAL", fill, "0"]);
    assert_eq!(c.cmd(&["CONFIG", "RESETSTAT"]), ok());
    for _ in 0..20 {
        assert_eq!(c.cmd(&["SET", "a", "b"]), ok());
    }
    c.cmd(&["KEYS", "*"]);
    let named: Vec<i64> = (0..30)
        .map(|k| {
            let level = 1024i64 << k;
            (level + level / 128 - 1) / 1000
        })
        .collect();
    let RespFrame::Array(reply) = c.cmd(&["LATENCY", "HISTOGRAM", "set", "keys", "get", "nosuch"])
    else {
        panic!("not an array");
    };
    assert_eq!(reply.len(), 4, "{reply:?}");
    for (name, calls) in [("keys", 1), ("set", 20)] {
        let at = reply.iter().position(|f| text(f) == name).expect(name);
        let RespFrame::Array(fields) = &reply[at + 1] else {
            panic!("{name}: {:?}", reply[at + 1]);
        };
        assert_eq!(fields[..2], [bulk("calls"), int(calls)]);
        assert_eq!(text(&fields[2]), "histogram_usec");
        let RespFrame::Array(b) = &fields[3] else {
            panic!("{name}: {:?}", fields[3]);
        };
        let pairs: Vec<(i64, i64)> = b
            .chunks(2)
            .map(|p| match p {
                [RespFrame::Integer(u), RespFrame::Integer(n)] => (*u, *n),
                _ => panic!("{p:?}"),
            })
            .collect();
        assert!(pairs.iter().all(|(u, _)| named.contains(u)), "{pairs:?}");
        assert!(pairs.windows(2).all(|w| w[0].0 < w[1].0 && w[0].1 < w[1].1));
        assert_eq!(pairs.last().map(|p| p.1), Some(calls), "{pairs:?}");
    }
}

/// INFO's total_reads_processed and total_writes_processed count read and
/// write events, as Redis 7.0.15 does: a pipeline of 100 requests is one
/// read and one write, as is a single request.
#[test]
fn reads_and_writes_processed_count_events_not_commands() {
    let s = Server::start(&[]);
    let mut c = s.raw();
    // One INFO for both: each INFO is a read and a write of its own.
    let counts = |c: &mut RawClient| {
        let info = text(&c.cmd(&["INFO", "stats"]));
        let field = |name: &str| -> i64 {
            let line = info.lines().find_map(|l| l.strip_prefix(name)).unwrap();
            line.trim_start_matches(':').trim().parse().unwrap()
        };
        (
            field("total_reads_processed"),
            field("total_writes_processed"),
        )
    };
    let a = counts(&mut c);
    c.send(&b"PING\r\n".repeat(100));
    for _ in 0..100 {
        assert_eq!(c.read(), simple("PONG"));
    }
    let b = counts(&mut c);
    assert_eq!(c.cmd(&["PING"]), simple("PONG"));
    let d = counts(&mut c);
    // Each delta: the requests' read and write and one INFO's.
    assert_eq!((b.0 - a.0, b.1 - a.1), (2, 2));
    assert_eq!((d.0 - b.0, d.1 - b.1), (2, 2));
}

/// Rounds of 20 connections' requests at once: with `io-threads 2` their
/// writes count as threaded (Redis threads a round of 4 or more pending
/// writes), their reads only with `io-threads-do-reads yes`; with one
/// thread nothing is. Holds for redis-server 7.0.15 too.
#[test]
fn threaded_io_counters_follow_io_threads_do_reads() {
    let threaded = |s: &Server| {
        let mut c = s.raw();
        (
            info_int(&mut c, "stats", "io_threaded_reads_processed"),
            info_int(&mut c, "stats", "io_threaded_writes_processed"),
        )
    };
    for (threads, do_reads) in [("1", "yes"), ("2", "no"), ("2", "yes")] {
        let s = Server::start(&[
            ("io-threads", threads),
            ("io-threads-do-reads", do_reads),
            ("enable-debug-command", "yes"),
        ]);
        let mut sleeper = s.raw();
        let mut conns: Vec<RawClient> = (0..20).map(|_| s.raw()).collect();
        let ping = encode(&["PING"]);
        // The server sleeps while the PINGs arrive, so that one round
        // takes them all.
        for _ in 0..5 {
            sleeper.send(&encode(&["DEBUG", "SLEEP", "0.05"]));
            for c in &mut conns {
                c.send(&ping);
            }
            assert_eq!(sleeper.read(), ok());
            for c in &mut conns {
                assert_eq!(c.read(), simple("PONG"));
            }
        }
        let (reads, writes) = threaded(&s);
        match (threads, do_reads) {
            ("1", _) => assert_eq!((reads, writes), (0, 0)),
            (_, "no") => assert!(reads == 0 && writes > 0, "{reads} {writes}"),
            _ => assert!(reads > 0 && writes > 0, "{reads} {writes}"),
        }
    }
}
