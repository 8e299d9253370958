//! MEMORY and LATENCY: memory introspection and the latency monitor.
//!
//! MEMORY USAGE reports what Redis 7.0 would report for the same value
//! (its object layout and jemalloc size classes), not cinnabar's own
//! footprint, so tools that size keys from it get the numbers they know.
//! MEMORY STATS and INFO memory report cinnabar's real allocation counts
//! (see `evict`).

use super::{int_arg, is, Ctx, Handler};
use crate::core::error::{CmdResult, Error};
use crate::state::info::{ratio, summary};
use bytes::Bytes;
use std::fmt::Write;
use storage::listpack::{entry_size, LpVal};
use storage::{Hash, Set, SortedSet, StrValue, Value};

pub static HANDLERS: &[(&str, Handler)] = &[
    ("memory|usage", usage),
    ("memory|stats", stats),
    ("memory|doctor", doctor),
    ("memory|purge", purge),
    ("memory|malloc-stats", malloc_stats),
    ("memory|help", memory_help),
    ("latency|latest", latest),
    ("latency|history", history),
    ("latency|reset", reset),
    ("latency|doctor", latency_doctor),
    ("latency|graph", graph),
    ("latency|histogram", histogram),
    ("latency|help", latency_help),
];

/// jemalloc's size class for `n` bytes (what Redis's zmalloc_size reports):
/// 8, 16, then steps of 16 up to 128, then four classes per doubling.
pub fn je(n: usize) -> usize {
    if n <= 8 {
        return 8;
    }
    if n <= 128 {
        return n.div_ceil(16) * 16;
    }
    let p = usize::BITS - (n - 1).leading_zeros(); // 2^(p-1) < n <= 2^p
    let step = 1usize << (p - 3);
    n.div_ceil(step) * step
}

/// An sds string's allocation for `len` bytes: header by length class,
/// the bytes and the terminator.
fn sds(len: usize) -> usize {
    let hdr = if len < 32 {
        1
    } else if len < 256 {
        3
    } else if len < 65536 {
        5
    } else {
        9
    };
    je(hdr + len + 1)
}

/// An sds holding a listpack/ints element (as a dict member).
fn sds_val(v: LpVal) -> usize {
    sds(v.str_len())
}

const ROBJ: usize = 16;
const DICT: usize = 56;
const DICT_ENTRY: usize = 24;
const QUICKLIST: usize = 40;
const QL_NODE: usize = 40;

/// Mean of `f` over the first `samples` items (all if 0), times `len`.
fn sampled<I: Iterator>(
    it: I,
    len: usize,
    samples: usize,
    mut f: impl FnMut(I::Item) -> usize,
) -> usize {
    let take = if samples == 0 { usize::MAX } else { samples };
    let (mut sum, mut n) = (0usize, 0usize);
    for x in it.take(take) {
        sum += f(x);
        n += 1;
    }
    if n == 0 {
        0
    } else {
        (sum as f64 / n as f64 * len as f64) as usize
    }
}

