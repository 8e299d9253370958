//! One numbered database: keys, values and expiry times.
//!
//! Expiry times (absolute unix ms) live in a second dict holding only the
//! keys that have one, so keys without a TTL pay nothing for the feature and
//! the active expire cycle samples only keys that can expire. A key past its
//! time is logically absent: callers check [`Db::is_expired`] (or let
//! [`Db::expire_if_needed`] delete it) before reading.

use crate::{CBytes, Dict, Value};
use std::sync::atomic::{AtomicU32, Ordering::Relaxed};

/// A key's access clock, for OBJECT IDLETIME / FREQ and (later) LRU/LFU
/// eviction, kept in the key's dict node.
///
/// Why 4 bytes in the node: Redis keeps 24 bits in every object header; we
/// have no spare bits in `CBytes` or `Value`, and a side table would cost a
/// whole entry per key. Only the keyspace dict carries it (`Dict`'s metadata
/// parameter is `()` elsewhere). Layout: the top 24 bits are the last access
/// time in seconds (wrapping every ~194 days, as Redis's LRU clock), the low
/// 8 bits the LFU logarithmic counter. Keeping both at once — Redis reuses
/// the same 24 bits for one or the other — costs nothing extra here and lets
/// a policy switch at runtime start from sensible data. LFU's "last
/// decrement time" is the last access time, which is what Redis's
/// `updateLFU` stores too. An atomic with relaxed ordering (a plain load and
/// store) keeps `Db` `Sync` while reads can refresh the clock through `&self`.
#[derive(Default, Debug)]
pub struct Access(AtomicU32);

impl Clone for Access {
    fn clone(&self) -> Self {
        Access(AtomicU32::new(self.0.load(Relaxed)))
    }
}

/// 24-bit seconds clock, as Redis's `LRU_CLOCK_MAX`.
const CLOCK_MAX: u32 = (1 << 24) - 1;
/// Counter a new key starts with under LFU, so it is not evicted at once.
pub const LFU_INIT_VAL: u8 = 5;

impl Access {
    fn new(clock: u32) -> Self {
        Access(AtomicU32::new(clock << 8 | LFU_INIT_VAL as u32))
    }
    fn clock(&self) -> u32 {
        self.0.load(Relaxed) >> 8
    }
    fn counter(&self) -> u8 {
        (self.0.load(Relaxed) & 0xff) as u8
    }
    fn store(&self, clock: u32, counter: u8) {
        self.0.store(clock << 8 | counter as u32, Relaxed);
    }
}

/// How accesses update the clock: LFU counting only under an LFU policy
/// (it costs a random number per access), with Redis's `lfu-log-factor`
/// and `lfu-decay-time`.
#[derive(Clone, Copy, Debug)]
pub struct Lfu {
    pub enabled: bool,
    pub log_factor: u32,
    /// Minutes per counter decrement; 0 never decays.
    pub decay_time: u32,
}

impl Default for Lfu {
    fn default() -> Self {
        Lfu {
            enabled: false,
            log_factor: 10,
            decay_time: 1,
        }
    }
}

/// What eviction ranks a sampled key by.
#[derive(Clone, Copy, Debug)]
pub struct EvictSample {
    /// Since the last access (second resolution, as Redis's LRU clock).
    pub idle_ms: u64,
    /// LFU counter after decay.
    pub freq: u8,
    pub expire: Option<i64>,
}

