//! The per-run hot paths of scripting on the raw Lua C API: `redis.call` /
//! `redis.pcall`, KEYS and ARGV, and the script's result as a reply.
//!
//! Through mlua each of these took its lock, made and dropped a registry
//! reference per value and a `Frame` per reply; a grab script spent more
//! CPU on that than on its commands. Here arguments are read straight off
//! the Lua stack and replies go from RESP bytes straight onto it.
//!
//! Lua errors longjmp. The only ones raised on purpose (`redis.call`'s
//! error table) are raised after every Rust value of the call is gone;
//! otherwise only allocation failures can, which at worst leak a buffer
//! (as in `libs`).

use crate::host::{with_host, RunError};
use bytes::{BufMut, Bytes};
use mlua::ffi::{self, lua_State};
use protocol::{format_double, ReplyBuf};
use std::os::raw::{c_char, c_int, c_void};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};

unsafe fn push_bytes(l: *mut lua_State, b: &[u8]) {
    ffi::lua_pushlstring_(l, b.as_ptr() as *const c_char, b.len());
}

/// The string at `idx` (which must be a string: numbers would be converted
/// in place).
unsafe fn str_at<'a>(l: *mut lua_State, idx: c_int) -> &'a [u8] {
    let mut len = 0usize;
    let p = ffi::lua_tolstring(l, idx, &mut len);
    if p.is_null() {
        return &[];
    }
    std::slice::from_raw_parts(p as *const u8, len)
}

/// `t[k] = v` for the table on top, `v` a string.
unsafe fn set_str_field(l: *mut lua_State, k: &[u8], v: &[u8]) {
    push_bytes(l, k);
    push_bytes(l, v);
    ffi::lua_rawset(l, -3);
}

/// Pushes `{err = msg}`; a command's error also carries
/// `ignore_error_stats_update = true`, as Redis 7.0's does.
unsafe fn push_error_table(l: *mut lua_State, msg: &[u8], from_command: bool) {
    ffi::lua_createtable(l, 0, 0);
    set_str_field(l, b"err", msg);
    if from_command {
        push_bytes(l, b"ignore_error_stats_update");
        ffi::lua_pushboolean(l, 1);
        ffi::lua_rawset(l, -3);
    }
}

/// Creates `redis.call` (`raises`) or `redis.pcall`; `resp3` is the
/// engine's `redis.setresp` flag, which outlives the interpreter's use.
pub(crate) fn create_call(
    lua: &mlua::Lua,
    raises: bool,
    resp3: &AtomicBool,
) -> mlua::Result<mlua::Function> {
    let p = resp3 as *const AtomicBool as *mut c_void;
    let f: ffi::lua_CFunction = if raises { redis_call } else { redis_pcall };
    // SAFETY: pushes one closure with balanced stack calls.
    unsafe {
        lua.exec_raw((), |l| {
            ffi::lua_pushlightuserdata(l, p);
            ffi::lua_pushcclosure(l, f, 1);
        })
    }
}

/// `rawget`, `rawset` and `setmetatable` as scripts see them, given the table that maps
/// each read-only view to the table behind it: both see through a view,
/// and rawset refuses to write into one or into the globals. C functions
/// like the natives, so a script's `return rawget(5)` keeps its frame and
/// the argument error names its line.
pub(crate) fn create_raw_access(
    lua: &mlua::Lua,
    views: &mlua::Table,
) -> mlua::Result<(mlua::Function, mlua::Function, mlua::Function)> {
    // SAFETY: pushes three closures over `views` with balanced stack calls.
    unsafe {
        lua.exec_raw(views, |l| {
            ffi::lua_pushvalue(l, 1);
            ffi::lua_pushcclosure(l, view_rawget, 1);
            ffi::lua_pushvalue(l, 1);
            ffi::lua_pushcclosure(l, view_rawset, 1);
            ffi::lua_pushvalue(l, 1);
            ffi::lua_pushcclosure(l, view_setmetatable, 1);
            ffi::lua_remove(l, 1);
        })
    }
}

