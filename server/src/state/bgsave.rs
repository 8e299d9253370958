//! BGSAVE: the fork-less snapshot engine. A saver thread walks the
//! databases a slice at a time under the lock (writes meanwhile capture
//! the keys not walked yet), writing the RDB to a file or to diskless
//! replicas' sockets; the completion hook renames it, or installs an AOF
//! rewrite's base. Reached as `crate::state::persist`'s.

use crate::core::clock::now_ms;
use crate::state::persist::{
    access_meta, as_commands, function_codes, key_delay_step, rdb_path, save_opts, AccessMeta,
    SyncEvery, REDIS_VER,
};
use crate::state::{Shared, State};
use std::io::{self, Write};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};
use storage::rdb;
use storage::snapshot::{self, KeyMeta};
use storage::Db;
use tracing::{info, warn};

/// Seconds after a failed background save before a save point or a
/// scheduled BGSAVE tries again (Redis's `CONFIG_BGSAVE_RETRY_DELAY`).
const RETRY_DELAY_S: i64 = 5;
/// One slice of the background walk holds the lock at most this long…
const SLICE: Duration = Duration::from_micros(300);
/// …or until this many bytes are ready to write: few while the lock is
/// free, as the slice's buffers are most of an idle save's extra memory;
/// up to the most while clients wait for it, as each slice then waits its
/// turn, and a walk that lags lets writes capture ever more keys.
const SLICE_BYTES: std::ops::RangeInclusive<usize> = (4 << 10)..=(64 << 10);
/// Slices that found clients waiting, net of those that found none,
/// before the slices grow.
const BUSY_RUN: u32 = 8;
/// A save's file is written in pieces of this size.
const WRITE_BUF: usize = 16 << 10;

/// RDB persistence status: the running background save and what INFO
/// persistence reports.
pub struct RdbState {
    /// The epoch of the last snapshot started (see `storage::snapshot`).
    pub epoch: u32,
    pub running: Option<Running>,
    /// BGSAVE SCHEDULE (or BGSAVE inside MULTI): start when possible.
    pub scheduled: bool,
    pub last_bgsave_ok: bool,
    pub last_bgsave_time_s: i64,
    /// When the last background save was tried (unix s).
    pub last_try_s: i64,
    /// SAVE and BGSAVE attempts (`rdb_saves`).
    pub saves: u64,
    pub last_load_keys_loaded: u64,
    pub last_load_keys_expired: u64,
}

impl Default for RdbState {
    fn default() -> Self {
        RdbState {
            epoch: 0,
            running: None,
            scheduled: false,
            last_bgsave_ok: true,
            last_bgsave_time_s: -1,
            last_try_s: 0,
            saves: 0,
            last_load_keys_loaded: 0,
            last_load_keys_expired: 0,
        }
    }
}

/// A background save in progress.
pub struct Running {
    pub started: Instant,
    pub started_s: i64,
    /// `dirty` when it started: what a successful save makes persistent.
    pub dirty_before: u64,
    child: Child,
}

/// The snapshot engine's running job, whichever its purpose (BGSAVE or
/// the base of an AOF rewrite): at most one runs at a time, as Redis runs
/// at most one child.
pub struct Child {
    /// Set when the job is abandoned; the saver thread stops at its next
    /// slice and does not call the completion hook.
    abort: Arc<AtomicBool>,
    tmp: PathBuf,
}

impl Child {
    /// Abandons the job (SHUTDOWN, turning the AOF off): the databases
    /// stop capturing and the temporary file is removed.
    pub fn kill(self, st: &mut State) {
        self.abort.store(true, Relaxed);
        end_captures(st);
        let _ = std::fs::remove_file(&self.tmp);
    }
}

fn end_captures(st: &mut State) {
    for db in st.shard.dbs.iter_mut() {
        db.snapshot_end();
    }
}

/// What a finished snapshot becomes (the completion hook the saver thread
/// runs under the lock).
pub enum Target {
    /// BGSAVE: renamed over `path` (in `dir`).
    Rdb { path: PathBuf, dir: PathBuf },
    /// BGREWRITEAOF: the new base of the AOF; `done` installs it. With
    /// `commands` the image is rewritten as commands first
    /// (`aof-use-rdb-preamble no`).
    AofBase {
        done: fn(&mut State, io::Result<()>, &std::path::Path) -> AfterDone,
        commands: bool,
        /// `aof-timestamp-enabled`: commands start with `#TS:`.
        timestamps: bool,
    },
    /// Diskless replication: streamed to the sockets of replicas `ids`,
    /// between `$EOF:<mark>` and the mark, with no file.
    Replicas { ids: Vec<u64>, mark: String },
}

