//! INFO's text: every section Redis 7.0 prints, rendered as `name:value`
//! lines from the server's state (the INFO command and a crash's report
//! both print it).

use crate::core::os::{rusage, total_system_memory, uname};
use crate::state::State;
use std::fmt::Write as _;
use std::sync::atomic::Ordering::Relaxed;

/// One `name:value` line (or a `# Section` title) appended to a section.
macro_rules! f {
    ($o:expr, $($arg:tt)*) => {{ let _ = write!($o, $($arg)*); $o.push_str("\r\n"); }};
}

/// Section names in the order INFO prints them, and whether `default`
/// includes them.
pub const SECTIONS: &[(&str, bool)] = &[
    ("server", true),
    ("clients", true),
    ("memory", true),
    ("persistence", true),
    ("stats", true),
    ("replication", true),
    ("cpu", true),
    ("modules", true),
    ("commandstats", false),
    ("errorstats", true),
    ("latencystats", false),
    ("cluster", true),
    ("keyspace", true),
];

/// The sections `names`, in that order, as INFO prints them.
pub fn render(st: &mut State, names: &[&str]) -> String {
    let mut out = String::new();
    for s in names {
        if !out.is_empty() {
            out.push_str("\r\n");
        }
        section(st, s, &mut out);
    }
    out
}

/// The server part of a crash's bug report: INFO and CLIENT LIST.
pub fn crash_report(st: &mut State) -> String {
    let now = crate::core::clock::now_ms();
    let all: Vec<&str> = SECTIONS.iter().map(|s| s.0).collect();
    let info = render(st, &all);
    let mut o = format!("\n------ INFO OUTPUT ------\n{info}\n------ CLIENT LIST OUTPUT ------\n");
    for cl in st.clients.values() {
        o.push_str(&cl.line(now, None));
        o.push('\n');
    }
    o
}

/// Appends section `name` to `o` (nothing for a name INFO does not know).
pub fn section(st: &mut State, name: &str, o: &mut String) {
    match name {
        "server" => server(st, o),
        "clients" => clients(st, o),
        "memory" => memory(st, o),
        "persistence" => persistence(st, o),
        "stats" => stats(st, o),
        "replication" => replication(st, o),
        "cpu" => cpu(st, o),
        "modules" => modules(st, o),
        "commandstats" => commandstats(st, o),
        "errorstats" => errorstats(st, o),
        "latencystats" => latencystats(st, o),
        "cluster" => cluster(st, o),
        "keyspace" => keyspace(st, o),
        _ => {}
    }
}

/// `a` over `b`, 0 when `b` is.
pub fn ratio(a: u64, b: u64) -> f64 {
    if b == 0 {
        0.0
    } else {
        a as f64 / b as f64
    }
}

/// `part` as a percentage of `whole`, 0 when `whole` is.
fn perc(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        part as f64 * 100.0 / whole as f64
    }
}

fn human(n: u64) -> String {
    let n = n as f64;
    const K: f64 = 1024.0;
    if n < K {
        format!("{}B", n as u64)
    } else if n < K * K {
        format!("{:.2}K", n / K)
    } else if n < K * K * K {
        format!("{:.2}M", n / (K * K))
    } else if n < K * K * K * K {
        format!("{:.2}G", n / (K * K * K))
    } else if n < K * K * K * K * K {
        format!("{:.2}T", n / (K * K * K * K))
    } else {
        format!("{:.2}P", n / (K * K * K * K * K))
    }
}

/// Rate per second over the cron's samples of the counter picked by `f`.
fn rate(st: &State, f: impl Fn(&crate::state::Sample) -> u64) -> f64 {
    let (Some(first), Some(last)) = (st.stats.samples.front(), st.stats.samples.back()) else {
        return 0.0;
    };
    let ms = last.ms - first.ms;
    if ms <= 0 {
        return 0.0;
    }
    f(last).saturating_sub(f(first)) as f64 * 1000.0 / ms as f64
}

