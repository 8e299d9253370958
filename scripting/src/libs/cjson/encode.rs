//! `cjson.encode`: a Lua value to JSON text, as lua-cjson 2.1.0 writes it
//! (`%.14g` numbers, escaped `/`, the sparse array rules, the depth limits).
//!
//! Apart from the decoder since the two share only the settings.

use super::{config, Config};
use crate::libs::{c_f64_to_i32, lua_cfn, push_bytes, typename, LErr, LResult};
use mlua::ffi::{self, lua_State};
use std::os::raw::{c_char, c_int};

extern "C" {
    fn snprintf(buf: *mut c_char, n: usize, fmt: *const c_char, ...) -> c_int;
}

/// Refuses more output than any sane script needs; Redis would try to build
/// it and run out of memory (only reachable after disabling the sparse
/// array check).
const MAX_OUTPUT: usize = 1 << 30;

fn serialise_error(what: &str, reason: &str) -> LErr {
    LErr::at(format!("Cannot serialise {what}: {reason}"))
}

fn append_number(cfg: &Config, out: &mut Vec<u8>, n: f64) -> LResult<()> {
    match cfg.encode_invalid_numbers {
        0 if !n.is_finite() => return Err(serialise_error("number", "must not be NaN or Inf")),
        1 if n.is_nan() => {
            out.extend_from_slice(b"nan");
            return Ok(());
        }
        2 if !n.is_finite() => {
            out.extend_from_slice(b"null");
            return Ok(());
        }
        _ => {}
    }
    // An integer with at most `precision` digits prints as itself under
    // `%.*g`: skip printf for the common case.
    let exact = 10f64.powi(cfg.encode_number_precision.clamp(1, 14));
    if n.fract() == 0.0 && n.abs() < exact && !(n == 0.0 && n.is_sign_negative()) {
        out.extend_from_slice(itoa::Buffer::new().format(n as i64).as_bytes());
        return Ok(());
    }
    let mut buf = [0u8; 32];
    // SAFETY: snprintf writes at most buf.len() bytes including the NUL.
    let len = unsafe {
        snprintf(
            buf.as_mut_ptr() as *mut c_char,
            buf.len(),
            c"%.*g".as_ptr(),
            cfg.encode_number_precision,
            n,
        )
    };
    let len = usize::try_from(len).unwrap_or(0).min(buf.len() - 1);
    out.extend_from_slice(&buf[..len]);
    Ok(())
}

/// What each byte becomes in a JSON string: 0 kept, else the letter after
/// the backslash (`u` for `\u00XX`). A table: the match it replaces took
/// several compares a byte.
static ESCAPE: [u8; 256] = {
    let mut t = [0u8; 256];
    let mut i = 0;
    while i < 32 {
        t[i] = b'u';
        i += 1;
    }
    t[127] = b'u';
    t[b'"' as usize] = b'"';
    t[b'\\' as usize] = b'\\';
    t[b'/' as usize] = b'/';
    t[8] = b'b';
    t[9] = b't';
    t[10] = b'n';
    t[12] = b'f';
    t[13] = b'r';
    t
};

fn append_string(out: &mut Vec<u8>, s: &[u8]) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    out.reserve(s.len() + 2);
    out.push(b'"');
    let mut start = 0;
    for (i, &c) in s.iter().enumerate() {
        let esc = ESCAPE[usize::from(c)];
        if esc == 0 {
            continue;
        }
        out.extend_from_slice(&s[start..i]);
        start = i + 1;
        if esc == b'u' {
            out.extend_from_slice(b"\\u00");
            out.push(HEX[usize::from(c >> 4)]);
            out.push(HEX[usize::from(c & 15)]);
        } else {
            out.push(b'\\');
            out.push(esc);
        }
    }
    out.extend_from_slice(&s[start..]);
    out.push(b'"');
}

unsafe fn string_at<'a>(l: *mut lua_State, idx: c_int) -> &'a [u8] {
    let mut len = 0usize;
    let p = ffi::lua_tolstring(l, idx, &mut len);
    std::slice::from_raw_parts(p as *const u8, len)
}

/// The array length of the table on top, or -1 when it must be an object.
/// Mirrors the original's `int` arithmetic: a key of 2^31 or more turns the
/// running maximum into INT_MIN, which makes the table an object unless a
/// later key raises it again.
unsafe fn array_length(l: *mut lua_State, cfg: &Config) -> LResult<i32> {
    let mut max: i32 = 0;
    let mut items: i32 = 0;
    ffi::lua_pushnil(l);
    while ffi::lua_next(l, -2) != 0 {
        // The type first: converting a string key would run strtod.
        let is_number = ffi::lua_type(l, -2) == ffi::LUA_TNUMBER;
        let k = if is_number {
            ffi::lua_tonumber(l, -2)
        } else {
            0.0
        };
        if is_number && k != 0.0 && k.floor() == k && k >= 1.0 {
            if k > f64::from(max) {
                max = c_f64_to_i32(k);
            }
            items = items.wrapping_add(1);
            ffi::lua_pop(l, 1);
            continue;
        }
        ffi::lua_pop(l, 2);
        return Ok(-1);
    }
    if cfg.encode_sparse_ratio > 0
        && max > items.wrapping_mul(cfg.encode_sparse_ratio)
        && max > cfg.encode_sparse_safe
    {
        if cfg.encode_sparse_convert == 0 {
            return Err(serialise_error("table", "excessively sparse array"));
        }
        return Ok(-1);
    }
    Ok(max)
}

