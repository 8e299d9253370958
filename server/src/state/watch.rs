//! WATCH's table: (db, key) → the ids of the clients watching it, in
//! `State::watched`, and each client's own list. Any change to such a key
//! (`State::changed`, expiry, flushes, SWAPDB) marks the watchers dirty,
//! and their EXEC replies with a null array.

use crate::state::{Client, State};
use bytes::Bytes;

impl State {
    /// WATCH of `key` in `db` by `cl`, once however often it is asked.
    pub fn watch(&mut self, cl: &mut Client, db: usize, key: &Bytes) {
        let slot = (db, key.clone());
        if cl.watched.contains(&slot) {
            return;
        }
        self.shard
            .watched
            .entry(slot.clone())
            .or_default()
            .push(cl.id);
        cl.watched.push(slot);
    }

    pub fn unwatch_all(&mut self, cl: &mut Client) {
        for slot in cl.watched.drain(..) {
            if let Some(ids) = self.shard.watched.get_mut(&slot) {
                ids.retain(|&i| i != cl.id);
                if ids.is_empty() {
                    self.shard.watched.remove(&slot);
                }
            }
        }
        cl.dirty_cas = false;
    }

    /// Marks the watchers of (db, key) dirty. The client whose command is
    /// running is not in `clients`; its flag is carried by
    /// `dirty_cas_running` until the dispatcher hands it over.
    pub fn touch_watched(&mut self, db: usize, key: &[u8]) {
        let Some(ids) = self.shard.watched.get(&(db, Bytes::copy_from_slice(key))) else {
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
        if self.shard.watched.is_empty() {
            return;
        }
        let slots: Vec<(usize, Bytes)> = self
            .shard
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
            let exists = self.shard.dbs[d].contains(&key)
                || other.is_some_and(|o| self.shard.dbs[o].contains(&key));
            if exists {
                self.touch_watched(d, &key);
            }
        }
    }
}