fn server(st: &mut State, o: &mut String) {
    let now_us = crate::core::clock::now_us();
    let up = st.started.elapsed().as_secs();
    f!(o, "# Server");
    f!(o, "redis_version:7.0.15");
    f!(o, "redis_git_sha1:00000000");
    f!(o, "redis_git_dirty:0");
    f!(o, "redis_build_id:{}", &st.run_id[..15]);
    f!(
        o,
        "redis_mode:{}",
        if st.cluster.is_some() {
            "cluster"
        } else {
            "standalone"
        }
    );
    f!(o, "os:{}", uname());
    f!(o, "arch_bits:64");
    f!(o, "monotonic_clock:POSIX clock_gettime");
    f!(o, "multiplexing_api:epoll");
    f!(o, "atomicvar_api:c11-builtin");
    f!(o, "gcc_version:0.0.0");
    f!(o, "process_id:{}", std::process::id());
    f!(o, "process_supervised:no");
    f!(o, "run_id:{}", st.run_id);
    f!(o, "tcp_port:{}", st.tcp_port);
    f!(o, "server_time_usec:{now_us}");
    f!(o, "uptime_in_seconds:{up}");
    f!(o, "uptime_in_days:{}", up / 86400);
    f!(o, "hz:{}", st.hz());
    f!(o, "configured_hz:{}", st.cfg.hz);
    f!(o, "lru_clock:{}", (now_us / 1_000_000) & ((1 << 24) - 1));
    f!(o, "executable:{}", st.executable);
    f!(
        o,
        "config_file:{}",
        st.cfg
            .file
            .as_ref()
            .map(|p| p.display().to_string())
            .unwrap_or_default()
    );
    f!(
        o,
        "io_threads_active:{}",
        u8::from(crate::core::netstat::threaded().2)
    );
    if let Some(ms) = crate::state::shutdown::remaining_ms(st) {
        f!(o, "shutdown_in_milliseconds:{ms}");
    }
}

fn clients(st: &mut State, o: &mut String) {
    let (max_in, max_out) = st.stats.recent_client_buffers(st.wall_ms() / 1000);
    // What was read since the cron's last sample counts already.
    let max_in = st
        .clients
        .values()
        .map(|c| c.input_peak)
        .fold(max_in, usize::max);
    f!(o, "# Clients");
    f!(
        o,
        "connected_clients:{}",
        st.clients.len() + 1 - st.repl.replicas.len()
    );
    // Two links per other node, as Redis counts them.
    let links = st
        .cluster
        .as_ref()
        .map_or(0, |m| (m.cl.nodes.len() - 1) * 2);
    f!(o, "cluster_connections:{links}");
    f!(o, "maxclients:{}", st.tun.maxclients);
    f!(o, "client_recent_max_input_buffer:{max_in}");
    let blocked = || st.clients.values().filter_map(|c| c.blocked.as_ref());
    f!(o, "client_recent_max_output_buffer:{max_out}");
    let paused = st.clients.values().filter(|c| c.paused).count();
    f!(o, "blocked_clients:{}", blocked().count() + paused);
    f!(o, "tracking_clients:{}", st.tracking.clients);
    f!(
        o,
        "clients_in_timeout_table:{}",
        blocked().filter(|b| b.deadline.is_some()).count()
    );
}

