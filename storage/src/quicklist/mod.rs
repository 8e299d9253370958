//! A quicklist: the list type of Redis 7.0 — a sequence of listpack nodes,
//! each bounded by `list-max-listpack-size`.
//!
//! Layout: `nodes` is a `VecDeque<Listpack>` (Redis links nodes in a
//! doubly-linked list; a deque of node handles gives the same O(1) ends and
//! makes the O(nodes) middle insert a move of 32-byte handles, one per
//! ~128 elements or ~8KB). `len` caches the total element count.
//!
//! Node bound (`fill`, fixed when the list is created as in Redis):
//! - negative: the node's listpack size (as Redis counts it, header
//!   included) stays within -1: 4KB, -2: 8KB, -3: 16KB, -4: 32KB, -5 (and
//!   below): 64KB;
//! - positive: at most `fill` entries, and also at most 8KB (Redis's safety
//!   limit for count-bounded nodes);
//! - a single element larger than the bound gets a node of its own.
//!
//! Invariants: no node is empty; `len` equals the sum of node lengths; a
//! node holding more than one element respects the bound (pushes open a new
//! node when the end node is full; a middle insert or replace that
//! overflows a node splits it in two).
//!
//! Plain nodes: an element of at least the packed threshold (1GB, or what
//! DEBUG QUICKLIST-PACKED-THRESHOLD sets, server-wide as in Redis) always
//! has a node of its own, which takes no other element.
//!
//! Compression (`list-compress-depth`, read when a list is created, as in
//! Redis): with depth `d > 0`, the `d` nodes at each end stay raw and the
//! others are kept as the LZF of their Redis listpack bytes, when the node
//! has at least 48 bytes and LZF saves at least 9 (both measured on Redis
//! 7.0.15). As in Redis, an operation decompresses the nodes it touches and
//! recompresses them afterwards, along with the nodes that entered the
//! compressed region ([`Quicklist::settle`]). A read through a shared
//! borrow cannot put a node back, so it decodes the node into a cache next
//! to its LZF form; the list's next modification drops those caches.
//! [`Quicklist::walk`] and [`Quicklist::get_with`] (LRANGE, LINDEX, RDB
//! writing) decode into temporaries instead. Plain nodes are never
//! compressed.
//!
//! Complexity: push/pop at both ends O(1) amortized (plus the node's
//! memmove for the head); index, insert, set O(nodes + node size); LREM
//! and range walks O(n).

use crate::listpack::{Listpack, LpVal};
mod node;

pub use node::SavedNode;
use node::{redis_bytes, Node};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// Upper bound on a count-bounded node's bytes (Redis's safety limit).
const SAFETY_LIMIT: usize = 8192;
const BYTE_LIMITS: [usize; 5] = [4096, 8192, 16384, 32768, 65536];

/// Redis's default packed threshold: elements from 1GB on are plain.
pub const DEFAULT_PACKED_THRESHOLD: usize = 1 << 30;

static PACKED_THRESHOLD: AtomicUsize = AtomicUsize::new(DEFAULT_PACKED_THRESHOLD);

/// Sets the size from which an element gets a plain node of its own
/// (DEBUG QUICKLIST-PACKED-THRESHOLD); 0 restores the default.
pub fn set_packed_threshold(bytes: usize) {
    let t = if bytes == 0 {
        DEFAULT_PACKED_THRESHOLD
    } else {
        bytes
    };
    PACKED_THRESHOLD.store(t, Ordering::Relaxed);
}

static COMPRESS_DEPTH: AtomicUsize = AtomicUsize::new(0);

/// Sets `list-compress-depth`, which lists created from now on keep.
pub fn set_compress_depth(depth: usize) {
    COMPRESS_DEPTH.store(depth, Ordering::Relaxed);
}

fn is_large(len: usize) -> bool {
    len >= PACKED_THRESHOLD.load(Ordering::Relaxed)
}

/// An element's length as a string (integers as their decimal text).
fn str_len(v: &LpVal<'_>) -> usize {
    match v {
        LpVal::Int(i) => itoa::Buffer::new().format(*i).len(),
        LpVal::Str(b) => b.len(),
    }
}

pub struct Quicklist {
    nodes: VecDeque<Node>,
    len: usize,
    fill: i32,
    /// `list-compress-depth` at creation (saturated: a list would need
    /// 131070 nodes to tell a larger depth apart).
    depth: u16,
    /// Some compressed node holds a decoded cache.
    cached: AtomicBool,
}

impl Clone for Quicklist {
    fn clone(&self) -> Self {
        Quicklist {
            nodes: self.nodes.clone(),
            len: self.len,
            fill: self.fill,
            depth: self.depth,
            cached: AtomicBool::new(self.cached.load(Ordering::Relaxed)),
        }
    }
}

