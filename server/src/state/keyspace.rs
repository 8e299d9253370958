//! Keyspace access for command handlers: lazy expiry, hit/miss statistics,
//! typed lookups (WRONGTYPE), and the bookkeeping of a change.

use crate::core::config::class;
use crate::core::error::{Error, WRONGTYPE};
use crate::state::pubsub::NOTIFY_KEY_MISS;
use crate::state::shard::{Keys, Lazy, Pending};
use crate::state::State;
use storage::{StrValue, Typed, Value};

/// Keyspace access with lazy expiry and the hit/miss statistics: the
/// shard's lookups (see `shard::Keys`), settled at once.
impl State {
    /// How lazy expiry behaves now (see `shard::Lazy`).
    #[inline]
    pub fn lazy(&self) -> Lazy {
        Lazy {
            loading: self.aof.loading,
            paused: self.pause.is_some(),
            replica: self.repl.master.is_some(),
            applying: self.repl.applying,
            keymiss: self.tun.notify_flags & NOTIFY_KEY_MISS != 0,
            free_expired: self.cfg.lazyfree_lazy_expire,
            free_overwritten: self.cfg.lazyfree_lazy_server_del,
        }
    }

    /// The data operations' view of database `db` at the command's clock.
    #[inline]
    pub fn keys(&mut self, db: usize, now: i64) -> Keys<'_> {
        Keys {
            lazy: self.lazy(),
            shard: &mut self.shard,
            db,
            now,
        }
    }

    /// Does what the shard's lookups noted: an expired key's bookkeeping,
    /// a `keymiss` event. Runs before a command's next event and before
    /// its own propagation, so both keep Redis's order.
    #[inline]
    pub fn settle(&mut self) {
        if !self.shard.pending.is_empty() {
            self.settle_pending();
        }
    }

    fn settle_pending(&mut self) {
        for p in std::mem::take(&mut self.shard.pending) {
            match p {
                Pending::Expired(db, key) => self.expired(db, &key),
                Pending::Miss(db, key) => self.notify(NOTIFY_KEY_MISS, "keymiss", db, &key),
            }
        }
    }

    /// Deletes `key` if expired; true if it was.
    pub fn expire_if_needed(&mut self, db: usize, key: &[u8], now: i64) -> bool {
        let lazy = self.lazy();
        let gone = self.shard.expire_if_needed(db, key, now, lazy);
        self.settle();
        gone
    }

    /// Whether an expiry time set now deletes the key at once: not while
    /// the AOF loads (the key stays for the commands after it, with the
    /// time set), as Redis's `checkAlreadyExpired`.
    pub fn already_expired(&self, when: i64, now: i64) -> bool {
        when <= now && !self.aof.loading
    }

    fn present(&mut self, db: usize, key: &[u8], now: i64, notify: bool) -> bool {
        let lazy = self.lazy();
        let found = self.shard.present(db, key, now, lazy, notify);
        self.settle();
        found
    }

    pub fn lookup_read(&mut self, db: usize, key: &[u8], now: i64) -> Option<&Value> {
        if !self.present(db, key, now, true) {
            return None;
        }
        self.shard.dbs[db].get(key)
    }

    pub fn lookup_write(&mut self, db: usize, key: &[u8], now: i64) -> Option<&mut Value> {
        let lazy = self.lazy();
        let gone = self.shard.expire_for_write(db, key, now, lazy);
        self.settle();
        if gone {
            return None;
        }
        self.shard.dbs[db].get_mut(key)
    }

    /// The value of type `T` at `key` for reading: `None` if absent,
    /// WRONGTYPE if it holds another type.
    pub fn read<T: Typed>(&mut self, db: usize, key: &[u8], now: i64) -> Result<Option<&T>, Error> {
        match self.lookup_read(db, key, now) {
            None => Ok(None),
            Some(v) => T::of(v).map(Some).ok_or(WRONGTYPE),
        }
    }

    /// As [`State::read`], for modifying the value in place.
    pub fn write<T: Typed>(
        &mut self,
        db: usize,
        key: &[u8],
        now: i64,
    ) -> Result<Option<&mut T>, Error> {
        match self.lookup_write(db, key, now) {
            None => Ok(None),
            Some(v) => T::of_mut(v).map(Some).ok_or(WRONGTYPE),
        }
    }

    /// The value of type `T` at `key`, created with `make` if absent. A
    /// caller that fails after creating must leave no empty aggregate behind
    /// ([`State::delete_if_empty`]).
    pub fn write_or_create<T: Typed>(
        &mut self,
        db: usize,
        key: &[u8],
        now: i64,
        make: impl FnOnce() -> Value,
    ) -> Result<&mut T, Error> {
        self.expire_if_needed(db, key, now);
        let v = self.shard.dbs[db].get_or_add(key, make);
        T::of_mut(v).ok_or(WRONGTYPE)
    }

    pub fn read_str(
        &mut self,
        db: usize,
        key: &[u8],
        now: i64,
    ) -> Result<Option<&StrValue>, Error> {
        self.read(db, key, now)
    }

    pub fn write_str(
        &mut self,
        db: usize,
        key: &[u8],
        now: i64,
    ) -> Result<Option<&mut StrValue>, Error> {
        self.write(db, key, now)
    }

    /// Deletes `key` if its aggregate became empty, as Redis does after any
    /// removal; true if it did.
    pub fn delete_if_empty(&mut self, db: usize, key: &[u8]) -> bool {
        if self.shard.dbs[db]
            .get(key)
            .is_some_and(Value::is_empty_aggregate)
        {
            self.shard.dbs[db].remove(key);
            self.notify(class::GENERIC, "del", db, key);
            true
        } else {
            false
        }
    }

    /// Records that a command changed `key`: blocked clients, WATCH,
    /// client-side caching, dirty counter, keyspace event.
    pub fn changed(&mut self, class: u32, event: &str, db: usize, key: &[u8]) {
        self.settle();
        if !self.shard.blocking.is_empty() {
            self.signal_ready(db, key);
        }
        if !self.shard.watched.is_empty() {
            self.touch_watched(db, key);
        }
        if self.tracking.armed {
            self.invalidate_key(key, self.tracking.executing);
        }
        self.dirty += 1;
        self.notify(class, event, db, key);
    }

    /// As [`State::changed`] for a change of `n` elements: Redis counts
    /// each added, updated or removed element toward the save points.
    pub fn changed_n(&mut self, class: u32, event: &str, db: usize, key: &[u8], n: u64) {
        self.changed(class, event, db, key);
        self.dirty += n.saturating_sub(1);
    }

    /// A read that does not count as an access of the key (Redis's
    /// `LOOKUP_NOTOUCH`: TYPE, EXISTS, the TTL family): expires it if due,
    /// counts the hit or miss and reports a miss as `keymiss`.
    pub fn lookup_read_notouch(&mut self, db: usize, key: &[u8], now: i64) -> Option<&Value> {
        self.peek_counted(db, key, now, true)
    }

    /// As `lookup_read_notouch` without the `keymiss` event (OBJECT, SCAN's
    /// TYPE filter).
    pub fn lookup_read_nonotify(&mut self, db: usize, key: &[u8], now: i64) -> Option<&Value> {
        self.peek_counted(db, key, now, false)
    }

    fn peek_counted(&mut self, db: usize, key: &[u8], now: i64, notify: bool) -> Option<&Value> {
        if !self.present(db, key, now, notify) {
            return None;
        }
        self.shard.dbs[db].peek(key)
    }

    /// Records a change of `key` that belongs to a command already counted
    /// in the dirty counter (the second key of RENAME, MOVE): Redis counts
    /// one change per such command.
    pub fn changed_again(&mut self, class: u32, event: &str, db: usize, key: &[u8]) {
        self.changed(class, event, db, key);
        self.dirty = self.dirty.saturating_sub(1);
    }
}
