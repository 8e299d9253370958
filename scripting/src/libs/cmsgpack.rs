//! `cmsgpack`: MessagePack as lua-cmsgpack 0.4.0 writes and reads it.
//!
//! Packing picks the smallest integer encoding for numbers that are exact
//! 64-bit integers, float32 when that is exact and float64 otherwise; tables
//! whose keys are exactly 1..n become arrays, others maps, and tables nested
//! 16 deep become nil. Unpacking reads nil, booleans, all integer and float
//! formats, str8/16/32 and fixstr, arrays and maps; bin and ext are "Bad data
//! format", as in the original.

use super::{
    c_f64_to_i32, c_f64_to_i64, check_integer, check_lstring, lua_cfn, opt_integer, push_bytes,
    register_global, set_fn, set_str, stack_overflow, LErr, LResult,
};
use mlua::ffi::{self, lua_State};
use mlua::Lua;
use std::os::raw::c_int;

/// Installs the global `cmsgpack`.
pub fn register(lua: &Lua) -> mlua::Result<()> {
    register_global(lua, "cmsgpack", push_module)
}

unsafe fn push_module(l: *mut lua_State) {
    ffi::lua_createtable(l, 0, 8);
    set_fn(l, c"pack", pack);
    set_fn(l, c"unpack", unpack);
    set_fn(l, c"unpack_one", unpack_one);
    set_fn(l, c"unpack_limit", unpack_limit);
    set_str(l, c"_NAME", "cmsgpack");
    set_str(l, c"_VERSION", "lua-cmsgpack 0.4.0");
    set_str(l, c"_COPYRIGHT", "Copyright (C) 2012, Salvatore Sanfilippo");
    set_str(l, c"_DESCRIPTION", "MessagePack C implementation for Lua");
}

const MAX_NESTING: u32 = 16;

// ---- packing

fn encode_int(out: &mut Vec<u8>, n: i64) {
    if n >= 0 {
        let u = n as u64;
        if u <= 127 {
            out.push(u as u8);
        } else if u <= 0xff {
            out.extend_from_slice(&[0xcc, u as u8]);
        } else if u <= 0xffff {
            out.push(0xcd);
            out.extend_from_slice(&(u as u16).to_be_bytes());
        } else if u <= 0xffff_ffff {
            out.push(0xce);
            out.extend_from_slice(&(u as u32).to_be_bytes());
        } else {
            out.push(0xcf);
            out.extend_from_slice(&u.to_be_bytes());
        }
    } else if n >= -32 {
        out.push(n as i8 as u8);
    } else if n >= -128 {
        out.extend_from_slice(&[0xd0, n as i8 as u8]);
    } else if n >= -32768 {
        out.push(0xd1);
        out.extend_from_slice(&(n as i16).to_be_bytes());
    } else if n >= -2_147_483_648 {
        out.push(0xd2);
        out.extend_from_slice(&(n as i32).to_be_bytes());
    } else {
        out.push(0xd3);
        out.extend_from_slice(&n.to_be_bytes());
    }
}

fn encode_number(out: &mut Vec<u8>, d: f64) {
    let i = c_f64_to_i64(d);
    if !d.is_infinite() && i as f64 == d {
        encode_int(out, i);
        return;
    }
    let f = d as f32;
    if f64::from(f) == d {
        out.push(0xca);
        out.extend_from_slice(&f.to_be_bytes());
    } else {
        out.push(0xcb);
        out.extend_from_slice(&d.to_be_bytes());
    }
}

fn encode_str(out: &mut Vec<u8>, s: &[u8]) {
    let len = s.len();
    if len < 32 {
        out.push(0xa0 | len as u8);
    } else if len <= 0xff {
        out.extend_from_slice(&[0xd9, len as u8]);
    } else if len <= 0xffff {
        out.push(0xda);
        out.extend_from_slice(&(len as u16).to_be_bytes());
    } else {
        out.push(0xdb);
        out.extend_from_slice(&(len as u32).to_be_bytes());
    }
    out.extend_from_slice(s);
}

fn encode_header(out: &mut Vec<u8>, n: usize, fix: u8, b16: u8, b32: u8) {
    if n < 16 {
        out.push(fix | n as u8);
    } else if n <= 0xffff {
        out.push(b16);
        out.extend_from_slice(&(n as u16).to_be_bytes());
    } else {
        out.push(b32);
        out.extend_from_slice(&(n as u32).to_be_bytes());
    }
}