/// A table being encoded.
enum EncFrame {
    /// An array: the element being written (0 before the first) and the
    /// length.
    Array(i32, i32),
    /// An object: whether a key/value pair from `lua_next` is on the stack.
    Object(bool),
}

fn too_large() -> LErr {
    LErr::at("Cannot serialise: output too large")
}

/// Appends the value on top of the stack, leaving the stack as it was.
/// Nesting is tracked on the heap; the Lua stack holds what the original's
/// recursion holds (the tables, plus the current key of each object), so
/// `lua_checkstack` stops at the same depths as in Redis.
unsafe fn append_data(l: *mut lua_State, cfg: &Config, out: &mut Vec<u8>) -> LResult<()> {
    let mut frames: Vec<EncFrame> = Vec::new();
    loop {
        // Write the value on top, or open it if it is a table.
        match ffi::lua_type(l, -1) {
            ffi::LUA_TSTRING => append_string(out, string_at(l, -1)),
            ffi::LUA_TNUMBER => append_number(cfg, out, ffi::lua_tonumber(l, -1))?,
            ffi::LUA_TBOOLEAN => {
                if ffi::lua_toboolean(l, -1) != 0 {
                    out.extend_from_slice(b"true")
                } else {
                    out.extend_from_slice(b"false")
                }
            }
            ffi::LUA_TNIL => out.extend_from_slice(b"null"),
            ffi::LUA_TLIGHTUSERDATA if ffi::lua_touserdata(l, -1).is_null() => {
                out.extend_from_slice(b"null")
            }
            ffi::LUA_TTABLE => {
                let depth = frames.len() as c_int + 1;
                if depth > cfg.encode_max_depth || ffi::lua_checkstack(l, 3) == 0 {
                    return Err(LErr::at(format!(
                        "Cannot serialise, excessive nesting ({depth})"
                    )));
                }
                let len = array_length(l, cfg)?;
                if len > 0 {
                    out.push(b'[');
                    frames.push(EncFrame::Array(0, len));
                } else {
                    out.push(b'{');
                    ffi::lua_pushnil(l);
                    frames.push(EncFrame::Object(false));
                }
            }
            _ => return Err(serialise_error(typename(l, -1), "type not supported")),
        }
        if out.len() > MAX_OUTPUT {
            return Err(too_large());
        }
        // Move to the next value to write, closing finished tables.
        loop {
            match frames.last_mut() {
                None => return Ok(()),
                Some(EncFrame::Array(i, len)) => {
                    if *i > 0 {
                        ffi::lua_pop(l, 1);
                    }
                    if *i == *len {
                        out.push(b']');
                        frames.pop();
                        continue;
                    }
                    *i += 1;
                    if *i > 1 {
                        out.push(b',');
                    }
                    ffi::lua_rawgeti_(l, -1, *i);
                    break;
                }
                Some(EncFrame::Object(started)) => {
                    if *started {
                        ffi::lua_pop(l, 1);
                    }
                    if ffi::lua_next(l, -2) == 0 {
                        out.push(b'}');
                        frames.pop();
                        continue;
                    }
                    if *started {
                        out.push(b',');
                    }
                    *started = true;
                    match ffi::lua_type(l, -2) {
                        ffi::LUA_TNUMBER => {
                            out.push(b'"');
                            append_number(cfg, out, ffi::lua_tonumber(l, -2))?;
                            out.extend_from_slice(b"\":");
                        }
                        ffi::LUA_TSTRING => {
                            append_string(out, string_at(l, -2));
                            out.push(b':');
                        }
                        _ => {
                            return Err(serialise_error(
                                typename(l, -2),
                                "table key must be a number or string",
                            ))
                        }
                    }
                    break;
                }
            }
        }
    }
}

unsafe fn encode_impl(l: *mut lua_State) -> LResult<c_int> {
    let cfg = *config(l);
    if ffi::lua_gettop(l) != 1 {
        return Err(LErr::arg(1, "expected 1 argument"));
    }
    // Most encodings are small: one allocation instead of a few regrowths.
    let mut out = Vec::with_capacity(128);
    append_data(l, &cfg, &mut out)?;
    push_bytes(l, &out);
    Ok(1)
}
lua_cfn!(pub(super) encode => encode_impl);