/// Redis 7.0's `objectComputeSize` for the value, from cinnabar's data.
pub fn value_size(v: &Value, samples: usize) -> usize {
    match v {
        Value::Str(StrValue::Int(_)) => ROBJ,
        Value::Str(StrValue::Emb(b)) if b.len() <= 44 => je(ROBJ + 3 + b.len() + 1),
        Value::Str(StrValue::Emb(b)) => ROBJ + sds(b.len()),
        Value::Str(StrValue::Raw(b)) => ROBJ + sds(b.capacity()),
        Value::List(q) if q.compress_depth() > 0 => {
            // Redis's sample of a compressed list: the first nodes'
            // allocations (a compressed node's LZF form), spread over all
            // elements (matches Redis 7.0.15 for 1 to 3 samples).
            let take = if samples == 0 { usize::MAX } else { samples };
            let (mut sum, mut count) = (0usize, 0usize);
            for (bytes, n) in q.node_allocs().take(take) {
                sum += QL_NODE + je(bytes);
                count += n;
            }
            ROBJ + QUICKLIST + (sum as f64 / count.max(1) as f64 * q.len() as f64) as usize
        }
        Value::List(q) => {
            let nodes = q.node_count().max(1);
            // Redis samples nodes; cinnabar's nodes are private, so sample
            // elements and spread them over the nodes.
            let per = (samples.max(1) * 128).min(q.len());
            let entries = sampled(q.iter(), q.len(), if samples == 0 { 0 } else { per }, |e| {
                entry_size(e)
            });
            let lp = 7 + entries / nodes;
            ROBJ + QUICKLIST + nodes * (QL_NODE + je(lp))
        }
        Value::Hash(Hash::Listpack(lp)) => ROBJ + je(lp.lp_bytes()),
        Value::Hash(h) => {
            let buckets = h.as_table().map_or(h.len(), |d| d.buckets());
            ROBJ + DICT
                + buckets * 8
                + sampled(h.iter(), h.len(), samples, |(f, v)| {
                    DICT_ENTRY + sds_val(f) + sds_val(v)
                })
        }
        Value::Set(Set::Intset(i)) => ROBJ + je(i.blob_len()),
        Value::Set(s) => {
            let buckets = s.as_table().map_or(s.len(), |d| d.buckets());
            ROBJ + DICT
                + buckets * 8
                + sampled(s.iter(), s.len(), samples, |m| DICT_ENTRY + sds_val(m))
        }
        Value::ZSet(SortedSet::Listpack(lp)) => ROBJ + je(lp.lp_bytes()),
        Value::ZSet(z) => {
            let len = z.len();
            let buckets = len.next_power_of_two();
            let take = if samples == 0 { len } else { samples.min(len) };
            let mut sum = 0;
            let mut n = 0;
            for e in z.entries(0, take.saturating_sub(1), false) {
                // Node with 1.33 levels on average: 32 bytes + 16 per level.
                sum += sds(e.0.len()) + DICT_ENTRY + 56;
                n += 1;
            }
            let elems = (sum * len).checked_div(n).unwrap_or(0);
            // zset + skiplist headers, the dict and its table, header node.
            ROBJ + 16 + 32 + DICT + buckets * 8 + je(32 + 32 * 16) + elems
        }
        Value::Stream(s) => {
            // Redis's estimate of a radix tree: its header, then per
            // element a 16-byte ID, per node a node header and 30 words.
            let rax = |elems: usize| 24 + elems * 16 + elems * (4 + 8 * 30);
            let mut n = ROBJ + 80 + rax(s.node_count());
            n += s.nodes().map(|(_, lp)| je(lp.lp_bytes())).sum::<usize>();
            for (name, g) in &s.groups {
                n += 56 + sds(name.len()) + rax(g.pel.len()) + 40 * g.pel.len();
                for (cname, c) in &g.consumers {
                    n += 32 + cname.len() + rax(c.pel.len()) + 8 * c.pel.len();
                }
            }
            n
        }
    }
}

/// MEMORY USAGE key [SAMPLES count]
fn usage(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let mut samples = 5usize;
    let mut i = 3;
    while i < a.len() {
        if is(&a[i], "samples") && i + 1 < a.len() {
            let n = int_arg(&a[i + 1])?;
            if n < 0 {
                return Err(Error::Syntax);
            }
            samples = if n == 0 { 0 } else { n as usize };
            i += 2;
        } else {
            return Err(Error::Syntax);
        }
    }
    let key = &a[2];
    // Not a keyspace access: no hit/miss counted, no event.
    c.st.expire_if_needed(c.cl.db, key, c.now);
    let Some(v) = c.st.shard.dbs[c.cl.db].peek(key) else {
        c.out.null();
        return Ok(());
    };
    let size = value_size(v, samples) + sds(key.len()) + DICT_ENTRY;
    c.out.int(size as i64);
    Ok(())
}

