//! One numbered database: keys, values and expiry times.
//!
//! Expiry times (absolute unix ms) live in a second dict holding only the
//! keys that have one, so keys without a TTL pay nothing for the feature and
//! the active expire cycle samples only keys that can expire. A key past its
//! time is logically absent: callers check [`Db::is_expired`] (or let
//! [`Db::expire_if_needed`] delete it) before reading.
//!
//! Standalone, a database is one such pair of tables. Slotted (cluster
//! mode, [`Db::slotted`]) it is one pair per hash slot, so that a slot's
//! keys can be counted, listed and dropped at the cost of that slot alone;
//! every other method means the same in both layouts.

use crate::slot::{key_hash_slot, Fenwick, SLOTS, SLOT_BITS};
use crate::snapshot::{Capture, KeyMeta, Plain};
use crate::{CBytes, Dict, TableStats, Value};
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
/// [`crate::snapshot`]); it took 4 bytes of padding the node had.
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
    /// Seconds into the minute of the clock accesses are stamped with
    /// (`Db::set_clock`): Redis decays by the minutes its clock turned
    /// since the last access, not by whole minutes idle.
    pub phase: u32,
}

impl Default for Lfu {
    fn default() -> Self {
        Lfu {
            enabled: false,
            log_factor: 10,
            decay_time: 1,
            phase: 0,
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

/// One database, or one hash slot of it: the keys and the expiry times of
/// those keys.
#[derive(Default)]
struct Tables {
    keys: Dict<Value, Access>,
    expires: Dict<i64>,
}

/// Where a database keeps its keys. Standalone (the default) is one table
/// pair inline, so a lookup costs what it did before slots existed plus one
/// well-predicted branch on the variant; slotted (cluster mode) has one
/// table pair per hash slot, so a slot's keys are found without walking the
/// others.
// Inline on purpose: boxing the standalone tables would add a pointer
// chase to every lookup.
#[allow(clippy::large_enum_variant)]
enum Layout {
    Single(Tables),
    Slotted(Box<Slots>),
}

impl Default for Layout {
    fn default() -> Self {
        Layout::Single(Tables::default())
    }
}

/// The per-slot tables of a slotted database.
///
/// A slot's tables are allocated with its first key and freed with its
/// last, so an empty slot costs one pointer (the whole directory is 128 KB,
/// the two count trees 256 KB). The count trees give each slot's size and
/// running sums in O(log SLOTS), which is what picks a slot weighted by its
/// size (random sampling fair over keys, not slots) and skips empty slots
/// in the cursor walks.
struct Slots {
    tables: Box<[Option<Box<Slot>>]>,
    keys: Fenwick,
    expires: Fenwick,
    len: usize,
    expires_len: usize,
    /// Slots with a rehash to finish in the cron (a slot may be listed
    /// again after being freed and recreated; a stale entry costs one
    /// check).
    rehashing: Vec<u16>,
    /// Where the cron's shrink pass resumes.
    resize_cursor: usize,
}

#[derive(Default)]
struct Slot {
    t: Tables,
    /// In `Slots::rehashing`.
    listed: bool,
}

/// Which count a slotted walk follows: slots with keys, or with TTLs.
#[derive(Clone, Copy)]
enum Which {
    Keys,
    Expires,
}

const SLOT_MASK: u64 = SLOTS as u64 - 1;
/// Slots the cron checks for shrinking per call (resuming after them).
const CRON_SLOTS: usize = 64;

impl Slots {
    fn new() -> Box<Slots> {
        Box::new(Slots {
            tables: (0..SLOTS).map(|_| None).collect(),
            keys: Fenwick::new(),
            expires: Fenwick::new(),
            len: 0,
            expires_len: 0,
            rehashing: Vec::new(),
            resize_cursor: 0,
        })
    }

    /// The tables of `key`'s slot, if it has any keys.
    #[inline(never)]
    fn find(&self, key: &[u8]) -> Option<&Tables> {
        self.tables[key_hash_slot(key) as usize]
            .as_deref()
            .map(|s| &s.t)
    }

    #[inline(never)]
    fn find_mut(&mut self, key: &[u8]) -> Option<&mut Tables> {
        self.tables[key_hash_slot(key) as usize]
            .as_deref_mut()
            .map(|s| &mut s.t)
    }

    #[inline(never)]
    fn locate_mut(&mut self, key: &[u8]) -> Option<(usize, &mut Tables)> {
        let slot = key_hash_slot(key) as usize;
        Some((slot, &mut self.tables[slot].as_deref_mut()?.t))
    }

    /// The tables of `slot`, made if absent.
    #[inline(never)]
    fn entry(&mut self, slot: usize) -> &mut Tables {
        &mut self.tables[slot].get_or_insert_with(Default::default).t
    }

    fn tree(&self, w: Which) -> &Fenwick {
        match w {
            Which::Keys => &self.keys,
            Which::Expires => &self.expires,
        }
    }

    /// Records `dk` keys and `de` TTLs added to (or, negative, removed from)
    /// `slot`, whose tables were just changed.
    #[inline(never)]
    fn count(&mut self, slot: usize, dk: i64, de: i64) {
        if dk != 0 {
            self.keys.add(slot, dk);
            self.len = (self.len as i64 + dk) as usize;
        }
        if de != 0 {
            self.expires.add(slot, de);
            self.expires_len = (self.expires_len as i64 + de) as usize;
        }
        let Some(s) = self.tables[slot].as_deref_mut() else {
            return;
        };
        if s.t.keys.is_empty() {
            debug_assert!(s.t.expires.is_empty());
            self.tables[slot] = None;
        } else if (dk > 0 || de > 0)
            && !s.listed
            && (s.t.keys.is_rehashing() || s.t.expires.is_rehashing())
        {
            // A table grows only on insertion.
            s.listed = true;
            self.rehashing.push(slot as u16);
        }
    }

    /// A random key (`Which::Keys`) or key with a TTL, from a slot picked
    /// by its size.
    #[inline(never)]
    fn random_key<R: rand::Rng>(&self, w: Which, rng: &mut R) -> Option<CBytes> {
        let (_, t) = self.weighted(w, rng)?;
        let k = match w {
            Which::Keys => t.keys.random(rng).map(|(k, _)| k),
            Which::Expires => t.expires.random(rng).map(|(k, _)| k),
        };
        k.map(CBytes::new)
    }

    /// A slot picked with probability proportional to its count.
    fn weighted<R: rand::Rng>(&self, w: Which, rng: &mut R) -> Option<(usize, &Tables)> {
        let total = match w {
            Which::Keys => self.len,
            Which::Expires => self.expires_len,
        };
        if total == 0 {
            return None;
        }
        let slot = self.tree(w).find(rng.gen_range(0..total as u64))?;
        Some((slot, &self.tables[slot].as_deref()?.t))
    }

    /// One step of a cursor walk over the slots with a nonzero `w` count:
    /// `f` scans one slot's tables from that slot's own cursor. See
    /// [`Keys::scan`] for the encoding.
    fn scan(&self, cursor: u64, w: Which, f: impl FnOnce(&Tables, u64) -> u64) -> u64 {
        let tree = self.tree(w);
        let want = (cursor & SLOT_MASK) as usize;
        let Some(slot) = tree.next_nonempty(want) else {
            return 0;
        };
        let inner = if slot == want { cursor >> SLOT_BITS } else { 0 };
        let t = &self.tables[slot].as_deref().expect("counted slot").t;
        Self::next_cursor(tree, slot, f(t, inner))
    }

    /// As [`Slots::scan`], with the slot's tables writable.
    fn scan_mut(&mut self, cursor: u64, w: Which, f: impl FnOnce(&mut Tables, u64) -> u64) -> u64 {
        let tree = match w {
            Which::Keys => &self.keys,
            Which::Expires => &self.expires,
        };
        let want = (cursor & SLOT_MASK) as usize;
        let Some(slot) = tree.next_nonempty(want) else {
            return 0;
        };
        let inner = if slot == want { cursor >> SLOT_BITS } else { 0 };
        let t = &mut self.tables[slot].as_deref_mut().expect("counted slot").t;
        Self::next_cursor(tree, slot, f(t, inner))
    }

    fn next_cursor(tree: &Fenwick, slot: usize, inner: u64) -> u64 {
        if inner != 0 {
            return inner << SLOT_BITS | slot as u64;
        }
        // This slot is done: the next one with keys, at its start (never 0,
        // as it is above this one); none left ends the walk.
        tree.next_nonempty(slot + 1).map_or(0, |s| s as u64)
    }

    fn cron(&mut self, rehash: bool) {
        // The same bucket budget as a one-table database's cron, spread over
        // the slots being rehashed.
        let mut budget = if rehash { 100 } else { 0 };
        while budget > 0 {
            let Some(&slot) = self.rehashing.last() else {
                break;
            };
            let Some(s) = self.tables[slot as usize].as_deref_mut() else {
                self.rehashing.pop();
                continue;
            };
            budget -= 1;
            let keys = s.t.keys.rehash(100);
            let expires = s.t.expires.rehash(100);
            if !keys && !expires {
                s.listed = false;
                self.rehashing.pop();
            }
        }
        let mut i = self.resize_cursor;
        let mut checked = 0;
        for _ in 0..SLOTS {
            if checked == CRON_SLOTS {
                break;
            }
            if self.tables[i].is_some() {
                checked += 1;
                self.shrink(i);
            }
            i = (i + 1) % SLOTS;
        }
        self.resize_cursor = i;
    }

    /// Starts shrinking `slot`'s tables if they are mostly empty.
    fn shrink(&mut self, slot: usize) {
        let Some(s) = self.tables[slot].as_deref_mut() else {
            return;
        };
        s.t.keys.shrink_if_needed();
        s.t.expires.shrink_if_needed();
        if !s.listed && (s.t.keys.is_rehashing() || s.t.expires.is_rehashing()) {
            s.listed = true;
            self.rehashing.push(slot as u16);
        }
    }
}

/// `key_hash_slot` kept out of line, as is every slotted branch of
/// `Layout`'s accessors: the standalone path, which never takes them, then
/// stays as small as before slots, and is inlined where it was.
#[inline(never)]
fn slot_hash(key: &[u8]) -> usize {
    key_hash_slot(key) as usize
}

impl Layout {
    /// The slot `key` is kept in: always 0 standalone, so the one-table
    /// path never hashes the key for its slot.
    #[inline]
    fn slot_of(&self, key: &[u8]) -> usize {
        match self {
            Layout::Single(_) => 0,
            Layout::Slotted(_) => slot_hash(key),
        }
    }

    /// The tables `key` is in, if they exist, with their slot (for
    /// [`Layout::count`]).
    #[inline]
    fn locate_mut(&mut self, key: &[u8]) -> Option<(usize, &mut Tables)> {
        match self {
            Layout::Single(t) => Some((0, t)),
            Layout::Slotted(s) => s.locate_mut(key),
        }
    }

    /// The tables `key` is (or would be) in, if they exist.
    #[inline]
    fn find(&self, key: &[u8]) -> Option<&Tables> {
        match self {
            Layout::Single(t) => Some(t),
            Layout::Slotted(s) => s.find(key),
        }
    }

    #[inline]
    fn find_mut(&mut self, key: &[u8]) -> Option<&mut Tables> {
        match self {
            Layout::Single(t) => Some(t),
            Layout::Slotted(s) => s.find_mut(key),
        }
    }

    /// The tables of `slot`, made if absent; the caller then inserts and
    /// calls [`Layout::count`].
    #[inline]
    fn entry(&mut self, slot: usize) -> &mut Tables {
        match self {
            Layout::Single(t) => t,
            Layout::Slotted(s) => s.entry(slot),
        }
    }

    /// See [`Slots::count`]; the one-table layout counts in its dicts.
    #[inline]
    fn count(&mut self, slot: usize, dk: i64, de: i64) {
        if let Layout::Slotted(s) = self {
            s.count(slot, dk, de);
        }
    }

    fn len(&self) -> usize {
        match self {
            Layout::Single(t) => t.keys.len(),
            Layout::Slotted(s) => s.len,
        }
    }

    fn expires_len(&self) -> usize {
        match self {
            Layout::Single(t) => t.expires.len(),
            Layout::Slotted(s) => s.expires_len,
        }
    }

    /// An empty layout of the same kind.
    fn empty_like(&self) -> Layout {
        match self {
            Layout::Single(_) => Layout::default(),
            Layout::Slotted(_) => Layout::Slotted(Slots::new()),
        }
    }

    /// Every table pair, in slot order.
    fn tables(&self) -> TablesIter<'_> {
        match self {
            Layout::Single(t) => TablesIter::One(Some(t)),
            Layout::Slotted(s) => TablesIter::Slots(s.tables.iter()),
        }
    }

    /// One step of a cursor walk over the keys (`Which::Keys`) or the TTLs:
    /// `f` scans one table from a table cursor and returns the next.
    #[inline]
    fn scan(&self, cursor: u64, w: Which, f: impl FnOnce(&Tables, u64) -> u64) -> u64 {
        match self {
            Layout::Single(t) => f(t, cursor),
            Layout::Slotted(s) => s.scan(cursor, w, f),
        }
    }

    #[inline]
    fn scan_mut(&mut self, cursor: u64, w: Which, f: impl FnOnce(&mut Tables, u64) -> u64) -> u64 {
        match self {
            Layout::Single(t) => f(t, cursor),
            Layout::Slotted(s) => s.scan_mut(cursor, w, f),
        }
    }
}

enum TablesIter<'a> {
    One(Option<&'a Tables>),
    Slots(std::slice::Iter<'a, Option<Box<Slot>>>),
}

impl<'a> Iterator for TablesIter<'a> {
    type Item = &'a Tables;
    fn next(&mut self) -> Option<&'a Tables> {
        match self {
            TablesIter::One(t) => t.take(),
            TablesIter::Slots(it) => it.find_map(|s| s.as_deref().map(|s| &s.t)),
        }
    }
}

/// The keys of a database, read-only, whatever its layout (one table, or
/// one per hash slot).
#[derive(Clone, Copy)]
pub struct Keys<'a>(&'a Layout);

impl<'a> Keys<'a> {
    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Every key with its value (slot by slot when slotted).
    pub fn iter(&self) -> impl Iterator<Item = (&'a [u8], &'a Value)> + 'a {
        self.0.tables().flat_map(|t| t.keys.iter())
    }

