//! EVAL, EVALSHA, EVAL_RO, EVALSHA_RO, SCRIPT, FUNCTION, FCALL, FCALL_RO.
//!
//! Scripts run under the state lock like any command, through the
//! interpreter in `State::engine`, taken out for the run (scripts cannot
//! nest: these commands are NOSCRIPT). Each command a script calls goes
//! through the normal dispatcher with a client of its own (the caller's
//! database, blocking denied), so it behaves exactly as for a client. The
//! run holds its worker thread; the runtime has at least two, so the others
//! keep serving connections, which answer -BUSY once the script passes
//! `busy-reply-threshold` (see `super::busy`). (Moving every run off the
//! worker with `block_in_place` cost 40% of EVAL's time in thread
//! hand-offs.)

mod socket;

use super::busy::{serve_busy, write_function_stats, NOTBUSY};
use super::flags::*;
use super::help::help_reply;
use super::{execute_resolved, int_arg, is, resolve, Command, Ctx, Handler};
use crate::core::error::{CmdResult, Error};
use crate::state::script_flags::{out_of_memory, refuse_by_flags, OOM};
use crate::state::{Client, LuaDebug, State};
use bytes::Bytes;
use protocol::ReplyBuf;
use scripting::{flags as sflags, Debugger, Engine, FunctionCall, Host, RunFlags};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

pub static HANDLERS: &[(&str, Handler)] = &[
    ("eval", eval),
    ("evalsha", evalsha),
    ("eval_ro", eval_ro),
    ("evalsha_ro", evalsha_ro),
    ("fcall", fcall),
    ("fcall_ro", fcall_ro),
    ("script|load", script_load),
    ("script|exists", script_exists),
    ("script|flush", script_flush),
    ("script|kill", script_kill),
    ("script|debug", script_debug),
    ("script|help", script_help),
    ("function|load", function_load),
    ("function|delete", function_delete),
    ("function|flush", function_flush),
    ("function|list", function_list),
    ("function|stats", function_stats),
    ("function|kill", function_kill),
    ("function|dump", function_dump),
    ("function|restore", function_restore),
    ("function|help", function_help),
];

const DEBUG_YES_REFUSED: &str = "ERR SCRIPT DEBUG YES (a forked session whose changes are discarded) is not supported by this server: use SCRIPT DEBUG SYNC";
const DEBUG_YES_REFUSED_EVAL: &str = "ERR SCRIPT DEBUG YES is not supported by this server, so the script was not run: use SCRIPT DEBUG SYNC";
/// The script client's reply buffer larger than this is freed after a run.
const KEEP_OUT: usize = 64 * 1024;
const RO_WITH_WRITE_FLAG: &str = "ERR Can not execute a script with write flag using *_ro command.";

fn engine(st: &mut State) -> Result<Engine, Error> {
    match st.engine.take() {
        Some(e) => Ok(e),
        None => Engine::new(st.script_run.clone())
            .map_err(|e| Error::other(format!("ERR Lua initialization failed: {e}"))),
    }
}

/// Stores the interpreter back, noting the memory it holds: as in Redis,
/// whose Lua allocates outside its counted allocator, that memory is not
/// part of `used_memory` and does not count against `maxmemory`.
fn put_back(st: &mut State, eng: Engine) {
    crate::state::evict::set_vm_memory(eng.vm_memory());
    st.engine = Some(eng);
}

/// Redis's numkeys checks: the keys and the arguments after them.
fn split_keys(a: &[Bytes]) -> Result<(&[Bytes], &[Bytes]), Error> {
    let n = int_arg(&a[2])?;
    let rest = &a[3..];
    if n > rest.len() as i64 {
        return Err(Error::other(
            "ERR Number of keys can't be greater than number of args",
        ));
    }
    if n < 0 {
        return Err(Error::other("ERR Number of keys can't be negative"));
    }
    Ok(rest.split_at(n as usize))
}