impl Default for Quicklist {
    fn default() -> Self {
        Quicklist::new(-2)
    }
}

/// Normalizes Redis-style inclusive `start..=stop` (negative from the end)
/// against `len`; `None` when the range is empty.
pub fn normalize_range(start: i64, stop: i64, len: usize) -> Option<(usize, usize)> {
    let l = len as i64;
    let mut s = if start < 0 {
        l.saturating_add(start)
    } else {
        start
    };
    let mut e = if stop < 0 {
        l.saturating_add(stop)
    } else {
        stop
    };
    if s < 0 {
        s = 0;
    }
    if s > e || s >= l {
        return None;
    }
    if e >= l {
        e = l - 1;
    }
    Some((s as usize, e as usize))
}

impl Quicklist {
    /// An empty list whose nodes follow `fill` (`list-max-listpack-size`),
    /// compressed as `list-compress-depth` currently says.
    pub fn new(fill: i32) -> Self {
        Quicklist::with_depth(fill, COMPRESS_DEPTH.load(Ordering::Relaxed))
    }

    /// An empty list with `fill` and compression depth `depth`.
    pub fn with_depth(fill: i32, depth: usize) -> Self {
        Quicklist {
            nodes: VecDeque::new(),
            len: 0,
            fill,
            depth: depth.min(u16::MAX as usize) as u16,
            cached: AtomicBool::new(false),
        }
    }

    /// `list-compress-depth` the list was created with.
    pub fn compress_depth(&self) -> usize {
        self.depth as usize
    }

    /// How many nodes are held compressed.
    pub fn compressed_nodes(&self) -> usize {
        self.nodes
            .iter()
            .filter(|n| matches!(n, Node::Lzf(_)))
            .count()
    }

