//! The call (Redis's `call()`): runs an admitted command's handler and
//! does its bookkeeping — MONITOR, the command's clock, its own pub/sub
//! messages before its reply, propagation, commandstats and latency,
//! CLIENT REPLY, serving the clients its writes unblocked, the slowlog.

use super::gate::reject;
use super::{flags, Command, Ctx};
use crate::core::error::{CmdResult, Error};
use crate::state::{record_latency, Client, ReplyMode, State};
use bytes::Bytes;
use protocol::ReplyBuf;

/// Runs `cmd` (admitted by the gatekeeper) for `cl`.
pub(super) fn call(
    st: &mut State,
    cl: &mut Client,
    out: &mut ReplyBuf,
    cmd: &'static Command,
    args: &[Bytes],
) {
    // As Redis logs a command once it has run, EXEC comes after the
    // commands it ran; a script runner comes before the commands of its
    // script, though flagged skip_monitor.
    let runner = matches!(
        cmd.name,
        "eval" | "evalsha" | "eval_ro" | "evalsha_ro" | "fcall" | "fcall_ro"
    );
    let monitor = runner || !cmd.has(flags::SKIP_MONITOR | flags::ADMIN);
    if st.monitors > 0 && monitor && cmd.name != "exec" {
        feed_monitors(st, cl, cmd.name, args);
    }
    // One clock read per command: it starts when the previous one ended
    // (the connection sets `last_tick` when it takes the lock).
    let start_us = st.tick_us;
    let now = st.wall_ms();
    let mut mark = out.len();
    out.resp3 = cl.resp3;
    // A RESP2 subscriber's PING answers in the message format.
    let handler = if cmd.name == "ping" && !cl.resp3 && cl.subs.any() {
        subscribed_ping
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
    st.settle();
    st.command_end(prop, args);
    if cmd.has(flags::WRITE)
        && st.repl.master.is_some()
        && !st.cfg.replica_read_only
        && !cl.peer.master
    {
        crate::state::repl::remember_own_expires(st, cl.db, cmd.meta, args);
    }
    cl.woff = st.repl.offset;
    if !st.pubsub.self_out.is_empty() {
        let mine = std::mem::take(&mut st.pubsub.self_out);
        let reply = out.buf.split_off(mark);
        out.buf.extend_from_slice(&mine);
        out.buf.unsplit(reply);
        // Pushes, which CLIENT REPLY OFF does not silence.
        mark += mine.len();
    }
    if st.monitors > 0 && cmd.name == "exec" {
        feed_monitors(st, cl, cmd.name, args);
    }
    if std::mem::take(&mut st.dirty_cas_running) {
        cl.dirty_cas = true;
    }
    st.tick(std::time::Instant::now());
    // Whole microseconds of each clock reading, subtracted, as Redis
    // takes `ustime()` twice: flooring the difference instead counted 0
    // for nearly every sub-microsecond command.
    let dur = st.tick_us.saturating_sub(start_us);
    st.stats.total_commands += 1;
    let stat = st.stats.cmd_mut(cmd.slot);
    stat.calls += 1;
    stat.usec += dur;
    // Not a command that just blocked: it is counted when it is served.
    if st.tun.latency_tracking && cl.blocked.is_none() {
        record_latency(stat, dur);
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
        if !confirms(cmd.name) {
            out.buf.truncate(mark);
        }
        // SKIP covers only the command after CLIENT REPLY SKIP itself.
        cl.reply_mode = match cl.reply_mode {
            ReplyMode::SkipNext => ReplyMode::Skip,
            ReplyMode::Skip => ReplyMode::On,
            m => m,
        };
    }
    // Inside EXEC or a script, waiters are served when the whole block ends.
    if !st.shard.ready_keys.is_empty() && !cl.deny_blocking {
        super::blocking::serve_blocked(st);
        // Events of the commands served come after this command's reply.
        if !st.pubsub.self_out.is_empty() {
            let events = std::mem::take(&mut st.pubsub.self_out);
            out.buf.extend_from_slice(&events);
        }
    }
    st.pubsub.running = outer_running;
    st.pubsub.new_keys = outer_new;
    // A command that blocked is logged once served (see `serve_blocked`).
    if cl.blocked.is_none() {
        super::slowlog::slowlog_if_slow(st, cl, cmd, args, dur);
    }
}

/// Commands whose reply is a (un)subscribe confirmation: a push message,
/// which CLIENT REPLY OFF and SKIP do not silence.
pub fn confirms(name: &str) -> bool {
    matches!(
        name,
        "subscribe" | "unsubscribe" | "psubscribe" | "punsubscribe" | "ssubscribe" | "sunsubscribe"
    )
}

/// PING [message], as a RESP2 subscriber gets it: `["pong", message]`.
pub fn subscribed_ping(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    if a.len() > 2 {
        return Err(Error::Arity("ping".into()));
    }
    c.out.array(2);
    c.out.bulk(b"pong");
    c.out.bulk(a.get(1).map_or(&b""[..], |m| &m[..]));
    Ok(())
}

/// Sends the command to every MONITOR client, formatted as Redis does:
/// `+<sec>.<usec> [<db> <addr>] "arg" "arg"`, a script's commands from
/// `lua`, passwords shown as `(redacted)`.
fn feed_monitors(st: &mut State, cl: &Client, name: &str, args: &[Bytes]) {
    let us = crate::core::clock::now_us();
    let addr = if cl.id == 0 { "lua" } else { &cl.addr };
    let mut line = format!(
        "+{}.{:06} [{} {addr}]",
        us / 1_000_000,
        us % 1_000_000,
        cl.db,
    );
    let secret = super::slowlog::secret_args(name, args);
    for (i, a) in args.iter().enumerate() {
        line.push(' ');
        if secret.contains(&i) {
            line.push_str("\"(redacted)\"");
        } else {
            line.push_str(&protocol::repr(a));
        }
    }
    line.push_str("\r\n");
    for c in st.clients.values_mut().filter(|c| c.monitor) {
        c.pending.extend_from_slice(line.as_bytes());
        c.wake.notify_one();
        st.woken += 1;
    }
}

#[cfg(test)]
mod tests {
    /// Back-to-back commands of 0.6 us each add up to their total time, not
    /// to 0 (commandstats' usec): each tick is floored, not each duration.
    #[test]
    fn sub_microsecond_commands_add_up() {
        use crate::state::micros_since;
        let t0 = std::time::Instant::now();
        let at = |k: u32| t0 + std::time::Duration::from_nanos(600 * k as u64);
        let total: u64 = (0..1000)
            .map(|k| micros_since(t0, at(k + 1)) - micros_since(t0, at(k)))
            .sum();
        assert!((599..=601).contains(&total), "{total}");
    }
}