/// Replaces the table at 1 by the one behind it if it is a view; true if
/// it was.
unsafe fn see_through(l: *mut lua_State) -> bool {
    ffi::lua_pushvalue(l, 1);
    ffi::lua_rawget(l, ffi::lua_upvalueindex(1));
    if ffi::lua_isnil(l, -1) != 0 {
        ffi::lua_pop(l, 1);
        return false;
    }
    ffi::lua_replace(l, 1);
    true
}

unsafe extern "C-unwind" fn view_rawget(l: *mut lua_State) -> c_int {
    ffi::luaL_checktype(l, 1, ffi::LUA_TTABLE);
    ffi::luaL_checkany(l, 2);
    ffi::lua_settop(l, 2);
    see_through(l);
    ffi::lua_rawget(l, 1);
    1
}

unsafe extern "C-unwind" fn view_rawset(l: *mut lua_State) -> c_int {
    ffi::luaL_checktype(l, 1, ffi::LUA_TTABLE);
    ffi::luaL_checkany(l, 2);
    ffi::luaL_checkany(l, 3);
    ffi::lua_settop(l, 3);
    if see_through(l) || ffi::lua_rawequal(l, 1, ffi::LUA_GLOBALSINDEX) != 0 {
        push_bytes(l, b"Attempt to modify a readonly table");
        ffi::lua_error(l);
    }
    ffi::lua_rawset(l, 1);
    1
}

/// `setmetatable`, which refuses a view as Redis's Lua refuses its
/// read-only tables (after the argument checks, with no script position).
unsafe extern "C-unwind" fn view_setmetatable(l: *mut lua_State) -> c_int {
    let t = ffi::lua_type(l, 2);
    ffi::luaL_checktype(l, 1, ffi::LUA_TTABLE);
    if t != ffi::LUA_TNIL && t != ffi::LUA_TTABLE {
        ffi::luaL_argerror(l, 2, c"nil or table expected".as_ptr());
    }
    ffi::lua_settop(l, 2);
    ffi::lua_pushvalue(l, 1);
    ffi::lua_rawget(l, ffi::lua_upvalueindex(1));
    if ffi::lua_isnil(l, -1) == 0 {
        push_bytes(l, b"Attempt to modify a readonly table");
        ffi::lua_error(l);
    }
    ffi::lua_pop(l, 1);
    if ffi::luaL_getmetafield(l, 1, c"__metatable".as_ptr()) != 0 {
        ffi::luaL_error(l, c"cannot change a protected metatable".as_ptr());
    }
    ffi::lua_setmetatable(l, 1);
    1
}

unsafe extern "C-unwind" fn redis_call(l: *mut lua_State) -> c_int {
    call_generic(l, true)
}

unsafe extern "C-unwind" fn redis_pcall(l: *mut lua_State) -> c_int {
    call_generic(l, false)
}

enum Outcome {
    /// The reply is on top of the stack.
    Value,
    /// An error table is on top: returned by pcall, raised by call.
    Error,
    /// An error table is on top that both raise.
    Raise,
}

unsafe fn call_generic(l: *mut lua_State, raises: bool) -> c_int {
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| call_body(l)));
    let outcome = match r {
        Ok(o) => o,
        Err(payload) => {
            drop(payload);
            ffi::lua_settop(l, 0);
            push_error_table(l, b"ERR internal error in redis.call", false);
            Outcome::Raise
        }
    };
    match outcome {
        Outcome::Value => 1,
        Outcome::Error if !raises => 1,
        _ => ffi::lua_error(l),
    }
}

thread_local! {
    /// The arguments of the running call, kept for their capacity.
    static ARGV: std::cell::Cell<Vec<Bytes>> = const { std::cell::Cell::new(Vec::new()) };
}

