//! Start-up loading: the dataset comes from the AOF (`appendonly yes`) or
//! the RDB file. Replaying an AOF runs its commands through the
//! dispatcher, so this sits above `cmd` with the rest of the orchestration.
//!
//! The server listens while it loads: the RDB is read into databases of
//! its own outside the lock, and an AOF's commands run under the lock,
//! which is let go every `loading-process-events-interval-bytes`. Clients
//! meanwhile get -LOADING for what cannot run (`State::loading`, the gate).

use crate::core::propagate::Consumer;
use crate::state::aof::{aof_dir, fname, next_incr_seq, open_append, write_manifest, Manifest};
use crate::state::persist::{describe, load_dbs, load_opts, rdb_path, LoadProgress, Loading};
use crate::state::{Client, Shared, State};
use bytes::{Bytes, BytesMut};
use parking_lot::MutexGuard;
use protocol::{Decoder, ReplyBuf};
use std::fs::File;
use std::io::{self, Read, Seek};
use std::ops::DerefMut;
use std::path::Path;
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};
use storage::rdb::{Input, LoadSummary};
use storage::Db;
use tracing::{info, warn};

/// The state as a loader holds it: at start-up the lock's guard, let go
/// now and then so clients are answered; DEBUG LOADAOF, the state itself
/// for the whole command.
trait Hold: DerefMut<Target = State> {
    /// Lets waiting clients take the lock (start-up only).
    fn let_clients_in(&mut self) {}
    /// Runs `f` without the lock (start-up only).
    fn unlocked<T>(&mut self, f: impl FnOnce() -> T) -> T {
        f()
    }
}

impl Hold for &mut State {}

impl Hold for MutexGuard<'_, State> {
    fn let_clients_in(&mut self) {
        MutexGuard::bump(self);
    }
    fn unlocked<T>(&mut self, f: impl FnOnce() -> T) -> T {
        MutexGuard::unlocked_fair(self, f)
    }
}

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

pub fn log_done(sum: &LoadSummary) {
    if sum.empty > 0 {
        warn!(
            "Done loading RDB, keys loaded: {}, keys expired: {}, empty keys skipped: {}.",
            sum.keys, sum.expired, sum.empty
        );
    } else {
        info!(
            "Done loading RDB, keys loaded: {}, keys expired: {}.",
            sum.keys, sum.expired
        );
    }
}

/// Loads an RDB image into the (empty) databases, without the lock at
/// start-up: they are taken out of the state meanwhile, and nothing that
/// could reach them runs while loading.
fn load_rdb<H: Hold>(
    st: &mut H,
    input: Input,
    progress: &LoadProgress,
) -> Result<storage::rdb::LoadSummary, storage::rdb::LoadError> {
    let opts = load_opts(st, false);
    let n = st.dbs.len();
    let mut dbs = std::mem::replace(&mut st.dbs, (0..n).map(|_| Db::default()).collect());
    let mut engine = st.engine.take();
    let res = st.unlocked(|| load_dbs(&mut dbs, &mut engine, input, &opts, Some(progress)));
    st.dbs = dbs;
    st.engine = engine;
    // Settings changed meanwhile reach the loaded databases.
    st.apply_all();
    res
}

/// Start-up with `appendonly yes` and no AOF: the base and the incr file
/// are created synchronously (nobody is connected yet), as Redis does.
fn create_at_start(st: &mut State) -> io::Result<()> {
    let dir = aof_dir(st);
    std::fs::create_dir_all(&dir)?;
    let name = fname(st);
    let m = st.aof.manifest.clone();
    let base_seq = m.base.as_ref().map_or(0, |b| b.1) + 1;
    let incr_seq = next_incr_seq(&m);
    let commands = !st.cfg.aof_use_rdb_preamble;
    let base = crate::state::aof::base_name(&name, base_seq, commands);
    let incr = format!("{name}.{incr_seq}.incr.aof");
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
    let f = open_append(&dir.join(&incr))?;
    let m = Manifest {
        base: Some((base.clone(), base_seq)),
        incrs: vec![(incr, incr_seq)],
        history: vec![],
    };
    write_manifest(&dir, &name, &m)?;
    st.aof.manifest = m;
    st.aof.base_size = std::fs::metadata(dir.join(&base)).map_or(0, |x| x.len());
    st.aof.incr_size = 0;
    st.aof.rewrite_base_size = st.aof.base_size;
    st.aof.start_appending(f);
    Ok(())
}

