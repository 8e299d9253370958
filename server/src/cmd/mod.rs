//! The command table and the dispatcher.
//!
//! What a command is (arity, flags, ACL categories, key specs, docs) comes
//! from one source: Redis 7.0.15's own metadata, generated into [`meta`] by
//! `tools/gen_command_table.py`. Each family module only binds names to
//! handlers (`HANDLERS`, `config|get` for a subcommand); [`table`] joins
//! the bindings with their rows once. Rows left unbound are commands not
//! implemented yet: unknown to clients and to COMMAND. Arity checks,
//! COMMAND, MULTI queuing, script permissions, persistence and key
//! extraction all read this one table.
//!
//! Shared machinery for the families: [`keyspace`] (typed key access with
//! lazy expiry, and `State::changed`), [`blocking`] (waiting clients),
//! [`scan`] (the SCAN family's cursor and options).
//!
//! [`execute`] is the one gatekeeper every command passes, checking in a
//! fixed order: lookup, arity, authentication; then it runs the handler and
//! accounts for it (commandstats, errorstats, slowlog, MONITOR).

pub mod aof;
pub mod bitmap;
pub mod blocking;
pub mod client;
pub mod command;
pub mod config;
pub mod connection;
pub mod debug;
pub mod hash;
pub mod help;
pub mod info;
pub mod keys;
pub mod keyspace;
pub mod list;
pub mod memory;
#[rustfmt::skip]
pub mod meta;
pub mod persist;
pub mod pubsub;
pub mod scan;
pub mod scripting;
pub mod server;
pub mod set;
pub mod sort;
pub mod string;
pub mod transaction;
pub mod zset;

pub use blocking::timeout_arg;

use crate::error::{CmdResult, Error};
use crate::state::{BlockKind, Blocked, Client, ReplyMode, SlowEntry, State};
use ahash::AHashMap as HashMap;
use bytes::Bytes;
use protocol::ReplyBuf;
use std::sync::OnceLock;
use storage::Db;

pub type Handler = fn(&mut Ctx, &[Bytes]) -> CmdResult;

/// Command flags, as COMMAND INFO names them.
pub mod flags {
    pub const WRITE: u32 = 1 << 0;
    pub const READONLY: u32 = 1 << 1;
    pub const DENYOOM: u32 = 1 << 2;
    pub const ADMIN: u32 = 1 << 3;
    pub const PUBSUB: u32 = 1 << 4;
    pub const NOSCRIPT: u32 = 1 << 5;
    pub const BLOCKING: u32 = 1 << 6;
    pub const LOADING: u32 = 1 << 7;
    pub const STALE: u32 = 1 << 8;
    pub const SKIP_MONITOR: u32 = 1 << 9;
    pub const SKIP_SLOWLOG: u32 = 1 << 10;
    pub const FAST: u32 = 1 << 11;
    pub const NO_AUTH: u32 = 1 << 12;
    /// Redis 7.0's COMMAND INFO does not show this flag, so no generated
    /// row carries it.
    pub const MAY_REPLICATE: u32 = 1 << 13;
    pub const NO_MULTI: u32 = 1 << 14;
    pub const MOVABLE_KEYS: u32 = 1 << 15;
    pub const ALLOW_BUSY: u32 = 1 << 16;
    pub const ASKING: u32 = 1 << 17;
    pub const NO_MANDATORY_KEYS: u32 = 1 << 18;
    pub const NO_ASYNC_LOADING: u32 = 1 << 19;
    /// In the order COMMAND INFO lists them.
    pub const NAMES: &[(u32, &str)] = &[
        (WRITE, "write"),
        (READONLY, "readonly"),
        (DENYOOM, "denyoom"),
        (ADMIN, "admin"),
        (PUBSUB, "pubsub"),
        (NOSCRIPT, "noscript"),
        (BLOCKING, "blocking"),
        (LOADING, "loading"),
        (STALE, "stale"),
        (SKIP_MONITOR, "skip_monitor"),
        (SKIP_SLOWLOG, "skip_slowlog"),
        (ASKING, "asking"),
        (FAST, "fast"),
        (NO_AUTH, "no_auth"),
        (NO_MANDATORY_KEYS, "no_mandatory_keys"),
        (NO_ASYNC_LOADING, "no_async_loading"),
        (NO_MULTI, "no_multi"),
        (MOVABLE_KEYS, "movablekeys"),
        (ALLOW_BUSY, "allow_busy"),
    ];
}

