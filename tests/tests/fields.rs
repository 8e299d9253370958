//! Field comparison: one fixed workload on cinnabar and on redis-server
//! 7.0.15, and for every field of INFO, CLIENT LIST, MEMORY STATS, DEBUG
//! OBJECT and OBJECT whether it moved or stayed — and, for the counters the
//! workload decides, by how much. A field that one server has and the other
//! lacks is a difference too.
//!
//! Fields whose movement depends on the clock or on the allocator (uptime,
//! CPU, latencies, RSS) are named in [`TIMING`] and compared by presence only.

use cinnabar_tests::{text, tool, RawClient, RespFrame, Server};
use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

/// Counters the workload fixes: their change must be the same number.
const EXACT: &[&str] = &[
    "clients.connected_clients",
    "clients.blocked_clients",
    "clients.tracking_clients",
    "stats.total_connections_received",
    "stats.total_commands_processed",
    "stats.total_net_input_bytes",
    "stats.keyspace_hits",
    "stats.keyspace_misses",
    "stats.expired_keys",
    "stats.evicted_keys",
    "stats.pubsub_channels",
    "stats.pubsub_patterns",
    "stats.total_error_replies",
    "stats.unexpected_error_replies",
    "persistence.rdb_changes_since_last_save",
    "persistence.rdb_saves",
    "keyspace.db0.keys",
    "keyspace.db0.expires",
];

/// Subfields of commandstats and errorstats that count calls and errors.
const EXACT_SUBFIELDS: &[&str] = &["calls", "rejected_calls", "failed_calls", "count"];

/// Fields whose movement over a workload of a few hundred milliseconds is
/// decided by the clock, the scheduler or the allocator, not by the
/// commands: whether `uptime_in_seconds` ticks, how much CPU or RSS a
/// second-long run takes.
const TIMING: &[&str] = &[
    "server.uptime_in_seconds",
    "server.uptime_in_days",
    "server.lru_clock",
    "server.server_time_usec",
    "memory.used_memory_rss",
    "memory.used_memory_rss_human",
    "memory.mem_fragmentation_ratio",
    "memory.mem_fragmentation_bytes",
    "memory.allocator_allocated",
    "memory.allocator_active",
    "memory.allocator_resident",
    "memory.allocator_frag_ratio",
    "memory.allocator_frag_bytes",
    "memory.allocator_rss_ratio",
    "memory.allocator_rss_bytes",
    "memory.rss_overhead_ratio",
    "memory.rss_overhead_bytes",
    "memory.used_memory_peak_perc",
    "memory.used_memory_dataset_perc",
    "stats.instantaneous_ops_per_sec",
    "stats.instantaneous_input_kbps",
    "stats.instantaneous_output_kbps",
    "stats.expire_cycle_cpu_milliseconds",
    "stats.total_active_defrag_time",
    "persistence.rdb_last_save_time",
    "persistence.rdb_last_cow_size",
    "cpu.used_cpu_sys",
    "cpu.used_cpu_user",
    "cpu.used_cpu_sys_children",
    "cpu.used_cpu_user_children",
    "cpu.used_cpu_sys_main_thread",
    "cpu.used_cpu_user_main_thread",
    "memory-stats.peak.allocated",
    "memory-stats.allocator.allocated",
    "memory-stats.allocator.active",
    "memory-stats.allocator.resident",
    "memory-stats.allocator-fragmentation.ratio",
    "memory-stats.allocator-fragmentation.bytes",
    "memory-stats.allocator-rss.ratio",
    "memory-stats.allocator-rss.bytes",
    "memory-stats.rss-overhead.ratio",
    "memory-stats.rss-overhead.bytes",
    "memory-stats.fragmentation",
    "memory-stats.fragmentation.bytes",
    "memory-stats.peak.percentage",
    "memory-stats.dataset.percentage",
];

/// Subfields that are times: `usec`, `usec_per_call` and the percentiles.
fn is_timing(key: &str) -> bool {
    TIMING.contains(&key)
        || key.ends_with(".usec")
        || key.ends_with(".usec_per_call")
        || key.starts_with("latencystats.")
        || key.ends_with(".age")
        || key.ends_with(".idle")
        || key.ends_with(".lru_seconds_idle")
        || key.ends_with(".idletime")
        || key.ends_with(".lru")
}

/// Parts of a connection's line that name it rather than describe it.
const CLIENT_IDENTITY: &[&str] = &["id", "addr", "laddr", "fd"];

type Fields = BTreeMap<String, String>;

/// INFO's `a:b` lines, with `x=1,y=2` values split into `field.x`.
fn info(c: &mut RawClient, fields: &mut Fields) {
    let all = text(&c.cmd(&["INFO", "everything"]));
    let mut section = String::new();
    for line in all.lines() {
        if let Some(s) = line.strip_prefix("# ") {
            section = s.to_lowercase();
            continue;
        }
        let Some((k, v)) = line.split_once(':') else {
            continue;
        };
        let key = format!("{section}.{k}");
        if v.contains('=') && !v.contains(' ') {
            for part in v.split(',') {
                let (sk, sv) = part.split_once('=').unwrap_or((part, ""));
                fields.insert(format!("{key}.{sk}"), sv.to_string());
            }
        } else {
            fields.insert(key, v.to_string());
        }
    }
}

