//! The append-only file, in Redis 7.0's multi-part layout.
//!
//! `dir/appenddirname/` holds a base file (`<appendfilename>.<n>.base.rdb`,
//! an RDB snapshot), incremental files (`<appendfilename>.<n>.incr.aof`,
//! commands in RESP) and the manifest naming them
//! (`file <name> seq <n> type b|i` lines).
//!
//! # What is written
//! The AOF is a consumer of the propagation stream (`crate::core::propagate`):
//! each finished unit (a top-level command with what it ran, in the forms
//! the commands chose) is written as it comes, a unit of more than one op
//! wrapped in MULTI/EXEC. `SELECT` is written when the database differs
//! from the last one written to the current file.
//!
//! # Writes and fsyncs
//! Units are serialized into `Aof::buf` under the state lock; the logical
//! offset grows with it. A connection whose batch logged something yields
//! before replying ([`wait_durable`]), so the other connections with
//! requests ready run their batches first, then [`Aof::make_durable`]
//! write(2)s the buffer
//! (and under `always` fsyncs it) under the lock: one write and one fsync
//! cover them all, as Redis writes and fsyncs once per event-loop round
//! from its main thread before replying. A crash of the process never
//! loses an acknowledged write. Under `everysec` the fsync thread ([`Io`])
//! fsyncs every second.
//!
//! # Rewrites
//! BGREWRITEAOF writes the new base with the BGSAVE snapshot engine
//! (`crate::state::persist`, serialize-before-overwrite, on the saver thread):
//! see [`rewrite_start`] and [`rewrite_done`].

use crate::core::clock::now_ms;
use crate::core::config::Fsync;
use crate::state::State;
use bytes::Bytes;
use std::fs::File;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};
use tracing::{info, warn};

mod files;
mod fsync;
mod rewrite;

pub use files::*;
pub use fsync::*;
pub use rewrite::*;

/// The AOF state under the lock.
#[derive(Default)]
pub struct Aof {
    /// Appending: every logged unit is written to `file`.
    pub on: bool,
    /// `appendonly yes` was set at run time and its first rewrite has not
    /// finished: INFO says enabled; writes are logged (to a temporary incr
    /// file) only while that rewrite runs.
    pub wait_rewrite: bool,
    /// Start-up loading is over; config changes may start or stop the AOF.
    pub ready: bool,
    pub loading: bool,
    /// DEBUG AOF-FLUSH-SLEEP: each write of the buffer waits this long
    /// first (µs), to test that replies never overtake it.
    pub flush_sleep_us: u64,
    pub policy: Fsync,
    /// Serialized units not yet written.
    pub buf: Vec<u8>,
    /// Bytes ever appended (the logical offsets).
    pub offset: u64,
    /// The logical offset handed to the kernel.
    pub written: u64,
    /// The logical offset fsynced by `make_durable` (`always`).
    pub synced: u64,
    /// No fsync now: no-appendfsync-on-rewrite while a snapshot runs.
    hold_fsync: bool,
    /// The file being appended to.
    pub file: Option<Arc<File>>,
    /// The last write(2) failed: with its error, as strerror words it.
    pub write_error: Option<String>,
    /// The database the last written command ran in.
    pub sel_db: Option<usize>,
    /// `aof-timestamp-enabled`: a `#TS:` line precedes a unit logged in a
    /// new second.
    pub timestamps: bool,
    /// The second of the last `#TS:` line written.
    pub cur_ts: i64,
    pub io: Option<Arc<Io>>,
    pub manifest: Manifest,
    pub base_size: u64,
    /// Bytes in the incr files the manifest lists.
    pub incr_size: u64,
    /// Bytes in the incr file being appended to.
    pub last_incr_size: u64,
    /// Size at the last rewrite (auto-aof-rewrite-percentage's reference).
    pub rewrite_base_size: u64,
    /// The background rewrite running, if any.
    pub rewrite: Option<Rewrite>,
    /// BGREWRITEAOF while another job ran (or inside MULTI): started by
    /// the cron when the snapshot engine is free.
    pub rewrite_scheduled: bool,
    /// Rewrites started (`aof_rewrites`).
    pub rewrites: u64,
    /// Duration of the last finished rewrite.
    pub last_rewrite_ms: Option<i64>,
    pub last_rewrite_failed: bool,
    pub rewrite_failures: u64,
    /// When the last rewrite failed (unix s), to space out retries.
    pub last_failure_s: i64,
}

