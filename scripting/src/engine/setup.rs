//! What [`Engine::new`](super::Engine::new) installs in the interpreter
//! besides the prelude: which globals the sandbox keeps, and the Rust half
//! of the `redis` table (its helpers, constants and reply constructors),
//! which the prelude completes.
//!
//! Apart from the engine's state and the call path because it runs once,
//! when the interpreter is made, and is most of what the sandbox offers.

use super::errors::{err_table, fail, host_error_text};
use super::shebang::{valid_name, BAD_NAME};
use super::{flags, sha1_hex, RunFlags, KILLED};
use crate::host::with_host;
use bytes::Bytes;
use mlua::{Lua, MultiValue, Table, Value};
use protocol::format_double;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;

type Ret = (bool, Value);

/// The sandbox: scripts see only the globals Redis gives them.
pub(super) fn keep_redis_globals(g: &Table) -> mlua::Result<()> {
    // Exactly the globals Redis 7.0.15 leaves to scripts.
    const KEEP: &[&str] = &[
        "_G",
        "_VERSION",
        "assert",
        "bit",
        "cjson",
        "cmsgpack",
        "collectgarbage",
        "coroutine",
        "error",
        "gcinfo",
        "getmetatable",
        "ipairs",
        "load",
        "loadstring",
        "math",
        "next",
        "pairs",
        "pcall",
        "rawequal",
        "rawget",
        "rawset",
        "select",
        "setmetatable",
        "string",
        "struct",
        "table",
        "tonumber",
        "tostring",
        "type",
        "unpack",
        "xpcall",
    ];
    let names: Vec<String> = g
        .pairs::<String, Value>()
        .filter_map(|r| r.ok().map(|(k, _)| k))
        .collect();
    for n in names {
        if !KEEP.contains(&n.as_str()) {
            g.raw_set(n, Value::Nil)?;
        }
    }
    Ok(())
}

/// The Rust half of the `redis` table, `R` in the prelude.
pub(super) fn rust_half(
    lua: &Lua,
    resp3: &Arc<AtomicBool>,
    run: &Arc<RunFlags>,
) -> mlua::Result<Table> {
    let r = lua.create_table()?;
    r.raw_set("helpers", helpers(lua, resp3, run)?)?;
    r.raw_set(
        "raw_access",
        lua.create_function(|lua, views: Table| crate::raw::create_raw_access(lua, &views))?,
    )?;
    r.raw_set("consts", consts(lua)?)?;
    r.raw_set(
        "error_reply",
        lua.create_function(|lua, v: MultiValue| {
            let s = match (v.len(), v.front()) {
                (1, Some(Value::String(s))) => s.as_bytes().to_vec(),
                _ => return err_table(lua, b"ERR wrong number or type of arguments"),
            };
            let s = s.strip_prefix(b"-").unwrap_or(&s);
            if s.contains(&b' ') {
                err_table(lua, s)
            } else {
                err_table(lua, &[b"ERR ", s].concat())
            }
        })?,
    )?;
    r.raw_set(
        "status_reply",
        lua.create_function(|lua, v: MultiValue| match (v.len(), v.front()) {
            (1, Some(Value::String(s))) => {
                let t = lua.create_table()?;
                t.raw_set("ok", s.clone())?;
                Ok(Value::Table(t))
            }
            _ => err_table(lua, b"ERR wrong number or type of arguments"),
        })?,
    )?;
    r.raw_set(
        "is_host_error",
        lua.create_function(|_, v: Value| Ok(matches!(v, Value::Error(_))))?,
    )?;
    r.raw_set(
        "is_kill",
        lua.create_function(|_, v: Value| {
            Ok(matches!(&v, Value::Error(e) if host_error_text(e) == KILLED))
        })?,
    )?;
    r.raw_set(
        "host_error",
        lua.create_function(|_, v: Value| {
            Ok(match v {
                Value::Error(e) => host_error_text(&e),
                _ => "ERR unknown error".to_string(),
            })
        })?,
    )?;
    r.raw_set(
        "check_function",
        lua.create_function(|lua, (name, fl): (mlua::String, Table)| {
            if !valid_name(&name.as_bytes()) {
                return Ok((false, Value::String(lua.create_string(BAD_NAME)?)));
            }
            for f in fl.sequence_values::<mlua::String>() {
                if flags::parse(&f?.to_str()?).is_none() {
                    let m = lua.create_string("ERR unknown flag given")?;
                    return Ok((false, Value::String(m)));
                }
            }
            Ok::<Ret, mlua::Error>((true, Value::Nil))
        })?,
    )?;
    Ok(r)
}

fn consts(lua: &Lua) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    for (k, v) in [
        ("LOG_DEBUG", 0),
        ("LOG_VERBOSE", 1),
        ("LOG_NOTICE", 2),
        ("LOG_WARNING", 3),
        ("REPL_NONE", 0),
        ("REPL_AOF", 1),
        ("REPL_SLAVE", 2),
        ("REPL_REPLICA", 2),
        ("REPL_ALL", 3),
        ("REDIS_VERSION_NUM", 0x07000f),
    ] {
        t.raw_set(k, v)?;
    }
    t.raw_set("REDIS_VERSION", "7.0.15")?;
    Ok(t)
}

