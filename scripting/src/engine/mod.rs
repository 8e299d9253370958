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
//!
//! The engine's state and its script cache are here; apart are what
//! [`Engine::new`] installs in the interpreter (`setup`), the run of a
//! script or function (`run`), FUNCTION libraries (`functions`), the
//! shebang lines (`shebang`) and the errors Rust code raises into scripts
//! (`errors`).

use bytes::Bytes;
use mlua::{Function, Lua, LuaOptions, RegistryKey, StdLib, Table, Value};
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU8};
use std::sync::Arc;

pub use crate::host::{Host, RunError};
use run::set_run_hook;
pub use shebang::parse_eval_shebang;

mod errors;
mod functions;
mod run;
mod setup;
mod shebang;

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
    /// By SHA1 (ahash: EVALSHA looks its script up twice a call, and
    /// SipHash over 40 bytes cost more than the rest of the lookup).
    scripts: ahash::AHashMap<String, Script>,
    /// Runs so far, for the periodic GC step.
    runs: u32,
    pub libraries: BTreeMap<String, Library>,
    /// By name in lower case: function names are case-insensitive.
    pub functions: HashMap<String, FunctionDef>,
    /// mlua's allocator, when the server's replaced it.
    swapped: Option<crate::alloc::Swapped>,
}

impl Drop for Engine {
    fn drop(&mut self) {
        if let Some(s) = &self.swapped {
            // SAFETY: the state lives until `lua` drops, after this.
            unsafe { s.restore() };
        }
    }
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// `b`'s SHA1 in lower-case hex. Written out by hand: the digest's
/// `Display` (a `write!` per byte) cost a fifth of hashing a script.
pub fn sha1_hex(b: &[u8]) -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(40);
    for x in sha1_smol::Sha1::from(b).digest().bytes() {
        s.push(HEX[(x >> 4) as usize] as char);
        s.push(HEX[(x & 15) as usize] as char);
    }
    s
}

impl Engine {
    pub fn new(run: Arc<RunFlags>) -> mlua::Result<Engine> {
        let libs = StdLib::STRING | StdLib::TABLE | StdLib::MATH;
        // SAFETY: `debug` is loaded for the error handler only; the prelude
        // keeps it in a local and removes it from the globals.
        let lua = unsafe { Lua::unsafe_new_with(libs | StdLib::DEBUG, LuaOptions::default()) };
        crate::libs::register_all(&lua)?;
        let g = lua.globals();
        let dbg: Value = g.raw_get("debug")?;
        setup::keep_redis_globals(&g)?;
        crate::textload::install(&lua)?;
        let resp3 = Arc::new(AtomicBool::new(false));
        let r = setup::rust_half(&lua, &resp3, &run)?;
        let api: Table = lua
            .load(include_str!("prelude.lua"))
            .set_name("=cinnabar")
            .call((g.clone(), dbg, r.clone()))?;
        let full: Table = api.raw_get("full")?;
        full.raw_set("call", crate::raw::create_call(&lua, true, &resp3)?)?;
        full.raw_set("pcall", crate::raw::create_call(&lua, false, &resp3)?)?;
        let handler = lua.create_registry_value(api.raw_get::<Function>("handler")?)?;
        let entry = lua.create_registry_value(crate::raw::create_entry(&lua)?)?;
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
        // Last, so that an engine that fails to build closes with mlua's.
        // SAFETY: the runner's state is the main state, not running.
        let swapped = unsafe { crate::alloc::install(runner.state()) };
        Ok(Engine {
            lua,
            api,
            handler,
            _entry: entry,
            runner,
            run,
            resp3,
            scripts: ahash::AHashMap::new(),
            runs: 0,
            libraries: BTreeMap::new(),
            functions: HashMap::new(),
            swapped,
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

fn syntax(e: &mlua::Error) -> String {
    match e {
        mlua::Error::SyntaxError { message, .. } => message.clone(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use protocol::ReplyBuf;
    use std::sync::atomic::Ordering::Relaxed;

    struct NoHost;
    impl Host for NoHost {
        fn call(&mut self, _: &[Bytes], _: bool) -> &[u8] {
            b"+OK\r\n"
        }
    }

    #[test]
    fn sha1_hex_is_the_usual_digest() {
        assert_eq!(sha1_hex(b""), "da39a3ee5e6b4b0d3255bfef95601890afd80709");
        assert_eq!(
            sha1_hex(b"return 1"),
            "e0e1f9fabfc9d4800c877a703b823ac0578ff8db"
        );
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
    use protocol::ReplyBuf;

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