/// Key-spec flags, as COMMAND INFO names them.
pub mod key_flags {
    pub const RO: u32 = 1 << 0;
    pub const RW: u32 = 1 << 1;
    pub const OW: u32 = 1 << 2;
    pub const RM: u32 = 1 << 3;
    pub const ACCESS: u32 = 1 << 4;
    pub const UPDATE: u32 = 1 << 5;
    pub const INSERT: u32 = 1 << 6;
    pub const DELETE: u32 = 1 << 7;
    pub const NOT_KEY: u32 = 1 << 8;
    pub const INCOMPLETE: u32 = 1 << 9;
    pub const VARIABLE_FLAGS: u32 = 1 << 10;
    /// In the order COMMAND INFO lists them.
    pub const NAMES: &[(u32, &str)] = &[
        (RO, "RO"),
        (RW, "RW"),
        (OW, "OW"),
        (RM, "RM"),
        (ACCESS, "access"),
        (UPDATE, "update"),
        (INSERT, "insert"),
        (DELETE, "delete"),
        (NOT_KEY, "not_key"),
        (INCOMPLETE, "incomplete"),
        (VARIABLE_FLAGS, "variable_flags"),
    ];
}

/// Where a key spec starts looking: at an argument index, or after a
/// keyword searched from `startfrom` (backwards if negative).
pub enum Begin {
    Index(i32),
    Keyword(&'static str, i32),
    Unknown,
}

/// How a key spec finds its keys from where it starts.
pub enum Find {
    /// Keys up to `lastkey` (relative; negative counts from the end, or with
    /// `limit` takes 1/limit of the rest), every `keystep`.
    Range {
        lastkey: i32,
        keystep: i32,
        limit: i32,
    },
    /// A count at `keynumidx`, keys from `firstkey` (both relative).
    Keynum {
        keynumidx: i32,
        firstkey: i32,
        keystep: i32,
    },
    Unknown,
}

pub struct KeySpec {
    pub notes: &'static str,
    pub flags: u32,
    pub begin: Begin,
    pub find: Find,
}

/// A command or subcommand (`parent|sub`) as Redis 7.0.15 describes it,
/// generated into [`meta::META`].
pub struct Meta {
    pub name: &'static str,
    /// Redis's arity: exact count if positive, minimum count if negative
    /// (the command name counts).
    pub arity: i32,
    pub flags: u32,
    /// The legacy key positions COMMAND INFO shows.
    pub first_key: i32,
    pub last_key: i32,
    pub step: i32,
    /// ACL categories, `@`-prefixed.
    pub acl: &'static [&'static str],
    pub tips: &'static [&'static str],
    pub specs: &'static [KeySpec],
    /// COMMAND DOCS's map for the command (RESP3), without `subcommands`.
    pub docs: &'static [u8],
    pub subs: &'static [Meta],
}

impl Meta {
    pub fn has(&self, f: u32) -> bool {
        self.flags & f != 0
    }

    pub fn arity_ok(&self, argc: usize) -> bool {
        let a = self.arity;
        (a > 0 && argc == a as usize) || (a < 0 && argc >= (-a) as usize)
    }

    /// Redis's row of a command or subcommand by full name.
    pub fn find(name: &str) -> Option<&'static Meta> {
        let (top, sub) = match name.split_once('|') {
            Some((p, s)) => (p, Some(s)),
            None => (name, None),
        };
        let i = meta::META.binary_search_by(|m| m.name.cmp(top)).ok()?;
        let m = &meta::META[i];
        match sub {
            None => Some(m),
            Some(_) => m.subs.iter().find(|s| s.name == name),
        }
    }
}

/// A command cinnabar implements: Redis's row bound to its handler. Reads
/// as its [`Meta`] (`cmd.name`, `cmd.arity`, `cmd.has(..)`).
pub struct Command {
    pub meta: &'static Meta,
    pub handler: Handler,
    /// The implemented subcommands of a container command (CONFIG, …),
    /// which then dispatches on its first argument.
    pub subcommands: &'static [Command],
}

impl std::ops::Deref for Command {
    type Target = Meta;
    fn deref(&self) -> &Meta {
        self.meta
    }
}

fn no_handler(_: &mut Ctx, _: &[Bytes]) -> CmdResult {
    Ok(())
}