fn memory(st: &mut State, o: &mut String) {
    let m = summary(st);
    let (used, rss, peak, startup) = (m.used, m.rss, m.peak, m.startup);
    let maxmem = st.memory.maxmemory;
    let sys = total_system_memory();
    let dataset = m.dataset;
    let overhead = m.overhead;
    let frag = if used > 0 {
        rss as f64 / used as f64
    } else {
        0.0
    };
    f!(o, "# Memory");
    f!(o, "used_memory:{used}");
    f!(o, "used_memory_human:{}", human(used));
    f!(o, "used_memory_rss:{rss}");
    f!(o, "used_memory_rss_human:{}", human(rss));
    f!(o, "used_memory_peak:{peak}");
    f!(o, "used_memory_peak_human:{}", human(peak));
    f!(o, "used_memory_peak_perc:{:.2}%", perc(used, peak));
    f!(o, "used_memory_overhead:{overhead}");
    f!(o, "used_memory_startup:{startup}");
    f!(o, "used_memory_dataset:{dataset}");
    f!(
        o,
        "used_memory_dataset_perc:{:.2}%",
        perc(dataset, used.saturating_sub(startup))
    );
    let active = m.active;
    f!(o, "allocator_allocated:{used}");
    f!(o, "allocator_active:{active}");
    f!(o, "allocator_resident:{active}");
    f!(o, "total_system_memory:{sys}");
    f!(o, "total_system_memory_human:{}", human(sys));
    // One interpreter serves EVAL and functions (Redis has one
    // each): its memory is reported as the EVAL one's.
    let vm = crate::state::evict::vm_memory();
    let e = st.engine.as_ref();
    let scripts = e.map_or(0, |e| e.script_count());
    let scripts_mem = e.map_or(0, |e| e.scripts_memory());
    let functions_mem = e.map_or(0, |e| e.functions_memory());
    f!(o, "used_memory_lua:{vm}");
    f!(o, "used_memory_vm_eval:{vm}");
    f!(o, "used_memory_lua_human:{}", human(vm));
    f!(o, "used_memory_scripts_eval:{scripts_mem}");
    f!(o, "number_of_cached_scripts:{scripts}");
    f!(
        o,
        "number_of_functions:{}",
        e.map_or(0, |e| e.functions.len())
    );
    f!(
        o,
        "number_of_libraries:{}",
        e.map_or(0, |e| e.libraries.len())
    );
    f!(o, "used_memory_vm_functions:0");
    f!(o, "used_memory_vm_total:{vm}");
    f!(o, "used_memory_vm_total_human:{}", human(vm));
    f!(o, "used_memory_functions:{functions_mem}");
    f!(o, "used_memory_scripts:{}", scripts_mem + functions_mem);
    f!(
        o,
        "used_memory_scripts_human:{}",
        human((scripts_mem + functions_mem) as u64)
    );
    f!(o, "maxmemory:{maxmem}");
    f!(o, "maxmemory_human:{}", human(maxmem));
    f!(o, "maxmemory_policy:{}", st.cfg.maxmemory_policy.name());
    f!(o, "allocator_frag_ratio:{:.2}", ratio(active, used));
    f!(o, "allocator_frag_bytes:{}", active as i64 - used as i64);
    f!(o, "allocator_rss_ratio:1.00");
    f!(o, "allocator_rss_bytes:0");
    f!(o, "rss_overhead_ratio:{:.2}", ratio(rss, active));
    f!(o, "rss_overhead_bytes:{}", rss as i64 - active as i64);
    f!(o, "mem_fragmentation_ratio:{frag:.2}");
    f!(o, "mem_fragmentation_bytes:{}", rss as i64 - used as i64);
    // One buffer shared by the backlog and the replicas' output,
    // as Redis 7.0's: what exceeds the backlog's size is theirs.
    let (backlog, slaves) = st.repl.memory_split();
    f!(o, "mem_not_counted_for_evict:{}", st.not_counted_memory());
    f!(o, "mem_replication_backlog:{backlog}");
    f!(o, "mem_total_replication_buffers:{}", backlog + slaves);
    f!(o, "mem_clients_slaves:{slaves}");
    f!(o, "mem_clients_normal:{}", m.clients);
    f!(
        o,
        "mem_cluster_links:{}",
        st.cluster.as_ref().map_or(0, |m| m.cl.links_memory())
    );
    f!(o, "mem_aof_buffer:{}", st.aof.buf.capacity());
    f!(o, "mem_allocator:mimalloc");
    f!(o, "active_defrag_running:0");
    f!(
        o,
        "lazyfree_pending_objects:{}",
        crate::state::lazyfree::LAZYFREE_PENDING.load(Relaxed)
    );
    f!(
        o,
        "lazyfreed_objects:{}",
        crate::state::lazyfree::LAZYFREED.load(Relaxed)
    );
}

