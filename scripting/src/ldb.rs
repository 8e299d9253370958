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

use mlua::ffi::{self, lua_Debug, lua_State};
use std::ffi::CStr;
use std::os::raw::{c_char, c_int};
use std::time::Instant;

/// The debugging client's connection, used blocking while the script runs.
pub trait DebugIo: Send {
    /// Reads what the client sent into `buf`; 0 once it is gone.
    fn read(&mut self, buf: &mut [u8]) -> usize;
    /// Writes all of `b` (a client that does not read loses it).
    fn write(&mut self, b: &[u8]);
}

const MAX_BREAKPOINTS: usize = 64;
const MAX_LEN_DEFAULT: usize = 256;
/// Nesting shown of a table inside a value (`LUA_MINSTACK / 2`).
const MAX_DEPTH: usize = 10;
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

    /// The logs as one array of status replies.
    fn send_logs(&mut self) {
        let mut proto = format!("*{}\r\n", self.logs.len()).into_bytes();
        for l in self.logs.drain(..) {
            proto.push(b'+');
            proto.extend(
                l.iter()
                    .map(|&c| if c == b'\r' || c == b'\n' { b' ' } else { c }),
            );
            proto.extend_from_slice(b"\r\n");
        }
        self.io.write(&proto);
    }

    fn source_line(&self, line: i32) -> &[u8] {
        match usize::try_from(line - 1).ok().and_then(|i| self.src.get(i)) {
            Some(l) => l,
            None => b"<out of range source code line>",
        }
    }

    fn is_breakpoint(&self, line: i32) -> bool {
        self.bp[..self.bpcount].contains(&line)
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

    fn add_breakpoint(&mut self, line: i32) -> bool {
        if line <= 0 || line as usize > self.src.len() {
            return false;
        }
        if !self.is_breakpoint(line) && self.bpcount != MAX_BREAKPOINTS {
            self.bp[self.bpcount] = line;
            self.bpcount += 1;
            return true;
        }
        false
    }

    fn del_breakpoint(&mut self, line: i32) -> bool {
        let Some(j) = self.bp[..self.bpcount].iter().position(|&b| b == line) else {
            return false;
        };
        self.bpcount -= 1;
        // Redis moves `bpcount - j` bytes, not entries: removing one but
        // the last breakpoint leaves the list as Redis's does.
        let mut bytes: Vec<u8> = self.bp.iter().flat_map(|b| b.to_ne_bytes()).collect();
        let from = (j + 1) * 4;
        bytes.copy_within(from..from + (self.bpcount - j), j * 4);
        for (b, c) in self.bp.iter_mut().zip(bytes.chunks_exact(4)) {
            *b = i32::from_ne_bytes([c[0], c[1], c[2], c[3]]);
        }
        true
    }

    fn breakpoints(&mut self, argv: &[Vec<u8>]) {
        if argv.len() == 1 {
            if self.bpcount == 0 {
                self.log(b"No breakpoints set. Use 'b <line>' to add one.".to_vec());
            } else {
                self.log(format!("{} breakpoints set:", self.bpcount).into_bytes());
                for j in 0..self.bpcount {
                    self.log_source_line(self.bp[j]);
                }
            }
            return;
        }
        for arg in &argv[1..] {
            let Some(line) = std::str::from_utf8(arg)
                .ok()
                .filter(|s| strict_int(s))
                .and_then(|s| s.parse::<i64>().ok())
            else {
                let mut m = b"Invalid argument:'".to_vec();
                m.extend_from_slice(cstr(arg));
                m.push(b'\'');
                self.log(m);
                continue;
            };
            if line == 0 {
                self.bpcount = 0;
                self.log(b"All breakpoints removed.".to_vec());
            } else if line > 0 {
                if self.bpcount == MAX_BREAKPOINTS {
                    self.log(b"Too many breakpoints set.".to_vec());
                } else if self.add_breakpoint(line.try_into().unwrap_or(-1)) {
                    self.list(line as i32, 1);
                } else {
                    self.log(b"Wrong line number.".to_vec());
                }
            } else if self.del_breakpoint((-line).try_into().unwrap_or(0)) {
                self.log(b"Breakpoint removed.".to_vec());
            } else {
                self.log(b"No breakpoint in the specified line.".to_vec());
            }
        }
    }

    fn maxlen_cmd(&mut self, argv: &[Vec<u8>]) {
        if argv.len() == 2 {
            let mut n = atoi(&argv[1]);
            self.maxlen_hint_sent = true;
            if n != 0 && n <= 60 {
                n = 60;
            }
            self.maxlen = n as usize;
        }
        let m = if self.maxlen > 0 {
            format!("<value> replies are truncated at {} bytes.", self.maxlen)
        } else {
            "<value> replies are unlimited.".to_string()
        };
        self.log(m.into_bytes());
    }

    /// Parses one command out of `cbuf` as Redis's debugger does (a
    /// forgiving multibulk reader with small limits).
    fn parse_command(&self) -> Parsed {
        let buf = &self.cbuf;
        if buf.is_empty() {
            return Parsed::More;
        }
        // Headers are read as C strings: a NUL ends them.
        let Some(star) = buf.iter().take_while(|&&c| c != 0).position(|&c| c == b'*') else {
            return Parsed::Error;
        };
        let Some(eol) = header_end(buf, star) else {
            return Parsed::More;
        };
        let argc = atoi(&buf[star + 1..eol]);
        if argc <= 0 || argc > 1024 {
            return Parsed::Error;
        }
        let mut p = eol + 2;
        let mut argv = Vec::with_capacity(argc as usize);
        while argv.len() < argc as usize {
            match buf.get(p) {
                None | Some(0) => return Parsed::More,
                Some(b'$') => {}
                Some(_) => return Parsed::Error,
            }
            let Some(eol) = header_end(buf, p) else {
                return Parsed::More;
            };
            let len = atoi(&buf[p + 1..eol]);
            if len <= 0 || len > 1024 {
                return Parsed::Error;
            }
            let start = eol + 2;
            let end = start + len as usize;
            if end + 2 > buf.len() {
                return Parsed::More;
            }
            argv.push(buf[start..end].to_vec());
            if &buf[end..end + 2] != b"\r\n" {
                return Parsed::Error;
            }
            p = end + 2;
        }
        Parsed::Command(argv)
    }
}