/// Replays RESP commands through the dispatcher. Returns the offset after
/// the last complete command (before an unfinished MULTI) and whether the
/// data ended in the middle of a command.
fn replay<H: Hold>(
    st: &mut H,
    data: &[u8],
    progress: &LoadProgress,
) -> Result<(usize, bool), String> {
    let interval = st.cfg.loading_process_events_interval_bytes.max(1) as usize;
    let key_delay = st.cfg.key_load_delay;
    let base = progress.loaded_bytes.load(Relaxed);
    let mut next_yield = interval;
    let mut dec = Decoder::new(i64::MAX);
    let mut buf = BytesMut::from(data);
    let total = data.len();
    let mut cl = Client::new(0, String::new(), String::new(), -1, true);
    cl.deny_blocking = true;
    let mut out = ReplyBuf::new(false);
    let mut valid = 0;
    let mut before_multi = None;
    loop {
        // Annotation lines (such as `#TS:` timestamps) carry no command.
        if buf.first() == Some(&b'#') {
            let end = buf
                .iter()
                .position(|&c| c == b'\n')
                .map_or(buf.len(), |i| i + 1);
            let _ = buf.split_to(end);
            valid = total - buf.len();
            continue;
        }
        if buf.first().is_some_and(|&c| c != b'*') {
            return Err(format!(
                "Bad file format reading the append only file (offset {})",
                total - buf.len()
            ));
        }
        match dec.decode(&mut buf) {
            Ok(Some(args)) => {
                if args.is_empty() {
                    continue;
                }
                let at = total - buf.len();
                if crate::cmd::resolve(&args).is_err() {
                    return Err(format!(
                        "Unknown command '{}' reading the append only file",
                        String::from_utf8_lossy(&args[0])
                    ));
                }
                let is_multi = args[0].eq_ignore_ascii_case(b"multi");
                let is_exec = args[0].eq_ignore_ascii_case(b"exec");
                if is_multi {
                    before_multi = Some(valid);
                }
                st.tick(Instant::now());
                crate::cmd::execute(st, &mut cl, &mut out, &args);
                crate::cmd::check_source_reply(st, &out.buf, &args, true);
                out.buf.clear();
                if is_exec {
                    before_multi = None;
                }
                valid = at;
                progress.loaded_bytes.store(base + at as u64, Relaxed);
                if key_delay > 0 {
                    st.unlocked(|| std::thread::sleep(Duration::from_micros(key_delay as u64)));
                }
                // Never inside a transaction: its commands apply together.
                if at >= next_yield && cl.multi.is_none() {
                    next_yield = at + interval;
                    st.let_clients_in();
                }
            }
            Ok(None) => break,
            Err(e) => return Err(format!("Bad file format reading the append only file: {e}")),
        }
    }
    // The decoder keeps a partial command's bytes itself: what was not
    // consumed by a complete command is the cut tail.
    let truncated = valid != total;
    if cl.multi.is_some() {
        // An unfinished transaction is dropped with the cut tail.
        return Ok((before_multi.unwrap_or(0), true));
    }
    Ok((valid, truncated))
}

