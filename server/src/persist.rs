//! RDB persistence of the whole keyspace: the snapshot writer SAVE,
//! SHUTDOWN and DEBUG RELOAD use (and BGSAVE can reuse from its own
//! thread), and loading at start-up.
//!
//! Files are written to a temporary name in `dir`, fsynced and renamed over
//! `dir/dbfilename`, so a crash mid-save leaves the previous snapshot.

use crate::state::{now_ms, Shared, State};
use std::io::{self, Write};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};
use storage::rdb::{self, Limits, LoadSummary, SaveOpts};
use storage::snapshot::{self, KeyMeta};
use storage::Db;
use tracing::{info, warn};

/// The `redis-ver` we record: the version clients see in INFO.
pub const REDIS_VER: &str = "7.0.15";

pub fn limits(st: &State) -> Limits {
    Limits {
        hash: st.tun.hash_limits,
        zset: st.tun.zset_limits,
        list_fill: st.tun.list_fill,
        set_max_intset: st.tun.set_max_intset,
    }
}

/// How to write an RDB file (`aof_base`: as the base of the AOF).
pub fn save_opts(st: &State, aof_base: bool) -> SaveOpts {
    SaveOpts {
        compression: st.cfg.rdbcompression,
        checksum: st.cfg.rdbchecksum,
        list_fill: st.tun.list_fill,
        aof_base,
        // An AOF base has no place in the replication history.
        repl: if aof_base {
            None
        } else {
            st.repl.save_info(&st.replid)
        },
    }
}

/// `dir/dbfilename`.
pub fn rdb_path(st: &State) -> PathBuf {
    PathBuf::from(&st.cfg.dir).join(&st.cfg.dbfilename)
}

/// Which access metadata the eviction policy wants saved with each key.
#[derive(Clone, Copy)]
pub enum AccessMeta {
    None,
    Lru,
    Lfu,
}

impl AccessMeta {
    pub fn is_lfu(self) -> bool {
        matches!(self, AccessMeta::Lfu)
    }
}

pub fn access_meta(st: &State) -> AccessMeta {
    let p = st.cfg.maxmemory_policy;
    if p.lfu() {
        AccessMeta::Lfu
    } else if p.lru() {
        AccessMeta::Lru
    } else {
        AccessMeta::None
    }
}

/// Writes the keys of one database (a no-op for an empty one), waiting
/// `key_delay` µs after each (`rdb-key-save-delay`).
fn write_db<W: Write>(
    w: &mut rdb::Writer<W>,
    index: usize,
    db: &Db,
    meta: AccessMeta,
    key_delay: i64,
) -> io::Result<()> {
    if db.is_empty() {
        return Ok(());
    }
    w.select_db(index, db.len(), db.expires_len())?;
    for (k, v) in db.keys().iter() {
        let (idle, freq) = match meta {
            AccessMeta::None => (None, None),
            AccessMeta::Lru => (db.idle_ms(k).map(|ms| ms / 1000), None),
            AccessMeta::Lfu => (None, db.freq(k)),
        };
        w.key(k, v, db.expire_at(k), idle, freq)?;
        if key_delay != 0 {
            std::thread::sleep(key_delay_step(key_delay));
        }
    }
    Ok(())
}

/// The pause `rdb-key-save-delay` asks for after a key (a negative value
/// means 1 µs).
fn key_delay_step(us: i64) -> Duration {
    Duration::from_micros(us.max(1) as u64)
}

/// Serializes every database to `out` as one RDB file.
pub fn write_snapshot<W: Write>(st: &State, out: W, aof_base: bool) -> io::Result<W> {
    write_snapshot_delayed(st, out, aof_base, 0)
}

fn write_snapshot_delayed<W: Write>(
    st: &State,
    out: W,
    aof_base: bool,
    key_delay: i64,
) -> io::Result<W> {
    let mut w = rdb::Writer::new(out, save_opts(st, aof_base));
    let used = crate::os::rss_bytes();
    w.header(REDIS_VER, now_ms() / 1000, used)?;
    for code in function_codes(st) {
        w.function(code)?;
    }
    let meta = access_meta(st);
    for (i, db) in st.dbs.iter().enumerate() {
        write_db(&mut w, i, db, meta, key_delay)?;
    }
    w.finish()
}

