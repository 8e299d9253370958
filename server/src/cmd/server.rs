//! Server commands: INFO TIME LASTSAVE SLOWLOG MONITOR SHUTDOWN DEBUG CLIENT.

use super::flags::*;
use super::{int_arg, is, Ctx, Handler};
use crate::error::{CmdResult, Error};
use crate::state::{Client, Pause, ReplyMode, ShutdownRequest, State};
use bytes::Bytes;
use std::fmt::Write as _;

pub static HANDLERS: &[(&str, Handler)] = &[
    ("info", info),
    ("time", time),
    ("role", role),
    ("lolwut", lolwut),
    ("lastsave", lastsave),
    ("slowlog|get", slowlog_get),
    ("slowlog|len", slowlog_len),
    ("slowlog|reset", slowlog_reset),
    ("slowlog|help", slowlog_help),
    ("monitor", monitor),
    ("shutdown", shutdown),
    ("debug", debug),
    ("client|id", client_id),
    ("client|setname", client_setname),
    ("client|getname", client_getname),
    ("client|list", client_list),
    ("client|info", client_info),
    ("client|kill", client_kill),
    ("client|reply", client_reply),
    ("client|no-evict", client_no_evict),
    ("client|pause", client_pause),
    ("client|unpause", client_unpause),
    ("client|getredir", client_getredir),
    ("client|trackinginfo", client_trackinginfo),
    ("client|unblock", client_unblock),
    ("client|help", client_help),
];

/// Client names may not contain spaces or newlines.
pub fn validate_client_name(n: &[u8]) -> crate::error::CmdResult {
    if n.iter().any(|&b| !(b'!'..=b'~').contains(&b)) {
        return Err(crate::error::Error::other(
            "ERR Client names cannot contain spaces, newlines or special characters.",
        ));
    }
    Ok(())
}

/// A HELP reply as Redis builds it: a header naming the command, `lines`,
/// then the HELP entry, each a status reply.
pub fn help_reply(c: &mut Ctx, cmd: &str, lines: &[&str]) {
    c.out.array(lines.len() + 3);
    c.out.simple(&format!(
        "{cmd} <subcommand> [<arg> [value] [opt] ...]. Subcommands are:"
    ));
    for l in lines {
        c.out.simple(l);
    }
    c.out.simple("HELP");
    c.out.simple("    Prints this help.");
}

/// `ERR unknown subcommand or wrong number of arguments for 'x'. Try CMD HELP.`
fn bad_sub(sub: &[u8], cmd: &str) -> Error {
    Error::other(format!(
        "ERR unknown subcommand or wrong number of arguments for '{}'. Try {cmd} HELP.",
        String::from_utf8_lossy(sub)
    ))
}

// ---------------------------------------------------------------- INFO

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

/// Resident set size of the process, from /proc/self/statm.
pub fn rss_bytes() -> u64 {
    let page = {
        // SAFETY: sysconf has no memory effects.
        let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
        if p > 0 {
            p as u64
        } else {
            4096
        }
    };
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1)?.parse::<u64>().ok())
        .map_or(0, |pages| pages * page)
}

fn total_system_memory() -> u64 {
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|s| {
            let line = s.lines().find(|l| l.starts_with("MemTotal:"))?;
            line.split_whitespace().nth(1)?.parse::<u64>().ok()
        })
        .map_or(0, |kb| kb * 1024)
}

fn rusage(who: libc::c_int) -> (f64, f64) {
    // SAFETY: getrusage writes only into the zeroed struct we pass.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    if unsafe { libc::getrusage(who, &mut ru) } != 0 {
        return (0.0, 0.0);
    }
    let t = |tv: libc::timeval| tv.tv_sec as f64 + tv.tv_usec as f64 / 1e6;
    (t(ru.ru_stime), t(ru.ru_utime))
}

fn uname() -> String {
    // SAFETY: uname fills the zeroed struct; the fields are NUL-terminated.
    let mut u: libc::utsname = unsafe { std::mem::zeroed() };
    if unsafe { libc::uname(&mut u) } != 0 {
        return "Linux".into();
    }
    let f = |b: &[libc::c_char]| {
        let bytes: Vec<u8> = b
            .iter()
            .take_while(|&&c| c != 0)
            .map(|&c| c as u8)
            .collect();
        String::from_utf8_lossy(&bytes).into_owned()
    };
    format!("{} {} {}", f(&u.sysname), f(&u.release), f(&u.machine))
}

