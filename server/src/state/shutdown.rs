//! Shutting down as Redis 7.0 does. SIGTERM and SIGINT are taken by a
//! thread of their own (`sigwait`), which only schedules the shutdown for
//! the cron — except a second SIGINT, which exits at once even in the
//! middle of the final save. SHUTDOWN and the cron then run one sequence:
//! wait, with writes paused, up to `shutdown-timeout` seconds for replicas
//! to acknowledge the whole stream, then the checks and the final save
//! (`persist::prepare_shutdown`); when those fail the server stays up and
//! the clients waiting in SHUTDOWN get an error. SHUTDOWN ABORT cancels a
//! wait or a signal not acted on yet.

use crate::core::clock::now_ms;
use crate::state::{BlockKind, Pause, Shared, ShutdownFlags, ShutdownRequest, ShutdownWait, State};
use std::sync::atomic::{AtomicI32, Ordering::Relaxed};
use std::sync::Arc;
use tracing::{info, warn};

/// The signal that asked for a shutdown not yet done or cancelled (0: none).
static ASAP: AtomicI32 = AtomicI32::new(0);

/// The error of SHUTDOWN when the server stays up.
pub const FAILED: &str = "ERR Errors trying to SHUTDOWN. Check logs.";

/// Blocks SIGTERM and SIGINT in the calling thread and every thread it
/// starts afterwards, so only `spawn_signal_thread`'s thread takes them:
/// call before any other thread exists.
pub fn block_signals() {
    let set = shutdown_signals();
    // SAFETY: a valid, initialised signal set.
    unsafe {
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
    }
}

fn shutdown_signals() -> libc::sigset_t {
    // SAFETY: sigemptyset initialises the set before it is read.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGINT);
        libc::sigaddset(&mut set, libc::SIGTERM);
        set
    }
}

/// Takes SIGTERM and SIGINT for the whole process. It never takes the
/// state lock, so it acts while a long save holds it; it tells the
/// server's main task (which acts itself while the dataset loads).
pub fn spawn_signal_thread(shared: Arc<Shared>) -> std::io::Result<()> {
    std::thread::Builder::new()
        .name("signals".into())
        .spawn(move || {
            let set = shutdown_signals();
            loop {
                let mut sig = 0;
                // SAFETY: `set` is initialised and `sig` is writable.
                if unsafe { libc::sigwait(&set, &mut sig) } != 0 {
                    continue;
                }
                // Pressed twice (Ctrl+C): the user wants out now, without
                // the final save or waiting for replicas.
                if sig == libc::SIGINT && ASAP.load(Relaxed) != 0 {
                    warn!(target: crate::core::log::SIGNAL, "You insist... exiting now.");
                    // The final save's file, in `dir` (the working directory).
                    let _ = std::fs::remove_file(format!("temp-{}.rdb", std::process::id()));
                    crate::core::listening::stop_listening();
                    std::process::exit(1);
                }
                let name = if sig == libc::SIGINT {
                    "SIGINT"
                } else {
                    "SIGTERM"
                };
                warn!(target: crate::core::log::SIGNAL, "Received {name} scheduling shutdown...");
                ASAP.store(sig, Relaxed);
                shared.shutdown.notify_one();
            }
        })
        .map(drop)
}

/// The options of `shutdown-on-sigint`/`shutdown-on-sigterm` (canonical
/// text: `default`, or words among save, nosave, now, force).
pub fn flags_from_option(text: &str) -> ShutdownFlags {
    let mut f = ShutdownFlags::default();
    for w in text.split(' ') {
        match w {
            "save" => f.save = Some(true),
            "nosave" => f.save = Some(false),
            "now" => f.now = true,
            "force" => f.force = true,
            _ => {}
        }
    }
    f
}

/// How a shutdown request ended for now.
#[derive(Debug, PartialEq)]
pub enum Outcome {
    /// Checks and final save done: the process exits.
    Exit,
    /// Waiting for replicas (or joining a wait under way).
    Waiting,
    /// The server stays up; the reason is logged.
    Failed,
}

/// Starts a shutdown: waits for lagging replicas unless NOW, no
/// `shutdown-timeout` or none lags, else finishes at once.
pub fn prepare(st: &mut State, mut flags: ShutdownFlags) -> Outcome {
    if st.shutdown_wait.is_some() {
        return Outcome::Waiting;
    }
    // A dataset half loaded must not overwrite the file it comes from.
    if st.loading.is_some() {
        flags.save = Some(false);
    }
    warn!("User requested shutdown...");
    if !flags.now && st.cfg.shutdown_timeout != 0 && !replicas_in_sync(st) {
        // Ask the replicas where they are; writes wait meanwhile so they
        // can catch up.
        st.repl.feed_plain(&[
            bytes::Bytes::from_static(b"REPLCONF"),
            bytes::Bytes::from_static(b"GETACK"),
            bytes::Bytes::from_static(b"*"),
        ]);
        st.repl_deliver();
        // A CLIENT PAUSE of everything stays (Redis keeps the strictest
        // pause): a replica that reconnects meanwhile still waits.
        let all_paused = st.pause.as_ref().is_some_and(|p| !p.writes_only);
        let paused_before = st.pause.replace(Pause {
            until_ms: i64::MAX,
            writes_only: !all_paused,
        });
        st.shutdown_wait = Some(ShutdownWait {
            flags,
            deadline_ms: now_ms().saturating_add(st.cfg.shutdown_timeout * 1000),
            paused_before,
        });
        info!("Waiting for replicas before shutting down.");
        return Outcome::Waiting;
    }
    finish(st, flags)
}

