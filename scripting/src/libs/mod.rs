//! The Lua libraries Redis 7.0 preloads into its scripting VM: `cjson`
//! (lua-cjson 2.1.0), `cmsgpack` (lua-cmsgpack 0.4.0), `bit` (LuaBitOp) and
//! `struct` (Roberto Ierusalimschy's struct library).
//!
//! They are written against the raw Lua 5.1 C API (`mlua::ffi`) rather than
//! mlua's high-level callbacks for two reasons. First, mlua raises a Rust
//! callback's error as a userdata, while scripts that `pcall` these libraries
//! get a plain string from Redis and often return or match it. Second, the
//! originals' observable limits (error positions from `luaL_where`, argument
//! names from `luaL_argerror`, nesting limits that come from
//! `lua_checkstack`) fall out naturally when the same Lua calls are made in
//! the same order.
//!
//! Every C function follows one pattern: the body runs as ordinary Rust
//! returning `LResult`, and only after it has returned (and dropped all its
//! Rust values) does `raise` longjmp out through `lua_error`. The only Lua
//! calls inside bodies that can longjmp are allocation failures, which at
//! worst leak the body's buffers.

mod bit;
mod cjson;
mod cmsgpack;
mod lstruct;

#[cfg(test)]
mod golden;
#[cfg(test)]
mod golden_tests;

use mlua::ffi::{self, lua_State};
use mlua::Lua;
use std::ffi::CStr;
use std::os::raw::{c_char, c_int};

/// Installs `cjson`, `cmsgpack`, `bit` and `struct` as globals, as Redis does
/// before it makes the global table read-only.
pub fn register_all(lua: &Lua) -> mlua::Result<()> {
    cjson::register(lua)?;
    cmsgpack::register(lua)?;
    bit::register(lua)?;
    lstruct::register(lua)?;
    Ok(())
}

pub use bit::register as register_bit;
pub use cjson::register as register_cjson;
pub use cmsgpack::register as register_cmsgpack;
pub use lstruct::register as register_struct;

/// Sets global `name` to the table that `build` pushes on the stack.
fn register_global(lua: &Lua, name: &str, build: unsafe fn(*mut lua_State)) -> mlua::Result<()> {
    // SAFETY: `build` pushes exactly one table using balanced stack calls;
    // exec_raw runs it in protected mode and pops the result.
    let table: mlua::Table = unsafe { lua.exec_raw((), |l| build(l))? };
    lua.globals().set(name, table)
}

/// An error to raise once the Rust body has returned.
pub(crate) enum LErr {
    /// `luaL_error`: the message gets the calling Lua function's position.
    Where(Vec<u8>),
    /// `luaL_argerror(narg, msg)`.
    Arg(c_int, Vec<u8>),
    /// `lua_error` with the message as is, like errors raised by Lua's core
    /// ("table index is nil") while a C function is running.
    Plain(Vec<u8>),
}

impl LErr {
    pub(crate) fn at(msg: impl Into<Vec<u8>>) -> LErr {
        LErr::Where(msg.into())
    }
    pub(crate) fn arg(n: c_int, msg: impl Into<Vec<u8>>) -> LErr {
        LErr::Arg(n, msg.into())
    }
}

pub(crate) type LResult<T> = Result<T, LErr>;

/// Raises `e` as a Lua error. Nothing owned survives into the longjmp: the
/// message is copied onto the Lua stack and freed first.
pub(crate) unsafe fn raise(l: *mut lua_State, e: LErr) -> ! {
    // The error discards this call's stack anyway; emptying it guarantees
    // room for the message even when the error is a full stack.
    ffi::lua_settop(l, 0);
    match e {
        LErr::Where(msg) => {
            ffi::luaL_where(l, 1);
            push_bytes(l, &msg);
            drop(msg);
            ffi::lua_concat(l, 2);
            ffi::lua_error(l)
        }
        LErr::Arg(n, msg) => {
            push_bytes(l, &msg);
            drop(msg);
            let p = ffi::lua_tolstring(l, -1, std::ptr::null_mut());
            ffi::luaL_argerror(l, n, p);
            ffi::lua_error(l)
        }
        LErr::Plain(msg) => {
            push_bytes(l, &msg);
            drop(msg);
            ffi::lua_error(l)
        }
    }
}

/// Runs a C function body, turning its error (or a panic) into a Lua error.
pub(crate) unsafe fn run(
    l: *mut lua_State,
    body: unsafe fn(*mut lua_State) -> LResult<c_int>,
) -> c_int {
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| body(l)));
    let e = match r {
        Ok(Ok(n)) => return n,
        Ok(Err(e)) => e,
        Err(payload) => {
            drop(payload);
            LErr::Plain(b"internal error in Lua library".to_vec())
        }
    };
    raise(l, e)
}

