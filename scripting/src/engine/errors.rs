//! Errors that Rust code raises into scripts, and the text Redis shows for
//! an error that comes back out of Lua.
//!
//! Apart because the setup's `redis.*` functions, the run hook and FUNCTION
//! LOAD all raise or read them, and they must agree on one error type
//! ([`Raised`]) to tell a Redis error text from mlua's own errors.

use mlua::{Lua, Value};

/// An error a Rust function raises into the script, its text as Redis
/// shows it.
#[derive(Debug)]
struct Raised(String);

impl std::fmt::Display for Raised {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Raised {}

pub(super) fn raise(msg: impl Into<String>) -> mlua::Error {
    mlua::Error::external(Raised(msg.into()))
}

pub(super) fn fail(_: &Lua, msg: &str) -> mlua::Result<Value> {
    Err(raise(msg))
}

pub(super) fn err_table(lua: &Lua, msg: &[u8]) -> mlua::Result<Value> {
    let t = lua.create_table()?;
    t.raw_set("err", lua.create_string(msg)?)?;
    Ok(Value::Table(t))
}

/// The message of an error raised by Rust code (SCRIPT KILL, a library).
pub(super) fn host_error_text(e: &mlua::Error) -> String {
    match e {
        mlua::Error::CallbackError { cause, .. } => host_error_text(cause),
        mlua::Error::RuntimeError(s) if s.starts_with("ERR ") => s.clone(),
        mlua::Error::RuntimeError(s) => format!("ERR {s}"),
        mlua::Error::ExternalError(x) => match x.downcast_ref::<Raised>() {
            Some(r) => r.0.clone(),
            None => format!("ERR {x}"),
        },
        other => format!("ERR {other}"),
    }
}
