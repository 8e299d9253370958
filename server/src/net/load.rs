//! Start-up loading: the dataset comes from the AOF (`appendonly yes`) or
//! the RDB file. An AOF's files are loaded by `crate::cmd::replay`, which
//! runs their commands through the dispatcher; this is the orchestration.
//!
//! The server listens while it loads: the RDB is read into databases of
//! its own outside the lock, and an AOF's commands run under the lock,
//! which is let go every `loading-process-events-interval-bytes`. Clients
//! meanwhile get -LOADING for what cannot run (`State::loading`, the gate).

use crate::cmd::replay::{io_msg, listed, load_files, load_rdb, log_done, Hold};
use crate::core::propagate::Consumer;
use crate::state::aof::{aof_dir, create_incr, fname, open_append, write_manifest, Manifest};
use crate::state::persist::{describe, rdb_path, Loading};
use crate::state::{Shared, State};
use bytes::Bytes;
use parking_lot::MutexGuard;
use std::fs::File;
use std::io;
use std::path::Path;
use std::time::Instant;
use storage::rdb::Input;
use tracing::{info, warn};

/// Loads the dataset at start-up while clients are already connecting:
/// the AOF with `appendonly yes`, else `dir/dbfilename` if it exists,
/// logging as Redis does. An error names the problem and its byte offset;
/// the server must not start.
pub fn at_startup(shared: &Shared) -> Result<(), String> {
    let mut st = shared.state.lock();
    let res = if st.cfg.appendonly {
        // With the AOF on, it alone is the dataset.
        aof_at_startup(&mut st)
    } else {
        rdb_at_startup(&mut st)
    };
    // Set by the server before it let clients in.
    st.loading = None;
    // As Redis: history files a run with aof-disable-auto-gc left go now.
    if res.is_ok() {
        crate::state::aof::collect_history(&mut st);
    }
    res
}

fn rdb_at_startup(st: &mut MutexGuard<'_, State>) -> Result<(), String> {
    st.aof.ready = true;
    read_manifest(st);
    let path = rdb_path(st);
    let (mut file, len) = match File::open(&path).and_then(|f| Ok((f.metadata()?.len(), f))) {
        Ok((len, f)) => (f, len),
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(format!("Fatal error loading the DB: {e}. Exiting.")),
    };
    let start = Instant::now();
    let loading = Loading::new(len);
    let progress = loading.progress.clone();
    st.loading = Some(loading);
    match load_rdb(st, Input::file(&mut file), &progress) {
        Ok(sum) => {
            for (k, v) in &sum.aux {
                if k == b"redis-ver" {
                    info!(
                        "Loading RDB produced by version {}",
                        String::from_utf8_lossy(v)
                    );
                }
            }
            log_done(&sum);
            resume_replication(st, sum.aux.as_slice(), &sum.expired_keys);
            st.rdb.last_load_keys_loaded = sum.keys as u64;
            st.rdb.last_load_keys_expired = sum.expired as u64;
            info!(
                "DB loaded from disk: {:.3} seconds",
                start.elapsed().as_secs_f64()
            );
            Ok(())
        }
        // Redis's shape: the error, then its check-rdb report of the file.
        Err(e) => {
            warn!(
                "Internal error in RDB reading offset 0, function at rdbLoad -> {}",
                e.msg
            );
            warn!("--- RDB ERROR DETECTED --- {}", path.display());
            let data = std::fs::read(&path).unwrap_or_default();
            warn!("[offset {}] {}", e.offset, describe(&e, &data));
            Err("Terminating server after rdb file reading failure.".into())
        }
    }
}

