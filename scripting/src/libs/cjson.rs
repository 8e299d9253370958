//! `cjson`: JSON as lua-cjson 2.1.0 (the version Redis 7.0 bundles) encodes
//! and decodes it, settings included.
//!
//! Notable behaviours kept from the original: numbers print with `%.14g`;
//! `/` is escaped; a table is an array when all its keys are integers >= 1
//! (holes become null) unless it is "excessively sparse"; an empty table is
//! `{}`; decoding goes through `strtod`, so hex, `inf` and `nan` are
//! accepted by default; input stops at the first NUL; error messages name
//! the token kinds as `T_END`, `T_ARR_END`, ...; nesting is limited both by
//! the depth settings and by Lua's stack (`lua_checkstack`), at the same
//! depths as in Redis.

use super::{
    c_f64_to_i32, check_cstring, check_integer, lua_cfn, push_bytes, set_field, set_str, typename,
    LErr, LResult,
};
use mlua::ffi::{self, lua_State};
use mlua::Lua;
use std::ffi::CStr;
use std::os::raw::{c_char, c_int, c_void};

extern "C" {
    fn snprintf(buf: *mut c_char, n: usize, fmt: *const c_char, ...) -> c_int;
    fn strtod(s: *const c_char, end: *mut *mut c_char) -> f64;
}

/// Installs the global `cjson`.
pub fn register(lua: &Lua) -> mlua::Result<()> {
    super::register_global(lua, "cjson", push_module)
}

#[repr(C)]
#[derive(Clone, Copy)]
struct Config {
    encode_sparse_convert: c_int,
    encode_sparse_ratio: c_int,
    encode_sparse_safe: c_int,
    encode_max_depth: c_int,
    encode_invalid_numbers: c_int,
    encode_number_precision: c_int,
    encode_keep_buffer: c_int,
    decode_invalid_numbers: c_int,
    decode_max_depth: c_int,
}

const DEFAULT_CONFIG: Config = Config {
    encode_sparse_convert: 0,
    encode_sparse_ratio: 2,
    encode_sparse_safe: 10,
    encode_max_depth: 1000,
    encode_invalid_numbers: 0,
    encode_number_precision: 14,
    encode_keep_buffer: 1,
    decode_invalid_numbers: 1,
    decode_max_depth: 1000,
};

/// Pushes a module table with its own settings (what `cjson.new()` returns).
unsafe fn push_module(l: *mut lua_State) {
    ffi::lua_createtable(l, 0, 16);
    let cfg = ffi::lua_newuserdata(l, std::mem::size_of::<Config>()) as *mut Config;
    cfg.write(DEFAULT_CONFIG);
    let fns: [(&CStr, ffi::lua_CFunction); 10] = [
        (c"encode", encode),
        (c"decode", decode),
        (c"encode_sparse_array", encode_sparse_array),
        (c"encode_max_depth", encode_max_depth),
        (c"decode_max_depth", decode_max_depth),
        (c"encode_number_precision", encode_number_precision),
        (c"encode_keep_buffer", encode_keep_buffer),
        (c"encode_invalid_numbers", encode_invalid_numbers),
        (c"decode_invalid_numbers", decode_invalid_numbers),
        (c"new", new),
    ];
    for (name, f) in fns {
        ffi::lua_pushvalue(l, -1);
        ffi::lua_pushcclosure(l, f, 1);
        ffi::lua_setfield(l, -3, name.as_ptr());
    }
    ffi::lua_pop(l, 1);
    ffi::lua_pushlightuserdata(l, std::ptr::null_mut::<c_void>());
    set_field(l, c"null");
    set_str(l, c"_NAME", "cjson");
    set_str(l, c"_VERSION", "2.1.0");
}

unsafe fn config<'a>(l: *mut lua_State) -> &'a mut Config {
    &mut *(ffi::lua_touserdata(l, ffi::lua_upvalueindex(1)) as *mut Config)
}

unsafe fn new_impl(l: *mut lua_State) -> LResult<c_int> {
    push_module(l);
    Ok(1)
}
lua_cfn!(new => new_impl);

