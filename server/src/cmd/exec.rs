//! Running one request: the gate, MULTI queuing, the call (Redis's
//! `processCommand` then `call`), and the checks of a reply from a master
//! or the AOF.

use super::table::{flags, get_keys, resolve, Command};
use super::{call, gate};
use crate::state::{Client, State};
use bytes::Bytes;
use protocol::ReplyBuf;

/// Runs one request for client `cl`, writing its reply (or error) to `out`.
pub fn execute(st: &mut State, cl: &mut Client, out: &mut ReplyBuf, args: &[Bytes]) {
    execute_req(st, cl, out, Req::Borrowed(args));
}

/// As `execute`, for a request whose command the caller has looked up
/// already (a script's call, checked before it runs): the table is not
/// searched twice.
pub fn execute_resolved(
    st: &mut State,
    cl: &mut Client,
    out: &mut ReplyBuf,
    cmd: &'static Command,
    args: &[Bytes],
) {
    execute_req(st, cl, out, Req::Resolved(args, cmd));
}

/// As `execute`, for a request the caller gives up: MULTI queues it
/// without copying (the arguments are left empty then).
pub fn execute_owned(st: &mut State, cl: &mut Client, out: &mut ReplyBuf, args: &mut Vec<Bytes>) {
    execute_req(st, cl, out, Req::Owned(args));
}

enum Req<'a> {
    Borrowed(&'a [Bytes]),
    Resolved(&'a [Bytes], &'static Command),
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
    // ASKING lasts one command (or one transaction).
    if cl.asking && cl.multi.is_none() && cmd.is_none_or(|c| c.name != "asking") {
        cl.asking = false;
    }
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

/// An error reply's first line without its `-` (given) and `ERR ` prefix,
/// as Redis's `== CRITICAL ==` lines quote it.
fn error_message(line: &[u8]) -> String {
    let end = line.iter().position(|&b| b == b'\r').unwrap_or(line.len());
    let msg = String::from_utf8_lossy(&line[..end]);
    msg.strip_prefix("ERR ").unwrap_or(&msg).to_string()
}

/// An error reply meant for a replica, which never reads replies: logged
/// as Redis does, and counted in `unexpected_error_replies`.
fn error_to_replica(st: &mut State, reply: &[u8], name: &str) {
    let msg = error_message(&reply[1..]);
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
    let msg = error_message(line);
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
    let (args, known): (&[Bytes], _) = match &req {
        Req::Borrowed(a) => (a, None),
        Req::Resolved(a, c) => (a, Some(*c)),
        Req::Owned(v) => (v, None),
    };
    let cmd = gate::admit(st, cl, out, args, known);
    // Invalidations the checks caused (table limit, evictions) come
    // before the reply, as in Redis.
    if tracked {
        st.tracking_flush(cl, &mut out.buf);
    }
    let cmd = cmd?;
    if cl.multi.is_some() && !gate::runs_in_multi(cmd.name) {
        cl.multi_traits |= gate::traits(st, cmd, args);
    }
    if let Some(queue) = &mut cl.multi {
        if !gate::runs_in_multi(cmd.name) {
            cl.last_cmd = cmd.name;
            queue.push(match &mut req {
                Req::Borrowed(a) | Req::Resolved(a, _) => a.to_vec(),
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