/// What the completion hook leaves to do once the lock is released.
#[derive(Default)]
pub struct AfterDone {
    /// A directory whose entries changed (fsynced).
    pub sync_dir: Option<PathBuf>,
    /// Files no longer needed (AOF history files).
    pub remove: Vec<PathBuf>,
}

/// The MISCONF error of write commands after a failed background save.
pub const MISCONF: &str = "MISCONF Redis is configured to save RDB snapshots, but it's currently unable to persist to disk. Commands that may modify the data set are disabled, because this instance is configured to report errors during writes if RDB snapshotting fails (stop-writes-on-bgsave-error option). Please check the Redis logs for details about the RDB error.";

/// Why write commands (and PING) are refused now, as the MISCONF error
/// they get: the last background save failed (with save points
/// configured and `stop-writes-on-bgsave-error` on), or the AOF's last
/// write or fsync failed.
pub fn writes_denied(st: &State) -> Option<String> {
    if !st.rdb.last_bgsave_ok && st.cfg.stop_writes_on_bgsave_error && !st.cfg.save.is_empty() {
        return Some(MISCONF.to_string());
    }
    if !st.aof.on && !st.aof.wait_rewrite {
        return None;
    }
    let e = crate::state::aof::last_error(&st.aof)?;
    Some(format!("MISCONF Errors writing to the AOF file: {e}"))
}

pub fn bgsave_in_progress(st: &State) -> bool {
    st.rdb.running.is_some()
}

/// Whether the snapshot engine is busy (a BGSAVE or an AOF rewrite): what
/// Redis calls an active child process.
pub fn child_active(st: &State) -> bool {
    st.rdb.running.is_some() || st.aof.rewrite.is_some()
}

fn key_meta(st: &State) -> KeyMeta {
    match access_meta(st) {
        AccessMeta::None => KeyMeta::None,
        AccessMeta::Lru => KeyMeta::Lru,
        AccessMeta::Lfu => KeyMeta::Lfu,
    }
}

fn bg_tmp_name(dir: &std::path::Path) -> PathBuf {
    dir.join(format!("temp-{}-bg.rdb", std::process::id()))
}

/// Starts a background save: opens the temporary file, raises the
/// snapshot epoch in every database (O(1) each) and starts the saver
/// thread. A failure to open the file is reported as Redis reports its
/// child's: the save "started" and failed at once.
pub fn bgsave_start(st: &mut State) {
    debug_assert!(!child_active(st));
    let now_s = now_ms() / 1000;
    st.rdb.saves += 1;
    st.rdb.last_try_s = now_s;
    let path = rdb_path(st);
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("."));
    let tmp = bg_tmp_name(&dir);
    let dirty_before = st.dirty;
    match snapshot_start(st, tmp.clone(), Target::Rdb { path, dir }) {
        Ok(child) => {
            st.rdb.running = Some(Running {
                started: Instant::now(),
                started_s: now_s,
                dirty_before,
                child,
            });
            crate::state::aof::sync_policy(st);
            info!("Background saving started");
        }
        Err(e) => {
            warn!(
                "Failed opening the temp RDB file {} (in server root dir {}) for saving: {e}",
                tmp.file_name().unwrap_or_default().to_string_lossy(),
                st.cfg.dir
            );
            warn!("Background saving error");
            st.rdb.last_bgsave_ok = false;
            st.rdb.last_bgsave_time_s = 0;
        }
    }
}

/// Starts a diskless sync: a background save streamed to replicas `ids`
/// (their sockets are its target, as Redis's). False if it cannot start.
pub fn bgsave_start_replicas(st: &mut State, ids: Vec<u64>) -> bool {
    debug_assert!(!child_active(st));
    let mark = crate::core::random::random_hex40();
    let dirty_before = st.dirty;
    let tmp = PathBuf::new();
    match snapshot_start(st, tmp, Target::Replicas { ids, mark }) {
        Ok(child) => {
            st.rdb.running = Some(Running {
                started: Instant::now(),
                started_s: now_ms() / 1000,
                dirty_before,
                child,
            });
            crate::state::aof::sync_policy(st);
            true
        }
        Err(e) => {
            warn!("Can't start the diskless transfer: {e}");
            false
        }
    }
}

