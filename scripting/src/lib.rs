//! Embedded Lua scripting for cinnabar (EVAL, EVALSHA, FUNCTION).
//!
//! This crate owns the Lua interpreter, its sandbox and the Redis Lua
//! libraries (`redis`, `cjson`, `cmsgpack`, `bit`, `struct`). It never touches
//! storage: `redis.call` goes through a [`Host`] callback into the server's
//! dispatcher, so scripts see exactly the command semantics clients see.

mod alloc;
pub mod engine;
mod host;
mod ldb;
pub mod libs;
mod raw;
mod textload;

pub use alloc::{use_allocator, LuaAlloc};
pub use engine::{
    flags, sha1_hex, Engine, FunctionCall, Host, Library, RunError, RunFlags, KILLED,
};
pub use ldb::{DebugIo, Debugger};
