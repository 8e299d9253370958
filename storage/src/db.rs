//! One numbered database: keys, values and expiry times.
//!
//! Expiry times (absolute unix ms) live in a second dict holding only the
//! keys that have one, so keys without a TTL pay nothing for the feature and
//! the active expire cycle samples only keys that can expire. A key past its
//! time is logically absent: callers check [`Db::is_expired`] (or let
//! [`Db::expire_if_needed`] delete it) before reading.

use crate::{CBytes, Dict, Value};

#[derive(Default)]
pub struct Db {
    pub keys: Dict<Value>,
    pub expires: Dict<i64>,
    /// Where the active expire cycle resumes its scan of `expires`.
    pub expire_cursor: u64,
    /// Running average TTL of sampled keys (ms), for INFO keyspace.
    pub avg_ttl: i64,
}

impl Db {
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    pub fn expire_at(&self, key: &[u8]) -> Option<i64> {
        if self.expires.is_empty() {
            return None;
        }
        self.expires.get(key).copied()
    }

    pub fn is_expired(&self, key: &[u8], now_ms: i64) -> bool {
        self.expire_at(key).is_some_and(|t| t <= now_ms)
    }

    /// Deletes `key` if its time has passed; true if it did.
    pub fn expire_if_needed(&mut self, key: &[u8], now_ms: i64) -> bool {
        if self.is_expired(key, now_ms) {
            self.remove(key);
            true
        } else {
            false
        }
    }

    /// The value, ignoring expiry (callers expire first).
    pub fn get(&self, key: &[u8]) -> Option<&Value> {
        self.keys.get(key)
    }

    pub fn get_mut(&mut self, key: &[u8]) -> Option<&mut Value> {
        self.keys.get_mut(key)
    }

    pub fn contains(&self, key: &[u8]) -> bool {
        self.keys.contains_key(key)
    }

    /// Stores `val` under `key`, dropping any TTL unless `keep_ttl`.
    pub fn set(&mut self, key: &[u8], val: Value, keep_ttl: bool) {
        match self.keys.get_mut(key) {
            Some(slot) => *slot = val,
            None => self.keys.insert_new(CBytes::new(key), val),
        }
        if !keep_ttl {
            self.persist(key);
        }
    }

    /// Adds a key known to be absent.
    pub fn add(&mut self, key: &[u8], val: Value) {
        self.keys.insert_new(CBytes::new(key), val);
    }

    pub fn remove(&mut self, key: &[u8]) -> Option<Value> {
        let (_, v) = self.keys.remove(key)?;
        if !self.expires.is_empty() {
            self.expires.remove(key);
        }
        Some(v)
    }

    /// Sets the expiry of an existing key.
    pub fn set_expire(&mut self, key: &[u8], at_ms: i64) {
        debug_assert!(self.keys.contains_key(key));
        match self.expires.get_mut(key) {
            Some(t) => *t = at_ms,
            None => self.expires.insert_new(CBytes::new(key), at_ms),
        }
    }

    /// Removes the TTL; true if there was one.
    pub fn persist(&mut self, key: &[u8]) -> bool {
        !self.expires.is_empty() && self.expires.remove(key).is_some()
    }

    /// Empties the database, returning the old contents (to drop elsewhere).
    pub fn take(&mut self) -> Db {
        std::mem::take(self)
    }

    /// One step of active expiry: scans `expires` from the saved cursor
    /// until `sample` keys were looked at, deletes those past their time and
    /// returns them with the number sampled.
    pub fn expire_sample(&mut self, now_ms: i64, sample: usize) -> (usize, Vec<CBytes>) {
        let mut seen = 0;
        let mut dead = Vec::new();
        let mut ttl_sum = 0i64;
        let mut ttl_n = 0i64;
        let mut buckets = 0;
        loop {
            self.expire_cursor = self.expires.scan(self.expire_cursor, |k, &t| {
                seen += 1;
                if t <= now_ms {
                    dead.push(k.clone());
                } else {
                    ttl_sum += t - now_ms;
                    ttl_n += 1;
                }
            });
            buckets += 1;
            if self.expire_cursor == 0 || seen >= sample || buckets >= sample * 20 {
                break;
            }
        }
        for k in &dead {
            self.remove(k);
        }
        if ttl_n > 0 {
            let avg = ttl_sum / ttl_n;
            // Redis's running estimate: mostly the old value, a little new.
            self.avg_ttl = if self.avg_ttl == 0 {
                avg
            } else {
                (self.avg_ttl / 50) * 49 + avg / 50
            };
        }
        (seen, dead)
    }

    /// Housekeeping from the server's cron: bounded rehash work, shrinking.
    pub fn cron(&mut self) {
        for _ in 0..100 {
            if !self.keys.rehash(100) {
                break;
            }
        }
        self.expires.rehash(100);
        self.keys.shrink_if_needed();
        self.expires.shrink_if_needed();
    }
}