/// MEMORY STATS
fn stats(c: &mut Ctx, _: &[Bytes]) -> CmdResult {
    let m = summary(c.st);
    let clients = m.clients;
    let (backlog, slaves) = c.st.repl.memory_split();
    let net = m.used.saturating_sub(m.startup);
    c.out.map(27 + m.dbs.len());
    let pairs_int: &[(&str, u64)] = &[
        ("peak.allocated", m.peak),
        ("total.allocated", m.used),
        ("startup.allocated", m.startup),
        ("replication.backlog", backlog as u64),
        ("clients.slaves", slaves as u64),
        ("clients.normal", clients),
        ("cluster.links", 0),
        ("aof.buffer", c.st.aof.buf.capacity() as u64),
        (
            "lua.caches",
            c.st.engine
                .as_ref()
                .map_or(0, |e| e.scripts_memory() as u64),
        ),
        (
            "functions.caches",
            c.st.engine
                .as_ref()
                .map_or(0, |e| e.functions_memory() as u64),
        ),
    ];
    for (k, v) in pairs_int {
        c.out.bulk(k.as_bytes());
        c.out.int(*v as i64);
    }
    for (i, main, exp) in &m.dbs {
        c.out.bulk(format!("db.{i}").as_bytes());
        c.out.map(3);
        c.out.bulk(b"overhead.hashtable.main");
        c.out.int(*main as i64);
        c.out.bulk(b"overhead.hashtable.expires");
        c.out.int(*exp as i64);
        c.out.bulk(b"overhead.hashtable.slot-to-keys");
        c.out.int(0);
    }
    let rest: &[(&str, Num)] = &[
        ("overhead.total", Num::I(m.overhead)),
        ("keys.count", Num::I(m.keys)),
        (
            "keys.bytes-per-key",
            Num::I(net.checked_div(m.keys).unwrap_or(0)),
        ),
        ("dataset.bytes", Num::I(m.dataset)),
        (
            "dataset.percentage",
            Num::F(ratio(m.dataset, net.max(1)) * 100.0),
        ),
        ("peak.percentage", Num::F(ratio(m.used, m.peak) * 100.0)),
        ("allocator.allocated", Num::I(m.used)),
        ("allocator.active", Num::I(m.active)),
        ("allocator.resident", Num::I(m.active)),
        (
            "allocator-fragmentation.ratio",
            Num::F(ratio(m.active, m.used)),
        ),
        (
            "allocator-fragmentation.bytes",
            Num::I(m.active.saturating_sub(m.used)),
        ),
        ("allocator-rss.ratio", Num::F(1.0)),
        ("allocator-rss.bytes", Num::I(0)),
        ("rss-overhead.ratio", Num::F(ratio(m.rss, m.active))),
        ("rss-overhead.bytes", Num::I(m.rss.saturating_sub(m.active))),
        ("fragmentation", Num::F(ratio(m.rss, m.used))),
        ("fragmentation.bytes", Num::I(m.rss.saturating_sub(m.used))),
    ];
    for (k, v) in rest {
        c.out.bulk(k.as_bytes());
        match v {
            Num::I(n) => c.out.int(*n as i64),
            Num::F(f) => c.out.double(*f),
        }
    }
    Ok(())
}

enum Num {
    I(u64),
    F(f64),
}

