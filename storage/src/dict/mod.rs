//! A chained hash table with incremental rehashing and a stateless scan
//! cursor, as Redis's dict.
//!
//! Why not `HashMap`: a keyspace of millions of keys must never stop the
//! server to resize (a `HashMap` moves every entry at once), and SCAN must
//! return every key present for the whole iteration even while the table
//! grows or shrinks. Both follow from Redis's design:
//!
//! - Two tables. Growing or shrinking allocates the second and moves one
//!   bucket at a time on each write (and in the server's cron), so work per
//!   operation stays O(1). Lookups check both tables while a rehash runs.
//! - Sizes are powers of two and a key's bucket is `hash & mask`. The SCAN
//!   cursor is a bucket index incremented on its *reversed* bits, so the
//!   buckets a small table's bucket splits into (same low bits) come right
//!   after it in cursor order. A full scan therefore visits each surviving
//!   key at least once across any number of resizes (maybe more than once).
//!
//! Invariants: `t[1]` is non-empty only while rehashing; buckets of `t[0]`
//! below `rehash_idx` are empty; a key is in exactly one table.

mod node;
use node::{Link, NodeBox};

/// Buckets `sample` loads ahead of the one it reads.
const AHEAD: usize = 4;

#[inline]
fn prefetch<T>(p: &T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch is a hint: it never faults, whatever the address.
    unsafe {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        _mm_prefetch::<_MM_HINT_T0>(p as *const T as *const i8);
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

struct Table<V, M> {
    buckets: Vec<Link<V, M>>,
    used: usize,
}

impl<V, M> Table<V, M> {
    fn new(size: usize) -> Self {
        let mut buckets = Vec::with_capacity(size);
        buckets.resize_with(size, || None);
        Table { buckets, used: 0 }
    }
    fn mask(&self) -> u64 {
        (self.buckets.len() as u64).wrapping_sub(1)
    }
    fn find(&self, h: u64, key: &[u8]) -> Option<&NodeBox<V, M>> {
        if self.buckets.is_empty() {
            return None;
        }
        let mut link = &self.buckets[(h & self.mask()) as usize];
        while let Some(n) = link {
            if n.key() == key {
                return Some(n);
            }
            link = &n.next;
        }
        None
    }

    fn find_mut(&mut self, h: u64, key: &[u8]) -> Option<&mut NodeBox<V, M>> {
        if self.buckets.is_empty() {
            return None;
        }
        let mask = self.mask();
        let mut link = &mut self.buckets[(h & mask) as usize];
        while let Some(n) = link {
            if n.key() == key {
                return Some(n);
            }
            link = &mut n.next;
        }
        None
    }
}

/// Keys to values `V`, each entry with metadata `M` chosen by the dict's
/// user: `()` (zero bytes) unless asked for, so only the main keyspace
/// pays for its access clock (see `db::Access`).
pub struct Dict<V, M = ()> {
    t: [Table<V, M>; 2],
    rehash_idx: Option<usize>,
    hasher: ahash::RandomState,
    /// The nodes' allocation sizes, summed (MEMORY STATS, without a walk).
    node_bytes: usize,
}

const INITIAL: usize = 4;

fn new_hasher() -> ahash::RandomState {
    // Tests draw from seeded RNGs; fixed hash seeds put the entries in the
    // same buckets every run, so what a test draws is the same every run.
    if cfg!(test) {
        ahash::RandomState::with_seeds(1, 2, 3, 4)
    } else {
        ahash::RandomState::new()
    }
}

/// Whether the memory for a keyspace table of this many bytes may be
/// allocated now (see [`Dict::insert_new_guarded`]).
static GROW_GUARD: std::sync::OnceLock<fn(usize) -> bool> = std::sync::OnceLock::new();

/// Sets the check keyspace tables ask before growing: the server's
/// `maxmemory`. Set once; later calls change nothing.
pub fn set_grow_guard(allowed: fn(usize) -> bool) {
    let _ = GROW_GUARD.set(allowed);
}

/// The shape of one chained hash table (DEBUG HTSTATS).
#[derive(Debug, PartialEq)]
pub struct TableStats {
    /// Buckets.
    pub size: usize,
    /// Entries.
    pub used: usize,
    /// Non-empty buckets, and the longest chain.
    pub slots: usize,
    pub max_chain: usize,
    /// Entries found walking the chains (`used` when consistent).
    pub chained: usize,
    /// How many buckets have a chain of each length (index), the last
    /// counting every longer chain too, as Redis's 50-slot vector.
    pub chains: [usize; 50],
}

impl TableStats {
    /// From a table's entry count and each bucket's chain length.
    pub fn new(used: usize, chain_lens: impl Iterator<Item = usize>) -> Self {
        let mut s = TableStats {
            size: 0,
            used,
            slots: 0,
            max_chain: 0,
            chained: 0,
            chains: [0; 50],
        };
        for len in chain_lens {
            s.size += 1;
            s.chains[len.min(49)] += 1;
            s.chained += len;
            if len > 0 {
                s.slots += 1;
                s.max_chain = s.max_chain.max(len);
            }
        }
        s
    }
}

impl TableStats {
    /// Adds another table's shape to this one, as if the two tables were
    /// one (a database kept in one table per hash slot).
    pub fn add(&mut self, o: &TableStats) {
        self.size += o.size;
        self.used += o.used;
        self.slots += o.slots;
        self.max_chain = self.max_chain.max(o.max_chain);
        self.chained += o.chained;
        for (a, b) in self.chains.iter_mut().zip(o.chains.iter()) {
            *a += b;
        }
    }
}

impl<V, M: Default> Default for Dict<V, M> {
    fn default() -> Self {
        Self::with_meta()
    }
}

impl<V> Dict<V> {
    pub fn new() -> Self {
        Self::with_meta()
    }
}

impl<V, M: Default> Dict<V, M> {
    /// An empty dict whose entries carry metadata `M`.
    pub fn with_meta() -> Self {
        Dict {
            t: [Table::new(0), Table::new(0)],
            rehash_idx: None,
            hasher: new_hasher(),
            node_bytes: 0,
        }
    }

    pub fn len(&self) -> usize {
        self.t[0].used + self.t[1].used
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Number of buckets (both tables), for INFO and memory accounting.
    pub fn buckets(&self) -> usize {
        self.t[0].buckets.len() + self.t[1].buckets.len()
    }

    /// Heap bytes of the buckets and the nodes, keys included, not of what
    /// the values own.
    pub fn table_bytes(&self) -> usize {
        self.buckets() * std::mem::size_of::<Link<V, M>>() + self.node_bytes
    }

    pub fn is_rehashing(&self) -> bool {
        self.rehash_idx.is_some()
    }

    fn hash(&self, key: &[u8]) -> u64 {
        self.hasher.hash_one(key)
    }

    /// Moves up to `n` buckets to the new table; visits at most `10n` empty
    /// ones so one call is bounded. Returns true while a rehash remains.
    pub fn rehash(&mut self, n: usize) -> bool {
        let Some(mut idx) = self.rehash_idx else {
            return false;
        };
        let mut empty_visits = n * 10;
        for _ in 0..n {
            if self.t[0].used == 0 {
                break;
            }
            while self.t[0].buckets[idx].is_none() {
                idx += 1;
                empty_visits -= 1;
                if empty_visits == 0 {
                    self.rehash_idx = Some(idx);
                    return true;
                }
            }
            let mut link = self.t[0].buckets[idx].take();
            let mask = self.t[1].mask();
            while let Some(mut node) = link {
                link = node.next.take();
                let b = (self.hash(node.key()) & mask) as usize;
                node.next = self.t[1].buckets[b].take();
                self.t[1].buckets[b] = Some(node);
                self.t[0].used -= 1;
                self.t[1].used += 1;
            }
            idx += 1;
        }
        if self.t[0].used == 0 {
            self.t[0] = std::mem::replace(&mut self.t[1], Table::new(0));
            self.rehash_idx = None;
            return false;
        }
        self.rehash_idx = Some(idx);
        true
    }

    fn step(&mut self) {
        if self.rehash_idx.is_some() {
            self.rehash(1);
        }
    }

    fn resize_to(&mut self, want: usize) {
        let size = want.max(INITIAL).next_power_of_two();
        if self.rehash_idx.is_some() || size == self.t[0].buckets.len() {
            return;
        }
        if self.t[0].buckets.is_empty() {
            self.t[0] = Table::new(size);
        } else {
            self.t[1] = Table::new(size);
            self.rehash_idx = Some(0);
        }
    }

    /// Sizes the table for `n` entries now (RDB load), so inserting them
    /// rehashes nothing.
    pub fn reserve(&mut self, n: usize) {
        if n > self.t[0].buckets.len() {
            self.resize_to(n);
        }
    }

    /// Shrinks a table that is under 10% full, as Redis's cron does.
    pub fn shrink_if_needed(&mut self) {
        let size = self.t[0].buckets.len();
        if self.rehash_idx.is_none() && size > INITIAL && self.len() * 100 / size < 10 {
            self.resize_to(self.len());
        }
    }

    pub fn get(&self, key: &[u8]) -> Option<&V> {
        self.get_entry(key).map(|(_, v)| v)
    }

    pub fn get_entry(&self, key: &[u8]) -> Option<(&[u8], &V)> {
        if self.is_empty() {
            return None;
        }
        let h = self.hash(key);
        let n = self.t[0].find(h, key).or_else(|| self.t[1].find(h, key))?;
        Some((n.key(), &n.val))
    }

    pub fn contains_key(&self, key: &[u8]) -> bool {
        self.get_entry(key).is_some()
    }

    pub fn get_mut(&mut self, key: &[u8]) -> Option<&mut V> {
        self.find_mut(key).map(|n| &mut n.val)
    }

    /// The entry with its metadata.
    pub fn get_entry_meta(&self, key: &[u8]) -> Option<(&[u8], &V, &M)> {
        if self.is_empty() {
            return None;
        }
        let h = self.hash(key);
        let n = self.t[0].find(h, key).or_else(|| self.t[1].find(h, key))?;
        Some((n.key(), &n.val, &n.meta))
    }

    /// The value and metadata, both writable.
    pub fn get_mut_meta(&mut self, key: &[u8]) -> Option<(&mut V, &mut M)> {
        self.find_mut(key).map(|n| {
            let (_, val, meta, _) = n.parts_mut();
            (val, meta)
        })
    }

    fn find_mut(&mut self, key: &[u8]) -> Option<&mut NodeBox<V, M>> {
        if self.is_empty() {
            return None;
        }
        self.step();
        let h = self.hash(key);
        let [t0, t1] = &mut self.t;
        t0.find_mut(h, key).or_else(|| t1.find_mut(h, key))
    }

    /// Inserts or replaces; returns the previous value.
    pub fn insert(&mut self, key: impl AsRef<[u8]>, val: V) -> Option<V> {
        if let Some(slot) = self.get_mut(key.as_ref()) {
            return Some(std::mem::replace(slot, val));
        }
        self.insert_new(key, val);
        None
    }

    /// Inserts a key known to be absent.
    pub fn insert_new(&mut self, key: impl AsRef<[u8]>, val: V) {
        self.insert_new_meta(key, val, M::default());
    }

    /// Inserts a key known to be absent, with its metadata.
    pub fn insert_new_meta(&mut self, key: impl AsRef<[u8]>, val: V, meta: M) {
        self.insert_inner(key.as_ref(), val, meta, false);
    }

    /// As [`Dict::insert_new_meta`], for a keyspace table (keys, TTLs):
    /// its growth waits while the [`set_grow_guard`] function refuses the
    /// memory, as Redis's `dictExpandAllowed`.
    pub fn insert_new_guarded(&mut self, key: impl AsRef<[u8]>, val: V, meta: M) {
        self.insert_inner(key.as_ref(), val, meta, true);
    }

    fn insert_inner(&mut self, key: &[u8], val: V, meta: M, guarded: bool) {
        self.step();
        if self.rehash_idx.is_none()
            && self.t[0].used >= self.t[0].buckets.len()
            && (!guarded || self.may_grow())
        {
            self.resize_to(self.t[0].used + 1);
        }
        let h = self.hash(key);
        let t = if self.rehash_idx.is_some() {
            &mut self.t[1]
        } else {
            &mut self.t[0]
        };
        let b = (h & t.mask()) as usize;
        let next = t.buckets[b].take();
        t.buckets[b] = Some(NodeBox::new(key, val, meta, next));
        t.used += 1;
        self.node_bytes += NodeBox::<V, M>::layout(key.len()).size();
    }

    /// Whether a full table may grow now: past 1.618 entries per bucket
    /// always (chains get too long), below only if the guard allows the new
    /// table's bytes.
    fn may_grow(&self) -> bool {
        let (used, size) = (self.t[0].used, self.t[0].buckets.len());
        if size == 0 || used * 1000 > size * 1618 {
            return true;
        }
        let bytes = (used + 1).next_power_of_two() * std::mem::size_of::<Link<V, M>>();
        GROW_GUARD.get().is_none_or(|allowed| allowed(bytes))
    }

    /// Returns the value for `key`, inserting `f()` first if absent.
    pub fn get_or_insert_with(&mut self, key: &[u8], f: impl FnOnce() -> V) -> &mut V {
        if !self.contains_key(key) {
            self.insert_new(key, f());
        }
        self.get_mut(key).expect("just inserted")
    }

    /// Removes an entry, returning its value (the caller has its key).
    pub fn remove(&mut self, key: &[u8]) -> Option<V> {
        self.remove_node(key).map(|n| n.into_parts().0)
    }

    /// Removes an entry, returning it with its metadata (RENAME and MOVE
    /// carry a key's access clock over, as Redis moves the object).
    pub fn remove_meta(&mut self, key: &[u8]) -> Option<(V, M)> {
        self.remove_node(key).map(NodeBox::into_parts)
    }

    fn remove_node(&mut self, key: &[u8]) -> Option<NodeBox<V, M>> {
        if self.is_empty() {
            return None;
        }
        self.step();
        let h = self.hash(key);
        for t in self.t.iter_mut() {
            if t.buckets.is_empty() {
                continue;
            }
            let mask = t.mask();
            let mut link = &mut t.buckets[(h & mask) as usize];
            while link.as_ref().is_some_and(|n| n.key() != key) {
                link = &mut link.as_mut()?.next;
            }
            if let Some(mut node) = link.take() {
                *link = node.next.take();
                t.used -= 1;
                self.node_bytes -= NodeBox::<V, M>::layout(key.len()).size();
                return Some(node);
            }
        }
        None
    }

    /// The main table's shape and, while a rehash runs, its target's.
    pub fn stats(&self) -> Vec<TableStats> {
        let n = if self.rehash_idx.is_some() { 2 } else { 1 };
        self.t[..n]
            .iter()
            .map(|t| {
                let chains = t.buckets.iter().map(|mut link| {
                    let mut len = 0;
                    while let Some(n) = link {
                        len += 1;
                        link = &n.next;
                    }
                    len
                });
                TableStats::new(t.used, chains)
            })
            .collect()
    }

    /// Empties the dict, returning the old contents so a caller can drop a
    /// large one off the hot path (FLUSHALL ASYNC, UNLINK).
    pub fn take(&mut self) -> Dict<V, M> {
        std::mem::take(self)
    }

    /// Every entry with its metadata writable (a slot emptied at once
    /// passes each entry to the snapshot hook first).
    pub fn iter_meta_mut(&mut self) -> impl Iterator<Item = (&[u8], &V, &mut M)> {
        self.t
            .iter_mut()
            .flat_map(|t| t.buckets.iter_mut())
            .flat_map(|link| {
                let mut cur = link.as_mut();
                std::iter::from_fn(move || {
                    let (key, val, meta, next) = cur.take()?.parts_mut();
                    cur = next.as_mut();
                    Some((key, &*val, meta))
                })
            })
    }

    pub fn iter(&self) -> impl Iterator<Item = (&[u8], &V)> {
        self.t
            .iter()
            .flat_map(|t| t.buckets.iter())
            .flat_map(|mut link| {
                std::iter::from_fn(move || {
                    let n = link.as_ref()?;
                    link = &n.next;
                    Some((n.key(), &n.val))
                })
            })
    }

    /// Up to `n` entries from consecutive buckets starting at a random one
    /// (Redis's `dictGetSomeKeys`), visiting at most `10 n` buckets: not
    /// uniform, but a few cache lines instead of a miss per entry, which is
    /// what eviction sampling needs.
    pub fn sample<'a, R: rand::Rng>(
        &'a self,
        rng: &mut R,
        n: usize,
        mut f: impl FnMut(&'a [u8], &'a V, &'a M),
    ) {
        // Never more than there are, so a small table is walked once.
        let n = n.min(self.len());
        if n == 0 {
            return;
        }
        let size = self.t[0].buckets.len().max(self.t[1].buckets.len());
        let moved = self.rehash_idx.unwrap_or(0);
        let mut i = rng.gen_range(0..size);
        let mut got = 0;
        let mut empty_run = 0;
        // Each entry is a cache miss: start the next few buckets' loads
        // before walking, so they overlap instead of following each other.
        for k in 0..AHEAD {
            self.prefetch_bucket((i + k) & (size - 1));
        }
        for _ in 0..n.saturating_mul(10) {
            self.prefetch_bucket((i + AHEAD) & (size - 1));
            let mut found = false;
            for (ti, t) in self.t.iter().enumerate() {
                // Buckets of the old table below the rehash index are empty.
                if i >= t.buckets.len() || (ti == 0 && i < moved) {
                    continue;
                }
                let mut link = &t.buckets[i];
                while let Some(node) = link {
                    found = true;
                    f(node.key(), &node.val, &node.meta);
                    got += 1;
                    if got == n {
                        return;
                    }
                    link = &node.next;
                }
            }
            // A sparse stretch (a table being grown, or emptied by
            // deletions): start again elsewhere, as Redis does.
            empty_run = if found { 0 } else { empty_run + 1 };
            i = if empty_run >= 5 && empty_run > n {
                empty_run = 0;
                let i = rng.gen_range(0..size);
                for k in 0..AHEAD {
                    self.prefetch_bucket((i + k) & (size - 1));
                }
                i
            } else {
                (i + 1) & (size - 1)
            };
        }
    }

    /// Starts loading the first entry of bucket `i` of each table.
    #[inline]
    fn prefetch_bucket(&self, i: usize) {
        for t in &self.t {
            if let Some(Some(node)) = t.buckets.get(i) {
                prefetch(&**node);
            }
        }
    }

    /// A random entry, each entry equally likely (Redis's
    /// `dictGetFairRandomKey`, behind SRANDMEMBER, SPOP and HRANDFIELD):
    /// one of up to 15 sampled from consecutive buckets, so an entry that
    /// shares its bucket is not drawn less often than one alone.
    pub fn fair_random<R: rand::Rng>(&self, rng: &mut R) -> Option<(&[u8], &V)> {
        const FAIR: usize = 15;
        let mut got: [Option<(&[u8], &V)>; FAIR] = [None; FAIR];
        let mut n = 0;
        self.sample(rng, FAIR, |k, v, _| {
            got[n] = Some((k, v));
            n += 1;
        });
        if n == 0 {
            return self.random(rng);
        }
        got[rng.gen_range(0..n)]
    }

    /// A random entry, each bucket equally likely (as Redis).
    pub fn random<R: rand::Rng>(&self, rng: &mut R) -> Option<(&[u8], &V)> {
        if self.is_empty() {
            return None;
        }
        let s0 = self.t[0].buckets.len();
        let total = s0 + self.t[1].buckets.len();
        let start = self.rehash_idx.unwrap_or(0);
        let bucket = loop {
            let i = rng.gen_range(start..total);
            let b = if i < s0 {
                &self.t[0].buckets[i]
            } else {
                &self.t[1].buckets[i - s0]
            };
            if b.is_some() {
                break b;
            }
        };
        let mut len = 0;
        let mut link = bucket;
        while let Some(n) = link {
            len += 1;
            link = &n.next;
        }
        let mut n = bucket.as_ref().unwrap();
        for _ in 0..rng.gen_range(0..len) {
            n = n.next.as_ref().unwrap();
        }
        Some((n.key(), &n.val))
    }

    /// Visits the buckets at `cursor` and returns the next cursor (0 when
    /// the scan is complete). See the module doc for the guarantee.
    pub fn scan(&self, cursor: u64, mut f: impl FnMut(&[u8], &V)) -> u64 {
        self.scan_buckets(cursor, |ti, b| {
            let mut link = &self.t[ti].buckets[b];
            while let Some(n) = link {
                f(n.key(), &n.val);
                link = &n.next;
            }
        })
    }

    /// As [`Dict::scan`], with each entry's metadata writable (the snapshot
    /// walk marks the entries it has saved).
    pub fn scan_meta_mut(&mut self, cursor: u64, mut f: impl FnMut(&[u8], &V, &mut M)) -> u64 {
        // The buckets to visit are found with a shared borrow, then visited
        // mutably; more than two only while a rehash runs.
        let mut first = [(0usize, 0usize); 2];
        let mut more: Vec<(usize, usize)> = Vec::new();
        let mut n = 0;
        let next = self.scan_buckets(cursor, |ti, b| {
            if n < 2 {
                first[n] = (ti, b);
            } else {
                more.push((ti, b));
            }
            n += 1;
        });
        for &(ti, b) in first[..n.min(2)].iter().chain(more.iter()) {
            let mut link = &mut self.t[ti].buckets[b];
            while let Some(node) = link {
                let (key, val, meta, next) = node.parts_mut();
                f(key, val, meta);
                link = next;
            }
        }
        next
    }

    /// The cursor walk shared by the scans: calls `emit(table, bucket)` for
    /// each bucket to visit at `cursor` and returns the next cursor.
    fn scan_buckets(&self, cursor: u64, mut emit: impl FnMut(usize, usize)) -> u64 {
        if self.is_empty() {
            return 0;
        }
        // The cursor counts in reverse binary: incrementing its reversed bits
        // visits each bucket of any later table size once (or a bucket
        // holding it); see the module doc.
        let rev_inc = |v: u64, mask: u64| (v | !mask).reverse_bits().wrapping_add(1).reverse_bits();
        let mut v = cursor;
        if self.rehash_idx.is_none() {
            let m = self.t[0].mask();
            emit(0, (v & m) as usize);
            return rev_inc(v, m);
        }
        let (small, large) = if self.t[0].buckets.len() <= self.t[1].buckets.len() {
            (0, 1)
        } else {
            (1, 0)
        };
        let m0 = self.t[small].mask();
        let m1 = self.t[large].mask();
        emit(small, (v & m0) as usize);
        // The large table's buckets that expand this small one, from the
        // cursor's own high bits on in the same reversed order: those before
        // it were visited while the table was large. Wrapping carries the
        // increment into the small table's bits.
        loop {
            emit(large, (v & m1) as usize);
            v = rev_inc(v, m1);
            if v & (m0 ^ m1) == 0 {
                break;
            }
        }
        v
    }
}

/// A deep copy with the same layout (COPY of a key, and of values built on
/// a dict). Chains are copied iteratively so a long chain cannot overflow
/// the stack.
impl<V: Clone, M: Clone> Clone for Dict<V, M> {
    fn clone(&self) -> Self {
        let table = |t: &Table<V, M>| Table {
            buckets: t
                .buckets
                .iter()
                .map(|head| {
                    let mut chain = Vec::new();
                    let mut link = head;
                    while let Some(n) = link {
                        chain.push(n);
                        link = &n.next;
                    }
                    let mut out: Link<V, M> = None;
                    for n in chain.into_iter().rev() {
                        out = Some(NodeBox::new(n.key(), n.val.clone(), n.meta.clone(), out));
                    }
                    out
                })
                .collect(),
            used: t.used,
        };
        Dict {
            t: [table(&self.t[0]), table(&self.t[1])],
            rehash_idx: self.rehash_idx,
            hasher: self.hasher.clone(),
            node_bytes: self.node_bytes,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::CBytes;
    use std::collections::{HashMap, HashSet};

    #[test]
    fn matches_a_hashmap_under_random_operations() {
        let mut rng = rand::thread_rng();
        use rand::Rng;
        let mut d = Dict::new();
        let mut m = HashMap::new();
        for i in 0..200_000u32 {
            let k = format!("k{}", rng.gen_range(0..5000));
            match rng.gen_range(0..4) {
                0 | 1 => assert_eq!(
                    d.insert(CBytes::from(k.as_str()), i),
                    m.insert(k.clone(), i)
                ),
                2 => assert_eq!(d.remove(k.as_bytes()), m.remove(&k)),
                _ => assert_eq!(d.get(k.as_bytes()), m.get(&k)),
            }
            if i % 1000 == 0 {
                d.shrink_if_needed();
            }
            assert_eq!(d.len(), m.len());
        }
        assert_eq!(d.iter().count(), m.len());
    }

    #[test]
    fn scan_sees_every_surviving_key_across_resizes() {
        let mut d = Dict::new();
        for i in 0..1000 {
            d.insert(CBytes::from(format!("a{i}").as_str()), ());
        }
        let mut seen = HashSet::new();
        let mut cursor = 0;
        let mut round = 0;
        loop {
            cursor = d.scan(cursor, |k, _| {
                seen.insert(k.to_vec());
            });
            // Grow and shrink the table while scanning; keys a* stay.
            round += 1;
            for j in 0..50 {
                let k = format!("b{round}_{j}");
                if round % 7 < 4 {
                    d.insert(CBytes::from(k.as_str()), ());
                } else {
                    d.remove(k.as_bytes());
                }
            }
            if round % 5 == 0 {
                for j in 0..round * 50 {
                    d.remove(format!("b{}_{}", j / 50, j % 50).as_bytes());
                }
                d.shrink_if_needed();
            }
            if cursor == 0 {
                break;
            }
        }
        for i in 0..1000 {
            assert!(seen.contains(format!("a{i}").as_bytes()), "a{i} missed");
        }
    }

    /// Every entry about equally likely, chained or alone (Redis's
    /// SRANDMEMBER / HRANDFIELD histogram tests use 10 members).
    #[test]
    fn fair_random_draws_every_entry_alike() {
        use rand::SeedableRng;
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        let mut d: Dict<()> = Dict::new();
        for k in [
            "1",
            "5",
            "10",
            "50",
            "125",
            "MARY",
            "PATRICIA",
            "LINDA",
            "BARBARA",
            "ELIZABETH",
        ] {
            d.insert(CBytes::from(k), ());
        }
        let mut counts = std::collections::HashMap::new();
        for _ in 0..100_000 {
            let (k, _) = d.fair_random(&mut rng).unwrap();
            *counts.entry(k.to_vec()).or_insert(0) += 1;
        }
        assert_eq!(counts.len(), 10);
        for (k, n) in counts {
            assert!((9_000..11_000).contains(&n), "{k:?} drawn {n} times");
        }
    }

    /// Redis's regression test for issue #4906: a cursor taken while the
    /// table was large, continued while it shrinks (the rehash still
    /// running), must still reach every key that stays.
    #[test]
    fn scan_survives_a_shrink_in_progress() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(4906);
        for _ in 0..300 {
            let mut d: Dict<()> = Dict::new();
            let n = 101 + rng.gen_range(0..1000);
            for j in 0..n {
                d.insert(CBytes::from(j.to_string().as_str()), ());
            }
            let deli = rng.gen_range(0..10);
            let (mut cursor, mut calls) = (0, 0);
            let mut seen = HashSet::new();
            loop {
                cursor = d.scan(cursor, |k, _| {
                    seen.insert(k.to_vec());
                });
                calls += 1;
                if calls == deli {
                    for j in 100..n {
                        d.remove(j.to_string().as_bytes());
                        d.shrink_if_needed();
                    }
                }
                if cursor == 0 {
                    break;
                }
            }
            for j in 0..100 {
                assert!(
                    seen.contains(j.to_string().as_bytes()),
                    "{j} missed (n {n})"
                );
            }
        }
    }

    #[test]
    fn metadata_rides_along_and_clone_is_deep() {
        let mut d: Dict<u32, u8> = Dict::with_meta();
        for i in 0..100u32 {
            d.insert_new_meta(CBytes::from(format!("k{i}").as_str()), i, (i % 7) as u8);
        }
        let (_, v, m) = d.get_entry_meta(b"k10").unwrap();
        assert_eq!((*v, *m), (10, 3));
        let (v, m) = d.get_mut_meta(b"k10").unwrap();
        *v = 1000;
        *m = 42;
        // New entries via insert_new get the default metadata.
        d.insert_new(CBytes::from("fresh"), 1);
        assert_eq!(d.get_entry_meta(b"fresh").map(|e| *e.2), Some(0));
        let c = d.clone();
        assert_eq!(d.remove_meta(b"k10"), Some((1000, 42)));
        assert!(d.remove_meta(b"k10").is_none());
        assert_eq!(
            c.get_entry_meta(b"k10").map(|e| (*e.1, *e.2)),
            Some((1000, 42))
        );
        assert_eq!(c.len(), 101);
        assert_eq!(d.len(), 100);
        let mut a: Vec<_> = c.iter().map(|(k, v)| (k.to_vec(), *v)).collect();
        a.sort();
        assert_eq!(a.len(), 101);
    }

    #[test]
    fn scan_meta_mut_visits_like_scan() {
        let mut d: Dict<u32, u8> = Dict::with_meta();
        for i in 0..512u32 {
            d.insert_new(CBytes::from(format!("k{i}").as_str()), i);
        }
        // Stop mid-rehash so both tables are walked.
        d.insert_new(CBytes::from("grow"), 0);
        assert!(d.is_rehashing());
        let mut cursor = 0;
        let mut seen = HashSet::new();
        loop {
            let mut a = Vec::new();
            let mut b = Vec::new();
            let c1 = d.scan(cursor, |k, _| a.push(k.to_vec()));
            let c2 = d.scan_meta_mut(cursor, |k, _, m| {
                *m += 1;
                b.push(k.to_vec());
            });
            assert_eq!((c1, &a), (c2, &b));
            seen.extend(b);
            cursor = c1;
            if cursor == 0 {
                break;
            }
        }
        assert_eq!(seen.len(), 513);
        assert_eq!(d.iter().count(), 513);
    }

    #[test]
    fn clone_during_rehash_is_complete() {
        let mut d = Dict::new();
        for i in 0..64 {
            d.insert(CBytes::from(format!("k{i}").as_str()), i);
        }
        // Force a grow and stop halfway.
        d.insert(CBytes::from("x"), -1);
        let c = d.clone();
        assert_eq!(c.is_rehashing(), d.is_rehashing());
        for i in 0..64 {
            assert_eq!(c.get(format!("k{i}").as_bytes()), Some(&i));
        }
        assert_eq!(c.get(b"x"), Some(&-1));
    }

    #[test]
    fn sample_returns_present_entries_even_while_rehashing() {
        use rand::SeedableRng;
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        let mut d: Dict<u32> = Dict::new();
        let mut empty = 0;
        for i in 0..1000u32 {
            d.insert(CBytes::from(format!("k{i}").as_str()), i);
            let mut got = Vec::new();
            d.sample(&mut rng, 5, |k, v, _| got.push((k.to_vec(), *v)));
            assert!(got.len() <= 5);
            empty += got.is_empty() as u32;
            for (k, v) in got {
                assert_eq!(d.get(&k), Some(&v));
            }
        }
        // Like Redis's, a sample may come back short, but rarely empty.
        assert!(empty < 20, "{empty} empty samples");
        // A sparse table (mostly deleted) still yields what is left.
        for i in 0..995u32 {
            d.remove(format!("k{i}").as_bytes());
        }
        let mut n = 0;
        for _ in 0..100 {
            d.sample(&mut rng, 5, |_, _, _| n += 1);
        }
        assert!(n > 0);
    }
}