/// Rate per second over the cron's samples of the counter picked by `f`.
fn rate(st: &State, f: impl Fn(&(i64, u64, u64, u64)) -> u64) -> f64 {
    let (Some(first), Some(last)) = (st.stats.samples.front(), st.stats.samples.back()) else {
        return 0.0;
    };
    let ms = last.0 - first.0;
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
            f!("hz:{}", st.tun.hz);
            f!("configured_hz:{}", st.cfg.int("hz"));
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
        }
        "clients" => {
            let max_in = st.clients.values().map(|c| c.qbuf).max().unwrap_or(0);
            f!("# Clients");
            f!("connected_clients:{}", st.clients.len() + 1);
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
            f!("blocked_clients:{}", blocked().count());
            f!("tracking_clients:0");
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
            f!("maxmemory_policy:{}", st.cfg.str("maxmemory-policy"));
            f!("allocator_frag_ratio:1.00");
            f!("allocator_frag_bytes:0");
            f!("allocator_rss_ratio:{frag:.2}");
            f!("allocator_rss_bytes:{}", rss.saturating_sub(used));
            f!("rss_overhead_ratio:1.00");
            f!("rss_overhead_bytes:0");
            f!("mem_fragmentation_ratio:{frag:.2}");
            f!("mem_fragmentation_bytes:{}", rss as i64 - used as i64);
            f!("mem_not_counted_for_evict:0");
            f!("mem_replication_backlog:0");
            f!("mem_total_replication_buffers:0");
            f!("mem_clients_slaves:0");
            f!("mem_clients_normal:{}", m.clients);
            f!("mem_cluster_links:0");
            f!("mem_aof_buffer:{}", st.aof.buf.capacity());
            f!("mem_allocator:mimalloc");
            f!("active_defrag_running:0");
            f!("lazyfree_pending_objects:0");
            f!("lazyfreed_objects:0");
        }
        "persistence" => {
            f!("# Persistence");
            f!("loading:0");
            f!("async_loading:0");
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
        }
        "stats" => {
            let ops = rate(st, |s| s.1).round() as u64;
            let ikbps = rate(st, |s| s.2) / 1024.0;
            let okbps = rate(st, |s| s.3) / 1024.0;
            let s = &st.stats;
            f!("# Stats");
            f!("total_connections_received:{}", s.total_connections);
            f!("total_commands_processed:{}", s.total_commands);
            f!("instantaneous_ops_per_sec:{ops}");
            f!("total_net_input_bytes:{}", s.net_input_bytes);
            f!("total_net_output_bytes:{}", s.net_output_bytes);
            f!("total_net_repl_input_bytes:0");
            f!("total_net_repl_output_bytes:0");
            f!("instantaneous_input_kbps:{ikbps:.2}");
            f!("instantaneous_output_kbps:{okbps:.2}");
            f!("instantaneous_input_repl_kbps:0.00");
            f!("instantaneous_output_repl_kbps:0.00");
            f!("rejected_connections:{}", s.rejected_connections);
            f!("sync_full:0");
            f!("sync_partial_ok:0");
            f!("sync_partial_err:0");
            f!("expired_keys:{}", s.expired_keys);
            f!("expired_stale_perc:{:.2}", s.expired_stale_perc * 100.0);
            f!(
                "expired_time_cap_reached_count:{}",
                s.expired_time_cap_reached
            );
            f!("expire_cycle_cpu_milliseconds:{}", s.expire_cycle_cpu_ms);
            f!("evicted_keys:{}", s.evicted_keys);
            f!("evicted_clients:0");
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
            f!("total_forks:0");
            f!("migrate_cached_sockets:0");
            f!("slave_expires_tracked_keys:0");
            f!("active_defrag_hits:0");
            f!("active_defrag_misses:0");
            f!("active_defrag_key_hits:0");
            f!("active_defrag_key_misses:0");
            f!("total_active_defrag_time:0");
            f!("current_active_defrag_time:0");
            f!("tracking_total_keys:0");
            f!("tracking_total_items:0");
            f!("tracking_total_prefixes:0");
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
            f!("role:master");
            f!("connected_slaves:0");
            f!("master_failover_state:no-failover");
            f!("master_replid:{}", st.replid);
            f!("master_replid2:0000000000000000000000000000000000000000");
            f!("master_repl_offset:0");
            f!("second_repl_offset:-1");
            f!("repl_backlog_active:0");
            f!("repl_backlog_size:{}", st.cfg.int("repl-backlog-size"));
            f!("repl_backlog_first_byte_offset:0");
            f!("repl_backlog_histlen:0");
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
            let mut names: Vec<&&str> = st.stats.cmd.keys().collect();
            names.sort();
            for n in names {
                let s = &st.stats.cmd[n];
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
            let mut names: Vec<&&str> = st.stats.cmd.keys().collect();
            names.sort();
            for n in names {
                let Some(h) = &st.stats.cmd[n].latency else {
                    continue;
                };
                let ps: Vec<String> = st
                    .tun
                    .latency_percentiles
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
                    db.expires.len(),
                    db.avg_ttl.max(0)
                );
            }
        }
        _ => {}
    }
}

// ---------------------------------------------------------------- misc