/// Every family's bindings of names (`get`, `config|get`) to handlers.
const FAMILIES: &[&[(&str, Handler)]] = &[
    string::HANDLERS,
    bitmap::HANDLERS,
    keys::HANDLERS,
    connection::HANDLERS,
    server::HANDLERS,
    info::HANDLERS,
    debug::HANDLERS,
    client::HANDLERS,
    config::HANDLERS,
    command::HANDLERS,
    list::HANDLERS,
    hash::HANDLERS,
    set::HANDLERS,
    zset::HANDLERS,
    sort::HANDLERS,
    transaction::HANDLERS,
    scripting::HANDLERS,
    pubsub::HANDLERS,
    persist::HANDLERS,
    aof::HANDLERS,
    memory::HANDLERS,
];

fn bindings() -> impl Iterator<Item = &'static (&'static str, Handler)> {
    FAMILIES.iter().flat_map(|f| f.iter())
}

/// The implemented commands by name: each binding joined with its
/// generated row; a container command is there when one of its
/// subcommands is bound.
pub fn table() -> &'static HashMap<&'static str, &'static Command> {
    static TABLE: OnceLock<HashMap<&'static str, &'static Command>> = OnceLock::new();
    TABLE.get_or_init(|| {
        let row = |name: &str| Meta::find(name).unwrap_or_else(|| panic!("no row for {name}"));
        let mut subs: HashMap<&str, Vec<Command>> = HashMap::new();
        let mut tops: Vec<Command> = Vec::new();
        for &(name, handler) in bindings() {
            let cmd = Command {
                meta: row(name),
                handler,
                subcommands: &[],
            };
            match name.split_once('|') {
                Some((parent, _)) => subs.entry(parent).or_default().push(cmd),
                None => tops.push(cmd),
            }
        }
        for (parent, subcommands) in subs {
            tops.push(Command {
                meta: row(parent),
                handler: no_handler,
                subcommands: subcommands.leak(),
            });
        }
        let tops: &'static [Command] = tops.leak();
        tops.iter().map(|c| (c.name, c)).collect()
    })
}

/// Looks a command up by name, case-insensitively, without allocating.
pub fn lookup(name: &[u8]) -> Option<&'static Command> {
    let mut buf = [0u8; 32];
    if name.len() > buf.len() {
        return None;
    }
    for (d, s) in buf.iter_mut().zip(name) {
        *d = s.to_ascii_lowercase();
    }
    let lower = std::str::from_utf8(&buf[..name.len()]).ok()?;
    table().get(lower).copied()
}

/// Finds a subcommand of `parent` for `args[1]`.
pub fn lookup_sub(parent: &'static Command, sub: &[u8]) -> Option<&'static Command> {
    let skip = parent.name.len() + 1;
    parent
        .subcommands
        .iter()
        .find(|c| c.name.as_bytes()[skip..].eq_ignore_ascii_case(sub))
}

/// The command (or subcommand) for a request, or the error for an unknown one.
pub fn resolve(args: &[Bytes]) -> Result<&'static Command, Error> {
    let Some(cmd) = lookup(&args[0]) else {
        let mut rest = String::new();
        for a in &args[1..] {
            if rest.len() >= 128 {
                break;
            }
            let s = String::from_utf8_lossy(a);
            let room = 128 - rest.len();
            rest.push_str(&format!("'{}' ", s.chars().take(room).collect::<String>()));
        }
        let name: String = String::from_utf8_lossy(&args[0])
            .chars()
            .take(128)
            .collect();
        return Err(Error::UnknownCommand(format!(
            "'{name}', with args beginning with: {rest}"
        )));
    };
    if cmd.subcommands.is_empty() {
        return Ok(cmd);
    }
    if args.len() < 2 {
        return Err(Error::Arity(cmd.name.into()));
    }
    lookup_sub(cmd, &args[1]).ok_or_else(|| Error::UnknownSubcommand {
        sub: String::from_utf8_lossy(&args[1])
            .chars()
            .take(128)
            .collect(),
        cmd: cmd.name.to_ascii_uppercase(),
    })
}

/// What a handler gets: the state (under the lock), its client, where its
/// reply goes, and the time the command started (ms), used for expiry so a
/// command sees one consistent clock.
pub struct Ctx<'a> {
    pub st: &'a mut State,
    pub cl: &'a mut Client,
    pub out: &'a mut ReplyBuf,
    pub now: i64,
}

