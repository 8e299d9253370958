//! Transactions: MULTI EXEC DISCARD WATCH UNWATCH.
//!
//! While a client is in MULTI the dispatcher queues its commands (after the
//! lookup, arity and auth checks, whose failures mark the transaction so
//! EXEC aborts). EXEC runs the queue through the same dispatcher under the
//! state lock, so no other client's command interleaves; blocking commands
//! inside it answer as on timeout, and clients woken by its writes are
//! served after it ends.
//!
//! WATCH registers (db, key) → client ids in `State::watched`; any change to
//! such a key (`State::changed`, expiry, flushes, SWAPDB) marks the watchers
//! dirty and their EXEC replies with a null array.

use super::{execute, Ctx, Handler};
use crate::core::error::{CmdResult, Error};
use crate::state::{Client, State};
use bytes::Bytes;

pub static HANDLERS: &[(&str, Handler)] = &[
    ("multi", multi),
    ("exec", exec),
    ("discard", discard),
    ("watch", watch),
    ("unwatch", unwatch),
];

/// Commands that run at once even inside MULTI.
pub fn runs_in_multi(name: &str) -> bool {
    matches!(
        name,
        "exec" | "discard" | "multi" | "watch" | "quit" | "reset"
    )
}

/// MULTI
fn multi(c: &mut Ctx, _: &[Bytes]) -> CmdResult {
    if c.cl.multi.is_some() {
        return Err(Error::other("ERR MULTI calls can not be nested"));
    }
    c.cl.multi = Some(Vec::new());
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
    let dirty =
        c.cl.dirty_cas || (c.cl.watched.iter()).any(|(db, k)| c.st.dbs[*db].is_expired(k, c.now));
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
        let slot = (db, key.clone());
        if c.cl.watched.contains(&slot) {
            continue;
        }
        c.st.watched.entry(slot.clone()).or_default().push(c.cl.id);
        c.cl.watched.push(slot);
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

impl State {
    pub fn unwatch_all(&mut self, cl: &mut Client) {
        for slot in cl.watched.drain(..) {
            if let Some(ids) = self.watched.get_mut(&slot) {
                ids.retain(|&i| i != cl.id);
                if ids.is_empty() {
                    self.watched.remove(&slot);
                }
            }
        }
        cl.dirty_cas = false;
    }

    /// Marks the watchers of (db, key) dirty. The client whose command is
    /// running is not in `clients`; its flag is carried by
    /// `dirty_cas_running` until the dispatcher hands it over.
    pub fn touch_watched(&mut self, db: usize, key: &[u8]) {
        let Some(ids) = self.watched.get(&(db, Bytes::copy_from_slice(key))) else {
            return;
        };
        for id in ids.clone() {
            match self.clients.get_mut(&id) {
                Some(c) => c.dirty_cas = true,
                None => self.dirty_cas_running = true,
            }
        }
    }

    /// FLUSHDB/FLUSHALL/SWAPDB: touches every watched key of `db` that exists
    /// there (or, for SWAPDB, in `other`), before the change. For SWAPDB an
    /// expired key counts as absent, and is deleted so that it does not turn
    /// up as expired-since-WATCH at EXEC.
    pub fn touch_all_watched(&mut self, db: usize, other: Option<usize>) {
        if self.watched.is_empty() {
            return;
        }
        let slots: Vec<(usize, Bytes)> = self
            .watched
            .keys()
            .filter(|(d, _)| *d == db)
            .cloned()
            .collect();
        for (d, key) in slots {
            if let Some(o) = other {
                let now = self.wall_ms();
                self.expire_if_needed(d, &key, now);
                self.expire_if_needed(o, &key, now);
            }
            let exists =
                self.dbs[d].contains(&key) || other.is_some_and(|o| self.dbs[o].contains(&key));
            if exists {
                self.touch_watched(d, &key);
            }
        }
    }
}