/// Starts the snapshot engine: creates `tmp`, raises the snapshot epoch in
/// every database (the image is the dataset at this moment, in this lock
/// hold) and starts the saver thread, which streams the image to `tmp`,
/// fsyncs it and then, under the lock, runs `target`'s completion hook.
pub fn snapshot_start(st: &mut State, tmp: PathBuf, target: Target) -> io::Result<Child> {
    let sync = match target {
        Target::Replicas { .. } => None,
        Target::Rdb { .. } => Some(st.cfg.rdb_save_incremental_fsync),
        Target::AofBase { .. } => Some(st.cfg.aof_rewrite_incremental_fsync),
    };
    let file = match sync {
        None => None,
        Some(on) => Some(io::BufWriter::with_capacity(
            WRITE_BUF,
            SyncEvery::new(std::fs::File::create(&tmp)?, on),
        )),
    };
    let Some(shared) = st.shared.upgrade() else {
        // No server around the state (unit tests): nothing to run on.
        drop(file);
        let _ = std::fs::remove_file(&tmp);
        return Err(io::Error::other("no server"));
    };
    let opts = save_opts(st, matches!(target, Target::AofBase { .. }));
    let mut head = rdb::Writer::new(Vec::new(), opts);
    let header = head
        .header(REDIS_VER, now_ms() / 1000, crate::core::os::rss_bytes())
        .and_then(|_| function_codes(st).try_for_each(|code| head.function(code)))
        .and_then(|_| head.finish())
        .map(|mut v| {
            // Without the EOF byte and checksum `finish` added.
            v.truncate(v.len() - 9);
            v
        })
        .unwrap_or_default();
    st.rdb.epoch += 1;
    let (epoch, meta) = (st.rdb.epoch, key_meta(st));
    for (i, db) in st.shard.dbs.iter_mut().enumerate() {
        db.snapshot_begin(i, epoch, opts, meta);
    }
    let (ids, eof_line) = match &target {
        Target::Replicas { ids, mark } => (ids.clone(), format!("$EOF:{mark}\r\n").into_bytes()),
        _ => Default::default(),
    };
    let bufs = Bufs {
        records: Records {
            bytes: Vec::with_capacity(2 * SLICE_BYTES.start()),
            plain: Vec::with_capacity(SLICE_BYTES.start() / 32),
        },
        room: Vec::with_capacity(2 * SLICE_BYTES.start()),
        ids,
        eof_line,
    };
    let abort = Arc::new(AtomicBool::new(false));
    let job = Job {
        shared,
        abort: abort.clone(),
        tmp: tmp.clone(),
        target,
        checksum: opts.checksum,
        key_delay: st.cfg.rdb_key_save_delay,
        aof_sync: st.cfg.aof_rewrite_incremental_fsync,
    };
    use crate::core::affinity::{pin, Role};
    let role = match job.target {
        Target::AofBase { .. } => Role::AofRewrite,
        Target::Rdb { .. } | Target::Replicas { .. } => Role::Bgsave,
    };
    let spawned = std::thread::Builder::new()
        .name("bgsave".into())
        .spawn(move || {
            pin(role);
            job.run(file, header, bufs)
        });
    let child = Child { abort, tmp };
    if let Err(e) = spawned {
        child.kill(st);
        return Err(e);
    }
    st.stats.total_forks += 1;
    Ok(child)
}

/// Abandons a running background save (SHUTDOWN): the databases stop
/// capturing, the saver thread stops at its next slice and the temporary
/// file is removed.
pub fn abort_bgsave(st: &mut State) {
    if let Some(r) = st.rdb.running.take() {
        r.child.kill(st);
        crate::state::aof::sync_policy(st);
    }
}

/// (keys saved, keys in the snapshot) of the running save.
pub fn bgsave_progress(st: &State) -> (u64, u64) {
    if !child_active(st) {
        return (0, 0);
    }
    st.shard
        .dbs
        .iter()
        .filter_map(|d| d.snapshot())
        .fold((0, 0), |(a, b), c| {
            (a + c.keys_saved, b + c.keys_total as u64)
        })
}

/// Where the saver's stream is: the database its last records were for,
/// and which databases got their RESIZEDB.
#[derive(Default)]
struct StreamPos {
    db: Option<usize>,
    resized: Vec<bool>,
    walking: usize,
}

