//! `struct`: binary packing as Roberto Ierusalimschy's struct library, with
//! the sizes of x86-64 Linux (`l`, `L`, `T` are 8 bytes, `i` is 4, maximum
//! alignment 8) and the x86-64 results of its C conversions.

use super::{
    c_f64_to_i64, c_f64_to_u64, check_lstring, check_number, lua_cfn, opt_integer, push_bytes,
    register_global, set_fn, stack_overflow, LErr, LResult,
};
use mlua::ffi::{self, lua_State};
use mlua::Lua;
use std::os::raw::c_int;

/// Installs the global `struct`.
pub fn register(lua: &Lua) -> mlua::Result<()> {
    register_global(lua, "struct", push_module)
}

unsafe fn push_module(l: *mut lua_State) {
    ffi::lua_createtable(l, 0, 3);
    set_fn(l, c"pack", pack);
    set_fn(l, c"unpack", unpack);
    set_fn(l, c"size", size);
}

const MAXINTSIZE: usize = 32;
const MAXALIGN: usize = 8;

#[derive(Clone, Copy, PartialEq)]
enum Endian {
    Big,
    Little,
}

struct Header {
    endian: Endian,
    align: usize,
}

impl Header {
    fn new() -> Header {
        Header {
            endian: Endian::Little,
            align: 1,
        }
    }
}

/// The format as C sees it: up to the first NUL.
fn c_format(fmt: &[u8]) -> &[u8] {
    match fmt.iter().position(|&b| b == 0) {
        Some(i) => &fmt[..i],
        None => fmt,
    }
}

/// Reads an optional decimal count at `fmt[*pos..]`.
fn getnum(fmt: &[u8], pos: &mut usize, df: usize) -> LResult<usize> {
    if !fmt.get(*pos).is_some_and(u8::is_ascii_digit) {
        return Ok(df);
    }
    let mut a: i32 = 0;
    while let Some(&d) = fmt.get(*pos).filter(|d| d.is_ascii_digit()) {
        let d = i32::from(d - b'0');
        if a > i32::MAX / 10 || a * 10 > i32::MAX - d {
            return Err(LErr::at("integral size overflow"));
        }
        a = a * 10 + d;
        *pos += 1;
    }
    Ok(a as usize)
}

fn optsize(opt: u8, fmt: &[u8], pos: &mut usize) -> LResult<usize> {
    Ok(match opt {
        b'B' | b'b' => 1,
        b'H' | b'h' => 2,
        b'L' | b'l' | b'T' | b'd' => 8,
        b'f' => 4,
        b'x' => 1,
        b'c' => getnum(fmt, pos, 1)?,
        b'i' | b'I' => {
            let sz = getnum(fmt, pos, 4)?;
            if sz > MAXINTSIZE {
                return Err(LErr::at(format!(
                    "integral size {sz} is larger than limit of {MAXINTSIZE}"
                )));
            }
            sz
        }
        _ => 0,
    })
}

/// Padding before an item of `size` bytes at offset `len`. The arithmetic is
/// the C library's, including for sizes that are not powers of two.
fn gettoalign(len: usize, h: &Header, opt: u8, size: usize) -> usize {
    if size == 0 || opt == b'c' {
        return 0;
    }
    let align = if size > h.align { h.align } else { size };
    (align.wrapping_sub(len & align.wrapping_sub(1))) & align.wrapping_sub(1)
}

/// The non-data options; anything else is an invalid option.
fn controloptions(opt: u8, fmt: &[u8], pos: &mut usize, h: &mut Header) -> LResult<()> {
    match opt {
        b' ' => Ok(()),
        b'>' => {
            h.endian = Endian::Big;
            Ok(())
        }
        b'<' => {
            h.endian = Endian::Little;
            Ok(())
        }
        b'!' => alignment(fmt, pos, h),
        _ => {
            let mut msg = b"invalid format option '".to_vec();
            msg.push(opt);
            msg.push(b'\'');
            Err(LErr::Arg(1, msg))
        }
    }
}