unsafe fn call_body(l: *mut lua_State) -> Outcome {
    let n = ffi::lua_gettop(l);
    // SAFETY: the upvalue is the engine's flag (see `create_call`).
    let resp3 =
        (*(ffi::lua_touserdata(l, ffi::lua_upvalueindex(1)) as *const AtomicBool)).load(Relaxed);
    if n == 0 {
        crate::ldb::log_call_error(b"Please specify at least one argument for this redis lib call");
        push_error_table(
            l,
            b"ERR Please specify at least one argument for this redis lib call",
            false,
        );
        return Outcome::Error;
    }
    // Each argument its own copy: slices of one buffer cost a shared
    // header and two atomic counts apiece, more than an allocation.
    let mut argv = ARGV.take();
    for i in 1..=n {
        match ffi::lua_type(l, i) {
            ffi::LUA_TSTRING => argv.push(Bytes::copy_from_slice(str_at(l, i))),
            ffi::LUA_TNUMBER => {
                let mut b = Vec::with_capacity(24);
                put_number(&mut b, ffi::lua_tonumber(l, i));
                argv.push(Bytes::from(b));
            }
            _ => {
                argv.clear();
                ARGV.set(argv);
                crate::ldb::log_call_error(
                    b"Lua redis lib command arguments must be strings or integers",
                );
                push_error_table(
                    l,
                    b"ERR Lua redis lib command arguments must be strings or integers",
                    false,
                );
                return Outcome::Error;
            }
        }
    }
    // The arguments are copied: their slots hold the reply, so a call may
    // take as many arguments as the stack holds.
    ffi::lua_settop(l, 0);
    crate::ldb::log_command(&argv);
    let outcome = with_host(|h| {
        let Some(h) = h else {
            push_error_table(l, b"ERR redis.call is not available now", false);
            return Outcome::Raise;
        };
        // Under the debugger the reply is logged, and told apart from a
        // refusal: a copy keeps the host free to ask.
        let logged;
        let reply: &[u8] = if crate::ldb::stepping() {
            logged = h.call(&argv, resp3).to_vec();
            crate::ldb::log_reply(&logged, h.refused());
            &logged
        } else {
            h.call(&argv, resp3)
        };
        if reply.first() == Some(&b'-') {
            let end = reply
                .windows(2)
                .position(|w| w == b"\r\n")
                .unwrap_or(reply.len());
            push_error_table(l, &reply[1..end], true);
            return Outcome::Error;
        }
        let top = ffi::lua_gettop(l);
        match push_reply(l, reply, 0, resp3) {
            Some(_) => Outcome::Value,
            None => {
                ffi::lua_settop(l, top);
                push_error_table(l, b"ERR bad reply", false);
                Outcome::Error
            }
        }
    });
    argv.clear();
    ARGV.set(argv);
    outcome
}

/// A number argument as Redis formats it (`%.17g`).
fn put_number(buf: &mut Vec<u8>, n: f64) {
    if n.fract() == 0.0 && n.abs() < 1e17 && !(n == 0.0 && n.is_sign_negative()) {
        buf.put_slice(itoa::Buffer::new().format(n as i64).as_bytes());
    } else if n.is_nan() {
        buf.put_slice(if n.is_sign_negative() {
            b"-nan"
        } else {
            b"nan"
        });
    } else {
        buf.put_slice(format_double(n).as_bytes());
    }
}

/// The line starting at `pos` (after its type byte) and where the next
/// element starts.
fn line(buf: &[u8], pos: usize) -> Option<(&[u8], usize)> {
    let rest = buf.get(pos + 1..)?;
    let end = rest.windows(2).position(|w| w == b"\r\n")?;
    Some((&rest[..end], pos + 1 + end + 2))
}