/// Commands from a script go through the dispatcher with this client.
struct ScriptHost<'a> {
    st: &'a mut State,
    cl: Box<Client>,
    read_only: bool,
    /// Deny-OOM commands are refused while memory is over the limit, as
    /// long as the script has not written (it cannot stop halfway), unless
    /// its flags allow it (`allow-oom`, `no-writes`).
    oom_refuses: bool,
    /// The run's start, wall-clock ms: the time every command of the script
    /// sees, so no key expires halfway through a run (as in Redis).
    start_ms: i64,
    run: Arc<RunFlags>,
    /// Reused for every call's reply.
    out: ReplyBuf,
    /// The caller's CLIENT LIST line when its user is restricted (the ACL
    /// log shows it); empty when every call is allowed.
    caller: String,
    /// The last call was refused (see `Host::refused`).
    refused: bool,
    /// A read-only replica runs scripts from clients, not their writes;
    /// what its master or the AOF sends, it runs whole.
    replica_refuses: bool,
    /// Cluster mode, for a script from a client: its calls must stay on
    /// this node and, unless it allows cross-slot keys, in the slot of its
    /// declared keys (or of its first call's).
    cluster: Option<super::redirect::ScriptSlot>,
}

/// Why a script's call is refused, with its command when known.
type Refusal = (Option<&'static Command>, &'static str);

impl ScriptHost<'_> {
    /// The command `args` name if the script may run it; else why not,
    /// with the command when known.
    fn admit(&mut self, args: &[Bytes]) -> Result<&'static Command, Refusal> {
        const ARGS: &str = "ERR Wrong number of args calling Redis command from script";
        let cmd = match resolve(args) {
            Ok(c) => c,
            Err(Error::Arity(_)) => return Err((super::lookup(&args[0]), ARGS)),
            Err(_) => return Err((None, "ERR Unknown Redis command called from script")),
        };
        if !cmd.arity_ok(args.len()) {
            return Err((Some(cmd), ARGS));
        }
        if cmd.has(NOSCRIPT) && !self.st.scripts_may_call_any {
            return Err((
                Some(cmd),
                "ERR This Redis command is not allowed from script",
            ));
        }
        if !cmd.has(STALE) && self.st.serving_stale_refused() {
            return Err((
                Some(cmd),
                "ERR Can not execute the command on a stale replica",
            ));
        }
        if !self.caller.is_empty() {
            if let Some(e) = super::perm::script_refusal(self.st, &self.cl, cmd, args, &self.caller)
            {
                return Err((Some(cmd), e));
            }
        }
        // PUBLISH and the like replicate: no more allowed than a write.
        if self.read_only && (cmd.has(WRITE) || crate::core::command::may_replicate(cmd.name)) {
            return Err((
                Some(cmd),
                "ERR Write commands are not allowed from read-only scripts.",
            ));
        }
        // A script that has written goes on writing when replicas drop
        // meanwhile, as in Redis: refusing then would leave it half done.
        let wrote = self.run.wrote.load(Relaxed);
        if cmd.has(WRITE) && self.replica_refuses {
            return Err((
                Some(cmd),
                "READONLY You can't write against a read only replica.",
            ));
        }
        if cmd.has(WRITE) && !wrote && super::gate::too_few_replicas(self.st) {
            return Err((Some(cmd), super::gate::NOREPLICAS));
        }
        if self.oom_refuses && cmd.has(DENYOOM) && !wrote {
            return Err((Some(cmd), OOM));
        }
        if cmd.has(WRITE) {
            self.run.wrote.store(true, Relaxed);
        }
        if let Some(rule) = self.cluster.as_mut() {
            if let Some(e) = super::redirect::script_refusal(self.st, &self.cl, cmd, args, rule) {
                return Err((Some(cmd), e));
            }
        }
        Ok(cmd)
    }
}