impl Ctx<'_> {
    pub fn db(&mut self) -> &mut Db {
        &mut self.st.dbs[self.cl.db]
    }

    /// Whether a blocking command may block now; if not (MULTI, scripts) it
    /// must reply as on timeout.
    pub fn may_block(&self) -> bool {
        !self.cl.deny_blocking
    }

    /// Blocks the client on `keys` until one is served or `deadline` (unix
    /// ms) passes. The handler writes no reply: the one it writes when run
    /// again for a ready key, or the timeout reply, is sent instead.
    pub fn block(
        &mut self,
        kind: BlockKind,
        keys: &[Bytes],
        deadline: Option<i64>,
        args: &[Bytes],
    ) {
        let b = Blocked {
            kind,
            db: self.cl.db,
            keys: keys.to_vec(),
            deadline,
            args: args.to_vec(),
        };
        self.st.register_blocked(self.cl.id, &b);
        self.cl.blocked = Some(b);
    }

    /// Whether what commands propagate is read (the AOF is on): a rewrite
    /// that costs something to build is built only then.
    pub fn propagating(&mut self) -> bool {
        self.st.propagating()
    }

    /// This command, if it changed data, propagates `op` instead of its
    /// arguments (Redis's `rewriteClientCommandVector`); called again, it
    /// propagates one more op. `op` is collected only if it is read.
    pub fn propagate_as(&mut self, op: impl IntoIterator<Item = Bytes>) {
        self.st.propagate_as(op);
    }

    /// This command propagates nothing of its own: the commands it runs
    /// propagate themselves (EXEC, scripts).
    pub fn no_propagate(&mut self) {
        self.st.no_propagate();
    }
}

/// Runs one request for client `cl`, writing its reply (or error) to `out`.
pub fn execute(st: &mut State, cl: &mut Client, out: &mut ReplyBuf, args: &[Bytes]) {
    execute_req(st, cl, out, Req::Borrowed(args));
}

/// As `execute`, for a request the caller gives up: MULTI queues it
/// without copying (the arguments are left empty then).
pub fn execute_owned(st: &mut State, cl: &mut Client, out: &mut ReplyBuf, args: &mut Vec<Bytes>) {
    execute_req(st, cl, out, Req::Owned(args));
}

