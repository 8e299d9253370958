//! A connection's batch of pipelined requests, run under the state lock
//! with what Redis checks between two of them: CLIENT PAUSE, large output
//! held as a list, the output-buffer limit, client eviction, a request that
//! blocks, a close asked for.

use crate::core::spill::Spill;
use crate::state::{Client, State};
use bytes::Bytes;
use protocol::ReplyBuf;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Output a batch adds between two client eviction checks: Redis's reply
/// block.
const EVICT_STEP: usize = 16 * 1024;

/// Output past this much, in a batch or left unwritten, is held in the
/// client's `spill`.
pub const SPILL_AT: usize = 64 * 1024;

/// How a batch ended.
#[derive(Default)]
pub struct Ran {
    /// CLIENT PAUSE holds back the rest of the batch.
    pub paused: bool,
    /// The deadline of the request that blocked (`Some(None)`: none).
    pub blocked: Option<Option<i64>>,
    /// Client eviction took this client for its own output.
    pub self_evicted: bool,
    /// Output moved to `spill`.
    pub spilled: usize,
}

/// Runs the requests of `batch` in order, removing those run, until one
/// blocks, a pause holds the next back, or the client is to end.
/// `out_start` is the room a connection's output buffer is given back.
#[inline(always)]
pub fn run(
    st: &mut State,
    cl: &mut Client,
    out: &mut ReplyBuf,
    batch: &mut Vec<Vec<Bytes>>,
    spill: &Spill,
    unsent: &AtomicUsize,
    out_start: usize,
) -> Ran {
    let mut ran = Ran::default();
    let mut done = 0;
    out.cap = crate::state::pubsub::hard_limit(cl, &st.tun.obuf_limits);
    let weigh = st.cfg.maxmemory_clients.bytes(st.cfg.maxmemory) > 0;
    let mut weighed = out.len() + spill.len();
    for args in batch.iter_mut() {
        if (st.pause.is_some() || st.loading.is_some())
            && super::pause::must_pause(st, cl, args, crate::core::clock::now_ms())
        {
            ran.paused = true;
            break;
        }
        crate::cmd::execute_owned(st, cl, out, args);
        done += 1;
        // Large output is held as a list (`spill`) of copies
        // sized to it: the buffer, grown by doubling, may be
        // twice its size, and is reused for the next replies.
        if out.len() >= SPILL_AT {
            ran.spilled += out.len();
            spill.push(Bytes::copy_from_slice(&out.buf));
            out.buf.clear();
        }
        // Past its output limit the client gets nothing more and
        // the rest of its pipeline is not run, as in Redis.
        if crate::state::pubsub::close_if_over_limit(cl, &st.tun.obuf_limits, out.len()) {
            out.buf.clear();
            spill.clear();
            cl.close_after_reply = true;
            done = batch.len();
            break;
        }
        // Client eviction weighs the output as it grows, as
        // Redis does before each command: the clients go
        // before the next command evicts keys for them.
        if weigh && out.len() + spill.len() >= weighed + EVICT_STEP {
            weighed = out.len() + spill.len();
            unsent.store(out.len(), Ordering::Relaxed);
            let gone = st.evict_clients_with(Some(cl));
            unsent.store(0, Ordering::Relaxed);
            if gone {
                ran.self_evicted = true;
                done = batch.len();
                break;
            }
        }
        if let Some(b) = &cl.blocked {
            ran.blocked = Some(b.deadline);
            break;
        }
        if cl.close_after_reply || st.shutdown.is_some() {
            done = batch.len();
            break;
        }
    }
    batch.drain(..done);
    // The buffer grown for the ran.spilled replies is not held
    // while the socket takes them.
    if ran.spilled > 0 && out.buf.capacity() > out_start {
        ran.spilled += out.len();
        spill.push(Bytes::copy_from_slice(&out.buf));
        out.buf = ReplyBuf::new(false).buf;
    }
    cl.paused = ran.paused;
    ran
}