    /// Per node, from the head: the bytes Redis allocates for its data
    /// (the listpack, or the LZF plus its 4-byte header) and its count.
    pub fn node_allocs(&self) -> impl Iterator<Item = (usize, usize)> + '_ {
        self.nodes.iter().map(|n| match n {
            Node::Raw(lp) => (lp.lp_bytes(), lp.len()),
            Node::Lzf(p) => (4 + p.lzf.len(), p.count as usize),
        })
    }

    /// The nodes from the head as Redis saves them: each as it is.
    pub fn saved_nodes(&self) -> impl Iterator<Item = SavedNode<'_>> {
        self.nodes.iter().map(|n| match n {
            Node::Lzf(p) => SavedNode::Lzf(&p.lzf, p.sz as usize),
            Node::Raw(lp) if Self::is_plain(lp) => {
                SavedNode::Plain(lp.get(0).expect("a plain node holds one element"))
            }
            Node::Raw(lp) => SavedNode::Packed(redis_bytes(lp)),
        })
    }

    /// Appends a node of `items` whatever the fill: a loaded list keeps the
    /// nodes it was saved with, as in Redis.
    pub fn push_node<B: AsRef<[u8]>>(&mut self, items: impl IntoIterator<Item = B>) {
        let mut lp = Listpack::new();
        for b in items {
            lp.push_back(b.as_ref());
        }
        if lp.is_empty() {
            return;
        }
        self.len += lp.len();
        self.nodes.push_back(Node::Raw(lp));
        self.settle(0, 0);
    }

    fn lp(&self, ni: usize) -> &Listpack {
        self.nodes[ni].lp(&self.cached)
    }

    fn lp_mut(&mut self, ni: usize) -> &mut Listpack {
        self.nodes[ni].raw_mut()
    }

    /// After a modification that touched nodes `lo..hi` (as they are now
    /// numbered): drops read caches, decompresses the nodes within `depth`
    /// of either end, and compresses the touched nodes outside that and the
    /// two nodes just inside the compressed region.
    #[inline]
    fn settle(&mut self, lo: usize, hi: usize) {
        // Uncompressed lists without caches skip the walk: push and pop
        // cost what they did before compression existed.
        if self.depth != 0 || *self.cached.get_mut() {
            self.settle_nodes(lo, hi);
        }
    }

    fn settle_nodes(&mut self, lo: usize, hi: usize) {
        if *self.cached.get_mut() {
            *self.cached.get_mut() = false;
            for n in self.nodes.iter_mut() {
                if let Node::Lzf(p) = n {
                    p.cache.take();
                }
            }
        }
        let d = self.depth as usize;
        if d == 0 {
            return;
        }
        let n = self.nodes.len();
        for i in (0..d.min(n)).chain(n.saturating_sub(d).max(d.min(n))..n) {
            self.nodes[i].raw_mut();
        }
        if n <= 2 * d {
            return;
        }
        for i in [d, n - 1 - d].into_iter().chain(lo.max(d)..hi.min(n - d)) {
            self.nodes[i].compress();
        }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn node_count(&self) -> usize {
        self.nodes.len()
    }

    /// `list-max-listpack-size` the list was created with.
    pub fn fill(&self) -> i32 {
        self.fill
    }

    /// Bytes of the nodes as DEBUG OBJECT's `ql_uncompressed_size` counts
    /// them: a packed node's listpack, a plain node's element.
    pub fn nodes_size(&self) -> usize {
        self.nodes
            .iter()
            .map(|n| match n {
                Node::Raw(lp) if Self::is_plain(lp) => lp.get(0).map_or(0, |v| str_len(&v)),
                n => n.lp_bytes(),
            })
            .sum()
    }

    /// Heap bytes: node buffers plus the node array.
    pub fn heap_size(&self) -> usize {
        self.nodes.iter().map(|n| n.heap_size()).sum::<usize>()
            + self.nodes.capacity() * std::mem::size_of::<Node>()
    }

    /// Whether a node of `bytes` (Redis-counted) and `count` entries is
    /// within the bound.
    fn fits(&self, bytes: usize, count: usize) -> bool {
        if self.fill < 0 {
            let i = (self.fill.unsigned_abs() as usize).min(5) - 1;
            bytes <= BYTE_LIMITS[i]
        } else {
            bytes <= SAFETY_LIMIT && count <= self.fill as usize
        }
    }

    /// Whether one more element whose argument is `raw_len` bytes may go
    /// into node `ni`. Like Redis, the growth is estimated as the argument's
    /// length plus 8 rather than its exact encoded size, so nodes split
    /// exactly where Redis's do (checked against DEBUG OBJECT's ql_nodes).
    fn allows_insert(&self, ni: usize, raw_len: usize) -> bool {
        let node = &self.nodes[ni];
        !is_large(raw_len)
            && !self.node_is_plain(ni)
            && self.fits(node.lp_bytes() + raw_len + 8, node.len() + 1)
    }

    /// A node holding one large element.
    fn is_plain(node: &Listpack) -> bool {
        node.len() == 1 && node.get(0).is_some_and(|v| is_large(str_len(&v)))
    }

    fn node_is_plain(&self, ni: usize) -> bool {
        self.nodes[ni].len() == 1 && Self::is_plain(self.lp(ni))
    }

    fn over(&self, node: &Node) -> bool {
        node.len() > 1 && !self.fits(node.lp_bytes(), node.len())
    }

    /// Opens a node holding `v` at the tail (`back`) or the head. Most
    /// lists are one node: the first gets a deque of room for exactly one
    /// (16 bytes; the deque's own first growth reserves 4, a 64-byte
    /// block, 48 bytes per small list), later ones grow it as usual.
    fn new_end_node(&mut self, v: LpVal, back: bool) {
        let mut n = Listpack::new();
        n.push_back_val(v);
        if self.nodes.capacity() == 0 {
            self.nodes.reserve_exact(1);
        }
        if back {
            self.nodes.push_back(Node::Raw(n));
        } else {
            self.nodes.push_front(Node::Raw(n));
        }
    }

    pub fn push_back(&mut self, b: &[u8]) {
        let v = LpVal::from_bytes(b);
        match self.nodes.len() {
            n if n > 0 && self.allows_insert(n - 1, b.len()) => self.lp_mut(n - 1).push_back_val(v),
            _ => {
                self.new_end_node(v, true);
            }
        }
        self.len += 1;
        self.settle(0, 0);
    }

    pub fn push_front(&mut self, b: &[u8]) {
        let v = LpVal::from_bytes(b);
        if !self.nodes.is_empty() && self.allows_insert(0, b.len()) {
            self.lp_mut(0).insert_at(0, v)
        } else {
            self.new_end_node(v, false);
        }
        self.len += 1;
        self.settle(0, 0);
    }

    pub fn pop_front(&mut self) -> Option<Vec<u8>> {
        let n = self.nodes.front_mut()?.raw_mut();
        let v = n.pop_front();
        if n.is_empty() {
            self.nodes.pop_front();
        }
        self.len -= 1;
        self.settle(0, 0);
        v
    }

    pub fn pop_back(&mut self) -> Option<Vec<u8>> {
        let n = self.nodes.back_mut()?.raw_mut();
        let v = n.pop_back();
        if n.is_empty() {
            self.nodes.pop_back();
        }
        self.len -= 1;
        self.settle(0, 0);
        v
    }

    /// (node, index within node) of element `i < len`, walking from the
    /// nearer end.
    fn locate(&self, i: usize) -> (usize, usize) {
        if i < self.len / 2 {
            let mut acc = 0;
            for (ni, n) in self.nodes.iter().enumerate() {
                if i < acc + n.len() {
                    return (ni, i - acc);
                }
                acc += n.len();
            }
        } else {
            let mut acc = self.len;
            for (ni, n) in self.nodes.iter().enumerate().rev() {
                acc -= n.len();
                if i >= acc {
                    return (ni, i - acc);
                }
            }
        }
        unreachable!("index {i} out of range {}", self.len)
    }

    fn abs_index(&self, index: i64) -> Option<usize> {
        let l = self.len as i64;
        let i = if index < 0 {
            l.checked_add(index)?
        } else {
            index
        };
        (0..l).contains(&i).then_some(i as usize)
    }

    /// Element at `index` (negative counts from the tail), as LINDEX.
    pub fn get(&self, index: i64) -> Option<LpVal<'_>> {
        let i = self.abs_index(index)?;
        let (ni, k) = self.locate(i);
        self.lp(ni).get(k as isize)
    }

    /// `f` of the element at `index` (as [`Quicklist::get`]), leaving no
    /// cache behind in a compressed node.
    pub fn get_with<R>(&self, index: i64, f: impl FnOnce(LpVal<'_>) -> R) -> Option<R> {
        let i = self.abs_index(index)?;
        let (mut f, mut out) = (Some(f), None);
        self.walk(i, true, |v| {
            out = f.take().map(|f| f(v));
            false
        });
        out
    }

    /// Replaces the element at `index` (LSET); false if out of range.
    pub fn set(&mut self, index: i64, b: &[u8]) -> bool {
        let Some(i) = self.abs_index(index) else {
            return false;
        };
        let (ni, k) = self.locate(i);
        self.lp_mut(ni).replace(k as isize, b);
        let before = self.nodes.len();
        if is_large(b.len()) {
            self.isolate_large(ni);
        } else {
            self.split_if_over(ni);
        }
        self.settle(ni, ni + 1 + self.nodes.len() - before);
        true
    }

    /// Splits node `ni` so each large element in it stands in a plain node
    /// of its own between runs of the others.
    fn isolate_large(&mut self, ni: usize) {
        let node = self.lp_mut(ni);
        if node.len() < 2 {
            return;
        }
        let mut parts: Vec<Listpack> = Vec::new();
        let mut run = Listpack::new();
        for v in node.iter() {
            if is_large(str_len(&v)) {
                if !run.is_empty() {
                    parts.push(std::mem::replace(&mut run, Listpack::new()));
                }
                let mut plain = Listpack::new();
                plain.push_back_val(v);
                parts.push(plain);
            } else {
                run.push_back_val(v);
            }
        }
        if !run.is_empty() {
            parts.push(run);
        }
        self.nodes.remove(ni);
        for p in parts.into_iter().rev() {
            self.nodes.insert(ni, Node::Raw(p));
        }
    }

    /// Splits node `ni` in halves (recursively) while it exceeds the bound.
    fn split_if_over(&mut self, ni: usize) {
        if !self.over(&self.nodes[ni]) {
            return;
        }
        let node = self.lp_mut(ni);
        let half = node.len() / 2;
        let mut right = Listpack::new();
        for v in node.iter().skip(half) {
            right.push_back_val(v);
        }
        let cut = node.seek(half as isize).expect("half < len");
        let count = node.len() - half;
        node.delete_run_at(cut, count);
        self.nodes.insert(ni + 1, Node::Raw(right));
        self.split_if_over(ni + 1);
        self.split_if_over(ni);
    }

    /// Inserts `b` before or after the first element equal to `pivot`
    /// (LINSERT). False if the pivot is absent.
    pub fn insert(&mut self, pivot: &[u8], b: &[u8], after: bool) -> bool {
        let mut found = None;
        'outer: for ni in 0..self.nodes.len() {
            for (off, v) in self.lp(ni).iter_offsets() {
                if v.eq_bytes(pivot) {
                    found = Some((ni, off));
                    break 'outer;
                }
            }
        }
        let Some((ni, off)) = found else {
            self.settle(0, 0);
            return false;
        };
        let before = self.nodes.len();
        let touched = self.insert_next_to(ni, off, b, after);
        self.len += 1;
        let lo = touched.min(ni);
        self.settle(lo, ni + 2 + self.nodes.len() - before);
        true
    }

    /// Inserts `b` next to the element at `off` of node `ni`; returns the
    /// node that took it when that is a neighbour.
    fn insert_next_to(&mut self, ni: usize, off: usize, b: &[u8], after: bool) -> usize {
        let v = LpVal::from_bytes(b);
        let node = self.lp(ni);
        let at_tail = after && node.next(off).is_none();
        let at_head = !after && off == 0;
        // Like Redis, spill into a neighbour before splitting a full node.
        if !self.allows_insert(ni, b.len()) {
            if at_tail && ni + 1 < self.nodes.len() && self.allows_insert(ni + 1, b.len()) {
                self.lp_mut(ni + 1).insert_at(0, v);
                return ni + 1;
            }
            if at_tail && ni + 1 == self.nodes.len() {
                self.new_end_node(v, true);
                return ni + 1;
            }
            if at_head && ni > 0 && self.allows_insert(ni - 1, b.len()) {
                self.lp_mut(ni - 1).push_back_val(v);
                return ni - 1;
            }
            if at_head && ni == 0 {
                self.new_end_node(v, false);
                return 0;
            }
        }
        let into_plain = self.node_is_plain(ni);
        let node = self.lp_mut(ni);
        let at = if after {
            node.next(off).unwrap_or(node.as_bytes().len())
        } else {
            off
        };
        node.insert_at(at, v);
        if into_plain || is_large(b.len()) {
            self.isolate_large(ni);
        } else {
            self.split_if_over(ni);
        }
        ni
    }

    /// Removes elements equal to `b` (LREM): the first `count` from the
    /// head if `count > 0`, the last `-count` from the tail if `count < 0`,
    /// all if 0. Returns how many were removed.
    pub fn remove(&mut self, count: i64, b: &[u8]) -> usize {
        let limit = if count == 0 {
            usize::MAX
        } else {
            count.unsigned_abs().try_into().unwrap_or(usize::MAX)
        };
        let mut removed = 0;
        if count >= 0 {
            let mut ni = 0;
            while ni < self.nodes.len() && removed < limit {
                let node = self.lp_mut(ni);
                let mut off = node.first();
                while let Some(o) = off {
                    if removed == limit {
                        break;
                    }
                    if node.get_at(o).eq_bytes(b) {
                        node.delete_at(o);
                        removed += 1;
                        off = (o < node.as_bytes().len()).then_some(o);
                    } else {
                        off = node.next(o);
                    }
                }
                if node.is_empty() {
                    self.nodes.remove(ni);
                } else {
                    ni += 1;
                }
            }
        } else {
            let mut ni = self.nodes.len();
            while ni > 0 && removed < limit {
                ni -= 1;
                let node = self.lp_mut(ni);
                let mut off = node.last();
                while let Some(o) = off {
                    if removed == limit {
                        break;
                    }
                    let p = node.prev(o);
                    if node.get_at(o).eq_bytes(b) {
                        node.delete_at(o);
                        removed += 1;
                    }
                    off = p;
                }
                if node.is_empty() {
                    self.nodes.remove(ni);
                }
            }
        }
        self.len -= removed;
        self.settle(0, self.nodes.len());
        removed
    }

    /// Deletes `count` elements starting at absolute index `start`.
    pub fn delete_range(&mut self, start: usize, count: usize) {
        if start >= self.len || count == 0 {
            self.settle(0, 0);
            return;
        }
        let mut left = count.min(self.len - start);
        let (first, mut k) = self.locate(start);
        let mut ni = first;
        self.len -= left;
        while left > 0 {
            let n = (self.nodes[ni].len() - k).min(left);
            if k == 0 && n == self.nodes[ni].len() {
                self.nodes.remove(ni);
            } else {
                self.lp_mut(ni).delete_range(k, n);
                ni += 1;
            }
            left -= n;
            k = 0;
        }
        self.settle(first, ni + 1);
    }

    /// Keeps only `start..=stop` (LTRIM semantics, negative from the tail).
    pub fn trim(&mut self, start: i64, stop: i64) {
        match normalize_range(start, stop, self.len) {
            None => {
                self.nodes.clear();
                self.len = 0;
                *self.cached.get_mut() = false;
            }
            Some((s, e)) => {
                let tail = self.len - e - 1;
                self.delete_range(e + 1, tail);
                self.delete_range(0, s);
            }
        }
    }

    /// Elements from absolute index `start` walking towards the tail
    /// (`forward`) or the head. Take as many as needed.
    pub fn iter_from(&self, start: usize, forward: bool) -> Iter<'_> {
        if start >= self.len {
            return Iter {
                ql: self,
                ni: self.nodes.len(),
                off: 0,
                forward,
            };
        }
        let (ni, k) = self.locate(start);
        let off = self.lp(ni).seek(k as isize).expect("k < node len");
        Iter {
            ql: self,
            ni,
            off,
            forward,
        }
    }

    /// Calls `f` on the elements from absolute index `start` towards the
    /// tail (`forward`) or the head while it returns true. Unlike
    /// [`Quicklist::iter_from`], a compressed node is decoded into a
    /// temporary, so a long read leaves no caches behind.
    pub fn walk(&self, start: usize, forward: bool, mut f: impl FnMut(LpVal<'_>) -> bool) {
        if start >= self.len {
            return;
        }
        let (mut ni, k) = self.locate(start);
        let mut first = Some(k);
        loop {
            let tmp;
            let lp = match &self.nodes[ni] {
                Node::Raw(lp) => lp,
                Node::Lzf(p) => match p.cache.get() {
                    Some(lp) => lp,
                    None => {
                        tmp = Node::unpack(p);
                        &tmp
                    }
                },
            };
            let mut off = match first.take() {
                Some(k) => lp.seek(k as isize),
                None if forward => lp.first(),
                None => lp.last(),
            };
            while let Some(o) = off {
                if !f(lp.get_at(o)) {
                    return;
                }
                off = if forward { lp.next(o) } else { lp.prev(o) };
            }
            if forward {
                ni += 1;
                if ni == self.nodes.len() {
                    return;
                }
            } else if ni == 0 {
                return;
            } else {
                ni -= 1;
            }
        }
    }

    /// All elements head to tail.
    pub fn iter(&self) -> Iter<'_> {
        self.iter_from(0, true)
    }

    /// Elements in `start..=stop` (LRANGE semantics).
    pub fn range(&self, start: i64, stop: i64) -> impl Iterator<Item = LpVal<'_>> {
        let (s, n) = match normalize_range(start, stop, self.len) {
            Some((s, e)) => (s, e - s + 1),
            None => (self.len, 0),
        };
        self.iter_from(s, true).take(n)
    }
}

