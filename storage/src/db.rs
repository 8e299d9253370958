//! One numbered database: keys, values and expiry times.
//!
//! Expiry times (absolute unix ms) live in a second dict holding only the
//! keys that have one, so keys without a TTL pay nothing for the feature and
//! the active expire cycle samples only keys that can expire. A key past its
//! time is logically absent: callers check [`Db::is_expired`] (or let
//! [`Db::expire_if_needed`] delete it) before reading.

use crate::snapshot::{Capture, KeyMeta, Plain};
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
///
/// `saved` is the epoch of the last snapshot this entry was written to (see
/// [`crate::snapshot`]); it uses the 4 bytes of padding the node had, so
/// the node stays 64 bytes.
#[derive(Default, Debug)]
pub struct Access(AtomicU32, u32);

impl Clone for Access {
    fn clone(&self) -> Self {
        Access(AtomicU32::new(self.0.load(Relaxed)), self.1)
    }
}

/// 24-bit seconds clock, as Redis's `LRU_CLOCK_MAX`.
const CLOCK_MAX: u32 = (1 << 24) - 1;
/// Counter a new key starts with under LFU, so it is not evicted at once.
pub const LFU_INIT_VAL: u8 = 5;

impl Access {
    fn new(clock: u32, epoch: u32) -> Self {
        Access(AtomicU32::new(clock << 8 | LFU_INIT_VAL as u32), epoch)
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
    /// Private: every write goes through `Db`'s methods, which run the
    /// snapshot hook (a BGSAVE in progress captures a key before it changes).
    keys: Dict<Value, Access>,
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
    /// The epoch entries created now are stamped with: that of the running
    /// (or last) snapshot, so a running one skips them.
    epoch: u32,
    /// The running snapshot of this database, if any.
    snap: Option<Box<Capture>>,
}

/// Saves the entry's current contents to the running snapshot unless it is
/// already there, before a write changes it (see [`crate::snapshot`]).
/// Separate from `Db`'s methods so it can borrow the fields disjointly.
#[inline]
fn pre_write(
    snap: &mut Option<Box<Capture>>,
    expires: &Dict<i64>,
    clock: u32,
    lfu: Lfu,
    key: &[u8],
    v: &Value,
    a: &mut Access,
) {
    if let Some(cap) = snap {
        if a.1 < cap.epoch {
            a.1 = cap.epoch;
            save_entry(cap, expires, clock, lfu, key, v, a);
            cap.keys_captured += 1;
        }
    }
}

fn save_entry(
    cap: &mut Capture,
    expires: &Dict<i64>,
    clock: u32,
    lfu: Lfu,
    key: &[u8],
    v: &Value,
    a: &Access,
) {
    let exp = if expires.is_empty() {
        None
    } else {
        expires.get(key).copied()
    };
    let (idle, freq) = match cap.meta {
        KeyMeta::None => (0, 0),
        KeyMeta::Lru => (elapsed_s(clock, a.clock()) as u64, 0),
        KeyMeta::Lfu => (0, decayed(a, clock, lfu)),
    };
    cap.record(key, v, exp, idle, freq);
}

impl Db {
    /// Room for `keys` keys, `expires` of them with a TTL (RDB load).
    pub fn reserve(&mut self, keys: usize, expires: usize) {
        self.keys.reserve(keys);
        self.expires.reserve(expires);
    }

    /// The main dict, read-only.
    pub fn keys(&self) -> &Dict<Value, Access> {
        &self.keys
    }

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

    /// Past its time, as Redis counts it: the key lives through the
    /// millisecond of its deadline.
    pub fn is_expired(&self, key: &[u8], now_ms: i64) -> bool {
        self.expire_at(key).is_some_and(|t| t < now_ms)
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
        pre_write(&mut self.snap, &self.expires, now, lfu, key, v, a);
        touch_with(a, now, lfu);
        Some(v)
    }

