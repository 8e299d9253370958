//! The dispatcher and the command families.
//!
//! A request goes through three steps, as in Redis: [`gate`] (the
//! gatekeeper: lookup, arity, authentication, OOM, MISCONF, subscribed
//! mode, in Redis's order), then MULTI queuing, then [`call`] (the handler
//! and its bookkeeping: MONITOR, clock, propagation, statistics, CLIENT
//! REPLY, blocked clients, slowlog). What a command is comes from
//! [`table`]: Redis 7.0.15's own metadata joined with the handlers each
//! family binds by name.
//!
//! Shared machinery for the families: [`keyspace`] (typed key access with
//! lazy expiry, and `State::changed`), [`blocking`] (waiting clients),
//! [`scan`] (the SCAN family's cursor and options), [`help`] (HELP replies).
//! [`perm`]: the ACL checks the gate, scripts and AUTH run. [`busy`]: what
//! the connections run while a script is busy. [`replay`]: an AOF's
//! commands through the dispatcher, at start-up and for DEBUG LOADAOF.

pub mod acl;
pub mod aof;
pub mod bitmap;
pub mod blocking;
pub mod busy;
mod call;
pub mod client;
pub mod cluster;
pub mod command;
pub mod config;
pub mod connection;
pub mod debug;
pub mod families;
mod gate;
pub use gate::LOADING;
pub mod hash;
pub mod help;
pub mod hll;
pub mod info;
pub mod keys;
pub mod list;
pub mod lolwut;
pub mod memory;
pub mod migrate;
pub mod module;
pub mod pause;
mod perm;
pub mod persist;
pub mod pubsub;
pub mod replay;
pub mod replication;
pub mod scan;
pub mod scripting;
pub mod server;
pub mod set;
pub mod sort;
pub mod stream;
pub mod string;
mod table;
pub mod transaction;
pub mod zset;

pub use blocking::timeout_arg;
pub use table::*;
// The families test their keywords with it; core's key rules need it too.
pub use crate::core::command::is;

use crate::core::error::Error;
use crate::state::{BlockKind, Blocked, Client, State};
use bytes::Bytes;
use protocol::ReplyBuf;
use storage::Db;

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

    /// Propagates what a command left of `key`'s expiry, as Redis 7.0 does:
    /// the absolute time (`PEXPIREAT`, followed by `extra` options),
    /// `PERSIST` when it has none, `DEL` when the key is gone.
    pub fn propagate_expiry(&mut self, key: &Bytes, extra: &[Bytes]) {
        if !self.propagating() {
            return;
        }
        let d = &self.st.dbs[self.cl.db];
        let op = if !d.contains(key) {
            vec![Bytes::from_static(b"DEL"), key.clone()]
        } else if let Some(t) = d.expire_at(key) {
            let mut op = vec![
                Bytes::from_static(b"PEXPIREAT"),
                key.clone(),
                crate::core::propagate::int(t),
            ];
            op.extend_from_slice(extra);
            op
        } else {
            vec![Bytes::from_static(b"PERSIST"), key.clone()]
        };
        self.propagate_as(op);
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

fn execute_req(st: &mut State, cl: &mut Client, out: &mut ReplyBuf, req: Req) {
    // Client-side caching needs the client that executes (a script's is
    // 0) and, for a command no other command runs, the current client.
    let outer = std::mem::replace(&mut st.tracking.executing, cl.id);
    let top = outer == 0 && cl.id != 0;
    let tracked = st.tracking_enter(cl, top);
    let (replica, before) = (cl.peer.replica && !cl.monitor, out.buf.len());
    let cmd = dispatch(st, cl, out, req, tracked);
    if replica && out.buf.len() > before {
        // A reply would land in the replica's stream. A refused command
        // is named too (`last_cmd`, as the gate left it: NULL if unknown).
        let name = match cmd.map_or(cl.last_cmd, |c| c.name) {
            "NULL" => "<unknown>",
            name => name,
        };
        tracing::warn!(
            "Replica generated a reply to command '{name}', disconnecting it: {}",
            cl.line(crate::core::clock::now_ms(), None)
        );
        if out.buf[before] == b'-' {
            error_to_replica(st, &out.buf[before..], name);
        }
        out.buf.truncate(before);
        cl.close_after_reply = true;
    }
    st.tracking.executing = outer;
    if top && (tracked || st.tracking.clients > 0) {
        st.tracking_leave(cl, &mut out.buf, cmd.map(|c| c.name));
    }
}

/// An error reply meant for a replica, which never reads replies: logged
/// as Redis does, and counted in `unexpected_error_replies`.
fn error_to_replica(st: &mut State, reply: &[u8], name: &str) {
    let line = &reply[1..];
    let end = line.iter().position(|&b| b == b'\r').unwrap_or(line.len());
    let msg = String::from_utf8_lossy(&line[..end]);
    let msg = msg.strip_prefix("ERR ").unwrap_or(&msg);
    tracing::warn!(
        "== CRITICAL == This master is sending an error to its replica: '{msg}' after processing the command '{name}'"
    );
    st.stats.unexpected_error_replies += 1;
}

/// A command from the master (`aof`: from the AOF being loaded) that
/// answered `reply`, checked for an error: a server that diverges
/// from its source logs it as Redis does, counts it in
/// `unexpected_error_replies`, and under `propagation-error-behavior`
/// panic (panic-on-replicas: from a master only) stops, unless it is a
/// writable replica.
pub fn check_source_reply(st: &mut State, reply: &[u8], args: &[Bytes], aof: bool) {
    let Some(line) = reply.strip_prefix(b"-") else {
        return;
    };
    let end = line.iter().position(|&b| b == b'\r').unwrap_or(line.len());
    let msg = String::from_utf8_lossy(&line[..end]);
    let msg = msg.strip_prefix("ERR ").unwrap_or(&msg);
    let name = resolve(args).map_or("<unknown>", |c| c.name);
    let (from, to) = if aof {
        ("server", "AOF-loading-client")
    } else {
        ("replica", "master")
    };
    tracing::warn!(
        "== CRITICAL == This {from} is sending an error to its {to}: '{msg}' after processing the command '{name}'"
    );
    let tail = st.repl.backlog_tail(256);
    if !aof && !tail.is_empty() {
        tracing::warn!("Latest backlog is: '{}'", protocol::repr(&tail));
    }
    st.stats.unexpected_error_replies += 1;
    // A writable replica may diverge from its master by design.
    let behavior = st.cfg.propagation_error_behavior.as_str();
    let expected = !aof && !st.cfg.replica_read_only;
    if !expected && (behavior == "panic" || (behavior == "panic-on-replicas" && !aof)) {
        panic!("This {from} panicked sending an error to its {to} after processing the command '{name}'");
    }
}

/// Admits, then queues or calls the request; the command if it was found
/// and admitted.
fn dispatch(
    st: &mut State,
    cl: &mut Client,
    out: &mut ReplyBuf,
    mut req: Req,
    tracked: bool,
) -> Option<&'static Command> {
    let args: &[Bytes] = match &req {
        Req::Borrowed(a) => a,
        Req::Owned(v) => v,
    };
    let cmd = gate::admit(st, cl, out, args);
    // Invalidations the checks caused (table limit, evictions) come
    // before the reply, as in Redis.
    if tracked {
        st.tracking_flush(cl, &mut out.buf);
    }
    let cmd = cmd?;
    if let Some(queue) = &mut cl.multi {
        if !transaction::runs_in_multi(cmd.name) {
            cl.last_cmd = cmd.name;
            queue.push(match &mut req {
                Req::Borrowed(a) => a.to_vec(),
                Req::Owned(v) => std::mem::take(*v),
            });
            out.simple("QUEUED");
            return Some(cmd);
        }
    }
    call::call(st, cl, out, cmd, args);
    if st.tracking.clients > 0 {
        remember_reads(st, cl, cmd, args);
    }
    Some(cmd)
}