// ---- settings

unsafe fn arg_init(l: *mut lua_State, args: c_int) -> LResult<()> {
    if ffi::lua_gettop(l) > args {
        return Err(LErr::arg(args + 1, "found too many arguments"));
    }
    // Missing arguments become nils, so the values pushed as results land
    // after them.
    ffi::lua_settop(l, args);
    Ok(())
}

/// Sets an integer setting when the argument is given; pushes its value.
unsafe fn integer_option(
    l: *mut lua_State,
    idx: c_int,
    setting: &mut c_int,
    min: c_int,
    max: c_int,
) -> LResult<()> {
    if ffi::lua_isnoneornil(l, idx) == 0 {
        let v = check_integer(l, idx)?;
        if v < i64::from(min) || v > i64::from(max) {
            // The original always names argument 1 here.
            return Err(LErr::arg(
                1,
                format!("expected integer between {min} and {max}"),
            ));
        }
        *setting = v as c_int;
    }
    ffi::lua_pushinteger(l, i64::from(*setting));
    Ok(())
}

/// Sets an enumerated setting from a boolean or an option name; pushes its
/// value (a boolean when it is off or on).
unsafe fn enum_option(
    l: *mut lua_State,
    idx: c_int,
    setting: &mut c_int,
    options: &[&str],
) -> LResult<()> {
    if ffi::lua_isnoneornil(l, idx) == 0 {
        if ffi::lua_type(l, idx) == ffi::LUA_TBOOLEAN {
            *setting = ffi::lua_toboolean(l, idx);
        } else {
            let s = super::check_lstring(l, idx)?;
            let s = s.split(|&b| b == 0).next().unwrap_or_default();
            match options.iter().position(|o| o.as_bytes() == s) {
                Some(i) => *setting = i as c_int,
                None => {
                    let mut msg = b"invalid option '".to_vec();
                    msg.extend_from_slice(s);
                    msg.push(b'\'');
                    return Err(LErr::Arg(idx, msg));
                }
            }
        }
    }
    if *setting == 0 || *setting == 1 {
        ffi::lua_pushboolean(l, *setting);
    } else {
        let name = options.get(*setting as usize).copied().unwrap_or("");
        push_bytes(l, name.as_bytes());
    }
    Ok(())
}

const ON_OFF: [&str; 2] = ["off", "on"];

unsafe fn encode_sparse_array_impl(l: *mut lua_State) -> LResult<c_int> {
    let cfg = config(l);
    arg_init(l, 3)?;
    enum_option(l, 1, &mut cfg.encode_sparse_convert, &ON_OFF)?;
    integer_option(l, 2, &mut cfg.encode_sparse_ratio, 0, c_int::MAX)?;
    integer_option(l, 3, &mut cfg.encode_sparse_safe, 0, c_int::MAX)?;
    Ok(3)
}
lua_cfn!(encode_sparse_array => encode_sparse_array_impl);

unsafe fn encode_max_depth_impl(l: *mut lua_State) -> LResult<c_int> {
    let cfg = config(l);
    arg_init(l, 1)?;
    integer_option(l, 1, &mut cfg.encode_max_depth, 1, c_int::MAX)?;
    Ok(1)
}
lua_cfn!(encode_max_depth => encode_max_depth_impl);

unsafe fn decode_max_depth_impl(l: *mut lua_State) -> LResult<c_int> {
    let cfg = config(l);
    arg_init(l, 1)?;
    integer_option(l, 1, &mut cfg.decode_max_depth, 1, c_int::MAX)?;
    Ok(1)
}
lua_cfn!(decode_max_depth => decode_max_depth_impl);

unsafe fn encode_number_precision_impl(l: *mut lua_State) -> LResult<c_int> {
    let cfg = config(l);
    arg_init(l, 1)?;
    integer_option(l, 1, &mut cfg.encode_number_precision, 1, 14)?;
    Ok(1)
}
lua_cfn!(encode_number_precision => encode_number_precision_impl);