/// The Rust-side `redis.*` helpers; each answers (ok, value-or-message).
fn helpers(lua: &Lua, resp3: &Arc<AtomicBool>, run: &Arc<RunFlags>) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    t.raw_set(
        "sha1hex",
        lua.create_function(|lua, v: MultiValue| {
            if v.len() != 1 {
                return fail(lua, "ERR wrong number of arguments");
            }
            let s = match v.front() {
                Some(Value::String(s)) => s.as_bytes().to_vec(),
                Some(Value::Integer(i)) => i.to_string().into_bytes(),
                Some(Value::Number(n)) => lua_num_str(*n).into_bytes(),
                _ => Vec::new(),
            };
            Ok(Value::String(lua.create_string(sha1_hex(&s))?))
        })?,
    )?;
    t.raw_set(
        "log",
        lua.create_function(|lua, v: MultiValue| {
            if v.len() < 2 {
                return fail(lua, "ERR redis.log() requires two arguments or more.");
            }
            let level = match v.front() {
                Some(Value::Number(n)) => *n as i64,
                Some(Value::Integer(i)) => *i,
                _ => return fail(lua, "ERR First argument must be a number (log level)."),
            };
            if !(0..=3).contains(&level) {
                return fail(lua, "ERR Invalid debug level.");
            }
            let mut msg = String::new();
            for (i, x) in v.iter().skip(1).enumerate() {
                if i > 0 {
                    msg.push(' ');
                }
                match x {
                    Value::String(s) => msg.push_str(&String::from_utf8_lossy(&s.as_bytes())),
                    Value::Integer(n) => msg.push_str(&n.to_string()),
                    Value::Number(n) => msg.push_str(&lua_num_str(*n)),
                    _ => {}
                }
            }
            match level {
                0 => tracing::debug!(target: "script", "{msg}"),
                1 => tracing::info!(target: "script", "{msg}"),
                2 => tracing::info!(target: "script", "{msg}"),
                _ => tracing::warn!(target: "script", "{msg}"),
            }
            Ok(Value::Nil)
        })?,
    )?;
    let r3 = resp3.clone();
    t.raw_set(
        "setresp",
        lua.create_function(move |lua, v: MultiValue| {
            if v.len() != 1 {
                return fail(lua, "ERR redis.setresp() requires one argument.");
            }
            let n = match v.front() {
                Some(Value::Number(n)) => *n as i64,
                Some(Value::Integer(i)) => *i,
                _ => 0,
            };
            if n != 2 && n != 3 {
                return fail(lua, "ERR RESP version must be 2 or 3.");
            }
            r3.store(n == 3, Relaxed);
            Ok(Value::Nil)
        })?,
    )?;
    let flags = run.clone();
    t.raw_set(
        "set_repl",
        lua.create_function(move |lua, v: MultiValue| {
            if v.len() != 1 {
                return fail(lua, "ERR redis.set_repl() requires two arguments.");
            }
            let n = match v.front() {
                Some(Value::Number(n)) => *n as i64,
                Some(Value::Integer(i)) => *i,
                _ => -1,
            };
            if !(0..=3).contains(&n) {
                return fail(
                    lua,
                    "ERR Invalid replication flags. Use REPL_AOF, REPL_REPLICA, REPL_ALL or REPL_NONE.",
                );
            }
            flags.repl_skip.store(3 & !(n as u8), Relaxed);
            Ok(Value::Nil)
        })?,
    )?;
    t.raw_set(
        "replicate_commands",
        lua.create_function(|_, _: MultiValue| Ok(Value::Boolean(true)))?,
    )?;
    t.raw_set(
        "acl_check_cmd",
        lua.create_function(|lua, v: MultiValue| {
            if v.is_empty() {
                return fail(
                    lua,
                    "ERR Please specify at least one argument for this redis lib call",
                );
            }
            let mut args = Vec::with_capacity(v.len());
            for x in v.iter() {
                match x {
                    Value::String(s) => args.push(Bytes::copy_from_slice(&s.as_bytes())),
                    Value::Integer(_) | Value::Number(_) => {
                        let n = x.as_f64().unwrap_or(0.0);
                        args.push(Bytes::from(lua_num_str(n)));
                    }
                    _ => {
                        return fail(
                            lua,
                            "ERR Lua redis lib command arguments must be strings or integers",
                        )
                    }
                }
            }
            match with_host(|h| h.map_or(Ok(true), |h| h.acl_check(&args))) {
                Ok(b) => Ok(Value::Boolean(b)),
                Err(e) => fail(lua, &e),
            }
        })?,
    )?;
    Ok(t)
}

/// A number as text: integers plainly, others as `%.17g`.
fn lua_num_str(n: f64) -> String {
    if n.fract() == 0.0 && n.abs() < 1e15 {
        return (n as i64).to_string();
    }
    format_double(n)
}