/// The integer `line` spells, as `str::parse` reads one (an optional sign,
/// then digits, in range), without its UTF-8 pass: every reply's length
/// goes through here.
fn int(line: &[u8]) -> Option<i64> {
    let (neg, digits) = match line {
        [b'-', rest @ ..] => (true, rest),
        [b'+', rest @ ..] => (false, rest),
        rest => (false, rest),
    };
    if digits.is_empty() {
        return None;
    }
    // Accumulated negative, so that i64::MIN fits.
    let mut v: i64 = 0;
    for &c in digits {
        let d = c.wrapping_sub(b'0');
        if d > 9 {
            return None;
        }
        v = v.checked_mul(10)?.checked_sub(d as i64)?;
    }
    if neg {
        Some(v)
    } else {
        v.checked_neg()
    }
}

/// Pushes the reply at `buf[pos..]` as Lua sees it (Redis's RESP2/RESP3 →
/// Lua rules); where the next one starts, or `None` (with anything pushed
/// left on the stack) if the bytes are not a well-formed reply.
unsafe fn push_reply(l: *mut lua_State, buf: &[u8], pos: usize, resp3: bool) -> Option<usize> {
    if ffi::lua_checkstack(l, 4) == 0 {
        return None;
    }
    let ty = *buf.get(pos)?;
    let (text, next) = line(buf, pos)?;
    match ty {
        b':' => ffi::lua_pushnumber(l, int(text)? as f64),
        b'$' | b'=' => {
            let Ok(n) = usize::try_from(int(text)?) else {
                push_null(l, resp3);
                return Some(next);
            };
            let data = buf.get(next..next.checked_add(n)?)?;
            let after = next + n + 2;
            if after > buf.len() {
                return None;
            }
            if ty == b'$' {
                push_bytes(l, data);
            } else {
                ffi::lua_createtable(l, 0, 0);
                set_str_field(l, b"format", b"txt");
                set_str_field(l, b"string", &data[4.min(data.len())..]);
                ffi::lua_createtable(l, 0, 0);
                push_bytes(l, b"verbatim_string");
                ffi::lua_pushvalue(l, -3);
                ffi::lua_rawset(l, -3);
                ffi::lua_remove(l, -2);
            }
            return Some(after);
        }
        b'+' => {
            ffi::lua_createtable(l, 0, 0);
            set_str_field(l, b"ok", text);
        }
        b'-' => {
            ffi::lua_createtable(l, 0, 0);
            set_str_field(l, b"err", text);
        }
        b'(' => {
            ffi::lua_createtable(l, 0, 0);
            set_str_field(l, b"big_number", text);
        }
        b'#' => ffi::lua_pushboolean(l, (text == b"t") as c_int),
        b',' => {
            let d = match text {
                b"inf" => f64::INFINITY,
                b"-inf" => f64::NEG_INFINITY,
                _ => std::str::from_utf8(text).ok()?.parse().ok()?,
            };
            ffi::lua_createtable(l, 0, 0);
            push_bytes(l, b"double");
            ffi::lua_pushnumber(l, d);
            ffi::lua_rawset(l, -3);
        }
        b'_' => push_null(l, resp3),
        b'*' | b'>' | b'~' | b'%' => {
            let Ok(n) = usize::try_from(int(text)?) else {
                push_null(l, resp3);
                return Some(next);
            };
            // Every element takes at least 3 bytes: a larger count is a
            // malformed reply, not an allocation to make.
            if n > (buf.len() - next) / 3 {
                return None;
            }
            return push_aggregate(l, buf, next, n, ty, resp3);
        }
        // Attributes are not shown to scripts: the reply that follows is.
        b'|' => {
            let n = usize::try_from(int(text)?).ok()?;
            let mut pos = next;
            for _ in 0..n.checked_mul(2)? {
                pos = push_reply(l, buf, pos, resp3)?;
                ffi::lua_pop(l, 1);
            }
            return push_reply(l, buf, pos, resp3);
        }
        _ => return None,
    }
    Some(next)
}

/// A null reply: nil under RESP3, false under RESP2.
unsafe fn push_null(l: *mut lua_State, resp3: bool) {
    if resp3 {
        ffi::lua_pushnil(l);
    } else {
        ffi::lua_pushboolean(l, 0);
    }
}