fn alignment(fmt: &[u8], pos: &mut usize, h: &mut Header) -> LResult<()> {
    let a = getnum(fmt, pos, MAXALIGN)?;
    if a == 0 || a & (a - 1) != 0 {
        return Err(LErr::at(format!("alignment {a} is not a power of 2")));
    }
    h.align = a;
    Ok(())
}

fn put_integer(out: &mut Vec<u8>, n: f64, endian: Endian, size: usize) {
    let mut value = if n < 0.0 {
        c_f64_to_i64(n) as u64
    } else {
        c_f64_to_u64(n)
    };
    let start = out.len();
    for _ in 0..size {
        out.push((value & 0xff) as u8);
        value >>= 8;
    }
    if endian == Endian::Big {
        out[start..].reverse();
    }
}

fn get_integer(buf: &[u8], endian: Endian, signed: bool) -> f64 {
    let mut l: u64 = 0;
    let mut add = |b: u8| l = (l << 8) | u64::from(b);
    match endian {
        Endian::Big => buf.iter().for_each(|&b| add(b)),
        Endian::Little => buf.iter().rev().for_each(|&b| add(b)),
    }
    if !signed {
        return l as f64;
    }
    // x86 masks the shift count, which is what the C code gets for sizes
    // beyond 8 bytes.
    let shift = (buf.len() as u32 * 8).wrapping_sub(1) & 63;
    let mask = u64::MAX << shift;
    if l & mask != 0 {
        l |= mask;
    }
    l as i64 as f64
}

fn ordered<const N: usize>(mut b: [u8; N], endian: Endian) -> [u8; N] {
    if endian == Endian::Big {
        b.reverse();
    }
    b
}

unsafe fn pack_impl(l: *mut lua_State) -> LResult<c_int> {
    let fmt = c_format(check_lstring(l, 1)?);
    // The C library pushes a nil mark after the arguments, so a missing
    // argument right after the last one reads as nil, not "no value".
    let nargs = ffi::lua_gettop(l);
    let arg_number = |arg: c_int| -> LResult<f64> {
        if arg == nargs + 1 {
            return Err(LErr::arg(arg, "number expected, got nil"));
        }
        check_number(l, arg)
    };
    let arg_string = |arg: c_int| -> LResult<&[u8]> {
        if arg == nargs + 1 {
            return Err(LErr::arg(arg, "string expected, got nil"));
        }
        check_lstring(l, arg)
    };
    let mut h = Header::new();
    let mut arg: c_int = 2;
    let mut out = Vec::new();
    let mut pos = 0;
    while let Some(&opt) = fmt.get(pos) {
        pos += 1;
        let mut size = optsize(opt, fmt, &mut pos)?;
        let toalign = gettoalign(out.len(), &h, opt, size);
        out.resize(out.len() + toalign, 0);
        match opt {
            b'b' | b'B' | b'h' | b'H' | b'l' | b'L' | b'T' | b'i' | b'I' => {
                let n = arg_number(arg)?;
                arg += 1;
                put_integer(&mut out, n, h.endian, size);
            }
            b'x' => out.push(0),
            b'f' => {
                let f = arg_number(arg)? as f32;
                arg += 1;
                out.extend_from_slice(&ordered(f.to_le_bytes(), h.endian));
            }
            b'd' => {
                let d = arg_number(arg)?;
                arg += 1;
                out.extend_from_slice(&ordered(d.to_le_bytes(), h.endian));
            }
            b'c' | b's' => {
                let s = arg_string(arg)?;
                arg += 1;
                if size == 0 {
                    size = s.len();
                }
                if s.len() < size {
                    // The C library reports the argument after the string.
                    return Err(LErr::arg(arg, "string too short"));
                }
                out.extend_from_slice(&s[..size]);
                if opt == b's' {
                    out.push(0);
                }
            }
            _ => controloptions(opt, fmt, &mut pos, &mut h)?,
        }
    }
    push_bytes(l, &out);
    Ok(1)
}
lua_cfn!(pack => pack_impl);