impl Host for ScriptHost<'_> {
    fn call(&mut self, args: &[Bytes], resp3: bool) -> &[u8] {
        self.out.buf.clear();
        self.out.resp3 = resp3;
        let admitted = self.admit(args);
        self.refused = admitted.is_err();
        match admitted {
            // Counted as Redis counts a client's rejected command.
            Err((cmd, e)) => {
                if let Some(cmd) = cmd {
                    self.st.stats.cmd_mut(cmd.slot).rejected += 1;
                }
                self.st.count_error(e);
                self.out.error(e);
            }
            Ok(cmd) => {
                self.cl.resp3 = resp3;
                // Time the command alone, not the Lua that ran before it;
                // its wall clock reads the run's start.
                self.st.tick(std::time::Instant::now());
                let clock = self.st.clock_base;
                self.st.set_clock(self.start_ms);
                let skip = self.run.repl_skip.load(Relaxed);
                self.st.prop.set_targets(skip & 1 == 0, skip & 2 == 0);
                execute_resolved(self.st, &mut self.cl, &mut self.out, cmd, args);
                self.st.prop.set_targets(true, true);
                self.st.clock_base = clock;
            }
        }
        &self.out.buf
    }

    fn refused(&self) -> bool {
        self.refused
    }

    fn resumed(&mut self) {
        self.start_ms = crate::core::clock::now_ms();
    }

    fn acl_check(&mut self, args: &[Bytes]) -> Result<bool, String> {
        super::perm::script_may_run(self.st, &self.cl, args).map_err(|e| e.to_string())
    }

    fn while_busy(&mut self) {
        serve_busy(self.st);
    }

    fn error_reply(&mut self, msg: &[u8], counted: bool) {
        if !counted {
            self.st.count_error(&String::from_utf8_lossy(msg));
        }
        self.st.failed_reply = true;
    }
}