/// MEMORY DOCTOR
fn doctor(c: &mut Ctx, _: &[Bytes]) -> CmdResult {
    let m = summary(c.st);
    let mut issues = Vec::new();
    if m.used < 5 * 1024 * 1024 {
        c.out.verbatim(b"Hi Sam, this instance is empty or is using very little memory, my issues detector can't be used in these conditions. Please, leave for your mission on Earth and fill it with some data. The new Sam and I will be back to our programming as soon as I finished rebooting.");
        return Ok(());
    }
    if m.peak as f64 / m.used as f64 > 1.5 {
        issues.push(String::from(" * Peak memory: In the past this instance used more than 150% the memory that is currently using. The allocator is normally not able to release memory after a peak, so you can expect to see a big fragmentation ratio, however this is actually harmless and is only due to the memory peak, and if the Redis instance Resident Set Size (RSS) is currently bigger than expected, the memory will be used as soon as you fill the Redis instance with more data. If the memory peak was only occasional and you want to try to reclaim memory, please try the MEMORY PURGE command, otherwise the only other option is to shutdown and restart the instance.\n\n"));
    }
    if ratio(m.rss, m.used) > 1.4 && m.rss.saturating_sub(m.used) > 10 * 1024 * 1024 {
        issues.push(String::from(" * High total RSS: This instance has a memory fragmentation and RSS overhead greater than 1.4 (this means that the Resident Set Size of the Redis process is much larger than the sum of the logical allocations Redis performed). This problem is usually due either to a large peak memory (check if there is a peak memory entry above in the report) or may result from a workload that causes the allocator to fragment memory a lot. If the problem is a large peak memory, then there is no issue. Otherwise, make sure you are using the Jemalloc allocator and not the default libc malloc. Note: The currently used allocator is \"mimalloc\".\n\n"));
    }
    if issues.is_empty() {
        c.out.verbatim(b"Hi Sam, I can't find any memory issue in your instance. I can only account for what occurs on this base.");
    } else {
        let mut s = String::from(
            "Sam, I detected a few issues in this Redis instance memory implants:\n\n",
        );
        for i in issues {
            s.push_str(&i);
        }
        s.push_str("I'm here to keep you safe, Sam. I want to help you.\n");
        c.out.verbatim(s.as_bytes());
    }
    Ok(())
}

/// MEMORY PURGE
fn purge(c: &mut Ctx, _: &[Bytes]) -> CmdResult {
    crate::state::evict::purge();
    c.out.ok();
    Ok(())
}

/// MEMORY MALLOC-STATS
fn malloc_stats(c: &mut Ctx, _: &[Bytes]) -> CmdResult {
    let s = crate::state::evict::malloc_stats();
    let s = if s.is_empty() {
        "Stats not supported for the current allocator".to_string()
    } else {
        s
    };
    c.out.verbatim(s.as_bytes());
    Ok(())
}

fn help_lines(c: &mut Ctx, lines: &[&str]) {
    c.out.array(lines.len());
    for l in lines {
        c.out.simple(l);
    }
}

/// MEMORY HELP
fn memory_help(c: &mut Ctx, _: &[Bytes]) -> CmdResult {
    help_lines(
        c,
        &[
            "MEMORY <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
            "DOCTOR",
            "    Return memory problems reports.",
            "MALLOC-STATS",
            "    Return internal statistics report from the memory allocator.",
            "PURGE",
            "    Attempt to purge dirty pages for reclamation by the allocator.",
            "STATS",
            "    Return information about the memory usage of the server.",
            "USAGE <key> [SAMPLES <count>]",
            "    Return memory in bytes used by <key> and its value. Nested values are",
            "    sampled up to <count> times (default: 5, 0 means sample all).",
            "HELP",
            "    Prints this help.",
        ],
    );
    Ok(())
}

/// LATENCY LATEST
fn latest(c: &mut Ctx, _: &[Bytes]) -> CmdResult {
    let ev = &c.st.memory.latency;
    c.out.array(ev.len());
    for (name, e) in ev {
        let last = e
            .samples
            .back()
            .copied()
            .unwrap_or(crate::state::evict::LatencySample { time: 0, ms: 0 });
        c.out.array(4);
        c.out.bulk(name.as_bytes());
        c.out.int(last.time);
        c.out.int(last.ms as i64);
        c.out.int(e.max as i64);
    }
    Ok(())
}

/// LATENCY HISTORY event
fn history(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let name = String::from_utf8_lossy(&a[2]);
    match c.st.memory.latency.get(name.as_ref()) {
        None => c.out.array(0),
        Some(e) => {
            c.out.array(e.samples.len());
            for s in &e.samples {
                c.out.array(2);
                c.out.int(s.time);
                c.out.int(s.ms as i64);
            }
        }
    }
    Ok(())
}