    /// Visits the entries at `cursor` and returns the next cursor (0 when
    /// the scan is complete), with SCAN's guarantee: a key present for the
    /// whole scan is returned at least once, whatever resizing happens in
    /// between.
    ///
    /// Standalone, the cursor is the table's own (see [`Dict::scan`]).
    /// Slotted, its low 14 bits are the slot and the bits above the slot's
    /// table cursor; when a slot's table is done the cursor moves to the
    /// next slot with keys at table cursor 0, and past the last slot it is
    /// 0. Each slot's walk thus has its table's guarantee, and a slot left
    /// behind cannot gain a key that was present all along.
    pub fn scan(&self, cursor: u64, mut f: impl FnMut(&[u8], &Value)) -> u64 {
        self.0
            .scan(cursor, Which::Keys, |t, c| t.keys.scan(c, &mut f))
    }

    /// Buckets of every table, for memory accounting.
    pub fn buckets(&self) -> usize {
        self.0.tables().map(|t| t.keys.buckets()).sum()
    }

    /// Bytes of the tables' buckets and nodes, keys included.
    pub fn table_bytes(&self) -> usize {
        self.0.tables().map(|t| t.keys.table_bytes()).sum()
    }

    /// The shape of the main table and, while a rehash runs, its target's
    /// (DEBUG HTSTATS); slotted, every slot's summed as one.
    pub fn stats(&self) -> Vec<TableStats> {
        stats_of(self.0.tables().map(|t| t.keys.stats()))
    }
}

