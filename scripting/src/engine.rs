//! The Lua interpreter behind EVAL and FUNCTION: one state per server,
//! reused by every script.
//!
//! Scripts are compiled once and kept by SHA1; libraries keep their
//! registered functions. All user code runs in one read-only environment
//! (`prelude.lua`): reading a missing global or writing any global fails as
//! in Redis 7.0, and library tables are read-only views. Commands reach the
//! server through a [`Host`] given per run, which answers with the RESP bytes
//! of the reply; they are turned into Lua values, and the script's result
//! into a reply, by Redis's documented conversion rules.

use crate::host::{with_host, HostGuard};
use bytes::Bytes;
use mlua::{
    Function, HookTriggers, Lua, LuaOptions, MultiValue, RegistryKey, StdLib, Table, Value, VmState,
};
use protocol::{format_double, ReplyBuf};
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU8, Ordering::Relaxed};
use std::sync::Arc;

pub use crate::host::{Host, RunError};

/// Script and function flags (shebang `flags=` and `register_function`).
pub mod flags {
    pub const NO_WRITES: u32 = 1;
    pub const ALLOW_OOM: u32 = 2;
    pub const ALLOW_STALE: u32 = 4;
    pub const NO_CLUSTER: u32 = 8;
    pub const ALLOW_CROSS_SLOT: u32 = 16;
    /// An EVAL script without a shebang: the pre-7.0 rules apply.
    pub const EVAL_COMPAT: u32 = 32;
    pub const NAMES: &[(u32, &str)] = &[
        (NO_WRITES, "no-writes"),
        (ALLOW_OOM, "allow-oom"),
        (ALLOW_STALE, "allow-stale"),
        (NO_CLUSTER, "no-cluster"),
        (ALLOW_CROSS_SLOT, "allow-cross-slot-keys"),
    ];

    pub fn parse(name: &str) -> Option<u32> {
        NAMES.iter().find(|(_, n)| *n == name).map(|(f, _)| *f)
    }
}

/// What other connections must know about the running script without
/// taking the state lock (busy replies, SCRIPT KILL).
#[derive(Default, Debug)]
pub struct RunFlags {
    pub running: AtomicBool,
    /// Running longer than `busy-reply-threshold`: others get -BUSY.
    pub busy: AtomicBool,
    /// The running script is a function (FCALL), not EVAL.
    pub function: AtomicBool,
    pub kill: AtomicBool,
    /// The running script has written: it cannot be killed.
    pub wrote: AtomicBool,
    pub start_ms: AtomicI64,
    pub threshold_ms: AtomicI64,
    /// Called once per run when a script runs long, so the host can keep
    /// serving its other clients (the server hands its worker role to
    /// another thread).
    pub nudge: std::sync::OnceLock<fn()>,
    pub nudged: AtomicBool,
    /// A library's top-level code is running (FUNCTION LOAD), since
    /// `start_ms`.
    pub loading: AtomicBool,
    /// The dataset is loading (an AOF replays its scripts): a busy script
    /// makes others wait with -LOADING rather than -BUSY.
    pub dataset_loading: AtomicBool,
    /// The running script's name for the log: its SHA1, or the function.
    pub name: std::sync::Mutex<String>,
    /// What FUNCTION STATS shows while a function runs: other connections
    /// answer it without the state lock. Set by the host for each FCALL.
    pub function_call: std::sync::Mutex<Option<FunctionCall>>,
    /// Where the running script's commands propagate, as `redis.set_repl`
    /// left it: bit 1 set, not to the AOF; bit 2, not to replicas.
    pub repl_skip: AtomicU8,
}

/// A running function as FUNCTION STATS shows it.
#[derive(Debug)]
pub struct FunctionCall {
    pub name: String,
    /// The command that called it, as sent.
    pub command: Vec<Bytes>,
    pub libraries: usize,
    pub functions: usize,
}