/// The saver's buffers, made by the thread that starts it: the saver then
/// allocates nothing while it walks (a thread's first allocation takes
/// allocator pages of its own, part of a sync's extra memory, which a
/// fork's copied pages are compared with). One buffer for every slice,
/// one for it compressed; a diskless sync's replicas and first line.
struct Bufs {
    records: Records,
    room: Vec<u8>,
    ids: Vec<u64>,
    eof_line: Vec<u8>,
}

/// A slice's records, their strings not compressed yet (see
/// `snapshot::compress_marked`).
#[derive(Default)]
struct Records {
    bytes: Vec<u8>,
    plain: Vec<snapshot::Plain>,
}

impl Records {
    /// The records as the file has them, compressed into `room` if need be.
    fn encoded<'a>(&'a self, room: &'a mut Vec<u8>) -> &'a [u8] {
        if self.plain.is_empty() {
            return &self.bytes;
        }
        snapshot::compress_marked(&self.bytes, &self.plain, room);
        room
    }
}

/// One slice under the lock: the records writes captured, then the walk
/// for up to [`SLICE`]. Returns the bytes and whether the snapshot is
/// complete (then every database has stopped capturing).
fn slice(
    st: &mut State,
    pos: &mut StreamPos,
    budget: Duration,
    (max_keys, max_bytes): (usize, usize),
    out: &mut Records,
) -> bool {
    let start = Instant::now();
    out.bytes.clear();
    out.plain.clear();
    let n = st.shard.dbs.len();
    if pos.resized.len() < n {
        pos.resized.resize(n, false);
    }
    let emit = |db: &mut Db, out: &mut Records, pos: &mut StreamPos| {
        let resize = db.snapshot().map(|c| (c.keys_total, c.expires_total));
        if let Some((index, bytes, plain)) = db.snapshot_output() {
            if pos.db != Some(index) {
                let first = !pos.resized[index];
                pos.resized[index] = true;
                snapshot::select_db(&mut out.bytes, index, resize.filter(|_| first));
                pos.db = Some(index);
            }
            let base = out.bytes.len();
            out.plain.extend(plain.drain(..).map(|p| p.shifted(base)));
            out.bytes.extend_from_slice(bytes);
            bytes.clear();
        }
    };
    for db in st.shard.dbs.iter_mut() {
        emit(db, out, pos);
    }
    // The next database with keys left to walk. Not simply the next index:
    // SWAPDB moves whole databases, captures included, so one not walked
    // yet may land at an index already passed.
    let unwalked = |st: &State, from: usize| {
        (0..n)
            .map(|i| (from + i) % n)
            .find(|&i| st.shard.dbs[i].snapshot().is_some_and(|c| !c.walk_done()))
    };
    let mut complete = false;
    loop {
        let Some(i) = unwalked(st, pos.walking) else {
            complete = true;
            break;
        };
        pos.walking = i;
        let db = &mut st.shard.dbs[i];
        db.snapshot_step(max_keys, max_bytes);
        emit(db, out, pos);
        if out.bytes.len() >= max_bytes || start.elapsed() >= budget {
            break;
        }
    }
    if complete {
        // Every key is saved; records captured since were taken above
        // and none can come any more.
        for db in st.shard.dbs.iter_mut() {
            emit(db, out, pos);
            db.snapshot_end();
        }
    }
    complete
}

/// BGSAVE's completion hook: the file replaces `dir/dbfilename`, with
/// Redis's bookkeeping.
fn bgsave_done(
    st: &mut State,
    res: io::Result<()>,
    tmp: &std::path::Path,
    path: &std::path::Path,
    dir: &std::path::Path,
) -> AfterDone {
    let Some(r) = st.rdb.running.take() else {
        return AfterDone::default();
    };
    crate::state::aof::sync_policy(st);
    let res = res.and_then(|()| std::fs::rename(tmp, path));
    st.rdb.last_bgsave_time_s = r.started.elapsed().as_secs() as i64;
    let ok = res.is_ok();
    match res {
        Ok(()) => {
            info!("Background saving terminated with success");
            st.dirty = st.dirty.saturating_sub(r.dirty_before);
            st.lastsave = now_ms() / 1000;
            st.rdb.last_bgsave_ok = true;
        }
        Err(e) => {
            warn!("Write error saving DB on disk: {e}");
            warn!("Background saving error");
            let _ = std::fs::remove_file(tmp);
            st.rdb.last_bgsave_ok = false;
            end_captures(st);
        }
    }
    let file = ok.then(|| std::fs::File::open(path).ok()).flatten();
    st.repl_bgsave_done(ok, file);
    AfterDone {
        sync_dir: Some(dir.to_path_buf()),
        remove: vec![],
    }
}