enum Req<'a> {
    Borrowed(&'a [Bytes]),
    Owned(&'a mut Vec<Bytes>),
}

/// Whole microseconds from `base` to `t`.
fn micros(base: std::time::Instant, t: std::time::Instant) -> u64 {
    t.saturating_duration_since(base).as_micros() as u64
}

fn execute_req(st: &mut State, cl: &mut Client, out: &mut ReplyBuf, mut req: Req) {
    let args: &[Bytes] = match &req {
        Req::Borrowed(a) => a,
        Req::Owned(v) => v,
    };
    let cmd = match check(st, cl, args) {
        Ok(c) => c,
        Err((cmd, e)) => {
            // CLIENT LIST's `cmd`: the command looked up, NULL if unknown.
            cl.last_cmd = cmd.map_or("NULL", |c| c.name);
            if let Some(cmd) = cmd {
                st.stats.cmd.entry(cmd.name).or_default().rejected += 1;
            }
            let e = match cmd {
                // A rejected EXEC discards the transaction, saying why.
                Some(c) if c.name == "exec" => {
                    cl.multi = None;
                    cl.multi_error = false;
                    st.unwatch_all(cl);
                    let why = e.to_string();
                    let why = why.strip_prefix("ERR ").unwrap_or(&why).to_string();
                    Error::other(format!("EXECABORT Transaction discarded because of: {why}"))
                }
                _ => {
                    if cl.multi.is_some() {
                        cl.multi_error = true;
                    }
                    e
                }
            };
            reject(st, out, &e);
            return;
        }
    };
    if let Some(queue) = &mut cl.multi {
        if !transaction::runs_in_multi(cmd.name) {
            cl.last_cmd = cmd.name;
            queue.push(match &mut req {
                Req::Borrowed(a) => a.to_vec(),
                Req::Owned(v) => std::mem::take(*v),
            });
            out.simple("QUEUED");
            return;
        }
    }
    if st.monitors > 0 && !cmd.has(flags::SKIP_MONITOR | flags::ADMIN) {
        feed_monitors(st, cl, args);
    }
    // One clock read per command: it starts when the previous one ended
    // (the connection sets `last_tick` when it takes the lock).
    let start = st.last_tick;
    let now = st.wall_ms(start);
    let mark = out.len();
    out.resp3 = cl.resp3;
    // A RESP2 subscriber's PING answers in the message format.
    let handler = if cmd.name == "ping" && !cl.resp3 && cl.subs.any() {
        pubsub::subscribed_ping
    } else {
        cmd.handler
    };
    // Messages this command sends to its own client go before its reply.
    let outer_running = std::mem::replace(&mut st.pubsub.running, cl.id);
    let outer_new = if cmd.has(flags::WRITE) {
        st.note_new_candidates(cl.db, args, now)
    } else {
        std::mem::take(&mut st.pubsub.new_keys)
    };
    st.pubsub.running_resp3 = cl.resp3;
    let prop = st.command_start(cl.db);
    let mut ctx = Ctx { st, cl, out, now };
    let res = handler(&mut ctx, args);
    let Ctx { st, cl, out, .. } = ctx;
    st.command_end(prop, args);
    if !st.pubsub.self_out.is_empty() {
        let mine = std::mem::take(&mut st.pubsub.self_out);
        let reply = out.buf.split_off(mark);
        out.buf.extend_from_slice(&mine);
        out.buf.unsplit(reply);
    }
    if std::mem::take(&mut st.dirty_cas_running) {
        cl.dirty_cas = true;
    }
    let end = std::time::Instant::now();
    st.last_tick = end;
    // Whole microseconds of each clock reading, subtracted, as Redis
    // takes `ustime()` twice: flooring the difference instead counted 0
    // for nearly every sub-microsecond command.
    let dur = micros(st.started, end).saturating_sub(micros(st.started, start));
    st.stats.total_commands += 1;
    let stat = st.stats.cmd.entry(cmd.name).or_default();
    stat.calls += 1;
    stat.usec += dur;
    // Not a command that just blocked: it is counted when it is served.
    if st.tun.latency_tracking && cl.blocked.is_none() {
        let h = stat.latency.get_or_insert_with(|| {
            Box::new(hdrhistogram::Histogram::new_with_bounds(1, 1_000_000_000, 2).expect("bounds"))
        });
        h.saturating_record((dur * 1000).clamp(1, 1_000_000_000));
    }
    // A script's reply may hold errors while it succeeds.
    if std::mem::take(&mut st.failed_reply) || res.is_err() {
        stat.failed += 1;
    }
    if let Err(e) = &res {
        reject(st, out, e);
    }
    cl.last_cmd = cmd.name;
    if st.memory.latency_threshold_ms > 0 {
        let event = if cmd.has(flags::FAST) {
            "fast-command"
        } else {
            "command"
        };
        st.memory.latency_sample_if_needed(event, dur / 1000);
    }
    // Read after the handler so CLIENT REPLY ON is answered and OFF/SKIP are not.
    if cl.reply_mode != ReplyMode::On {
        out.buf.truncate(mark);
        // SKIP covers only the command after CLIENT REPLY SKIP itself.
        cl.reply_mode = match cl.reply_mode {
            ReplyMode::SkipNext => ReplyMode::Skip,
            ReplyMode::Skip => ReplyMode::On,
            m => m,
        };
    }
    // Inside EXEC or a script, waiters are served when the whole block ends.
    if !st.ready_keys.is_empty() && !cl.deny_blocking {
        st.serve_blocked();
        // Events of the commands served come after this command's reply.
        if !st.pubsub.self_out.is_empty() {
            let events = std::mem::take(&mut st.pubsub.self_out);
            out.buf.extend_from_slice(&events);
        }
    }
    st.pubsub.running = outer_running;
    st.pubsub.new_keys = outer_new;
    if st.tun.slowlog_slower_than >= 0
        && dur as i64 >= st.tun.slowlog_slower_than
        && !cmd.has(flags::SKIP_SLOWLOG)
    {
        slowlog_push(st, cl, args, dur as i64);
    }
}

/// The checks every request passes before it runs or is queued, in
/// Redis's order: lookup, arity, authentication. The error comes with the
/// command when it was found.
fn check(
    st: &mut State,
    cl: &mut Client,
    args: &[Bytes],
) -> Result<&'static Command, (Option<&'static Command>, Error)> {
    let cmd = resolve(args).map_err(|e| (None, e))?;
    if !cmd.arity_ok(args.len()) {
        return Err((Some(cmd), Error::Arity(cmd.name.into())));
    }
    if !cl.authenticated && !cmd.has(flags::NO_AUTH) {
        if st.tun.requirepass.is_some() {
            return Err((Some(cmd), Error::NoAuth));
        }
        // The password was removed since this client connected.
        cl.authenticated = true;
    }
    if st.memory.maxmemory > 0 && oom_rejects(st, cl, cmd) {
        return Err((Some(cmd), Error::other(OOM_ERR)));
    }
    if !st.rdb.last_bgsave_ok && misconf_denies(st, cl, cmd) {
        return Err((Some(cmd), Error::other(crate::persist::MISCONF)));
    }
    if !cl.resp3 && cl.subs.any() && !pubsub::allowed_in_subscribed_mode(cmd.name) {
        return Err((Some(cmd), pubsub::subscribed_mode_error(cmd.name)));
    }
    Ok(cmd)
}