/// Client-side caching: the keys of a read command are remembered for its
/// client. A script's reads make its caller remember the script's keys;
/// the read-only script commands themselves remember nothing.
fn remember_reads(st: &mut State, cl: &Client, cmd: &Command, args: &[Bytes]) {
    let read =
        cmd.has(flags::READONLY) && !matches!(cmd.name, "eval_ro" | "evalsha_ro" | "fcall_ro");
    if cl.id == 0 {
        if read {
            st.tracking.script_read();
        }
        return;
    }
    if (st.tracking.take_script_read() | read) && cl.tracking.remembers() {
        if let Ok(keys) = get_keys(args) {
            st.tracking_remember(cl, keys.iter().map(|&(i, _)| &args[i]));
        }
    }
}

/// Parses an integer argument (`ERR value is not an integer or out of range`).
pub fn int_arg(a: &[u8]) -> Result<i64, Error> {
    storage::num::parse_i64(a).ok_or(crate::core::error::NOT_INTEGER)
}

/// Parses the count of HRANDFIELD / SRANDMEMBER: any i64 but i64::MIN.
pub fn rand_count(a: &[u8]) -> Result<i64, Error> {
    let n = int_arg(a)?;
    if n == i64::MIN {
        return Err(Error::other(
            "ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807",
        ));
    }
    Ok(n)
}

/// Redis's index normalization for GETRANGE (and BITCOUNT/BITPOS): the
/// inclusive range `start..=end` in a string of `len`, or `None` if empty.
pub fn norm_range(start: i64, end: i64, len: i64) -> Option<(i64, i64)> {
    if start < 0 && end < 0 && start > end {
        return None;
    }
    clamp_range(start, end, len)
}

/// `norm_range` without its first rule (BITPOS has none): negative indexes
/// count from the end, then both are clamped into the string.
pub fn clamp_range(start: i64, end: i64, len: i64) -> Option<(i64, i64)> {
    let mut s = if start < 0 { len + start } else { start };
    let mut e = if end < 0 { len + end } else { end };
    s = s.max(0);
    e = e.max(0);
    if e >= len {
        e = len - 1;
    }
    (s <= e && len > 0).then_some((s, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_as_redis() {
        assert_eq!(norm_range(0, -100, 5), Some((0, 0)));
        assert_eq!(norm_range(-100, -200, 5), None);
        assert_eq!(norm_range(-3, -1, 5), Some((2, 4)));
        assert_eq!(norm_range(0, i64::MAX, 5), Some((0, 4)));
        assert_eq!(norm_range(i64::MIN, 2, 5), Some((0, 2)));
        assert_eq!(norm_range(0, 0, 0), None);
    }
}