fn persistence(st: &mut State, o: &mut String) {
    f!(o, "# Persistence");
    let asynchronous = st.loading.as_ref().map(|l| l.is_async);
    f!(o, "loading:{}", (asynchronous == Some(false)) as u8);
    f!(o, "async_loading:{}", (asynchronous == Some(true)) as u8);
    // No fork, so no copy-on-write; the save's progress is real.
    let (done, total) = crate::state::persist::bgsave_progress(st);
    let rdb = &st.rdb;
    f!(o, "current_cow_peak:0");
    f!(o, "current_cow_size:0");
    f!(o, "current_cow_size_age:0");
    f!(o, "current_fork_perc:{:.2}", perc(done, total));
    f!(o, "current_save_keys_processed:{done}");
    f!(o, "current_save_keys_total:{total}");
    f!(o, "rdb_changes_since_last_save:{}", st.dirty);
    f!(o, "rdb_bgsave_in_progress:{}", rdb.running.is_some() as u8);
    f!(o, "rdb_last_save_time:{}", st.lastsave);
    f!(
        o,
        "rdb_last_bgsave_status:{}",
        if rdb.last_bgsave_ok { "ok" } else { "err" }
    );
    f!(o, "rdb_last_bgsave_time_sec:{}", rdb.last_bgsave_time_s);
    f!(
        o,
        "rdb_current_bgsave_time_sec:{}",
        rdb.running
            .as_ref()
            .map_or(-1, |r| r.started.elapsed().as_secs() as i64)
    );
    f!(o, "rdb_saves:{}", rdb.saves);
    f!(o, "rdb_last_cow_size:0");
    f!(
        o,
        "rdb_last_load_keys_expired:{}",
        rdb.last_load_keys_expired
    );
    f!(o, "rdb_last_load_keys_loaded:{}", rdb.last_load_keys_loaded);
    for line in crate::state::aof::info(st) {
        f!(o, "{line}");
    }
    f!(o, "module_fork_in_progress:0");
    f!(o, "module_fork_last_cow_size:0");
    for line in st.loading.iter().flat_map(|l| l.info()) {
        f!(o, "{line}");
    }
}

fn stats(st: &mut State, o: &mut String) {
    let ops = rate(st, |s| s.commands).round() as u64;
    let kbps = |f: fn(&crate::state::Sample) -> u64| rate(st, f) / 1024.0;
    let (ikbps, okbps) = (kbps(|s| s.input), kbps(|s| s.output));
    let (rikbps, rokbps) = (kbps(|s| s.repl_input), kbps(|s| s.repl_output));
    let s = &st.stats;
    f!(o, "# Stats");
    f!(o, "total_connections_received:{}", s.total_connections);
    f!(o, "total_commands_processed:{}", s.total_commands);
    f!(o, "instantaneous_ops_per_sec:{ops}");
    f!(
        o,
        "total_net_input_bytes:{}",
        crate::core::netstat::input_bytes()
    );
    f!(o, "total_net_output_bytes:{}", s.net_output_bytes);
    f!(o, "total_net_repl_input_bytes:{}", s.net_repl_input_bytes);
    f!(o, "total_net_repl_output_bytes:{}", s.net_repl_output_bytes);
    f!(o, "instantaneous_input_kbps:{ikbps:.2}");
    f!(o, "instantaneous_output_kbps:{okbps:.2}");
    f!(o, "instantaneous_input_repl_kbps:{rikbps:.2}");
    f!(o, "instantaneous_output_repl_kbps:{rokbps:.2}");
    f!(o, "rejected_connections:{}", s.rejected_connections);
    f!(o, "sync_full:{}", st.repl.sync_full);
    f!(o, "sync_partial_ok:{}", st.repl.sync_partial_ok);
    f!(o, "sync_partial_err:{}", st.repl.sync_partial_err);
    f!(o, "expired_keys:{}", s.expired_keys);
    f!(o, "expired_stale_perc:{:.2}", s.expired_stale_perc * 100.0);
    f!(
        o,
        "expired_time_cap_reached_count:{}",
        s.expired_time_cap_reached
    );
    f!(o, "expire_cycle_cpu_milliseconds:{}", s.expire_cycle_cpu_ms);
    f!(o, "evicted_keys:{}", s.evicted_keys);
    f!(o, "evicted_clients:{}", s.evicted_clients);
    let cur = st
        .memory
        .exceeded_since
        .map_or(0, |t| t.elapsed().as_millis() as u64);
    f!(
        o,
        "total_eviction_exceeded_time:{}",
        st.memory.exceeded_total_ms + cur
    );
    f!(o, "current_eviction_exceeded_time:{cur}");
    f!(o, "keyspace_hits:{}", st.shard.hits);
    f!(o, "keyspace_misses:{}", st.shard.misses);
    f!(o, "pubsub_channels:{}", st.pubsub.channels.len());
    f!(o, "pubsub_patterns:{}", st.pubsub.patterns.len());
    f!(o, "pubsubshard_channels:{}", st.pubsub.shard.len());
    f!(o, "latest_fork_usec:0");
    f!(o, "total_forks:{}", st.stats.total_forks);
    f!(o, "migrate_cached_sockets:{}", st.migrate.len());
    f!(
        o,
        "slave_expires_tracked_keys:{}",
        st.shard.replica_keys_with_expire.len()
    );
    f!(o, "active_defrag_hits:0");
    f!(o, "active_defrag_misses:0");
    f!(o, "active_defrag_key_hits:0");
    f!(o, "active_defrag_key_misses:0");
    f!(o, "total_active_defrag_time:0");
    f!(o, "current_active_defrag_time:0");
    let (keys, items, prefixes) = st.tracking.totals(&st.shard.tracked);
    f!(o, "tracking_total_keys:{keys}");
    f!(o, "tracking_total_items:{items}");
    f!(o, "tracking_total_prefixes:{prefixes}");
    f!(o, "unexpected_error_replies:{}", s.unexpected_error_replies);
    f!(o, "total_error_replies:{}", s.total_error_replies);
    f!(
        o,
        "dump_payload_sanitizations:{}",
        s.sanitizations.load(Relaxed)
    );
    let (reads, writes) = crate::core::netstat::totals();
    f!(o, "total_reads_processed:{reads}");
    f!(o, "total_writes_processed:{writes}");
    let (threaded_reads, threaded_writes, _) = crate::core::netstat::threaded();
    f!(o, "io_threaded_reads_processed:{threaded_reads}");
    f!(o, "io_threaded_writes_processed:{threaded_writes}");
    f!(o, "reply_buffer_shrinks:{}", s.reply_buffer_shrinks);
    f!(o, "reply_buffer_expands:{}", s.reply_buffer_expands);
}