struct Job {
    shared: Arc<Shared>,
    abort: Arc<AtomicBool>,
    tmp: PathBuf,
    target: Target,
    checksum: bool,
    /// `rdb-key-save-delay` when the job started (µs per key), as a
    /// forked child keeps its parent's configuration.
    key_delay: i64,
    /// `aof-rewrite-incremental-fsync` when the job started.
    aof_sync: bool,
}

impl Job {
    fn run(self, file: Option<io::BufWriter<SyncEvery>>, header: Vec<u8>, mut bufs: Bufs) {
        let mut res = match (file, &self.target) {
            (Some(f), _) => self.write(f, header, &mut bufs).and_then(SyncEvery::synced),
            (None, Target::Replicas { mark, .. }) => self.stream(mark, header, &mut bufs),
            (None, _) => Err(io::Error::other("no file")),
        };
        if let (
            Ok(()),
            &Target::AofBase {
                commands: true,
                timestamps,
                ..
            },
        ) = (&res, &self.target)
        {
            res = as_commands(&self.tmp, timestamps, self.aof_sync);
        }
        if self.abort.load(Relaxed) {
            return;
        }
        let mut st = self.shared.state.lock();
        // SHUTDOWN may have abandoned the job while the file was synced.
        if self.abort.load(Relaxed) {
            return;
        }
        if res.is_err() {
            let _ = std::fs::remove_file(&self.tmp);
            end_captures(&mut st);
        }
        let after = match &self.target {
            Target::Rdb { path, dir } => bgsave_done(&mut st, res, &self.tmp, path, dir),
            Target::AofBase { done, .. } => done(&mut st, res, &self.tmp),
            Target::Replicas { .. } => replicas_done(&mut st, res),
        };
        drop(st);
        if let Some(d) = after.sync_dir.and_then(|d| std::fs::File::open(d).ok()) {
            let _ = d.sync_all();
        }
        for f in after.remove {
            let _ = std::fs::remove_file(f);
        }
    }

    /// `rdb-key-save-delay` after `keys` keys: that many µs each (a
    /// negative value, 1 µs), in steps that notice the job being abandoned
    /// or its destination gone.
    fn delay(&self, keys: u64, w: &mut impl Dest) -> io::Result<()> {
        if self.key_delay == 0 {
            return Ok(());
        }
        let mut left = key_delay_step(self.key_delay) * keys.clamp(1, u32::MAX as u64) as u32;
        while !left.is_zero() && !self.abort.load(Relaxed) {
            let step = left.min(Duration::from_millis(10));
            std::thread::sleep(step);
            left -= step;
            w.still_there()?;
        }
        Ok(())
    }

    /// Diskless: the image between `$EOF:<mark>` and the mark, to the
    /// replicas' connections.
    fn stream(&self, mark: &str, header: Vec<u8>, bufs: &mut Bufs) -> io::Result<()> {
        // Unbuffered: each slice goes out as it is made, and a replica
        // gone is noticed at the next one.
        let ids = std::mem::take(&mut bufs.ids);
        let mut w = ReplicaSink { job: self, ids };
        w.write_all(&bufs.eof_line)?;
        let mut w = self.write(w, header, bufs)?;
        w.write_all(mark.as_bytes())?;
        w.flush()
    }