/// TIME
fn time(c: &mut Ctx, _: &[Bytes]) -> CmdResult {
    let us = crate::state::now_us();
    c.out.array(2);
    c.out.bulk_int(us / 1_000_000);
    c.out.bulk_int(us % 1_000_000);
    Ok(())
}

/// LASTSAVE
fn lastsave(c: &mut Ctx, _: &[Bytes]) -> CmdResult {
    c.out.int(c.st.lastsave);
    Ok(())
}

/// ROLE: always a master with no replicas.
fn role(c: &mut Ctx, _: &[Bytes]) -> CmdResult {
    c.out.array(3);
    c.out.bulk(b"master");
    c.out.int(0);
    c.out.array(0);
    Ok(())
}

/// LOLWUT [VERSION version]: Redis draws art for its own versions; for any
/// other it prints only the version line, which is what cinnabar does.
fn lolwut(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    if a.len() == 3 && super::is(&a[1], "version") {
        super::int_arg(&a[2])?;
    } else if a.len() != 1 {
        return Err(Error::Syntax);
    }
    c.out.verbatim(b"Redis ver. 7.0.15\n");
    Ok(())
}

/// MONITOR
fn monitor(c: &mut Ctx, _: &[Bytes]) -> CmdResult {
    if !c.cl.monitor {
        c.cl.monitor = true;
        c.st.monitors += 1;
        c.out.ok();
    }
    Ok(())
}

/// SHUTDOWN [NOSAVE | SAVE] [NOW] [FORCE] [ABORT]
fn shutdown(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let (mut save, mut nosave, mut abort) = (false, false, false);
    let (mut others, mut force) = (false, false);
    for o in &a[1..] {
        if is(o, "nosave") {
            nosave = true;
        } else if is(o, "save") {
            save = true;
        } else if is(o, "now") || is(o, "force") {
            others = true;
            force |= is(o, "force");
        } else if is(o, "abort") {
            abort = true;
        } else {
            return Err(Error::Syntax);
        }
    }
    if (save && nosave) || (abort && (save || nosave || others)) {
        return Err(Error::Syntax);
    }
    if abort {
        // Shutdown is immediate here: there is never one in progress.
        return Err(Error::other("ERR No shutdown in progress."));
    }
    let save = if save {
        Some(true)
    } else if nosave {
        Some(false)
    } else {
        None
    };
    tracing::warn!("User requested shutdown...");
    if !crate::server::prepare_shutdown(c.st, save, force) {
        return Err(Error::other("ERR Errors trying to SHUTDOWN. Check logs."));
    }
    c.st.shutdown = Some(ShutdownRequest { prepared: true });
    c.st.shutdown_notify.notify_one();
    // Redis closes the connection without a reply when it exits.
    c.cl.close_after_reply = true;
    Ok(())
}

// ---------------------------------------------------------------- SLOWLOG

/// SLOWLOG GET [count]
fn slowlog_get(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    if a.len() > 3 {
        return Err(bad_sub(&a[1], "SLOWLOG"));
    }
    let mut n = 10usize;
    if let Some(arg) = a.get(2) {
        let v = int_arg(arg)
            .ok()
            .filter(|&v| v >= -1)
            .ok_or_else(|| Error::other("ERR count should be greater than or equal to -1"))?;
        n = if v == -1 { usize::MAX } else { v as usize };
    }
    let n = n.min(c.st.slowlog.len());
    c.out.array(n);
    for e in c.st.slowlog.iter().take(n) {
        c.out.array(6);
        c.out.int(e.id as i64);
        c.out.int(e.time);
        c.out.int(e.duration_us);
        c.out.array(e.args.len());
        for x in &e.args {
            c.out.bulk(x);
        }
        c.out.bulk(e.addr.as_bytes());
        c.out.bulk(&e.name);
    }
    Ok(())
}

/// SLOWLOG LEN
fn slowlog_len(c: &mut Ctx, _: &[Bytes]) -> CmdResult {
    c.out.int(c.st.slowlog.len() as i64);
    Ok(())
}

/// SLOWLOG RESET
fn slowlog_reset(c: &mut Ctx, _: &[Bytes]) -> CmdResult {
    c.st.slowlog.clear();
    c.out.ok();
    Ok(())
}

/// SLOWLOG HELP
fn slowlog_help(c: &mut Ctx, _: &[Bytes]) -> CmdResult {
    help_reply(
        c,
        "SLOWLOG",
        &[
            "GET [<count>]",
            "    Return top <count> entries from the slowlog (default: 10, -1 mean all).",
            "    Entries are made of:",
            "    id, timestamp, time in microseconds, arguments array, client IP and port,",
            "    client name",
            "LEN",
            "    Return the length of the slowlog.",
            "RESET",
            "    Reset the slowlog.",
        ],
    );
    Ok(())
}

// ---------------------------------------------------------------- DEBUG