fn load_file<H: Hold>(
    st: &mut H,
    dir: &Path,
    (name, kind): &(String, &str),
    last: bool,
    progress: &LoadProgress,
) -> Result<(), String> {
    let path = dir.join(name);
    let stat_error = |e: io::Error| {
        format!(
            "Unable to obtain the AOF file {name} length. stat: {}",
            io_msg(&e)
        )
    };
    let mut file = File::open(&path).map_err(stat_error)?;
    let len = file.metadata().map_err(stat_error)?.len();
    let start = Instant::now();
    let base = progress.loaded_bytes.load(Relaxed);
    let mut head = [0u8; 5];
    let mut preamble = 0;
    if file.read_exact(&mut head).is_ok() && &head == b"REDIS" {
        info!("Reading RDB base file on AOF loading...");
        file.rewind().map_err(|e| e.to_string())?;
        let sum = load_rdb(st, Input::file(&mut file), progress).map_err(|e| {
            let data = std::fs::read(&path).unwrap_or_default();
            format!(
                "Bad file format reading the append only file {name}: {}",
                describe(&e, &data)
            )
        })?;
        info!("RDB is base AOF");
        log_done(&sum);
        preamble = sum.end;
    }
    let mut commands = Vec::new();
    file.seek(io::SeekFrom::Start(preamble as u64))
        .and_then(|_| file.read_to_end(&mut commands))
        .map_err(|e| e.to_string())?;
    if !commands.is_empty() {
        let (valid, truncated) = replay(st, &commands, progress)?;
        let valid = valid + preamble;
        if truncated {
            if !last || !st.cfg.aof_load_truncated {
                return Err(format!("Unexpected end of file reading the append only file {name}. You can: 1) Make a backup of your AOF file, then use ./redis-check-aof --fix <filename.manifest>. 2) Alternatively you can set the 'aof-load-truncated' configuration option to yes and restart the server."));
            }
            warn!("!!! Warning: short read while loading the AOF file {name}!!!");
            warn!("!!! Truncating the AOF {name} at offset {valid} !!!");
            let f = std::fs::OpenOptions::new()
                .write(true)
                .open(&path)
                .map_err(|e| e.to_string())?;
            f.set_len(valid as u64).map_err(|e| e.to_string())?;
            let _ = f.sync_all();
            warn!("AOF {name} loaded anyway because aof-load-truncated is enabled");
        }
    }
    progress.loaded_bytes.store(base + len, Relaxed);
    info!(
        "DB loaded from {kind} file {name}: {:.3} seconds",
        start.elapsed().as_secs_f64()
    );
    Ok(())
}

fn io_msg(e: &io::Error) -> String {
    match e.kind() {
        io::ErrorKind::NotFound => "No such file or directory".into(),
        _ => e.to_string(),
    }
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

/// DEBUG LOADAOF: writes what the AOF buffers (when on), empties the
/// dataset and loads the files the manifest on disk lists (with the AOF
/// off, those of the last BGREWRITEAOF). Without a manifest, or on a bad
/// file, Redis exits; here the command fails, the former before anything
/// is emptied.
pub fn reload_aof(st: &mut State) -> Result<(), String> {
    if st.aof.on {
        st.aof.flush_buf();
    }
    let dir = aof_dir(st);
    let name = fname(st);
    let text = std::fs::read_to_string(dir.join(format!("{name}.manifest")))
        .map_err(|e| format!("Can't open the AOF manifest {name}.manifest: {e}"))?;
    let m = Manifest::parse(&text)?;
    for db in 0..st.dbs.len() {
        st.touch_all_watched(db, None);
        drop(st.dbs[db].take());
    }
    // The log recreates the functions too, as a restart would.
    if let Some(e) = st.engine.as_mut() {
        e.flush_functions();
    }
    let res = load_files(&mut &mut *st, &dir, &listed(&m), &LoadProgress::default());
    // What was loaded is already in the log.
    st.dirty = 0;
    res?;
    info!("Append Only File loaded by DEBUG LOADAOF");
    Ok(())
}

/// The files a manifest lists, in loading order, with their kind: the
/// base, then the incr files.
fn listed(m: &Manifest) -> Vec<(String, &'static str)> {
    let base = m.base.iter().map(|(n, _)| (n.clone(), "base"));
    base.chain(m.incrs.iter().map(|(n, _)| (n.clone(), "incr")))
        .collect()
}

/// Loads `files` in order; only the last may end in a cut command.
fn load_files<H: Hold>(
    st: &mut H,
    dir: &Path,
    files: &[(String, &str)],
    progress: &LoadProgress,
) -> Result<(), String> {
    st.aof.loading = true;
    st.script_run.dataset_loading.store(true, Relaxed);
    let n = files.len();
    let res = files
        .iter()
        .enumerate()
        .try_for_each(|(i, f)| load_file(st, dir, f, i + 1 == n, progress));
    st.aof.loading = false;
    st.script_run.dataset_loading.store(false, Relaxed);
    res
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
            let seq = next_incr_seq(&m);
            let n = format!("{name}.{seq}.incr.aof");
            info!("Creating AOF incr file {n} on server start");
            m.incrs.push((n.clone(), seq));
            (n, true)
        }
    };
    let path = dir.join(&incr);
    let f =
        open_append(&path).map_err(|e| format!("Can't open the append-only file {incr}: {e}"))?;
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