enum Target<'a> {
    Script(&'a str),
    Function(&'a str),
}

#[allow(clippy::too_many_arguments)]
fn run(
    c: &mut Ctx,
    eng: &mut Engine,
    target: Target,
    keys: &[Bytes],
    argv: &[Bytes],
    read_only: bool,
    flags: u32,
    dbg: Option<&mut Debugger>,
) -> CmdResult {
    let threshold = c.st.cfg.busy_reply_threshold;
    let (mut cl, out) = c.st.script_client.take().unwrap_or_else(|| {
        let mut cl = Client::new(0, String::new(), String::new(), -1, true);
        cl.deny_blocking = true;
        cl.name = Some(Bytes::from_static(b"lua"));
        (Box::new(cl), ReplyBuf::new(false))
    });
    cl.db = c.cl.db;
    cl.user = c.cl.user.clone();
    // Whom a refused call is logged for: only a restricted user's calls
    // can be refused.
    let restricted = c.st.acl.user(cl.user.slot).is_none_or(|u| !u.unrestricted);
    let caller = if restricted {
        c.cl.line(c.now, None)
    } else {
        String::new()
    };
    let run = c.st.script_run.clone();
    let oom_refuses = flags & (sflags::ALLOW_OOM | sflags::NO_WRITES) == 0 && out_of_memory(c.st);
    let replica_refuses = c.st.repl.master.is_some()
        && c.st.cfg.replica_read_only
        && !c.cl.peer.master
        && c.cl.id != 0;
    cl.asking = c.cl.asking;
    cl.readonly = c.cl.readonly;
    let cluster = (c.st.cluster.is_some() && !c.cl.peer.master && c.cl.fd >= 0).then(|| {
        super::redirect::ScriptSlot {
            slot: keys.first().map(|k| storage::slot::key_hash_slot(k)),
            cross_slot: flags & (sflags::ALLOW_CROSS_SLOT | sflags::EVAL_COMPAT) != 0,
        }
    });
    let mut host = ScriptHost {
        st: c.st,
        cl,
        read_only,
        oom_refuses,
        start_ms: c.now,
        run,
        out,
        caller,
        refused: false,
        replica_refuses,
        cluster,
    };
    let out = &mut *c.out;
    host.st.busy.lock().open = true;
    let res = match target {
        Target::Script(sha) => match dbg {
            Some(d) => eng.debug_script(sha, keys, argv, threshold, &mut host, out, d),
            None => eng.run_script(sha, keys, argv, threshold, &mut host, out),
        },
        Target::Function(name) => eng.call_function(name, keys, argv, threshold, &mut host, out),
    };
    host.st.busy.lock().open = false;
    serve_busy(host.st);
    // A buffer a large reply grew is not kept.
    if host.out.buf.capacity() > KEEP_OUT {
        host.out = ReplyBuf::new(false);
    }
    host.st.script_client = Some((host.cl, host.out));
    res.map_err(|e| match e.counted {
        true => Error::Relayed(e.msg),
        false => Error::Other(e.msg),
    })
}

fn eval_generic(c: &mut Ctx, a: &[Bytes], by_sha: bool, ro: bool) -> CmdResult {
    // What the script's commands propagate stands for it.
    c.no_propagate();
    match c.cl.lua_debug {
        LuaDebug::Off => {}
        LuaDebug::Refused => {
            c.cl.lua_debug = LuaDebug::Off;
            return Err(Error::other(DEBUG_YES_REFUSED_EVAL));
        }
        LuaDebug::Sync if by_sha => {
            return Err(Error::other(
                "ERR Please use EVAL instead of EVALSHA for debugging",
            ))
        }
        LuaDebug::Sync => return eval_debugged(c, a, ro),
    }
    eval_run(c, a, by_sha, ro, None)
}

/// EVAL after SCRIPT DEBUG SYNC: a debugging session, blocking the server
/// as Redis's does (its changes stay). Whatever the outcome the session
/// ends with `<endsession>`, the reply, and the connection closed.
fn eval_debugged(c: &mut Ctx, a: &[Bytes], ro: bool) -> CmdResult {
    tracing::info!("Redis synchronous debugging eval session started");
    let io = Box::new(socket::SocketIo(c.cl.fd));
    let mut dbg = Debugger::new(io, &a[1], c.st.cfg.busy_reply_threshold);
    let res = eval_run(c, a, false, ro, Some(&mut dbg));
    dbg.end();
    tracing::info!("Redis synchronous debugging eval session ended");
    c.cl.close_after_reply = true;
    res
}

/// EVALSHA's digest as the cache keys it, lower-cased into `buf`: what
/// is not 40 ASCII bytes names no script. (Without a String per call.)
fn sha_key<'b>(arg: &[u8], buf: &'b mut [u8; 40]) -> Option<&'b str> {
    if arg.len() != buf.len() || !arg.is_ascii() {
        return None;
    }
    for (d, s) in buf.iter_mut().zip(arg) {
        *d = s.to_ascii_lowercase();
    }
    std::str::from_utf8(buf).ok()
}

fn eval_run(
    c: &mut Ctx,
    a: &[Bytes],
    by_sha: bool,
    ro: bool,
    dbg: Option<&mut Debugger>,
) -> CmdResult {
    let (keys, argv) = split_keys(a)?;
    let mut eng = engine(c.st)?;
    let res = (|| {
        let mut lower = [0u8; 40];
        let loaded;
        let (sha, fl) = if by_sha {
            let found = sha_key(&a[1], &mut lower).and_then(|s| Some((s, eng.script_flags(s)?)));
            match found {
                Some(f) => f,
                None => {
                    return Err(Error::other(
                        "NOSCRIPT No matching script. Please use EVAL.",
                    ))
                }
            }
        } else {
            loaded = eng.load_script(&a[1]).map_err(Error::Other)?;
            (loaded.0.as_str(), loaded.1)
        };
        refuse_by_flags(c.st, fl)?;
        let compat = fl & sflags::EVAL_COMPAT != 0;
        let no_writes = fl & sflags::NO_WRITES != 0;
        if ro && !compat && !no_writes {
            return Err(Error::other(RO_WITH_WRITE_FLAG));
        }
        run(
            c,
            &mut eng,
            Target::Script(sha),
            keys,
            argv,
            ro || no_writes,
            fl,
            dbg,
        )
    })();
    put_back(c.st, eng);
    res
}