/// How long a script runs before the host is nudged.
const NUDGE_MS: i64 = 2;

/// Runs between two GC steps, and the step's size in KB.
const GC_PERIOD: u32 = 50;

/// How long a library's top-level code may run.
const LOAD_TIMEOUT_MS: i64 = 500;
const LOAD_TIMEOUT: &str = "ERR FUNCTION LOAD timeout";

pub const KILLED: &str = "ERR Script killed by user with SCRIPT KILL...";

struct Script {
    func: RegistryKey,
    flags: u32,
    /// Bytes of its source.
    len: usize,
}

pub struct FunctionDef {
    pub name: String,
    pub library: String,
    pub description: Option<Bytes>,
    pub flags: u32,
    func: RegistryKey,
}

pub struct Library {
    pub name: String,
    pub code: Bytes,
    /// Names of its functions, in registration order.
    pub functions: Vec<String>,
}

pub struct Engine {
    lua: Lua,
    api: Table,
    /// The prelude's message handler, under which every run goes.
    handler: RegistryKey,
    /// Keeps `runner`'s entry function referenced.
    _entry: RegistryKey,
    runner: crate::raw::Runner,
    pub run: Arc<RunFlags>,
    resp3: Arc<AtomicBool>,
    scripts: HashMap<String, Script>,
    /// Runs so far, for the periodic GC step.
    runs: u32,
    pub libraries: BTreeMap<String, Library>,
    /// By name in lower case: function names are case-insensitive.
    pub functions: HashMap<String, FunctionDef>,
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

pub fn sha1_hex(b: &[u8]) -> String {
    sha1_smol::Sha1::from(b).digest().to_string()
}

type Ret = (bool, Value);

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

fn raise(msg: impl Into<String>) -> mlua::Error {
    mlua::Error::external(Raised(msg.into()))
}

fn fail(_: &Lua, msg: &str) -> mlua::Result<Value> {
    Err(raise(msg))
}

fn err_table(lua: &Lua, msg: &[u8]) -> mlua::Result<Value> {
    let t = lua.create_table()?;
    t.raw_set("err", lua.create_string(msg)?)?;
    Ok(Value::Table(t))
}

/// The message of an error raised by Rust code (SCRIPT KILL, a library).
fn host_error_text(e: &mlua::Error) -> String {
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

fn valid_name(n: &[u8]) -> bool {
    !n.is_empty() && n.iter().all(|c| c.is_ascii_alphanumeric() || *c == b'_')
}

const BAD_NAME: &str = "ERR Library names can only contain letters, numbers, or underscores(_) and must be at least one character long";

impl Engine {
    pub fn new(run: Arc<RunFlags>) -> mlua::Result<Engine> {
        let libs = StdLib::STRING | StdLib::TABLE | StdLib::MATH;
        // SAFETY: `debug` is loaded for the error handler only; the prelude
        // keeps it in a local and removes it from the globals.
        let lua = unsafe { Lua::unsafe_new_with(libs | StdLib::DEBUG, LuaOptions::default()) };
        crate::libs::register_all(&lua)?;
        let g = lua.globals();
        let dbg: Value = g.raw_get("debug")?;
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
        crate::textload::install(&lua)?;
        let resp3 = Arc::new(AtomicBool::new(false));
        let r = lua.create_table()?;
        r.raw_set("helpers", helpers(&lua, &resp3, &run)?)?;
        r.raw_set(
            "raw_access",
            lua.create_function(|lua, views: Table| crate::raw::create_raw_access(lua, &views))?,
        )?;
        r.raw_set("consts", consts(&lua)?)?;
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
        let api: Table = lua
            .load(include_str!("prelude.lua"))
            .set_name("=cinnabar")
            .call((g.clone(), dbg, r.clone()))?;
        let full: Table = api.raw_get("full")?;
        full.raw_set("call", crate::raw::create_call(&lua, true, &resp3)?)?;
        full.raw_set("pcall", crate::raw::create_call(&lua, false, &resp3)?)?;
        let handler = lua.create_registry_value(api.raw_get::<Function>("handler")?)?;
        // SAFETY: `entry` is a C function that follows the run protocol.
        let entry =
            lua.create_registry_value(unsafe { lua.create_c_function(crate::raw::entry)? })?;
        let runner = crate::raw::Runner::new(&lua, &entry)?;
        set_run_hook(&lua, run.clone());
        // SAFETY: C functions that follow the Lua protocol.
        unsafe {
            full.raw_set("debug", lua.create_c_function(crate::ldb::redis_debug)?)?;
            full.raw_set(
                "breakpoint",
                lua.create_c_function(crate::ldb::redis_breakpoint)?,
            )?;
        }
        Ok(Engine {
            lua,
            api,
            handler,
            _entry: entry,
            runner,
            run,
            resp3,
            scripts: HashMap::new(),
            runs: 0,
            libraries: BTreeMap::new(),
            functions: HashMap::new(),
        })
    }

    /// Compiles `body` unless cached; its SHA1 and flags, or the error.
    pub fn load_script(&mut self, body: &[u8]) -> Result<(String, u32), String> {
        let sha = sha1_hex(body);
        if let Some(s) = self.scripts.get(&sha) {
            return Ok((sha, s.flags));
        }
        let (fl, src) = parse_eval_shebang(body)?;
        let env: Table = self.api.raw_get("env").map_err(|e| e.to_string())?;
        let func = self
            .lua
            .load(&crate::textload::text_only(&src)[..])
            .set_name("@user_script")
            .set_environment(env)
            .into_function()
            .map_err(|e| format!("ERR Error compiling script (new function): {}", syntax(&e)))?;
        let key = self
            .lua
            .create_registry_value(func)
            .map_err(|e| e.to_string())?;
        self.scripts.insert(
            sha.clone(),
            Script {
                func: key,
                flags: fl,
                len: body.len(),
            },
        );
        Ok((sha, fl))
    }

    /// The flags of a cached script (`sha` in lower case).
    pub fn script_flags(&self, sha: &str) -> Option<u32> {
        self.scripts.get(sha).map(|s| s.flags)
    }

    pub fn has_script(&self, sha: &str) -> bool {
        self.scripts.contains_key(sha)
    }

    pub fn flush_scripts(&mut self) {
        self.scripts.clear();
        self.lua.expire_registry_values();
        let _ = self.lua.gc_collect();
    }

    /// Runs the cached script `sha` with KEYS and ARGV; the reply goes to
    /// `out`, an error (already in Redis's form) is returned.
    pub fn run_script(
        &mut self,
        sha: &str,
        keys: &[Bytes],
        argv: &[Bytes],
        threshold_ms: i64,
        host: &mut dyn Host,
        out: &mut ReplyBuf,
    ) -> Result<(), RunError> {
        let Some(s) = self.scripts.get(sha) else {
            return Err("NOSCRIPT No matching script. Please use EVAL.".into());
        };
        let func = s.func.id();
        self.invoke(func, keys, argv, false, sha, threshold_ms, host, out)
    }

    /// Runs the cached script `sha` as `run_script` does, under the
    /// debugger `dbg` (SCRIPT DEBUG): it stops at the script's lines and
    /// talks to the client until the script ends.
    #[allow(clippy::too_many_arguments)]
    pub fn debug_script(
        &mut self,
        sha: &str,
        keys: &[Bytes],
        argv: &[Bytes],
        threshold_ms: i64,
        host: &mut dyn Host,
        out: &mut ReplyBuf,
        dbg: &mut crate::ldb::Debugger,
    ) -> Result<(), RunError> {
        let Some(s) = self.scripts.get(sha) else {
            return Err("NOSCRIPT No matching script. Please use EVAL.".into());
        };
        let func = s.func.id();
        // The session blocks this thread for as long as the client takes:
        // the other connections are handed to another one (they wait for
        // the state, as Redis's clients wait for its blocked loop).
        if let Some(nudge) = self.run.nudge.get() {
            nudge();
        }
        dbg.restart_clock();
        let guard = crate::ldb::ActiveGuard::set(dbg);
        // SAFETY: the runner's state is the one scripts run on.
        unsafe { crate::ldb::install_hook(self.runner.state()) };
        let res = self.invoke(func, keys, argv, false, sha, threshold_ms, host, out);
        drop(guard);
        set_run_hook(&self.lua, self.run.clone());
        res
    }

    /// FCALL: runs function `name` with its keys and arguments.
    pub fn call_function(
        &mut self,
        name: &str,
        keys: &[Bytes],
        argv: &[Bytes],
        threshold_ms: i64,
        host: &mut dyn Host,
        out: &mut ReplyBuf,
    ) -> Result<(), RunError> {
        let Some(f) = self.function(name) else {
            return Err("ERR Function not found".into());
        };
        let func = f.func.id();
        self.invoke(func, keys, argv, true, name, threshold_ms, host, out)
    }

    #[allow(clippy::too_many_arguments)]
    fn invoke(
        &mut self,
        func: std::os::raw::c_int,
        keys: &[Bytes],
        argv: &[Bytes],
        is_function: bool,
        name: &str,
        threshold_ms: i64,
        host: &mut dyn Host,
        out: &mut ReplyBuf,
    ) -> Result<(), RunError> {
        let run = self.run.clone();
        run.kill.store(false, Relaxed);
        run.wrote.store(false, Relaxed);
        run.busy.store(false, Relaxed);
        run.nudged.store(false, Relaxed);
        run.repl_skip.store(0, Relaxed);
        run.function.store(is_function, Relaxed);
        if let Ok(mut n) = run.name.lock() {
            n.clear();
            n.push_str(name);
        }
        run.threshold_ms.store(threshold_ms, Relaxed);
        run.start_ms.store(now_ms(), Relaxed);
        run.running.store(true, Relaxed);
        self.resp3.store(false, Relaxed);
        let call = crate::raw::Call {
            handler: self.handler.id(),
            func,
            keys,
            argv,
            as_params: is_function,
        };
        let guard = HostGuard::set(host);
        // SAFETY: `&mut self` holds the interpreter exclusively.
        let res = unsafe { self.runner.run(&call, name, &self.resp3, out) };
        drop(guard);
        run.running.store(false, Relaxed);
        run.busy.store(false, Relaxed);
        run.kill.store(false, Relaxed);
        // As Redis: a GC step every 50 runs, so garbage does not pile up
        // to what a full cycle would leave (memory and latency).
        self.runs = self.runs.wrapping_add(1);
        if self.runs.is_multiple_of(GC_PERIOD) {
            let _ = self.lua.gc_step_kbytes(GC_PERIOD as std::os::raw::c_int);
        }
        res
    }

    /// The name a library's `#!lua name=` header gives it.
    pub fn library_name(code: &[u8]) -> Result<String, String> {
        parse_library_shebang(code).map(|(name, _)| name)
    }

    /// FUNCTION LOAD: the library's name, or the error.
    pub fn load_library(&mut self, code: &Bytes, replace: bool) -> Result<String, String> {
        let (name, src) = parse_library_shebang(code)?;
        if self.libraries.contains_key(&name) && !replace {
            return Err(format!("ERR Library '{name}' already exists"));
        }
        let env: Table = self.api.raw_get("env").map_err(|e| e.to_string())?;
        let func = self
            .lua
            .load(&crate::textload::text_only(&src)[..])
            .set_name("@user_function")
            .set_environment(env)
            .into_function()
            .map_err(|e| format!("ERR Error compiling function: {}", syntax(&e)))?;
        let loader: Function = self.api.raw_get("load").map_err(|e| e.to_string())?;
        self.run.start_ms.store(now_ms(), Relaxed);
        self.run.loading.store(true, Relaxed);
        let loaded = loader.call(func);
        self.run.loading.store(false, Relaxed);
        let (ok, v): (bool, Value) = loaded.map_err(|e| host_error_text(&e))?;
        let Value::Table(t) = v else {
            return Err("ERR Error registering functions".into());
        };
        if !ok {
            let msg: String = t.raw_get("err").unwrap_or_default();
            return Err(format!("ERR Error registering functions: {msg}"));
        }
        let mut defs = Vec::new();
        for reg in t.sequence_values::<Table>() {
            let reg = reg.map_err(|e| e.to_string())?;
            let fname: String = reg.raw_get("name").map_err(|e| e.to_string())?;
            let f: Function = reg.raw_get("fn").map_err(|e| e.to_string())?;
            let fl: Vec<String> = reg.raw_get("flags").map_err(|e| e.to_string())?;
            let desc: Option<mlua::String> = reg.raw_get("desc").map_err(|e| e.to_string())?;
            let flags = fl
                .iter()
                .filter_map(|f| flags::parse(f))
                .fold(0, |a, b| a | b);
            if defs.iter().any(|d: &FunctionDef| d.name == fname) {
                return Err("ERR Function already exists in the library".into());
            }
            if let Some(old) = self.function(&fname) {
                if old.library != name {
                    return Err(format!("ERR Function {fname} already exists"));
                }
            }
            defs.push(FunctionDef {
                name: fname,
                library: name.clone(),
                description: desc.map(|d| Bytes::copy_from_slice(&d.as_bytes())),
                flags,
                func: self
                    .lua
                    .create_registry_value(f)
                    .map_err(|e| e.to_string())?,
            });
        }
        if defs.is_empty() {
            return Err("ERR No functions registered".into());
        }
        self.delete_library(&name);
        let lib = Library {
            name: name.clone(),
            code: code.clone(),
            functions: defs.iter().map(|d| d.name.clone()).collect(),
        };
        for d in defs {
            self.functions.insert(d.name.to_ascii_lowercase(), d);
        }
        self.libraries.insert(name.clone(), lib);
        Ok(name)
    }

    /// The function called `name`, in any case.
    pub fn function(&self, name: &str) -> Option<&FunctionDef> {
        if name.bytes().any(|b| b.is_ascii_uppercase()) {
            self.functions.get(&name.to_ascii_lowercase())
        } else {
            self.functions.get(name)
        }
    }

    /// Removes a library and its functions; false if there was none.
    pub fn delete_library(&mut self, name: &str) -> bool {
        let Some(lib) = self.libraries.remove(name) else {
            return false;
        };
        for f in &lib.functions {
            self.functions.remove(&f.to_ascii_lowercase());
        }
        self.lua.expire_registry_values();
        true
    }

    pub fn flush_functions(&mut self) {
        self.libraries.clear();
        self.functions.clear();
        self.lua.expire_registry_values();
    }

    /// Bytes the interpreter holds (INFO's `used_memory_vm_eval`).
    pub fn vm_memory(&self) -> usize {
        self.lua.used_memory()
    }

    pub fn script_count(&self) -> usize {
        self.scripts.len()
    }

    /// The script cache outside the interpreter: each script's SHA1 and
    /// source, as Redis counts them, plus its entry.
    pub fn scripts_memory(&self) -> usize {
        self.scripts
            .values()
            .map(|s| 40 + s.len + std::mem::size_of::<(String, Script)>())
            .sum()
    }

    /// The libraries' sources and names and the function entries.
    pub fn functions_memory(&self) -> usize {
        let libs: usize = self
            .libraries
            .values()
            .map(|l| l.name.len() + l.code.len())
            .sum();
        libs + self.functions.len() * std::mem::size_of::<(String, FunctionDef)>()
    }
}

/// The hook of ordinary runs: SCRIPT KILL, the load timeout, the busy
/// state and the nudge.
fn set_run_hook(lua: &Lua, hook_run: Arc<RunFlags>) {
    lua.set_hook(
        HookTriggers::new().every_nth_instruction(10_000),
        move |_, _| {
            let f = &hook_run;
            if f.kill.load(Relaxed) {
                return Err(raise(KILLED));
            }
            if f.loading.load(Relaxed) {
                if now_ms() - f.start_ms.load(Relaxed) >= LOAD_TIMEOUT_MS {
                    return Err(raise(LOAD_TIMEOUT));
                }
                return Ok(VmState::Continue);
            }
            if !f.running.load(Relaxed) {
                return Ok(VmState::Continue);
            }
            let ran = now_ms() - f.start_ms.load(Relaxed);
            if !f.busy.load(Relaxed) && ran >= f.threshold_ms.load(Relaxed) {
                f.busy.store(true, Relaxed);
                let kill = if f.function.load(Relaxed) {
                    "FUNCTION KILL"
                } else {
                    "SCRIPT KILL"
                };
                let name = f.name.lock().map(|n| n.clone()).unwrap_or_default();
                tracing::warn!("Slow script detected: still in execution after {ran} milliseconds. You can try killing the script using the {kill} command. Script name is: {name}.");
            }
            if ran >= NUDGE_MS && !f.nudged.swap(true, Relaxed) {
                if let Some(nudge) = f.nudge.get() {
                    nudge();
                }
            }
            if f.busy.load(Relaxed) {
                with_host(|h| h.map(|h| h.while_busy()));
            }
            Ok(VmState::Continue)
        },
    );
}

fn syntax(e: &mlua::Error) -> String {
    match e {
        mlua::Error::SyntaxError { message, .. } => message.clone(),
        other => other.to_string(),
    }
}

/// `#!lua [flags=a,b]` on the first line: the flags and the code to
/// compile (the shebang commented out, so line numbers stay).
pub fn parse_eval_shebang(body: &[u8]) -> Result<(u32, Vec<u8>), String> {
    if !body.starts_with(b"#!") {
        return Ok((flags::EVAL_COMPAT, body.to_vec()));
    }
    let end = body.iter().position(|&c| c == b'\n').unwrap_or(body.len());
    let line = String::from_utf8_lossy(&body[..end]).into_owned();
    let mut parts = line.split(' ').filter(|p| !p.is_empty());
    let engine = parts.next().unwrap_or("");
    if engine != "#!lua" {
        return Err(format!("ERR Unexpected engine in script shebang: {engine}"));
    }
    let mut fl = 0;
    for p in parts {
        let Some(list) = p.strip_prefix("flags=") else {
            return Err(format!("ERR Unknown lua shebang option: {p}"));
        };
        for f in list.split(',').filter(|f| !f.is_empty()) {
            fl |= flags::parse(f)
                .ok_or_else(|| format!("ERR Unexpected flag in script shebang: {f}"))?;
        }
    }
    Ok((fl, [b"--", body].concat()))
}

/// FUNCTION LOAD's `#!lua name=<lib>` header: the name and the code.
fn parse_library_shebang(code: &[u8]) -> Result<(String, Vec<u8>), String> {
    if !code.starts_with(b"#!") {
        return Err("ERR Missing library metadata".into());
    }
    let end = code.iter().position(|&c| c == b'\n').unwrap_or(code.len());
    // Words as Redis splits the line: quotes group and are removed.
    let words = protocol::split_args(&code[..end]).ok_or("ERR Invalid library metadata")?;
    let mut parts = words.iter().map(|w| String::from_utf8_lossy(w));
    let first = parts.next().unwrap_or_default();
    let engine = first.trim_start_matches("#!");
    if !engine.eq_ignore_ascii_case("lua") {
        return Err(format!("ERR Engine '{engine}' not found"));
    }
    let mut name = None;
    for p in parts {
        match p.split_once('=') {
            Some(("name", _)) if name.is_some() => {
                return Err(
                    "ERR Invalid metadata value, name argument was given multiple times".into(),
                )
            }
            Some(("name", v)) => name = Some(v.to_string()),
            _ => return Err(format!("ERR Invalid metadata value given: {p}")),
        }
    }
    let name = name.ok_or("ERR Library name was not given")?;
    if !valid_name(name.as_bytes()) {
        return Err(BAD_NAME.into());
    }
    Ok((name, [b"--", code].concat()))
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

#[cfg(test)]
mod tests {
    use super::*;

    struct NoHost;
    impl Host for NoHost {
        fn call(&mut self, _: &[Bytes], _: bool) -> &[u8] {
            b"+OK\r\n"
        }
    }

    #[test]
    fn runaway_script_turns_busy_and_dies_on_kill() {
        let run = Arc::new(RunFlags::default());
        let mut e = Engine::new(run.clone()).unwrap();
        let (sha, _) = e.load_script(b"while true do end").unwrap();
        let r2 = run.clone();
        let killer = std::thread::spawn(move || {
            while !r2.busy.load(Relaxed) {
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            r2.kill.store(true, Relaxed);
        });
        let mut out = ReplyBuf::new(false);
        let err = e
            .run_script(&sha, &[], &[], 50, &mut NoHost, &mut out)
            .unwrap_err();
        killer.join().unwrap();
        assert_eq!(
            err.msg,
            format!(
                "ERR Script killed by user with SCRIPT KILL... script: {sha}, on @user_script:1."
            )
        );
        assert!(!run.running.load(Relaxed));
    }
}

#[cfg(test)]
mod bench {
    use super::*;

    /// Answers the red-envelope grab's commands with fixed replies.
    struct Grab;
    impl Host for Grab {
        fn call(&mut self, args: &[Bytes], _: bool) -> &[u8] {
            match &args[0][..] {
                b"hexists" => b":0\r\n",
                b"rpop" => b"$24\r\n{\"id\":1234,\"money\":1234}\r\n",
                b"hset" => b":1\r\n",
                _ => b":7\r\n",
            }
        }
    }

    const GRAB: &str = "if redis.call(\"hexists\", KEYS[3], KEYS[4]) ~= 0 then
return nil
else
local hongBao = redis.call(\"rpop\", KEYS[1]);
if hongBao then
local x = cjson.decode(hongBao);
x[\"userId\"] = KEYS[4];
local re = cjson.encode(x);
redis.call(\"hset\", KEYS[3], KEYS[4], KEYS[4]);
redis.call(\"lpush\", KEYS[2], re);
return re;
end
end
return nil";

    /// `cargo test --release -p cinnabar-scripting bench_ -- --ignored --nocapture`
    #[test]
    #[ignore]
    fn bench_grab_and_return_1() {
        let mut e = Engine::new(Arc::new(RunFlags::default())).unwrap();
        for (name, body) in [("grab", GRAB), ("return 1", "return 1")] {
            let (sha, _) = e.load_script(body.as_bytes()).unwrap();
            let keys: Vec<Bytes> = [
                "hongBaoList",
                "hongBaoConsumedList",
                "hongBaoConsumedMap",
                "123456789",
            ]
            .iter()
            .map(|s| Bytes::from(*s))
            .collect();
            let keys = if name == "grab" { &keys[..] } else { &[][..] };
            let mut out = ReplyBuf::new(false);
            let n = 300_000;
            let t = std::time::Instant::now();
            for _ in 0..n {
                out.buf.clear();
                e.run_script(&sha, keys, &[], 5000, &mut Grab, &mut out)
                    .unwrap();
            }
            let ns = t.elapsed().as_nanos() as f64 / n as f64;
            println!(
                "{name}: {ns:.0} ns/run  reply {:?}",
                String::from_utf8_lossy(&out.buf)
            );
        }
    }
}
