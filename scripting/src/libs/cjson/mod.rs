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
//!
//! The module table and its settings are here; the encoder (`encode`) and
//! the decoder (`decode`) are apart, since they share only the settings.

use super::{check_integer, lua_cfn, push_bytes, set_field, set_str, LErr, LResult};
use mlua::ffi::{self, lua_State};
use mlua::Lua;
use std::ffi::CStr;
use std::os::raw::{c_int, c_void};

mod decode;
mod encode;

use decode::decode;
use encode::encode;

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