const DEBUG_DENIED: &str = "ERR DEBUG command not allowed. If the enable-debug-command option is set to \"local\", you can run it from a local connection, otherwise you need to set this option in the configuration file, and then restart the server.";

fn is_local(addr: &str) -> bool {
    addr.parse::<std::net::SocketAddr>()
        .map_or(true, |a| a.ip().is_loopback())
}

/// DEBUG subcommand [argument ...]
fn debug(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    match c.st.cfg.str("enable-debug-command") {
        "yes" => {}
        "local" if is_local(&c.cl.addr) => {}
        _ => return Err(Error::other(DEBUG_DENIED)),
    }
    let sub = String::from_utf8_lossy(&a[1]).to_ascii_lowercase();
    let n = a.len();
    match (sub.as_str(), n) {
        ("help", 2) => debug_help(c),
        ("sleep", 3) => {
            let secs = std::str::from_utf8(&a[2])
                .ok()
                .and_then(|s| s.trim().parse::<f64>().ok())
                .filter(|s| s.is_finite() && *s > 0.0)
                .unwrap_or(0.0)
                .min(3600.0);
            // Redis blocks the whole server here; so does holding the lock.
            std::thread::sleep(std::time::Duration::from_secs_f64(secs));
            c.out.ok();
        }
        ("set-active-expire", 3) => {
            c.st.active_expire = atoi(&a[2]) != 0;
            c.out.ok();
        }
        ("change-repl-id", 2) => {
            c.st.replid = crate::state::random_hex40();
            c.out.ok();
        }
        ("object", 3) => debug_object(c, &a[2])?,
        ("protocol", 3) => debug_protocol(c, &a[2])?,
        ("populate", 3..=5) => debug_populate(c, a)?,
        ("reload", _) => super::persist::debug_reload(c, a)?,
        ("digest", 2) => super::persist::debug_digest(c)?,
        ("digest-value", _) => super::persist::debug_digest_value(c, a)?,
        ("log", 3) => {
            tracing::warn!("DEBUG LOG: {}", String::from_utf8_lossy(&a[2]));
            c.out.ok();
        }
        ("error", 3) => {
            return Err(Error::other(String::from_utf8_lossy(&a[2]).into_owned()));
        }
        _ => return Err(bad_sub(&a[1], "DEBUG")),
    }
    Ok(())
}

/// C's atoi: leading digits, 0 when there are none.
fn atoi(b: &[u8]) -> i64 {
    let s = std::str::from_utf8(b).unwrap_or("").trim_start();
    let (neg, digits) = match s.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, s.strip_prefix('+').unwrap_or(s)),
    };
    let mut v: i64 = 0;
    for ch in digits.bytes().take_while(u8::is_ascii_digit) {
        v = v.saturating_mul(10).saturating_add((ch - b'0') as i64);
    }
    if neg {
        -v
    } else {
        v
    }
}

fn debug_object(c: &mut Ctx, key: &[u8]) -> CmdResult {
    let db = c.cl.db;
    let now = c.now;
    c.st.expire_if_needed(db, key, now);
    let Some(v) = c.st.dbs[db].get(key) else {
        return Err(Error::NoSuchKey);
    };
    let enc = v.encoding();
    let ser = match v {
        storage::Value::Str(s) => match s.as_i64() {
            Some(i) if i8::try_from(i).is_ok() => 2,
            Some(i) if i16::try_from(i).is_ok() => 3,
            Some(i) if i32::try_from(i).is_ok() => 5,
            _ => {
                let l = s.len();
                l + if l < 64 {
                    1
                } else if l < 16384 {
                    2
                } else {
                    5
                }
            }
        },
        #[allow(unreachable_patterns)]
        _ => v.heap_size(),
    };
    let addr = v as *const _ as usize;
    let refcount = if enc == "int" { i32::MAX as i64 } else { 1 };
    let lru = (now / 1000) & ((1 << 24) - 1);
    c.out.simple(&format!(
        "Value at:{addr:#x} refcount:{refcount} encoding:{enc} serializedlength:{ser} lru:{lru} lru_seconds_idle:0"
    ));
    Ok(())
}

