//! Loading Lua source as text only, everywhere a chunk can be loaded:
//! EVAL and FUNCTION bodies, and the scripts' `loadstring` and `load`.
//!
//! Lua 5.1 loads a chunk that starts with its binary signature (ESC) as
//! precompiled bytecode, which its loader does not verify: crafted bytecode
//! escapes the sandbox. Redis's Lua parses every chunk as text, so such a
//! chunk fails as text does (`unexpected symbol near 'char(27)'`). Here a
//! chunk starting with ESC gets a space in front: the parser then sees the
//! same first token, at the same line, and fails the same way, while the
//! chunk's name is given apart and stays as it was.

use mlua::ffi::{self, lua_State};
use std::borrow::Cow;
use std::os::raw::{c_char, c_int, c_void};

/// The first byte of a precompiled chunk.
const SIGNATURE: u8 = 0x1b;

/// `src` as the text parser must see it.
pub(crate) fn text_only(src: &[u8]) -> Cow<'_, [u8]> {
    if src.first() == Some(&SIGNATURE) {
        Cow::Owned([b" ", src].concat())
    } else {
        Cow::Borrowed(src)
    }
}

/// Replaces the globals `loadstring` and `load` by text-only ones.
pub(crate) fn install(lua: &mlua::Lua) -> mlua::Result<()> {
    let g = lua.globals();
    // SAFETY: both are C functions following Lua's calling protocol.
    unsafe {
        g.raw_set("loadstring", lua.create_c_function(loadstring)?)?;
        g.raw_set("load", lua.create_c_function(load)?)?;
    }
    Ok(())
}

/// As Lua's `load_aux`: the function, or nil and the error message.
unsafe fn load_result(l: *mut lua_State, status: c_int) -> c_int {
    if status == 0 {
        return 1;
    }
    ffi::lua_pushnil(l);
    ffi::lua_insert(l, -2);
    2
}

/// `loadstring(s [, chunkname])`, as Lua 5.1's with the chunk as text.
unsafe extern "C-unwind" fn loadstring(l: *mut lua_State) -> c_int {
    let mut len = 0usize;
    let s = ffi::luaL_checklstring(l, 1, &mut len);
    let name = ffi::luaL_optstring(l, 2, s);
    // No Lua error can be raised from here on: the parser runs protected.
    let src = text_only(std::slice::from_raw_parts(s as *const u8, len));
    let status = ffi::luaL_loadbuffer(l, src.as_ptr() as *const c_char, src.len(), name);
    drop(src);
    load_result(l, status)
}

/// Where the reader of `load` is.
enum Piece {
    First,
    /// The first piece started with ESC: a space went first, the piece
    /// (kept in the reserved stack slot 3) goes next.
    Held,
    Rest,
}

/// `load(func [, chunkname])`, as Lua 5.1's with the chunk as text.
unsafe extern "C-unwind" fn load(l: *mut lua_State) -> c_int {
    let name = ffi::luaL_optstring(l, 2, c"=(load)".as_ptr());
    ffi::luaL_checktype(l, 1, ffi::LUA_TFUNCTION);
    // The function, the name and a slot that keeps the current piece alive.
    ffi::lua_settop(l, 3);
    let mut piece = Piece::First;
    let status = ffi::lua_load(l, reader, &mut piece as *mut Piece as *mut c_void, name);
    load_result(l, status)
}

/// Calls the function given to `load` for the next piece of the chunk.
/// Its errors unwind into the protected parser, which returns them.
unsafe extern "C-unwind" fn reader(
    l: *mut lua_State,
    ud: *mut c_void,
    size: *mut usize,
) -> *const c_char {
    let piece = &mut *(ud as *mut Piece);
    if let Piece::Held = piece {
        *piece = Piece::Rest;
        return ffi::lua_tolstring(l, 3, size);
    }
    ffi::luaL_checkstack(l, 2, c"too many nested functions".as_ptr());
    ffi::lua_pushvalue(l, 1);
    ffi::lua_call(l, 0, 1);
    if ffi::lua_isnil(l, -1) != 0 {
        ffi::lua_pop(l, 1);
        *size = 0;
        return std::ptr::null();
    }
    if ffi::lua_isstring(l, -1) == 0 {
        ffi::luaL_error(l, c"reader function must return a string".as_ptr());
    }
    ffi::lua_replace(l, 3);
    let p = ffi::lua_tolstring(l, 3, size);
    if let Piece::First = piece {
        if *size > 0 && *(p as *const u8) == SIGNATURE {
            *piece = Piece::Held;
            *size = 1;
            return c" ".as_ptr();
        }
        *piece = Piece::Rest;
    }
    p
}
