//! The allocator the interpreter uses: the embedding program's when it
//! gives one, in place of mlua's.
//!
//! mlua's goes through Rust's global allocator with a 16-byte alignment
//! (its guess at malloc's) and keeps a count of its own. The server's
//! mimalloc is built for 8 and serves 16 through its aligned path, which
//! costs twice a plain allocation and sometimes takes a larger class;
//! Lua needs 8 (a double or a pointer). A grab script makes some 25
//! allocations a run.

use mlua::ffi::{self, lua_State};
use std::os::raw::c_void;
use std::sync::OnceLock;

/// Lua's allocation function (`lua_Alloc`).
pub type LuaAlloc = unsafe extern "C-unwind" fn(
    ud: *mut c_void,
    ptr: *mut c_void,
    osize: usize,
    nsize: usize,
) -> *mut c_void;

static ALLOCATOR: OnceLock<LuaAlloc> = OnceLock::new();

/// Makes `f` the allocator of every interpreter created from now on; the
/// first call wins.
///
/// # Safety
/// `f` must follow `lua_Alloc`'s contract (its `ud` is null), free and
/// resize any block the global allocator returned (mlua allocates an
/// interpreter's first blocks through that), and the global allocator
/// must free any block `f` returned (mlua frees through it what is left
/// when the interpreter closes).
pub unsafe fn use_allocator(f: LuaAlloc) {
    let _ = ALLOCATOR.set(f);
}

/// mlua's allocator of a state whose allocator was replaced: mlua finds
/// its bookkeeping through it, and frees that only if it is back when the
/// state closes.
pub(crate) struct Swapped {
    state: *mut lua_State,
    f: LuaAlloc,
    ud: *mut c_void,
}

// SAFETY: used only by the engine that owns the state, which moves
// between threads with it.
unsafe impl Send for Swapped {}

/// Replaces `state`'s allocator by the one given to [`use_allocator`], if
/// any.
///
/// # Safety
/// `state` must be a live main state that nothing else uses meanwhile.
pub(crate) unsafe fn install(state: *mut lua_State) -> Option<Swapped> {
    let f = *ALLOCATOR.get()?;
    let mut ud = std::ptr::null_mut();
    let old = ffi::lua_getallocf(state, &mut ud);
    ffi::lua_setallocf(state, f, std::ptr::null_mut());
    Some(Swapped { state, f: old, ud })
}

impl Swapped {
    /// Gives mlua its allocator back (before the state closes).
    ///
    /// # Safety
    /// The state must still be live.
    pub(crate) unsafe fn restore(&self) {
        ffi::lua_setallocf(self.state, self.f, self.ud);
    }
}
