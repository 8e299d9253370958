//! The Lua debugger behind SCRIPT DEBUG (Redis's LDB): the session state,
//! the line hook that stops the script, the debugger commands and their
//! replies, and the `redis.debug` / `redis.breakpoint` functions.
//!
//! A session talks to its client directly through [`DebugIo`] from inside
//! the running script (the hook reads the next debugger command and writes
//! the logs as an array of status replies), as Redis does with the client's
//! socket; the script's own reply follows the `<endsession>` log through the
//! ordinary reply path. Lua errors longjmp: the hook and the functions here
//! compute what to raise first and raise it once every Rust value is gone
//! (as in `raw`).
//!
//! The session and the points where the running script enters it (the line
//! hook, `redis.debug`, `redis.breakpoint`, what `redis.call` logs) are
//! here; apart are the wire protocol with the client (`protocol`), the
//! commands at the prompt (`commands`), breakpoints (`breakpoints`) and how
//! values and replies are shown (`show`).

use mlua::ffi::{self, lua_Debug, lua_State};
use std::ffi::CStr;
use std::os::raw::{c_char, c_int};
use std::time::Instant;

mod breakpoints;
mod commands;
mod protocol;
mod show;

use commands::{repl, Repl};
use show::{cat_value, resp_to_human};

/// The debugging client's connection, used blocking while the script runs.
pub trait DebugIo: Send {
    /// Reads what the client sent into `buf`; 0 once it is gone.
    fn read(&mut self, buf: &mut [u8]) -> usize;
    /// Writes all of `b` (a client that does not read loses it).
    fn write(&mut self, b: &[u8]);
}

const MAX_BREAKPOINTS: usize = 64;
const MAX_LEN_DEFAULT: usize = 256;
/// The hook's instruction count between two timeout checks.
const COUNT: c_int = 100_000;

/// One debugging session (an EVAL run after SCRIPT DEBUG).
pub struct Debugger {
    io: Box<dyn DebugIo>,
    logs: Vec<Vec<u8>>,
    bp: [i32; MAX_BREAKPOINTS],
    bpcount: usize,
    /// Stop at the next line whatever the breakpoints.
    step: bool,
    /// Stop at the next line: `redis.breakpoint()` was called.
    luabp: bool,
    src: Vec<Vec<u8>>,
    currentline: i32,
    /// Debugger commands read and not yet parsed.
    cbuf: Vec<u8>,
    maxlen: usize,
    maxlen_hint_sent: bool,
    /// Since when the script runs without stopping, and how long it may
    /// before the debugger stops it as an infinite loop.
    since: Instant,
    timeout_ms: u128,
}

impl Debugger {
    /// A session for the script `body`, stopping at its first line. It may
    /// run `busy_ms` (`busy-reply-threshold`, 0 for 5 s) between two stops.
    pub fn new(io: Box<dyn DebugIo>, body: &[u8], busy_ms: i64) -> Debugger {
        let mut end = body.len();
        while end > 0 && matches!(body[end - 1], b'\n' | b'\r') {
            end -= 1;
        }
        let src = body[..end].split(|&c| c == b'\n').map(<[u8]>::to_vec);
        let src = if end == 0 { Vec::new() } else { src.collect() };
        Debugger {
            io,
            logs: Vec::new(),
            bp: [0; MAX_BREAKPOINTS],
            bpcount: 0,
            step: true,
            luabp: false,
            src,
            currentline: 0,
            cbuf: Vec::new(),
            maxlen: MAX_LEN_DEFAULT,
            maxlen_hint_sent: false,
            since: Instant::now(),
            timeout_ms: if busy_ms > 0 { busy_ms as u128 } else { 5000 },
        }
    }

    /// Ends the session: the last logs and `<endsession>` go to the client
    /// (the script's reply follows, then the connection closes).
    pub fn end(mut self) {
        self.log(b"<endsession>".to_vec());
        self.send_logs();
    }

    pub(crate) fn restart_clock(&mut self) {
        self.since = Instant::now();
    }

    fn log(&mut self, entry: Vec<u8>) {
        self.logs.push(entry);
    }