/// MEMORY STATS, flattened (`db.0` holds a map of its own).
fn memory_stats(c: &mut RawClient, fields: &mut Fields) {
    fn walk(prefix: &str, f: &RespFrame, fields: &mut Fields) {
        match f {
            RespFrame::Array(kv) => {
                for pair in kv.chunks(2) {
                    walk(&format!("{prefix}.{}", text(&pair[0])), &pair[1], fields);
                }
            }
            other => {
                fields.insert(prefix.to_string(), text(other));
            }
        }
    }
    walk("memory-stats", &c.cmd(&["MEMORY", "STATS"]), fields);
}

/// Every named connection's CLIENT LIST fields.
fn clients(c: &mut RawClient, fields: &mut Fields) {
    for line in text(&c.cmd(&["CLIENT", "LIST"])).lines() {
        let parts: BTreeMap<&str, &str> =
            line.split(' ').filter_map(|p| p.split_once('=')).collect();
        let name = parts.get("name").copied().unwrap_or_default();
        if name.is_empty() {
            continue;
        }
        for (k, v) in parts {
            if !CLIENT_IDENTITY.contains(&k) {
                fields.insert(format!("client.{name}.{k}"), v.to_string());
            }
        }
    }
}

/// DEBUG OBJECT and OBJECT of each key the workload leaves.
fn objects(c: &mut RawClient, fields: &mut Fields) {
    for key in ["str", "int", "list", "hash", "set", "zset", "stream", "hll"] {
        let debug = text(&c.cmd(&["DEBUG", "OBJECT", key]));
        // `Value at:` is an address.
        for part in debug.split(' ').filter_map(|p| p.split_once(':')) {
            if part.0 == "at" {
                continue;
            }
            fields.insert(format!("debug.{key}.{}", part.0), part.1.to_string());
        }
        for sub in ["ENCODING", "REFCOUNT", "IDLETIME", "FREQ"] {
            let reply = text(&c.cmd(&["OBJECT", sub, key]));
            fields.insert(format!("object.{key}.{}", sub.to_lowercase()), reply);
        }
    }
}

fn snapshot(c: &mut RawClient) -> Fields {
    let mut fields = Fields::new();
    info(c, &mut fields);
    memory_stats(c, &mut fields);
    clients(c, &mut fields);
    objects(c, &mut fields);
    fields
}

fn named(s: &Server, name: &str) -> RawClient {
    let mut c = s.raw();
    c.cmd(&["CLIENT", "SETNAME", name]);
    c
}

/// The workload: reads and writes of every type, hits and misses, an
/// expiry, errors of three kinds, a transaction, a script, pub/sub, a
/// blocked client, a save with writes after it, a large request arriving.
fn workload(s: &Server, main: &mut RawClient) -> Vec<RawClient> {
    let mut sub = named(s, "subscriber");
    sub.send_cmd(&["SUBSCRIBE", "news"]);
    sub.read();
    sub.send_cmd(&["PSUBSCRIBE", "new*"]);
    sub.read();
    let mut blocked = named(s, "blocked");
    blocked.send_cmd(&["BLPOP", "nothing", "0"]);
    let mut tracked = named(s, "tracked");
    tracked.cmd(&["HELLO", "3"]);
    tracked.cmd(&["CLIENT", "TRACKING", "on"]);
    tracked.cmd(&["GET", "str"]);

    let m = main;
    for cmd in [
        &["SET", "str", "hello"][..],
        &["GET", "str"],
        &["GET", "missing"],
        &["SET", "int", "12345"],
        &["INCRBY", "int", "5"],
        &["SET", "soon", "x", "PX", "20"],
        &["RPUSH", "list", "a", "b", "c", "d"],
        &["LPOP", "list"],
        &["LRANGE", "list", "0", "-1"],
        &["HSET", "hash", "f1", "v1", "f2", "v2"],
        &["HGET", "hash", "f1"],
        &["SADD", "set", "1", "2", "3"],
        &["SISMEMBER", "set", "4"],
        &["ZADD", "zset", "1", "a", "2", "b"],
        &["ZRANGE", "zset", "0", "-1", "WITHSCORES"],
        &["XADD", "stream", "1-1", "f", "v"],
        &["XLEN", "stream"],
        &["PFADD", "hll", "a", "b", "c"],
        &["PFCOUNT", "hll"],
        &["EXPIRE", "hash", "1000"],
        // A wrong type, a bad number, an unknown command, a wrong arity.
        &["LPUSH", "str", "x"],
        &["INCR", "str"],
        &["NOSUCHCOMMAND"],
        &["GET"],
        &["MULTI"],
        &["INCR", "int"],
        &["SET", "str", "world"],
        &["EXEC"],
        &[
            "EVAL",
            "return redis.call('set', KEYS[1], ARGV[1])",
            "1",
            "str",
            "lua",
        ],
        &["PUBLISH", "news", "hello"],
        &["SAVE"],
        &["SET", "str", "after"],
        &["DEL", "nothing-here"],
        &["LPUSH", "list", "e", "f"],
    ] {
        m.cmd(cmd);
    }
    // Let `soon` expire and be found by a read or by the expiry cycle.
    std::thread::sleep(Duration::from_millis(150));
    m.cmd(&["GET", "soon"]);
    sub.read();
    sub.read();
    tracked.read();
    // Half of a 200 KB argument, held for a few of the cron's samples.
    let mut partial = s.raw();
    let mut half = b"*3\r\n$3\r\nSET\r\n$7\r\npartial\r\n$200000\r\n".to_vec();
    half.resize(half.len() + 100_000, b'x');
    partial.send(&half);
    std::thread::sleep(Duration::from_millis(500));
    vec![sub, blocked, tracked, partial]
}

