//! The gatekeeper (Redis's `processCommand`): the checks every request
//! passes before it runs or is queued, in Redis's order — lookup, arity,
//! authentication, no_multi inside MULTI, ACL, the cluster's redirections
//! (`redirect`), OOM, MISCONF, min-replicas,
//! subscribed mode, loading. A refused request is
//! answered here, its error counted; it marks an open transaction, or
//! discards it when the refused command is EXEC.
//!
//! The rules the checks share with scripts and CLIENT PAUSE live here too:
//! which commands a RESP2 subscriber may run, the flags a script or
//! function declares, the commands that may replicate without writing.

use super::{flags, resolve, Command};
use crate::core::error::Error;
use crate::state::script_flags::runner_flags;
use crate::state::{Client, State};
use bytes::Bytes;
use protocol::ReplyBuf;

/// The command to run (or queue) for `args`, or `None` once the refusal
/// has been answered. `known`: the command `args` name, when the caller
/// has looked it up already. Inlined, as it was before `known`: every
/// request goes through it, and the call cost PING 1%.
#[inline(always)]
pub(super) fn admit(
    st: &mut State,
    cl: &mut Client,
    out: &mut ReplyBuf,
    args: &[Bytes],
    known: Option<&'static Command>,
) -> Option<&'static Command> {
    match check(st, cl, args, known) {
        Ok(c) => Some(c),
        Err((cmd, e)) => {
            // CLIENT LIST's `cmd`: the command looked up, NULL if unknown.
            cl.last_cmd = cmd.map_or("NULL", |c| c.name);
            if let Some(cmd) = cmd {
                st.stats.cmd_mut(cmd.slot).rejected += 1;
            }
            let e = match cmd {
                // A rejected EXEC discards the transaction, saying why (a
                // cluster redirection comes as it is, as in Redis).
                Some(c) if c.name == "exec" => {
                    cl.multi = None;
                    cl.multi_error = false;
                    st.unwatch_all(cl);
                    if let Error::Cluster(_) = e {
                        e
                    } else {
                        let why = e.to_string();
                        let why = why.strip_prefix("ERR ").unwrap_or(&why).to_string();
                        Error::other(format!("EXECABORT Transaction discarded because of: {why}"))
                    }
                }
                _ => {
                    if cl.multi.is_some() {
                        cl.multi_error = true;
                    }
                    e
                }
            };
            reject(st, out, &e);
            None
        }
    }
}

/// The checks, in Redis's order. The error comes with the command when it
/// was found.
#[inline(always)]
fn check(
    st: &mut State,
    cl: &mut Client,
    args: &[Bytes],
    known: Option<&'static Command>,
) -> Result<&'static Command, (Option<&'static Command>, Error)> {
    let cmd = match known {
        Some(c) => c,
        None => resolve(args).map_err(|e| (None, e))?,
    };
    if !cmd.arity_ok(args.len()) {
        return Err((Some(cmd), Error::Arity(cmd.name.into())));
    }
    if !cl.authenticated && !cmd.has(flags::NO_AUTH) {
        if st.acl.auth_required() {
            return Err((Some(cmd), Error::NoAuth));
        }
        // The password was removed since this client connected.
        cl.authenticated = true;
    }
    if cl.multi.is_some() && cmd.has(flags::NO_MULTI) {
        return Err((
            Some(cmd),
            Error::other("ERR Command not allowed inside a transaction"),
        ));
    }
    // A script's commands are checked by the script (`cmd::scripting`);
    // EXEC's, again when they run.
    if cl.id != 0 {
        if let Err(d) = super::perm::check(st, cl, cmd, args) {
            let in_exec = cl.deny_blocking;
            return Err((
                Some(cmd),
                super::perm::refusal(st, cl, cmd, args, d, in_exec),
            ));
        }
    }
    if super::redirect::applies(st, cl, cmd) {
        let writes = has_trait(st, cl, cmd, args, traits::MAY_WRITE);
        super::redirect::check(st, cl, cmd, args, writes).map_err(|e| (Some(cmd), e))?;
    }
    if st.memory.maxmemory > 0 && oom_rejects(st, cl, cmd) {
        return Err((Some(cmd), Error::other(OOM_ERR)));
    }
    if let Some(e) = misconf(st, cl, cmd, args) {
        return Err((Some(cmd), Error::other(e)));
    }
    // A script's own commands are checked by the script (`cmd::scripting`).
    if cl.id != 0 && too_few_replicas(st) && may_write(st, cl, cmd, args) {
        return Err((Some(cmd), Error::other(NOREPLICAS)));
    }
    // A read-only replica takes writes from its master only. What EXEC
    // runs was admitted with the EXEC (REPLICAOF inside it changes
    // nothing for the rest).
    if st.repl.master.is_some()
        && st.cfg.replica_read_only
        && !cl.peer.master
        && !cl.deny_blocking
        && may_write(st, cl, cmd, args)
    {
        return Err((
            Some(cmd),
            Error::other("READONLY You can't write against a read only replica."),
        ));
    }
    // Without its master, a replica that must not serve stale data runs
    // only the commands flagged `stale` (EXEC: if all it queued are).
    if st.serving_stale_refused() && denies_stale(st, cl, cmd, args) {
        return Err((Some(cmd), Error::other(MASTERDOWN)));
    }
    if !cl.resp3 && cl.subs.any() && !allowed_in_subscribed_mode(cmd.name) {
        return Err((Some(cmd), subscribed_mode_error(cmd.name)));
    }
    // The AOF's own commands (a client without a connection) run, of course.
    if let Some(l) = &st.loading {
        let refused = if l.is_async {
            cmd.has(flags::NO_ASYNC_LOADING)
        } else {
            !cmd.has(flags::LOADING)
        };
        if refused && cl.fd >= 0 {
            return Err((Some(cmd), Error::other(LOADING)));
        }
    }
    // A replica's link carries its ACKs; the keyspace is not its to use.
    if cl.peer.replica && cmd.has(flags::WRITE | flags::READONLY) {
        return Err((
            Some(cmd),
            Error::other("ERR Replica can't interact with the keyspace"),
        ));
    }
    Ok(cmd)
}

