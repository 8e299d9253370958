//! `bit`: LuaBitOp's 32-bit operations on Lua numbers.

use super::{check_number, lua_cfn, register_global, set_fn, LResult};
use mlua::ffi::{self, lua_State};
use mlua::Lua;
use std::os::raw::c_int;

/// Installs the global `bit`.
pub fn register(lua: &Lua) -> mlua::Result<()> {
    register_global(lua, "bit", push_module)
}

unsafe fn push_module(l: *mut lua_State) {
    ffi::lua_createtable(l, 0, 12);
    set_fn(l, c"tobit", tobit);
    set_fn(l, c"bnot", bnot);
    set_fn(l, c"band", band);
    set_fn(l, c"bor", bor);
    set_fn(l, c"bxor", bxor);
    set_fn(l, c"lshift", lshift);
    set_fn(l, c"rshift", rshift);
    set_fn(l, c"arshift", arshift);
    set_fn(l, c"rol", rol);
    set_fn(l, c"ror", ror);
    set_fn(l, c"bswap", bswap);
    set_fn(l, c"tohex", tohex);
}

/// Number to 32 bits the way LuaBitOp does it: adding 2^52+2^51 leaves the
/// value, rounded to nearest even, in the low word of the double. Huge,
/// infinite and NaN inputs keep whatever that low word holds.
pub(crate) fn tobit_f64(n: f64) -> u32 {
    (n + 6_755_399_441_055_744.0).to_bits() as u32
}

unsafe fn barg(l: *mut lua_State, idx: c_int) -> LResult<u32> {
    check_number(l, idx).map(tobit_f64)
}

unsafe fn push_bits(l: *mut lua_State, b: u32) -> LResult<c_int> {
    ffi::lua_pushnumber(l, b as i32 as f64);
    Ok(1)
}

unsafe fn tobit_impl(l: *mut lua_State) -> LResult<c_int> {
    push_bits(l, barg(l, 1)?)
}
lua_cfn!(tobit => tobit_impl);

unsafe fn bnot_impl(l: *mut lua_State) -> LResult<c_int> {
    push_bits(l, !barg(l, 1)?)
}
lua_cfn!(bnot => bnot_impl);

unsafe fn fold(l: *mut lua_State, f: fn(u32, u32) -> u32) -> LResult<c_int> {
    let mut b = barg(l, 1)?;
    for i in 2..=ffi::lua_gettop(l) {
        b = f(b, barg(l, i)?);
    }
    push_bits(l, b)
}

unsafe fn band_impl(l: *mut lua_State) -> LResult<c_int> {
    fold(l, |a, b| a & b)
}
lua_cfn!(band => band_impl);

unsafe fn bor_impl(l: *mut lua_State) -> LResult<c_int> {
    fold(l, |a, b| a | b)
}
lua_cfn!(bor => bor_impl);

unsafe fn bxor_impl(l: *mut lua_State) -> LResult<c_int> {
    fold(l, |a, b| a ^ b)
}
lua_cfn!(bxor => bxor_impl);

unsafe fn shift(l: *mut lua_State, f: fn(u32, u32) -> u32) -> LResult<c_int> {
    let b = barg(l, 1)?;
    let n = barg(l, 2)? & 31;
    push_bits(l, f(b, n))
}

unsafe fn lshift_impl(l: *mut lua_State) -> LResult<c_int> {
    shift(l, |b, n| b << n)
}
lua_cfn!(lshift => lshift_impl);

unsafe fn rshift_impl(l: *mut lua_State) -> LResult<c_int> {
    shift(l, |b, n| b >> n)
}
lua_cfn!(rshift => rshift_impl);

unsafe fn arshift_impl(l: *mut lua_State) -> LResult<c_int> {
    shift(l, |b, n| ((b as i32) >> n) as u32)
}
lua_cfn!(arshift => arshift_impl);

unsafe fn rol_impl(l: *mut lua_State) -> LResult<c_int> {
    shift(l, |b, n| b.rotate_left(n))
}
lua_cfn!(rol => rol_impl);

unsafe fn ror_impl(l: *mut lua_State) -> LResult<c_int> {
    shift(l, |b, n| b.rotate_right(n))
}
lua_cfn!(ror => ror_impl);

unsafe fn bswap_impl(l: *mut lua_State) -> LResult<c_int> {
    push_bits(l, barg(l, 1)?.swap_bytes())
}
lua_cfn!(bswap => bswap_impl);

unsafe fn tohex_impl(l: *mut lua_State) -> LResult<c_int> {
    let mut b = barg(l, 1)?;
    let mut n = if ffi::lua_type(l, 2) == ffi::LUA_TNONE {
        8
    } else {
        barg(l, 2)? as i32
    };
    let digits: &[u8; 16] = if n < 0 {
        // -INT_MIN stays negative in C and then prints nothing.
        n = n.checked_neg().unwrap_or(0);
        b"0123456789ABCDEF"
    } else {
        b"0123456789abcdef"
    };
    let n = n.min(8) as usize;
    let mut buf = [0u8; 8];
    for slot in buf[..n].iter_mut().rev() {
        *slot = digits[(b & 15) as usize];
        b >>= 4;
    }
    super::push_bytes(l, &buf[..n]);
    Ok(1)
}
lua_cfn!(tohex => tohex_impl);