/// True when the table on top has only the keys 1..n. Keys must be
/// positive and survive a round trip through C's `int`.
unsafe fn table_is_array(l: *mut lua_State) -> bool {
    let mut count: i32 = 0;
    let mut max: i32 = 0;
    ffi::lua_pushnil(l);
    while ffi::lua_next(l, -2) != 0 {
        ffi::lua_pop(l, 1);
        let n = ffi::lua_tonumber(l, -1);
        if ffi::lua_type(l, -1) != ffi::LUA_TNUMBER
            || n <= 0.0
            || n.is_infinite()
            || f64::from(c_f64_to_i32(n)) != n
        {
            ffi::lua_pop(l, 1);
            return false;
        }
        if n > f64::from(max) {
            max = c_f64_to_i32(n);
        }
        count = count.wrapping_add(1);
    }
    max == count
}

/// Encodes the value on top of the stack, leaving the stack as it was.
unsafe fn encode_value(l: *mut lua_State, out: &mut Vec<u8>, level: u32) {
    let mut t = ffi::lua_type(l, -1);
    if t == ffi::LUA_TTABLE && level == MAX_NESTING {
        t = ffi::LUA_TNIL;
    }
    match t {
        ffi::LUA_TSTRING => {
            let mut len = 0usize;
            let p = ffi::lua_tolstring(l, -1, &mut len);
            encode_str(out, std::slice::from_raw_parts(p as *const u8, len));
        }
        ffi::LUA_TBOOLEAN => out.push(if ffi::lua_toboolean(l, -1) != 0 {
            0xc3
        } else {
            0xc2
        }),
        ffi::LUA_TNUMBER => encode_number(out, ffi::lua_tonumber(l, -1)),
        ffi::LUA_TTABLE => {
            // Room for a key, a value and a copy of the key; with at most 16
            // levels this cannot fail within Lua's limits.
            ffi::lua_checkstack(l, 3);
            if table_is_array(l) {
                let len = ffi::lua_objlen(l, -1);
                encode_header(out, len, 0x90, 0xdc, 0xdd);
                for i in 1..=len {
                    ffi::lua_rawgeti_(l, -1, i as c_int);
                    encode_value(l, out, level + 1);
                    ffi::lua_pop(l, 1);
                }
            } else {
                let mut n = 0usize;
                ffi::lua_pushnil(l);
                while ffi::lua_next(l, -2) != 0 {
                    ffi::lua_pop(l, 1);
                    n += 1;
                }
                encode_header(out, n, 0x80, 0xde, 0xdf);
                ffi::lua_pushnil(l);
                while ffi::lua_next(l, -2) != 0 {
                    ffi::lua_pushvalue(l, -2);
                    encode_value(l, out, level + 1);
                    ffi::lua_pop(l, 1);
                    encode_value(l, out, level + 1);
                    ffi::lua_pop(l, 1);
                }
            }
        }
        // nil, functions, threads, userdata (cjson.null included).
        _ => out.push(0xc0),
    }
}

unsafe fn pack_impl(l: *mut lua_State) -> LResult<c_int> {
    let nargs = ffi::lua_gettop(l);
    if nargs == 0 {
        return Err(LErr::arg(0, "MessagePack pack needs input."));
    }
    let mut out = Vec::new();
    for i in 1..=nargs {
        if ffi::lua_checkstack(l, 1) == 0 {
            return Err(stack_overflow("in function mp_pack"));
        }
        ffi::lua_pushvalue(l, i);
        encode_value(l, &mut out, 0);
        ffi::lua_pop(l, 1);
    }
    push_bytes(l, &out);
    Ok(1)
}
lua_cfn!(pack => pack_impl);

// ---- unpacking

enum DecodeErr {
    Eof,
    BadFormat,
    Lua(LErr),
}

impl From<LErr> for DecodeErr {
    fn from(e: LErr) -> Self {
        DecodeErr::Lua(e)
    }
}