fn replication(st: &mut State, o: &mut String) {
    f!(o, "# Replication");
    o.push_str(&crate::state::role::info(st, crate::core::clock::now_ms()));
}

fn cpu(_: &mut State, o: &mut String) {
    let (ss, su) = rusage(libc::RUSAGE_SELF);
    let (cs, cu) = rusage(libc::RUSAGE_CHILDREN);
    f!(o, "# CPU");
    f!(o, "used_cpu_sys:{ss:.6}");
    f!(o, "used_cpu_user:{su:.6}");
    f!(o, "used_cpu_sys_children:{cs:.6}");
    f!(o, "used_cpu_user_children:{cu:.6}");
    f!(o, "used_cpu_sys_main_thread:{ss:.6}");
    f!(o, "used_cpu_user_main_thread:{su:.6}");
}

fn modules(_: &mut State, o: &mut String) {
    f!(o, "# Modules");
}

fn commandstats(st: &mut State, o: &mut String) {
    f!(o, "# Commandstats");
    for (n, s) in counted(st) {
        if s.calls == 0 && s.rejected == 0 && s.failed == 0 {
            continue;
        }
        let per = if s.calls > 0 {
            s.usec as f64 / s.calls as f64
        } else {
            0.0
        };
        f!(
            o,
            "cmdstat_{n}:calls={},usec={},usec_per_call={per:.2},rejected_calls={},failed_calls={}",
            s.calls,
            s.usec,
            s.rejected,
            s.failed
        );
    }
}

fn errorstats(st: &mut State, o: &mut String) {
    f!(o, "# Errorstats");
    for (code, n) in &st.stats.errors {
        f!(o, "errorstat_{code}:count={n}");
    }
}

fn latencystats(st: &mut State, o: &mut String) {
    f!(o, "# Latencystats");
    for (n, s) in counted(st) {
        let Some(h) = &s.latency else {
            continue;
        };
        let ps: Vec<String> = st
            .cfg
            .latency_tracking_info_percentiles
            .iter()
            .map(|&p| format!("p{p}={:.3}", value_at_percentile(h, p) as f64 / 1000.0))
            .collect();
        f!(o, "latency_percentiles_usec_{n}:{}", ps.join(","));
    }
}

fn cluster(st: &mut State, o: &mut String) {
    f!(o, "# Cluster");
    f!(o, "cluster_enabled:{}", st.cluster.is_some() as u8);
}

