//! How the debugger shows things: Lua values (`print`, `eval`,
//! `redis.debug`), `redis.call`'s RESP replies in Redis's human form, and
//! the C formats (`%g`, `sdscatrepr`) both are made of.
//!
//! Apart because it is pure formatting, matched to Redis's output byte for
//! byte, and shared by the commands and the script's entry points.

use super::Debugger;
use mlua::ffi::{self, lua_State};
use std::os::raw::c_int;

/// Nesting shown of a table inside a value (`LUA_MINSTACK / 2`).
const MAX_DEPTH: usize = 10;

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

fn find_crlf(b: &[u8], from: usize) -> Option<usize> {
    b.get(from..)?
        .windows(2)
        .position(|w| w == b"\r\n")
        .map(|n| from + n)
}

/// Appends the reply at `r[pos..]` in Redis's human form; where the next
/// one starts.
pub(super) fn resp_to_human(o: &mut Vec<u8>, r: &[u8], pos: usize) -> usize {
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
pub(super) unsafe fn cat_value(l: *mut lua_State, s: &mut Vec<u8>, idx: c_int, level: usize) {
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
pub(super) unsafe fn log_top(l: *mut lua_State, d: &mut Debugger, prefix: &[u8]) {
    let mut s = prefix.to_vec();
    cat_value(l, &mut s, ffi::lua_gettop(l), 0);
    d.log_max(s);
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
}