/// Declares `extern "C-unwind" fn $name` running `$body` through [`run`];
/// `$vis` lets a module table elsewhere name it.
macro_rules! lua_cfn {
    ($vis:vis $name:ident => $body:path) => {
        $vis unsafe extern "C-unwind" fn $name(l: *mut mlua::ffi::lua_State) -> std::os::raw::c_int {
            $crate::libs::run(l, $body)
        }
    };
}
pub(crate) use lua_cfn;

pub(crate) unsafe fn push_bytes(l: *mut lua_State, b: &[u8]) {
    ffi::lua_pushlstring(l, b.as_ptr() as *const c_char, b.len());
}

/// `lua_setfield(l, -2, name)` for the value on top.
pub(crate) unsafe fn set_field(l: *mut lua_State, name: &CStr) {
    ffi::lua_setfield(l, -2, name.as_ptr());
}

pub(crate) unsafe fn set_fn(l: *mut lua_State, name: &CStr, f: ffi::lua_CFunction) {
    ffi::lua_pushcclosure(l, f, 0);
    set_field(l, name);
}

pub(crate) unsafe fn set_str(l: *mut lua_State, name: &CStr, v: &str) {
    push_bytes(l, v.as_bytes());
    set_field(l, name);
}

/// `luaL_typename`.
pub(crate) unsafe fn typename(l: *mut lua_State, idx: c_int) -> &'static str {
    let p = ffi::lua_typename(l, ffi::lua_type(l, idx));
    if p.is_null() {
        return "?";
    }
    CStr::from_ptr(p).to_str().unwrap_or("?")
}

fn type_error(l: *mut lua_State, n: c_int, expected: &str) -> LErr {
    // SAFETY: only reads the type of a stack slot.
    let got = unsafe { typename(l, n) };
    LErr::arg(n, format!("{expected} expected, got {got}"))
}

/// `luaL_checklstring`: strings and numbers (converted in place). The slice
/// lives as long as the value stays on the stack.
pub(crate) unsafe fn check_lstring<'a>(l: *mut lua_State, n: c_int) -> LResult<&'a [u8]> {
    let mut len = 0usize;
    let p = ffi::lua_tolstring(l, n, &mut len);
    if p.is_null() {
        return Err(type_error(l, n, "string"));
    }
    Ok(std::slice::from_raw_parts(p as *const u8, len))
}

/// Like [`check_lstring`] but includes the terminating NUL Lua keeps after
/// every string, for parsers that stop at NUL as the C libraries do.
pub(crate) unsafe fn check_cstring<'a>(l: *mut lua_State, n: c_int) -> LResult<&'a [u8]> {
    let s = check_lstring(l, n)?;
    Ok(std::slice::from_raw_parts(s.as_ptr(), s.len() + 1))
}

/// `luaL_checknumber`.
pub(crate) unsafe fn check_number(l: *mut lua_State, n: c_int) -> LResult<f64> {
    let d = ffi::lua_tonumber(l, n);
    if d == 0.0 && ffi::lua_isnumber(l, n) == 0 {
        return Err(type_error(l, n, "number"));
    }
    Ok(d)
}

/// `luaL_checkinteger` (Lua 5.1: the number truncated toward zero).
pub(crate) unsafe fn check_integer(l: *mut lua_State, n: c_int) -> LResult<i64> {
    let d = ffi::lua_tointeger_(l, n);
    if d == 0 && ffi::lua_isnumber(l, n) == 0 {
        return Err(type_error(l, n, "number"));
    }
    Ok(d as i64)
}

/// `luaL_optinteger`.
pub(crate) unsafe fn opt_integer(l: *mut lua_State, n: c_int, def: i64) -> LResult<i64> {
    if ffi::lua_isnoneornil(l, n) != 0 {
        Ok(def)
    } else {
        check_integer(l, n)
    }
}

/// `luaL_checkstack`'s overflow error.
pub(crate) fn stack_overflow(msg: &str) -> LErr {
    LErr::at(format!("stack overflow ({msg})"))
}

/// 2^63.
const TWO63: f64 = 9_223_372_036_854_775_808u64 as f64;

/// C's `(int64_t)d` as x86-64 computes it: out of range and NaN give
/// INT64_MIN.
pub(crate) fn c_f64_to_i64(d: f64) -> i64 {
    if (-TWO63..TWO63).contains(&d) {
        d as i64
    } else {
        i64::MIN
    }
}

/// C's `(uint64_t)d` as x86-64 compilers emit it (values from 2^63 up are
/// converted after subtracting 2^63).
pub(crate) fn c_f64_to_u64(d: f64) -> u64 {
    if d >= TWO63 {
        (c_f64_to_i64(d - TWO63) as u64) ^ (1 << 63)
    } else {
        c_f64_to_i64(d) as u64
    }
}

/// C's `(int)d` on x86-64: out of range and NaN give INT_MIN.
pub(crate) fn c_f64_to_i32(d: f64) -> i32 {
    if (-2_147_483_648.0..2_147_483_648.0).contains(&d) {
        d as i32
    } else {
        i32::MIN
    }
}