/// An RDB of the function libraries alone (`redis-cli --functions-rdb`).
pub fn write_functions<W: Write>(st: &State, out: W) -> io::Result<W> {
    let mut w = rdb::Writer::new(out, save_opts(st, false));
    w.header(REDIS_VER, now_ms() / 1000, crate::os::rss_bytes())?;
    for code in function_codes(st) {
        w.function(code)?;
    }
    w.finish()
}

/// Rewrites the RDB image at `path` as commands, in place (through a
/// second temporary file, fsynced).
fn as_commands(path: &std::path::Path, timestamp: bool) -> io::Result<()> {
    let data = std::fs::read(path)?;
    let tmp = path.with_extension("cmds");
    let res = (|| {
        let w = io::BufWriter::with_capacity(1 << 16, std::fs::File::create(&tmp)?);
        let w =
            storage::aofcmd::from_rdb(&data, now_ms(), timestamp, w).map_err(io::Error::other)?;
        w.into_inner().map_err(|e| e.into_error())?.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if res.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    res
}

/// The function libraries' code, saved with the keys as Redis 7.0 does.
fn function_codes(st: &State) -> impl Iterator<Item = &[u8]> {
    st.engine
        .iter()
        .flat_map(|e| e.libraries.values())
        .map(|l| &l.code[..])
}

/// Writes `st` to `path` through a temporary file: write, fsync, rename,
/// fsync the directory.
pub fn save_to(st: &State, path: &std::path::Path) -> io::Result<()> {
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("."));
    let tmp = dir.join(format!("temp-{}.rdb", std::process::id()));
    let res = (|| {
        let f = std::fs::File::create(&tmp)?;
        let w = io::BufWriter::with_capacity(1 << 16, f);
        // A synchronous save honours the delay too, as Redis's.
        let f = write_snapshot_delayed(st, w, false, st.cfg.rdb_key_save_delay)?;
        let f = f.into_inner().map_err(|e| e.into_error())?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)?;
        if let Ok(d) = std::fs::File::open(&dir) {
            let _ = d.sync_all();
        }
        Ok(())
    })();
    if res.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    res
}

/// SAVE: the synchronous save, with its bookkeeping (dirty counter,
/// LASTSAVE) and Redis's log lines.
pub fn save(st: &mut State) -> io::Result<()> {
    let path = rdb_path(st);
    st.rdb.saves += 1;
    match save_to(st, &path) {
        Ok(()) => {
            info!("DB saved on disk");
            st.dirty = 0;
            st.lastsave = now_ms() / 1000;
            st.rdb.last_bgsave_ok = true;
            Ok(())
        }
        Err(e) => {
            warn!(
                "Failed opening the temp RDB file temp-{}.rdb (in server root dir {}) for saving: {e}",
                std::process::id(),
                st.cfg.dir
            );
            Err(e)
        }
    }
}

/// Loads `input` into `st.dbs`: a key already present is an error, as in
/// Redis, unless `merge` (DEBUG RELOAD MERGE) lets the file's version
/// replace it.
pub fn load_here(
    st: &mut State,
    input: rdb::Input,
    merge: bool,
) -> Result<LoadSummary, rdb::LoadError> {
    let opts = load_opts(st, merge);
    load_dbs(&mut st.dbs, &mut st.engine, input, &opts, None)
}

/// What a load takes from the configuration, read before it starts (the
/// start-up load runs without the lock).
pub struct LoadOpts {
    lim: Limits,
    verify: bool,
    merge: bool,
    key_delay: i64,
    script_run: Arc<scripting::RunFlags>,
    replica: bool,
}

impl LoadOpts {
    /// For a load beside the live dataset (a replica's): the libraries it
    /// finds compile in an interpreter of their own, whose runs must not
    /// touch the flags of the scripts clients run meanwhile.
    pub fn apart(mut self) -> LoadOpts {
        self.script_run = Arc::default();
        self
    }
}

pub fn load_opts(st: &State, merge: bool) -> LoadOpts {
    LoadOpts {
        lim: limits(st),
        verify: st.cfg.rdbchecksum && !st.skip_checksum_validation,
        merge,
        key_delay: st.cfg.key_load_delay,
        script_run: st.script_run.clone(),
        replica: st.repl.master.is_some(),
    }
}