fn keyspace(st: &mut State, o: &mut String) {
    f!(o, "# Keyspace");
    for (i, db) in st.shard.dbs.iter().enumerate() {
        if db.is_empty() {
            continue;
        }
        f!(
            o,
            "db{i}:keys={},expires={},avg_ttl={}",
            db.len(),
            db.expires_len(),
            db.avg_ttl.max(0)
        );
    }
}

/// The recorded value at percentile `p` as Redis's HdrHistogram gives it:
/// the count rounded half up, the bucket's highest equivalent value.
pub fn value_at_percentile(h: &hdrhistogram::Histogram<u64>, p: f64) -> u64 {
    let want = ((p.min(100.0) / 100.0 * h.len() as f64 + 0.5) as u64).max(1);
    let mut seen = 0;
    for v in h.iter_recorded() {
        seen += v.count_at_value();
        if seen >= want {
            return h.highest_equivalent(v.value_iterated_to());
        }
    }
    0
}

/// Allocation totals as MEMORY STATS and INFO report them.
pub struct MemSummary {
    pub used: u64,
    pub rss: u64,
    /// The allocator's committed bytes (`allocator_active`).
    pub active: u64,
    pub peak: u64,
    pub startup: u64,
    pub overhead: u64,
    pub dataset: u64,
    pub keys: u64,
    /// Buffers of clients other than replicas (`State::not_counted_memory`
    /// has theirs): output not yet written and unread input.
    pub clients: u64,
    /// Per non-empty database: (index, main table bytes, expires table bytes).
    pub dbs: Vec<(usize, u64, u64)>,
}

/// Bytes of the keyspace structures themselves: the tables' nodes (a key's
/// bytes are in its node) and buckets.
pub fn summary(st: &mut State) -> MemSummary {
    let used = crate::state::evict::used_memory();
    let rss = crate::core::os::rss_bytes();
    st.peak_memory = st.peak_memory.max(used);
    let startup = st.startup_memory.min(used);
    let mut dbs = Vec::new();
    let mut keys = 0;
    for (i, d) in st.shard.dbs.iter().enumerate() {
        if d.is_empty() {
            continue;
        }
        keys += d.len() as u64;
        let main = d.keys().table_bytes() as u64;
        let exp = d.expires_table_bytes() as u64;
        dbs.push((i, main, exp));
    }
    let clients: u64 = st
        .clients
        .values()
        .filter(|c| !c.peer.replica)
        .map(|c| (c.pending.capacity() + c.qbuf) as u64)
        .sum();
    let overhead = startup + clients + dbs.iter().map(|d| d.1 + d.2).sum::<u64>();
    MemSummary {
        used,
        rss,
        active: crate::state::evict::allocator_committed(),
        peak: st.peak_memory,
        startup,
        overhead: overhead.min(used),
        dataset: used.saturating_sub(overhead),
        keys,
        clients,
        dbs,
    }
}

/// The statistics of the commands counted so far, by name.
pub fn counted(st: &State) -> Vec<(&'static str, &crate::state::CmdStat)> {
    let rows = crate::core::command::rows::rows();
    let mut v: Vec<_> = st
        .stats
        .cmd
        .iter()
        .enumerate()
        .map(|(i, s)| (rows[i].name, s))
        .collect();
    v.sort_unstable_by_key(|&(n, _)| n);
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Values Redis 7.0.15 prints for 3 us and 61 us (3.007, 61.183): the
    /// highest value of the bucket, the count rounded half up.
    #[test]
    fn percentiles_as_redis_reports_them() {
        let mut h = hdrhistogram::Histogram::<u64>::new_with_bounds(1, 1_000_000_000, 2).unwrap();
        h.record(3000).unwrap();
        h.record(61000).unwrap();
        assert_eq!(value_at_percentile(&h, 50.0), 3007);
        assert_eq!(value_at_percentile(&h, 99.0), 61183);
        // 60 values: p99 wants the 59th (59.4 rounded), not the 60th.
        let mut h = hdrhistogram::Histogram::<u64>::new_with_bounds(1, 1_000_000_000, 2).unwrap();
        for v in 1..=60 {
            h.record(v * 1000).unwrap();
        }
        assert_eq!(value_at_percentile(&h, 99.0), h.highest_equivalent(59_000));
        assert_eq!(value_at_percentile(&h, 100.0), h.highest_equivalent(60_000));
    }
}