/// Pushes an array, push, set or map of `n` elements starting at `pos`.
unsafe fn push_aggregate(
    l: *mut lua_State,
    buf: &[u8],
    mut pos: usize,
    n: usize,
    ty: u8,
    resp3: bool,
) -> Option<usize> {
    match ty {
        b'*' | b'>' => {
            // Presized only when it has no holes: RESP3 nulls leave some,
            // and `#` then sees the border Redis's table (grown an element
            // at a time) shows.
            let narr = if resp3 { 0 } else { c_int::try_from(n).ok()? };
            ffi::lua_createtable(l, narr, 0);
            for i in 0..n {
                pos = push_reply(l, buf, pos, resp3)?;
                ffi::lua_rawseti_(l, -2, i as c_int + 1);
            }
            return Some(pos);
        }
        b'~' => {
            ffi::lua_createtable(l, 0, 0);
            for _ in 0..n {
                pos = push_reply(l, buf, pos, resp3)?;
                if ffi::lua_type(l, -1) == ffi::LUA_TNIL {
                    ffi::lua_pop(l, 1);
                    continue;
                }
                ffi::lua_pushboolean(l, 1);
                ffi::lua_rawset(l, -3);
            }
        }
        _ => {
            ffi::lua_createtable(l, 0, 0);
            for _ in 0..n {
                pos = push_reply(l, buf, pos, resp3)?;
                pos = push_reply(l, buf, pos, resp3)?;
                if ffi::lua_type(l, -2) == ffi::LUA_TNIL {
                    ffi::lua_pop(l, 2);
                    continue;
                }
                ffi::lua_rawset(l, -3);
            }
        }
    }
    // Wrapped: {set = ...} or {map = ...}.
    ffi::lua_createtable(l, 0, 0);
    push_bytes(l, if ty == b'~' { b"set" } else { b"map" });
    ffi::lua_pushvalue(l, -3);
    ffi::lua_rawset(l, -3);
    ffi::lua_remove(l, -2);
    Some(pos)
}

/// C's `(long long)` cast as Redis does it on x86-64: out of range and NaN
/// give the minimum.
fn lua_number_to_int(n: f64) -> i64 {
    if !(-9.223_372_036_854_776e18..9.223_372_036_854_776e18).contains(&n) {
        i64::MIN
    } else {
        n as i64
    }
}

fn no_crlf(b: &[u8]) -> String {
    String::from_utf8_lossy(b).replace(['\r', '\n'], " ")
}

/// Pushes `t[k]` for the table at `t` (absolute index) and returns its type.
unsafe fn field(l: *mut lua_State, t: c_int, k: &[u8]) -> c_int {
    push_bytes(l, k);
    ffi::lua_rawget_(l, t);
    ffi::lua_type(l, -1)
}

/// Writes the value at `idx` (absolute) as the script's reply (Lua → RESP
/// rules; `resp3` is the script's `redis.setresp`, the client's protocol
/// is `out.resp3`). Leaves the stack as it found it.
pub(crate) unsafe fn write_value(
    l: *mut lua_State,
    idx: c_int,
    out: &mut ReplyBuf,
    resp3: bool,
    depth: usize,
) {
    if depth > 1000 {
        out.error("ERR reached lua stack limit");
        return;
    }
    match ffi::lua_type(l, idx) {
        ffi::LUA_TSTRING => out.bulk(str_at(l, idx)),
        ffi::LUA_TNUMBER => out.int(lua_number_to_int(ffi::lua_tonumber(l, idx))),
        ffi::LUA_TBOOLEAN => {
            let b = ffi::lua_toboolean(l, idx) != 0;
            if resp3 {
                out.boolean(b);
            } else if b {
                out.int(1);
            } else {
                out.null();
            }
        }
        ffi::LUA_TTABLE => {
            if ffi::lua_checkstack(l, 4) == 0 {
                out.error("ERR reached lua stack limit");
                return;
            }
            let top = ffi::lua_gettop(l);
            write_table(l, idx, out, resp3, depth);
            ffi::lua_settop(l, top);
        }
        _ => out.null(),
    }
}