fn run(bin: &Path) -> (Fields, Fields) {
    let s = Server::start_bin(
        bin,
        &[
            ("save", ""),
            ("appendonly", "no"),
            ("enable-debug-command", "yes"),
        ],
    );
    let mut main = named(&s, "main");
    main.cmd(&["CONFIG", "SET", "latency-tracking", "yes"]);
    main.cmd(&["XADD", "stream", "1-0", "f", "v"]);
    main.cmd(&["PFADD", "hll", "z"]);
    main.cmd(&["SAVE"]);
    let before = snapshot(&mut main);
    let _others = workload(&s, &mut main);
    let after = snapshot(&mut main);
    (before, after)
}

fn exact(key: &str) -> bool {
    EXACT.contains(&key)
        || (key.starts_with("commandstats.") || key.starts_with("errorstats."))
            && EXACT_SUBFIELDS
                .iter()
                .any(|s| key.ends_with(&format!(".{s}")))
        || key.starts_with("client.")
        || key.starts_with("debug.")
        || key.starts_with("object.")
}

fn as_number(v: Option<&String>) -> f64 {
    v.and_then(|v| v.parse().ok()).unwrap_or(0.0)
}

/// What a field did, in words both servers' reports are compared by.
fn behaviour(key: &str, before: &Fields, after: &Fields) -> String {
    let (b, a) = (before.get(key), after.get(key));
    if is_timing(key) {
        return "present".into();
    }
    let moved = if b == a { "stayed" } else { "moved" };
    if key.starts_with("client.") || key.starts_with("debug.") || key.starts_with("object.") {
        return format!("= {}", a.map(String::as_str).unwrap_or("(none)"));
    }
    if exact(key) {
        return format!("{moved} by {}", as_number(a) - as_number(b));
    }
    moved.into()
}

/// Client fields whose size is the allocator's or the buffer model's, and
/// the serialized lengths of encodings whose bytes are not Redis's.
fn modelled(key: &str) -> bool {
    [
        "qbuf-free",
        "argv-mem",
        "tot-mem",
        "omem",
        "rbs",
        "rbp",
        "multi-mem",
    ]
    .iter()
    .any(|f| key.ends_with(&format!(".{f}")))
}

#[test]
fn a_workload_moves_the_same_fields_as_on_redis() {
    // Against Redis itself (CINNABAR_BIN) it checks that the workload decides what it compares.
    let Some(redis) = tool("redis-server") else {
        return;
    };
    let ours = run(&cinnabar_tests::server_bin());
    let theirs = run(&redis);
    let keys: std::collections::BTreeSet<&String> = [&ours.0, &ours.1, &theirs.0, &theirs.1]
        .iter()
        .flat_map(|f| f.keys())
        .collect();
    let mut bad = Vec::new();
    for key in keys {
        let in_ours = ours.1.contains_key(key) || ours.0.contains_key(key);
        let in_theirs = theirs.1.contains_key(key) || theirs.0.contains_key(key);
        if in_ours != in_theirs {
            bad.push(format!(
                "{key}: only in {}",
                if in_ours { "cinnabar" } else { "Redis" }
            ));
            continue;
        }
        let (o, t) = (
            behaviour(key, &ours.0, &ours.1),
            behaviour(key, &theirs.0, &theirs.1),
        );
        if o != t && !(modelled(key) && o.starts_with('=') && t.starts_with('=')) {
            let seen = |f: &(Fields, Fields)| format!("{:?} -> {:?}", f.0.get(key), f.1.get(key));
            bad.push(format!(
                "{key}: cinnabar {o} ({}), Redis {t} ({})",
                seen(&ours),
                seen(&theirs)
            ));
        }
    }
    assert!(
        bad.is_empty(),
        "{} differences:\n{}",
        bad.len(),
        bad.join("\n")
    );
}