#[derive(Default)]
pub struct Db {
    pub keys: Dict<Value, Access>,
    pub expires: Dict<i64>,
    /// Where the active expire cycle resumes its scan of `expires`.
    pub expire_cursor: u64,
    /// Running average TTL of sampled keys (ms), for INFO keyspace.
    pub avg_ttl: i64,
    /// The time (unix ms) accesses are stamped with: the start of the
    /// running command, recorded by `expire_if_needed`/`set_clock`, so a read
    /// costs no clock call.
    pub clock_ms: i64,
    pub lfu: Lfu,
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
        self.clock_ms = now_ms;
        if self.is_expired(key, now_ms) {
            self.remove(key);
            true
        } else {
            false
        }
    }

    /// The value, ignoring expiry (callers expire first). Counts as an
    /// access of the key (its LRU/LFU clock); see [`Db::peek`].
    pub fn get(&self, key: &[u8]) -> Option<&Value> {
        let (_, v, a) = self.keys.get_entry_meta(key)?;
        self.touch(a);
        Some(v)
    }

    /// The value without counting an access (Redis's `LOOKUP_NOTOUCH`:
    /// TYPE, TTL, EXISTS, OBJECT).
    pub fn peek(&self, key: &[u8]) -> Option<&Value> {
        self.keys.get(key)
    }

    pub fn get_mut(&mut self, key: &[u8]) -> Option<&mut Value> {
        let now = self.access_clock();
        let lfu = self.lfu;
        let (v, a) = self.keys.get_mut_meta(key)?;
        touch_with(a, now, lfu);
        Some(v)
    }

    /// Sets the time accesses are stamped with (unix ms).
    pub fn set_clock(&mut self, now_ms: i64) {
        self.clock_ms = now_ms;
    }

    fn access_clock(&self) -> u32 {
        ((self.clock_ms.max(0) / 1000) as u64 & CLOCK_MAX as u64) as u32
    }

    fn touch(&self, a: &Access) {
        touch_with(a, self.access_clock(), self.lfu);
    }

    /// Counts an access of `key` (TOUCH); false if absent.
    pub fn touch_key(&self, key: &[u8]) -> bool {
        self.get(key).is_some()
    }

    /// Milliseconds since `key` was last accessed (second resolution), as
    /// Redis's `estimateObjectIdleTime`.
    pub fn idle_ms(&self, key: &[u8]) -> Option<u64> {
        let (_, _, a) = self.keys.get_entry_meta(key)?;
        Some(elapsed_s(self.access_clock(), a.clock()) as u64 * 1000)
    }

    /// The LFU counter of `key` after decay (OBJECT FREQ), not counting as
    /// an access.
    pub fn freq(&self, key: &[u8]) -> Option<u8> {
        let (_, _, a) = self.keys.get_entry_meta(key)?;
        Some(decayed(a, self.access_clock(), self.lfu))
    }

    /// Sets `key`'s access clock to `idle_s` seconds ago and/or its LFU
    /// counter (RESTORE IDLETIME / FREQ, the RDB IDLE / FREQ opcodes).
    pub fn set_access(&mut self, key: &[u8], idle_s: Option<u64>, freq: Option<u8>) {
        let now = self.access_clock();
        if let Some((_, a)) = self.keys.get_mut_meta(key) {
            let clock = match idle_s {
                Some(i) => {
                    let i = i.min(CLOCK_MAX as u64 - 1) as u32;
                    if i <= now {
                        now - i
                    } else {
                        now + (CLOCK_MAX - i)
                    }
                }
                None => a.clock(),
            };
            a.store(clock, freq.unwrap_or_else(|| a.counter()));
        }
    }

    pub fn contains(&self, key: &[u8]) -> bool {
        self.keys.contains_key(key)
    }

    /// Stores `val` under `key`, dropping any TTL unless `keep_ttl`.
    pub fn set(&mut self, key: &[u8], val: Value, keep_ttl: bool) {
        let now = self.access_clock();
        let lfu = self.lfu.enabled;
        match self.keys.get_mut_meta(key) {
            Some((slot, a)) => {
                *slot = val;
                // As Redis's dbOverwrite: a new value is a fresh access under
                // LRU; under LFU it inherits the counter (the lookup that
                // preceded the write already counted the access).
                if !lfu {
                    a.store(now, a.counter());
                }
            }
            None => self
                .keys
                .insert_new_meta(CBytes::new(key), val, Access::new(now)),
        }
        if !keep_ttl {
            self.persist(key);
        }
    }

    /// Adds a key known to be absent.
    pub fn add(&mut self, key: &[u8], val: Value) {
        let a = Access::new(self.access_clock());
        self.keys.insert_new_meta(CBytes::new(key), val, a);
    }

    /// Takes `key` out with its access clock and expiry time (RENAME, MOVE,
    /// SWAPDB-like moves keep both, as Redis moves the object).
    pub fn take_entry(&mut self, key: &[u8]) -> Option<(CBytes, Value, Access, Option<i64>)> {
        let (k, v, a) = self.keys.remove_meta(key)?;
        let exp = if self.expires.is_empty() {
            None
        } else {
            self.expires.remove(key).map(|(_, t)| t)
        };
        Some((k, v, a, exp))
    }

    /// Puts an entry from [`Db::take_entry`] under `key`, which must be
    /// absent.
    pub fn put_entry(&mut self, key: CBytes, val: Value, access: Access, expire: Option<i64>) {
        debug_assert!(!self.keys.contains_key(&key));
        if let Some(t) = expire {
            self.expires.insert_new(key.clone(), t);
        }
        self.keys.insert_new_meta(key, val, access);
    }

    /// A random key, or `None` when empty.
    pub fn random_key<R: rand::Rng>(&self, rng: &mut R) -> Option<CBytes> {
        self.keys.random(rng).map(|(k, _)| k.clone())
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
    /// The clock and LFU settings stay.
    pub fn take(&mut self) -> Db {
        let old = std::mem::take(self);
        self.clock_ms = old.clock_ms;
        self.lfu = old.lfu;
        old
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

    /// Approximate heap bytes owned by the contents, to decide whether
    /// freeing is worth a background thread (lazyfree): counts entries, as
    /// Redis's `lazyfreeGetFreeEffort`.
    pub fn free_effort(&self) -> usize {
        self.keys.len() + self.expires.len()
    }

    /// Eviction sampling: up to `n` random keys (among keys with a TTL if
    /// `volatile`), each passed to `f` with what the policies rank by. Not
    /// an access. Redis samples the same way (a few random keys per round,
    /// the best kept in a pool by the caller).
    pub fn sample_for_eviction<R: rand::Rng>(
        &self,
        n: usize,
        volatile: bool,
        rng: &mut R,
        mut f: impl FnMut(&CBytes, EvictSample),
    ) {
        let now = self.access_clock();
        for _ in 0..n {
            let (key, expire) = if volatile {
                match self.expires.random(rng) {
                    Some((k, &t)) => (k, Some(t)),
                    None => return,
                }
            } else {
                match self.keys.random(rng) {
                    Some((k, _)) => (k, None),
                    None => return,
                }
            };
            let Some((_, _, a)) = self.keys.get_entry_meta(key) else {
                continue;
            };
            let expire = if volatile {
                expire
            } else {
                self.expire_at(key)
            };
            f(
                key,
                EvictSample {
                    idle_ms: elapsed_s(now, a.clock()) as u64 * 1000,
                    freq: decayed(a, now, self.lfu),
                    expire,
                },
            );
        }
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

fn elapsed_s(now: u32, then: u32) -> u32 {
    if now >= then {
        now - then
    } else {
        now + (CLOCK_MAX - then)
    }
}

/// The LFU counter after one decrement per `decay_time` idle minutes.
fn decayed(a: &Access, now: u32, lfu: Lfu) -> u8 {
    let counter = a.counter();
    if lfu.decay_time == 0 {
        return counter;
    }
    let periods = elapsed_s(now, a.clock()) / 60 / lfu.decay_time;
    counter.saturating_sub(periods.min(255) as u8)
}

fn touch_with(a: &Access, now: u32, lfu: Lfu) {
    if !lfu.enabled {
        a.store(now, a.counter());
        return;
    }
    let mut counter = decayed(a, now, lfu);
    // Logarithmic increment: the more hits a key has, the less likely the
    // next one counts, so 8 bits cover a million accesses (lfu-log-factor).
    if counter < 255 {
        let base = counter.saturating_sub(LFU_INIT_VAL) as f64;
        let p = 1.0 / (base * lfu.log_factor as f64 + 1.0);
        if rand::random::<f64>() < p {
            counter += 1;
        }
    }
    a.store(now, counter);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn db_at(ms: i64) -> Db {
        let mut d = Db::default();
        d.set_clock(ms);
        d
    }

    #[test]
    fn access_clock_is_four_bytes_in_the_node() {
        assert_eq!(std::mem::size_of::<Access>(), 4);
    }

    #[test]
    fn idle_time_follows_reads_but_not_peeks() {
        let mut d = db_at(1_000_000);
        d.add(b"k", Value::str(b"v"));
        d.set_clock(1_010_000);
        assert_eq!(d.idle_ms(b"k"), Some(10_000));
        assert!(d.peek(b"k").is_some());
        assert_eq!(d.idle_ms(b"k"), Some(10_000));
        assert!(d.get(b"k").is_some());
        assert_eq!(d.idle_ms(b"k"), Some(0));
        d.set_clock(1_013_000);
        assert!(d.get_mut(b"k").is_some());
        assert_eq!(d.idle_ms(b"k"), Some(0));
        assert_eq!(d.idle_ms(b"nokey"), None);
    }

    #[test]
    fn idle_time_survives_clock_wrap() {
        let wrap_s = CLOCK_MAX as i64;
        let mut d = db_at((wrap_s - 5) * 1000);
        d.add(b"k", Value::str(b"v"));
        d.set_clock((wrap_s + 5) * 1000);
        assert_eq!(d.idle_ms(b"k"), Some(9_000));
    }

    #[test]
    fn lfu_counter_grows_and_decays() {
        let mut d = db_at(60_000);
        d.lfu.enabled = true;
        d.add(b"k", Value::str(b"v"));
        assert_eq!(d.freq(b"k"), Some(LFU_INIT_VAL));
        // At the initial value every hit counts.
        d.get(b"k");
        assert_eq!(d.freq(b"k"), Some(LFU_INIT_VAL + 1));
        for _ in 0..10_000 {
            d.get(b"k");
        }
        let f = d.freq(b"k").unwrap();
        assert!(f > LFU_INIT_VAL + 5 && f < 255, "{f}");
        // One decrement per idle minute (lfu-decay-time 1).
        d.set_clock(60_000 + 3 * 60_000);
        assert_eq!(d.freq(b"k"), Some(f - 3));
        d.lfu.decay_time = 0;
        assert_eq!(d.freq(b"k"), Some(f));
    }

    #[test]
    fn overwrite_keeps_lfu_counter_refreshes_lru() {
        let mut d = db_at(0);
        d.add(b"k", Value::str(b"v"));
        d.set_clock(5_000);
        d.set(b"k", Value::str(b"w"), false);
        assert_eq!(d.idle_ms(b"k"), Some(0));
        d.lfu.enabled = true;
        d.get(b"k");
        let f = d.freq(b"k");
        d.set_clock(6_000);
        d.set(b"k", Value::str(b"x"), false);
        assert_eq!(d.freq(b"k"), f);
        assert_eq!(d.idle_ms(b"k"), Some(1_000));
    }

    #[test]
    fn take_and_put_entry_carry_value_ttl_and_clock() {
        let mut a = db_at(1_000);
        let mut b = db_at(50_000);
        a.add(b"k", Value::str(b"v"));
        a.set_expire(b"k", 99_000);
        let (k, v, acc, exp) = a.take_entry(b"k").unwrap();
        assert!(a.is_empty() && a.expires.is_empty());
        b.put_entry(CBytes::new(b"n"), v, acc, exp);
        assert_eq!(b.expire_at(b"n"), Some(99_000));
        assert_eq!(b.idle_ms(b"n"), Some(49_000));
        assert_eq!(&*k, b"k");
        assert!(matches!(b.peek(b"n"), Some(Value::Str(_))));
        assert!(a.take_entry(b"k").is_none());
        // Without a TTL nothing is added to expires.
        b.add(b"p", Value::str(b"1"));
        let (k, v, acc, exp) = b.take_entry(b"p").unwrap();
        assert_eq!(exp, None);
        a.put_entry(k, v, acc, exp);
        assert!(a.expires.is_empty());
    }

    #[test]
    fn take_keeps_settings_and_random_key() {
        let mut d = db_at(7_000);
        d.lfu.enabled = true;
        let mut rng = rand::thread_rng();
        assert!(d.random_key(&mut rng).is_none());
        d.add(b"k", Value::str(b"v"));
        assert_eq!(d.random_key(&mut rng).as_deref(), Some(&b"k"[..]));
        let old = d.take();
        assert_eq!(old.len(), 1);
        assert_eq!(old.free_effort(), 1);
        assert!(d.is_empty());
        assert!(d.lfu.enabled);
        assert_eq!(d.clock_ms, 7_000);
    }

    #[test]
    fn expire_if_needed_sets_the_clock() {
        let mut d = Db::default();
        d.add(b"k", Value::str(b"v"));
        d.set_expire(b"k", 10_000);
        assert!(!d.expire_if_needed(b"k", 9_999));
        assert_eq!(d.clock_ms, 9_999);
        assert!(d.expire_if_needed(b"k", 10_000));
        assert!(d.is_empty() && d.expires.is_empty());
    }
}
