//! The stream type, laid out as Redis 7.0 lays it out so nodes move to and
//! from RDB files and DUMP payloads byte for byte.
//!
//! Entries live in nodes: listpacks keyed by their master ID (the ID of the
//! node's first entry when it was created), in master-ID order. Redis keys
//! a radix tree by the 128-bit big-endian ID; [`index::Nodes`] keeps the
//! same order in 32 bytes per node (a 1,000,000-entry stream has 10,000
//! nodes of up to 100 entries, the default `stream-node-max-entries`).
//!
//! A node's listpack (Redis's layout, see `node` below for the walk):
//!
//! ```text
//! master entry: count deleted nfields field_1 … field_n 0
//! entry:        flags ms-diff seq-diff [nfields field value …|value …] lp-count
//! ```
//!
//! `count` is the node's live entries, `deleted` its tombstones; IDs are
//! differences from the master ID; an entry whose fields are the master's,
//! in order (`SAMEFIELDS`), stores only its values; `lp-count` is the
//! number of the entry's other elements, so a walk can go backwards. XDEL
//! and trimming inside a node set the `DELETED` flag; a node whose last
//! live entry goes is removed.
//!
//! Consumer groups ([`Group`]) keep their pending entries list (PEL) and
//! consumers in ordered maps, as Redis's radix trees order them.

mod group;
mod index;
mod node;

pub use group::{Consumer, Group, Nack};
use index::Nodes;
use node::{Cursor, Master};

use crate::listpack::{Listpack, LpVal};
use std::collections::BTreeMap;

/// Entry flags.
const FLAG_DELETED: i64 = 1;
const FLAG_SAMEFIELDS: i64 = 2;

/// Largest total of field and value bytes one entry may hold.
pub const MAX_ENTRY_BYTES: usize = 1 << 30;

/// Entries-read counter value meaning "unknown" (Redis's
/// `SCG_INVALID_ENTRIES_READ`).
pub const ENTRIES_READ_INVALID: i64 = -1;

/// A stream entry ID: milliseconds and sequence number.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct StreamId {
    pub ms: u64,
    pub seq: u64,
}

impl StreamId {
    pub const MIN: StreamId = StreamId { ms: 0, seq: 0 };
    pub const MAX: StreamId = StreamId {
        ms: u64::MAX,
        seq: u64::MAX,
    };

    pub fn new(ms: u64, seq: u64) -> Self {
        StreamId { ms, seq }
    }

    pub fn is_zero(&self) -> bool {
        *self == StreamId::MIN
    }

    /// The next ID, `None` past the last possible one.
    pub fn incr(self) -> Option<StreamId> {
        match self.seq.checked_add(1) {
            Some(seq) => Some(StreamId { ms: self.ms, seq }),
            None => Some(StreamId {
                ms: self.ms.checked_add(1)?,
                seq: 0,
            }),
        }
    }

    /// The previous ID, `None` before 0-0.
    pub fn decr(self) -> Option<StreamId> {
        match self.seq.checked_sub(1) {
            Some(seq) => Some(StreamId { ms: self.ms, seq }),
            None => Some(StreamId {
                ms: self.ms.checked_sub(1)?,
                seq: u64::MAX,
            }),
        }
    }

    /// The 16-byte big-endian form (radix-tree keys, RDB).
    pub fn to_be(self) -> [u8; 16] {
        let mut b = [0; 16];
        b[..8].copy_from_slice(&self.ms.to_be_bytes());
        b[8..].copy_from_slice(&self.seq.to_be_bytes());
        b
    }

    pub fn from_be(b: &[u8; 16]) -> Self {
        let mut ms = [0; 8];
        let mut seq = [0; 8];
        ms.copy_from_slice(&b[..8]);
        seq.copy_from_slice(&b[8..]);
        StreamId {
            ms: u64::from_be_bytes(ms),
            seq: u64::from_be_bytes(seq),
        }
    }
}

/// Room for the longest `ms-seq` text.
pub type IdBuf = [u8; 41];