    /// Logs `entry` cut at `maxlen`, with a hint the first time.
    fn log_max(&mut self, mut entry: Vec<u8>) {
        if self.maxlen > 0 && entry.len() > self.maxlen {
            entry.truncate(self.maxlen);
            entry.extend_from_slice(b" ...");
            self.log(entry);
            if !self.maxlen_hint_sent {
                self.maxlen_hint_sent = true;
                self.log(
                    b"<hint> The above reply was trimmed. Use 'maxlen 0' to disable trimming."
                        .to_vec(),
                );
            }
        } else {
            self.log(entry);
        }
    }

    fn source_line(&self, line: i32) -> &[u8] {
        match usize::try_from(line - 1).ok().and_then(|i| self.src.get(i)) {
            Some(l) => l,
            None => b"<out of range source code line>",
        }
    }

    fn log_source_line(&mut self, line: i32) {
        let prefix = match (self.currentline == line, self.is_breakpoint(line)) {
            (true, true) => "->#",
            (true, false) => "-> ",
            (false, true) => "  #",
            (false, false) => "   ",
        };
        let mut s = format!("{prefix}{line:<3} ").into_bytes();
        s.extend_from_slice(self.source_line(line));
        self.log(s);
    }

    fn list(&mut self, around: i32, context: i32) {
        for j in 1..=self.src.len() as i32 {
            if around != 0 && (around - j).abs() > context {
                continue;
            }
            self.log_source_line(j);
        }
    }
}

thread_local! {
    /// The session of the script running on this thread, if debugged.
    static ACTIVE: std::cell::Cell<Option<std::ptr::NonNull<Debugger>>> = const { std::cell::Cell::new(None) };
}

/// Makes `d` the running script's debugger until dropped.
pub(crate) struct ActiveGuard;

impl ActiveGuard {
    pub(crate) fn set(d: &mut Debugger) -> ActiveGuard {
        ACTIVE.with(|a| a.set(Some(std::ptr::NonNull::from(d))));
        ActiveGuard
    }
}

impl Drop for ActiveGuard {
    fn drop(&mut self) {
        ACTIVE.with(|a| a.set(None));
    }
}

/// Runs `f` with the session, if one is active (taken for the call, so a
/// nested use finds none).
fn with_active<R>(f: impl FnOnce(Option<&mut Debugger>) -> R) -> R {
    let Some(mut p) = ACTIVE.with(|a| a.take()) else {
        return f(None);
    };
    // SAFETY: set by a live `ActiveGuard` on this thread, whose `&mut`
    // outlives the run; taken out of the cell, so this is the only one.
    let r = f(Some(unsafe { p.as_mut() }));
    ACTIVE.with(|a| a.set(Some(p)));
    r
}

/// Runs `f` with the session back in place for the Lua code it runs
/// (`redis.call` logs through it).
fn release<R>(d: &mut Debugger, f: impl FnOnce() -> R) -> R {
    ACTIVE.with(|a| a.set(Some(std::ptr::NonNull::from(&mut *d))));
    let r = f();
    ACTIVE.with(|a| a.set(None));
    r
}

/// Installs the debugger's hook on the interpreter's state.
///
/// # Safety
/// `l` must be the state scripts run on.
pub(crate) unsafe fn install_hook(l: *mut lua_State) {
    ffi::lua_sethook(l, Some(hook), ffi::LUA_MASKLINE | ffi::LUA_MASKCOUNT, COUNT);
}

/// Whether a session is stepping (`redis.call` logs its commands).
pub(crate) fn stepping() -> bool {
    with_active(|d| d.is_some_and(|d| d.step))
}

/// `redis.call` is about to run `argv`: logged while stepping.
pub(crate) fn log_command(argv: &[bytes::Bytes]) {
    with_active(|d| {
        let Some(d) = d.filter(|d| d.step) else {
            return;
        };
        let mut s = b"<redis>".to_vec();
        for (j, a) in argv.iter().enumerate() {
            if j == 10 {
                s.extend_from_slice(format!(" ... ({} more)", argv.len() - j - 1).as_bytes());
                break;
            }
            s.push(b' ');
            s.extend_from_slice(a);
        }
        d.log(s);
    });
}

/// The reply `redis.call` got, logged while stepping: a refusal of the
/// script's call (`refused`) as an error only, a command's error reply as
/// both.
pub(crate) fn log_reply(reply: &[u8], refused: bool) {
    with_active(|d| {
        let Some(d) = d.filter(|d| d.step) else {
            return;
        };
        let first = reply
            .windows(2)
            .position(|w| w == b"\r\n")
            .map_or(reply, |n| &reply[..n]);
        if refused {
            log_error(d, first.strip_prefix(b"-").unwrap_or(first));
            return;
        }
        if first.first() == Some(&b'-') {
            let mut e = b"<error> ".to_vec();
            e.extend_from_slice(first);
            d.log(e);
        }
        let mut s = b"<reply> ".to_vec();
        resp_to_human(&mut s, reply, 0);
        d.log_max(s);
    });
}