/// The replication position the file recorded survives the restart (as
/// Redis's `loadDataFromDisk`): a replica resumes its master's stream from
/// it; a master keeps it as its second ID, with a backlog, so its replicas
/// resync partially. The keys found expired are deleted in that backlog.
fn resume_replication(st: &mut State, aux: &[(Vec<u8>, Vec<u8>)], expired: &[(usize, Vec<u8>)]) {
    let Some(r) = crate::state::repl::Repl::loaded_info(aux) else {
        return;
    };
    let id = String::from_utf8_lossy(&r.id).into_owned();
    st.repl.offset = r.offset;
    if !st.cfg.replicaof.is_empty() {
        st.replid = id;
        st.repl.resume_db = Some(r.db);
        return;
    }
    st.repl.replid2 = Some(id);
    st.repl.second_offset = r.offset as i64 + 1;
    let size = st.cfg.repl_backlog_size;
    st.repl.ensure_backlog(size);
    st.repl.no_replicas_since_s = crate::core::clock::now_ms() / 1000;
    let verb: &'static [u8] = if st.cfg.lazyfree_lazy_expire {
        b"UNLINK"
    } else {
        b"DEL"
    };
    for (db, key) in expired {
        let op = [Bytes::from_static(verb), Bytes::copy_from_slice(key)];
        st.repl.feed(&[(*db, &op[..])]);
    }
}

/// Start-up with `appendonly yes` and no AOF: the base and the incr file
/// are created synchronously (nobody is connected yet), as Redis does.
fn create_at_start(st: &mut State) -> io::Result<()> {
    let dir = aof_dir(st);
    std::fs::create_dir_all(&dir)?;
    let name = fname(st);
    let m = st.aof.manifest.clone();
    let base_seq = m.base.as_ref().map_or(0, |b| b.1) + 1;
    let commands = !st.cfg.aof_use_rdb_preamble;
    let base = crate::state::aof::base_name(&name, base_seq, commands);
    let mut files = Manifest {
        base: Some((base.clone(), base_seq)),
        incr_seq: m.incr_seq,
        ..Default::default()
    };
    let incr = files.add_incr(&name);
    info!("Creating AOF base file {base} on server start");
    info!("Creating AOF incr file {incr} on server start");
    let tmp = dir.join(format!("temp-rewriteaof-{}.aof", std::process::id()));
    let res = (|| {
        let w = io::BufWriter::with_capacity(1 << 16, File::create(&tmp)?);
        let w = if commands {
            let image = crate::state::persist::write_snapshot(st, Vec::new(), true)?;
            let ts = st.cfg.aof_timestamp_enabled;
            storage::aofcmd::from_rdb(&image, crate::core::clock::now_ms(), ts, w)
                .map_err(io::Error::other)?
        } else {
            crate::state::persist::write_snapshot(st, w, true)?
        };
        let f = w.into_inner().map_err(|e| e.into_error())?;
        f.sync_all()?;
        std::fs::rename(&tmp, dir.join(&base))
    })();
    if let Err(e) = res {
        let _ = std::fs::remove_file(&tmp);
        return Err(e);
    }
    let f = create_incr(&dir.join(&incr))?;
    write_manifest(&dir, &name, &files)?;
    st.aof.manifest = files;
    st.aof.base_size = std::fs::metadata(dir.join(&base)).map_or(0, |x| x.len());
    st.aof.incr_size = 0;
    st.aof.rewrite_base_size = st.aof.base_size;
    st.aof.start_appending(f);
    Ok(())
}

/// Start-up with `appendonly yes`: the AOF is the dataset (the RDB file is
/// not read). Without a manifest the server starts empty and creates a
/// base and an incr file, as Redis does.
fn aof_at_startup<H: Hold>(st: &mut H) -> Result<(), String> {
    st.aof.policy = st.cfg.appendfsync;
    let dir = aof_dir(st);
    let name = fname(st);
    upgrade_old_aof(st, &dir, &name)?;
    let mpath = dir.join(format!("{name}.manifest"));
    let text = match std::fs::read_to_string(&mpath) {
        Ok(t) => Some(t),
        Err(e) if e.kind() == io::ErrorKind::NotFound => None,
        Err(e) => return Err(format!("Can't open the AOF manifest {name}.manifest: {e}")),
    };
    let start = Instant::now();
    let res = match text {
        None => {
            st.aof.ready = true;
            create_at_start(st).map_err(|e| format!("Can't create the AOF files: {e}"))
        }
        Some(t) => {
            let m = Manifest::parse(&t)?;
            let files = listed(&m);
            // Every file must be there before anything is loaded.
            let mut total = 0;
            for (f, _) in &files {
                total += std::fs::metadata(dir.join(f))
                    .map_err(|e| {
                        format!(
                            "Unable to obtain the AOF file {f} length. stat: {}",
                            io_msg(&e)
                        )
                    })?
                    .len();
            }
            let loading = Loading::new(total);
            let progress = loading.progress.clone();
            st.loading = Some(loading);
            load_files(st, &dir, &files, &progress)?;
            info!(
                "DB loaded from append only file: {:.3} seconds",
                start.elapsed().as_secs_f64()
            );
            st.aof.base_size = m
                .base
                .as_ref()
                .and_then(|b| std::fs::metadata(dir.join(&b.0)).ok())
                .map_or(0, |x| x.len());
            st.aof.manifest = m;
            open_last_incr(st, &dir, &name)
        }
    };
    st.aof.ready = true;
    res
}