const OOM_ERR: &str = "OOM command not allowed when used memory > 'maxmemory'.";

/// Evicts as needed before a command (maxmemory set); true if the command
/// must be refused: over the limit with nothing left to evict, and the
/// command may grow memory. In MULTI every command but EXEC/DISCARD/QUIT/
/// RESET counts, since queuing itself uses memory; EXEC counts if a
/// queued command does. Commands run by EXEC are not checked again; a
/// script's are refused, without evicting, while memory is over the limit.
fn oom_rejects(st: &mut State, cl: &Client, cmd: &Command) -> bool {
    if cl.deny_blocking {
        return cl.id == 0
            && cmd.has(flags::DENYOOM)
            && crate::evict::used_memory() > st.memory.maxmemory;
    }
    let res = st.perform_evictions();
    st.peak_memory = st.peak_memory.max(crate::evict::used_memory());
    if res != crate::evict::Evict::Fail {
        return false;
    }
    if cmd.has(flags::DENYOOM) {
        return true;
    }
    match (&cl.multi, cmd.name) {
        (Some(q), "exec") => q
            .iter()
            .any(|a| resolve(a).is_ok_and(|c| c.has(flags::DENYOOM))),
        (Some(_), "discard" | "quit" | "reset") => false,
        (Some(_), _) => true,
        (None, _) => false,
    }
}

/// Whether `cmd` is refused with MISCONF now: a write command, PING (as
/// Redis), or an EXEC whose queue holds a write command.
fn misconf_denies(st: &State, cl: &Client, cmd: &Command) -> bool {
    let write = cmd.has(flags::WRITE)
        || cmd.name == "ping"
        || (cmd.name == "exec"
            && cl.multi.as_ref().is_some_and(|q| {
                q.iter()
                    .any(|a| resolve(a).is_ok_and(|c| c.has(flags::WRITE)))
            }));
    write && crate::persist::writes_denied(st)
}

/// Replies with the error, counted in the error stats unless it was where
/// it arose.
fn reject(st: &mut State, out: &mut ReplyBuf, e: &Error) {
    let msg = e.to_string();
    out.error(&msg);
    if e.counts() {
        st.count_error(&msg);
    }
}

impl State {
    /// An error reply, in INFO errorstats (by its first word) and
    /// `total_error_replies`.
    pub fn count_error(&mut self, msg: &str) {
        let code = msg.split(' ').next().unwrap_or("ERR");
        match self.stats.errors.get_mut(code) {
            Some(n) => *n += 1,
            None => {
                self.stats.errors.insert(code.to_string(), 1);
            }
        }
        self.stats.total_error_replies += 1;
    }
}

fn slowlog_push(st: &mut State, cl: &Client, args: &[Bytes], dur: i64) {
    // As Redis: at most 32 arguments, each cut to 128 bytes.
    let mut logged: Vec<Bytes> = Vec::new();
    for (i, a) in args.iter().enumerate() {
        if i == 31 && args.len() > 32 {
            logged.push(Bytes::from(format!(
                "... ({} more arguments)",
                args.len() - 31
            )));
            break;
        }
        if a.len() > 128 {
            logged.push(Bytes::from(format!(
                "{}... ({} more bytes)",
                String::from_utf8_lossy(&a[..128]),
                a.len() - 128
            )));
        } else {
            logged.push(a.clone());
        }
    }
    let id = st.slowlog_next_id;
    st.slowlog_next_id += 1;
    st.slowlog.push_front(SlowEntry {
        id,
        time: crate::state::now_ms() / 1000,
        duration_us: dur,
        args: logged,
        addr: cl.addr.clone(),
        name: cl.name.clone().unwrap_or_default(),
    });
    st.slowlog.truncate(st.tun.slowlog_max_len);
}