/// A background rewrite in progress.
pub struct Rewrite {
    started: Instant,
    child: crate::state::persist::Child,
    /// Writes go to `temp-<appendfilename>.incr`, which the manifest
    /// lists only once the base is there (the AOF is being turned on).
    temp_incr: bool,
    /// The base is written as commands (`aof-use-rdb-preamble no` when
    /// the rewrite started).
    commands: bool,
}

fn b(s: &str) -> Bytes {
    Bytes::copy_from_slice(s.as_bytes())
}

fn num(n: i64) -> Bytes {
    Bytes::copy_from_slice(itoa::Buffer::new().format(n).as_bytes())
}

impl Aof {
    fn emit(&mut self, db: usize, args: &[Bytes]) {
        let before = self.buf.len();
        if self.sel_db != Some(db) {
            protocol::write_command(&mut self.buf, &[b("SELECT"), num(db as i64)]);
            self.sel_db = Some(db);
        }
        protocol::write_command(&mut self.buf, args);
        self.count(before);
    }

    fn count(&mut self, before: usize) {
        let n = (self.buf.len() - before) as u64;
        self.offset += n;
        self.incr_size += n;
        self.last_incr_size += n;
    }

    fn annotate_time(&mut self) {
        let now = crate::core::clock::now_ms() / 1000;
        if !self.timestamps || now == self.cur_ts {
            return;
        }
        self.cur_ts = now;
        let before = self.buf.len();
        self.buf.extend_from_slice(b"#TS:");
        self.buf
            .extend_from_slice(itoa::Buffer::new().format(now).as_bytes());
        self.buf.extend_from_slice(b"\r\n");
        self.count(before);
    }

