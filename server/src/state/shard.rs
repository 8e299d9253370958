//! What belongs to the data rather than to the whole server: the
//! databases (their keys per hash slot in cluster mode, see `storage::Db`),
//! the clients blocked on their keys and the keys made ready, the WATCH
//! table, the keys clients may cache, the eviction pool, the keyspace's
//! hit and miss counts, and a writable replica's own keys with a TTL. One shard for now;
//! the seam lets a later step serve several, each by itself.
//!
//! The data operations of the families take a [`Keys`]: a shard, a
//! database and the command's clock, nothing of the whole server. What a
//! lookup causes beyond the shard (an expired key's event, its DEL in the
//! replication stream, a `keymiss` event) is noted in the shard and
//! settled by the server (`State::settle`) before the command's next event
//! and before its own propagation, so the order stays Redis's.

use crate::core::error::{Error, WRONGTYPE};
use crate::state::evict::EvictPool;
use crate::state::lazyfree::drop_value;
use crate::state::tracking::Tracked;
use ahash::AHashMap as HashMap;
use bytes::Bytes;
use std::collections::VecDeque;
use storage::{Db, Typed, Value};

pub struct Shard {
    pub dbs: Vec<Db>,
    /// Blocked client ids per (db, key), first come first served.
    pub blocking: HashMap<(usize, Bytes), VecDeque<u64>>,
    /// Keys with blocked clients that a command may have made servable.
    pub ready_keys: Vec<(usize, Bytes)>,
    /// WATCHed keys and the clients watching them.
    pub watched: HashMap<(usize, Bytes), Vec<u64>>,
    /// A writable replica's own keys with a TTL (see `repl`).
    pub replica_keys_with_expire: storage::Dict<u64>,
    /// The keys clients may cache (CLIENT TRACKING).
    pub tracked: Tracked,
    /// The best eviction candidates seen so far.
    pub evict_pool: EvictPool,
    /// INFO's keyspace_hits and keyspace_misses.
    pub hits: u64,
    pub misses: u64,
    /// What lookups caused that the server must still settle, in order.
    pub pending: Vec<Pending>,
}

/// An effect of a lookup beyond the shard.
pub enum Pending {
    /// Lazy expiry deleted the key.
    Expired(usize, Bytes),
    /// A read missed and `keymiss` events are wanted.
    Miss(usize, Bytes),
}

/// How lazy expiry behaves for the running command, from the server's
/// situation (see `State::lazy`).
#[derive(Clone, Copy, Default)]
pub struct Lazy {
    /// The AOF loads: no key has expired yet, its commands must find the
    /// keys they found when first run.
    pub loading: bool,
    /// CLIENT PAUSE: an expired key reads as missing but stays.
    pub paused: bool,
    /// A replica's keys expire through its master's DELs: an expired key
    /// reads as missing to its clients and stays for its master's commands.
    pub replica: bool,
    /// The command comes from the master.
    pub applying: bool,
    /// `keymiss` events are selected.
    pub keymiss: bool,
    /// `lazyfree-lazy-expire`: a large expired value is freed in the
    /// background.
    pub free_expired: bool,
    /// `lazyfree-lazy-server-del`: so is a large value a write replaces.
    pub free_overwritten: bool,
}

impl Shard {
    /// `n` empty databases.
    pub fn new(n: usize) -> Shard {
        Shard {
            dbs: (0..n).map(|_| Db::default()).collect(),
            blocking: HashMap::new(),
            ready_keys: Vec::new(),
            watched: HashMap::new(),
            replica_keys_with_expire: storage::Dict::new(),
            tracked: Tracked::default(),
            evict_pool: EvictPool::default(),
            hits: 0,
            misses: 0,
            pending: Vec::new(),
        }
    }

    /// Deletes `key` if expired, as `lazy` allows; true if it reads as
    /// missing for that reason.
    #[inline]
    pub fn expire_if_needed(&mut self, db: usize, key: &[u8], now: i64, lazy: Lazy) -> bool {
        if lazy.loading {
            return false;
        }
        if lazy.paused {
            return self.dbs[db].is_expired(key, now);
        }
        if lazy.replica {
            return !lazy.applying && self.dbs[db].is_expired(key, now);
        }
        self.expire_now(db, key, now, lazy)
    }

    fn expire_now(&mut self, db: usize, key: &[u8], now: i64, lazy: Lazy) -> bool {
        let Some(v) = self.dbs[db].expire_if_needed(key, now) else {
            return false;
        };
        drop_value(v, lazy.free_expired);
        (self.pending).push(Pending::Expired(db, Bytes::copy_from_slice(key)));
        true
    }

    /// Whether `key` is there after lazy expiry, counted as a hit or a
    /// miss; a miss is noted for `keymiss` when `notify`.
    #[inline]
    pub fn present(&mut self, db: usize, key: &[u8], now: i64, lazy: Lazy, notify: bool) -> bool {
        if !self.expire_if_needed(db, key, now, lazy) && self.dbs[db].contains(key) {
            self.hits += 1;
            return true;
        }
        self.misses += 1;
        if notify && lazy.keymiss {
            (self.pending).push(Pending::Miss(db, Bytes::copy_from_slice(key)));
        }
        false
    }

