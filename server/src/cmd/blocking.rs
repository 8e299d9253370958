//! Blocking commands: their timeout argument, and serving the clients
//! waiting on a key when a write gives it data (see docs/ARCHITECTURE.md):
//! their commands run again, or end with their timeout reply. Who waits
//! on what is `crate::state::blocked`'s.

use super::{resolve, Ctx};
use crate::state::{BlockKind, Client, State};
use protocol::ReplyBuf;
use storage::Value;

/// Serves clients blocked on keys that became ready, in the order they
/// blocked, while the keys have data. A served command can make more
/// keys ready (BLMOVE pushes), so this loops until none are left.
pub fn serve_blocked(st: &mut State) {
    while !st.shard.ready_keys.is_empty() {
        for (db, key) in std::mem::take(&mut st.shard.ready_keys) {
            let Some(queue) = st.shard.blocking.get(&(db, key.clone())) else {
                continue;
            };
            for id in queue.clone() {
                let has_data = match st.shard.dbs[db].get(&key) {
                    Some(Value::List(_)) => Some(BlockKind::List),
                    Some(Value::ZSet(_)) => Some(BlockKind::ZSet),
                    Some(Value::Stream(_)) => Some(BlockKind::Stream),
                    _ => None,
                };
                let Some(mut cl) = st.clients.remove(&id) else {
                    continue;
                };
                if cl.killed {
                    // Closing: its element stays for the next waiter.
                    st.clients.insert(id, cl);
                    continue;
                }
                if let Some(e) = st.stream_wait_gone(&cl, db, &key) {
                    let b = cl.blocked.take().expect("blocked");
                    st.unregister_blocked(id, &b);
                    let mut out = ReplyBuf::new(cl.resp3);
                    out.error(e);
                    st.count_error(e);
                    if let Some(c) = super::table().get("xreadgroup") {
                        st.stats.cmd_mut(c.slot).failed += 1;
                    }
                    cl.pending.extend_from_slice(&out.buf);
                    cl.wake.notify_one();
                    st.woken += 1;
                    st.clients.insert(id, cl);
                    continue;
                }
                let Some(b) = cl.blocked.take_if(|b| Some(b.kind) == has_data) else {
                    st.clients.insert(id, cl);
                    continue;
                };
                let mut out = ReplyBuf::new(cl.resp3);
                let cmd = resolve(&b.args).expect("blocked command is in the table");
                let now = crate::core::clock::now_ms();
                // The handler runs again, so it propagates what it
                // pops now (LPOP for BLPOP, …).
                let prop = st.command_start(cl.db);
                let tracking = st.tracking_serve(&cl);
                let start = std::time::Instant::now();
                let mut ctx = Ctx {
                    st,
                    cl: &mut cl,
                    out: &mut out,
                    now,
                };
                let res = (cmd.handler)(&mut ctx, &b.args);
                st.command_end(prop, &b.args);
                let failed = res.is_err();
                if let Err(e) = res {
                    out.error(&e.to_string());
                }
                if std::mem::take(&mut st.dirty_cas_running) {
                    cl.dirty_cas = true;
                }
                if let Some(again) = &mut cl.blocked {
                    // Still nothing for it: it keeps its place in the queues.
                    again.deadline = b.deadline;
                } else {
                    let dur = start.elapsed().as_micros() as u64;
                    st.unblocked_stats(cmd.slot, dur, failed);
                    super::slowlog::slowlog_if_slow(st, &cl, cmd, &b.args, dur);
                    st.unregister_blocked(id, &b);
                    cl.pending.extend_from_slice(&out.buf);
                    cl.wake.notify_one();
                    st.woken += 1;
                }
                st.tracking_served(&mut cl, tracking);
                st.clients.insert(id, cl);
            }
        }
    }
}

/// CLIENT UNBLOCK: ends client `id`'s wait as if it timed out, or with
/// an `-UNBLOCKED` error. False when it is not blocked.
pub fn unblock_client(st: &mut State, id: u64, error: bool) -> bool {
    let Some(mut cl) = st.clients.remove(&id) else {
        return false;
    };
    let done = cl.blocked.is_some() && !cl.killed;
    if done {
        let mut out = ReplyBuf::new(cl.resp3);
        if error {
            let b = cl.blocked.take().expect("blocked");
            st.unregister_blocked(id, &b);
            const UNBLOCKED: &str = "UNBLOCKED client unblocked via CLIENT UNBLOCK";
            out.error(UNBLOCKED);
            st.count_error(UNBLOCKED);
            if let Ok(cmd) = resolve(&b.args) {
                st.unblocked_stats(cmd.slot, 0, true);
            }
        } else {
            unblock_timed_out(st, &mut cl, &mut out);
        }
        cl.pending.extend_from_slice(&out.buf);
        cl.wake.notify_one();
        st.woken += 1;
    }
    st.clients.insert(id, cl);
    done
}

/// Ends a client's wait with its timeout reply (a null array; WAIT's
/// is the number of replicas that acknowledged its writes).
pub fn unblock_timed_out(st: &mut State, cl: &mut Client, out: &mut ReplyBuf) {
    if let Some(b) = cl.blocked.take() {
        st.unregister_blocked(cl.id, &b);
        if let Ok(cmd) = resolve(&b.args) {
            st.unblocked_stats(cmd.slot, 0, false);
            super::slowlog::slowlog_if_slow(st, cl, cmd, &b.args, 0);
        }
        out.resp3 = cl.resp3;
        match b.kind {
            BlockKind::Wait => out.int(st.repl.end_wait(cl.id)),
            _ => out.null_array(),
        }
    }
}