fn debug_protocol(c: &mut Ctx, t: &[u8]) -> CmdResult {
    let t = String::from_utf8_lossy(t).to_ascii_lowercase();
    let o = &mut *c.out;
    match t.as_str() {
        "string" => o.bulk(b"Hello World"),
        "integer" => o.int(12345),
        #[allow(clippy::approx_constant)]
        "double" => o.double(3.141),
        "bignum" => o.big_number("1234567999999999999999999999999999999"),
        "null" => o.null(),
        "array" | "set" | "map" => {
            match t.as_str() {
                "array" => o.array(3),
                "set" => o.set(3),
                _ => o.map(3),
            }
            for i in 0..3 {
                o.int(i);
                if t == "map" {
                    o.boolean(i == 1);
                }
            }
        }
        "attrib" => {
            if o.resp3 {
                o.raw(b"|1\r\n");
                o.bulk(b"key-popularity");
                o.array(2);
                o.bulk(b"key:123");
                o.int(90);
            }
            o.bulk(b"Some real reply following the attribute");
        }
        "push" => {
            if !o.resp3 {
                return Err(Error::other("ERR RESP2 is not supported by this command"));
            }
            o.push(2);
            o.bulk(b"server-cpu-usage");
            o.int(42);
            o.bulk(b"Some real reply following the push reply");
        }
        "verbatim" => o.verbatim(b"This is a verbatim\nstring"),
        "true" => o.boolean(true),
        "false" => o.boolean(false),
        _ => return Err(Error::other(
            "ERR Wrong protocol type name. Please use one of the following: string|integer|double|bignum|null|array|set|map|attrib|push|verbatim|true|false",
        )),
    }
    Ok(())
}

/// DEBUG POPULATE count [prefix] [size]
fn debug_populate(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let count = int_arg(&a[2])?;
    if count < 0 {
        return Err(Error::other("ERR count must be positive"));
    }
    let prefix: &[u8] = a.get(3).map_or(b"key", |p| &p[..]);
    let size = match a.get(4) {
        Some(s) => {
            let v = int_arg(s)?;
            if v < 0 {
                return Err(Error::other("ERR size must be positive"));
            }
            Some(v.min(512 * 1024 * 1024) as usize)
        }
        None => None,
    };
    let db = c.cl.db;
    for i in 0..count {
        let mut key = prefix.to_vec();
        key.push(b':');
        key.extend_from_slice(i.to_string().as_bytes());
        if c.st.dbs[db].contains(&key) {
            continue;
        }
        let mut val = format!("value:{i}").into_bytes();
        if let Some(sz) = size {
            val.resize(sz, 0);
        }
        c.st.dbs[db].add(&key, storage::Value::str(&val));
    }
    c.out.ok();
    Ok(())
}

fn debug_help(c: &mut Ctx) {
    help_reply(
        c,
        "DEBUG",
        &[
            "CHANGE-REPL-ID",
            "    Change the replication IDs of the instance.",
            "    Dangerous: should be used only for testing the replication subsystem.",
            "ERROR <string>",
            "    Return a Redis protocol error with <string> as message. Useful for clients",
            "    unit tests to simulate Redis errors.",
            "LOG <message>",
            "    Write <message> to the server log.",
            "OBJECT <key>",
            "    Show low level info about `key` and associated value.",
            "POPULATE <count> [<prefix>] [<size>]",
            "    Create <count> string keys named key:<num>. If <prefix> is specified then",
            "    it is used instead of the 'key' prefix. These are not propagated to",
            "    replicas. Cluster slots are not respected so keys not belonging to the",
            "    current node can be created in cluster mode.",
            "PROTOCOL <type>",
            "    Reply with a test value of the specified type. <type> can be: string,",
            "    integer, double, bignum, null, array, set, map, attrib, push, verbatim,",
            "    true, false.",
            "SET-ACTIVE-EXPIRE <0|1>",
            "    Setting it to 0 disables expiring keys in background when they are not",
            "    accessed (otherwise the Redis behavior). Setting it to 1 reenables back the",
            "    default.",
            "SLEEP <seconds>",
            "    Stop the server for <seconds>. Decimals allowed.",
        ],
    );
}