/// EVAL script numkeys [key ...] [arg ...]
fn eval(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    eval_generic(c, a, false, false)
}

/// EVALSHA sha1 numkeys [key ...] [arg ...]
fn evalsha(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    eval_generic(c, a, true, false)
}

/// EVAL_RO script numkeys [key ...] [arg ...]
fn eval_ro(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    eval_generic(c, a, false, true)
}

/// EVALSHA_RO sha1 numkeys [key ...] [arg ...]
fn evalsha_ro(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    eval_generic(c, a, true, true)
}

fn fcall_generic(c: &mut Ctx, a: &[Bytes], ro: bool) -> CmdResult {
    // What the function's commands propagate stands for it.
    c.no_propagate();
    let mut eng = engine(c.st)?;
    let name = String::from_utf8_lossy(&a[1]).into_owned();
    let res = (|| {
        let Some(f) = eng.function(&name) else {
            return Err(Error::other("ERR Function not found"));
        };
        if int_arg(&a[2]).is_err() {
            return Err(Error::other("ERR Bad number of keys provided"));
        }
        let (keys, argv) = split_keys(a)?;
        refuse_by_flags(c.st, f.flags)?;
        let no_writes = f.flags & sflags::NO_WRITES != 0;
        if ro && !no_writes {
            return Err(Error::other(RO_WITH_WRITE_FLAG));
        }
        let flags = f.flags;
        let call = FunctionCall {
            name: f.name.clone(),
            command: a.to_vec(),
            libraries: eng.libraries.len(),
            functions: eng.functions.len(),
        };
        set_function_call(c.st, Some(call));
        let res = run(
            c,
            &mut eng,
            Target::Function(&name),
            keys,
            argv,
            ro || no_writes,
            flags,
            None,
        );
        set_function_call(c.st, None);
        res
    })();
    put_back(c.st, eng);
    res
}

fn set_function_call(st: &State, call: Option<FunctionCall>) {
    *st.script_run
        .function_call
        .lock()
        .unwrap_or_else(|e| e.into_inner()) = call;
}

/// FCALL function numkeys [key ...] [arg ...]
fn fcall(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    fcall_generic(c, a, false)
}

/// FCALL_RO function numkeys [key ...] [arg ...]
fn fcall_ro(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    fcall_generic(c, a, true)
}

/// Runs `f` with the interpreter out of the state.
fn with_engine<R>(c: &mut Ctx, f: impl FnOnce(&mut Engine) -> R) -> Result<R, Error> {
    let mut eng = engine(c.st)?;
    let r = f(&mut eng);
    put_back(c.st, eng);
    Ok(r)
}

/// SCRIPT LOAD script
fn script_load(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let (sha, _) = with_engine(c, |e| e.load_script(&a[2]))?.map_err(Error::Other)?;
    c.out.bulk(sha.as_bytes());
    Ok(())
}

/// SCRIPT EXISTS sha1 [sha1 ...]
fn script_exists(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let found: Vec<bool> = match &c.st.engine {
        Some(e) => a[2..]
            .iter()
            .map(|s| e.has_script(&String::from_utf8_lossy(s).to_ascii_lowercase()))
            .collect(),
        None => vec![false; a.len() - 2],
    };
    c.out.array(found.len());
    for f in found {
        c.out.int(f as i64);
    }
    Ok(())
}