/// A walk over a quicklist from a position, in one direction.
pub struct Iter<'a> {
    ql: &'a Quicklist,
    ni: usize,
    off: usize,
    forward: bool,
}

impl<'a> Iterator for Iter<'a> {
    type Item = LpVal<'a>;
    fn next(&mut self) -> Option<LpVal<'a>> {
        let ql = self.ql;
        if self.ni >= ql.nodes.len() {
            return None;
        }
        let node = ql.lp(self.ni);
        let v = node.get_at(self.off);
        if self.forward {
            match node.next(self.off) {
                Some(o) => self.off = o,
                None => {
                    self.ni += 1;
                    self.off = 0;
                }
            }
        } else {
            match node.prev(self.off) {
                Some(o) => self.off = o,
                None => {
                    // Past the head: park on an index past the end.
                    self.ni = self.ni.checked_sub(1).unwrap_or(usize::MAX);
                    if self.ni < ql.nodes.len() {
                        self.off = ql.lp(self.ni).last().expect("nodes are never empty");
                    }
                }
            }
        }
        Some(v)
    }
}

impl std::fmt::Debug for Quicklist {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries((0..self.nodes.len()).map(|i| self.lp(i)))
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    fn check_invariants(q: &Quicklist) {
        assert_eq!(q.nodes.iter().map(|n| n.len()).sum::<usize>(), q.len);
        for n in &q.nodes {
            assert!(n.len() > 0);
            assert!(
                !q.over(n),
                "node over bound: {} entries {} bytes",
                n.len(),
                n.lp_bytes()
            );
        }
        let (d, n) = (q.compress_depth(), q.nodes.len());
        for (i, node) in q.nodes.iter().enumerate() {
            if let Node::Lzf(p) = node {
                assert!(
                    i >= d && i + d < n,
                    "node {i} of {n} compressed at depth {d}"
                );
                let lp = Node::unpack(p);
                assert_eq!((lp.len(), lp.lp_bytes()), (node.len(), node.lp_bytes()));
            } else if d > 0 && i == d && i + d < n && !q.node_is_plain(i) {
                // The first node of the compressed region is compressed
                // unless LZF cannot make it small enough.
                let mut probe = node.clone();
                probe.compress();
                assert!(matches!(probe, Node::Raw(_)), "node {i} of {n} left raw");
            }
        }
    }