/// The recorded value at percentile `p` as Redis's HdrHistogram gives it:
/// the count rounded half up, the bucket's highest equivalent value.
fn value_at_percentile(h: &hdrhistogram::Histogram<u64>, p: f64) -> u64 {
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

// ---------------------------------------------------------------- CLIENT

/// One CLIENT LIST line (without the newline). `current` carries the
/// request being executed, for the fields describing it.
pub fn client_line(cl: &Client, now: i64, current: Option<&[Bytes]>) -> String {
    let (qbuf, argv_mem) = match current {
        Some(args) => {
            let mut q = 1 + args.len().to_string().len() + 2;
            for a in args {
                q += 1 + a.len().to_string().len() + 2 + a.len() + 2;
            }
            (q, args.iter().map(|a| a.len()).sum::<usize>())
        }
        None => (cl.qbuf, 0),
    };
    // Redis's letters, in its order.
    let mut flags: String = [
        (cl.monitor, 'O'),
        (cl.subs.any(), 'P'),
        (cl.multi.is_some(), 'x'),
        (cl.blocked.is_some(), 'b'),
        (cl.dirty_cas, 'd'),
        (cl.close_after_reply, 'c'),
        (cl.no_evict, 'e'),
    ]
    .iter()
    .filter_map(|&(on, f)| on.then_some(f))
    .collect();
    if flags.is_empty() {
        flags.push('N');
    }
    let omem = cl.output_bytes();
    // Queued commands, and their arguments' bytes plus a pointer each, as
    // Redis 7.0 counts `multi-mem`.
    let (multi, multi_mem) = cl.multi.as_ref().map_or((-1, 0), |q| {
        let mem = q.iter().flatten().map(|a| a.len() + 8).sum::<usize>();
        (q.len() as i64, mem)
    });
    let name = cl
        .name
        .as_ref()
        .map(|n| String::from_utf8_lossy(n).into_owned())
        .unwrap_or_default();
    format!(
        "id={} addr={} laddr={} fd={} name={} age={} idle={} flags={} db={} sub={} psub={} ssub={} multi={} qbuf={} qbuf-free={} argv-mem={} multi-mem={} rbs=16384 rbp=16384 obl=0 oll={} omem={} tot-mem={} events={} cmd={} user=default redir=-1 resp={}",
        cl.id,
        cl.addr,
        cl.laddr,
        cl.fd,
        name,
        (now - cl.created_ms).max(0) / 1000,
        // The client running the command has just been heard from.
        if current.is_some() {
            0
        } else {
            (now - cl.last_interaction_ms).max(0) / 1000
        },
        flags,
        cl.db,
        cl.subs.channels.len(),
        cl.subs.patterns.len(),
        cl.subs.shard.len(),
        multi,
        qbuf,
        20474usize.saturating_sub(qbuf),
        argv_mem,
        multi_mem,
        // Unwritten output as Redis's reply list: 16 KB blocks.
        omem.div_ceil(16 * 1024),
        omem,
        37632 + qbuf + multi_mem + omem,
        if omem > 0 { "rw" } else { "r" },
        if current.is_some() { "NULL" } else { &cl.last_cmd },
        if cl.resp3 { 3 } else { 2 },
    )
}

/// The current command's full name as CLIENT LIST shows it.
fn current_cmd_name(a: &[Bytes]) -> String {
    super::resolve(a)
        .map(|c| c.name.to_string())
        .unwrap_or_else(|_| "NULL".into())
}

fn client_type_ok(t: &[u8]) -> Result<&'static str, Error> {
    let l = String::from_utf8_lossy(t).to_ascii_lowercase();
    match l.as_str() {
        "normal" => Ok("normal"),
        "master" => Ok("master"),
        "replica" | "slave" => Ok("replica"),
        "pubsub" => Ok("pubsub"),
        _ => Err(Error::other(format!(
            "ERR Unknown client type '{}'",
            String::from_utf8_lossy(t)
        ))),
    }
}

/// The type CLIENT LIST/KILL TYPE filters on.
fn client_type(cl: &Client) -> &'static str {
    if cl.monitor {
        "replica"
    } else if cl.subs.any() {
        "pubsub"
    } else {
        "normal"
    }
}

/// CLIENT ID
fn client_id(c: &mut Ctx, _: &[Bytes]) -> CmdResult {
    c.out.int(c.cl.id as i64);
    Ok(())
}

/// CLIENT SETNAME connection-name
fn client_setname(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    validate_client_name(&a[2])?;
    c.cl.name = (!a[2].is_empty()).then(|| a[2].clone());
    c.out.ok();
    Ok(())
}

/// CLIENT GETNAME
fn client_getname(c: &mut Ctx, _: &[Bytes]) -> CmdResult {
    match &c.cl.name {
        Some(n) => c.out.bulk(n),
        None => c.out.null(),
    }
    Ok(())
}

/// CLIENT LIST [TYPE <NORMAL | MASTER | REPLICA | PUBSUB>] [ID client-id [client-id ...]]
fn client_list(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let mut ty: Option<&str> = None;
    let mut ids: Option<Vec<u64>> = None;
    let mut i = 2;
    while i < a.len() {
        if is(&a[i], "type") && i + 1 < a.len() {
            ty = Some(client_type_ok(&a[i + 1])?);
            i += 2;
        } else if is(&a[i], "id") && i + 1 < a.len() {
            let mut v = Vec::new();
            for x in &a[i + 1..] {
                let id = int_arg(x)
                    .ok()
                    .filter(|&n| n > 0)
                    .ok_or_else(|| Error::other("ERR Invalid client ID"))?;
                v.push(id as u64);
            }
            ids = Some(v);
            i = a.len();
        } else {
            return Err(Error::Syntax);
        }
    }
    let now = c.now;
    let me = c.cl.id;
    let cmd = current_cmd_name(a);
    let mut out = String::new();
    let mut mine_done = false;
    let keep = |cl: &Client| {
        ty.is_none_or(|t| client_type(cl) == t) && ids.as_ref().is_none_or(|v| v.contains(&cl.id))
    };
    let push_me = |out: &mut String, cl: &Client| {
        let line = client_line(cl, now, Some(a)).replace("cmd=NULL", &format!("cmd={cmd}"));
        out.push_str(&line);
        out.push('\n');
    };
    for (id, cl) in &c.st.clients {
        if *id > me && !mine_done {
            mine_done = true;
            if keep(c.cl) {
                push_me(&mut out, c.cl);
            }
        }
        if keep(cl) {
            out.push_str(&client_line(cl, now, None));
            out.push('\n');
        }
    }
    if !mine_done && keep(c.cl) {
        push_me(&mut out, c.cl);
    }
    c.out.verbatim(out.as_bytes());
    Ok(())
}

