//! BGREWRITEAOF: a new base written by the snapshot engine
//! (`crate::state::persist`, serialize-before-overwrite, on the saver thread)
//! while writes go to a new incr file; see [`rewrite_start`] and
//! [`rewrite_done`].

use super::*;

/// Seconds after a failed rewrite before the cron starts another one.
pub(super) const RETRY_DELAY_S: i64 = 5;

/// What BGREWRITEAOF (and the cron) can do now.
pub enum Start {
    Started,
    /// The snapshot engine is busy, or a unit is open (inside MULTI/EXEC):
    /// the cron starts it later.
    Scheduled,
}

/// BGREWRITEAOF: starts a background rewrite, or schedules it while
/// another job (a BGSAVE) uses the snapshot engine or a transaction runs.
pub fn bgrewriteaof(st: &mut State, in_exec: bool) -> io::Result<Start> {
    if crate::state::persist::child_active(st) || in_exec || st.prop.pending() {
        st.aof.rewrite_scheduled = true;
        return Ok(Start::Scheduled);
    }
    rewrite_start(st).map(|()| Start::Started)
}

/// Starts a background rewrite, as Redis 7.0 does: from this moment (this
/// lock hold) writes go to a new incr file, listed in the manifest at
/// once, and the snapshot engine writes the dataset as it is now into a
/// temporary base file. When the base is complete, [`rewrite_done`] makes
/// the manifest name the new base and the new incr file, and deletes the
/// rest. Loading either manifest gives the live data.
///
/// When the AOF is being turned on (`wait_rewrite`), the incr file is a
/// temporary one the manifest names only at the end; with the AOF off,
/// the rewrite writes a base and no incr file.
pub fn rewrite_start(st: &mut State) -> io::Result<()> {
    debug_assert!(!crate::state::persist::child_active(st));
    st.aof.rewrite_scheduled = false;
    let res = rewrite_start_inner(st);
    if let Err(e) = &res {
        warn!("Can't rewrite append only file in background: {e}");
        st.aof.last_rewrite_failed = true;
        st.aof.rewrite_failures += 1;
        st.aof.last_failure_s = now_ms() / 1000;
    }
    res
}

fn rewrite_start_inner(st: &mut State) -> io::Result<()> {
    let dir = aof_dir(st);
    std::fs::create_dir_all(&dir)?;
    let name = fname(st);
    let mut temp_incr = false;
    if st.aof.on {
        let mut m = st.aof.manifest.clone();
        let incr = m.add_incr(&name);
        let f = create_incr(&dir.join(&incr))?;
        write_manifest(&dir, &name, &m)?;
        info!("Creating AOF incr file {incr} on background rewrite");
        st.aof.manifest = m;
        st.aof.switch(f);
    } else if st.aof.wait_rewrite {
        let path = dir.join(temp_incr_name(&name));
        st.aof.start_appending(create_incr(&path)?);
        temp_incr = true;
    }
    let tmp = dir.join(format!("temp-rewriteaof-bg-{}.aof", std::process::id()));
    let commands = !st.cfg.aof_use_rdb_preamble;
    let target = crate::state::persist::Target::AofBase {
        done: rewrite_done,
        commands,
        timestamps: st.cfg.aof_timestamp_enabled,
    };
    match crate::state::persist::snapshot_start(st, tmp, target) {
        Ok(child) => {
            st.aof.rewrite = Some(Rewrite {
                started: Instant::now(),
                child,
                temp_incr,
                commands,
            });
            st.aof.rewrites += 1;
            sync_policy(st);
            info!("Background append only file rewriting started");
            Ok(())
        }
        Err(e) => {
            if temp_incr {
                st.aof.stop_appending();
                let _ = std::fs::remove_file(dir.join(temp_incr_name(&name)));
            }
            Err(e)
        }
    }
}

/// The completion hook of the rewrite's snapshot (run by the saver thread
/// under the lock): the base is complete and fsynced at `tmp`.
pub fn rewrite_done(
    st: &mut State,
    res: io::Result<()>,
    tmp: &Path,
) -> crate::state::persist::AfterDone {
    let Some(rw) = st.aof.rewrite.take() else {
        return Default::default();
    };
    st.aof.last_rewrite_ms = Some(rw.started.elapsed().as_millis() as i64);
    let dir = aof_dir(st);
    let name = fname(st);
    let res = res.and_then(|()| install(st, &dir, &name, tmp, &rw));
    sync_policy(st);
    match res {
        Ok(remove) => {
            st.aof.last_rewrite_failed = false;
            st.aof.rewrite_failures = 0;
            st.aof.wait_rewrite = false;
            info!("Background AOF rewrite finished successfully");
            crate::state::persist::AfterDone {
                sync_dir: Some(dir),
                remove,
            }
        }
        Err(e) => {
            warn!("Background AOF rewrite terminated with error: {e}");
            let _ = std::fs::remove_file(tmp);
            st.aof.last_rewrite_failed = true;
            st.aof.rewrite_failures += 1;
            st.aof.last_failure_s = now_ms() / 1000;
            if rw.temp_incr {
                // Still turning the AOF on: try again from the start.
                st.aof.stop_appending();
                let _ = std::fs::remove_file(dir.join(temp_incr_name(&name)));
                st.aof.rewrite_scheduled = true;
            }
            Default::default()
        }
    }
}