struct Cursor<'a> {
    data: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], DecodeErr> {
        if self.data.len() - self.pos < n {
            return Err(DecodeErr::Eof);
        }
        let s = &self.data[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }
    fn left(&self) -> usize {
        self.data.len() - self.pos
    }
    fn be(&mut self, n: usize) -> Result<u64, DecodeErr> {
        Ok(self
            .take(n)?
            .iter()
            .fold(0u64, |a, &b| (a << 8) | u64::from(b)))
    }
}

/// A container being filled while decoding.
enum Open {
    /// An array: the next index and the element count.
    Array(u64, u64),
    /// A map: the entries left, and whether the key of the current one is
    /// already on the stack.
    Map(u64, bool),
}

/// Decodes one value and pushes it. Nesting is tracked on the heap rather
/// than by recursion; the Lua stack layout is the original recursive one
/// (each array level holds its table and the pending index, each map level
/// its table and the pending key), so `lua_checkstack` refuses the same
/// depths as in Redis.
unsafe fn decode_value(l: *mut lua_State, c: &mut Cursor) -> Result<(), DecodeErr> {
    let mut open: Vec<Open> = Vec::new();
    loop {
        // Read one value: a scalar is complete at once, a non-empty
        // container is opened and its first element read next.
        if ffi::lua_checkstack(l, 1) == 0 {
            return Err(stack_overflow(
                "too many return values at once; use unpack_one or unpack_limit instead.",
            )
            .into());
        }
        let b = c.take(1)?[0];
        let container = match b {
            0x00..=0x7f => {
                ffi::lua_pushnumber(l, f64::from(b));
                None
            }
            0xe0..=0xff => {
                ffi::lua_pushnumber(l, f64::from(b as i8));
                None
            }
            0xc0 => {
                ffi::lua_pushnil(l);
                None
            }
            0xc2 | 0xc3 => {
                ffi::lua_pushboolean(l, c_int::from(b == 0xc3));
                None
            }
            0xcc => push_num(l, c.be(1)? as f64),
            0xcd => push_num(l, c.be(2)? as f64),
            0xce => push_num(l, c.be(4)? as f64),
            // The original pushes uint64 through a signed lua_Integer.
            0xcf => push_num(l, c.be(8)? as i64 as f64),
            0xd0 => push_num(l, f64::from(c.be(1)? as u8 as i8)),
            0xd1 => push_num(l, f64::from(c.be(2)? as u16 as i16)),
            0xd2 => push_num(l, f64::from(c.be(4)? as u32 as i32)),
            0xd3 => push_num(l, c.be(8)? as i64 as f64),
            0xca => push_num(l, f64::from(f32::from_bits(c.be(4)? as u32))),
            0xcb => push_num(l, f64::from_bits(c.be(8)?)),
            0xa0..=0xbf => push_str(l, c, usize::from(b & 0x1f))?,
            0xd9 => {
                let n = c.be(1)? as usize;
                push_str(l, c, n)?
            }
            0xda => {
                let n = c.be(2)? as usize;
                push_str(l, c, n)?
            }
            0xdb => {
                let n = c.be(4)? as usize;
                push_str(l, c, n)?
            }
            0x90..=0x9f => Some(Open::Array(1, u64::from(b & 0x0f))),
            0xdc => Some(Open::Array(1, c.be(2)?)),
            0xdd => Some(Open::Array(1, c.be(4)?)),
            0x80..=0x8f => Some(Open::Map(u64::from(b & 0x0f), false)),
            0xde => Some(Open::Map(c.be(2)?, false)),
            0xdf => Some(Open::Map(c.be(4)?, false)),
            _ => return Err(DecodeErr::BadFormat),
        };
        if let Some(container) = container {
            ffi::lua_newtable(l);
            match container {
                Open::Array(_, n) => {
                    if ffi::lua_checkstack(l, 1) == 0 {
                        return Err(stack_overflow("in function mp_decode_to_lua_array").into());
                    }
                    if n > 0 {
                        ffi::lua_pushnumber(l, 1.0);
                        open.push(container);
                        continue;
                    }
                }
                Open::Map(n, _) => {
                    if n > 0 {
                        open.push(container);
                        continue;
                    }
                }
            }
        }
        // A value is complete: store it in its container, closing every
        // container it completes, until one wants another element.
        loop {
            match open.last_mut() {
                None => return Ok(()),
                Some(Open::Array(i, n)) => {
                    ffi::lua_rawset(l, -3);
                    if *i == *n {
                        open.pop();
                        continue;
                    }
                    *i += 1;
                    ffi::lua_pushnumber(l, *i as f64);
                    break;
                }
                Some(Open::Map(left, have_key)) => {
                    if !*have_key {
                        *have_key = true;
                        break;
                    }
                    // lua_settable would raise these itself; raising them
                    // here keeps the longjmp out of Rust frames.
                    match ffi::lua_type(l, -2) {
                        ffi::LUA_TNIL => {
                            return Err(LErr::Plain(b"table index is nil".to_vec()).into())
                        }
                        ffi::LUA_TNUMBER if ffi::lua_tonumber(l, -2).is_nan() => {
                            return Err(LErr::Plain(b"table index is NaN".to_vec()).into())
                        }
                        _ => {}
                    }
                    ffi::lua_rawset(l, -3);
                    *left -= 1;
                    *have_key = false;
                    if *left == 0 {
                        open.pop();
                        continue;
                    }
                    break;
                }
            }
        }
    }
}

