//! The counters INFO, the commandstats and the slowlog report.

use bytes::Bytes;
use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::AtomicU64;
use std::sync::Arc;

#[derive(Default, Clone)]
pub struct CmdStat {
    pub calls: u64,
    pub usec: u64,
    pub rejected: u64,
    pub failed: u64,
    /// Durations in ns (`latency-tracking`), as Redis's per-command
    /// histogram: 1 ns to 1 s, two significant digits.
    pub latency: Option<Box<hdrhistogram::Histogram<u64>>>,
}

impl Stats {
    /// The statistics of the command in `slot` (`Command::slot`).
    pub fn cmd_mut(&mut self, slot: usize) -> &mut CmdStat {
        if slot >= self.cmd.len() {
            self.cmd.resize_with(slot + 1, CmdStat::default);
        }
        &mut self.cmd[slot]
    }

    /// Takes the clients' buffers into the current second's slot: the
    /// input each read since the last sample, the output each holds now.
    pub fn sample_client_buffers(&mut self, sec: i64, input: usize, output: usize) {
        let slot = &mut self.client_peaks[sec.rem_euclid(PEAK_SECONDS as i64) as usize];
        if slot.0 != sec {
            *slot = (sec, 0, 0);
        }
        slot.1 = slot.1.max(input);
        slot.2 = slot.2.max(output);
    }

    /// The largest input and output buffers of the last eight seconds
    /// (INFO's `client_recent_max_*`).
    pub fn recent_client_buffers(&self, sec: i64) -> (usize, usize) {
        self.client_peaks
            .iter()
            .filter(|s| sec - s.0 < PEAK_SECONDS as i64)
            .fold((0, 0), |(i, o), s| (i.max(s.1), o.max(s.2)))
    }
}

/// How far back `client_recent_max_*` look, as Redis.
const PEAK_SECONDS: usize = 8;

/// Adds a call of `dur` microseconds to the command's latency histogram.
pub fn record_latency(stat: &mut CmdStat, dur: u64) {
    // Auto-resizing: the buckets (8 bytes each, written when made) reach
    // only as high as the command's slowest call, as they are made (not a
    // fixed 24 KB a command up to the 1 s cap).
    let h = stat
        .latency
        .get_or_insert_with(|| Box::new(hdrhistogram::Histogram::new(2).expect("sigfig")));
    // `record` grows the buckets; `saturating_record` would clamp to them.
    let ns = (dur * 1000).clamp(1, 1_000_000_000);
    if h.record(ns).is_err() {
        h.saturating_record(ns);
    }
}

#[derive(Default)]
pub struct Stats {
    pub total_connections: u64,
    /// Snapshot jobs started (BGSAVE, AOF rewrites, full syncs): what
    /// Redis counts as its forks.
    pub total_forks: u64,
    pub rejected_connections: u64,
    pub total_commands: u64,
    pub net_output_bytes: u64,
    /// The replication stream (not the RDB, as Redis 7.0): read from the
    /// master, written to replicas. Left out of the two above.
    pub net_repl_input_bytes: u64,
    pub net_repl_output_bytes: u64,
    pub expired_keys: u64,
    pub expired_stale_perc: f64,
    pub expire_cycle_cpu_ms: u64,
    /// Active expiry cycles that stopped at their time budget.
    pub expired_time_cap_reached: u64,
    pub evicted_keys: u64,
    pub evicted_clients: u64,
    pub total_error_replies: u64,
    pub unexpected_error_replies: u64,
    /// Blobs counted as Redis's deep checks (`dump_payload_sanitizations`),
    /// shared with loads, which run without the lock.
    pub sanitizations: Arc<AtomicU64>,
    /// Reply buffers the clients cron resized (`core::replybuf`).
    pub reply_buffer_shrinks: u64,
    pub reply_buffer_expands: u64,
    /// Per second of the last eight, as (second, input, output): the
    /// largest client buffers the cron sampled.
    pub client_peaks: [(i64, usize, usize); PEAK_SECONDS],
    /// By `Command::slot`, grown as commands are first counted.
    pub cmd: Vec<CmdStat>,
    pub errors: BTreeMap<String, u64>,
    /// Samples of the counters for the instantaneous_* fields, taken by
    /// the cron.
    pub samples: VecDeque<Sample>,
}

/// The counters behind the instantaneous_* fields at one moment.
pub struct Sample {
    pub ms: i64,
    pub commands: u64,
    pub input: u64,
    pub output: u64,
    pub repl_input: u64,
    pub repl_output: u64,
}

pub struct SlowEntry {
    pub id: u64,
    pub time: i64,
    pub duration_us: i64,
    pub args: Vec<Bytes>,
    pub addr: String,
    pub name: Bytes,
}