/// CLIENT INFO
fn client_info(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let cmd = current_cmd_name(a);
    let mut line = client_line(c.cl, c.now, Some(a)).replace("cmd=NULL", &format!("cmd={cmd}"));
    line.push('\n');
    c.out.verbatim(line.as_bytes());
    Ok(())
}

/// CLIENT KILL ip:port | CLIENT KILL [ID id] [TYPE type] [USER name]
///   [ADDR ip:port] [LADDR ip:port] [SKIPME yes|no] ...
fn client_kill(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    if a.len() == 3 {
        let addr = &a[2][..];
        if c.cl.addr.as_bytes() == addr {
            c.cl.close_after_reply = true;
        } else {
            let Some(id) =
                c.st.clients
                    .values()
                    .find(|cl| cl.addr.as_bytes() == addr)
                    .map(|cl| cl.id)
            else {
                return Err(Error::other("ERR No such client"));
            };
            c.st.kill_client(id);
        }
        c.out.ok();
        return Ok(());
    }
    if !a.len().is_multiple_of(2) {
        return Err(Error::Syntax);
    }
    let mut id: Option<u64> = None;
    let mut ty: Option<&str> = None;
    let mut addr: Option<&[u8]> = None;
    let mut laddr: Option<&[u8]> = None;
    let mut skipme = true;
    for p in a[2..].chunks(2) {
        let (k, v) = (&p[0], &p[1]);
        if is(k, "id") {
            let n = int_arg(v)
                .ok()
                .filter(|&n| n > 0)
                .ok_or_else(|| Error::other("ERR client-id should be greater than 0"))?;
            id = Some(n as u64);
        } else if is(k, "type") {
            ty = Some(client_type_ok(v)?);
        } else if is(k, "addr") {
            addr = Some(v);
        } else if is(k, "laddr") {
            laddr = Some(v);
        } else if is(k, "user") {
            if &v[..] != b"default" {
                return Err(Error::other(format!(
                    "ERR No such user '{}'",
                    String::from_utf8_lossy(v)
                )));
            }
        } else if is(k, "skipme") {
            if is(v, "yes") {
                skipme = true;
            } else if is(v, "no") {
                skipme = false;
            } else {
                return Err(Error::Syntax);
            }
        } else {
            return Err(Error::Syntax);
        }
    }
    let matches = |cl: &Client| {
        id.is_none_or(|i| cl.id == i)
            && ty.is_none_or(|t| client_type(cl) == t)
            && addr.is_none_or(|x| cl.addr.as_bytes() == x)
            && laddr.is_none_or(|x| cl.laddr.as_bytes() == x)
    };
    let victims: Vec<u64> =
        c.st.clients
            .values()
            .filter(|cl| matches(cl))
            .map(|cl| cl.id)
            .collect();
    let mut n = victims.len() as i64;
    for v in victims {
        c.st.kill_client(v);
    }
    if !skipme && matches(c.cl) {
        c.cl.close_after_reply = true;
        n += 1;
    }
    c.out.int(n);
    Ok(())
}

/// CLIENT REPLY ON|OFF|SKIP
fn client_reply(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    if is(&a[2], "on") {
        c.cl.reply_mode = ReplyMode::On;
        c.out.ok();
    } else if is(&a[2], "off") {
        c.cl.reply_mode = ReplyMode::Off;
    } else if is(&a[2], "skip") {
        if c.cl.reply_mode == ReplyMode::On {
            c.cl.reply_mode = ReplyMode::SkipNext;
        }
    } else {
        return Err(Error::Syntax);
    }
    Ok(())
}

/// CLIENT NO-EVICT ON|OFF
fn client_no_evict(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    if is(&a[2], "on") {
        c.cl.no_evict = true;
    } else if is(&a[2], "off") {
        c.cl.no_evict = false;
    } else {
        return Err(Error::Syntax);
    }
    c.out.ok();
    Ok(())
}

