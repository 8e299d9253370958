//! RDB persistence of the whole keyspace: the snapshot writer SAVE,
//! SHUTDOWN and DEBUG RELOAD use (and BGSAVE can reuse from its own
//! thread), and loading at start-up.
//!
//! Files are written to a temporary name in `dir`, fsynced and renamed over
//! `dir/dbfilename`, so a crash mid-save leaves the previous snapshot.

use crate::core::clock::now_ms;
use crate::core::config::Sanitize;
use crate::state::client::Client;
use crate::state::State;
use std::io::{self, Write};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Duration;
use storage::rdb::{self, Limits, LoadSummary, SaveOpts};
use storage::Db;
use tracing::{info, warn};
// BGSAVE is in its own file; its API is persistence's.
pub use crate::state::bgsave::*;

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
pub(super) fn key_delay_step(us: i64) -> Duration {
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
    let used = crate::core::os::rss_bytes();
    w.header(REDIS_VER, now_ms() / 1000, used)?;
    for code in function_codes(st) {
        w.function(code)?;
    }
    let meta = access_meta(st);
    for (i, db) in st.shard.dbs.iter().enumerate() {
        write_db(&mut w, i, db, meta, key_delay)?;
    }
    w.finish()
}

/// An RDB of the function libraries alone (`redis-cli --functions-rdb`).
pub fn write_functions<W: Write>(st: &State, out: W) -> io::Result<W> {
    let mut w = rdb::Writer::new(out, save_opts(st, false));
    w.header(REDIS_VER, now_ms() / 1000, crate::core::os::rss_bytes())?;
    for code in function_codes(st) {
        w.function(code)?;
    }
    w.finish()
}

/// A file fsynced every 4 MB written while `on` (`rdb-save-incremental-fsync`,
/// `aof-rewrite-incremental-fsync`): a large save then leaves the kernel no
/// large flush at its end, which would stall other writers to the disk.
pub struct SyncEvery {
    file: std::fs::File,
    on: bool,
    unsynced: usize,
}

const AUTOSYNC_BYTES: usize = 4 << 20;

impl SyncEvery {
    pub fn new(file: std::fs::File, on: bool) -> SyncEvery {
        SyncEvery {
            file,
            on,
            unsynced: 0,
        }
    }

    /// The file, fsynced.
    pub fn synced(w: io::BufWriter<SyncEvery>) -> io::Result<()> {
        w.into_inner().map_err(|e| e.into_error())?.file.sync_all()
    }
}

impl Write for SyncEvery {
    fn write(&mut self, b: &[u8]) -> io::Result<usize> {
        let n = self.file.write(b)?;
        self.unsynced += n;
        if self.on && self.unsynced >= AUTOSYNC_BYTES {
            self.file.sync_data()?;
            self.unsynced = 0;
        }
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.file.flush()
    }
}

/// Rewrites the RDB image at `path` as commands, in place (through a
/// second temporary file, fsynced).
pub(super) fn as_commands(path: &std::path::Path, timestamp: bool, sync: bool) -> io::Result<()> {
    let data = std::fs::read(path)?;
    let tmp = path.with_extension("cmds");
    let res = (|| {
        let f = SyncEvery::new(std::fs::File::create(&tmp)?, sync);
        let w = io::BufWriter::with_capacity(1 << 16, f);
        let w =
            storage::aofcmd::from_rdb(&data, now_ms(), timestamp, w).map_err(io::Error::other)?;
        SyncEvery::synced(w)?;
        std::fs::rename(&tmp, path)
    })();
    if res.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    res
}

/// The function libraries' code, saved with the keys as Redis 7.0 does.
pub(super) fn function_codes(st: &State) -> impl Iterator<Item = &[u8]> {
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
        let f = SyncEvery::new(
            std::fs::File::create(&tmp)?,
            st.cfg.rdb_save_incremental_fsync,
        );
        let w = io::BufWriter::with_capacity(1 << 16, f);
        // A synchronous save honours the delay too, as Redis's.
        SyncEvery::synced(write_snapshot_delayed(
            st,
            w,
            false,
            st.cfg.rdb_key_save_delay,
        )?)?;
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
    load_dbs(&mut st.shard.dbs, &mut st.engine, input, &opts, None)
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
    /// Where a load counts its blobs as sanitized: only under
    /// `sanitize-dump-payload yes` does Redis deep-check a file (its
    /// own at start-up or DEBUG RELOAD, an AOF's base, a master's RDB).
    sanitizations: Option<Arc<AtomicU64>>,
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
        sanitizations: (st.cfg.sanitize_dump_payload == Sanitize::Yes)
            .then(|| st.stats.sanitizations.clone()),
    }
}

/// Whether Redis would deep-check a RESTORE payload from `cl`, and so
/// count its blobs in `dump_payload_sanitizations`. cinnabar checks every
/// payload in full whatever this says. Under `clients` Redis trusts its
/// master's stream, the AOF being loaded, and users flagged
/// `skip-sanitize-payload`; a script's calls are its caller's.
pub fn restore_sanitizes(st: &State, cl: &Client) -> bool {
    match st.cfg.sanitize_dump_payload {
        Sanitize::No => false,
        Sanitize::Yes => true,
        Sanitize::Clients => {
            let skips = st
                .acl
                .user(cl.user.slot)
                .is_some_and(|u| u.sanitize == Some(false));
            !cl.peer.master && !st.aof.loading && !skips
        }
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
            sanitizations: opts.sanitizations.as_deref(),
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
    /// A load from a file: clients wait, unanswered, until it has loaded
    /// `loading-process-events-interval-bytes` (Redis serves no event
    /// before that), so a small dataset loads unseen. A load from the
    /// master's socket answers -LOADING meanwhile.
    pub from_file: bool,
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
            from_file: true,
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
    sanitizations: Option<&'a AtomicU64>,
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

    fn blobs(&mut self, n: u64) {
        if let Some(s) = self.sanitizations {
            s.fetch_add(n, Relaxed);
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
        crate::state::evict::set_vm_memory(eng.vm_memory());
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

#[cfg(test)]
mod tests {
    use super::*;

    /// 9 MB written: fsynced at 4 and 8 MB when on, never when off.
    #[test]
    fn incremental_fsync_every_4_mb() {
        for on in [true, false] {
            let path = std::env::temp_dir().join(format!("syncevery-{}-{on}", std::process::id()));
            let mut w = SyncEvery::new(std::fs::File::create(&path).unwrap(), on);
            for _ in 0..144 {
                w.write_all(&[0u8; 64 << 10]).unwrap();
            }
            let left = if on { 1 << 20 } else { 9 << 20 };
            assert_eq!(w.unsynced, left);
            std::fs::remove_file(&path).unwrap();
        }
    }
}