/// Loads an RDB image into `dbs` (its function libraries into `engine`),
/// reporting its progress to `progress`.
pub fn load_dbs(
    dbs: &mut [Db],
    engine: &mut Option<scripting::Engine>,
    input: rdb::Input,
    opts: &LoadOpts,
    progress: Option<&LoadProgress>,
) -> Result<LoadSummary, rdb::LoadError> {
    let now = now_ms();
    // A replica keeps keys already expired: its master's DELs remove them.
    let cutoff = if opts.replica { i64::MIN } else { now };
    rdb::load_input(
        input,
        &opts.lim,
        cutoff,
        opts.verify,
        Loader {
            dbs,
            engine,
            script_run: &opts.script_run,
            merge: opts.merge,
            now,
            key_delay: opts.key_delay,
            keys: 0,
            progress,
        },
    )
}

/// A load in progress (at start-up, or of a master's RDB): INFO
/// persistence shows it, and the gate answers -LOADING to the commands
/// that cannot run meanwhile.
pub struct Loading {
    pub start_s: i64,
    pub total_bytes: u64,
    pub progress: Arc<LoadProgress>,
    /// A replica's `async_loading`: the new dataset loads beside the old,
    /// which clients go on using; only commands flagged
    /// `no_async_loading` wait.
    pub is_async: bool,
}

/// What the loader, which runs without the lock, has got to.
#[derive(Default)]
pub struct LoadProgress {
    pub loaded_bytes: AtomicU64,
    /// `used-mem` from the RDB's header.
    pub rdb_used_mem: AtomicU64,
}

impl Loading {
    pub fn new(total_bytes: u64) -> Loading {
        Loading {
            start_s: now_ms() / 1000,
            total_bytes,
            progress: Arc::default(),
            is_async: false,
        }
    }

    /// INFO persistence's `loading_*` fields, with Redis's estimate.
    pub fn info(&self) -> Vec<String> {
        let loaded = self.progress.loaded_bytes.load(Relaxed);
        let perc = loaded as f64 / (self.total_bytes + 1) as f64 * 100.0;
        let elapsed = now_ms() / 1000 - self.start_s;
        let eta = if elapsed <= 0 {
            1
        } else {
            (elapsed as u64 * self.total_bytes / (loaded + 1)) as i64 - elapsed
        };
        vec![
            format!("loading_start_time:{}", self.start_s),
            format!("loading_total_bytes:{}", self.total_bytes),
            format!(
                "loading_rdb_used_mem:{}",
                self.progress.rdb_used_mem.load(Relaxed)
            ),
            format!("loading_loaded_bytes:{loaded}"),
            format!("loading_loaded_perc:{perc:.2}"),
            format!("loading_eta_seconds:{eta}"),
        ]
    }
}

/// Puts loaded keys into the databases.
struct Loader<'a> {
    dbs: &'a mut [Db],
    engine: &'a mut Option<scripting::Engine>,
    script_run: &'a Arc<scripting::RunFlags>,
    /// DEBUG RELOAD MERGE: a key already present is replaced.
    merge: bool,
    now: i64,
    /// `key-load-delay`: µs to sleep after each key; a negative value
    /// sleeps 1 µs once per that many keys.
    key_delay: i64,
    keys: u64,
    progress: Option<&'a LoadProgress>,
}