/// CLIENT PAUSE timeout [WRITE | ALL]
fn client_pause(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let ms = int_arg(&a[2])
        .map_err(|_| Error::other("ERR timeout is not an integer or out of range"))?;
    if ms < 0 {
        return Err(Error::other("ERR timeout is negative"));
    }
    let writes_only = match a.len() {
        3 => false,
        4 if is(&a[3], "write") => true,
        4 if is(&a[3], "all") => false,
        4 => return Err(Error::other("ERR CLIENT PAUSE mode must be WRITE or ALL")),
        _ => return Err(Error::Syntax),
    };
    let until = c.now.saturating_add(ms);
    // An overlapping pause keeps the later end and the stricter mode.
    let p = match c.st.pause.take() {
        Some(old) if old.until_ms > c.now => Pause {
            until_ms: old.until_ms.max(until),
            writes_only: old.writes_only && writes_only,
        },
        _ => Pause {
            until_ms: until,
            writes_only,
        },
    };
    c.st.pause = Some(p);
    c.out.ok();
    Ok(())
}

/// CLIENT UNPAUSE
fn client_unpause(c: &mut Ctx, _: &[Bytes]) -> CmdResult {
    c.st.pause = None;
    c.out.ok();
    Ok(())
}

/// CLIENT GETREDIR
fn client_getredir(c: &mut Ctx, _: &[Bytes]) -> CmdResult {
    c.out.int(-1);
    Ok(())
}

/// CLIENT TRACKINGINFO
fn client_trackinginfo(c: &mut Ctx, _: &[Bytes]) -> CmdResult {
    c.out.map(3);
    c.out.bulk(b"flags");
    c.out.set(1);
    c.out.bulk(b"off");
    c.out.bulk(b"redirect");
    c.out.int(-1);
    c.out.bulk(b"prefixes");
    c.out.array(0);
    Ok(())
}

/// CLIENT UNBLOCK client-id [TIMEOUT | ERROR]
fn client_unblock(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let _id = int_arg(&a[2])?;
    match a.len() {
        3 => {}
        4 if is(&a[3], "timeout") || is(&a[3], "error") => {}
        _ => {
            return Err(Error::other(
                "ERR CLIENT UNBLOCK reason should be TIMEOUT or ERROR",
            ))
        }
    }
    // Nothing blocks yet, so no client can be unblocked.
    c.out.int(0);
    Ok(())
}

/// CLIENT HELP
fn client_help(c: &mut Ctx, _: &[Bytes]) -> CmdResult {
    help_reply(
        c,
        "CLIENT",
        &[
            "CACHING (YES|NO)",
            "    Enable/disable tracking of the keys for next command in OPTIN/OPTOUT modes.",
            "GETREDIR",
            "    Return the client ID we are redirecting to when tracking is enabled.",
            "GETNAME",
            "    Return the name of the current connection.",
            "ID",
            "    Return the ID of the current connection.",
            "INFO",
            "    Return information about the current client connection.",
            "KILL <ip:port>",
            "    Kill connection made from <ip:port>.",
            "KILL <option> <value> [<option> <value> [...]]",
            "    Kill connections. Options are:",
            "    * ADDR (<ip:port>|<unixsocket>:0)",
            "      Kill connections made from the specified address",
            "    * LADDR (<ip:port>|<unixsocket>:0)",
            "      Kill connections made to specified local address",
            "    * TYPE (NORMAL|MASTER|REPLICA|PUBSUB)",
            "      Kill connections by type.",
            "    * USER <username>",
            "      Kill connections authenticated by <username>.",
            "    * SKIPME (YES|NO)",
            "      Skip killing current connection (default: yes).",
            "LIST [options ...]",
            "    Return information about client connections. Options:",
            "    * TYPE (NORMAL|MASTER|REPLICA|PUBSUB)",
            "      Return clients of specified type.",
            "UNPAUSE",
            "    Stop the current client pause, resuming traffic.",
            "PAUSE <timeout> [WRITE|ALL]",
            "    Suspend all, or just write, clients for <timeout> milliseconds.",
            "REPLY (ON|OFF|SKIP)",
            "    Control the replies sent to the current connection.",
            "SETNAME <name>",
            "    Assign the name <name> to the current connection.",
            "UNBLOCK <clientid> [TIMEOUT|ERROR]",
            "    Unblock the specified blocked client.",
            "TRACKING (ON|OFF) [REDIRECT <id>] [BCAST] [PREFIX <prefix> [...]]",
            "         [OPTIN] [OPTOUT] [NOLOOP]",
            "    Control server assisted client side caching.",
            "TRACKINGINFO",
            "    Report tracking status for the current connection.",
            "NO-EVICT (ON|OFF)",
            "    Protect current client connection from eviction.",
        ],
    );
    Ok(())
}

/// Whether a request must wait for the current CLIENT PAUSE to end.
pub fn must_pause(st: &State, args: &[Bytes], now: i64) -> bool {
    let Some(p) = &st.pause else {
        return false;
    };
    if p.until_ms <= now {
        return false;
    }
    match super::resolve(args) {
        Ok(cmd) if p.writes_only => cmd.has(WRITE | MAY_REPLICATE),
        Ok(_) => true,
        Err(_) => false,
    }
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