unsafe fn write_table(l: *mut lua_State, t: c_int, out: &mut ReplyBuf, resp3: bool, depth: usize) {
    let top = ffi::lua_gettop(l);
    if field(l, t, b"err") == ffi::LUA_TSTRING {
        let msg = str_at(l, -1);
        out.error(&String::from_utf8_lossy(msg));
        let counted = is_counted(l, t);
        with_host(|h| {
            if let Some(h) = h {
                h.error_reply(msg, counted);
            }
        });
        return;
    }
    ffi::lua_settop(l, top);
    if field(l, t, b"ok") == ffi::LUA_TSTRING {
        out.simple(&no_crlf(str_at(l, -1)));
        return;
    }
    ffi::lua_settop(l, top);
    if field(l, t, b"double") == ffi::LUA_TNUMBER {
        out.double(ffi::lua_tonumber(l, -1));
        return;
    }
    ffi::lua_settop(l, top);
    if field(l, t, b"map") == ffi::LUA_TTABLE {
        let m = ffi::lua_gettop(l);
        out.map(count_pairs(l, m));
        ffi::lua_pushnil(l);
        while ffi::lua_next(l, m) != 0 {
            let v = ffi::lua_gettop(l);
            write_value(l, v - 1, out, resp3, depth + 1);
            write_value(l, v, out, resp3, depth + 1);
            ffi::lua_pop(l, 1);
        }
        return;
    }
    ffi::lua_settop(l, top);
    if field(l, t, b"set") == ffi::LUA_TTABLE {
        let s = ffi::lua_gettop(l);
        out.set(count_pairs(l, s));
        ffi::lua_pushnil(l);
        while ffi::lua_next(l, s) != 0 {
            write_value(l, ffi::lua_gettop(l) - 1, out, resp3, depth + 1);
            ffi::lua_pop(l, 1);
        }
        return;
    }
    ffi::lua_settop(l, top);
    if field(l, t, b"big_number") == ffi::LUA_TSTRING {
        out.big_number(&no_crlf(str_at(l, -1)));
        return;
    }
    ffi::lua_settop(l, top);
    if field(l, t, b"verbatim_string") == ffi::LUA_TTABLE
        && field(l, top + 1, b"string") == ffi::LUA_TSTRING
    {
        out.verbatim(str_at(l, -1));
        return;
    }
    ffi::lua_settop(l, top);
    let mut n = 0;
    loop {
        ffi::lua_rawgeti_(l, t, n + 1);
        let nil = ffi::lua_type(l, -1) == ffi::LUA_TNIL;
        ffi::lua_pop(l, 1);
        if nil {
            break;
        }
        n += 1;
    }
    out.array(n as usize);
    for i in 1..=n {
        ffi::lua_rawgeti_(l, t, i);
        write_value(l, ffi::lua_gettop(l), out, resp3, depth + 1);
        ffi::lua_pop(l, 1);
    }
}

unsafe fn count_pairs(l: *mut lua_State, t: c_int) -> usize {
    let mut n = 0;
    ffi::lua_pushnil(l);
    while ffi::lua_next(l, t) != 0 {
        n += 1;
        ffi::lua_pop(l, 1);
    }
    n
}

/// Pushes a table of `v` as Lua strings (KEYS, ARGV).
unsafe fn push_strings(l: *mut lua_State, v: &[Bytes]) {
    ffi::lua_createtable(l, c_int::try_from(v.len()).unwrap_or(0), 0);
    for (i, b) in v.iter().enumerate() {
        push_bytes(l, b);
        ffi::lua_rawseti_(l, -2, i as c_int + 1);
    }
}

