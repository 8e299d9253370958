//! `cjson.decode`: JSON text to a Lua value, as lua-cjson 2.1.0 reads it
//! (numbers through `strtod`, input up to the first NUL, errors naming the
//! token kinds, the depth limits).
//!
//! Apart from the encoder since the two share only the settings.

use super::{config, Config};
use crate::libs::{check_cstring, lua_cfn, push_bytes, LErr, LResult};
use mlua::ffi::{self, lua_State};
use std::os::raw::{c_char, c_int};

extern "C" {
    fn strtod(s: *const c_char, end: *mut *mut c_char) -> f64;
}

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
            // The plain run up to the next quote, backslash or NUL, at once.
            let rest = self.data.get(self.pos..).unwrap_or(&[]);
            let run = rest
                .iter()
                .position(|&b| b == b'"' || b == b'\\' || b == 0)
                .unwrap_or(rest.len());
            self.buf.extend_from_slice(&rest[..run]);
            self.pos += run;
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
lua_cfn!(pub(super) decode => decode_impl);