enum Parsed {
    More,
    Error,
    Command(Vec<Vec<u8>>),
}

/// The bytes before the first NUL, as C's string functions see them.
fn cstr(b: &[u8]) -> &[u8] {
    b.iter().position(|&c| c == 0).map_or(b, |n| &b[..n])
}

/// Where the `\r\n` ending the header at `from` is, unless a NUL or the
/// end of the buffer comes first (C's `strstr` on the header).
fn header_end(b: &[u8], from: usize) -> Option<usize> {
    let mut i = from;
    while let Some(&c) = b.get(i) {
        match c {
            0 => return None,
            b'\r' if b.get(i + 1) == Some(&b'\n') => return Some(i),
            _ => i += 1,
        }
    }
    None
}

fn find_crlf(b: &[u8], from: usize) -> Option<usize> {
    b.get(from..)?
        .windows(2)
        .position(|w| w == b"\r\n")
        .map(|n| from + n)
}

/// C's `atoi`: leading spaces, a sign, digits, anything after ignored.
fn atoi(b: &[u8]) -> i64 {
    let b = cstr(b);
    let mut i = 0;
    while i < b.len() && matches!(b[i], b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c) {
        i += 1;
    }
    let neg = match b.get(i) {
        Some(b'-') => {
            i += 1;
            true
        }
        Some(b'+') => {
            i += 1;
            false
        }
        _ => false,
    };
    let mut n: i64 = 0;
    while let Some(d) = b.get(i).filter(|c| c.is_ascii_digit()) {
        n = n.saturating_mul(10).saturating_add((d - b'0') as i64);
        i += 1;
    }
    let n = if neg { -n } else { n };
    // `atoi` returns an int.
    n as i32 as i64
}

/// Redis's `string2l`: an optional minus, digits, no leading zero, nothing else.
fn strict_int(s: &str) -> bool {
    let d = s.strip_prefix('-').unwrap_or(s);
    !d.is_empty()
        && d.bytes().all(|c| c.is_ascii_digit())
        && (d == "0" && !s.starts_with('-') || !d.starts_with('0'))
}

/// Whether the command word (read as a C string) is one of `names`.
fn is(arg: &[u8], names: &[&str]) -> bool {
    let a = cstr(arg);
    names.iter().any(|n| a.eq_ignore_ascii_case(n.as_bytes()))
}