/// SCRIPT FLUSH [ASYNC|SYNC]
fn script_flush(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    if a.len() > 3 || (a.len() == 3 && !is(&a[2], "async") && !is(&a[2], "sync")) {
        return Err(Error::other(
            "ERR SCRIPT FLUSH only support SYNC|ASYNC option",
        ));
    }
    if c.st.engine.is_some() {
        with_engine(c, Engine::flush_scripts)?;
    }
    c.out.ok();
    Ok(())
}

/// SCRIPT KILL (a running script is killed from the connection task; here
/// nothing runs).
fn script_kill(_: &mut Ctx, _: &[Bytes]) -> CmdResult {
    Err(Error::other(NOTBUSY))
}

/// SCRIPT DEBUG YES|SYNC|NO. The session talks to the client's socket
/// directly, so replies still queued (a pipeline, MULTI) would come after
/// it: refused as in Redis. YES is refused: Redis forks the session so its
/// changes are discarded and the server keeps serving, which a fork-less
/// server cannot do; SYNC gives the same session, blocking the server.
fn script_debug(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    if !c.out.is_empty() {
        return Err(Error::other(
            "ERR SCRIPT DEBUG must be called outside a pipeline",
        ));
    }
    if is(&a[2], "no") {
        c.cl.lua_debug = LuaDebug::Off;
    } else if is(&a[2], "sync") {
        // The session reads and writes the socket itself, unencrypted.
        if c.cl.tls {
            return Err(Error::other(
                "ERR SCRIPT DEBUG is not supported on TLS connections by this server",
            ));
        }
        c.cl.lua_debug = LuaDebug::Sync;
    } else if is(&a[2], "yes") {
        c.cl.lua_debug = LuaDebug::Refused;
        return Err(Error::other(DEBUG_YES_REFUSED));
    } else {
        return Err(Error::other("ERR Use SCRIPT DEBUG YES/SYNC/NO"));
    }
    c.out.ok();
    Ok(())
}

/// SCRIPT HELP
fn script_help(c: &mut Ctx, _: &[Bytes]) -> CmdResult {
    help_reply(
        c,
        "SCRIPT",
        &[
            "DEBUG (YES|SYNC|NO)",
            "    Set the debug mode for subsequent scripts executed.",
            "EXISTS <sha1> [<sha1> ...]",
            "    Return information about the existence of the scripts in the script cache.",
            "FLUSH [ASYNC|SYNC]",
            "    Flush the Lua scripts cache. Very dangerous on replicas.",
            "    When called without the optional mode argument, the behavior is determined by the",
            "    lazyfree-lazy-user-flush configuration directive. Valid modes are:",
            "    * ASYNC: Asynchronously flush the scripts cache.",
            "    * SYNC: Synchronously flush the scripts cache.",
            "KILL",
            "    Kill the currently executing Lua script.",
            "LOAD <script>",
            "    Load a script into the scripts cache without executing it.",
        ],
    );
    Ok(())
}

/// FUNCTION LOAD [REPLACE] function-code
fn function_load(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let mut replace = false;
    let mut i = 2;
    while i < a.len() - 1 {
        if is(&a[i], "replace") {
            replace = true;
        } else {
            return Err(Error::other(format!(
                "ERR Unknown option given: {}",
                String::from_utf8_lossy(&a[i])
            )));
        }
        i += 1;
    }
    let code = a[a.len() - 1].clone();
    let name = with_engine(c, |e| e.load_library(&code, replace))?.map_err(Error::Other)?;
    c.st.dirty += 1;
    c.out.bulk(name.as_bytes());
    Ok(())
}

/// FUNCTION DELETE library-name
fn function_delete(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let name = String::from_utf8_lossy(&a[2]).into_owned();
    let found = c.st.engine.is_some() && with_engine(c, |e| e.delete_library(&name))?;
    if !found {
        return Err(Error::other("ERR Library not found"));
    }
    c.st.dirty += 1;
    c.out.ok();
    Ok(())
}