    /// Lazy expiry for a write: a writable replica's own write deletes the
    /// key its master let expire, as Redis's write lookups do (what it
    /// creates then starts without the old TTL). True if `key` is gone.
    #[inline]
    pub fn expire_for_write(&mut self, db: usize, key: &[u8], now: i64, lazy: Lazy) -> bool {
        let own_write = lazy.replica && !lazy.applying && !lazy.loading && !lazy.paused;
        if own_write && self.expire_now(db, key, now, lazy) {
            return true;
        }
        self.expire_if_needed(db, key, now, lazy)
    }
}

/// What a data operation gets: the shard that holds its keys, the
/// database, the command's clock and how lazy expiry behaves. An
/// operation takes this and its parsed arguments and returns a result;
/// the handler parses, records the change and renders the reply.
pub struct Keys<'a> {
    pub shard: &'a mut Shard,
    pub db: usize,
    pub now: i64,
    pub lazy: Lazy,
}

impl<'a> Keys<'a> {
    /// The database itself, without expiry or statistics.
    pub fn db(&mut self) -> &mut Db {
        &mut self.shard.dbs[self.db]
    }

    /// Stores `val` under `key` (see `Db::set`); the value it replaces is
    /// freed as Redis's overwrite frees it.
    #[inline]
    pub fn set(&mut self, key: &[u8], val: Value, keep_ttl: bool) {
        if let Some(old) = self.shard.dbs[self.db].set(key, val, keep_ttl) {
            drop_value(old, self.lazy.free_overwritten);
        }
    }

    /// Whether an expiry time set now deletes the key at once: not while
    /// the AOF loads (the key stays for the commands after it, with the
    /// time set), as Redis's `checkAlreadyExpired`.
    pub fn already_expired(&self, when: i64) -> bool {
        when <= self.now && !self.lazy.loading
    }

    /// Deletes `key` if expired; true if it reads as missing for that.
    pub fn expire_if_needed(&mut self, key: &[u8]) -> bool {
        self.shard
            .expire_if_needed(self.db, key, self.now, self.lazy)
    }

    #[inline]
    pub fn lookup_read(&mut self, key: &[u8]) -> Option<&Value> {
        let (db, now, lazy) = (self.db, self.now, self.lazy);
        if !self.shard.present(db, key, now, lazy, true) {
            return None;
        }
        self.shard.dbs[db].get(key)
    }

    #[inline]
    pub fn lookup_write(&mut self, key: &[u8]) -> Option<&mut Value> {
        if self
            .shard
            .expire_for_write(self.db, key, self.now, self.lazy)
        {
            return None;
        }
        self.shard.dbs[self.db].get_mut(key)
    }

    /// The value of type `T` at `key` for reading: `None` if absent,
    /// WRONGTYPE if it holds another type.
    #[inline]
    pub fn read<T: Typed>(&mut self, key: &[u8]) -> Result<Option<&T>, Error> {
        match self.lookup_read(key) {
            None => Ok(None),
            Some(v) => T::of(v).map(Some).ok_or(WRONGTYPE),
        }
    }

    /// As [`Keys::read`], for modifying the value in place.
    #[inline]
    pub fn write<T: Typed>(&mut self, key: &[u8]) -> Result<Option<&mut T>, Error> {
        match self.lookup_write(key) {
            None => Ok(None),
            Some(v) => T::of_mut(v).map(Some).ok_or(WRONGTYPE),
        }
    }

    /// Removes `members` one by one from the aggregate of type `T` at `key`
    /// (HDEL, SREM, ZREM), stopping once it is empty as Redis does; how
    /// many it held. An emptied aggregate is left to the caller.
    pub fn remove_each<T: Typed>(
        &mut self,
        key: &[u8],
        members: &[Bytes],
        remove: impl Fn(&mut T, &[u8]) -> bool,
        is_empty: impl Fn(&T) -> bool,
    ) -> Result<i64, Error> {
        let Some(agg) = self.write::<T>(key)? else {
            return Ok(0);
        };
        let mut n = 0;
        for m in members {
            if remove(agg, m) {
                n += 1;
                if is_empty(agg) {
                    break;
                }
            }
        }
        Ok(n)
    }

    /// Writes a STORE command's result `v` at `dst` (replacing any value and
    /// TTL), or with `None` deletes `dst`; whether that changed anything.
    pub fn store(&mut self, dst: &[u8], v: Option<Value>) -> bool {
        self.expire_if_needed(dst);
        match v {
            Some(v) => {
                self.set(dst, v, false);
                true
            }
            None => match self.db().remove(dst) {
                Some(old) => {
                    drop_value(old, self.lazy.free_overwritten);
                    true
                }
                None => false,
            },
        }
    }

    /// The value of type `T` at `key`, created with `make` if absent. A
    /// caller that fails after creating must leave no empty aggregate
    /// behind (`State::delete_if_empty`).
    pub fn write_or_create<T: Typed>(
        &mut self,
        key: &[u8],
        make: impl FnOnce() -> Value,
    ) -> Result<&mut T, Error> {
        self.shard
            .expire_if_needed(self.db, key, self.now, self.lazy);
        let v = self.shard.dbs[self.db].get_or_add(key, make);
        T::of_mut(v).ok_or(WRONGTYPE)
    }
}