    fn norm(m: &[Vec<u8>], s: i64, e: i64) -> Vec<Vec<u8>> {
        match normalize_range(s, e, m.len()) {
            Some((s, e)) => m[s..=e].to_vec(),
            None => vec![],
        }
    }

    fn elem(rng: &mut StdRng) -> Vec<u8> {
        match rng.gen_range(0..6) {
            0 => rng.gen_range(0..20).to_string().into_bytes(),
            1 => vec![b'L'; rng.gen_range(100..3000)],
            _ => format!("e{}", rng.gen_range(0..15)).into_bytes(),
        }
    }

    #[test]
    fn byte_and_count_bounds() {
        let mut q = Quicklist::new(-2);
        for i in 0..10_000 {
            q.push_back(format!("element-{i}").as_bytes());
        }
        check_invariants(&q);
        assert!(
            q.node_count() > 10 && q.node_count() < 40,
            "{}",
            q.node_count()
        );
        let mut q = Quicklist::new(5);
        for i in 0..23 {
            q.push_front(i.to_string().as_bytes());
        }
        assert_eq!(q.node_count(), 5);
        check_invariants(&q);
        // One element beyond the byte bound still gets stored.
        let mut q = Quicklist::new(-1);
        q.push_back(&[b'x'; 10000]);
        q.push_back(b"a");
        assert_eq!(q.node_count(), 2);
    }