    /// write(2)s the buffered units, under the state lock as Redis writes
    /// from its main thread: the bytes are in the kernel before any reply
    /// that depends on them is sent. What a failing write leaves is kept
    /// and retried at the next commit or cron tick.
    pub fn flush_buf(&mut self) {
        if self.buf.is_empty() {
            return;
        }
        if self.flush_sleep_us > 0 {
            std::thread::sleep(std::time::Duration::from_micros(self.flush_sleep_us));
        }
        let Some(f) = &self.file else {
            self.buf.clear();
            self.written = self.offset;
            return;
        };
        let mut done = 0;
        let mut failed = None;
        while done < self.buf.len() {
            match (&**f).write(&self.buf[done..]) {
                Ok(0) => {
                    failed = Some(io::Error::from(io::ErrorKind::WriteZero));
                    break;
                }
                Ok(n) => done += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    failed = Some(e);
                    break;
                }
            }
        }
        match failed {
            None => {
                if self.write_error.take().is_some() {
                    info!("AOF write error looks solved, Redis can write again.");
                }
                self.buf.clear();
                if self.buf.capacity() > 1 << 20 {
                    self.buf = Vec::new();
                }
            }
            Some(e) => {
                let text = crate::core::os::strerror(&e);
                if self.write_error.is_none() {
                    warn!("Error writing to the AOF file: {text}");
                }
                self.write_error = Some(text);
                self.buf.drain(..done);
            }
        }
        self.written += done as u64;
        if let Some(io) = &self.io {
            io.wrote(self.written);
        }
    }

    /// Ends a connection's batch: what its replies must wait for (see
    /// `wait_durable`), if it logged anything (or took replies others'
    /// commands produced for it) not yet durable.
    pub fn commit(&self, mark: u64, had_pending: bool) -> Option<Durable> {
        let logged = self.offset > mark || had_pending;
        let always = self.policy == Fsync::Always;
        let durable = if always { self.synced } else { self.written };
        (logged && durable < self.offset).then_some(Durable {
            offset: self.offset,
            // An fsync costs 0.1-1 ms: more rounds gather more batches
            // into each (measured at -c 50: 3 rounds take as many
            // fsyncs as Redis, 1 round 40% more).
            rounds: if always { 3 } else { 1 },
        })
    }

    /// Makes the log durable up to `offset` before the replies that depend
    /// on it go out: written to the kernel, and under `always` fsynced.
    /// Everything buffered goes in the same write and fsync.
    pub fn make_durable(&mut self, offset: u64) {
        if self.written < offset {
            self.flush_buf();
        }
        if self.policy != Fsync::Always || self.synced >= offset || self.hold_fsync {
            return;
        }
        let (Some(f), Some(io)) = (&self.file, &self.io) else {
            return;
        };
        match f.sync_data() {
            Ok(()) => {
                self.synced = self.written;
                io.fsync_errno.store(0, Ordering::Relaxed);
            }
            Err(e) => {
                warn!("Can't persist AOF for fsync error: {e}");
                io.fsync_errno.store(fsync::errno(&e), Ordering::Relaxed);
            }
        }
    }

    /// Starts appending to `f` (logical offsets continue).
    pub(crate) fn start_appending(&mut self, f: File) {
        let f = Arc::new(f);
        self.written = self.offset;
        self.synced = self.offset;
        self.io = Some(Io::start(f.clone(), self.policy, self.offset));
        self.file = Some(f);
        self.write_error = None;
        self.on = true;
        self.sel_db = None;
        self.last_incr_size = 0;
    }

    /// Continues in `f`: what is buffered goes to the old file first.
    fn switch(&mut self, f: File) {
        self.flush_buf();
        // Under `always` a batch waiting in make_durable may be in the old
        // file, which make_durable no longer sees.
        if self.policy == Fsync::Always {
            if let Some(old) = &self.file {
                let _ = old.sync_data();
            }
            self.synced = self.written;
        }
        let f = Arc::new(f);
        if let Some(io) = &self.io {
            io.switch(f.clone(), self.written);
        }
        self.file = Some(f);
        // The new file must say which database it starts in.
        self.sel_db = None;
        self.last_incr_size = 0;
    }

    /// Stops appending: what is buffered is written, then everything is
    /// fsynced.
    fn stop_appending(&mut self) {
        self.flush_buf();
        if let Some(io) = self.io.take() {
            io.stop();
        }
        self.file = None;
        self.on = false;
        self.sel_db = None;
    }
}

/// The AOF reads the propagation stream while it is appending (not while
/// it loads: replayed commands are not logged again).
impl crate::core::propagate::Consumer for Aof {
    fn wants(&self) -> bool {
        self.on && !self.loading
    }

    /// Writes a unit, wrapped in MULTI/EXEC if it has more than one op.
    fn feed(&mut self, ops: &crate::core::propagate::Unit) {
        let ops = crate::core::propagate::only(ops, crate::core::propagate::REPL_ONLY);
        if ops.is_empty() {
            return;
        }
        self.annotate_time();
        if ops.len() > 1 {
            self.emit(ops[0].0, &[b("MULTI")]);
            for (db, a) in ops.iter() {
                self.emit(*db, a);
            }
            let db = self.sel_db.unwrap_or(0);
            self.emit(db, &[b("EXEC")]);
        } else if let Some((db, a)) = ops.first() {
            self.emit(*db, a);
        }
    }
}

/// What a batch's replies wait for: the log durable up to `offset`.
pub struct Durable {
    offset: u64,
    /// Scheduler rounds to let pass before writing.
    rounds: u32,
}

/// Waits for the end of `rounds` event-loop rounds first, so the
/// connections with requests ready run their batches, and one write (one
/// fsync) then serves them all, as Redis writes once per round; then makes
/// the log durable.
pub async fn wait_durable(shared: &crate::state::Shared, d: Durable) {
    for _ in 0..d.rounds {
        crate::core::round::after().await;
    }
    shared.lock_eventually().await.aof.make_durable(d.offset);
}