/// FUNCTION FLUSH [ASYNC|SYNC]
fn function_flush(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    if a.len() > 3 {
        return Err(super::help::bad_sub(&a[1], "FUNCTION"));
    }
    if a.len() == 3 && !is(&a[2], "async") && !is(&a[2], "sync") {
        return Err(Error::other(
            "ERR FUNCTION FLUSH only supports SYNC|ASYNC option",
        ));
    }
    if c.st.engine.is_some() {
        with_engine(c, Engine::flush_functions)?;
    }
    c.st.dirty += 1;
    c.out.ok();
    Ok(())
}

/// FUNCTION LIST [LIBRARYNAME library-name-pattern] [WITHCODE]
fn function_list(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let mut pattern: Option<&[u8]> = None;
    let mut withcode = false;
    let mut i = 2;
    while i < a.len() {
        if is(&a[i], "withcode") && !withcode {
            withcode = true;
        } else if is(&a[i], "libraryname") && pattern.is_none() {
            let Some(p) = a.get(i + 1) else {
                return Err(Error::other("ERR library name argument was not given"));
            };
            pattern = Some(p);
            i += 1;
        } else {
            return Err(Error::other(format!(
                "ERR Unknown argument {}",
                String::from_utf8_lossy(&a[i])
            )));
        }
        i += 1;
    }
    let Some(eng) = &c.st.engine else {
        c.out.array(0);
        return Ok(());
    };
    let libs: Vec<_> = eng
        .libraries
        .values()
        .filter(|l| pattern.is_none_or(|p| storage::glob::matches(p, l.name.as_bytes(), false)))
        .collect();
    c.out.array(libs.len());
    for lib in libs {
        c.out.map(if withcode { 4 } else { 3 });
        c.out.bulk(b"library_name");
        c.out.bulk(lib.name.as_bytes());
        c.out.bulk(b"engine");
        c.out.bulk(b"LUA");
        c.out.bulk(b"functions");
        c.out.array(lib.functions.len());
        for f in lib.functions.iter().rev() {
            let Some(def) = eng.function(f) else {
                continue;
            };
            c.out.map(3);
            c.out.bulk(b"name");
            c.out.bulk(def.name.as_bytes());
            c.out.bulk(b"description");
            match &def.description {
                Some(d) => c.out.bulk(d),
                None => c.out.null(),
            }
            c.out.bulk(b"flags");
            let names: Vec<&str> = sflags::NAMES
                .iter()
                .filter(|(f, _)| def.flags & f != 0)
                .map(|(_, n)| *n)
                .collect();
            c.out.set(names.len());
            for n in names {
                c.out.simple(n);
            }
        }
        if withcode {
            c.out.bulk(b"library_code");
            c.out.bulk(&lib.code);
        }
    }
    Ok(())
}

/// FUNCTION STATS (while a function runs, its connection task answers
/// with `busy_function_stats`).
fn function_stats(c: &mut Ctx, _: &[Bytes]) -> CmdResult {
    let (libs, funcs) =
        c.st.engine
            .as_ref()
            .map_or((0, 0), |e| (e.libraries.len(), e.functions.len()));
    write_function_stats(c.out, None, libs, funcs);
    Ok(())
}

/// FUNCTION KILL
fn function_kill(_: &mut Ctx, _: &[Bytes]) -> CmdResult {
    Err(Error::other(NOTBUSY))
}

/// FUNCTION DUMP: the libraries' code in Redis 7.0's payload (a function
/// opcode and RDB string per library, RDB version, CRC-64), compressed as
/// `rdbcompression` says, so Redis restores it and the reverse.
fn function_dump(c: &mut Ctx, _: &[Bytes]) -> CmdResult {
    let compress = c.st.cfg.rdbcompression;
    let libs =
        c.st.engine
            .iter()
            .flat_map(|e| e.libraries.values())
            .map(|l| &l.code[..]);
    c.out
        .bulk(&storage::rdb::function_dump_payload(libs, compress));
    Ok(())
}