    #[test]
    fn a_one_node_list_holds_one_node_handle() {
        let handle = std::mem::size_of::<Node>();
        for back in [true, false] {
            let mut q = Quicklist::new(-2);
            for i in 0..10 {
                let e = format!("element-{i}");
                if back {
                    q.push_back(e.as_bytes());
                } else {
                    q.push_front(e.as_bytes());
                }
            }
            assert_eq!(q.node_count(), 1);
            assert_eq!(q.heap_size(), q.nodes[0].heap_size() + handle);
        }
        let mut q = Quicklist::new(1);
        q.push_back(b"a");
        q.push_back(b"b");
        assert_eq!(q.node_count(), 2);
        assert!(q.nodes.capacity() >= 2);
    }
    /// Node counts and sizes as `DEBUG OBJECT` reports them on Redis 7.0.15
    /// for the same pushes (ql_nodes, ql_uncompressed_size).
    #[test]
    fn node_layout_matches_redis() {
        let total = |q: &Quicklist| q.nodes.iter().map(|n| n.lp_bytes()).sum::<usize>();
        let mut q = Quicklist::new(-2);
        for i in 0..10_000 {
            q.push_back(format!("element-{i}").as_bytes());
        }
        assert_eq!((q.node_count(), total(&q)), (17, 139009));
        let mut q = Quicklist::new(5);
        for i in 0..23 {
            q.push_front(i.to_string().as_bytes());
        }
        assert_eq!((q.node_count(), total(&q)), (5, 81));
        let mut q = Quicklist::new(1000);
        for i in 0..3000 {
            q.push_back(format!("element-{i}").as_bytes());
        }
        assert_eq!((q.node_count(), total(&q)), (6, 40932));
        let mut q = Quicklist::new(-1);
        q.push_back(&[b'x'; 10000]);
        q.push_back(b"a");
        assert_eq!((q.node_count(), total(&q)), (2, 10024));
        let mut q = Quicklist::new(1000);
        for i in 0..3000 {
            q.push_back(i.to_string().as_bytes());
        }
        assert_eq!((q.node_count(), total(&q)), (3, 8893));
        let mut q = Quicklist::new(5000);
        for i in 0..20000 {
            q.push_back(i.to_string().as_bytes());
        }
        assert_eq!((q.node_count(), total(&q)), (10, 75846));
        for (len, per_node) in [(8, 817), (12, 584), (40, 194)] {
            for fill in [1000, -2] {
                let mut q = Quicklist::new(fill);
                for _ in 0..per_node + 1 {
                    q.push_back(&vec![b'a'; len]);
                }
                assert_eq!(q.nodes[0].len(), per_node, "len {len} fill {fill}");
            }
        }
    }