/// Hands the fsync policy to the fsync thread and `make_durable`:
/// no-appendfsync-on-rewrite holds fsyncs back while the snapshot engine
/// runs (an AOF rewrite or a BGSAVE: Redis's active child), called when
/// either starts or ends.
pub fn sync_policy(st: &mut State) {
    let hold = crate::state::persist::child_active(st) && st.cfg.no_appendfsync_on_rewrite;
    st.aof.hold_fsync = hold;
    if let Some(io) = &st.aof.io {
        io.set_policy(st.aof.policy, hold);
    }
}

/// Stops appending (`appendonly no`): a running rewrite is abandoned, what
/// is buffered is written and fsynced.
pub fn stop(st: &mut State) {
    kill_rewrite(st);
    st.aof.stop_appending();
    st.aof.wait_rewrite = false;
    st.aof.rewrite_scheduled = false;
}

/// Shutdown: a running rewrite is abandoned and the AOF fsynced before
/// exiting.
pub fn shutdown(st: &mut State) {
    if st.aof.rewrite.is_some() {
        warn!("There is a child rewriting the AOF. Killing it!");
        kill_rewrite(st);
    }
    if st.aof.on {
        info!("Calling fsync() on the AOF file.");
        st.aof.stop_appending();
    }
}

/// Follows `appendonly` after CONFIG SET changed it (`in_exec`: inside
/// MULTI/EXEC, where the rewrite waits for the cron).
pub fn follow_appendonly(st: &mut State, in_exec: bool) {
    if !st.aof.ready {
        return;
    }
    let want = st.cfg.appendonly;
    let enabled = st.aof.on || st.aof.wait_rewrite;
    if want && !enabled {
        // As Redis: appending starts with a rewrite, whose base holds
        // the data written so far.
        st.aof.wait_rewrite = true;
        if crate::state::persist::child_active(st) {
            warn!("AOF was enabled but there is already another background operation. An AOF background was scheduled to start when possible.");
            st.aof.rewrite_scheduled = true;
        } else if in_exec || st.prop.pending() {
            warn!("AOF was enabled during a transaction. An AOF background was scheduled to start when possible.");
            st.aof.rewrite_scheduled = true;
        } else if rewrite_start(st).is_err() {
            warn!("Redis needs to enable the AOF but can't trigger a background AOF rewrite operation. Check the above logs for more info about the error.");
            st.aof.wait_rewrite = false;
        }
    } else if !want && enabled {
        stop(st);
    }
}

/// From the cron: writes what active expiry logged, starts a scheduled
/// rewrite and checks the automatic one.
pub fn cron(st: &mut State) {
    st.aof.flush_buf();
    if crate::state::persist::child_active(st) || st.prop.pending() {
        return;
    }
    let now_s = now_ms() / 1000;
    if st.aof.rewrite_failures > 0 && now_s - st.aof.last_failure_s < RETRY_DELAY_S {
        return;
    }
    if st.aof.rewrite_scheduled {
        let _ = rewrite_start(st);
        return;
    }
    if !st.aof.on || st.aof.wait_rewrite {
        return;
    }
    let pct = st.cfg.auto_aof_rewrite_percentage;
    let min = st.cfg.auto_aof_rewrite_min_size.max(0) as u64;
    let size = st.aof.base_size + st.aof.incr_size;
    if pct > 0 && size > min {
        let base = st.aof.rewrite_base_size.max(1);
        let growth = (size.saturating_sub(base)) * 100 / base;
        if growth >= pct as u64 {
            info!("Starting automatic rewriting of AOF on {}% growth", growth);
            let _ = rewrite_start(st);
        }
    }
}