impl rdb::Sink for Loader<'_> {
    fn progress(&mut self, offset: usize) {
        if let Some(p) = self.progress {
            p.loaded_bytes.store(offset as u64, Relaxed);
        }
    }

    fn aux(&mut self, key: &[u8], value: &[u8]) {
        if let (Some(p), b"used-mem") = (self.progress, key) {
            let n = std::str::from_utf8(value).ok().and_then(|v| v.parse().ok());
            p.rdb_used_mem.store(n.unwrap_or(0), Relaxed);
        }
    }

    fn empty_key(&mut self, key: &[u8]) {
        warn!(
            "rdbLoadObject skipping empty key: {}",
            String::from_utf8_lossy(key)
        );
    }

    fn key(&mut self, k: rdb::Loaded) -> Result<(), String> {
        self.keys += 1;
        match self.key_delay {
            0 => {}
            d if d > 0 => std::thread::sleep(Duration::from_micros(d as u64)),
            d if self.keys.is_multiple_of(d.unsigned_abs()) => {
                std::thread::sleep(Duration::from_micros(1))
            }
            _ => {}
        }
        let ndbs = self.dbs.len();
        let Some(db) = self.dbs.get_mut(k.db) else {
            return Err(format!(
                "the file has database {} but the server is configured with {ndbs} databases",
                k.db
            ));
        };
        if self.merge {
            db.remove(&k.key);
        } else if db.contains(&k.key) {
            return Err(format!(
                "duplicated key '{}' in DB {}",
                String::from_utf8_lossy(&k.key),
                k.db
            ));
        }
        db.set_clock(self.now);
        db.add(&k.key, k.value);
        if let Some(t) = k.expire_ms {
            db.set_expire(&k.key, t);
        }
        if k.idle_s.is_some() || k.freq.is_some() {
            db.set_access(&k.key, k.idle_s, k.freq);
        }
        Ok(())
    }

    /// A library already loaded is an error, as in Redis, unless MERGE
    /// replaces it.
    fn function(&mut self, code: Vec<u8>) -> Result<(), String> {
        let eng = match self.engine {
            Some(e) => e,
            None => self.engine.insert(
                scripting::Engine::new(self.script_run.clone())
                    .map_err(|e| format!("Lua initialization failed: {e}"))?,
            ),
        };
        eng.load_library(&bytes::Bytes::from(code), self.merge)?;
        crate::evict::set_vm_memory(eng.vm_memory());
        Ok(())
    }

    fn resize(&mut self, db: usize, keys: u64, expires: u64) {
        if let Some(d) = self.dbs.get_mut(db) {
            let n = |x: u64| usize::try_from(x).unwrap_or(usize::MAX);
            d.reserve(n(keys), n(expires));
        }
    }
}

/// The error for the log: what and where, and whether the checksum agrees
/// the file is damaged (a flipped byte usually shows up as a parse error
/// first).
pub fn describe(e: &rdb::LoadError, data: &[u8]) -> String {
    let mut s = e.to_string();
    if data.len() > 8 && !e.msg.contains("checksum") && !e.msg.contains("end of file") {
        let (body, tail) = data.split_at(data.len() - 8);
        let mut a = [0u8; 8];
        a.copy_from_slice(tail);
        let stored = u64::from_le_bytes(a);
        if stored != 0 && rdb::crc64::crc64(0, body) != stored {
            s.push_str(" (the file's checksum does not match either)");
        }
    }
    s
}

/// Whether SHUTDOWN (or SIGTERM/SIGINT) should save: SAVE forces it,
/// NOSAVE prevents it, otherwise only when save points are configured.
pub fn shutdown_saves(st: &State, save: Option<bool>) -> bool {
    save.unwrap_or_else(|| !st.cfg.save.is_empty())
}

/// What must happen before the process exits, as Redis's: not while the
/// first AOF is being written, a running BGSAVE killed, the final save
/// (`save`: SAVE/NOSAVE, else when save points are set). False, with the
/// reason logged, when the server must stay up; `force` ignores errors.
pub fn prepare_shutdown(st: &mut State, save: Option<bool>, force: bool) -> bool {
    const FAILED: &str =
        "Errors trying to shut down the server. Check the logs for more information.";
    if st.aof.wait_rewrite && st.aof.rewrite.is_some() {
        if !force {
            warn!("Writing initial AOF, can't exit.");
            warn!("{FAILED}");
            return false;
        }
        warn!("Writing initial AOF. Exit anyway.");
    }
    if bgsave_in_progress(st) {
        // As Redis kills its saving child: the final save (if any) is
        // synchronous and complete.
        warn!("There is a child saving an .rdb. Killing it!");
        abort_bgsave(st);
    }
    // Nothing to save while the dataset is not all in memory yet.
    if st.loading.is_none() && shutdown_saves(st, save) {
        info!("Saving the final RDB snapshot before exiting.");
        if self::save(st).is_err() {
            if !force {
                // Exiting would lose the dataset.
                warn!("Error trying to save the DB, can't exit.");
                warn!("{FAILED}");
                return false;
            }
            warn!("Error trying to save the DB. Exit anyway.");
        }
    }
    true
}