/// LATENCY RESET [event ...]
fn reset(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let ev = &mut c.st.memory.latency;
    let n = if a.len() == 2 {
        let n = ev.len();
        ev.clear();
        n
    } else {
        a[2..]
            .iter()
            .filter(|e| ev.remove(String::from_utf8_lossy(e).as_ref()).is_some())
            .count()
    };
    c.out.int(n as i64);
    Ok(())
}

/// "12s", "5m", "3h", "2d": how long ago, for graph labels.
fn ago(secs: i64) -> String {
    let s = secs.max(0);
    if s < 60 {
        format!("{s}s")
    } else if s < 3600 {
        format!("{}m", s / 60)
    } else if s < 86400 {
        format!("{}h", s / 3600)
    } else {
        format!("{}d", s / 86400)
    }
}

/// LATENCY GRAPH event
fn graph(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let name = String::from_utf8_lossy(&a[2]).into_owned();
    let Some(e) = c.st.memory.latency.get(&name) else {
        return Err(Error::other(format!(
            "ERR No samples available for event '{name}'"
        )));
    };
    let hi = e.samples.iter().map(|s| s.ms).max().unwrap_or(0);
    let lo = e.samples.iter().map(|s| s.ms).min().unwrap_or(0);
    let mut s = format!(
        "{name} - high {hi} ms, low {lo} ms (all time high {} ms)\n{}\n",
        e.max,
        "-".repeat(80)
    );
    // Four rows, two steps each ('_' the lower half, '#' the top of a bar).
    const ROWS: u64 = 4;
    let steps: Vec<u64> = e
        .samples
        .iter()
        .map(|x| {
            if hi == lo {
                ROWS * 2 - 1
            } else {
                (x.ms - lo) * (ROWS * 2 - 1) / (hi - lo)
            }
        })
        .collect();
    for row in (0..ROWS).rev() {
        for &st in &steps {
            let top = st / 2;
            s.push(if top == row {
                if st % 2 == 1 {
                    '#'
                } else {
                    '_'
                }
            } else if top > row {
                '|'
            } else {
                ' '
            });
        }
        s.push('\n');
    }
    let now = crate::core::clock::now_ms() / 1000;
    let labels: Vec<String> = e.samples.iter().map(|x| ago(now - x.time)).collect();
    let height = labels.iter().map(String::len).max().unwrap_or(0);
    for row in 0..height {
        for l in &labels {
            let pad = height - l.len();
            s.push(if row < pad {
                ' '
            } else {
                l.as_bytes()[row - pad] as char
            });
        }
        s.push('\n');
    }
    c.out.verbatim(s.as_bytes());
    Ok(())
}

/// LATENCY DOCTOR
fn latency_doctor(c: &mut Ctx, _: &[Bytes]) -> CmdResult {
    let ev = &c.st.memory.latency;
    if ev.is_empty() {
        c.out.verbatim(b"Dave, no latency spike was observed during the lifetime of this Redis instance, not in the slightest bit. I honestly think you ought to sit down calmly, take a stress pill, and think things over.\n");
        return Ok(());
    }
    let mut s = String::from("Dave, I have observed latency spikes in this Redis instance. You don't mind talking about it, do you Dave?\n\n");
    for (i, (name, e)) in ev.iter().enumerate() {
        let n = e.samples.len().max(1) as u64;
        let avg = e.samples.iter().map(|x| x.ms).sum::<u64>() / n;
        let mad = e.samples.iter().map(|x| x.ms.abs_diff(avg)).sum::<u64>() / n;
        let period = match (e.samples.front(), e.samples.back()) {
            (Some(f), Some(l)) if e.samples.len() > 1 => {
                (l.time - f.time) as f64 / (e.samples.len() - 1) as f64
            }
            _ => 0.0,
        };
        let _ = writeln!(
            s,
            "{}. {name}: {} latency spikes (average {avg}ms, mean deviation {mad}ms, period {period:.2} sec). Worst all time event {}ms.",
            i + 1,
            e.samples.len(),
            e.max
        );
    }
    s.push_str("\nI have a few advices for you:\n\n");
    s.push_str("- Check your Slow Log to understand what are the commands you are running which are too slow to execute. Please check https://redis.io/commands/slowlog for more information.\n");
    s.push_str("- Deleting, expiring or evicting (because of maxmemory policy) large objects is a blocking operation. If you have very large objects that are often deleted, expired, or evicted, try to fragment those objects into multiple smaller objects.\n");
    c.out.verbatim(s.as_bytes());
    Ok(())
}