const OOM_ERR: &str = "OOM command not allowed when used memory > 'maxmemory'.";
pub const LOADING: &str = "LOADING Redis is loading the dataset in memory";
/// `min-replicas-to-write` refuses writes now: a master with fewer good
/// replicas than it asks for.
pub fn too_few_replicas(st: &State) -> bool {
    st.cfg.min_replicas_to_write > 0
        && st.cfg.min_replicas_max_lag > 0
        && st.repl.master.is_none()
        && st.repl.good_replicas(
            crate::core::clock::now_ms() / 1000,
            st.cfg.min_replicas_max_lag,
        ) < st.cfg.min_replicas_to_write
}

pub const NOREPLICAS: &str = "NOREPLICAS Not enough good replicas to write.";
const MASTERDOWN: &str =
    "MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'.";

/// What the gate asks of a command beyond its flags, decided once per
/// command; for EXEC, of every command it queued (`Client::multi_traits`,
/// accumulated as they were queued, as Redis accumulates `cmd_flags`).
pub mod traits {
    /// A write command (MISCONF refuses it).
    pub const WRITES: u8 = 1;
    /// A write, or a script or function not declared `no-writes`
    /// (min-replicas and a read-only replica refuse it).
    pub const MAY_WRITE: u8 = 2;
    /// May grow memory (refused over maxmemory).
    pub const DENYOOM: u8 = 4;
    /// Not allowed on a stale replica.
    pub const DENIES_STALE: u8 = 8;
    /// Held back by CLIENT PAUSE WRITE: a write or may-replicate command,
    /// a script or function not declared `no-writes` (one not known yet
    /// counts as writing).
    pub const PAUSE_WRITE: u8 = 16;
}

/// The traits of `cmd` run with `args`. What a script or function
/// declares (read once) replaces some of its command's flags: only
/// `allow-stale` runs stale, `no-writes` (or no shebang) does not count as
/// a write, and one not known yet is held back by CLIENT PAUSE WRITE.
pub fn traits(st: &State, cmd: &Command, args: &[Bytes]) -> u8 {
    use scripting::flags::{ALLOW_STALE, EVAL_COMPAT, NO_WRITES};
    let declared = runner_flags(st, cmd, args);
    let may_write_script = matches!(cmd.name, "eval" | "evalsha" | "fcall");
    let mut t = 0;
    if cmd.has(flags::WRITE) {
        t |= traits::WRITES | traits::MAY_WRITE | traits::PAUSE_WRITE;
    }
    if cmd.has(flags::DENYOOM) {
        t |= traits::DENYOOM;
    }
    if crate::core::command::may_replicate(cmd.name) {
        t |= traits::PAUSE_WRITE;
    }
    if may_write_script && declared.is_some_and(|f| f & (EVAL_COMPAT | NO_WRITES) == 0) {
        t |= traits::MAY_WRITE;
    }
    if may_write_script && declared.is_none_or(|f| f & NO_WRITES == 0) {
        t |= traits::PAUSE_WRITE;
    }
    let serves_stale = match declared {
        Some(f) => f & ALLOW_STALE != 0,
        None => cmd.has(flags::STALE),
    };
    if !serves_stale {
        t |= traits::DENIES_STALE;
    }
    t
}

