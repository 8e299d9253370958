//! RDB persistence of the whole keyspace: the snapshot writer SAVE,
//! SHUTDOWN and DEBUG RELOAD use (and BGSAVE can reuse from its own
//! thread), and loading at start-up.
//!
//! Files are written to a temporary name in `dir`, fsynced and renamed over
//! `dir/dbfilename`, so a crash mid-save leaves the previous snapshot.

use crate::state::{now_ms, State};
use std::io::{self, Write};
use std::path::PathBuf;
use std::time::Instant;
use storage::rdb::{self, Limits, LoadSummary, SaveOpts};
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

pub fn save_opts(st: &State) -> SaveOpts {
    SaveOpts {
        compression: st.cfg.flag("rdbcompression"),
        checksum: st.cfg.flag("rdbchecksum"),
        list_fill: st.tun.list_fill,
    }
}

/// `dir/dbfilename`.
pub fn rdb_path(st: &State) -> PathBuf {
    PathBuf::from(st.cfg.str("dir")).join(st.cfg.str("dbfilename"))
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
    let p = st.cfg.str("maxmemory-policy");
    if p.contains("lfu") {
        AccessMeta::Lfu
    } else if p.contains("lru") {
        AccessMeta::Lru
    } else {
        AccessMeta::None
    }
}

/// Writes the keys of one database (a no-op for an empty one).
pub fn write_db<W: Write>(
    w: &mut rdb::Writer<W>,
    index: usize,
    db: &Db,
    meta: AccessMeta,
) -> io::Result<()> {
    if db.is_empty() {
        return Ok(());
    }
    w.select_db(index, db.len(), db.expires.len())?;
    for (k, v) in db.keys.iter() {
        let (idle, freq) = match meta {
            AccessMeta::None => (None, None),
            AccessMeta::Lru => (db.idle_ms(k).map(|ms| ms / 1000), None),
            AccessMeta::Lfu => (None, db.freq(k)),
        };
        w.key(k, v, db.expire_at(k), idle, freq)?;
    }
    Ok(())
}

/// Serializes every database to `out` as one RDB file.
pub fn write_snapshot<W: Write>(st: &State, out: W) -> io::Result<W> {
    let mut w = rdb::Writer::new(out, save_opts(st));
    let used = crate::cmd::server::rss_bytes();
    w.header(REDIS_VER, now_ms() / 1000, used)?;
    let meta = access_meta(st);
    for (i, db) in st.dbs.iter().enumerate() {
        write_db(&mut w, i, db, meta)?;
    }
    w.finish()
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
        let f = write_snapshot(st, io::BufWriter::with_capacity(1 << 16, f))?;
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
    match save_to(st, &path) {
        Ok(()) => {
            info!("DB saved on disk");
            st.dirty = 0;
            st.lastsave = now_ms() / 1000;
            Ok(())
        }
        Err(e) => {
            warn!(
                "Failed opening the temp RDB file temp-{}.rdb (in server root dir {}) for saving: {e}",
                std::process::id(),
                st.cfg.str("dir")
            );
            Err(e)
        }
    }
}

/// Loads `data` into `st.dbs` (normally empty); a key already present is
/// an error, as in Redis.
pub fn load_bytes(st: &mut State, data: &[u8]) -> Result<LoadSummary, rdb::LoadError> {
    load_bytes_mode(st, data, false)
}

/// As [`load_bytes`]; with `merge` the file's version of a key already
/// present replaces it (DEBUG RELOAD MERGE).
pub fn load_bytes_mode(
    st: &mut State,
    data: &[u8],
    merge: bool,
) -> Result<LoadSummary, rdb::LoadError> {
    let lim = limits(st);
    let verify = st.cfg.flag("rdbchecksum");
    let now = now_ms();
    let ndbs = st.dbs.len();
    let dbs = &mut st.dbs;
    let sum = rdb::load(data, &lim, now, verify, |k| {
        if k.db >= ndbs {
            return Err(format!(
                "the file has database {} but the server is configured with {ndbs} databases",
                k.db
            ));
        }
        let db = &mut dbs[k.db];
        if merge {
            db.remove(&k.key);
        } else if db.contains(&k.key) {
            return Err(format!(
                "duplicated key '{}' in DB {}",
                String::from_utf8_lossy(&k.key),
                k.db
            ));
        }
        db.set_clock(now);
        db.add(&k.key, k.value);
        if let Some(t) = k.expire_ms {
            db.set_expire(&k.key, t);
        }
        if k.idle_s.is_some() || k.freq.is_some() {
            db.set_access(&k.key, k.idle_s, k.freq);
        }
        Ok(())
    });
    sum
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

/// Loads `dir/dbfilename` if it exists, logging as Redis does. An error
/// names the problem and its byte offset; the server must not start.
pub fn load_at_startup(st: &mut State) -> Result<(), String> {
    // With the AOF on, it alone is the dataset.
    if st.cfg.flag("appendonly") {
        return crate::aof::load_at_startup(st);
    }
    st.aof.ready = true;
    let path = rdb_path(st);
    let data = match std::fs::read(&path) {
        Ok(d) => d,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(format!("Fatal error loading the DB: {e}. Exiting.")),
    };
    let start = Instant::now();
    match load_bytes(st, &data) {
        Ok(sum) => {
            for (k, v) in &sum.aux {
                if k == b"redis-ver" {
                    info!(
                        "Loading RDB produced by version {}",
                        String::from_utf8_lossy(v)
                    );
                }
            }
            info!(
                "Done loading RDB, keys loaded: {}, keys expired: {}.",
                sum.keys, sum.expired
            );
            info!(
                "DB loaded from disk: {:.3} seconds",
                start.elapsed().as_secs_f64()
            );
            Ok(())
        }
        Err(e) => Err(format!(
            "Fatal error loading the DB ({}): {}. Exiting.",
            path.display(),
            describe(&e, &data)
        )),
    }
}

/// Whether SHUTDOWN (or SIGTERM/SIGINT) should save: SAVE forces it,
/// NOSAVE prevents it, otherwise only when save points are configured.
pub fn shutdown_saves(st: &State, save: Option<bool>) -> bool {
    save.unwrap_or_else(|| !st.cfg.str("save").trim().is_empty())
}