/// Redis 7.0's upgrade of an AOF from before 7.0 (one file,
/// `dir/<appendfilename>`, maybe with an RDB preamble): a manifest names
/// it as the base, then it moves into the AOF directory. An upgrade cut
/// short between the two (the manifest names it, the server directory
/// still has it) is finished the same way.
fn upgrade_old_aof(st: &State, dir: &Path, name: &str) -> Result<(), String> {
    let old = Path::new(&st.cfg.dir).join(name);
    let moved = dir.join(name);
    let fail = |e: io::Error| format!("Can't upgrade the old-style AOF file {name}: {e}");
    match std::fs::read_to_string(dir.join(format!("{name}.manifest"))) {
        Err(_) if old.is_file() => {
            std::fs::create_dir_all(dir).map_err(fail)?;
            let m = Manifest {
                base: Some((name.to_string(), 1)),
                ..Default::default()
            };
            write_manifest(dir, name, &m).map_err(fail)?;
        }
        Ok(t) if old.is_file() && !moved.exists() => {
            let m = Manifest::parse(&t)?;
            if m.base.is_none_or(|(b, _)| b != name) {
                return Ok(());
            }
        }
        _ => return Ok(()),
    }
    std::fs::rename(&old, &moved).map_err(fail)?;
    crate::state::aof::fsync_dir(dir);
    info!(
        "Successfully migrated an old-style AOF file ({name}) into the AOF directory ({}).",
        st.cfg.appenddirname
    );
    Ok(())
}

/// Start-up with `appendonly no`: the manifest is still read, as Redis
/// does, so that turning the AOF on later continues its numbering and
/// deletes the files it lists.
fn read_manifest(st: &mut State) {
    let path = aof_dir(st).join(format!("{}.manifest", fname(st)));
    if let Ok(text) = std::fs::read_to_string(&path) {
        match Manifest::parse(&text) {
            Ok(m) => st.aof.manifest = m,
            Err(e) => warn!("Ignoring the AOF manifest {}: {e}", path.display()),
        }
    }
}

fn open_last_incr(st: &mut State, dir: &Path, name: &str) -> Result<(), String> {
    let mut m = st.aof.manifest.clone();
    let (incr, new) = match m.incrs.last() {
        Some((n, _)) => {
            info!("Opening AOF incr file {n} on server start");
            (n.clone(), false)
        }
        None => {
            let n = m.add_incr(name);
            info!("Creating AOF incr file {n} on server start");
            (n, true)
        }
    };
    let path = dir.join(&incr);
    let open = if new { create_incr } else { open_append };
    let f = open(&path).map_err(|e| format!("Can't open the append-only file {incr}: {e}"))?;
    if new {
        write_manifest(dir, name, &m).map_err(|e| e.to_string())?;
        st.aof.manifest = m;
    }
    let last = f.metadata().map_or(0, |x| x.len());
    st.aof.incr_size = st
        .aof
        .manifest
        .incrs
        .iter()
        .map(|(n, _)| std::fs::metadata(dir.join(n)).map_or(0, |x| x.len()))
        .sum();
    st.aof.rewrite_base_size = st.aof.base_size + st.aof.incr_size;
    st.aof.start_appending(f);
    st.aof.last_incr_size = last;
    Ok(())
}
