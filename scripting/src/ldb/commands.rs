//! The debugger's prompt: reading commands until one resumes the script,
//! and what each command (`print`, `trace`, `eval`, `redis`, `maxlen`...)
//! does to the Lua state and the logs.
//!
//! Apart from the session and the hook, which only stop the script and
//! hand it over to the prompt, because it is most of the debugger and all
//! of it answers the client.

use super::protocol::{atoi, cstr, is, Parsed};
use super::show::log_top;
use super::{c_text, release, short_src, Debugger};
use mlua::ffi::{self, lua_Debug, lua_State};
use std::ffi::CStr;
use std::os::raw::{c_char, c_int};

impl Debugger {
    fn maxlen_cmd(&mut self, argv: &[Vec<u8>]) {
        if argv.len() == 2 {
            let mut n = atoi(&argv[1]);
            self.maxlen_hint_sent = true;
            if n != 0 && n <= 60 {
                n = 60;
            }
            self.maxlen = n as usize;
        }
        let m = if self.maxlen > 0 {
            format!("<value> replies are truncated at {} bytes.", self.maxlen)
        } else {
            "<value> replies are unlimited.".to_string()
        };
        self.log(m.into_bytes());
    }
}

unsafe fn print_var(l: *mut lua_State, d: &mut Debugger, name: &[u8]) {
    let name = cstr(name);
    let mut ar: lua_Debug = std::mem::zeroed();
    let mut level = 0;
    while ffi::lua_getstack(l, level, &mut ar) != 0 {
        level += 1;
        let mut i = 1;
        loop {
            let n = ffi::lua_getlocal(l, &ar, i);
            if n.is_null() {
                break;
            }
            i += 1;
            if CStr::from_ptr(n).to_bytes() == name {
                log_top(l, d, b"<value> ");
                ffi::lua_pop(l, 1);
                return;
            }
            ffi::lua_pop(l, 1);
        }
    }
    if name == b"ARGV" || name == b"KEYS" {
        ffi::lua_getfield(
            l,
            ffi::LUA_GLOBALSINDEX,
            if name == b"ARGV" {
                c"ARGV".as_ptr()
            } else {
                c"KEYS".as_ptr()
            },
        );
        log_top(l, d, b"<value> ");
        ffi::lua_pop(l, 1);
    } else {
        d.log(b"No such variable.".to_vec());
    }
}

unsafe fn print_all(l: *mut lua_State, d: &mut Debugger) {
    let mut ar: lua_Debug = std::mem::zeroed();
    let mut vars = 0;
    if ffi::lua_getstack(l, 0, &mut ar) != 0 {
        let mut i = 1;
        loop {
            let n = ffi::lua_getlocal(l, &ar, i);
            if n.is_null() {
                break;
            }
            i += 1;
            let name = c_text(n);
            if !name.windows(12).any(|w| w == b"(*temporary)") {
                let mut prefix = b"<value> ".to_vec();
                prefix.extend_from_slice(&name);
                prefix.extend_from_slice(b" = ");
                log_top(l, d, &prefix);
                vars += 1;
            }
            ffi::lua_pop(l, 1);
        }
    }
    if vars == 0 {
        d.log(b"No local variables in the current context.".to_vec());
    }
}

unsafe fn trace(l: *mut lua_State, d: &mut Debugger) {
    let mut ar: lua_Debug = std::mem::zeroed();
    let mut level = 0;
    while ffi::lua_getstack(l, level, &mut ar) != 0 {
        ffi::lua_getinfo(l, c"Snl".as_ptr(), &mut ar);
        if short_src(&ar).windows(11).any(|w| w == b"user_script") {
            let name = if ar.name.is_null() {
                b"top level".to_vec()
            } else {
                c_text(ar.name)
            };
            let mut s = if level == 0 {
                b"In ".to_vec()
            } else {
                b"From ".to_vec()
            };
            s.extend_from_slice(&name);
            s.push(b':');
            d.log(s);
            d.log_source_line(ar.currentline);
        }
        level += 1;
    }
    if level == 0 {
        d.log(b"<error> Can't retrieve Lua stack.".to_vec());
    }
}

/// The error text on top of the stack (popped).
unsafe fn pop_error(l: *mut lua_State) -> Vec<u8> {
    let mut len = 0usize;
    let p = ffi::lua_tolstring(l, -1, &mut len);
    let e = if p.is_null() {
        Vec::new()
    } else {
        std::slice::from_raw_parts(p as *const u8, len).to_vec()
    };
    ffi::lua_pop(l, 1);
    e
}

unsafe fn eval(l: *mut lua_State, d: &mut Debugger, argv: &[Vec<u8>]) {
    let code = argv[1..].join(&b' ');
    let expr = [&b"return "[..], &code].concat();
    let name = c"@ldb_eval".as_ptr();
    if ffi::luaL_loadbuffer(l, expr.as_ptr() as *const c_char, expr.len(), name) != 0 {
        ffi::lua_pop(l, 1);
        if ffi::luaL_loadbuffer(l, code.as_ptr() as *const c_char, code.len(), name) != 0 {
            let mut e = b"<error> ".to_vec();
            e.extend_from_slice(&pop_error(l));
            d.log(e);
            return;
        }
    }
    // The code may step into `redis.call`, which logs through the session.
    let status = release(d, || ffi::lua_pcall(l, 0, 1, 0));
    if status != 0 {
        let mut e = b"<error> ".to_vec();
        e.extend_from_slice(&pop_error(l));
        d.log(e);
        return;
    }
    log_top(l, d, b"<retval> ");
    ffi::lua_pop(l, 1);
}

