//! Loading an AOF: its RDB preamble, then its commands replayed through
//! the dispatcher, as a client without a connection. Used at start-up
//! (`crate::net::load`, the lock let go now and then) and by DEBUG
//! LOADAOF (the state held for the whole command).

use crate::state::aof::{aof_dir, fname, Manifest};
use crate::state::persist::{describe, load_dbs, load_opts, LoadProgress};
use crate::state::{Client, State};
use bytes::BytesMut;
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
pub(crate) trait Hold: DerefMut<Target = State> {
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
pub(crate) fn load_rdb<H: Hold>(
    st: &mut H,
    input: Input,
    progress: &LoadProgress,
) -> Result<storage::rdb::LoadSummary, storage::rdb::LoadError> {
    let opts = load_opts(st, false);
    let n = st.shard.dbs.len();
    let mut dbs = std::mem::replace(&mut st.shard.dbs, (0..n).map(|_| Db::default()).collect());
    let mut engine = st.engine.take();
    let res = st.unlocked(|| load_dbs(&mut dbs, &mut engine, input, &opts, Some(progress)));
    st.shard.dbs = dbs;
    st.engine = engine;
    // Settings changed meanwhile reach the loaded databases.
    st.apply_all();
    res
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

pub(crate) fn io_msg(e: &io::Error) -> String {
    match e.kind() {
        io::ErrorKind::NotFound => "No such file or directory".into(),
        _ => e.to_string(),
    }
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
    // As Redis, the manifest read is the one kept: with the AOF off after
    // a rewrite it lists no incr file, so the next one is seq 1 again.
    st.aof.manifest = m.clone();
    for db in 0..st.shard.dbs.len() {
        st.touch_all_watched(db, None);
        drop(st.shard.dbs[db].take());
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
pub(crate) fn listed(m: &Manifest) -> Vec<(String, &'static str)> {
    let base = m.base.iter().map(|(n, _)| (n.clone(), "base"));
    base.chain(m.incrs.iter().map(|(n, _)| (n.clone(), "incr")))
        .collect()
}

/// Loads `files` in order; only the last may end in a cut command.
pub(crate) fn load_files<H: Hold>(
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