// ------------------------------------------------------------------ BGSAVE

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
    for db in st.dbs.iter_mut() {
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

/// Whether write commands (and PING) are refused with [`MISCONF`]: the
/// last background save failed, save points are configured and
/// `stop-writes-on-bgsave-error` is on.
pub fn writes_denied(st: &State) -> bool {
    !st.rdb.last_bgsave_ok && st.cfg.stop_writes_on_bgsave_error && !st.cfg.save.is_empty()
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
    let mark = crate::state::random_hex40();
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
    let file = match target {
        Target::Replicas { .. } => None,
        _ => Some(io::BufWriter::with_capacity(
            WRITE_BUF,
            std::fs::File::create(&tmp)?,
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
        .header(REDIS_VER, now_ms() / 1000, crate::os::rss_bytes())
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
    for (i, db) in st.dbs.iter_mut().enumerate() {
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
    };
    let spawned = std::thread::Builder::new()
        .name("bgsave".into())
        .spawn(move || job.run(file, header, bufs));
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
    }
}

/// (keys saved, keys in the snapshot) of the running save.
pub fn bgsave_progress(st: &State) -> (u64, u64) {
    if !child_active(st) {
        return (0, 0);
    }
    st.dbs
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
    let n = st.dbs.len();
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
    for db in st.dbs.iter_mut() {
        emit(db, out, pos);
    }
    // The next database with keys left to walk. Not simply the next index:
    // SWAPDB moves whole databases, captures included, so one not walked
    // yet may land at an index already passed.
    let unwalked = |st: &State, from: usize| {
        (0..n)
            .map(|i| (from + i) % n)
            .find(|&i| st.dbs[i].snapshot().is_some_and(|c| !c.walk_done()))
    };
    let mut complete = false;
    loop {
        let Some(i) = unwalked(st, pos.walking) else {
            complete = true;
            break;
        };
        pos.walking = i;
        let db = &mut st.dbs[i];
        db.snapshot_step(max_keys, max_bytes);
        emit(db, out, pos);
        if out.bytes.len() >= max_bytes || start.elapsed() >= budget {
            break;
        }
    }
    if complete {
        // Every key is saved; records captured since were taken above
        // and none can come any more.
        for db in st.dbs.iter_mut() {
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
}

impl Job {
    fn run(self, file: Option<io::BufWriter<std::fs::File>>, header: Vec<u8>, mut bufs: Bufs) {
        let mut res = match (file, &self.target) {
            (Some(f), _) => self
                .write(f, header, &mut bufs)
                .and_then(|w| w.into_inner().map_err(|e| e.into_error()))
                .and_then(|f| f.sync_all()),
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
            res = as_commands(&self.tmp, timestamps);
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
                for db in st.dbs.iter_mut() {
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

impl Dest for io::BufWriter<std::fs::File> {}

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
    use crate::config::Config;
    use storage::Value;

    /// Runs a snapshot of `st` slice by slice (one walk step each), calling
    /// `between` after every slice; returns the keys per db in the file.
    fn snapshot_keys(st: &mut State, mut between: impl FnMut(&mut State, usize)) -> Vec<usize> {
        let mut file = b"REDIS0010".to_vec();
        st.rdb.epoch += 1;
        let epoch = st.rdb.epoch;
        for (i, db) in st.dbs.iter_mut().enumerate() {
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
        assert!(st.dbs.iter().all(|d| d.snapshot().is_none()));
        file.push(rdb::OP_EOF);
        file.extend_from_slice(&[0; 8]);
        let mut per_db = vec![0; st.dbs.len()];
        rdb::load(&file, &Limits::default(), 0, false, |k| {
            per_db[k.db] += 1;
            Ok(())
        })
        .unwrap();
        per_db
    }

    fn fill(st: &mut State, db: usize, n: usize) {
        for i in 0..n {
            st.dbs[db].add(format!("k{i}").as_bytes(), Value::str(b"v"));
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
                st.dbs.swap(1, 9);
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
            for db in st.dbs.iter_mut() {
                drop(db.take());
            }
            fill(st, 5, 7);
        });
        assert_eq!((got[0], got[2], got[5]), (3000, 500, 0));
        assert_eq!(st.dbs[5].len(), 7);
    }
}