/// `"..."` with escapes, as Redis's `sdscatrepr`.
pub(crate) fn repr(out: &mut Vec<u8>, s: &[u8]) {
    out.push(b'"');
    for &c in s {
        match c {
            b'\\' | b'"' => out.extend_from_slice(&[b'\\', c]),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' => out.extend_from_slice(b"\\t"),
            7 => out.extend_from_slice(b"\\a"),
            8 => out.extend_from_slice(b"\\b"),
            c if c.is_ascii_graphic() || c == b' ' => out.push(c),
            c => out.extend_from_slice(format!("\\x{c:02x}").as_bytes()),
        }
    }
    out.push(b'"');
}

/// C's `%g`.
fn fmt_g(n: f64) -> String {
    if n.is_nan() {
        return if n.is_sign_negative() { "-nan" } else { "nan" }.into();
    }
    if n.is_infinite() {
        return if n < 0.0 { "-inf" } else { "inf" }.into();
    }
    if n == 0.0 {
        return if n.is_sign_negative() { "-0" } else { "0" }.into();
    }
    let sci = format!("{n:.5e}");
    let (mant, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let trim = |s: String| -> String {
        if s.contains('.') {
            s.trim_end_matches('0').trim_end_matches('.').to_string()
        } else {
            s
        }
    };
    if !(-4..6).contains(&exp) {
        let sign = if exp < 0 { '-' } else { '+' };
        format!("{}e{sign}{:02}", trim(mant.to_string()), exp.abs())
    } else {
        trim(format!("{n:.*}", (5 - exp) as usize))
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

/// Appends the reply at `r[pos..]` in Redis's human form; where the next
/// one starts.
fn resp_to_human(o: &mut Vec<u8>, r: &[u8], pos: usize) -> usize {
    let Some(&t) = r.get(pos) else {
        return pos;
    };
    let Some(eol) = find_crlf(r, pos) else {
        return r.len();
    };
    let line = &r[pos + 1..eol];
    let next = eol + 2;
    let count = || {
        std::str::from_utf8(line)
            .ok()
            .and_then(|s| s.parse::<i64>().ok())
    };
    match t {
        b':' => {
            o.extend_from_slice(line);
            next
        }
        b'$' => match count() {
            Some(n) if n >= 0 => {
                let end = (next + n as usize).min(r.len());
                repr(o, &r[next..end]);
                end + 2
            }
            _ => {
                o.extend_from_slice(b"NULL");
                next
            }
        },
        b'+' | b'-' => {
            repr(o, &r[pos..eol]);
            next
        }
        b'*' | b'~' | b'%' => {
            let n = count().unwrap_or(-1);
            if n < 0 {
                o.extend_from_slice(b"NULL");
                return next;
            }
            let (open, close) = match t {
                b'*' => (&b"["[..], b']'),
                b'~' => (&b"~("[..], b')'),
                _ => (&b"{"[..], b'}'),
            };
            o.extend_from_slice(open);
            let mut p = next;
            for j in 0..n {
                p = resp_to_human(o, r, p);
                if t == b'%' {
                    o.extend_from_slice(b" => ");
                    p = resp_to_human(o, r, p);
                }
                if j != n - 1 {
                    o.push(b',');
                }
            }
            o.push(close);
            p
        }
        b'_' => {
            o.extend_from_slice(b"(null)");
            next
        }
        b'#' => {
            o.extend_from_slice(if line == b"t" { b"#true" } else { b"#false" });
            next
        }
        b',' => {
            o.extend_from_slice(b"(double) ");
            o.extend_from_slice(line);
            next
        }
        _ => r.len(),
    }
}

/// Appends the value at `idx` (absolute) as the debugger shows it.
unsafe fn cat_value(l: *mut lua_State, s: &mut Vec<u8>, idx: c_int, level: usize) {
    if level == MAX_DEPTH {
        s.extend_from_slice(b"<max recursion level reached! Nested table?>");
        return;
    }
    let t = ffi::lua_type(l, idx);
    match t {
        ffi::LUA_TSTRING => {
            let mut len = 0usize;
            let p = ffi::lua_tolstring(l, idx, &mut len);
            repr(s, std::slice::from_raw_parts(p as *const u8, len));
        }
        ffi::LUA_TBOOLEAN => s.extend_from_slice(if ffi::lua_toboolean(l, idx) != 0 {
            b"true"
        } else {
            b"false"
        }),
        ffi::LUA_TNUMBER => s.extend_from_slice(fmt_g(ffi::lua_tonumber(l, idx)).as_bytes()),
        ffi::LUA_TNIL => s.extend_from_slice(b"nil"),
        ffi::LUA_TTABLE => {
            if ffi::lua_checkstack(l, 3) == 0 {
                return;
            }
            let mut expected = 1.0;
            let mut is_array = true;
            let (mut arr, mut full) = (Vec::new(), Vec::new());
            ffi::lua_pushnil(l);
            while ffi::lua_next(l, idx) != 0 {
                let v = ffi::lua_gettop(l);
                if is_array
                    && (ffi::lua_type(l, v - 1) != ffi::LUA_TNUMBER
                        || ffi::lua_tonumber(l, v - 1) != expected)
                {
                    is_array = false;
                }
                cat_value(l, &mut arr, v, level + 1);
                arr.extend_from_slice(b"; ");
                full.push(b'[');
                cat_value(l, &mut full, v - 1, level + 1);
                full.extend_from_slice(b"]=");
                cat_value(l, &mut full, v, level + 1);
                full.extend_from_slice(b"; ");
                ffi::lua_pop(l, 1);
                expected += 1.0;
            }
            let body = if is_array { arr } else { full };
            s.push(b'{');
            s.extend_from_slice(&body[..body.len().saturating_sub(2)]);
            s.push(b'}');
        }
        _ => {
            let name = match t {
                ffi::LUA_TFUNCTION => "function",
                ffi::LUA_TUSERDATA => "userdata",
                ffi::LUA_TTHREAD => "thread",
                ffi::LUA_TLIGHTUSERDATA => "light-userdata",
                _ => "unknown",
            };
            let p = ffi::lua_topointer(l, idx);
            s.extend_from_slice(format!("\"{name}@{p:p}\"").as_bytes());
        }
    }
}

/// Logs the value on top of the stack after `prefix`, cut at `maxlen`.
unsafe fn log_top(l: *mut lua_State, d: &mut Debugger, prefix: &[u8]) {
    let mut s = prefix.to_vec();
    cat_value(l, &mut s, ffi::lua_gettop(l), 0);
    d.log_max(s);
}

fn c_text(p: *const c_char) -> Vec<u8> {
    if p.is_null() {
        return Vec::new();
    }
    // SAFETY: Lua hands out NUL-terminated strings.
    unsafe { CStr::from_ptr(p) }.to_bytes().to_vec()
}

unsafe fn print_var(l: *mut lua_State, d: &mut Debugger, name: &[u8]) {
    let name = cstr(name);
    let mut ar: lua_Debug = std::mem::zeroed();
    let mut level = 0;
    while ffi::lua_getstack(l, level, &mut ar) != 0 {
        level += 1;
        let mut i = 1;
        loop {
            let n = ffi::lua_getlocal(l, &ar, i);
            if n.is_null() {
                break;
            }
            i += 1;
            if CStr::from_ptr(n).to_bytes() == name {
                log_top(l, d, b"<value> ");
                ffi::lua_pop(l, 1);
                return;
            }
            ffi::lua_pop(l, 1);
        }
    }
    if name == b"ARGV" || name == b"KEYS" {
        ffi::lua_getfield(
            l,
            ffi::LUA_GLOBALSINDEX,
            if name == b"ARGV" {
                c"ARGV".as_ptr()
            } else {
                c"KEYS".as_ptr()
            },
        );
        log_top(l, d, b"<value> ");
        ffi::lua_pop(l, 1);
    } else {
        d.log(b"No such variable.".to_vec());
    }
}

unsafe fn print_all(l: *mut lua_State, d: &mut Debugger) {
    let mut ar: lua_Debug = std::mem::zeroed();
    let mut vars = 0;
    if ffi::lua_getstack(l, 0, &mut ar) != 0 {
        let mut i = 1;
        loop {
            let n = ffi::lua_getlocal(l, &ar, i);
            if n.is_null() {
                break;
            }
            i += 1;
            let name = c_text(n);
            if !name.windows(12).any(|w| w == b"(*temporary)") {
                let mut prefix = b"<value> ".to_vec();
                prefix.extend_from_slice(&name);
                prefix.extend_from_slice(b" = ");
                log_top(l, d, &prefix);
                vars += 1;
            }
            ffi::lua_pop(l, 1);
        }
    }
    if vars == 0 {
        d.log(b"No local variables in the current context.".to_vec());
    }
}

unsafe fn trace(l: *mut lua_State, d: &mut Debugger) {
    let mut ar: lua_Debug = std::mem::zeroed();
    let mut level = 0;
    while ffi::lua_getstack(l, level, &mut ar) != 0 {
        ffi::lua_getinfo(l, c"Snl".as_ptr(), &mut ar);
        if short_src(&ar).windows(11).any(|w| w == b"user_script") {
            let name = if ar.name.is_null() {
                b"top level".to_vec()
            } else {
                c_text(ar.name)
            };
            let mut s = if level == 0 {
                b"In ".to_vec()
            } else {
                b"From ".to_vec()
            };
            s.extend_from_slice(&name);
            s.push(b':');
            d.log(s);
            d.log_source_line(ar.currentline);
        }
        level += 1;
    }
    if level == 0 {
        d.log(b"<error> Can't retrieve Lua stack.".to_vec());
    }
}

fn short_src(ar: &lua_Debug) -> Vec<u8> {
    c_text(ar.short_src.as_ptr())
}

/// The error text on top of the stack (popped).
unsafe fn pop_error(l: *mut lua_State) -> Vec<u8> {
    let mut len = 0usize;
    let p = ffi::lua_tolstring(l, -1, &mut len);
    let e = if p.is_null() {
        Vec::new()
    } else {
        std::slice::from_raw_parts(p as *const u8, len).to_vec()
    };
    ffi::lua_pop(l, 1);
    e
}

unsafe fn eval(l: *mut lua_State, d: &mut Debugger, argv: &[Vec<u8>]) {
    let code = argv[1..].join(&b' ');
    let expr = [&b"return "[..], &code].concat();
    let name = c"@ldb_eval".as_ptr();
    if ffi::luaL_loadbuffer(l, expr.as_ptr() as *const c_char, expr.len(), name) != 0 {
        ffi::lua_pop(l, 1);
        if ffi::luaL_loadbuffer(l, code.as_ptr() as *const c_char, code.len(), name) != 0 {
            let mut e = b"<error> ".to_vec();
            e.extend_from_slice(&pop_error(l));
            d.log(e);
            return;
        }
    }
    // The code may step into `redis.call`, which logs through the session.
    let status = release(d, || ffi::lua_pcall(l, 0, 1, 0));
    if status != 0 {
        let mut e = b"<error> ".to_vec();
        e.extend_from_slice(&pop_error(l));
        d.log(e);
        return;
    }
    log_top(l, d, b"<retval> ");
    ffi::lua_pop(l, 1);
}

/// Runs `f` with the session back in place for the Lua code it runs
/// (`redis.call` logs through it).
fn release<R>(d: &mut Debugger, f: impl FnOnce() -> R) -> R {
    ACTIVE.with(|a| a.set(Some(std::ptr::NonNull::from(&mut *d))));
    let r = f();
    ACTIVE.with(|a| a.set(None));
    r
}

unsafe fn redis_cmd(l: *mut lua_State, d: &mut Debugger, argv: &[Vec<u8>]) {
    if ffi::lua_checkstack(l, argv.len() as c_int + 1) == 0 {
        d.log(b"<reply> ".to_vec());
        return;
    }
    ffi::lua_getfield(l, ffi::LUA_GLOBALSINDEX, c"redis".as_ptr());
    ffi::lua_getfield(l, -1, c"call".as_ptr());
    for a in &argv[1..] {
        ffi::lua_pushlstring_(l, a.as_ptr() as *const c_char, a.len());
    }
    d.step = true;
    release(d, || ffi::lua_pcall(l, argv.len() as c_int - 1, 1, 0));
    d.step = false;
    ffi::lua_pop(l, 2);
}

/// How a debugger prompt ended.
enum Repl {
    /// Back to the script.
    Resume,
    /// The client is gone: the script runs on without stopping.
    Gone,
    /// Raise this error in the script.
    Raise(Vec<u8>),
}

const HELP: &[&str] = &[
    "Redis Lua debugger help:",
    "[h]elp               Show this help.",
    "[s]tep               Run current line and stop again.",
    "[n]ext               Alias for step.",
    "[c]ontinue           Run till next breakpoint.",
    "[l]ist               List source code around current line.",
    "[l]ist [line]        List source code around [line].",
    "                     line = 0 means: current position.",
    "[l]ist [line] [ctx]  In this form [ctx] specifies how many lines",
    "                     to show before/after [line].",
    "[w]hole              List all source code. Alias for 'list 1 1000000'.",
    "[p]rint              Show all the local variables.",
    "[p]rint <var>        Show the value of the specified variable.",
    "                     Can also show global vars KEYS and ARGV.",
    "[b]reak              Show all breakpoints.",
    "[b]reak <line>       Add a breakpoint to the specified line.",
    "[b]reak -<line>      Remove breakpoint from the specified line.",
    "[b]reak 0            Remove all breakpoints.",
    "[t]race              Show a backtrace.",
    "[e]val <code>        Execute some Lua code (in a different callframe).",
    "[r]edis <cmd>        Execute a Redis command.",
    "[m]axlen [len]       Trim logged Redis replies and Lua var dumps to len.",
    "                     Specifying zero as <len> means unlimited.",
    "[a]bort              Stop the execution of the script. In sync",
    "                     mode dataset changes will be retained.",
    "",
    "Debugger functions you can call from Lua scripts:",
    "redis.debug()        Produce logs in the debugger console.",
    "redis.breakpoint()   Stop execution like if there was a breakpoint in the",
    "                     next line of code.",
];

/// Reads and runs debugger commands until one resumes the script.
unsafe fn repl(l: *mut lua_State, d: &mut Debugger) -> Repl {
    loop {
        let argv = loop {
            match d.parse_command() {
                Parsed::Command(a) => break a,
                Parsed::Error => return Repl::Raise(b"protocol error".to_vec()),
                Parsed::More => {}
            }
            let mut buf = [0u8; 1024];
            let n = d.io.read(&mut buf);
            if n == 0 {
                d.step = false;
                d.bpcount = 0;
                return Repl::Gone;
            }
            d.cbuf.extend_from_slice(&buf[..n]);
            if d.cbuf.len() > 1 << 20 {
                d.cbuf = Vec::new();
                return Repl::Raise(b"max client buffer reached".to_vec());
            }
        };
        d.cbuf.clear();
        let cmd = &argv[0];
        if is(cmd, &["h", "help"]) {
            for h in HELP {
                d.log(h.as_bytes().to_vec());
            }
        } else if is(cmd, &["s", "step", "n", "next"]) {
            d.step = true;
            return Repl::Resume;
        } else if is(cmd, &["c", "continue"]) {
            return Repl::Resume;
        } else if is(cmd, &["t", "trace"]) {
            trace(l, d);
        } else if is(cmd, &["m", "maxlen"]) {
            d.maxlen_cmd(&argv);
        } else if is(cmd, &["b", "break"]) {
            d.breakpoints(&argv);
        } else if is(cmd, &["e", "eval"]) {
            eval(l, d, &argv);
        } else if is(cmd, &["a", "abort"]) {
            return Repl::Raise(b"script aborted for user request".to_vec());
        } else if argv.len() > 1 && is(cmd, &["r", "redis"]) {
            redis_cmd(l, d, &argv);
        } else if is(cmd, &["p", "print"]) {
            if argv.len() == 2 {
                print_var(l, d, &argv[1]);
            } else {
                print_all(l, d);
            }
        } else if is(cmd, &["l", "list"]) {
            let mut around = d.currentline;
            let mut ctx = 5;
            if let Some(a) = argv.get(1) {
                let n = atoi(a) as i32;
                if n > 0 {
                    around = n;
                }
            }
            if let Some(c) = argv.get(2) {
                ctx = atoi(c) as i32;
            }
            d.list(around, ctx);
        } else if is(cmd, &["w", "whole"]) {
            d.list(1, 1_000_000);
        } else {
            d.log(
                b"<error> Unknown Redis Lua debugger command or wrong number of arguments."
                    .to_vec(),
            );
        }
        d.send_logs();
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_print_as_c_g() {
        for (n, s) in [
            (1.0, "1"),
            (1.23456789, "1.23457"),
            (1e20, "1e+20"),
            (0.0001, "0.0001"),
            (1e-5, "1e-05"),
            (123456.0, "123456"),
            (1234567.0, "1.23457e+06"),
            (-2.5, "-2.5"),
        ] {
            assert_eq!(fmt_g(n), s);
        }
    }

    #[test]
    fn removing_a_breakpoint_moves_bytes_as_redis() {
        struct NoIo;
        impl DebugIo for NoIo {
            fn read(&mut self, _: &mut [u8]) -> usize {
                0
            }
            fn write(&mut self, _: &[u8]) {}
        }
        let mut d = Debugger::new(Box::new(NoIo), b"a\nb\nc\nd\ne\nf", 0);
        for l in [2, 4, 6] {
            assert!(d.add_breakpoint(l));
        }
        assert!(d.del_breakpoint(2));
        assert_eq!(&d.bp[..d.bpcount], &[4, 4]);
    }
}