/// Sets or clears a global without its metatable (`_G` is read-only to
/// scripts); its name is [`entry`]'s upvalue `name`.
unsafe fn set_global(l: *mut lua_State, name: c_int, v: Option<&[Bytes]>) {
    ffi::lua_pushvalue(l, ffi::lua_upvalueindex(name));
    match v {
        Some(v) => push_strings(l, v),
        None => ffi::lua_pushnil(l),
    }
    ffi::lua_rawset(l, ffi::LUA_GLOBALSINDEX);
}

/// What to run: the registry references of the message handler and of the
/// function, and its arguments.
pub(crate) struct Call<'a> {
    pub handler: c_int,
    pub func: c_int,
    pub keys: &'a [Bytes],
    pub argv: &'a [Bytes],
    /// FCALL: keys and arguments are the function's parameters; EVAL: they
    /// are the globals KEYS and ARGV for the run.
    pub as_params: bool,
}

/// The interpreter's main state and the registry reference of [`entry`],
/// taken once: a run then needs neither mlua's lock nor its protected-call
/// wrapper (which allocates two closures a call).
pub(crate) struct Runner {
    state: *mut lua_State,
    entry: c_int,
}

// SAFETY: the state is used only through `&mut Engine`, which owns the
// interpreter (and is itself moved between threads with it).
unsafe impl Send for Runner {}

impl Runner {
    /// `entry` must stay referenced by the registry (the engine keeps its key).
    pub(crate) fn new(lua: &mlua::Lua, entry: &mlua::RegistryKey) -> mlua::Result<Runner> {
        let mut state = std::ptr::null_mut();
        // SAFETY: only records the state exec_raw runs on, which is where
        // scripts ran through mlua too (so its hook applies).
        unsafe { lua.exec_raw::<()>((), |l| state = l)? };
        Ok(Runner {
            state,
            entry: entry.id(),
        })
    }

    pub(crate) fn state(&self) -> *mut lua_State {
        self.state
    }

    /// Runs `c` under its message handler: the result goes to `out`, or
    /// the error is returned as `msg script: name, on source:line.`.
    ///
    /// # Safety
    /// Only with the interpreter exclusively borrowed (`&mut Engine`).
    pub(crate) unsafe fn run(
        &self,
        c: &Call,
        name: &str,
        resp3: &AtomicBool,
        out: &mut ReplyBuf,
    ) -> Result<(), RunError> {
        let l = self.state;
        let mut p = Params {
            c,
            name,
            resp3,
            out,
            result: None,
        };
        let top = ffi::lua_gettop(l);
        if ffi::lua_checkstack(l, 2) == 0 {
            return Err("ERR reached lua stack limit".into());
        }
        ffi::lua_rawgeti_(l, ffi::LUA_REGISTRYINDEX, self.entry);
        ffi::lua_pushlightuserdata(l, &mut p as *mut Params as *mut c_void);
        // Everything, the script's own pcall included, runs inside this
        // one: an allocation failure while building KEYS cannot escape.
        if ffi::lua_pcall(l, 1, 0, 0) != 0 {
            let msg = match ffi::lua_type(l, -1) {
                ffi::LUA_TSTRING => String::from_utf8_lossy(str_at(l, -1)).into_owned(),
                _ => "unknown error".into(),
            };
            p.result = Some(Err(format!("ERR {msg}").into()));
        }
        ffi::lua_settop(l, top);
        p.result.unwrap_or_else(|| Err("ERR unknown error".into()))
    }
}

struct Params<'a> {
    c: &'a Call<'a>,
    name: &'a str,
    resp3: &'a AtomicBool,
    out: &'a mut ReplyBuf,
    /// Set by the run; `None` only if it never got to say.
    result: Option<Result<(), RunError>>,
}

/// [`entry`]'s upvalues: the names of the globals it sets, interned once
/// rather than hashed on every run.
const KEYS_NAME: c_int = 1;
const ARGV_NAME: c_int = 2;