/// FUNCTION RESTORE serialized-value [FLUSH|APPEND|REPLACE]
fn function_restore(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    #[derive(PartialEq)]
    enum Policy {
        Flush,
        Append,
        Replace,
    }
    if a.len() > 4 {
        return Err(super::help::bad_sub(&a[1], "FUNCTION"));
    }
    let policy =
        match a.get(3) {
            None => Policy::Append,
            Some(p) if a.len() == 4 && is(p, "flush") => Policy::Flush,
            Some(p) if a.len() == 4 && is(p, "append") => Policy::Append,
            Some(p) if a.len() == 4 && is(p, "replace") => Policy::Replace,
            _ => return Err(Error::other(
                "ERR Wrong restore policy given, value should be either FLUSH, APPEND or REPLACE.",
            )),
        };
    let libs = storage::rdb::function_payload(&a[2])
        .ok_or_else(|| Error::other("ERR DUMP payload version or checksum are wrong"))?;
    let mut eng = engine(c.st)?;
    let res = (|| -> CmdResult {
        if policy == Policy::Append {
            // All or nothing, as Redis: refuse before loading any.
            for code in &libs {
                let name = Engine::library_name(code).map_err(Error::Other)?;
                if eng.libraries.contains_key(&name) {
                    return Err(Error::other(format!("ERR Library {name} already exists")));
                }
            }
        }
        if policy == Policy::Flush {
            eng.flush_functions();
        }
        for code in libs {
            eng.load_library(&Bytes::from(code), policy != Policy::Append)
                .map_err(Error::Other)?;
        }
        Ok(())
    })();
    put_back(c.st, eng);
    res?;
    c.st.dirty += 1;
    c.out.ok();
    Ok(())
}

/// FUNCTION HELP
fn function_help(c: &mut Ctx, _: &[Bytes]) -> CmdResult {
    help_reply(
        c,
        "FUNCTION",
        &[
            "LOAD [REPLACE] <FUNCTION CODE>",
            "    Create a new library with the given library name and code.",
            "DELETE <LIBRARY NAME>",
            "    Delete the given library.",
            "LIST [LIBRARYNAME PATTERN] [WITHCODE]",
            "    Return general information on all the libraries:",
            "    * Library name",
            "    * The engine used to run the Library",
            "    * Library description",
            "    * Functions list",
            "    * Library code (if WITHCODE is given)",
            "    It also possible to get only function that matches a pattern using LIBRARYNAME argument.",
            "STATS",
            "    Return information about the current function running:",
            "    * Function name",
            "    * Command used to run the function",
            "    * Duration in MS that the function is running",
            "    If no function is running, return nil",
            "    In addition, returns a list of available engines.",
            "KILL",
            "    Kill the current running function.",
            "FLUSH [ASYNC|SYNC]",
            "    Delete all the libraries.",
            "    When called without the optional mode argument, the behavior is determined by the",
            "    lazyfree-lazy-user-flush configuration directive. Valid modes are:",
            "    * ASYNC: Asynchronously flush the libraries.",
            "    * SYNC: Synchronously flush the libraries.",
            "DUMP",
            "    Return a serialized payload representing the current libraries, can be restored using FUNCTION RESTORE command",
            "RESTORE <PAYLOAD> [FLUSH|APPEND|REPLACE]",
            "    Restore the libraries represented by the given payload, it is possible to give a restore policy to",
            "    control how to handle existing libraries (default APPEND):",
            "    * FLUSH: delete all existing libraries.",
            "    * APPEND: appends the restored libraries to the existing libraries. On collision, abort.",
            "    * REPLACE: appends the restored libraries to the existing libraries, On collision, replace the old",
            "      libraries with the new libraries (notice that even on this option there is a chance of failure",
            "      in case of functions name collision with another library).",
        ],
    );
    Ok(())
}