fn stats_of(per_table: impl Iterator<Item = Vec<TableStats>>) -> Vec<TableStats> {
    let empty = || TableStats::new(0, std::iter::empty());
    let mut sum = vec![empty()];
    for s in per_table {
        for (i, t) in s.iter().enumerate() {
            if sum.len() <= i {
                sum.push(empty());
            }
            sum[i].add(t);
        }
    }
    sum
}

#[derive(Default)]
pub struct Db {
    /// Private: every write goes through `Db`'s methods, which run the
    /// snapshot hook (a BGSAVE in progress captures a key before it changes)
    /// and keep the slot counts.
    layout: Layout,
    /// Where the active expire cycle resumes its walk of the TTLs.
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

#[cfg(test)]
thread_local! {
    /// Entries the slot walks (`slot_keys`, `slot_len` standalone) looked
    /// at, for tests that check a slot costs only its own keys.
    static SLOT_WALK_VISITS: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

#[inline]
fn count_slot_walk_visit() {
    #[cfg(test)]
    SLOT_WALK_VISITS.with(|v| v.set(v.get() + 1));
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

/// The access clock (24-bit seconds) at `ms`.
fn access_clock_at(ms: i64) -> u32 {
    ((ms.max(0) / 1000) as u64 & CLOCK_MAX as u64) as u32
}

impl Db {
    /// A database kept in one table per hash slot (cluster mode), so a
    /// slot's keys are counted, listed and dropped at the cost of that slot
    /// alone. `Db::default()` is the standalone one-table layout.
    pub fn slotted() -> Db {
        Db {
            layout: Layout::Slotted(Slots::new()),
            ..Db::default()
        }
    }

    pub fn is_slotted(&self) -> bool {
        matches!(self.layout, Layout::Slotted(_))
    }

    /// Room for `keys` keys, `expires` of them with a TTL (RDB load).
    /// Standalone only: how a slotted database's keys spread over the slots
    /// is known only as they arrive, and each slot's table is small enough
    /// that growing it as they do costs little.
    pub fn reserve(&mut self, keys: usize, expires: usize) {
        if let Layout::Single(t) = &mut self.layout {
            t.keys.reserve(keys);
            t.expires.reserve(expires);
        }
    }

    /// The keys, read-only.
    pub fn keys(&self) -> Keys<'_> {
        Keys(&self.layout)
    }

    pub fn len(&self) -> usize {
        self.layout.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Keys with a TTL.
    pub fn expires_len(&self) -> usize {
        self.layout.expires_len()
    }

    /// Buckets of the TTL tables, for memory accounting.
    pub fn expires_buckets(&self) -> usize {
        self.layout.tables().map(|t| t.expires.buckets()).sum()
    }

    /// As [`Keys::table_bytes`], for the TTL tables.
    pub fn expires_table_bytes(&self) -> usize {
        self.layout.tables().map(|t| t.expires.table_bytes()).sum()
    }

    /// The TTL tables' shape (DEBUG HTSTATS), as [`Keys::stats`].
    pub fn expires_stats(&self) -> Vec<TableStats> {
        stats_of(self.layout.tables().map(|t| t.expires.stats()))
    }

    pub fn has_expire(&self, key: &[u8]) -> bool {
        self.expire_at(key).is_some()
    }

    #[inline]
    pub fn expire_at(&self, key: &[u8]) -> Option<i64> {
        let t = self.layout.find(key)?;
        if t.expires.is_empty() {
            return None;
        }
        t.expires.get(key).copied()
    }

    /// Past its time, as Redis counts it: the key lives through the
    /// millisecond of its deadline.
    #[inline]
    pub fn is_expired(&self, key: &[u8], now_ms: i64) -> bool {
        self.expire_at(key).is_some_and(|t| t < now_ms)
    }

    /// Deletes `key` if its time has passed; true if it did.
    #[inline]
    pub fn expire_if_needed(&mut self, key: &[u8], now_ms: i64) -> Option<Value> {
        self.clock_ms = now_ms;
        if self.is_expired(key, now_ms) {
            self.remove(key)
        } else {
            None
        }
    }

    /// The value, ignoring expiry (callers expire first). Counts as an
    /// access of the key (its LRU/LFU clock); see [`Db::peek`].
    pub fn get(&self, key: &[u8]) -> Option<&Value> {
        let (_, v, a) = self.layout.find(key)?.keys.get_entry_meta(key)?;
        self.touch(a);
        Some(v)
    }

    /// The value without counting an access (Redis's `LOOKUP_NOTOUCH`:
    /// TYPE, TTL, EXISTS, OBJECT).
    pub fn peek(&self, key: &[u8]) -> Option<&Value> {
        self.layout.find(key)?.keys.get(key)
    }

    pub fn get_mut(&mut self, key: &[u8]) -> Option<&mut Value> {
        let now = self.access_clock();
        let lfu = self.lfu;
        let Tables { keys, expires } = self.layout.find_mut(key)?;
        let (v, a) = keys.get_mut_meta(key)?;
        pre_write(&mut self.snap, expires, now, lfu, key, v, a);
        touch_with(a, now, lfu);
        Some(v)
    }

    /// The value at `key`, created with `make` if absent.
    pub fn get_or_add(&mut self, key: &[u8], make: impl FnOnce() -> Value) -> &mut Value {
        if !self.contains(key) {
            self.add(key, make());
        }
        self.get_mut(key).expect("just added")
    }

    /// Sets the time accesses are stamped with (unix ms).
    pub fn set_clock(&mut self, now_ms: i64) {
        self.clock_ms = now_ms;
        self.lfu.phase = (now_ms.max(0) / 1000 % 60) as u32;
    }

    fn access_clock(&self) -> u32 {
        access_clock_at(self.clock_ms)
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
        let (_, _, a) = self.layout.find(key)?.keys.get_entry_meta(key)?;
        Some(elapsed_s(self.access_clock(), a.clock()) as u64 * 1000)
    }

    /// The word Redis keeps in an object's `lru` field (DEBUG OBJECT): the
    /// access clock, or under LFU the minute of the last decrement (16
    /// bits) above the counter.
    pub fn access_word(&self, key: &[u8]) -> Option<u32> {
        let (_, _, a) = self.layout.find(key)?.keys.get_entry_meta(key)?;
        Some(match self.lfu.enabled {
            false => a.clock(),
            true => ((a.clock() / 60) & 0xffff) << 8 | a.counter() as u32,
        })
    }

    /// The LFU counter of `key` after decay (OBJECT FREQ), not counting as
    /// an access.
    pub fn freq(&self, key: &[u8]) -> Option<u8> {
        let (_, _, a) = self.layout.find(key)?.keys.get_entry_meta(key)?;
        Some(decayed(a, self.access_clock(), self.lfu))
    }

    /// Sets `key`'s access clock to `idle_s` seconds ago and/or its LFU
    /// counter (RESTORE IDLETIME / FREQ, the RDB IDLE / FREQ opcodes).
    pub fn set_access(&mut self, key: &[u8], idle_s: Option<u64>, freq: Option<u8>) {
        let now = self.access_clock();
        let Some(t) = self.layout.find_mut(key) else {
            return;
        };
        if let Some((_, a)) = t.keys.get_mut_meta(key) {
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
        self.layout
            .find(key)
            .is_some_and(|t| t.keys.contains_key(key))
    }

    /// Stores `val` under `key`, dropping any TTL unless `keep_ttl`; the
    /// value it replaced is returned for the caller to free.
    pub fn set(&mut self, key: &[u8], val: Value, keep_ttl: bool) -> Option<Value> {
        let now = self.access_clock();
        let lfu = self.lfu;
        let slot = self.layout.slot_of(key);
        let Tables { keys, expires } = self.layout.entry(slot);
        match keys.get_mut_meta(key) {
            Some((v, a)) => {
                pre_write(&mut self.snap, expires, now, lfu, key, v, a);
                let old = std::mem::replace(v, val);
                // As Redis's dbOverwrite: a new value is a fresh access under
                // LRU; under LFU it inherits the counter (the lookup that
                // preceded the write already counted the access).
                if !lfu.enabled {
                    a.store(now, a.counter());
                }
                // The entry was saved above with its TTL, if a snapshot
                // wanted it; a new key has no TTL to drop.
                if !keep_ttl && !expires.is_empty() && expires.remove(key).is_some() {
                    self.layout.count(slot, 0, -1);
                }
                Some(old)
            }
            None => {
                keys.insert_new_guarded(key, val, Access::new(now, self.epoch));
                self.layout.count(slot, 1, 0);
                None
            }
        }
    }

    /// Adds a key known to be absent.
    pub fn add(&mut self, key: &[u8], val: Value) {
        let a = Access::new(self.access_clock(), self.epoch);
        let slot = self.layout.slot_of(key);
        self.layout.entry(slot).keys.insert_new_guarded(key, val, a);
        self.layout.count(slot, 1, 0);
    }

    /// Takes `key` out with its access clock and expiry time (RENAME, MOVE,
    /// SWAPDB-like moves keep both, as Redis moves the object).
    pub fn take_entry(&mut self, key: &[u8]) -> Option<(CBytes, Value, Access, Option<i64>)> {
        let (v, a, exp) = self.take_key(key)?;
        Some((CBytes::new(key), v, a, exp))
    }

    // Inlined into both `take_entry` and `remove`, so that `remove` drops
    // the parts it does not return in place rather than moving them out.
    #[inline(always)]
    fn take_key(&mut self, key: &[u8]) -> Option<(Value, Access, Option<i64>)> {
        let (slot, Tables { keys, expires }) = self.layout.locate_mut(key)?;
        let (v, mut a) = keys.remove_meta(key)?;
        // A removed entry (its TTL still in `expires`) goes to the running
        // snapshot first if it is not there yet.
        if self.snap.is_some() {
            let now = access_clock_at(self.clock_ms);
            pre_write(&mut self.snap, expires, now, self.lfu, key, &v, &mut a);
        }
        let exp = if expires.is_empty() {
            None
        } else {
            expires.remove(key)
        };
        self.layout.count(slot, -1, -(exp.is_some() as i64));
        Some((v, a, exp))
    }

    /// Puts an entry from [`Db::take_entry`] under `key`, which must be
    /// absent.
    pub fn put_entry(&mut self, key: CBytes, val: Value, mut access: Access, expire: Option<i64>) {
        debug_assert!(!self.contains(&key));
        // A new key here as far as a running snapshot is concerned.
        access.1 = self.epoch;
        let slot = self.layout.slot_of(&key);
        let t = self.layout.entry(slot);
        if let Some(at) = expire {
            t.expires.insert_new_guarded(&key, at, ());
        }
        t.keys.insert_new_guarded(key, val, access);
        self.layout.count(slot, 1, expire.is_some() as i64);
    }

    /// A random key, or `None` when empty. Slotted, the slot is picked with
    /// probability proportional to its size, so a key is as likely as in
    /// one table.
    pub fn random_key<R: rand::Rng>(&self, rng: &mut R) -> Option<CBytes> {
        match &self.layout {
            Layout::Single(t) => t.keys.random(rng).map(|(k, _)| CBytes::new(k)),
            Layout::Slotted(s) => s.random_key(Which::Keys, rng),
        }
    }

    /// A random key with a TTL (volatile-random eviction), or `None`.
    pub fn random_volatile_key<R: rand::Rng>(&self, rng: &mut R) -> Option<CBytes> {
        match &self.layout {
            Layout::Single(t) => t.expires.random(rng).map(|(k, _)| CBytes::new(k)),
            Layout::Slotted(s) => s.random_key(Which::Expires, rng),
        }
    }

    pub fn remove(&mut self, key: &[u8]) -> Option<Value> {
        self.take_key(key).map(|(v, _, _)| v)
    }

    /// Sets the expiry of an existing key.
    pub fn set_expire(&mut self, key: &[u8], at_ms: i64) {
        debug_assert!(self.contains(key));
        let Some((slot, t)) = self.layout.locate_mut(key) else {
            return;
        };
        if self.snap.is_some() {
            before_ttl_change(&mut self.snap, t, self.clock_ms, self.lfu, key);
        }
        match t.expires.get_mut(key) {
            Some(t) => *t = at_ms,
            None => {
                t.expires.insert_new_guarded(key, at_ms, ());
                self.layout.count(slot, 0, 1);
            }
        }
    }

    /// Removes the TTL; true if there was one.
    pub fn persist(&mut self, key: &[u8]) -> bool {
        let Some((slot, t)) = self.layout.locate_mut(key) else {
            return false;
        };
        if t.expires.is_empty() {
            return false;
        }
        if self.snap.is_some() {
            before_ttl_change(&mut self.snap, t, self.clock_ms, self.lfu, key);
        }
        let had = t.expires.remove(key).is_some();
        if had {
            self.layout.count(slot, 0, -1);
        }
        had
    }

    // ---------------------------------------------------------- hash slots
    // A `slot` argument is below [`SLOTS`].

    /// Keys in `slot`. O(1) slotted; standalone (which has no use for it)
    /// it hashes every key, so that both layouts answer alike.
    pub fn slot_len(&self, slot: usize) -> usize {
        match &self.layout {
            Layout::Slotted(s) => s.tables[slot].as_ref().map_or(0, |s| s.t.keys.len()),
            Layout::Single(_) => self.slot_walk(slot).count(),
        }
    }

    /// Up to `max` keys of `slot` (CLUSTER GETKEYSINSLOT, slot migration),
    /// walking only that slot's table when slotted.
    pub fn slot_keys(&self, slot: usize, max: usize) -> Vec<CBytes> {
        self.slot_walk(slot).take(max).map(CBytes::new).collect()
    }

    /// The keys of `slot`: its own table slotted, every key filtered by its
    /// hash standalone.
    fn slot_walk(&self, slot: usize) -> impl Iterator<Item = &[u8]> + '_ {
        let (t, filter) = match &self.layout {
            Layout::Single(t) => (Some(t), true),
            Layout::Slotted(s) => (s.tables[slot].as_deref().map(|s| &s.t), false),
        };
        t.into_iter()
            .flat_map(|t| t.keys.iter())
            .inspect(|_| count_slot_walk_visit())
            .map(|(k, _)| k)
            .filter(move |k| !filter || key_hash_slot(k) as usize == slot)
    }

    /// Deletes every key of `slot` with its TTL and returns how many there
    /// were. A running snapshot first saves those it has not yet, as for any
    /// deletion. Slotted, the slot's tables go at once.
    pub fn clear_slot(&mut self, slot: usize) -> usize {
        let Layout::Slotted(s) = &mut self.layout else {
            let keys: Vec<CBytes> = self.slot_walk(slot).map(CBytes::new).collect();
            for k in &keys {
                self.remove(k);
            }
            return keys.len();
        };
        let Some(mut gone) = s.tables[slot].take() else {
            return 0;
        };
        let Tables { keys, expires } = &mut gone.t;
        let (n, e) = (keys.len(), expires.len());
        if self.snap.is_some() {
            let now = access_clock_at(self.clock_ms);
            for (k, v, a) in keys.iter_meta_mut() {
                pre_write(&mut self.snap, expires, now, self.lfu, k, v, a);
            }
        }
        s.keys.add(slot, -(n as i64));
        s.expires.add(slot, -(e as i64));
        s.len -= n;
        s.expires_len -= e;
        n
    }

    /// Empties the database, returning the old contents (to drop elsewhere).
    /// The layout, clock and LFU settings stay. A running snapshot first
    /// saves the rest of the old contents (synchronously: FLUSHDB/FLUSHALL
    /// during a BGSAVE are rare) and carries on with the empty database.
    pub fn take(&mut self) -> Db {
        if self.snap.is_some() {
            while !self.snapshot_step(usize::MAX, usize::MAX) {}
        }
        let fresh = Db {
            layout: self.layout.empty_like(),
            clock_ms: self.clock_ms,
            lfu: self.lfu,
            epoch: self.epoch,
            snap: self.snap.take(),
            ..Db::default()
        };
        std::mem::replace(self, fresh)
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
            self.len(),
            self.expires_len(),
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
        let Db { layout, snap, .. } = self;
        let Some(cap) = snap.as_deref_mut() else {
            return true;
        };
        let start = cap.keys_saved;
        while !cap.walk_done {
            if (cap.keys_saved - start) as usize >= max_keys || cap.out.len() >= max_bytes {
                return false;
            }
            let epoch = cap.epoch;
            let cursor = cap.cursor;
            cap.cursor = layout.scan_mut(cursor, Which::Keys, |t, c| {
                let Tables { keys, expires } = t;
                keys.scan_meta_mut(c, |k, v, a| {
                    if a.1 < epoch {
                        a.1 = epoch;
                        save_entry(cap, expires, now, lfu, k, v, a);
                    }
                })
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

    /// One step of active expiry: walks the TTLs from the saved cursor
    /// (slot by slot when slotted, skipping slots without TTLs) until
    /// `sample` keys were looked at, deletes those past their time and
    /// returns them, with their values for the caller to free, and the
    /// number sampled.
    pub fn expire_sample(&mut self, now_ms: i64, sample: usize) -> (usize, Vec<(CBytes, Value)>) {
        let mut seen = 0;
        let mut dead = Vec::new();
        let mut ttl_sum = 0i64;
        let mut ttl_n = 0i64;
        let mut buckets = 0;
        loop {
            self.expire_cursor = self
                .layout
                .scan(self.expire_cursor, Which::Expires, |t, c| {
                    t.expires.scan(c, |k, &t| {
                        seen += 1;
                        if t < now_ms {
                            dead.push(CBytes::new(k));
                        } else {
                            ttl_sum += t - now_ms;
                            ttl_n += 1;
                        }
                    })
                });
            buckets += 1;
            if self.expire_cursor == 0 || seen >= sample || buckets >= sample * 20 {
                break;
            }
        }
        let dead: Vec<(CBytes, Value)> = dead
            .into_iter()
            .filter_map(|k| {
                let v = self.remove(&k)?;
                Some((k, v))
            })
            .collect();
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
        self.len() + self.expires_len()
    }

    /// Eviction sampling: up to `n` random keys (among keys with a TTL if
    /// `volatile`), each passed to `f` with what the policies rank by. Not
    /// an access. Redis samples the same way (a few random keys per round,
    /// the best kept in a pool by the caller).
    ///
    /// Slotted, the sample is a run of `n` keys in slot order starting at a
    /// uniformly random key: within a slot it is that table's sample, and a
    /// slot too small for the rest of the run hands it on to the next slot.
    /// So every key is as likely to be sampled as in one table, and small
    /// slots are not over-sampled as picking slots alike would.
    pub fn sample_for_eviction<R: rand::Rng>(
        &self,
        n: usize,
        volatile: bool,
        rng: &mut R,
        mut f: impl FnMut(&[u8], EvictSample),
    ) {
        let now = self.access_clock();
        let lfu = self.lfu;
        let s = match &self.layout {
            Layout::Single(t) => {
                sample_tables(t, volatile, n, rng, now, lfu, &mut f);
                return;
            }
            Layout::Slotted(s) => s,
        };
        let (w, total) = if volatile {
            (Which::Expires, s.expires_len)
        } else {
            (Which::Keys, s.len)
        };
        let tree = s.tree(w);
        let mut left = n.min(total);
        if left == 0 {
            return;
        }
        let start = rng.gen_range(0..total as u64);
        let mut slot = tree.find(start).expect("below the total");
        // Keys of the first slot before the run's start.
        let mut skip = (start - tree.below(slot)) as usize;
        // A slot's sample may come back short; the run still moves on, so
        // this ends after at most `left` slots.
        while left > 0 {
            let t = &s.tables[slot].as_deref().expect("counted slot").t;
            let size = if volatile {
                t.expires.len()
            } else {
                t.keys.len()
            };
            let take = left.min(size - skip);
            sample_tables(t, volatile, take, rng, now, lfu, &mut f);
            left -= take;
            skip = 0;
            slot = tree
                .next_nonempty(slot + 1)
                .or_else(|| tree.next_nonempty(0))
                .expect("nonempty");
        }
    }

    /// Housekeeping from the server's cron: bounded rehash work (unless
    /// `activerehashing no`: then tables rehash only as commands use them),
    /// shrinking.
    pub fn cron(&mut self, rehash: bool) {
        match &mut self.layout {
            Layout::Single(t) => {
                for _ in 0..if rehash { 100 } else { 0 } {
                    if !t.keys.rehash(100) {
                        break;
                    }
                }
                if rehash {
                    t.expires.rehash(100);
                }
                t.keys.shrink_if_needed();
                t.expires.shrink_if_needed();
            }
            Layout::Slotted(s) => s.cron(rehash),
        }
    }
}

/// Saves a key's entry to the running snapshot before its TTL changes.
fn before_ttl_change(
    snap: &mut Option<Box<Capture>>,
    t: &mut Tables,
    clock_ms: i64,
    lfu: Lfu,
    key: &[u8],
) {
    let Tables { keys, expires } = t;
    if let Some((v, a)) = keys.get_mut_meta(key) {
        pre_write(snap, expires, access_clock_at(clock_ms), lfu, key, v, a);
    }
}

/// Up to `n` sampled entries of one table pair for eviction.
fn sample_tables<R: rand::Rng>(
    t: &Tables,
    volatile: bool,
    n: usize,
    rng: &mut R,
    now: u32,
    lfu: Lfu,
    f: &mut impl FnMut(&[u8], EvictSample),
) {
    let sample = |a: &Access, expire: Option<i64>| EvictSample {
        idle_ms: elapsed_s(now, a.clock()) as u64 * 1000,
        freq: decayed(a, now, lfu),
        expire,
    };
    if volatile {
        t.expires.sample(rng, n, |key, &at, _| {
            if let Some((_, _, a)) = t.keys.get_entry_meta(key) {
                f(key, sample(a, Some(at)));
            }
        });
    } else {
        t.keys.sample(rng, n, |key, _, a| {
            let exp = if t.expires.is_empty() {
                None
            } else {
                t.expires.get(key).copied()
            };
            f(key, sample(a, exp))
        });
    }
}

fn elapsed_s(now: u32, then: u32) -> u32 {
    if now >= then {
        now - then
    } else {
        now + (CLOCK_MAX - then)
    }
}

/// The LFU counter after one decrement per `decay_time` turns of the
/// minute since the last access.
fn decayed(a: &Access, now: u32, lfu: Lfu) -> u8 {
    let counter = a.counter();
    if lfu.decay_time == 0 {
        return counter;
    }
    let idle = elapsed_s(now, a.clock());
    let minutes = idle / 60 + u32::from(idle % 60 > lfu.phase);
    let periods = minutes / lfu.decay_time;
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

    pub(super) type Image = BTreeMap<(usize, Vec<u8>), (Vec<u8>, Option<i64>)>;

    /// Wraps the records of `db` (taken from its capture) in a file and
    /// loads it back: key -> (string value, expire).
    pub(super) fn take_output(d: &mut Db) -> Option<(usize, Vec<u8>)> {
        d.snapshot_output().map(|(i, b, p)| {
            let mut out = Vec::new();
            snapshot::compress_marked(b, p, &mut out);
            b.clear();
            p.clear();
            (i, out)
        })
    }

    pub(super) fn snapshot_contents(parts: &[(usize, Vec<u8>)]) -> Image {
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
        snapshot_image_survives_writes(db_at(1_000));
    }

    #[test]
    fn slotted_snapshot_saves_the_image_at_its_start_whatever_the_writes() {
        let mut d = Db::slotted();
        d.set_clock(1_000);
        snapshot_image_survives_writes(d);
    }

    fn snapshot_image_survives_writes(mut d: Db) {
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
        let now: Vec<Vec<u8>> = d.keys().iter().map(|(k, _)| k.to_vec()).collect();
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
        // What counts is the minute turning, as on Redis's minutes clock:
        // two seconds across it decay, 59 within a minute do not.
        d.lfu.decay_time = 1;
        d.set_clock(10 * 60_000 + 59_000);
        d.get(b"k");
        let f = d.freq(b"k").unwrap();
        d.set_clock(11 * 60_000 + 1_000);
        assert_eq!(d.freq(b"k"), Some(f - 1));
        d.get(b"k");
        let f = d.freq(b"k").unwrap();
        d.set_clock(11 * 60_000 + 59_999);
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
        assert!(a.is_empty() && a.expires_len() == 0);
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
        assert!(a.expires_len() == 0);
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
        assert!(!d.is_slotted());
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
        assert!(d.expire_if_needed(b"k", 10_000).is_none());
        assert_eq!(d.clock_ms, 10_000);
        assert!(d.expire_if_needed(b"k", 10_001).is_some());
        assert!(d.is_empty() && d.expires_len() == 0);
    }
}

#[cfg(test)]
#[path = "db_slot_tests.rs"]
mod slot_tests;
