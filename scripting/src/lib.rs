//! Embedded Lua scripting for cinnabar (EVAL, EVALSHA, FUNCTION).
//!
//! This crate will own the Lua interpreter, its sandbox and the Redis Lua
//! libraries (`redis`, `cjson`, `cmsgpack`, `bit`, `struct`). It never touches
//! storage: `redis.call` goes through a callback into the server's dispatcher,
//! so scripts see exactly the command semantics clients see. It is empty until
//! the scripting issue lands.
pub mod libs;
