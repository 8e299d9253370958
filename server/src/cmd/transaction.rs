//! Transactions: MULTI EXEC DISCARD WATCH UNWATCH.
//!
//! While a client is in MULTI the dispatcher queues its commands (after the
//! lookup, arity and auth checks, whose failures mark the transaction so
//! EXEC aborts). EXEC runs the queue through the same dispatcher under the
//! state lock, so no other client's command interleaves; blocking commands
//! inside it answer as on timeout, and clients woken by its writes are
//! served after it ends.
//!
//! WATCH registers (db, key) → client ids in `State::watched` (the table
//! is `crate::state::watch`'s); any change to such a key (`State::changed`,
//! expiry, flushes, SWAPDB) marks the watchers dirty and their EXEC
//! replies with a null array.

use super::{execute, Ctx, Handler};
use crate::core::error::{CmdResult, Error};
use bytes::Bytes;

pub static HANDLERS: &[(&str, Handler)] = &[
    ("multi", multi),
    ("exec", exec),
    ("discard", discard),
    ("watch", watch),
    ("unwatch", unwatch),
];

/// MULTI
fn multi(c: &mut Ctx, _: &[Bytes]) -> CmdResult {
    if c.cl.multi.is_some() {
        return Err(Error::other("ERR MULTI calls can not be nested"));
    }
    c.cl.multi = Some(Vec::new());
    c.cl.multi_traits = 0;
    c.out.ok();
    Ok(())
}

/// EXEC
fn exec(c: &mut Ctx, _: &[Bytes]) -> CmdResult {
    // What the queued commands propagate stands for it.
    c.no_propagate();
    let Some(queue) = c.cl.multi.take() else {
        return Err(Error::other("ERR EXEC without MULTI"));
    };
    let aborted = std::mem::take(&mut c.cl.multi_error);
    // A watched key past its time counts as changed, as in Redis, whether
    // or not an expiry cycle has deleted it yet.
    let dirty = c.cl.dirty_cas
        || (c.cl.watched.iter()).any(|(db, k)| c.st.shard.dbs[*db].is_expired(k, c.now));
    c.st.unwatch_all(c.cl);
    if aborted {
        return Err(Error::other(
            "EXECABORT Transaction discarded because of previous errors.",
        ));
    }
    if dirty {
        c.out.null_array();
        return Ok(());
    }
    c.out.array(queue.len());
    c.cl.deny_blocking = true;
    for args in &queue {
        execute(c.st, c.cl, c.out, args);
    }
    c.cl.deny_blocking = false;
    Ok(())
}

/// DISCARD
fn discard(c: &mut Ctx, _: &[Bytes]) -> CmdResult {
    if c.cl.multi.take().is_none() {
        return Err(Error::other("ERR DISCARD without MULTI"));
    }
    c.cl.multi_error = false;
    c.st.unwatch_all(c.cl);
    c.out.ok();
    Ok(())
}

/// WATCH key [key ...]
fn watch(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    if c.cl.multi.is_some() {
        return Err(Error::other("ERR WATCH inside MULTI is not allowed"));
    }
    let db = c.cl.db;
    for key in &a[1..] {
        // A key already past its time is gone before the watch starts.
        c.st.expire_if_needed(db, key, c.now);
        c.st.watch(c.cl, db, key);
    }
    c.out.ok();
    Ok(())
}

/// UNWATCH
fn unwatch(c: &mut Ctx, _: &[Bytes]) -> CmdResult {
    c.st.unwatch_all(c.cl);
    c.out.ok();
    Ok(())
}