impl StreamId {
    /// The `ms-seq` text, written into `buf`: every reply that names an
    /// entry needs it, and the formatter costs ten times as much.
    pub fn text(self, buf: &mut IdBuf) -> &[u8] {
        let mut ib = itoa::Buffer::new();
        let ms = ib.format(self.ms).as_bytes();
        let n = ms.len();
        buf[..n].copy_from_slice(ms);
        buf[n] = b'-';
        let seq = ib.format(self.seq).as_bytes();
        let end = n + 1 + seq.len();
        buf[n + 1..end].copy_from_slice(seq);
        &buf[..end]
    }
}

impl std::fmt::Display for StreamId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}-{}", self.ms, self.seq)
    }
}

/// Node size bounds (`stream-node-max-bytes`, `stream-node-max-entries`;
/// 0 is unlimited).
#[derive(Clone, Copy, Debug)]
pub struct NodeLimits {
    pub max_bytes: usize,
    pub max_entries: usize,
}

impl Default for NodeLimits {
    fn default() -> Self {
        NodeLimits {
            max_bytes: 4096,
            max_entries: 100,
        }
    }
}

/// How XADD/XTRIM trim.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Trim {
    MaxLen(u64),
    MinId(StreamId),
}

/// One live entry, borrowed from its node.
pub struct Entry<'a> {
    pub id: StreamId,
    lp: &'a Listpack,
    master: &'a Master,
    /// Offset of the entry's first field (or value, for `SAMEFIELDS`).
    at: usize,
    nfields: usize,
    same: bool,
}

impl<'a> Entry<'a> {
    pub fn num_fields(&self) -> usize {
        self.nfields
    }

    /// Calls `f` with each field and value, in order.
    pub fn for_each(&self, mut f: impl FnMut(LpVal<'a>, LpVal<'a>)) {
        let lp = self.lp;
        let mut p = self.at;
        if self.same {
            let mut m = self.master.fields_at;
            for _ in 0..self.nfields {
                f(lp.get_at(m), lp.get_at(p));
                m = lp.next(m).unwrap_or(m);
                p = lp.next(p).unwrap_or(p);
            }
        } else {
            for _ in 0..self.nfields {
                let fld = lp.get_at(p);
                p = lp.next(p).unwrap_or(p);
                f(fld, lp.get_at(p));
                p = lp.next(p).unwrap_or(p);
            }
        }
    }

    /// The fields and values as owned pairs.
    pub fn to_pairs(&self) -> Vec<(Vec<u8>, Vec<u8>)> {
        let mut v = Vec::with_capacity(self.nfields);
        self.for_each(|f, x| v.push((f.to_vec(), x.to_vec())));
        v
    }
}

/// A stream value.
#[derive(Clone, Default)]
pub struct Stream {
    nodes: Nodes,
    length: u64,
    pub last_id: StreamId,
    pub first_id: StreamId,
    pub max_deleted_id: StreamId,
    pub entries_added: u64,
    pub groups: BTreeMap<Vec<u8>, Group>,
}

impl Stream {
    pub fn new() -> Self {
        Stream::default()
    }

    pub fn len(&self) -> u64 {
        self.length
    }

    pub fn is_empty(&self) -> bool {
        self.length == 0
    }

    /// Number of nodes (XINFO STREAM's `radix-tree-keys`, the RDB writer).
    pub fn node_count(&self) -> usize {
        self.nodes.len()
    }

    /// The nodes: master ID and listpack entry bytes with their element
    /// count, for the RDB writer.
    pub fn nodes(&self) -> impl Iterator<Item = (StreamId, &Listpack)> {
        self.nodes.iter()
    }