/// The last write or fsync error, as strerror words it: while there is
/// one, writes are refused (`persist::writes_denied`).
pub fn last_error(a: &Aof) -> Option<String> {
    let errno =
        a.io.as_ref()
            .map_or(0, |io| io.fsync_errno.load(Ordering::Relaxed));
    a.write_error.clone().or_else(|| {
        (errno != 0).then(|| crate::core::os::strerror(&io::Error::from_raw_os_error(errno)))
    })
}

/// INFO persistence's aof_* fields.
pub fn info(st: &State) -> Vec<String> {
    let a = &st.aof;
    let enabled = a.on || a.wait_rewrite;
    let mut v = vec![
        format!("aof_enabled:{}", enabled as u8),
        format!("aof_rewrite_in_progress:{}", a.rewrite.is_some() as u8),
        format!("aof_rewrite_scheduled:{}", a.rewrite_scheduled as u8),
        format!(
            "aof_last_rewrite_time_sec:{}",
            a.last_rewrite_ms.map_or(-1, |ms| ms / 1000)
        ),
        format!(
            "aof_current_rewrite_time_sec:{}",
            a.rewrite
                .as_ref()
                .map_or(-1, |r| r.started.elapsed().as_secs() as i64)
        ),
        format!(
            "aof_last_bgrewrite_status:{}",
            if a.last_rewrite_failed { "err" } else { "ok" }
        ),
        format!("aof_rewrites:{}", a.rewrites),
        format!("aof_rewrites_consecutive_failures:{}", a.rewrite_failures),
        format!(
            "aof_last_write_status:{}",
            if last_error(a).is_none() { "ok" } else { "err" }
        ),
        "aof_last_cow_size:0".to_string(),
    ];
    if enabled {
        v.push(format!("aof_current_size:{}", a.base_size + a.incr_size));
        v.push(format!("aof_base_size:{}", a.rewrite_base_size));
        v.push(format!("aof_pending_rewrite:{}", a.rewrite_scheduled as u8));
        v.push(format!("aof_buffer_length:{}", a.buf.len()));
        let syncing =
            a.io.as_ref()
                .is_some_and(|io| io.syncing.load(Ordering::Relaxed));
        v.push(format!("aof_pending_bio_fsync:{}", syncing as u8));
        // Redis postpones a write while an fsync runs for over 2 s; here
        // writes never wait for the fsync thread.
        v.push("aof_delayed_fsync:0".to_string());
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resp_form() {
        let mut v = Vec::new();
        protocol::write_command(&mut v, &[b("SET"), b("k"), b("")]);
        assert_eq!(v, b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$0\r\n\r\n");
    }

    /// A unit of several ops is one transaction; SELECT only when the
    /// database changes.
    #[test]
    fn units_as_written() {
        use crate::core::propagate::Consumer;
        let mut a = Aof {
            on: true,
            ..Default::default()
        };
        a.feed(&[(0, &[b("SET"), b("a"), b("1")])]);
        a.feed(&[(0, &[b("INCR"), b("n")]), (1, &[b("DEL"), b("x")])]);
        let text = String::from_utf8_lossy(&a.buf).to_string();
        let words: Vec<&str> = text
            .split("\r\n")
            .filter(|w| !w.is_empty() && !w.starts_with(['*', '$']))
            .collect();
        assert_eq!(
            words.join(" "),
            "SELECT 0 SET a 1 MULTI INCR n SELECT 1 DEL x EXEC"
        );
    }

    /// One `#TS:` line per second, before the unit (and its SELECT).
    #[test]
    fn timestamp_annotation_once_a_second() {
        use crate::core::propagate::Consumer;
        let mut a = Aof {
            on: true,
            timestamps: true,
            ..Default::default()
        };
        a.feed(&[(0, &[b("SET"), b("a"), b("1")])]);
        a.feed(&[(0, &[b("SET"), b("b"), b("1")])]);
        let text = String::from_utf8_lossy(&a.buf).to_string();
        assert!(text.starts_with(&format!("#TS:{}\r\n*2\r\n$6\r\nSELECT", a.cur_ts)));
        assert_eq!(text.matches("#TS:").count(), 1);
        assert_eq!(a.offset, a.buf.len() as u64);
    }
}