fn replicas_in_sync(st: &State) -> bool {
    st.repl
        .replicas
        .iter()
        .all(|r| r.ack_offset == st.repl.offset)
}

/// The end of a shutdown: the replicas' report, then the checks and the
/// final save; on success the server's main task is told to exit.
fn finish(st: &mut State, flags: ShutdownFlags) -> Outcome {
    let now_s = now_ms() / 1000;
    let mut lagging = 0;
    for r in &st.repl.replicas {
        if r.ack_offset != st.repl.offset {
            lagging += 1;
            let online = matches!(r.link, crate::state::repl::Link::Online);
            warn!(
                "Lagging replica {}:{} reported offset {} behind master, lag={}, state={}.",
                r.ip,
                r.port,
                st.repl.offset.saturating_sub(r.ack_offset),
                if online { now_s - r.ack_time_s } else { 0 },
                r.state_name()
            );
        }
    }
    let n = st.repl.replicas.len();
    if n > 0 {
        info!(
            "{} of {n} replicas are in sync when shutting down.",
            n - lagging
        );
    }
    if !crate::state::persist::prepare_shutdown(st, flags.save, flags.force) {
        cancel(st);
        return Outcome::Failed;
    }
    crate::core::listening::stop_listening();
    st.shutdown = Some(ShutdownRequest);
    st.shutdown_notify.notify_one();
    Outcome::Exit
}

/// The shutdown will not happen: writes resume and the clients waiting in
/// SHUTDOWN get an error.
fn cancel(st: &mut State) {
    ASAP.store(0, Relaxed);
    if let Some(w) = st.shutdown_wait.take() {
        st.pause = w.paused_before.filter(|p| p.until_ms > now_ms());
    }
    for cl in st.clients.values_mut() {
        if cl
            .blocked
            .take_if(|b| b.kind == BlockKind::Shutdown)
            .is_some()
        {
            let mut out = protocol::ReplyBuf::new(cl.resp3);
            out.error(FAILED);
            cl.pending.extend_from_slice(&out.buf);
            cl.wake.notify_one();
        }
    }
}

/// SHUTDOWN ABORT: false when no shutdown was under way or asked for.
pub fn abort(st: &mut State) -> bool {
    if st.shutdown_wait.is_some() {
        cancel(st);
    } else if ASAP.swap(0, Relaxed) == 0 {
        return false;
    }
    warn!("Shutdown manually aborted.");
    true
}

/// The cron's part: a shutdown a signal asked for, and the end of a wait
/// for replicas (all in sync, or out of time). True when the server exits.
pub fn cron(st: &mut State) -> bool {
    if st.shutdown_wait.is_none() {
        let flags = match ASAP.load(Relaxed) {
            0 => return false,
            libc::SIGINT => flags_from_option(&st.cfg.shutdown_on_sigint),
            _ => flags_from_option(&st.cfg.shutdown_on_sigterm),
        };
        return prepare(st, flags) == Outcome::Exit;
    }
    // Stream bytes held while a replica's connection ran go out with the
    // next bytes for it, and writes are paused: send them now.
    let held: Vec<u64> = st
        .repl
        .replicas
        .iter()
        .filter(|r| !r.held.is_empty())
        .map(|r| r.id)
        .collect();
    for id in held {
        st.repl_send(id, &[]);
    }
    let w = st.shutdown_wait.as_ref().expect("waiting");
    if now_ms() < w.deadline_ms && !replicas_in_sync(st) {
        return false;
    }
    let flags = w.flags;
    finish(st, flags) == Outcome::Exit
}

/// While the dataset loads (no cron yet): a signal's shutdown, which
/// never saves. True when the server exits.
pub fn while_loading(st: &mut State) -> bool {
    if ASAP.load(Relaxed) == 0 || st.shutdown_wait.is_some() {
        return false;
    }
    match prepare(st, ShutdownFlags::default()) {
        Outcome::Exit => true,
        Outcome::Waiting => false,
        Outcome::Failed => {
            warn!("SIGTERM received but errors trying to shut down the server, check the logs for more information");
            false
        }
    }
}

/// INFO's `shutdown_in_milliseconds`: present only while a shutdown waits.
pub fn remaining_ms(st: &State) -> Option<i64> {
    st.shutdown_wait
        .as_ref()
        .map(|w| (w.deadline_ms - now_ms()).max(0))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each checked with CONFIG SET/GET shutdown-on-sigint on 7.0.15.
    #[test]
    fn signal_options_as_redis_reads_them() {
        use crate::core::config::shutdown_flags_canon as canon;
        assert_eq!(canon("force nosave").unwrap(), "nosave force");
        assert_eq!(canon("default now").unwrap(), "now");
        assert_eq!(canon("default").unwrap(), "default");
        assert!(canon("save nosave")
            .unwrap_err()
            .contains("SAVE and NOSAVE"));
        assert!(canon("NOW  force").unwrap_err().contains("one of"));
        let f = flags_from_option("nosave now");
        assert_eq!(
            f,
            ShutdownFlags {
                save: Some(false),
                now: true,
                force: false
            }
        );
    }
}