/// An error `redis.call` raises on its own, logged while stepping.
pub(crate) fn log_call_error(msg: &[u8]) {
    with_active(|d| {
        if let Some(d) = d.filter(|d| d.step) {
            log_error(d, msg);
        }
    });
}

fn log_error(d: &mut Debugger, msg: &[u8]) {
    let mut e = b"<error> ".to_vec();
    e.extend_from_slice(msg.strip_prefix(b"ERR ").unwrap_or(msg));
    d.log(e);
}

fn c_text(p: *const c_char) -> Vec<u8> {
    if p.is_null() {
        return Vec::new();
    }
    // SAFETY: Lua hands out NUL-terminated strings.
    unsafe { CStr::from_ptr(p) }.to_bytes().to_vec()
}

fn short_src(ar: &lua_Debug) -> Vec<u8> {
    c_text(ar.short_src.as_ptr())
}

/// The line hook of a debugged run: stops at the script's lines when
/// stepping or at a breakpoint, and on a long run without stops.
unsafe extern "C-unwind" fn hook(l: *mut lua_State, ar: *mut lua_Debug) {
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        with_active(|d| d.and_then(|d| hook_body(l, ar, d)))
    }));
    let Ok(Some(msg)) = r else {
        return;
    };
    ffi::lua_pushlstring_(l, msg.as_ptr() as *const c_char, msg.len());
    drop(msg);
    ffi::lua_error(l);
}

unsafe fn hook_body(l: *mut lua_State, ar: *mut lua_Debug, d: &mut Debugger) -> Option<Vec<u8>> {
    ffi::lua_getstack(l, 0, ar);
    ffi::lua_getinfo(l, c"Sl".as_ptr(), ar);
    d.currentline = (*ar).currentline;
    let bp = d.is_breakpoint(d.currentline) || d.luabp;
    if !short_src(&*ar).windows(11).any(|w| w == b"user_script") {
        return None;
    }
    let mut timeout = false;
    if (*ar).event == ffi::LUA_HOOKCOUNT && !d.step && !bp {
        if d.since.elapsed().as_millis() < d.timeout_ms {
            return None;
        }
        timeout = true;
        d.step = true;
    }
    if !(d.step || bp) {
        return None;
    }
    let reason = if bp {
        if d.luabp {
            "redis.breakpoint() called"
        } else {
            "break point"
        }
    } else if timeout {
        "timeout reached, infinite loop?"
    } else {
        "step over"
    };
    d.step = false;
    d.luabp = false;
    d.log(format!("* Stopped at {}, stop reason = {reason}", d.currentline).into_bytes());
    d.log_source_line(d.currentline);
    d.send_logs();
    let r = repl(l, d);
    d.restart_clock();
    crate::host::with_host(|h| h.map(|h| h.resumed()));
    match r {
        Repl::Raise(m) => Some(m),
        Repl::Gone if timeout => {
            Some(b"timeout during Lua debugging with client closing connection".to_vec())
        }
        _ => None,
    }
}

/// `redis.debug(...)`: logs its arguments in a debugging session.
pub(crate) unsafe extern "C-unwind" fn redis_debug(l: *mut lua_State) -> c_int {
    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        with_active(|d| {
            let Some(d) = d else {
                return;
            };
            let argc = ffi::lua_gettop(l);
            let mut s = format!("<debug> line {}: ", d.currentline).into_bytes();
            for i in 1..=argc {
                cat_value(l, &mut s, i, 0);
                if i != argc {
                    s.extend_from_slice(b", ");
                }
            }
            d.log(s);
        })
    }));
    0
}

/// `redis.breakpoint()`: stops at the next line in a debugging session.
pub(crate) unsafe extern "C-unwind" fn redis_breakpoint(l: *mut lua_State) -> c_int {
    let active = with_active(|d| match d {
        Some(d) => {
            d.luabp = true;
            true
        }
        None => false,
    });
    ffi::lua_pushboolean(l, active as c_int);
    1
}