/// Sends the command to every MONITOR client, formatted as Redis does:
/// `+<sec>.<usec> [<db> <addr>] "arg" "arg"`.
fn feed_monitors(st: &mut State, cl: &Client, args: &[Bytes]) {
    let us = crate::state::now_us();
    let mut line = format!(
        "+{}.{:06} [{} {}]",
        us / 1_000_000,
        us % 1_000_000,
        cl.db,
        cl.addr
    );
    for a in args {
        line.push(' ');
        line.push_str(&quote_monitor(a));
    }
    line.push_str("\r\n");
    for c in st.clients.values_mut().filter(|c| c.monitor) {
        c.pending.extend_from_slice(line.as_bytes());
        c.wake.notify_one();
        st.woken += 1;
    }
}

/// Redis's `sdscatrepr`: a double-quoted string with C escapes.
pub fn quote_monitor(a: &[u8]) -> String {
    let mut s = String::from("\"");
    for &b in a {
        match b {
            b'\\' => s.push_str("\\\\"),
            b'"' => s.push_str("\\\""),
            b'\n' => s.push_str("\\n"),
            b'\r' => s.push_str("\\r"),
            b'\t' => s.push_str("\\t"),
            7 => s.push_str("\\a"),
            8 => s.push_str("\\b"),
            0x20..=0x7e => s.push(b as char),
            _ => s.push_str(&format!("\\x{b:02x}")),
        }
    }
    s.push('"');
    s
}

/// Parses an integer argument (`ERR value is not an integer or out of range`).
pub fn int_arg(a: &[u8]) -> Result<i64, Error> {
    storage::num::parse_i64(a).ok_or(crate::error::NOT_INTEGER)
}

/// Parses a float argument (`ERR value is not a valid float`).
pub fn float_arg(a: &[u8]) -> Result<f64, Error> {
    storage::num::parse_f64(a).ok_or(crate::error::NOT_FLOAT)
}