/// Whether `cmd` (or, for EXEC, a command it queued) has trait `t`.
pub fn has_trait(st: &State, cl: &Client, cmd: &Command, args: &[Bytes], t: u8) -> bool {
    traits(st, cmd, args) & t != 0
        || cmd.name == "exec" && cl.multi.is_some() && cl.multi_traits & t != 0
}

/// Whether `cmd` is refused on a stale replica: not flagged `stale`, or an
/// EXEC that queued such a command.
fn denies_stale(st: &State, cl: &Client, cmd: &Command, args: &[Bytes]) -> bool {
    has_trait(st, cl, cmd, args, traits::DENIES_STALE)
}

/// Commands a RESP2 client may run while subscribed.
pub fn allowed_in_subscribed_mode(name: &str) -> bool {
    matches!(
        name,
        "subscribe"
            | "unsubscribe"
            | "psubscribe"
            | "punsubscribe"
            | "ssubscribe"
            | "sunsubscribe"
            | "ping"
            | "quit"
            | "reset"
    )
}

/// The error for any other command there.
pub fn subscribed_mode_error(name: &str) -> Error {
    Error::other(format!(
        "ERR Can't execute '{name}': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context"
    ))
}

/// Evicts as needed before a command (maxmemory set); true if the command
/// must be refused: over the limit with nothing left to evict, and the
/// command may grow memory. In MULTI every command but EXEC/DISCARD/QUIT/
/// RESET counts, since queuing itself uses memory; EXEC counts if a
/// queued command does. Commands run by EXEC are not checked again, nor
/// a script's (its flags decide: `cmd::scripting`).
fn oom_rejects(st: &mut State, cl: &Client, cmd: &Command) -> bool {
    if cl.deny_blocking {
        return false;
    }
    let res = st.perform_evictions();
    st.peak_memory = st.peak_memory.max(crate::state::evict::used_memory());
    if res != crate::state::evict::Evict::Fail {
        return false;
    }
    if cmd.has(flags::DENYOOM) {
        return true;
    }
    match (&cl.multi, cmd.name) {
        (Some(_), "exec") => cl.multi_traits & traits::DENYOOM != 0,
        (Some(_), "discard" | "quit" | "reset") => false,
        (Some(_), _) => true,
        (None, _) => false,
    }
}

/// The MISCONF error `cmd` gets now: a write (or an EXEC that queued one)
/// or PING (as Redis) while the disk cannot take writes. What the master
/// sends a replica is not refused, which would make the replica diverge:
/// the replica crashes, unless `replica-ignore-disk-write-errors` lets it
/// apply the write unpersisted.
fn misconf(st: &State, cl: &Client, cmd: &Command, args: &[Bytes]) -> Option<String> {
    let e = crate::state::persist::writes_denied(st)?;
    if !(has_trait(st, cl, cmd, args, traits::WRITES) || cmd.name == "ping") {
        return None;
    }
    if !cl.peer.master {
        return Some(e);
    }
    if cmd.name != "ping" && !st.cfg.replica_ignore_disk_write_errors {
        panic!("Replica was unable to write command to disk.");
    }
    tracing::warn!("Replica is applying a command even though it is unable to write to disk.");
    None
}

/// Whether `cmd` may write: a write command, a script or function not
/// declared `no-writes`, or an EXEC whose queue holds one of them.
fn may_write(st: &State, cl: &Client, cmd: &Command, args: &[Bytes]) -> bool {
    has_trait(st, cl, cmd, args, traits::MAY_WRITE)
}

/// Replies with the error, counted in the error stats unless it was where
/// it arose.
pub(super) fn reject(st: &mut State, out: &mut ReplyBuf, e: &Error) {
    let msg = e.to_string();
    out.error(&msg);
    if e.counts() {
        st.count_error(&msg);
    }
}

/// Commands that run at once even inside MULTI.
pub fn runs_in_multi(name: &str) -> bool {
    matches!(
        name,
        "exec" | "discard" | "multi" | "watch" | "quit" | "reset"
    )
}