    /// Adds a node read from an RDB file, after the last one, if its
    /// layout is sound; returns its live entry count.
    pub fn push_node(&mut self, master: StreamId, lp: Listpack) -> Result<u64, &'static str> {
        if self.nodes.last_key().is_some_and(|k| k >= master) {
            return Err("stream nodes out of order");
        }
        let live = node::validate(&lp, master)?;
        if let Some(last) = self.edge_id(true) {
            let mut first = None;
            let m = Master::read(&lp);
            if let Some(e) = Cursor::first(&lp, &m).next(&lp, &m, master) {
                first = Some(e.id);
            }
            if first.is_some_and(|f| f <= last) {
                return Err("stream node entries out of order");
            }
        }
        self.nodes.push(master, lp);
        Ok(live)
    }

    /// Sets the length after nodes were loaded.
    pub fn set_len(&mut self, n: u64) {
        self.length = n;
    }

    /// Heap bytes owned, for MEMORY USAGE.
    pub fn heap_size(&self) -> usize {
        let mut n = self.nodes.heap_size();
        n += self
            .nodes
            .iter()
            .map(|(_, lp)| lp.heap_size())
            .sum::<usize>();
        for (name, g) in &self.groups {
            n += name.len() + std::mem::size_of::<Group>() + 32 + g.heap_size();
        }
        n
    }

    /// Appends an entry with ID `id` (greater than `last_id`; the caller
    /// checked) and the flattened `field value …` list.
    pub fn append<B: AsRef<[u8]>>(&mut self, id: StreamId, fv: &[B], lim: NodeLimits) {
        let nfields = fv.len() / 2;
        let total: usize = fv.iter().map(|b| b.as_ref().len()).sum();
        let fits = match self.nodes.last_mut() {
            Some((_, lp)) => {
                let (count, deleted) = Master::counts(lp);
                let over_bytes = lim.max_bytes > 0 && lp.lp_bytes() + total >= lim.max_bytes;
                let over_entries =
                    lim.max_entries > 0 && (count + deleted) as usize >= lim.max_entries;
                !over_bytes && !over_entries
            }
            None => false,
        };
        if !fits {
            let mut vals = Vec::with_capacity(nfields + 4);
            vals.push(LpVal::Int(0));
            vals.push(LpVal::Int(0));
            vals.push(LpVal::Int(nfields as i64));
            for f in fv.iter().step_by(2) {
                vals.push(LpVal::from_bytes(f.as_ref()));
            }
            vals.push(LpVal::Int(0));
            let mut lp = Listpack::new();
            lp.extend_vals(&vals);
            self.nodes.push(id, lp);
        }
        let (master_id, lp) = self.nodes.last_mut().expect("a node");
        let m = Master::read(lp);
        let same = m.nfields == nfields && {
            let mut off = m.fields_at;
            fv.iter().step_by(2).all(|f| {
                let eq = lp.get_at(off).eq_bytes(f.as_ref());
                off = lp.next(off).unwrap_or(off);
                eq
            })
        };
        let mut vals = Vec::with_capacity(fv.len() + 5);
        vals.push(LpVal::Int(if same { FLAG_SAMEFIELDS } else { 0 }));
        vals.push(LpVal::Int(id.ms.wrapping_sub(master_id.ms) as i64));
        vals.push(LpVal::Int(id.seq.wrapping_sub(master_id.seq) as i64));
        if same {
            vals.extend(
                fv.iter()
                    .skip(1)
                    .step_by(2)
                    .map(|v| LpVal::from_bytes(v.as_ref())),
            );
            vals.push(LpVal::Int(nfields as i64 + 3));
        } else {
            vals.push(LpVal::Int(nfields as i64));
            vals.extend(fv.iter().map(|v| LpVal::from_bytes(v.as_ref())));
            vals.push(LpVal::Int(nfields as i64 * 2 + 4));
        }
        lp.extend_vals(&vals);
        lp.replace_at(0, LpVal::Int(m.count + 1));
        if self.length == 0 {
            self.first_id = id;
        }
        self.length += 1;
        self.last_id = id;
        self.entries_added += 1;
    }

    /// Calls `f` for each live entry with `start <= id <= end`, ascending
    /// (or descending when `rev`), until `f` returns false.
    pub fn range(
        &self,
        start: StreamId,
        end: StreamId,
        rev: bool,
        mut f: impl FnMut(&Entry) -> bool,
    ) {
        if start > end {
            return;
        }
        if !rev {
            // From the node that may hold `start`, or the first if all
            // come after it.
            let Some(first) = self.nodes.floor(start).or(self.nodes.first_pos()) else {
                return;
            };
            for (mid, lp) in self.nodes.iter_from(first) {
                if mid > end {
                    return;
                }
                let m = Master::read(lp);
                let mut cur = Cursor::first(lp, &m);
                while let Some(e) = cur.next(lp, &m, mid) {
                    if e.id > end {
                        return;
                    }
                    if e.id >= start && !e.deleted && !f(&e.view(lp, &m)) {
                        return;
                    }
                }
            }
        } else {
            let Some(last) = self.nodes.floor(end) else {
                return;
            };
            for (mid, lp) in self.nodes.iter_back_from(last) {
                let m = Master::read(lp);
                let mut cur = Cursor::last(lp, &m);
                while let Some(e) = cur.prev(lp, &m, mid) {
                    if e.id < start {
                        return;
                    }
                    if e.id <= end && !e.deleted && !f(&e.view(lp, &m)) {
                        return;
                    }
                }
            }
        }
    }

    /// The first (or last) live entry's ID.
    pub fn edge_id(&self, last: bool) -> Option<StreamId> {
        let mut found = None;
        self.range(StreamId::MIN, StreamId::MAX, last, |e| {
            found = Some(e.id);
            false
        });
        found
    }

    /// The first entry's ID, deleted or not (what an exact MINID trim
    /// that keeps the stream as it is names).
    pub fn first_entry_id(&self) -> Option<StreamId> {
        let (mid, lp) = self.nodes.first()?;
        let m = Master::read(lp);
        Cursor::first(lp, &m).next(lp, &m, mid).map(|e| e.id)
    }

    /// Whether a live entry with this ID exists.
    pub fn contains(&self, id: StreamId) -> bool {
        let mut found = false;
        self.range(id, id, false, |_| {
            found = true;
            false
        });
        found
    }

    /// How many nodes a Redis radix tree keyed by the master IDs would
    /// have (XINFO STREAM's `radix-tree-nodes`): the trie of the 16-byte
    /// keys with each chain of single-child nodes compressed into one.
    pub fn radix_tree_nodes(&self) -> usize {
        fn count(keys: &[[u8; 16]], depth: usize) -> usize {
            if depth == 16 || keys.is_empty() {
                return 1;
            }
            let first = keys[0][depth];
            if keys.iter().all(|k| k[depth] == first) {
                let mut d = depth + 1;
                while d < 16 && keys.iter().all(|k| k[d] == keys[0][d]) {
                    d += 1;
                }
                return 1 + count(keys, d);
            }
            let mut n = 1;
            let mut i = 0;
            while i < keys.len() {
                let b = keys[i][depth];
                let j = i + keys[i..].iter().take_while(|k| k[depth] == b).count();
                n += count(&keys[i..j], depth + 1);
                i = j;
            }
            n
        }
        let keys: Vec<[u8; 16]> = self.nodes.iter().map(|(k, _)| k.to_be()).collect();
        count(&keys, 0)
    }

    /// Deletes the entry `id`; false if there is no such live entry.
    pub fn delete(&mut self, id: StreamId) -> bool {
        let Some(pos) = self.nodes.floor(id) else {
            return false;
        };
        let (mid, lp) = self.nodes.get_mut(pos);
        let m = Master::read(lp);
        let mut cur = Cursor::first(lp, &m);
        let mut flags_at = None;
        while let Some(e) = cur.next(lp, &m, mid) {
            if e.id > id {
                break;
            }
            if e.id == id && !e.deleted {
                flags_at = Some((e.flags_at, e.flags));
                break;
            }
        }
        let Some((at, flags)) = flags_at else {
            return false;
        };
        if m.count == 1 {
            self.nodes.remove(pos);
        } else {
            lp.replace_at(at, LpVal::Int(flags | FLAG_DELETED));
            Master::set_counts(lp, m.count - 1, m.deleted + 1);
        }
        self.length -= 1;
        true
    }

    /// XDEL's bookkeeping around [`Stream::delete`]: deletes each ID,
    /// raises `max_deleted_id`, moves `first_id`. Returns how many went.
    pub fn delete_ids(&mut self, ids: &[StreamId]) -> u64 {
        let mut n = 0;
        let mut first = false;
        for &id in ids {
            if self.delete(id) {
                n += 1;
                if id > self.max_deleted_id {
                    self.max_deleted_id = id;
                }
                first |= id == self.first_id;
            }
        }
        if self.length == 0 {
            self.first_id = StreamId::MIN;
        } else if first {
            self.first_id = self.edge_id(false).unwrap_or(StreamId::MIN);
        }
        n
    }

    /// Trims by `how`, stopping at whole nodes when `approx`, and after
    /// `limit` entries when nonzero. Returns how many entries went.
    pub fn trim(&mut self, how: Trim, approx: bool, limit: u64) -> u64 {
        let mut deleted = 0u64;
        loop {
            if let Trim::MaxLen(max) = how {
                if self.length <= max {
                    break;
                }
            }
            let Some(first) = self.nodes.first_pos() else {
                break;
            };
            let (mid, lp) = self.nodes.get_mut(first);
            let m = Master::read(lp);
            let entries = m.count as u64;
            if limit > 0 && deleted + entries > limit {
                break;
            }
            let whole = match how {
                Trim::MaxLen(max) => self.length - entries >= max,
                Trim::MinId(min) => {
                    let mut cur = Cursor::last(lp, &m);
                    cur.prev(lp, &m, mid).is_some_and(|e| e.id < min)
                }
            };
            if whole {
                self.nodes.remove(first);
                self.length -= entries;
                deleted += entries;
                continue;
            }
            if approx {
                break;
            }
            let mut marks = Vec::new();
            let mut cur = Cursor::first(lp, &m);
            let mut left = self.length;
            while let Some(e) = cur.next(lp, &m, mid) {
                let stop = match how {
                    Trim::MaxLen(max) => left <= max,
                    Trim::MinId(min) => e.id >= min,
                };
                if stop {
                    break;
                }
                if !e.deleted {
                    marks.push((e.flags_at, e.flags));
                    left -= 1;
                }
            }
            let n = marks.len() as u64;
            // Flags are one-byte integers: marking keeps every offset.
            for (at, flags) in marks {
                lp.replace_at(at, LpVal::Int(flags | FLAG_DELETED));
            }
            Master::set_counts(lp, m.count - n as i64, m.deleted + n as i64);
            self.length -= n;
            deleted += n;
            break;
        }
        if self.length == 0 {
            self.first_id = StreamId::MIN;
        } else if deleted > 0 {
            self.first_id = self.edge_id(false).unwrap_or(StreamId::MIN);
        }
        deleted
    }

    /// Whether a tombstone may lie in `start..` (Redis's
    /// `streamRangeHasTombstones` with no end).
    pub fn has_tombstones_from(&self, start: StreamId) -> bool {
        if self.length == 0 || self.max_deleted_id.is_zero() || self.first_id > self.max_deleted_id
        {
            return false;
        }
        start <= self.max_deleted_id
    }

    /// The entries-read counter of `id` if it can be known (Redis's
    /// `streamEstimateDistanceFromFirstEverEntry`).
    pub fn estimate_entries_read(&self, id: StreamId) -> i64 {
        if self.entries_added == 0 {
            return 0;
        }
        if self.length == 0 && id <= self.last_id {
            return self.entries_added as i64;
        }
        match id.cmp(&self.last_id) {
            std::cmp::Ordering::Equal => return self.entries_added as i64,
            std::cmp::Ordering::Greater => return ENTRIES_READ_INVALID,
            std::cmp::Ordering::Less => {}
        }
        if self.max_deleted_id.is_zero() || self.max_deleted_id < self.first_id {
            match id.cmp(&self.first_id) {
                std::cmp::Ordering::Less => return (self.entries_added - self.length) as i64,
                std::cmp::Ordering::Equal => return (self.entries_added - self.length + 1) as i64,
                std::cmp::Ordering::Greater => {}
            }
        }
        ENTRIES_READ_INVALID
    }

    /// A group's lag, if it can be known.
    pub fn lag(&self, g: &Group) -> Option<i64> {
        if self.entries_added == 0 {
            return Some(0);
        }
        if g.entries_read != ENTRIES_READ_INVALID && !self.has_tombstones_from(g.last_id) {
            return Some(self.entries_added as i64 - g.entries_read);
        }
        let read = self.estimate_entries_read(g.last_id);
        (read != ENTRIES_READ_INVALID).then(|| self.entries_added as i64 - read)
    }
}

#[cfg(test)]
mod tests;