/// Creates [`entry`] with its upvalues.
pub(crate) fn create_entry(lua: &mlua::Lua) -> mlua::Result<mlua::Function> {
    // SAFETY: pushes one closure with balanced stack calls.
    unsafe {
        lua.exec_raw((), |l| {
            push_bytes(l, b"KEYS");
            push_bytes(l, b"ARGV");
            ffi::lua_pushcclosure(l, entry, 2);
        })
    }
}

/// The C function a run goes through (its one argument: `Params`).
unsafe extern "C-unwind" fn entry(l: *mut lua_State) -> c_int {
    let p = &mut *(ffi::lua_touserdata(l, 1) as *mut Params);
    ffi::lua_settop(l, 0);
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run_body(l, p)));
    if r.is_err() {
        p.result = Some(Err("ERR internal error running the script".into()));
    }
    0
}

unsafe fn run_body(l: *mut lua_State, p: &mut Params) {
    let c = p.c;
    if ffi::lua_checkstack(l, 8) == 0 {
        p.result = Some(Err("ERR reached lua stack limit".into()));
        return;
    }
    ffi::lua_rawgeti_(l, ffi::LUA_REGISTRYINDEX, c.handler);
    ffi::lua_rawgeti_(l, ffi::LUA_REGISTRYINDEX, c.func);
    let nargs = if c.as_params {
        push_strings(l, c.keys);
        push_strings(l, c.argv);
        2
    } else {
        set_global(l, KEYS_NAME, Some(c.keys));
        set_global(l, ARGV_NAME, Some(c.argv));
        0
    };
    let status = ffi::lua_pcall(l, nargs, 1, 1);
    if !c.as_params {
        set_global(l, KEYS_NAME, None);
        set_global(l, ARGV_NAME, None);
    }
    p.result = Some(if status == 0 {
        write_value(l, 2, p.out, p.resp3.load(Relaxed), 0);
        Ok(())
    } else {
        Err(error_text(l, 2, p.name))
    });
}

/// `msg script: name, on source:line.` from the handler's error table at
/// `idx`.
unsafe fn error_text(l: *mut lua_State, idx: c_int, name: &str) -> RunError {
    if ffi::lua_type(l, idx) != ffi::LUA_TTABLE {
        return "ERR unknown error".into();
    }
    let counted = is_counted(l, idx);
    let msg = match field(l, idx, b"err") {
        ffi::LUA_TSTRING | ffi::LUA_TNUMBER => String::from_utf8_lossy(str_at(l, -1)).into_owned(),
        _ => "ERR unknown error".into(),
    };
    ffi::lua_pop(l, 1);
    let src = match field(l, idx, b"source") {
        ffi::LUA_TSTRING | ffi::LUA_TNUMBER => std::str::from_utf8(str_at(l, -1))
            .unwrap_or("?")
            .to_string(),
        _ => "?".into(),
    };
    ffi::lua_pop(l, 1);
    let line = match field(l, idx, b"line") {
        ffi::LUA_TNUMBER => ffi::lua_tonumber(l, -1) as i64,
        _ => -1,
    };
    ffi::lua_pop(l, 1);
    RunError {
        msg: format!("{msg} script: {name}, on {src}:{line}."),
        counted,
    }
}

/// Whether the error table at `t` (absolute) is a command's error, already
/// counted in the error stats. Leaves the stack as it found it.
unsafe fn is_counted(l: *mut lua_State, t: c_int) -> bool {
    field(l, t, b"ignore_error_stats_update");
    let counted = ffi::lua_toboolean(l, -1) != 0;
    ffi::lua_pop(l, 1);
    counted
}

#[cfg(test)]
mod tests {
    #[test]
    fn int_reads_as_parse() {
        for s in [
            "0",
            "-0",
            "+7",
            "42",
            "-42",
            "",
            "-",
            "+",
            "1a",
            " 1",
            "9223372036854775807",
            "9223372036854775808",
            "-9223372036854775808",
            "-9223372036854775809",
            "00012",
        ] {
            assert_eq!(super::int(s.as_bytes()), s.parse::<i64>().ok(), "{s:?}");
        }
    }
}