    /// Node sizes from which Redis 7.0.15 compresses (its serializedlength
    /// with `rdbcompression no` drops): a 48-byte listpack, an LZF form at
    /// least 9 bytes smaller.
    #[test]
    fn compresses_where_redis_does() {
        let middle = |e: &[u8]| {
            let mut q = Quicklist::with_depth(1, 1);
            for x in [&b"x"[..], e, b"y"] {
                q.push_back(x);
            }
            check_invariants(&q);
            q.compressed_nodes()
        };
        assert_eq!(middle(&[b'a'; 38]), 0);
        assert_eq!(middle(&[b'a'; 39]), 1);
        let mut q = Quicklist::with_depth(-2, 1);
        for _ in 0..10 {
            q.push_back(&[b'a'; 3000]);
        }
        assert_eq!((q.node_count(), q.compressed_nodes()), (5, 3));
        assert_eq!(q.nodes_size(), 30075);
        // Walks decode into temporaries; other reads into a cache that the
        // next change drops.
        let mut n = 0;
        q.walk(9, false, |_| {
            n += 1;
            true
        });
        assert_eq!(q.get_with(4, |v| v.str_len()), Some(3000));
        assert!(n == 10 && !q.cached.load(Ordering::Relaxed));
        assert_eq!(q.get(4).map(|v| v.to_vec()), Some(vec![b'a'; 3000]));
        assert!(q.cached.load(Ordering::Relaxed));
        q.push_back(b"z");
        assert!(!q.cached.load(Ordering::Relaxed));
        assert_eq!(q.compressed_nodes(), 3);
        for _ in 0..9 {
            q.pop_front();
        }
        assert_eq!((q.node_count(), q.compressed_nodes()), (1, 0));
    }