unsafe fn unpack_impl(l: *mut lua_State) -> LResult<c_int> {
    let fmt = c_format(check_lstring(l, 1)?);
    let data = check_lstring(l, 2)?;
    let ld = data.len();
    let offset = opt_integer(l, 3, 1)? as u64 as usize;
    if offset == 0 {
        return Err(LErr::arg(3, "offset must be 1 or greater"));
    }
    let mut at = offset - 1;
    let mut h = Header::new();
    let mut n: c_int = 0;
    let mut pos = 0;
    let too_short = || LErr::arg(2, "data string too short");
    while let Some(&opt) = fmt.get(pos) {
        pos += 1;
        let mut size = optsize(opt, fmt, &mut pos)?;
        at = at.wrapping_add(gettoalign(at, &h, opt, size));
        if !(size <= ld && at <= ld - size) {
            return Err(too_short());
        }
        if ffi::lua_checkstack(l, 2) == 0 {
            return Err(stack_overflow("too many results"));
        }
        let item = &data[at..at + size];
        match opt {
            b'b' | b'B' | b'h' | b'H' | b'l' | b'L' | b'T' | b'i' | b'I' => {
                let v = get_integer(item, h.endian, opt.is_ascii_lowercase());
                ffi::lua_pushnumber(l, v);
                n += 1;
            }
            b'x' => {}
            b'f' => {
                let mut b = [0u8; 4];
                b.copy_from_slice(item);
                let f = f32::from_le_bytes(ordered(b, h.endian));
                ffi::lua_pushnumber(l, f64::from(f));
                n += 1;
            }
            b'd' => {
                let mut b = [0u8; 8];
                b.copy_from_slice(item);
                ffi::lua_pushnumber(l, f64::from_le_bytes(ordered(b, h.endian)));
                n += 1;
            }
            b'c' => {
                if size == 0 {
                    if n == 0 || ffi::lua_isnumber(l, -1) == 0 {
                        return Err(LErr::at("format 'c0' needs a previous size"));
                    }
                    size = c_f64_to_u64(ffi::lua_tonumber(l, -1)) as usize;
                    ffi::lua_pop(l, 1);
                    n -= 1;
                    if !(size <= ld && at <= ld - size) {
                        return Err(too_short());
                    }
                }
                push_bytes(l, &data[at..at + size]);
                n += 1;
            }
            b's' => {
                let Some(e) = data[at..].iter().position(|&b| b == 0) else {
                    return Err(LErr::at("unfinished string in data"));
                };
                push_bytes(l, &data[at..at + e]);
                size = e + 1;
                n += 1;
            }
            _ => controloptions(opt, fmt, &mut pos, &mut h)?,
        }
        at = at.wrapping_add(size);
    }
    ffi::lua_pushinteger(l, at.wrapping_add(1) as i64);
    Ok(n + 1)
}
lua_cfn!(unpack => unpack_impl);

unsafe fn size_impl(l: *mut lua_State) -> LResult<c_int> {
    let fmt = c_format(check_lstring(l, 1)?);
    let mut h = Header::new();
    let mut total: usize = 0;
    let mut pos = 0;
    while let Some(&opt) = fmt.get(pos) {
        pos += 1;
        let size = optsize(opt, fmt, &mut pos)?;
        total = total.wrapping_add(gettoalign(total, &h, opt, size));
        if opt == b's' {
            return Err(LErr::arg(1, "option 's' has no fixed size"));
        } else if opt == b'c' && size == 0 {
            return Err(LErr::arg(1, "option 'c0' has no fixed size"));
        } else if opt == b'!' {
            // Only alignment matters for a size; other options are skipped.
            alignment(fmt, &mut pos, &mut h)?;
        }
        total = total.wrapping_add(size);
    }
    ffi::lua_pushinteger(l, total as i64);
    Ok(1)
}
lua_cfn!(size => size_impl);