    /// The value at `key`, created with `make` if absent.
    pub fn get_or_add(&mut self, key: &[u8], make: impl FnOnce() -> Value) -> &mut Value {
        if !self.keys.contains_key(key) {
            self.add(key, make());
        }
        self.get_mut(key).expect("just added")
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
                pre_write(&mut self.snap, &self.expires, now, self.lfu, key, slot, a);
                *slot = val;
                // As Redis's dbOverwrite: a new value is a fresh access under
                // LRU; under LFU it inherits the counter (the lookup that
                // preceded the write already counted the access).
                if !lfu {
                    a.store(now, a.counter());
                }
            }
            None => {
                self.keys
                    .insert_new_guarded(CBytes::new(key), val, Access::new(now, self.epoch))
            }
        }
        if !keep_ttl {
            self.persist(key);
        }
    }

    /// Adds a key known to be absent.
    pub fn add(&mut self, key: &[u8], val: Value) {
        let a = Access::new(self.access_clock(), self.epoch);
        self.keys.insert_new_guarded(CBytes::new(key), val, a);
    }

    /// Takes `key` out with its access clock and expiry time (RENAME, MOVE,
    /// SWAPDB-like moves keep both, as Redis moves the object).
    pub fn take_entry(&mut self, key: &[u8]) -> Option<(CBytes, Value, Access, Option<i64>)> {
        let (k, v, mut a) = self.keys.remove_meta(key)?;
        self.saved_on_removal(&k, &v, &mut a);
        let exp = if self.expires.is_empty() {
            None
        } else {
            self.expires.remove(key).map(|(_, t)| t)
        };
        Some((k, v, a, exp))
    }

    /// A removed entry (its TTL still in `expires`) goes to the running
    /// snapshot first if it is not there yet.
    #[inline]
    fn saved_on_removal(&mut self, k: &[u8], v: &Value, a: &mut Access) {
        if self.snap.is_some() {
            let now = self.access_clock();
            pre_write(&mut self.snap, &self.expires, now, self.lfu, k, v, a);
        }
    }

    /// Puts an entry from [`Db::take_entry`] under `key`, which must be
    /// absent.
    pub fn put_entry(&mut self, key: CBytes, val: Value, mut access: Access, expire: Option<i64>) {
        debug_assert!(!self.keys.contains_key(&key));
        // A new key here as far as a running snapshot is concerned.
        access.1 = self.epoch;
        if let Some(t) = expire {
            self.expires.insert_new_guarded(key.clone(), t, ());
        }
        self.keys.insert_new_guarded(key, val, access);
    }

    /// A random key, or `None` when empty.
    pub fn random_key<R: rand::Rng>(&self, rng: &mut R) -> Option<CBytes> {
        self.keys.random(rng).map(|(k, _)| k.clone())
    }

    pub fn remove(&mut self, key: &[u8]) -> Option<Value> {
        let (k, v, mut a) = self.keys.remove_meta(key)?;
        self.saved_on_removal(&k, &v, &mut a);
        if !self.expires.is_empty() {
            self.expires.remove(key);
        }
        Some(v)
    }

    /// Sets the expiry of an existing key.
    pub fn set_expire(&mut self, key: &[u8], at_ms: i64) {
        debug_assert!(self.keys.contains_key(key));
        self.before_ttl_change(key);
        match self.expires.get_mut(key) {
            Some(t) => *t = at_ms,
            None => self.expires.insert_new_guarded(CBytes::new(key), at_ms, ()),
        }
    }

    /// Removes the TTL; true if there was one.
    pub fn persist(&mut self, key: &[u8]) -> bool {
        if self.expires.is_empty() {
            return false;
        }
        self.before_ttl_change(key);
        self.expires.remove(key).is_some()
    }

    fn before_ttl_change(&mut self, key: &[u8]) {
        if self.snap.is_some() {
            let now = self.access_clock();
            if let Some((v, a)) = self.keys.get_mut_meta(key) {
                pre_write(&mut self.snap, &self.expires, now, self.lfu, key, v, a);
            }
        }
    }

    /// Empties the database, returning the old contents (to drop elsewhere).
    /// The clock and LFU settings stay. A running snapshot first saves the
    /// rest of the old contents (synchronously: FLUSHDB/FLUSHALL during a
    /// BGSAVE are rare) and carries on with the empty database.
    pub fn take(&mut self) -> Db {
        if self.snap.is_some() {
            while !self.snapshot_step(usize::MAX, usize::MAX) {}
        }
        let mut old = std::mem::take(self);
        self.clock_ms = old.clock_ms;
        self.lfu = old.lfu;
        self.epoch = old.epoch;
        self.snap = old.snap.take();
        old
    }

    /// Puts back the contents `take` returned (a replacement that failed),
    /// dropping what is here now; the clock, LFU settings and snapshot
    /// state stay this database's.
    pub fn restore(&mut self, mut old: Db) {
        drop(self.take());
        old.clock_ms = self.clock_ms;
        old.lfu = self.lfu;
        old.epoch = self.epoch;
        old.snap = self.snap.take();
        *self = old;
    }

    // ------------------------------------------------------------ snapshots

    /// Starts a snapshot of this database as number `index` at `epoch`,
    /// which must be above every earlier one. O(1): nothing is walked.
    pub fn snapshot_begin(
        &mut self,
        index: usize,
        epoch: u32,
        opts: crate::rdb::SaveOpts,
        meta: KeyMeta,
    ) {
        debug_assert!(epoch > self.epoch);
        self.epoch = epoch;
        self.snap = Some(Box::new(Capture::new(
            index,
            epoch,
            opts,
            meta,
            self.keys.len(),
            self.expires.len(),
        )));
    }

    /// The running snapshot, if any.
    pub fn snapshot(&self) -> Option<&Capture> {
        self.snap.as_deref()
    }

    /// Walks on until `max_keys` keys were saved or `max_bytes` are waiting
    /// in the capture buffer; true once every key is saved.
    pub fn snapshot_step(&mut self, max_keys: usize, max_bytes: usize) -> bool {
        let now = self.access_clock();
        let lfu = self.lfu;
        let Db {
            keys,
            expires,
            snap,
            ..
        } = self;
        let Some(cap) = snap.as_deref_mut() else {
            return true;
        };
        let start = cap.keys_saved;
        while !cap.walk_done {
            if (cap.keys_saved - start) as usize >= max_keys || cap.out.len() >= max_bytes {
                return false;
            }
            let epoch = cap.epoch;
            cap.cursor = keys.scan_meta_mut(cap.cursor, |k, v, a| {
                if a.1 < epoch {
                    a.1 = epoch;
                    save_entry(cap, expires, now, lfu, k, v, a);
                }
            });
            cap.walk_done = cap.cursor == 0;
        }
        true
    }

    /// The records serialized so far, if any (with the database's number
    /// in the snapshot, and their strings left to compress: see
    /// `snapshot::compress_marked`): the caller drains both, whose room
    /// is kept for the next records.
    pub fn snapshot_output(&mut self) -> Option<(usize, &mut Vec<u8>, &mut Vec<Plain>)> {
        let cap = self.snap.as_deref_mut()?;
        (!cap.out.is_empty()).then_some((cap.index, &mut cap.out, &mut cap.plain))
    }

    /// Ends (or abandons) the running snapshot. Entries keep their marks;
    /// the next snapshot's higher epoch makes them unsaved again.
    pub fn snapshot_end(&mut self) -> Option<Box<Capture>> {
        self.snap.take()
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
                if t < now_ms {
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
        let sample = |a: &Access, expire: Option<i64>| EvictSample {
            idle_ms: elapsed_s(now, a.clock()) as u64 * 1000,
            freq: decayed(a, now, self.lfu),
            expire,
        };
        if volatile {
            self.expires.sample(rng, n, |key, &t, _| {
                if let Some((_, _, a)) = self.keys.get_entry_meta(key) {
                    f(key, sample(a, Some(t)));
                }
            });
        } else {
            self.keys
                .sample(rng, n, |key, _, a| f(key, sample(a, self.expire_at(key))));
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
    fn access_clock_and_epoch_fit_the_node_padding() {
        assert_eq!(std::mem::size_of::<Access>(), 8);
    }

    use crate::rdb::{self, SaveOpts};
    use crate::snapshot;
    use std::collections::BTreeMap;

    type Image = BTreeMap<(usize, Vec<u8>), (Vec<u8>, Option<i64>)>;

    /// Wraps the records of `db` (taken from its capture) in a file and
    /// loads it back: key -> (string value, expire).
    fn take_output(d: &mut Db) -> Option<(usize, Vec<u8>)> {
        d.snapshot_output().map(|(i, b, p)| {
            let mut out = Vec::new();
            snapshot::compress_marked(b, p, &mut out);
            b.clear();
            p.clear();
            (i, out)
        })
    }

    fn snapshot_contents(parts: &[(usize, Vec<u8>)]) -> Image {
        let mut file = b"REDIS0010".to_vec();
        for (i, p) in parts {
            snapshot::select_db(&mut file, *i, None);
            file.extend_from_slice(p);
        }
        file.push(rdb::OP_EOF);
        file.extend_from_slice(&[0; 8]);
        let mut out = BTreeMap::new();
        rdb::load(&file, &Default::default(), 0, false, |k| {
            let v = match &k.value {
                Value::Str(s) => s.as_bytes(&mut itoa::Buffer::new()).to_vec(),
                Value::List(l) => format!("list:{}", l.len()).into_bytes(),
                _ => b"other".to_vec(),
            };
            assert!(
                out.insert((k.db, k.key.clone()), (v, k.expire_ms))
                    .is_none(),
                "duplicate"
            );
            Ok(())
        })
        .unwrap();
        out
    }

    #[test]
    fn snapshot_saves_the_image_at_its_start_whatever_the_writes() {
        let mut d = db_at(1_000);
        for i in 0..2000 {
            d.add(
                format!("k{i}").as_bytes(),
                Value::str(format!("v{i}").as_bytes()),
            );
        }
        d.set_expire(b"k5", 99_000);
        d.set_expire(b"k6", 98_000);
        let mut expect = BTreeMap::new();
        for i in 0..2000 {
            let exp = match i {
                5 => Some(99_000),
                6 => Some(98_000),
                _ => None,
            };
            expect.insert(
                (3, format!("k{i}").into_bytes()),
                (format!("v{i}").into_bytes(), exp),
            );
        }
        d.snapshot_begin(3, 1, SaveOpts::default(), snapshot::KeyMeta::None);
        let mut parts = Vec::new();
        let mut round = 0;
        loop {
            let done = d.snapshot_step(7, usize::MAX);
            parts.extend(take_output(&mut d));
            // Every kind of write, on keys walked and not yet walked; new
            // keys grow the table (rehashing under the cursor).
            round += 1;
            let k = format!("k{}", (round * 37) % 2000);
            if let Some(Value::Str(s)) = d.get_mut(k.as_bytes()) {
                *s = crate::StrValue::new(b"changed");
            }
            d.set(
                format!("k{}", (round * 11) % 2000).as_bytes(),
                Value::str(b"set"),
                false,
            );
            d.remove(format!("k{}", (round * 13) % 2000).as_bytes());
            if let Some((k, v, a, e)) = d.take_entry(format!("k{}", (round * 17) % 2000).as_bytes())
            {
                d.put_entry(CBytes::new(format!("moved{round}").as_bytes()), v, a, e);
                drop(k);
            }
            if d.contains(b"k5") {
                d.persist(b"k5");
            }
            if d.contains(b"k6") {
                d.set_expire(b"k6", 1);
            }
            for j in 0..20 {
                d.add(format!("new{round}_{j}").as_bytes(), Value::str(b"n"));
            }
            if round == 40 {
                // FLUSHDB in the middle: the rest is saved first.
                drop(d.take());
                assert!(d.snapshot().unwrap().walk_done());
            }
            if done {
                break;
            }
        }
        parts.extend(take_output(&mut d));
        assert_eq!(snapshot_contents(&parts), expect);
        let cap = d.snapshot_end().unwrap();
        assert_eq!(cap.keys_saved, 2000);
        assert!(cap.keys_captured > 0);
        // A second snapshot sees the current contents.
        let now: Vec<Vec<u8>> = d.keys.iter().map(|(k, _)| k.to_vec()).collect();
        d.snapshot_begin(0, 2, SaveOpts::default(), snapshot::KeyMeta::None);
        while !d.snapshot_step(100, usize::MAX) {}
        let got = snapshot_contents(&[take_output(&mut d).unwrap()]);
        assert_eq!(got.len(), now.len());
    }

    #[test]
    fn get_or_add_stamps_new_keys_with_the_epoch() {
        let mut d = db_at(5_000);
        d.add(b"old", Value::str(b"1"));
        d.snapshot_begin(0, 1, SaveOpts::default(), snapshot::KeyMeta::Lru);
        d.get_or_add(b"fresh", || Value::str(b"x"));
        assert!(d.snapshot_step(usize::MAX, usize::MAX));
        let got = snapshot_contents(&[take_output(&mut d).unwrap()]);
        assert_eq!(
            got.keys().map(|k| k.1.clone()).collect::<Vec<_>>(),
            vec![b"old".to_vec()]
        );
        assert_eq!(d.idle_ms(b"fresh"), Some(0));
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
        assert!(!d.expire_if_needed(b"k", 10_000));
        assert_eq!(d.clock_ms, 10_000);
        assert!(d.expire_if_needed(b"k", 10_001));
        assert!(d.is_empty() && d.expires.is_empty());
    }
}
