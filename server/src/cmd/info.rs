//! INFO: every section Redis 7.0 prints, rendered as `name:value` lines.

use super::{Ctx, Handler};
use crate::error::CmdResult;
use crate::os::{rusage, total_system_memory, uname};
use crate::state::State;
use bytes::Bytes;
use std::fmt::Write as _;
use std::sync::atomic::Ordering::Relaxed;

pub static HANDLERS: &[(&str, Handler)] = &[("info", info)];

/// Section names in the order INFO prints them, and whether `default`
/// includes them.
const SECTIONS: &[(&str, bool)] = &[
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

/// INFO [section [section ...]]
fn info(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let mut want = [false; SECTIONS.len()];
    if a.len() == 1 {
        for (w, s) in want.iter_mut().zip(SECTIONS) {
            *w = s.1;
        }
    }
    for arg in &a[1..] {
        let name = String::from_utf8_lossy(arg).to_ascii_lowercase();
        match name.as_str() {
            "default" => {
                for (w, s) in want.iter_mut().zip(SECTIONS) {
                    *w |= s.1;
                }
            }
            "all" | "everything" => want = [true; SECTIONS.len()],
            n => {
                if let Some(i) = SECTIONS.iter().position(|s| s.0 == n) {
                    want[i] = true;
                }
            }
        }
    }
    let mut out = String::new();
    for (i, s) in SECTIONS.iter().enumerate() {
        if !want[i] {
            continue;
        }
        if !out.is_empty() {
            out.push_str("\r\n");
        }
        info_section(c, s.0, &mut out);
    }
    c.out.verbatim(out.as_bytes());
    Ok(())
}

/// Everything `INFO` shows, rendered as Redis does (`name:value\r\n`).
pub fn info_string(c: &mut Ctx, sections: &[&str]) -> String {
    let mut out = String::new();
    for s in sections {
        if !out.is_empty() {
            out.push_str("\r\n");
        }
        info_section(c, s, &mut out);
    }
    out
}

/// The server part of a crash's bug report: INFO and CLIENT LIST.
pub fn crash_report(st: &mut State) -> String {
    let now = crate::state::now_ms();
    let mut cl = crate::state::Client::new(0, String::new(), String::new(), -1, true);
    let mut out = protocol::ReplyBuf::new(false);
    let mut c = Ctx {
        st,
        cl: &mut cl,
        out: &mut out,
        now,
    };
    let all: Vec<&str> = SECTIONS.iter().map(|s| s.0).collect();
    let info = info_string(&mut c, &all);
    let mut o = format!("\n------ INFO OUTPUT ------\n{info}\n------ CLIENT LIST OUTPUT ------\n");
    for cl in st.clients.values() {
        o.push_str(&cl.line(now, None));
        o.push('\n');
    }
    o
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

fn info_section(c: &mut Ctx, name: &str, o: &mut String) {
    let st = &mut *c.st;
    let now_us = crate::state::now_us();
    macro_rules! f {
        ($($arg:tt)*) => {{ let _ = write!(o, $($arg)*); o.push_str("\r\n"); }};
    }
    match name {
        "server" => {
            let up = st.started.elapsed().as_secs();
            f!("# Server");
            f!("redis_version:7.0.15");
            f!("redis_git_sha1:00000000");
            f!("redis_git_dirty:0");
            f!("redis_build_id:{}", &st.run_id[..15]);
            f!("redis_mode:standalone");
            f!("os:{}", uname());
            f!("arch_bits:64");
            f!("monotonic_clock:POSIX clock_gettime");
            f!("multiplexing_api:epoll");
            f!("atomicvar_api:c11-builtin");
            f!("gcc_version:0.0.0");
            f!("process_id:{}", std::process::id());
            f!("process_supervised:no");
            f!("run_id:{}", st.run_id);
            f!("tcp_port:{}", st.tcp_port);
            f!("server_time_usec:{now_us}");
            f!("uptime_in_seconds:{up}");
            f!("uptime_in_days:{}", up / 86400);
            f!("hz:{}", st.cfg.hz);
            f!("configured_hz:{}", st.cfg.hz);
            f!("lru_clock:{}", (now_us / 1_000_000) & ((1 << 24) - 1));
            f!("executable:{}", st.executable);
            f!(
                "config_file:{}",
                st.cfg
                    .file
                    .as_ref()
                    .map(|p| p.display().to_string())
                    .unwrap_or_default()
            );
            f!("io_threads_active:0");
            if let Some(ms) = crate::shutdown::remaining_ms(st) {
                f!("shutdown_in_milliseconds:{ms}");
            }
        }
        "clients" => {
            let max_in = st.clients.values().map(|c| c.qbuf).max().unwrap_or(0);
            f!("# Clients");
            f!(
                "connected_clients:{}",
                st.clients.len() + 1 - st.repl.replicas.len()
            );
            f!("cluster_connections:0");
            f!("maxclients:{}", st.tun.maxclients);
            f!("client_recent_max_input_buffer:{max_in}");
            let max_out = st
                .clients
                .values()
                .map(|c| c.pending.len())
                .max()
                .unwrap_or(0);
            let blocked = || st.clients.values().filter_map(|c| c.blocked.as_ref());
            f!("client_recent_max_output_buffer:{max_out}");
            let paused = st.clients.values().filter(|c| c.paused).count();
            f!("blocked_clients:{}", blocked().count() + paused);
            f!("tracking_clients:{}", st.tracking.clients);
            f!(
                "clients_in_timeout_table:{}",
                blocked().filter(|b| b.deadline.is_some()).count()
            );
        }
        "memory" => {
            let m = super::memory::summary(st);
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
            f!("# Memory");
            f!("used_memory:{used}");
            f!("used_memory_human:{}", human(used));
            f!("used_memory_rss:{rss}");
            f!("used_memory_rss_human:{}", human(rss));
            f!("used_memory_peak:{peak}");
            f!("used_memory_peak_human:{}", human(peak));
            f!("used_memory_peak_perc:{:.2}%", perc(used, peak));
            f!("used_memory_overhead:{overhead}");
            f!("used_memory_startup:{startup}");
            f!("used_memory_dataset:{dataset}");
            f!(
                "used_memory_dataset_perc:{:.2}%",
                perc(dataset, used.saturating_sub(startup))
            );
            f!("allocator_allocated:{used}");
            f!("allocator_active:{used}");
            f!("allocator_resident:{rss}");
            f!("total_system_memory:{sys}");
            f!("total_system_memory_human:{}", human(sys));
            // One interpreter serves EVAL and functions (Redis has one
            // each): its memory is reported as the EVAL one's.
            let vm = crate::evict::vm_memory();
            let e = st.engine.as_ref();
            let scripts = e.map_or(0, |e| e.script_count());
            let scripts_mem = e.map_or(0, |e| e.scripts_memory());
            let functions_mem = e.map_or(0, |e| e.functions_memory());
            f!("used_memory_lua:{vm}");
            f!("used_memory_vm_eval:{vm}");
            f!("used_memory_lua_human:{}", human(vm));
            f!("used_memory_scripts_eval:{scripts_mem}");
            f!("number_of_cached_scripts:{scripts}");
            f!("number_of_functions:{}", e.map_or(0, |e| e.functions.len()));
            f!("number_of_libraries:{}", e.map_or(0, |e| e.libraries.len()));
            f!("used_memory_vm_functions:0");
            f!("used_memory_vm_total:{vm}");
            f!("used_memory_vm_total_human:{}", human(vm));
            f!("used_memory_functions:{functions_mem}");
            f!("used_memory_scripts:{}", scripts_mem + functions_mem);
            f!(
                "used_memory_scripts_human:{}",
                human((scripts_mem + functions_mem) as u64)
            );
            f!("maxmemory:{maxmem}");
            f!("maxmemory_human:{}", human(maxmem));
            f!("maxmemory_policy:{}", st.cfg.maxmemory_policy.name());
            f!("allocator_frag_ratio:1.00");
            f!("allocator_frag_bytes:0");
            f!("allocator_rss_ratio:{frag:.2}");
            f!("allocator_rss_bytes:{}", rss.saturating_sub(used));
            f!("rss_overhead_ratio:1.00");
            f!("rss_overhead_bytes:0");
            f!("mem_fragmentation_ratio:{frag:.2}");
            f!("mem_fragmentation_bytes:{}", rss as i64 - used as i64);
            // One buffer shared by the backlog and the replicas' output,
            // as Redis 7.0's: what exceeds the backlog's size is theirs.
            let (backlog, slaves) = st.repl.memory_split();
            f!("mem_not_counted_for_evict:{}", st.not_counted_memory());
            f!("mem_replication_backlog:{backlog}");
            f!("mem_total_replication_buffers:{}", backlog + slaves);
            f!("mem_clients_slaves:{slaves}");
            f!("mem_clients_normal:{}", m.clients);
            f!("mem_cluster_links:0");
            f!("mem_aof_buffer:{}", st.aof.buf.capacity());
            f!("mem_allocator:mimalloc");
            f!("active_defrag_running:0");
            f!(
                "lazyfree_pending_objects:{}",
                super::keys::LAZYFREE_PENDING.load(Relaxed)
            );
            f!("lazyfreed_objects:{}", super::keys::LAZYFREED.load(Relaxed));
        }
        "persistence" => {
            f!("# Persistence");
            let asynchronous = st.loading.as_ref().map(|l| l.is_async);
            f!("loading:{}", (asynchronous == Some(false)) as u8);
            f!("async_loading:{}", (asynchronous == Some(true)) as u8);
            // No fork, so no copy-on-write; the save's progress is real.
            let (done, total) = crate::persist::bgsave_progress(st);
            let rdb = &st.rdb;
            f!("current_cow_peak:0");
            f!("current_cow_size:0");
            f!("current_cow_size_age:0");
            f!("current_fork_perc:{:.2}", perc(done, total));
            f!("current_save_keys_processed:{done}");
            f!("current_save_keys_total:{total}");
            f!("rdb_changes_since_last_save:{}", st.dirty);
            f!("rdb_bgsave_in_progress:{}", rdb.running.is_some() as u8);
            f!("rdb_last_save_time:{}", st.lastsave);
            f!(
                "rdb_last_bgsave_status:{}",
                if rdb.last_bgsave_ok { "ok" } else { "err" }
            );
            f!("rdb_last_bgsave_time_sec:{}", rdb.last_bgsave_time_s);
            f!(
                "rdb_current_bgsave_time_sec:{}",
                rdb.running
                    .as_ref()
                    .map_or(-1, |r| r.started.elapsed().as_secs() as i64)
            );
            f!("rdb_saves:{}", rdb.saves);
            f!("rdb_last_cow_size:0");
            f!("rdb_last_load_keys_expired:{}", rdb.last_load_keys_expired);
            f!("rdb_last_load_keys_loaded:{}", rdb.last_load_keys_loaded);
            for line in crate::aof::info(st) {
                f!("{line}");
            }
            f!("module_fork_in_progress:0");
            f!("module_fork_last_cow_size:0");
            for line in st.loading.iter().flat_map(|l| l.info()) {
                f!("{line}");
            }
        }
        "stats" => {
            let ops = rate(st, |s| s.commands).round() as u64;
            let kbps = |f: fn(&crate::state::Sample) -> u64| rate(st, f) / 1024.0;
            let (ikbps, okbps) = (kbps(|s| s.input), kbps(|s| s.output));
            let (rikbps, rokbps) = (kbps(|s| s.repl_input), kbps(|s| s.repl_output));
            let s = &st.stats;
            f!("# Stats");
            f!("total_connections_received:{}", s.total_connections);
            f!("total_commands_processed:{}", s.total_commands);
            f!("instantaneous_ops_per_sec:{ops}");
            f!("total_net_input_bytes:{}", s.net_input_bytes);
            f!("total_net_output_bytes:{}", s.net_output_bytes);
            f!("total_net_repl_input_bytes:{}", s.net_repl_input_bytes);
            f!("total_net_repl_output_bytes:{}", s.net_repl_output_bytes);
            f!("instantaneous_input_kbps:{ikbps:.2}");
            f!("instantaneous_output_kbps:{okbps:.2}");
            f!("instantaneous_input_repl_kbps:{rikbps:.2}");
            f!("instantaneous_output_repl_kbps:{rokbps:.2}");
            f!("rejected_connections:{}", s.rejected_connections);
            f!("sync_full:{}", st.repl.sync_full);
            f!("sync_partial_ok:{}", st.repl.sync_partial_ok);
            f!("sync_partial_err:{}", st.repl.sync_partial_err);
            f!("expired_keys:{}", s.expired_keys);
            f!("expired_stale_perc:{:.2}", s.expired_stale_perc * 100.0);
            f!(
                "expired_time_cap_reached_count:{}",
                s.expired_time_cap_reached
            );
            f!("expire_cycle_cpu_milliseconds:{}", s.expire_cycle_cpu_ms);
            f!("evicted_keys:{}", s.evicted_keys);
            f!("evicted_clients:{}", s.evicted_clients);
            let cur = st
                .memory
                .exceeded_since
                .map_or(0, |t| t.elapsed().as_millis() as u64);
            f!(
                "total_eviction_exceeded_time:{}",
                st.memory.exceeded_total_ms + cur
            );
            f!("current_eviction_exceeded_time:{cur}");
            f!("keyspace_hits:{}", s.keyspace_hits);
            f!("keyspace_misses:{}", s.keyspace_misses);
            f!("pubsub_channels:{}", st.pubsub.channels.len());
            f!("pubsub_patterns:{}", st.pubsub.patterns.len());
            f!("pubsubshard_channels:{}", st.pubsub.shard.len());
            f!("latest_fork_usec:0");
            f!("total_forks:{}", st.stats.total_forks);
            f!("migrate_cached_sockets:{}", st.migrate.len());
            f!("slave_expires_tracked_keys:0");
            f!("active_defrag_hits:0");
            f!("active_defrag_misses:0");
            f!("active_defrag_key_hits:0");
            f!("active_defrag_key_misses:0");
            f!("total_active_defrag_time:0");
            f!("current_active_defrag_time:0");
            let (keys, items, prefixes) = st.tracking.totals();
            f!("tracking_total_keys:{keys}");
            f!("tracking_total_items:{items}");
            f!("tracking_total_prefixes:{prefixes}");
            f!("unexpected_error_replies:{}", s.unexpected_error_replies);
            f!("total_error_replies:{}", s.total_error_replies);
            f!("dump_payload_sanitizations:0");
            f!("total_reads_processed:{}", s.total_commands);
            f!("total_writes_processed:{}", s.total_commands);
            f!("io_threaded_reads_processed:0");
            f!("io_threaded_writes_processed:0");
            f!("reply_buffer_shrinks:0");
            f!("reply_buffer_expands:0");
        }
        "replication" => {
            f!("# Replication");
            o.push_str(&super::replication::info(st, crate::state::now_ms()));
        }
        "cpu" => {
            let (ss, su) = rusage(libc::RUSAGE_SELF);
            let (cs, cu) = rusage(libc::RUSAGE_CHILDREN);
            f!("# CPU");
            f!("used_cpu_sys:{ss:.6}");
            f!("used_cpu_user:{su:.6}");
            f!("used_cpu_sys_children:{cs:.6}");
            f!("used_cpu_user_children:{cu:.6}");
            f!("used_cpu_sys_main_thread:{ss:.6}");
            f!("used_cpu_user_main_thread:{su:.6}");
        }
        "modules" => f!("# Modules"),
        "commandstats" => {
            f!("# Commandstats");
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
                    "cmdstat_{n}:calls={},usec={},usec_per_call={per:.2},rejected_calls={},failed_calls={}",
                    s.calls,
                    s.usec,
                    s.rejected,
                    s.failed
                );
            }
        }
        "errorstats" => {
            f!("# Errorstats");
            for (code, n) in &st.stats.errors {
                f!("errorstat_{code}:count={n}");
            }
        }
        "latencystats" => {
            f!("# Latencystats");
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
                f!("latency_percentiles_usec_{n}:{}", ps.join(","));
            }
        }
        "cluster" => {
            f!("# Cluster");
            f!("cluster_enabled:0");
        }
        "keyspace" => {
            f!("# Keyspace");
            for (i, db) in st.dbs.iter().enumerate() {
                if db.is_empty() {
                    continue;
                }
                f!(
                    "db{i}:keys={},expires={},avg_ttl={}",
                    db.len(),
                    db.expires_len(),
                    db.avg_ttl.max(0)
                );
            }
        }
        _ => {}
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

/// The statistics of the commands counted so far, by name.
pub(super) fn counted(st: &State) -> Vec<(&'static str, &crate::state::CmdStat)> {
    let mut v: Vec<_> = crate::cmd::table::all_commands()
        .filter_map(|c| Some((c.name, st.stats.cmd.get(c.slot)?)))
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