/// Whether `asked` (LATENCY HISTOGRAM's argument) names command `name`: a
/// container command names each of its subcommands.
fn names(asked: &str, name: &str) -> bool {
    name.strip_prefix(asked)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with('|'))
}

/// LATENCY HISTOGRAM [command ...]: each command's latency histogram
/// (`latency-tracking`), as Redis reports it: buckets of powers of two
/// microseconds from 1, each with the cumulative count of calls up to it,
/// only where the count grows.
fn histogram(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let wanted: Vec<String> = a[2..]
        .iter()
        .map(|x| String::from_utf8_lossy(x).to_ascii_lowercase())
        .collect();
    let rows: Vec<_> = crate::state::info::counted(c.st)
        .into_iter()
        .filter(|(n, _)| wanted.is_empty() || wanted.iter().any(|w| names(w, n)))
        .filter_map(|(n, s)| Some((n, s.calls, s.latency.as_deref()?)))
        .collect();
    c.out.map(rows.len());
    for (name, calls, h) in rows {
        c.out.bulk(name.as_bytes());
        c.out.map(2);
        c.out.bulk(b"calls");
        c.out.int(calls as i64);
        c.out.bulk(b"histogram_usec");
        let mut buckets = Vec::new();
        let mut total = 0;
        // Durations are recorded in ns; buckets double from 1024 ns, and
        // each is named by the highest value its level stands for (Redis
        // 7.0.15 names the 2^26 ns bucket 67633).
        for v in h.iter_log(1024, 2.0) {
            if v.count_since_last_iteration() > 0 {
                total += v.count_since_last_iteration();
                let level = v.value_iterated_to() + 1;
                buckets.push((h.highest_equivalent(level) / 1000, total));
            }
        }
        c.out.map(buckets.len());
        for (usec, n) in buckets {
            c.out.int(usec as i64);
            c.out.int(n as i64);
        }
    }
    Ok(())
}

/// LATENCY HELP
fn latency_help(c: &mut Ctx, _: &[Bytes]) -> CmdResult {
    help_lines(
        c,
        &[
            "LATENCY <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
            "DOCTOR",
            "    Return a human readable latency analysis report.",
            "GRAPH <event>",
            "    Return an ASCII latency graph for the <event> class.",
            "HISTORY <event>",
            "    Return time-latency samples for the <event> class.",
            "LATEST",
            "    Return the latest latency samples for all events.",
            "RESET [<event> ...]",
            "    Reset latency data of one or more <event> classes.",
            "    (default: reset all data for all event classes)",
            "HISTOGRAM [COMMAND ...]",
            "    Return a cumulative distribution of latencies in the format of a histogram for the specified command names.",
            "    If no commands are specified then all histograms are replied.",
            "HELP",
            "    Prints this help.",
        ],
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jemalloc_classes() {
        let cases = [
            (1, 8),
            (8, 8),
            (9, 16),
            (25, 32),
            (104, 112),
            (129, 160),
            (207, 224),
            (2880, 3072),
            (4096, 4096),
            (4097, 5120),
        ];
        for (n, want) in cases {
            assert_eq!(je(n), want, "{n}");
        }
    }

    /// Numbers from MEMORY USAGE on redis-server 7.0.15 (key + value).
    #[test]
    fn usage_matches_redis_for_small_values() {
        let key = |k: &[u8]| sds(k.len()) + DICT_ENTRY;
        assert_eq!(key(b"m") + value_size(&Value::str(b"hello"), 5), 64);
        assert_eq!(key(b"n") + value_size(&Value::str(b"12345"), 5), 48);
        let big = vec![b'a'; 100];
        assert_eq!(key(b"big") + value_size(&Value::str(&big), 5), 160);
    }
}