    #[test]
    fn matches_a_vec_under_random_operations() {
        for depth in 0..=3 {
            random_operations(depth);
        }
    }

    fn random_operations(depth: usize) {
        let mut rng = StdRng::seed_from_u64(3 + depth as u64);
        for round in 0..60 {
            let fill = [-1, -2, 1, 2, 3, 4, 16][round % 7];
            let mut q = Quicklist::with_depth(fill, depth);
            let mut m: Vec<Vec<u8>> = Vec::new();
            for _ in 0..400 {
                let len = m.len() as i64;
                match rng.gen_range(0..13) {
                    0 | 1 => {
                        let e = elem(&mut rng);
                        q.push_back(&e);
                        m.push(e);
                    }
                    2 | 3 => {
                        let e = elem(&mut rng);
                        q.push_front(&e);
                        m.insert(0, e);
                    }
                    4 => assert_eq!(q.pop_back(), m.pop()),
                    5 => assert_eq!(q.pop_front(), (!m.is_empty()).then(|| m.remove(0))),
                    6 => {
                        let i = rng.gen_range(-len - 2..len + 2);
                        let j = if i < 0 { len + i } else { i };
                        let want = (0..len).contains(&j).then(|| m[j as usize].clone());
                        assert_eq!(q.get(i).map(|v| v.to_vec()), want);
                        assert_eq!(q.get_with(i, |v| v.to_vec()), want);
                    }
                    7 => {
                        let i = rng.gen_range(-len - 2..len + 2);
                        let j = if i < 0 { len + i } else { i };
                        let e = elem(&mut rng);
                        let ok = (0..len).contains(&j);
                        assert_eq!(q.set(i, &e), ok);
                        if ok {
                            m[j as usize] = e;
                        }
                    }
                    8 => {
                        let pivot = elem(&mut rng);
                        let e = elem(&mut rng);
                        let after = rng.gen_bool(0.5);
                        let pos = m.iter().position(|x| *x == pivot);
                        assert_eq!(q.insert(&pivot, &e, after), pos.is_some());
                        if let Some(p) = pos {
                            m.insert(p + usize::from(after), e);
                        }
                    }
                    9 => {
                        let e = elem(&mut rng);
                        let count = rng.gen_range(-3..=3);
                        let want = if count >= 0 {
                            let lim = if count == 0 {
                                usize::MAX
                            } else {
                                count as usize
                            };
                            let mut n = 0;
                            m.retain(|x| {
                                if n < lim && *x == e {
                                    n += 1;
                                    false
                                } else {
                                    true
                                }
                            });
                            n
                        } else {
                            let lim = (-count) as usize;
                            let mut n = 0;
                            let mut i = m.len();
                            while i > 0 && n < lim {
                                i -= 1;
                                if m[i] == e {
                                    m.remove(i);
                                    n += 1;
                                }
                            }
                            n
                        };
                        assert_eq!(q.remove(count, &e), want);
                    }
                    10 if rng.gen_range(0..4) == 0 => {
                        let s = rng.gen_range(-len - 3..len + 3);
                        let e = rng.gen_range(-len - 3..len + 3);
                        m = norm(&m, s, e);
                        q.trim(s, e);
                    }
                    11 => {
                        let s = rng.gen_range(-len - 3..len + 3);
                        let e = rng.gen_range(-len - 3..len + 3);
                        let got: Vec<Vec<u8>> = q.range(s, e).map(|v| v.to_vec()).collect();
                        assert_eq!(got, norm(&m, s, e));
                    }
                    _ => {
                        if !m.is_empty() {
                            let s = rng.gen_range(0..m.len());
                            let got: Vec<Vec<u8>> =
                                q.iter_from(s, false).map(|v| v.to_vec()).collect();
                            let want: Vec<Vec<u8>> = m[..=s].iter().rev().cloned().collect();
                            assert_eq!(got, want);
                            let mut walked = Vec::new();
                            let forward = rng.gen_bool(0.5);
                            q.walk(s, forward, |v| {
                                walked.push(v.to_vec());
                                walked.len() < 50
                            });
                            let want: Vec<Vec<u8>> = if forward {
                                m[s..].iter().take(50).cloned().collect()
                            } else {
                                m[..=s].iter().rev().take(50).cloned().collect()
                            };
                            assert_eq!(walked, want);
                        }
                    }
                }
                assert_eq!(q.len(), m.len());
                check_invariants(&q);
            }
            let got: Vec<Vec<u8>> = q.iter().map(|v| v.to_vec()).collect();
            assert_eq!(got, m);
        }
    }
}