    /// Streams the snapshot to `w`: slices under the lock, writes outside
    /// it (which is also the backpressure: the walk does not run ahead of
    /// the disk, or of the slowest replica, by more than one slice), then
    /// EOF and checksum.
    fn write<W: Dest>(&self, mut w: W, header: Vec<u8>, bufs: &mut Bufs) -> io::Result<W> {
        let mut crc = 0u64;
        let mut put = |w: &mut W, b: &[u8]| {
            if self.checksum {
                crc = rdb::crc64::crc64(crc, b);
            }
            w.write_all(b)
        };
        put(&mut w, &header)?;
        let mut pos = StreamPos::default();
        let Bufs { records, room, .. } = bufs;
        let (mut max_bytes, mut busy_run) = (*SLICE_BYTES.start(), 0);
        let (mut slices, mut longest, mut held) = (0u64, Duration::ZERO, Duration::ZERO);
        let mut keys_saved = 0;
        loop {
            let mut st = self.shared.state.lock();
            let t = Instant::now();
            if self.abort.load(Relaxed) {
                return Err(io::Error::other("aborted"));
            }
            // With a key delay, one key a slice and the sleep outside the lock.
            let complete = match self.key_delay {
                0 => slice(&mut st, &mut pos, SLICE, (256, max_bytes), records),
                _ => slice(&mut st, &mut pos, Duration::ZERO, (1, max_bytes), records),
            };
            // The delay is per key written, as a forked child's: keys that
            // writes captured before the walk reached them count too (a
            // test's "this save takes N seconds" must hold while it writes).
            let emitted = match self.key_delay {
                0 => 0,
                _ => {
                    let now: u64 = st
                        .shard
                        .dbs
                        .iter()
                        .filter_map(|d| d.snapshot())
                        .map(|c| c.keys_saved)
                        .sum();
                    now.saturating_sub(std::mem::replace(&mut keys_saved, now))
                }
            };
            // Clients waiting for the lock go first.
            parking_lot::MutexGuard::unlock_fair(st);
            let d = t.elapsed();
            let busy = self.shared.state.is_locked();
            let c = Instant::now();
            let bytes = records.encoded(room);
            if busy {
                // Clients are busy: give them at least as long as the slice
                // took, so the walk uses at most half of the lock's time
                // (compressing already gave them some).
                std::thread::sleep(d.saturating_sub(c.elapsed()).min(SLICE * 2));
            }
            // Larger slices only under a load that lasts (a client's
            // passing command would grow the buffers for good), and back to
            // the smallest only once it has gone: a load of many clients
            // leaves the lock free for a moment now and then.
            busy_run = match busy {
                true => (busy_run + 1).min(2 * BUSY_RUN),
                false => busy_run.saturating_sub(1),
            };
            max_bytes = match busy_run {
                0 => *SLICE_BYTES.start(),
                1..BUSY_RUN => max_bytes,
                _ => (max_bytes * 2).min(*SLICE_BYTES.end()),
            };
            slices += 1;
            held += d;
            longest = longest.max(d);
            if complete {
                info!(
                    "Snapshot walk: {slices} slices, {:.1} ms under the lock in all, longest {:.2} ms",
                    held.as_secs_f64() * 1000.0,
                    longest.as_secs_f64() * 1000.0
                );
            }
            if let Err(e) = put(&mut w, bytes) {
                // Stop capturing at once: the save has failed.
                let mut st = self.shared.state.lock();
                for db in st.shard.dbs.iter_mut() {
                    db.snapshot_end();
                }
                return Err(e);
            }
            self.delay(emitted, &mut w)?;
            if complete {
                break;
            }
        }
        put(&mut w, &[rdb::OP_EOF])?;
        let crc = if self.checksum { crc } else { 0 };
        w.write_all(&crc.to_le_bytes())?;
        Ok(w)
    }
}