unsafe fn push_num(l: *mut lua_State, n: f64) -> Option<Open> {
    ffi::lua_pushnumber(l, n);
    None
}

unsafe fn push_str(l: *mut lua_State, c: &mut Cursor, n: usize) -> Result<Option<Open>, DecodeErr> {
    let s = c.take(n)?;
    push_bytes(l, s);
    Ok(None)
}

/// The shared body of unpack, unpack_one and unpack_limit. With neither a
/// limit nor an offset every value is returned; otherwise the next offset
/// (-1 at the end) comes first.
unsafe fn unpack_full(l: *mut lua_State, limit: i64, offset: i64) -> LResult<c_int> {
    let data = check_lstring(l, 1)?;
    let len = data.len();
    let decode_all = limit == 0 && offset == 0;
    if offset < 0 || limit < 0 {
        return Err(LErr::at(format!(
            "Invalid request to unpack with offset of {} and limit of {}.",
            offset as i32, len as i32
        )));
    } else if offset as u64 > len as u64 {
        return Err(LErr::at(format!(
            "Start offset {} greater than input length {}.",
            offset as i32, len as i32
        )));
    }
    let limit = if decode_all {
        i64::from(i32::MAX)
    } else {
        limit
    };
    let mut c = Cursor {
        data,
        pos: offset as usize,
    };
    let mut cnt: c_int = 0;
    while c.left() > 0 && i64::from(cnt) < limit {
        match decode_value(l, &mut c) {
            Ok(()) => {}
            Err(DecodeErr::Eof) => return Err(LErr::at("Missing bytes in input.")),
            Err(DecodeErr::BadFormat) => return Err(LErr::at("Bad data format in input.")),
            Err(DecodeErr::Lua(e)) => return Err(e),
        }
        cnt += 1;
    }
    if !decode_all {
        if ffi::lua_checkstack(l, 1) == 0 {
            return Err(stack_overflow("in function mp_unpack_full"));
        }
        let next = if c.left() == 0 {
            -1
        } else {
            (len - c.left()) as i32
        };
        ffi::lua_pushinteger(l, i64::from(next));
        ffi::lua_insert(l, 2);
        cnt += 1;
    }
    Ok(cnt)
}

unsafe fn unpack_impl(l: *mut lua_State) -> LResult<c_int> {
    unpack_full(l, 0, 0)
}
lua_cfn!(unpack => unpack_impl);

unsafe fn unpack_one_impl(l: *mut lua_State) -> LResult<c_int> {
    let offset = opt_integer(l, 2, 0)?;
    keep_first_arg(l);
    unpack_full(l, 1, offset)
}
lua_cfn!(unpack_one => unpack_one_impl);

unsafe fn unpack_limit_impl(l: *mut lua_State) -> LResult<c_int> {
    let limit = check_integer(l, 2)?;
    let offset = opt_integer(l, 3, 0)?;
    keep_first_arg(l);
    unpack_full(l, limit, offset)
}
lua_cfn!(unpack_limit => unpack_limit_impl);

/// Drops the arguments after the data, so the offset can be inserted as
/// the first result.
unsafe fn keep_first_arg(l: *mut lua_State) {
    if ffi::lua_gettop(l) > 1 {
        ffi::lua_settop(l, 1);
    }
}