/// Case-insensitive keyword test.
pub fn is(a: &[u8], kw: &str) -> bool {
    a.eq_ignore_ascii_case(kw.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Redis 7.0.15's commands and subcommands cinnabar does not implement
    /// yet: their rows stay unbound, so they are unknown to clients.
    const NOT_IMPLEMENTED: &[&str] = &[
        "acl",
        "acl|cat",
        "acl|deluser",
        "acl|dryrun",
        "acl|genpass",
        "acl|getuser",
        "acl|help",
        "acl|list",
        "acl|load",
        "acl|log",
        "acl|save",
        "acl|setuser",
        "acl|users",
        "acl|whoami",
        "asking",
        "client|caching",
        "client|tracking",
        "cluster",
        "cluster|addslots",
        "cluster|addslotsrange",
        "cluster|bumpepoch",
        "cluster|count-failure-reports",
        "cluster|countkeysinslot",
        "cluster|delslots",
        "cluster|delslotsrange",
        "cluster|failover",
        "cluster|flushslots",
        "cluster|forget",
        "cluster|getkeysinslot",
        "cluster|help",
        "cluster|info",
        "cluster|keyslot",
        "cluster|links",
        "cluster|meet",
        "cluster|myid",
        "cluster|nodes",
        "cluster|replicas",
        "cluster|replicate",
        "cluster|reset",
        "cluster|saveconfig",
        "cluster|set-config-epoch",
        "cluster|setslot",
        "cluster|shards",
        "cluster|slaves",
        "cluster|slots",
        "failover",
        "geoadd",
        "geodist",
        "geohash",
        "geopos",
        "georadius",
        "georadius_ro",
        "georadiusbymember",
        "georadiusbymember_ro",
        "geosearch",
        "geosearchstore",
        "migrate",
        "module",
        "module|help",
        "module|list",
        "module|load",
        "module|loadex",
        "module|unload",
        "pfadd",
        "pfcount",
        "pfdebug",
        "pfmerge",
        "pfselftest",
        "psync",
        "readonly",
        "readwrite",
        "replconf",
        "replicaof",
        "restore-asking",
        "slaveof",
        "sync",
        "xack",
        "xadd",
        "xautoclaim",
        "xclaim",
        "xdel",
        "xgroup",
        "xgroup|create",
        "xgroup|createconsumer",
        "xgroup|delconsumer",
        "xgroup|destroy",
        "xgroup|help",
        "xgroup|setid",
        "xinfo",
        "xinfo|consumers",
        "xinfo|groups",
        "xinfo|help",
        "xinfo|stream",
        "xlen",
        "xpending",
        "xrange",
        "xread",
        "xreadgroup",
        "xrevrange",
        "xsetid",
        "xtrim",
    ];

    /// Every binding has a row, and every row is bound or listed as not
    /// implemented (COMMAND's subcommands are served by its handler).
    #[test]
    fn bindings_match_rows() {
        let mut bound = std::collections::HashSet::new();
        for &(name, _) in bindings() {
            assert!(Meta::find(name).is_some(), "{name} is bound but has no row");
            assert!(bound.insert(name), "{name} is bound twice");
            assert!(!NOT_IMPLEMENTED.contains(&name), "{name} is bound");
            if let Some((parent, _)) = name.split_once('|') {
                assert!(!bound.contains(parent), "{parent} is bound, and {name}");
            }
        }
        for m in meta::META {
            let implemented = bound.contains(m.name) || table().contains_key(m.name);
            assert!(
                implemented != NOT_IMPLEMENTED.contains(&m.name),
                "{}: bind it or list it as not implemented",
                m.name
            );
            for s in m.subs.iter().filter(|_| m.name != "command") {
                assert!(
                    bound.contains(s.name) != NOT_IMPLEMENTED.contains(&s.name),
                    "{}: bind it or list it as not implemented",
                    s.name
                );
            }
        }
    }

    #[test]
    fn table_is_consistent() {
        assert!(meta::META.windows(2).all(|w| w[0].name < w[1].name));
        for (name, c) in table() {
            assert_eq!(*name, c.name);
            assert!(c.arity != 0, "{name}");
            assert!(
                c.has(flags::WRITE) as u8 + c.has(flags::READONLY) as u8 <= 1,
                "{name}"
            );
            assert!(lookup(name.as_bytes()).is_some(), "{name}");
            for s in c.subcommands {
                assert!(s.name.starts_with(&format!("{name}|")), "{}", s.name);
                let sub = &s.name[name.len() + 1..];
                assert!(lookup_sub(c, sub.to_uppercase().as_bytes()).is_some());
            }
        }
    }

    /// Back-to-back commands of 0.6 us each add up to their total time, not
    /// to 0 (commandstats' usec).
    #[test]
    fn sub_microsecond_commands_add_up() {
        let t0 = std::time::Instant::now();
        let at = |k: u32| t0 + std::time::Duration::from_nanos(600 * k as u64);
        let total: u64 = (0..1000)
            .map(|k| micros(t0, at(k + 1)) - micros(t0, at(k)))
            .sum();
        assert!((599..=601).contains(&total), "{total}");
    }
}

#[cfg(test)]
mod timeout_tests {
    use super::*;

    /// Each case checked with BLPOP on redis-server 7.0.15.
    #[test]
    fn timeouts_as_redis_reads_them() {
        let now = 1_000_000;
        let ok = |s: &str| timeout_arg(s.as_bytes(), now).map_err(|e| e.to_string());
        let nf = Err("ERR timeout is not a float or out of range".to_string());
        let neg = Err("ERR timeout is negative".to_string());
        assert_eq!(ok("0"), Ok(None));
        assert_eq!(ok("-0"), Ok(None));
        assert_eq!(ok("-0.0001"), Ok(None));
        assert_eq!(ok("0.0001"), Ok(Some(now + 1)));
        assert_eq!(ok("1e-400"), Ok(Some(now + 1)));
        assert_eq!(ok("-1e-400"), Ok(None));
        assert_eq!(ok("1.5"), Ok(Some(now + 1500)));
        assert_eq!(ok(".5"), Ok(Some(now + 500)));
        assert_eq!(ok("5."), Ok(Some(now + 5000)));
        assert_eq!(ok("+1"), Ok(Some(now + 1000)));
        assert_eq!(ok("0.5e1"), Ok(Some(now + 5000)));
        assert_eq!(ok("00001"), Ok(Some(now + 1000)));
        assert_eq!(ok("0x10"), Ok(Some(now + 16000)));
        assert_eq!(ok("0x1p3"), Ok(Some(now + 8000)));
        assert_eq!(ok("0x.8"), Ok(Some(now + 500)));
        assert!(ok("9223372036854").is_ok());
        for bad in [
            "", " 1", "1 ", "abc", "1e", "1_0", "nan", "-nan", "1e5000", "1e-5000", "0x", ".", "e5",
        ] {
            assert_eq!(ok(bad), nf, "{bad:?}");
        }
        for n in [
            "-1",
            "inf",
            "-inf",
            "infinity",
            "1e400",
            "92233720368547758",
            "-1e20",
        ] {
            assert_eq!(ok(n), neg, "{n:?}");
        }
    }
}