/// Where a snapshot's bytes go.
trait Dest: Write {
    /// An error once nobody is left to take the rest (a diskless sync's
    /// replicas all gone), noticed while `rdb-key-save-delay` holds the
    /// writes back.
    fn still_there(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Dest for io::BufWriter<SyncEvery> {}

/// Where a diskless snapshot's bytes go: the connections of the replicas
/// it was started for, paced by the slowest. It fails once none is left,
/// which ends the snapshot (Redis kills its child then).
struct ReplicaSink<'a> {
    job: &'a Job,
    ids: Vec<u64>,
}

impl Write for ReplicaSink<'_> {
    fn write(&mut self, b: &[u8]) -> io::Result<usize> {
        use crate::state::RdbPush;
        loop {
            let mut st = self.job.shared.state.lock();
            if self.job.abort.load(Relaxed) {
                return Err(io::Error::other("aborted"));
            }
            match st.repl_rdb_push(&mut self.ids, b, crate::state::RDB_WINDOW) {
                RdbPush::Sent => return Ok(b.len()),
                RdbPush::Full => drop(st),
                RdbPush::Gone => return Err(no_replica_left()),
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Dest for ReplicaSink<'_> {
    fn still_there(&mut self) -> io::Result<()> {
        let st = self.job.shared.state.lock();
        match st.rdb_replicas_left(&mut self.ids) {
            true => Ok(()),
            false => Err(no_replica_left()),
        }
    }
}

/// A diskless snapshot's end when its replicas are all gone, logged as
/// Redis logs killing its child then.
fn no_replica_left() -> io::Error {
    warn!("Diskless rdb transfer, last replica dropped, killing fork child.");
    io::Error::other("no replica left")
}

/// A diskless sync's completion hook.
fn replicas_done(st: &mut State, res: io::Result<()>) -> AfterDone {
    if st.rdb.running.take().is_none() {
        return AfterDone::default();
    }
    crate::state::aof::sync_policy(st);
    let ok = res.is_ok();
    if ok {
        info!("Background RDB transfer terminated with success");
    } else {
        warn!("Background transfer error");
        end_captures(st);
    }
    st.repl_bgsave_done(ok, None);
    AfterDone::default()
}

/// The cron's part: a scheduled BGSAVE, then the save points ("after N
/// seconds with at least M changes"), retrying a failed save only after
/// [`RETRY_DELAY_S`].
pub fn cron(st: &mut State) {
    if child_active(st) {
        return;
    }
    let now_s = now_ms() / 1000;
    let may_retry = st.rdb.last_bgsave_ok || now_s - st.rdb.last_try_s > RETRY_DELAY_S;
    if st.rdb.scheduled && may_retry {
        st.rdb.scheduled = false;
        bgsave_start(st);
        return;
    }
    if !may_retry {
        return;
    }
    for &(secs, changes) in &st.cfg.save {
        if st.dirty >= changes && now_s - st.lastsave > secs {
            info!("{changes} changes in {secs} seconds. Saving...");
            bgsave_start(st);
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::config::Config;
    use storage::rdb::{Limits, SaveOpts};
    use storage::Value;

    /// Runs a snapshot of `st` slice by slice (one walk step each), calling
    /// `between` after every slice; returns the keys per db in the file.
    fn snapshot_keys(st: &mut State, mut between: impl FnMut(&mut State, usize)) -> Vec<usize> {
        let mut file = b"REDIS0010".to_vec();
        st.rdb.epoch += 1;
        let epoch = st.rdb.epoch;
        for (i, db) in st.shard.dbs.iter_mut().enumerate() {
            db.snapshot_begin(i, epoch, SaveOpts::default(), KeyMeta::None);
        }
        let mut pos = StreamPos::default();
        let (mut records, mut room) = (Records::default(), Vec::new());
        loop {
            let complete = slice(st, &mut pos, Duration::ZERO, (256, 64 << 10), &mut records);
            file.extend_from_slice(records.encoded(&mut room));
            if complete {
                break;
            }
            between(st, pos.walking);
        }
        assert!(st.shard.dbs.iter().all(|d| d.snapshot().is_none()));
        file.push(rdb::OP_EOF);
        file.extend_from_slice(&[0; 8]);
        let mut per_db = vec![0; st.shard.dbs.len()];
        rdb::load(&file, &Limits::default(), 0, false, |k| {
            per_db[k.db] += 1;
            Ok(())
        })
        .unwrap();
        per_db
    }

    fn fill(st: &mut State, db: usize, n: usize) {
        for i in 0..n {
            st.shard.dbs[db].add(format!("k{i}").as_bytes(), Value::str(b"v"));
        }
    }

    #[test]
    fn swapdb_during_the_walk_loses_nothing() {
        let mut st = State::new(Config::default());
        fill(&mut st, 3, 2000);
        fill(&mut st, 9, 10);
        let mut swapped = false;
        let got = snapshot_keys(&mut st, |st, walking| {
            // While db 3 is walked, the unwalked db 9 moves below it.
            if walking == 3 && !swapped {
                st.shard.dbs.swap(1, 9);
                swapped = true;
            }
        });
        assert!(swapped);
        assert_eq!((got[3], got[9], got[1]), (2000, 10, 0));
    }

    #[test]
    fn flushall_during_the_walk_saves_the_rest_first() {
        let mut st = State::new(Config::default());
        fill(&mut st, 0, 3000);
        fill(&mut st, 2, 500);
        let got = snapshot_keys(&mut st, |st, _| {
            for db in st.shard.dbs.iter_mut() {
                drop(db.take());
            }
            fill(st, 5, 7);
        });
        assert_eq!((got[0], got[2], got[5]), (3000, 500, 0));
        assert_eq!(st.shard.dbs[5].len(), 7);
    }
}