unsafe fn redis_cmd(l: *mut lua_State, d: &mut Debugger, argv: &[Vec<u8>]) {
    if ffi::lua_checkstack(l, argv.len() as c_int + 1) == 0 {
        d.log(b"<reply> ".to_vec());
        return;
    }
    ffi::lua_getfield(l, ffi::LUA_GLOBALSINDEX, c"redis".as_ptr());
    ffi::lua_getfield(l, -1, c"call".as_ptr());
    for a in &argv[1..] {
        ffi::lua_pushlstring_(l, a.as_ptr() as *const c_char, a.len());
    }
    d.step = true;
    release(d, || ffi::lua_pcall(l, argv.len() as c_int - 1, 1, 0));
    d.step = false;
    ffi::lua_pop(l, 2);
}

/// How a debugger prompt ended.
pub(super) enum Repl {
    /// Back to the script.
    Resume,
    /// The client is gone: the script runs on without stopping.
    Gone,
    /// Raise this error in the script.
    Raise(Vec<u8>),
}

const HELP: &[&str] = &[
    "Redis Lua debugger help:",
    "[h]elp               Show this help.",
    "[s]tep               Run current line and stop again.",
    "[n]ext               Alias for step.",
    "[c]ontinue           Run till next breakpoint.",
    "[l]ist               List source code around current line.",
    "[l]ist [line]        List source code around [line].",
    "                     line = 0 means: current position.",
    "[l]ist [line] [ctx]  In this form [ctx] specifies how many lines",
    "                     to show before/after [line].",
    "[w]hole              List all source code. Alias for 'list 1 1000000'.",
    "[p]rint              Show all the local variables.",
    "[p]rint <var>        Show the value of the specified variable.",
    "                     Can also show global vars KEYS and ARGV.",
    "[b]reak              Show all breakpoints.",
    "[b]reak <line>       Add a breakpoint to the specified line.",
    "[b]reak -<line>      Remove breakpoint from the specified line.",
    "[b]reak 0            Remove all breakpoints.",
    "[t]race              Show a backtrace.",
    "[e]val <code>        Execute some Lua code (in a different callframe).",
    "[r]edis <cmd>        Execute a Redis command.",
    "[m]axlen [len]       Trim logged Redis replies and Lua var dumps to len.",
    "                     Specifying zero as <len> means unlimited.",
    "[a]bort              Stop the execution of the script. In sync",
    "                     mode dataset changes will be retained.",
    "",
    "Debugger functions you can call from Lua scripts:",
    "redis.debug()        Produce logs in the debugger console.",
    "redis.breakpoint()   Stop execution like if there was a breakpoint in the",
    "                     next line of code.",
];

/// Reads and runs debugger commands until one resumes the script.
pub(super) unsafe fn repl(l: *mut lua_State, d: &mut Debugger) -> Repl {
    loop {
        let argv = loop {
            match d.parse_command() {
                Parsed::Command(a) => break a,
                Parsed::Error => return Repl::Raise(b"protocol error".to_vec()),
                Parsed::More => {}
            }
            let mut buf = [0u8; 1024];
            let n = d.io.read(&mut buf);
            if n == 0 {
                d.step = false;
                d.bpcount = 0;
                return Repl::Gone;
            }
            d.cbuf.extend_from_slice(&buf[..n]);
            if d.cbuf.len() > 1 << 20 {
                d.cbuf = Vec::new();
                return Repl::Raise(b"max client buffer reached".to_vec());
            }
        };
        d.cbuf.clear();
        let cmd = &argv[0];
        if is(cmd, &["h", "help"]) {
            for h in HELP {
                d.log(h.as_bytes().to_vec());
            }
        } else if is(cmd, &["s", "step", "n", "next"]) {
            d.step = true;
            return Repl::Resume;
        } else if is(cmd, &["c", "continue"]) {
            return Repl::Resume;
        } else if is(cmd, &["t", "trace"]) {
            trace(l, d);
        } else if is(cmd, &["m", "maxlen"]) {
            d.maxlen_cmd(&argv);
        } else if is(cmd, &["b", "break"]) {
            d.breakpoints(&argv);
        } else if is(cmd, &["e", "eval"]) {
            eval(l, d, &argv);
        } else if is(cmd, &["a", "abort"]) {
            return Repl::Raise(b"script aborted for user request".to_vec());
        } else if argv.len() > 1 && is(cmd, &["r", "redis"]) {
            redis_cmd(l, d, &argv);
        } else if is(cmd, &["p", "print"]) {
            if argv.len() == 2 {
                print_var(l, d, &argv[1]);
            } else {
                print_all(l, d);
            }
        } else if is(cmd, &["l", "list"]) {
            let mut around = d.currentline;
            let mut ctx = 5;
            if let Some(a) = argv.get(1) {
                let n = atoi(a) as i32;
                if n > 0 {
                    around = n;
                }
            }
            if let Some(c) = argv.get(2) {
                ctx = atoi(c) as i32;
            }
            d.list(around, ctx);
        } else if is(cmd, &["w", "whole"]) {
            d.list(1, 1_000_000);
        } else {
            d.log(
                b"<error> Unknown Redis Lua debugger command or wrong number of arguments."
                    .to_vec(),
            );
        }
        d.send_logs();
    }
}