unsafe fn encode_keep_buffer_impl(l: *mut lua_State) -> LResult<c_int> {
    let cfg = config(l);
    arg_init(l, 1)?;
    enum_option(l, 1, &mut cfg.encode_keep_buffer, &ON_OFF)?;
    Ok(1)
}
lua_cfn!(encode_keep_buffer => encode_keep_buffer_impl);

unsafe fn encode_invalid_numbers_impl(l: *mut lua_State) -> LResult<c_int> {
    let cfg = config(l);
    arg_init(l, 1)?;
    enum_option(
        l,
        1,
        &mut cfg.encode_invalid_numbers,
        &["off", "on", "null"],
    )?;
    Ok(1)
}
lua_cfn!(encode_invalid_numbers => encode_invalid_numbers_impl);

unsafe fn decode_invalid_numbers_impl(l: *mut lua_State) -> LResult<c_int> {
    let cfg = config(l);
    arg_init(l, 1)?;
    enum_option(l, 1, &mut cfg.decode_invalid_numbers, &ON_OFF)?;
    Ok(1)
}
lua_cfn!(decode_invalid_numbers => decode_invalid_numbers_impl);

// ---- encoding

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

fn append_string(out: &mut Vec<u8>, s: &[u8]) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    out.reserve(s.len() + 2);
    out.push(b'"');
    let mut start = 0;
    for (i, &c) in s.iter().enumerate() {
        let esc: &[u8] = match c {
            b'"' => b"\\\"",
            b'\\' => b"\\\\",
            b'/' => b"\\/",
            8 => b"\\b",
            9 => b"\\t",
            10 => b"\\n",
            12 => b"\\f",
            13 => b"\\r",
            0..=31 | 127 => &[],
            _ => continue,
        };
        out.extend_from_slice(&s[start..i]);
        start = i + 1;
        if esc.is_empty() {
            out.extend_from_slice(b"\\u00");
            out.push(HEX[usize::from(c >> 4)]);
            out.push(HEX[usize::from(c & 15)]);
        } else {
            out.extend_from_slice(esc);
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
lua_cfn!(encode => encode_impl);

// ---- decoding

#[derive(Clone, Copy, PartialEq)]
enum Tok {
    ObjBegin,
    ObjEnd,
    ArrBegin,
    ArrEnd,
    Str,
    Number(f64),
    Boolean(bool),
    Null,
    Colon,
    Comma,
    End,
    Error(&'static str),
}

impl Tok {
    fn name(self) -> &'static str {
        match self {
            Tok::ObjBegin => "T_OBJ_BEGIN",
            Tok::ObjEnd => "T_OBJ_END",
            Tok::ArrBegin => "T_ARR_BEGIN",
            Tok::ArrEnd => "T_ARR_END",
            Tok::Str => "T_STRING",
            Tok::Number(_) => "T_NUMBER",
            Tok::Boolean(_) => "T_BOOLEAN",
            Tok::Null => "T_NULL",
            Tok::Colon => "T_COLON",
            Tok::Comma => "T_COMMA",
            Tok::End => "T_END",
            Tok::Error(msg) => msg,
        }
    }
}

struct Token {
    tok: Tok,
    /// Byte offset of the token (or of the error within it).
    index: usize,
}

struct Parser<'a> {
    /// The input including Lua's terminating NUL; parsing stops at the first
    /// NUL, as in C.
    data: &'a [u8],
    pos: usize,
    cfg: Config,
    depth: c_int,
    /// The text of the last string token.
    buf: Vec<u8>,
}

fn hex4(s: &[u8]) -> Option<u32> {
    let mut v = 0u32;
    for &c in s.get(..4)? {
        v = (v << 4) | (c as char).to_digit(16)?;
    }
    Some(v)
}

fn push_utf8(out: &mut Vec<u8>, cp: u32) {
    if cp <= 0x7f {
        out.push(cp as u8);
    } else if cp <= 0x7ff {
        out.push(0xc0 | (cp >> 6) as u8);
        out.push(0x80 | (cp & 0x3f) as u8);
    } else if cp <= 0xffff {
        out.push(0xe0 | (cp >> 12) as u8);
        out.push(0x80 | ((cp >> 6) & 0x3f) as u8);
        out.push(0x80 | (cp & 0x3f) as u8);
    } else {
        out.push(0xf0 | (cp >> 18) as u8);
        out.push(0x80 | ((cp >> 12) & 0x3f) as u8);
        out.push(0x80 | ((cp >> 6) & 0x3f) as u8);
        out.push(0x80 | (cp & 0x3f) as u8);
    }
}

impl Parser<'_> {
    fn at(&self, i: usize) -> u8 {
        self.data.get(i).copied().unwrap_or(0)
    }

    fn starts_with(&self, lit: &[u8]) -> bool {
        self.data[self.pos..].starts_with(lit)
    }

    /// The numbers JSON forbids but `strtod` reads: a leading `+`, hex,
    /// leading zeros, inf and nan.
    fn is_invalid_number(&self) -> bool {
        let mut p = self.pos;
        if self.at(p) == b'+' {
            return true;
        }
        if self.at(p) == b'-' {
            p += 1;
        }
        let c = self.at(p);
        if c == b'0' {
            let c2 = self.at(p + 1);
            return c2 | 0x20 == b'x' || c2.is_ascii_digit();
        }
        if c <= b'9' {
            return false;
        }
        let rest = &self.data[p..];
        let prefix = |w: &[u8]| rest.len() >= 3 && rest[..3].eq_ignore_ascii_case(w);
        prefix(b"inf") || prefix(b"nan")
    }

    fn number_token(&mut self) -> Token {
        let start = self.pos;
        if let Some((n, end)) = self.plain_integer() {
            self.pos = end;
            return Token {
                tok: Tok::Number(n),
                index: start,
            };
        }
        let mut end: *mut c_char = std::ptr::null_mut();
        let base = self.data.as_ptr();
        // SAFETY: data ends with a NUL (Lua strings always do), so strtod
        // stops inside the buffer.
        let n = unsafe { strtod(base.add(start) as *const c_char, &mut end) };
        let consumed = (end as usize)
            .wrapping_sub(base as usize)
            .wrapping_sub(start);
        if end.is_null() || consumed == 0 || start + consumed >= self.data.len() {
            return Token {
                tok: Tok::Error("invalid number"),
                index: start,
            };
        }
        self.pos = start + consumed;
        Token {
            tok: Tok::Number(n),
            index: start,
        }
    }

    /// `-?[0-9]{1,15}` not followed by anything `strtod` would read on:
    /// exactly representable, so its value without `strtod`; and where it
    /// ends.
    fn plain_integer(&self) -> Option<(f64, usize)> {
        let neg = self.at(self.pos) == b'-';
        let first = self.pos + neg as usize;
        let mut p = first;
        let mut v: u64 = 0;
        while let c @ b'0'..=b'9' = self.at(p) {
            v = v * 10 + u64::from(c - b'0');
            p += 1;
            if p - first > 15 {
                return None;
            }
        }
        if p == first || matches!(self.at(p), b'.' | b'e' | b'E' | b'x' | b'X') {
            return None;
        }
        // The NUL terminator must stay past the token, as with strtod.
        if p >= self.data.len() {
            return None;
        }
        let n = v as f64;
        Some((if neg { -n } else { n }, p))
    }

    fn string_token(&mut self) -> Token {
        let start = self.pos;
        self.pos += 1;
        self.buf.clear();
        let err = |index| Token {
            tok: Tok::Error("invalid escape code"),
            index,
        };
        loop {
            let c = self.at(self.pos);
            match c {
                b'"' => break,
                0 => {
                    return Token {
                        tok: Tok::Error("unexpected end of string"),
                        index: self.pos,
                    }
                }
                b'\\' => {
                    let e = self.at(self.pos + 1);
                    let out = match e {
                        b'"' | b'\\' | b'/' => e,
                        b'b' => 8,
                        b'f' => 12,
                        b'n' => b'\n',
                        b'r' => b'\r',
                        b't' => b'\t',
                        b'u' => {
                            let Some(len) = self.unicode_escape() else {
                                return Token {
                                    tok: Tok::Error("invalid unicode escape code"),
                                    index: self.pos,
                                };
                            };
                            self.pos += len;
                            continue;
                        }
                        _ => return err(self.pos),
                    };
                    self.buf.push(out);
                    self.pos += 2;
                }
                _ => {
                    self.buf.push(c);
                    self.pos += 1;
                }
            }
        }
        self.pos += 1;
        Token {
            tok: Tok::Str,
            index: start,
        }
    }

    /// Decodes `\uXXXX` (or a surrogate pair) at pos into buf; returns the
    /// escape's length.
    fn unicode_escape(&mut self) -> Option<usize> {
        let s = &self.data[self.pos..];
        let mut cp = hex4(s.get(2..)?)?;
        let mut len = 6;
        if cp & 0xf800 == 0xd800 {
            if cp & 0xfc00 != 0xd800 {
                return None;
            }
            if s.get(6) != Some(&b'\\') || s.get(7) != Some(&b'u') {
                return None;
            }
            let lo = hex4(s.get(8..)?)?;
            if lo & 0xfc00 != 0xdc00 {
                return None;
            }
            cp = (((cp & 0x3ff) << 10) | (lo & 0x3ff)) + 0x10000;
            len = 12;
        }
        push_utf8(&mut self.buf, cp);
        Some(len)
    }

    fn next_token(&mut self) -> Token {
        loop {
            let c = self.at(self.pos);
            let index = self.pos;
            let single = match c {
                b' ' | b'\t' | b'\n' | b'\r' => {
                    self.pos += 1;
                    continue;
                }
                0 => Some(Tok::End),
                b'{' => Some(Tok::ObjBegin),
                b'}' => Some(Tok::ObjEnd),
                b'[' => Some(Tok::ArrBegin),
                b']' => Some(Tok::ArrEnd),
                b':' => Some(Tok::Colon),
                b',' => Some(Tok::Comma),
                _ => None,
            };
            if let Some(tok) = single {
                if tok != Tok::End {
                    self.pos += 1;
                }
                return Token { tok, index };
            }
            if c == b'"' {
                return self.string_token();
            }
            if c == b'-' || c.is_ascii_digit() {
                if self.cfg.decode_invalid_numbers == 0 && self.is_invalid_number() {
                    return Token {
                        tok: Tok::Error("invalid number"),
                        index,
                    };
                }
                return self.number_token();
            }
            for (lit, tok) in [
                (&b"true"[..], Tok::Boolean(true)),
                (b"false", Tok::Boolean(false)),
                (b"null", Tok::Null),
            ] {
                if self.starts_with(lit) {
                    self.pos += lit.len();
                    return Token { tok, index };
                }
            }
            if self.cfg.decode_invalid_numbers != 0 && self.is_invalid_number() {
                return self.number_token();
            }
            return Token {
                tok: Tok::Error("invalid token"),
                index,
            };
        }
    }

    fn parse_error(&self, expected: &str, token: &Token) -> LErr {
        LErr::at(format!(
            "Expected {expected} but found {} at character {}",
            token.tok.name(),
            token.index + 1
        ))
    }

    /// Enters a nested object or array needing `slots` stack slots.
    unsafe fn descend(&mut self, l: *mut lua_State, slots: c_int) -> LResult<()> {
        self.depth += 1;
        if self.depth <= self.cfg.decode_max_depth && ffi::lua_checkstack(l, slots) != 0 {
            return Ok(());
        }
        Err(LErr::at(format!(
            "Found too many nested data structures ({}) at character {}",
            self.depth, self.pos
        )))
    }

    /// Pushes the value starting with `token`. Nesting is tracked on the
    /// heap; the Lua stack holds what the original's recursion holds (each
    /// object's table and pending key, each array's table), so
    /// `lua_checkstack` stops at the same depths as in Redis.
    unsafe fn value(&mut self, l: *mut lua_State, mut token: Token) -> LResult<()> {
        // Open arrays carry the index of their next element; objects None.
        let mut open: Vec<Option<c_int>> = Vec::new();
        loop {
            // Push the value `token` starts, or open it.
            let complete = match token.tok {
                Tok::Str => {
                    push_bytes(l, &self.buf);
                    true
                }
                Tok::Number(n) => {
                    ffi::lua_pushnumber(l, n);
                    true
                }
                Tok::Boolean(b) => {
                    ffi::lua_pushboolean(l, c_int::from(b));
                    true
                }
                Tok::Null => {
                    ffi::lua_pushlightuserdata(l, std::ptr::null_mut());
                    true
                }
                Tok::ObjBegin => {
                    self.descend(l, 3)?;
                    ffi::lua_newtable(l);
                    token = self.next_token();
                    if token.tok == Tok::ObjEnd {
                        self.depth -= 1;
                        true
                    } else {
                        open.push(None);
                        token = self.object_key(l, token)?;
                        false
                    }
                }
                Tok::ArrBegin => {
                    self.descend(l, 2)?;
                    ffi::lua_newtable(l);
                    token = self.next_token();
                    if token.tok == Tok::ArrEnd {
                        self.depth -= 1;
                        true
                    } else {
                        open.push(Some(1));
                        false
                    }
                }
                _ => return Err(self.parse_error("value", &token)),
            };
            if !complete {
                continue;
            }
            // Store the finished value, closing what it finishes.
            loop {
                match open.last_mut() {
                    None => return Ok(()),
                    Some(None) => {
                        ffi::lua_rawset(l, -3);
                        token = self.next_token();
                        if token.tok == Tok::ObjEnd {
                            self.depth -= 1;
                            open.pop();
                            continue;
                        }
                        if token.tok != Tok::Comma {
                            return Err(self.parse_error("comma or object end", &token));
                        }
                        let next = self.next_token();
                        token = self.object_key(l, next)?;
                        break;
                    }
                    Some(Some(i)) => {
                        ffi::lua_rawseti_(l, -2, *i);
                        *i = i.wrapping_add(1);
                        token = self.next_token();
                        if token.tok == Tok::ArrEnd {
                            self.depth -= 1;
                            open.pop();
                            continue;
                        }
                        if token.tok != Tok::Comma {
                            return Err(self.parse_error("comma or array end", &token));
                        }
                        token = self.next_token();
                        break;
                    }
                }
            }
        }
    }

    /// Pushes the key `token` must be and checks the colon after it;
    /// returns the token that starts the value.
    unsafe fn object_key(&mut self, l: *mut lua_State, token: Token) -> LResult<Token> {
        if token.tok != Tok::Str {
            return Err(self.parse_error("object key string", &token));
        }
        push_bytes(l, &self.buf);
        let token = self.next_token();
        if token.tok != Tok::Colon {
            return Err(self.parse_error("colon", &token));
        }
        Ok(self.next_token())
    }
}

unsafe fn decode_impl(l: *mut lua_State) -> LResult<c_int> {
    let cfg = *config(l);
    if ffi::lua_gettop(l) != 1 {
        return Err(LErr::arg(1, "expected 1 argument"));
    }
    let data = check_cstring(l, 1)?;
    // data includes the terminating NUL.
    if data.len() > 2 && (data[0] == 0 || data[1] == 0) {
        return Err(LErr::at("JSON parser does not support UTF-16 or UTF-32"));
    }
    let mut p = Parser {
        data,
        pos: 0,
        cfg,
        depth: 0,
        buf: Vec::with_capacity(64),
    };
    let token = p.next_token();
    p.value(l, token)?;
    let token = p.next_token();
    if token.tok != Tok::End {
        return Err(p.parse_error("the end", &token));
    }
    Ok(1)
}
lua_cfn!(decode => decode_impl);
