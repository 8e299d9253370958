//! The boundary between the interpreter and the server: the [`Host`] a
//! run talks to, how a run fails ([`RunError`]), and the thread-local
//! through which Lua C functions find the running script's host.
//!
//! Apart from `engine` because `raw` (the `redis.call` path) and `ldb`
//! (the debugger) need it too: with it here, `engine` uses `raw` and
//! `ldb`, `raw` uses `ldb`, and none of them reaches back.

use bytes::Bytes;

/// The server side of `redis.call`.
pub trait Host {
    /// Runs a command for the script and returns its reply's RESP bytes
    /// (error replies included), in RESP3 if `resp3`. The bytes may live in
    /// a buffer the host reuses for the next call.
    fn call(&mut self, args: &[Bytes], resp3: bool) -> &[u8];

    /// The script's reply holds this error. `counted`: it is a command's
    /// error that the command already counted in the error stats (Redis's
    /// `ignore_error_stats_update`).
    fn error_reply(&mut self, _msg: &[u8], _counted: bool) {}

    /// `redis.acl_check_cmd`: whether the script's user may run `args`;
    /// the error for a command that does not exist.
    fn acl_check(&mut self, _args: &[Bytes]) -> Result<bool, String> {
        Ok(true)
    }

    /// Whether the last call's error reply is the script's refusal to run
    /// the command (unknown, not allowed from scripts...), not the
    /// command's own error: the debugger shows them apart.
    fn refused(&self) -> bool {
        false
    }

    /// The debugger let the script go on after a stop: as in Redis, its
    /// commands see the time from now on, not the run's start.
    fn resumed(&mut self) {}

    /// Called now and then while the run is past `busy-reply-threshold`:
    /// the host serves what others may do meanwhile.
    fn while_busy(&mut self) {}
}

/// How a run failed: its error reply, and whether that is a command's
/// error already counted in the error stats (see `Host::error_reply`).
#[derive(Debug)]
pub struct RunError {
    pub msg: String,
    pub counted: bool,
}

impl From<String> for RunError {
    fn from(msg: String) -> Self {
        RunError {
            msg,
            counted: false,
        }
    }
}

impl From<&str> for RunError {
    fn from(msg: &str) -> Self {
        msg.to_string().into()
    }
}

thread_local! {
    /// The host of the script running on this thread, set only while
    /// `Engine::invoke` runs. `redis.call` is one function created with the
    /// engine and finds its host here: building per-run closures with
    /// `Lua::scope` cost a userdata and garbage per run.
    static HOST: std::cell::Cell<Option<std::ptr::NonNull<dyn Host>>> = const { std::cell::Cell::new(None) };
}

/// Makes `host` the running script's host until dropped.
pub(crate) struct HostGuard;

impl HostGuard {
    pub(crate) fn set(host: &mut dyn Host) -> HostGuard {
        let p: std::ptr::NonNull<dyn Host + '_> = std::ptr::NonNull::from(host);
        // SAFETY: only the lifetime bound is erased. The pointer is read
        // only by `with_host` on this thread while the guard lives, and the
        // guard does not outlive the `&mut` it was made from (`invoke`).
        let p: std::ptr::NonNull<dyn Host> = unsafe { std::mem::transmute(p) };
        HOST.with(|h| h.set(Some(p)));
        HostGuard
    }
}

impl Drop for HostGuard {
    fn drop(&mut self) {
        HOST.with(|h| h.set(None));
    }
}

/// Runs `f` with the running script's host, or `None` outside a run. The
/// host is taken for the call, so a nested call cannot alias it.
pub(crate) fn with_host<R>(f: impl FnOnce(Option<&mut dyn Host>) -> R) -> R {
    let Some(mut p) = HOST.with(|h| h.take()) else {
        return f(None);
    };
    // SAFETY: set by a live `HostGuard` on this thread (see there), and
    // taken out of the cell, so this is the only reference.
    let r = f(Some(unsafe { p.as_mut() }));
    HOST.with(|h| h.set(Some(p)));
    r
}