/// `<appendfilename>.<seq>.base.rdb`, or `.base.aof` when the base is
/// written as commands.
pub fn base_name(name: &str, seq: u64, commands: bool) -> String {
    let ext = if commands { "aof" } else { "rdb" };
    format!("{name}.{seq}.base.{ext}")
}

/// Puts the new base (and a temporary incr file) in place and switches
/// the manifest; returns the history files to delete.
fn install(
    st: &mut State,
    dir: &Path,
    name: &str,
    tmp: &Path,
    rw: &Rewrite,
) -> io::Result<Vec<PathBuf>> {
    let old = st.aof.manifest.clone();
    let base_seq = old.base.as_ref().map_or(0, |b| b.1) + 1;
    let base = base_name(name, base_seq, rw.commands);
    std::fs::rename(tmp, dir.join(&base))?;
    info!(
        "Successfully renamed the temporary AOF base file {} into {base}",
        tmp.file_name().unwrap_or_default().to_string_lossy()
    );
    let mut m = Manifest {
        base: Some((base.clone(), base_seq)),
        incr_seq: old.incr_seq,
        ..Default::default()
    };
    if rw.temp_incr {
        let incr = m.add_incr(name);
        std::fs::rename(dir.join(temp_incr_name(name)), dir.join(&incr))?;
        info!(
            "Successfully renamed the temporary AOF incr file {} into {incr}",
            temp_incr_name(name)
        );
    } else if st.aof.on {
        // The incr file opened when the rewrite started.
        m.incrs.extend(old.incrs.last().cloned());
    }
    // Redis's order, newest first: the old incr files, the old base, then
    // the history already listed.
    let kept = |n: &String| m.incrs.iter().any(|(k, _)| k == n);
    let old_files = old.incrs.iter().filter(|(n, _)| !kept(n));
    m.history = old_files
        .chain(&old.base)
        .chain(&old.history)
        .cloned()
        .collect();
    write_manifest(dir, name, &m)?;
    st.aof.manifest = m;
    let remove = take_history(st, dir, name)?;
    st.aof.base_size = std::fs::metadata(dir.join(&base)).map_or(0, |x| x.len());
    st.aof.incr_size = if st.aof.on { st.aof.last_incr_size } else { 0 };
    st.aof.rewrite_base_size = st.aof.base_size + st.aof.incr_size;
    Ok(remove)
}

/// The history files (what a rewrite left behind) leave the manifest and
/// are returned for deletion, unless `aof-disable-auto-gc` keeps them, as
/// Redis's `aofDelHistoryFiles`.
fn take_history(st: &mut State, dir: &Path, name: &str) -> io::Result<Vec<PathBuf>> {
    if st.cfg.aof_disable_auto_gc || st.aof.manifest.history.is_empty() {
        return Ok(Vec::new());
    }
    let history = std::mem::take(&mut st.aof.manifest.history);
    write_manifest(dir, name, &st.aof.manifest)?;
    // A history name may be the live incr file's too (see `create_incr`):
    // Redis deletes it then, and the AOF can no longer be loaded.
    let m = &st.aof.manifest;
    let live = |n: &String| m.base.iter().chain(&m.incrs).any(|(k, _)| k == n);
    let files = history.into_iter().filter(|(n, _)| !live(n)).map(|(n, _)| {
        info!("Removing the history file {n} in the background");
        dir.join(n)
    });
    Ok(files.collect())
}

/// `aof-disable-auto-gc no` again: the history files kept meanwhile go.
pub fn collect_history(st: &mut State) {
    let (dir, name) = (aof_dir(st), fname(st));
    match take_history(st, &dir, &name) {
        Ok(files) => {
            for f in files {
                let _ = std::fs::remove_file(f);
            }
        }
        Err(e) => warn!("Can't update the AOF manifest: {e}"),
    }
}

/// Abandons a running rewrite (SHUTDOWN, turning the AOF off), as Redis
/// kills its rewriting child.
pub fn kill_rewrite(st: &mut State) {
    if let Some(rw) = st.aof.rewrite.take() {
        info!("Killing running AOF rewrite child");
        rw.child.kill(st);
        if rw.temp_incr {
            st.aof.stop_appending();
            let _ = std::fs::remove_file(aof_dir(st).join(temp_incr_name(&fname(st))));
        }
        sync_policy(st);
    }
}
