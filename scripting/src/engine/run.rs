//! The call path: a script or function run from the moment the engine is
//! asked for it (EVAL, EVALSHA, FCALL, SCRIPT DEBUG) to its reply, and the
//! instruction hook that watches it (SCRIPT KILL, the busy state).
//!
//! Apart from the engine's state and setup because it is the per-run hot
//! path: what happens on every run, and only that, is here.

use super::errors::raise;
use super::{
    now_ms, Engine, Host, RunError, RunFlags, GC_PERIOD, KILLED, LOAD_TIMEOUT, LOAD_TIMEOUT_MS,
    NUDGE_MS,
};
use crate::host::{with_host, HostGuard};
use bytes::Bytes;
use mlua::{HookTriggers, Lua, VmState};
use protocol::ReplyBuf;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

impl Engine {
    /// Runs the cached script `sha` with KEYS and ARGV; the reply goes to
    /// `out`, an error (already in Redis's form) is returned.
    pub fn run_script(
        &mut self,
        sha: &str,
        keys: &[Bytes],
        argv: &[Bytes],
        threshold_ms: i64,
        host: &mut dyn Host,
        out: &mut ReplyBuf,
    ) -> Result<(), RunError> {
        let Some(s) = self.scripts.get(sha) else {
            return Err("NOSCRIPT No matching script. Please use EVAL.".into());
        };
        let func = s.func.id();
        self.invoke(func, keys, argv, false, sha, threshold_ms, host, out)
    }

    /// Runs the cached script `sha` as `run_script` does, under the
    /// debugger `dbg` (SCRIPT DEBUG): it stops at the script's lines and
    /// talks to the client until the script ends.
    #[allow(clippy::too_many_arguments)]
    pub fn debug_script(
        &mut self,
        sha: &str,
        keys: &[Bytes],
        argv: &[Bytes],
        threshold_ms: i64,
        host: &mut dyn Host,
        out: &mut ReplyBuf,
        dbg: &mut crate::ldb::Debugger,
    ) -> Result<(), RunError> {
        let Some(s) = self.scripts.get(sha) else {
            return Err("NOSCRIPT No matching script. Please use EVAL.".into());
        };
        let func = s.func.id();
        // The session blocks this thread for as long as the client takes:
        // the other connections are handed to another one (they wait for
        // the state, as Redis's clients wait for its blocked loop).
        if let Some(nudge) = self.run.nudge.get() {
            nudge();
        }
        dbg.restart_clock();
        let guard = crate::ldb::ActiveGuard::set(dbg);
        // SAFETY: the runner's state is the one scripts run on.
        unsafe { crate::ldb::install_hook(self.runner.state()) };
        let res = self.invoke(func, keys, argv, false, sha, threshold_ms, host, out);
        drop(guard);
        set_run_hook(&self.lua, self.run.clone());
        res
    }

    /// FCALL: runs function `name` with its keys and arguments.
    pub fn call_function(
        &mut self,
        name: &str,
        keys: &[Bytes],
        argv: &[Bytes],
        threshold_ms: i64,
        host: &mut dyn Host,
        out: &mut ReplyBuf,
    ) -> Result<(), RunError> {
        let Some(f) = self.function(name) else {
            return Err("ERR Function not found".into());
        };
        let func = f.func.id();
        self.invoke(func, keys, argv, true, name, threshold_ms, host, out)
    }

    #[allow(clippy::too_many_arguments)]
    fn invoke(
        &mut self,
        func: std::os::raw::c_int,
        keys: &[Bytes],
        argv: &[Bytes],
        is_function: bool,
        name: &str,
        threshold_ms: i64,
        host: &mut dyn Host,
        out: &mut ReplyBuf,
    ) -> Result<(), RunError> {
        let run = self.run.clone();
        run.kill.store(false, Relaxed);
        run.wrote.store(false, Relaxed);
        run.busy.store(false, Relaxed);
        run.nudged.store(false, Relaxed);
        run.repl_skip.store(0, Relaxed);
        run.function.store(is_function, Relaxed);
        if let Ok(mut n) = run.name.lock() {
            n.clear();
            n.push_str(name);
        }
        run.threshold_ms.store(threshold_ms, Relaxed);
        run.start_ms.store(now_ms(), Relaxed);
        run.running.store(true, Relaxed);
        self.resp3.store(false, Relaxed);
        let call = crate::raw::Call {
            handler: self.handler.id(),
            func,
            keys,
            argv,
            as_params: is_function,
        };
        let guard = HostGuard::set(host);
        // SAFETY: `&mut self` holds the interpreter exclusively.
        let res = unsafe { self.runner.run(&call, name, &self.resp3, out) };
        drop(guard);
        run.running.store(false, Relaxed);
        run.busy.store(false, Relaxed);
        run.kill.store(false, Relaxed);
        // As Redis: a GC step every 50 runs, so garbage does not pile up
        // to what a full cycle would leave (memory and latency).
        self.runs = self.runs.wrapping_add(1);
        if self.runs.is_multiple_of(GC_PERIOD) {
            let _ = self.lua.gc_step_kbytes(GC_PERIOD as std::os::raw::c_int);
        }
        res
    }
}

/// The hook of ordinary runs: SCRIPT KILL, the load timeout, the busy
/// state and the nudge.
pub(super) fn set_run_hook(lua: &Lua, hook_run: Arc<RunFlags>) {
    lua.set_hook(
        HookTriggers::new().every_nth_instruction(10_000),
        move |_, _| {
            let f = &hook_run;
            if f.kill.load(Relaxed) {
                return Err(raise(KILLED));
            }
            if f.loading.load(Relaxed) {
                if now_ms() - f.start_ms.load(Relaxed) >= LOAD_TIMEOUT_MS {
                    return Err(raise(LOAD_TIMEOUT));
                }
                return Ok(VmState::Continue);
            }
            if !f.running.load(Relaxed) {
                return Ok(VmState::Continue);
            }
            let ran = now_ms() - f.start_ms.load(Relaxed);
            if !f.busy.load(Relaxed) && ran >= f.threshold_ms.load(Relaxed) {
                f.busy.store(true, Relaxed);
                let kill = if f.function.load(Relaxed) {
                    "FUNCTION KILL"
                } else {
                    "SCRIPT KILL"
                };
                let name = f.name.lock().map(|n| n.clone()).unwrap_or_default();
                tracing::warn!("Slow script detected: still in execution after {ran} milliseconds. You can try killing the script using the {kill} command. Script name is: {name}.");
            }
            if ran >= NUDGE_MS && !f.nudged.swap(true, Relaxed) {
                if let Some(nudge) = f.nudge.get() {
                    nudge();
                }
            }
            if f.busy.load(Relaxed) {
                with_host(|h| h.map(|h| h.while_busy()));
            }
            Ok(VmState::Continue)
        },
    );
}
