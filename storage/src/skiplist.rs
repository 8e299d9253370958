//! A skiplist ordered by (score, member) with span counts, the ordered half
//! of a large sorted set (the other half is a member → score dict; see
//! [`crate::zset`]).
//!
//! Layout: nodes live in an arena (`Vec<Node>`) and link by `u32` index
//! (`NIL` = none), so there is no unsafe code and no per-node allocation.
//! Slot 0 is the header with `MAX_LEVEL` levels; freed slots are chained
//! through `next` and reused. Each level link carries a `span`: how many
//! rank positions the link jumps (for a link to NIL, the distance past the
//! tail), which gives O(log n) rank and rank → node. `back` links level 0
//! backwards for reverse walks (NIL for the first node). Level 0 is inside
//! the node; a node's levels 1.. (a quarter of the nodes have any) are a
//! block of `height - 1` entries in the shared `up` array, recycled through
//! per-height free lists.
//!
//! The list is also its own member index (what Redis keeps as a separate
//! member → score dict): a chained hash table whose `buckets` hold node
//! indices and whose chains run through the nodes' `next` field, so the
//! member is stored once and the index costs 4 bytes per bucket. Buckets
//! are a power of two, at least `len` (grown ×2 when an insert passes it,
//! shrunk when under 1/8 full); ZSCAN walks them with Redis's reverse-binary
//! cursor, which returns every member present for the whole scan across
//! resizes. A resize rehashes all members at once (a sequential pass over
//! the arena: O(n) once per doubling, amortized O(1) per insert, unlike
//! Redis's incremental rehash — a 1M-member resize takes a few ms).
//!
//! Invariants: level-0 order is strictly ascending by (score, member)
//! (scores compare numerically, members bytewise; NaN is never stored);
//! the sum of spans along any level from the header is `len`; `level` is the
//! highest level in use (≥ 1); a node's level is 1 + geometric(p = 1/4),
//! capped at 32; `height == 0` marks a free slot; every live node other
//! than the header is in exactly one bucket chain, the one of its member's
//! hash; members are unique.
//!
//! Complexity: insert, delete, score update, rank, node-by-rank and the
//! first/last node of a score or lex range are O(log n) expected; member
//! lookup O(1) expected; walks are O(1) per step.
//!
//! Memory (measured by `node_size` test, 64-bit): a node is a 56-byte slot
//! (24-byte inline member up to 22 bytes, f64 score, back link, level 0,
//! up-block index, chain link, height), plus 8 bytes per extra level (1/3
//! extra level on average: ~2.7 bytes), plus 4-8 bytes of buckets: about
//! 65 bytes per element with a short member, against Redis's skiplist node
//! + sds + dict entry + bucket (~106 bytes measured).

use crate::CBytes;
use std::cmp::Ordering;

pub const MAX_LEVEL: usize = 32;
const NIL: u32 = u32::MAX;
const HEAD: u32 = 0;

#[derive(Clone, Copy)]
struct Level {
    fwd: u32,
    span: u32,
}

#[derive(Clone)]
struct Node {
    member: CBytes,
    score: f64,
    back: u32,
    /// Level 0, which every node has.
    l0: Level,
    /// Start of levels 1.. in `Skiplist::up` (NIL when `height` is 1).
    up: u32,
    /// Next node in the member's bucket chain; for a free slot, the next
    /// free slot.
    next: u32,
    /// Number of levels; 0 for a free slot.
    height: u8,
}

/// A score interval with inclusive or exclusive ends (`(1.5`, `-inf`, …).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ScoreRange {
    pub min: f64,
    pub max: f64,
    pub minex: bool,
    pub maxex: bool,
}

impl ScoreRange {
    /// Parses ZRANGEBYSCORE-style bounds; `None` means Redis's
    /// "ERR min or max is not a float".
    pub fn parse(min: &[u8], max: &[u8]) -> Option<Self> {
        use crate::num::parse_score_bound as bound;
        let (min, minex) = bound(min)?;
        let (max, maxex) = bound(max)?;
        Some(ScoreRange {
            min,
            max,
            minex,
            maxex,
        })
    }

    pub fn gte_min(&self, v: f64) -> bool {
        if self.minex {
            v > self.min
        } else {
            v >= self.min
        }
    }

    pub fn lte_max(&self, v: f64) -> bool {
        if self.maxex {
            v < self.max
        } else {
            v <= self.max
        }
    }

    pub fn contains(&self, v: f64) -> bool {
        self.gte_min(v) && self.lte_max(v)
    }

    /// True when no value can be inside.
    pub fn is_empty(&self) -> bool {
        self.min > self.max || (self.min == self.max && (self.minex || self.maxex))
    }
}

/// One end of a lex range: `-`, `+`, `[member` or `(member`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LexBound {
    NegInf,
    PosInf,
    Incl(Vec<u8>),
    Excl(Vec<u8>),
}

impl LexBound {
    /// `None` means Redis's "ERR min or max not valid string range item".
    pub fn parse(b: &[u8]) -> Option<Self> {
        match b {
            b"-" => Some(LexBound::NegInf),
            b"+" => Some(LexBound::PosInf),
            [b'[', rest @ ..] => Some(LexBound::Incl(rest.to_vec())),
            [b'(', rest @ ..] => Some(LexBound::Excl(rest.to_vec())),
            _ => None,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LexRange {
    pub min: LexBound,
    pub max: LexBound,
}

impl LexRange {
    pub fn parse(min: &[u8], max: &[u8]) -> Option<Self> {
        Some(LexRange {
            min: LexBound::parse(min)?,
            max: LexBound::parse(max)?,
        })
    }

    pub fn gte_min(&self, m: &[u8]) -> bool {
        match &self.min {
            LexBound::NegInf => true,
            LexBound::PosInf => false,
            LexBound::Incl(b) => m >= &b[..],
            LexBound::Excl(b) => m > &b[..],
        }
    }

    pub fn lte_max(&self, m: &[u8]) -> bool {
        match &self.max {
            LexBound::NegInf => false,
            LexBound::PosInf => true,
            LexBound::Incl(b) => m <= &b[..],
            LexBound::Excl(b) => m < &b[..],
        }
    }

    /// True when no string can be inside (min above max).
    pub fn is_empty(&self) -> bool {
        use LexBound::*;
        let (a, aex) = match &self.min {
            NegInf => return matches!(self.max, NegInf),
            PosInf => return true,
            Incl(b) => (b, false),
            Excl(b) => (b, true),
        };
        let (b, bex) = match &self.max {
            NegInf => return true,
            PosInf => return false,
            Incl(b) => (b, false),
            Excl(b) => (b, true),
        };
        match a.cmp(b) {
            Ordering::Greater => true,
            Ordering::Equal => aex || bex,
            Ordering::Less => false,
        }
    }
}

#[derive(Clone)]
pub struct Skiplist {
    nodes: Vec<Node>,
    /// Levels 1.. of every node, in blocks of `height - 1`.
    up: Vec<Level>,
    /// Free `up` blocks by node height, chained through their first
    /// entry's `fwd`.
    up_free: [u32; MAX_LEVEL + 1],
    /// First free node slot (chained through `next`).
    free: u32,
    /// The member index: bucket → first node of its chain.
    buckets: Vec<u32>,
    hasher: ahash::RandomState,
    tail: u32,
    len: usize,
    level: usize,
    seed: u64,
}

impl Default for Skiplist {
    fn default() -> Self {
        Skiplist::new()
    }
}

/// Handle to a node, valid until the next mutation.
pub type NodeId = u32;

const MIN_BUCKETS: usize = 4;

impl Skiplist {
    pub fn new() -> Self {
        let head = Node {
            member: CBytes::new(b""),
            score: 0.0,
            back: NIL,
            l0: Level { fwd: NIL, span: 0 },
            up: 0,
            next: NIL,
            height: MAX_LEVEL as u8,
        };
        // Any odd seed works for xorshift; vary it per list so level shapes
        // differ between keys.
        let seed = rand::random::<u64>() | 1;
        Skiplist {
            nodes: vec![head],
            up: vec![Level { fwd: NIL, span: 0 }; MAX_LEVEL - 1],
            up_free: [NIL; MAX_LEVEL + 1],
            free: NIL,
            buckets: Vec::new(),
            hasher: ahash::RandomState::new(),
            tail: NIL,
            len: 0,
            level: 1,
            seed,
        }
    }

    /// The member index's shape (DEBUG HTSTATS-KEY): one table, as it
    /// resizes at once.
    pub fn index_stats(&self) -> crate::TableStats {
        let chain = |mut x: u32| {
            let mut len = 0;
            while x != NIL {
                len += 1;
                x = self.nodes[x as usize].next;
            }
            len
        };
        crate::TableStats::new(self.len, self.buckets.iter().map(|&b| chain(b)))
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Approximate heap bytes owned.
    pub fn heap_size(&self) -> usize {
        self.nodes.capacity() * std::mem::size_of::<Node>()
            + self.up.capacity() * std::mem::size_of::<Level>()
            + self.buckets.capacity() * 4
            + self
                .nodes
                .iter()
                .map(|n| n.member.heap_size())
                .sum::<usize>()
    }

    // ---- member index

    fn bucket_of(&self, member: &[u8]) -> usize {
        self.hasher.hash_one(member) as usize & (self.buckets.len() - 1)
    }

    /// The node holding `member`.
    pub fn find(&self, member: &[u8]) -> Option<NodeId> {
        if self.buckets.is_empty() {
            return None;
        }
        let mut x = self.buckets[self.bucket_of(member)];
        while x != NIL {
            let n = &self.nodes[x as usize];
            if &*n.member == member {
                return Some(x);
            }
            x = n.next;
        }
        None
    }

    /// The score of `member`, if present.
    pub fn get_score(&self, member: &[u8]) -> Option<f64> {
        self.find(member).map(|x| self.nodes[x as usize].score)
    }

    /// Rebuilds the index with `size` buckets (a power of two).
    fn resize_index(&mut self, size: usize) {
        self.buckets = vec![NIL; size];
        for x in 1..self.nodes.len() {
            if self.nodes[x].height != 0 {
                self.link_index(x as u32);
            }
        }
    }

    fn link_index(&mut self, x: u32) {
        let b = self.bucket_of(&self.nodes[x as usize].member);
        self.nodes[x as usize].next = self.buckets[b];
        self.buckets[b] = x;
    }

    fn unlink_index(&mut self, x: u32) {
        let b = self.bucket_of(&self.nodes[x as usize].member);
        let after = self.nodes[x as usize].next;
        if self.buckets[b] == x {
            self.buckets[b] = after;
            return;
        }
        let mut p = self.buckets[b];
        while self.nodes[p as usize].next != x {
            p = self.nodes[p as usize].next;
        }
        self.nodes[p as usize].next = after;
    }

    /// Visits the bucket at `cursor` and returns the next cursor (0 when
    /// the scan is complete): Redis's `dictScan` on one table.
    pub fn scan(&self, cursor: u64, mut f: impl FnMut(&CBytes, f64)) -> u64 {
        if self.len == 0 {
            return 0;
        }
        let m = (self.buckets.len() - 1) as u64;
        let mut x = self.buckets[(cursor & m) as usize];
        while x != NIL {
            let n = &self.nodes[x as usize];
            f(&n.member, n.score);
            x = n.next;
        }
        (cursor | !m).reverse_bits().wrapping_add(1).reverse_bits()
    }

    fn random_level(&mut self) -> usize {
        let mut l = 1;
        loop {
            // xorshift64
            self.seed ^= self.seed << 13;
            self.seed ^= self.seed >> 7;
            self.seed ^= self.seed << 17;
            if l >= MAX_LEVEL || self.seed & 3 != 0 {
                return l;
            }
            l += 1;
        }
    }

    fn level(&self, x: u32, i: usize) -> Level {
        let n = &self.nodes[x as usize];
        if i == 0 {
            n.l0
        } else {
            self.up[n.up as usize + i - 1]
        }
    }

    fn fwd(&self, x: u32, i: usize) -> u32 {
        self.level(x, i).fwd
    }

    fn span(&self, x: u32, i: usize) -> u32 {
        self.level(x, i).span
    }

    fn lvl(&mut self, x: u32, i: usize) -> &mut Level {
        if i == 0 {
            return &mut self.nodes[x as usize].l0;
        }
        let u = self.nodes[x as usize].up as usize;
        &mut self.up[u + i - 1]
    }

    /// Whether node `a` sorts before node `b`.
    fn node_before(&self, a: u32, b: u32) -> bool {
        let b = &self.nodes[b as usize];
        self.before(a, b.score, &b.member)
    }

    /// Whether node `x` sorts before (score, member).
    fn before(&self, x: u32, score: f64, member: &[u8]) -> bool {
        let n = &self.nodes[x as usize];
        n.score < score || (n.score == score && &*n.member < member)
    }

    pub fn member(&self, x: NodeId) -> &CBytes {
        &self.nodes[x as usize].member
    }

    pub fn score(&self, x: NodeId) -> f64 {
        self.nodes[x as usize].score
    }

    pub fn first(&self) -> Option<NodeId> {
        let f = self.fwd(HEAD, 0);
        (f != NIL).then_some(f)
    }

    pub fn last(&self) -> Option<NodeId> {
        (self.tail != NIL).then_some(self.tail)
    }

    pub fn next(&self, x: NodeId) -> Option<NodeId> {
        let f = self.fwd(x, 0);
        (f != NIL).then_some(f)
    }

    pub fn prev(&self, x: NodeId) -> Option<NodeId> {
        let b = self.nodes[x as usize].back;
        (b != NIL).then_some(b)
    }

    /// Takes a node slot (and an `up` block when `level > 1`) and links
    /// the member into the index.
    fn alloc(&mut self, level: usize, score: f64, member: CBytes) -> u32 {
        if self.len + 1 > self.buckets.len() {
            let size = (self.len + 1).next_power_of_two().max(MIN_BUCKETS);
            self.resize_index(size);
        }
        let up = if level > 1 { self.alloc_up(level) } else { NIL };
        let node = Node {
            member,
            score,
            back: NIL,
            l0: Level { fwd: NIL, span: 0 },
            up,
            next: NIL,
            height: level as u8,
        };
        let x = if self.free != NIL {
            let x = self.free;
            self.free = self.nodes[x as usize].next;
            self.nodes[x as usize] = node;
            x
        } else {
            assert!(self.nodes.len() < NIL as usize, "skiplist full");
            self.nodes.push(node);
            (self.nodes.len() - 1) as u32
        };
        self.link_index(x);
        x
    }

    /// A block for levels 1..`height` (cleared).
    fn alloc_up(&mut self, height: usize) -> u32 {
        let b = self.up_free[height];
        let clear = Level { fwd: NIL, span: 0 };
        if b != NIL {
            self.up_free[height] = self.up[b as usize].fwd;
            self.up[b as usize..b as usize + height - 1].fill(clear);
            return b;
        }
        let b = self.up.len();
        assert!(b + height < NIL as usize, "skiplist full");
        self.up.resize(b + height - 1, clear);
        b as u32
    }

    /// Inserts a member known to be absent. NaN scores are the caller's
    /// bug.
    pub fn insert(&mut self, score: f64, member: CBytes) -> NodeId {
        debug_assert!(!score.is_nan());
        let level = self.random_level();
        let x = self.alloc(level, score, member);
        self.link(x);
        x
    }

    /// Links the unlinked node `x` into the levels at its (score, member)
    /// position, with its own height.
    fn link(&mut self, x: u32) {
        let level = self.nodes[x as usize].height as usize;
        let mut update = [HEAD; MAX_LEVEL];
        let mut rank = [0u32; MAX_LEVEL];
        let mut p = HEAD;
        for i in (0..self.level).rev() {
            rank[i] = if i == self.level - 1 { 0 } else { rank[i + 1] };
            loop {
                let f = self.fwd(p, i);
                if f == NIL || !self.node_before(f, x) {
                    break;
                }
                rank[i] += self.span(p, i);
                p = f;
            }
            update[i] = p;
        }
        if level > self.level {
            for i in self.level..level {
                rank[i] = 0;
                update[i] = HEAD;
                self.lvl(HEAD, i).span = self.len as u32;
            }
            self.level = level;
        }
        for i in 0..level {
            let u = update[i];
            let ufwd = self.fwd(u, i);
            let uspan = self.span(u, i);
            let d = rank[0] - rank[i];
            *self.lvl(x, i) = Level {
                fwd: ufwd,
                span: uspan - d,
            };
            *self.lvl(u, i) = Level {
                fwd: x,
                span: d + 1,
            };
        }
        for (i, &u) in update.iter().enumerate().take(self.level).skip(level) {
            self.lvl(u, i).span += 1;
        }
        self.nodes[x as usize].back = if update[0] == HEAD { NIL } else { update[0] };
        let f = self.fwd(x, 0);
        if f != NIL {
            self.nodes[f as usize].back = x;
        } else {
            self.tail = x;
        }
        self.len += 1;
    }

    /// Path of last nodes before (score, member) on each level.
    fn path(&self, score: f64, member: &[u8]) -> [u32; MAX_LEVEL] {
        let mut update = [HEAD; MAX_LEVEL];
        let mut x = HEAD;
        for i in (0..self.level).rev() {
            loop {
                let f = self.fwd(x, i);
                if f == NIL || !self.before(f, score, member) {
                    break;
                }
                x = f;
            }
            update[i] = x;
        }
        update
    }

    fn unlink(&mut self, x: u32, update: &[u32; MAX_LEVEL]) {
        for (i, &u) in update.iter().enumerate().take(self.level) {
            if self.fwd(u, i) == x {
                let Level { fwd, span } = self.level(x, i);
                let l = self.lvl(u, i);
                l.span = l.span + span - 1;
                l.fwd = fwd;
            } else {
                self.lvl(u, i).span -= 1;
            }
        }
        let f = self.fwd(x, 0);
        let b = self.nodes[x as usize].back;
        if f != NIL {
            self.nodes[f as usize].back = b;
        } else {
            self.tail = b;
        }
        while self.level > 1 && self.fwd(HEAD, self.level - 1) == NIL {
            self.level -= 1;
        }
        self.len -= 1;
    }

    /// Frees slot `x` (already unlinked from the levels), taking it out of
    /// the index; returns its member.
    fn release(&mut self, x: u32) -> CBytes {
        self.unlink_index(x);
        let (h, up) = {
            let n = &self.nodes[x as usize];
            (n.height as usize, n.up)
        };
        if h > 1 {
            self.up[up as usize].fwd = self.up_free[h];
            self.up_free[h] = up;
        }
        let free = self.free;
        let n = &mut self.nodes[x as usize];
        n.height = 0;
        n.up = NIL;
        n.next = free;
        self.free = x;
        let m = std::mem::replace(&mut n.member, CBytes::new(b""));
        if self.len * 8 < self.buckets.len() && self.buckets.len() > MIN_BUCKETS {
            let size = self.len.next_power_of_two().max(MIN_BUCKETS);
            self.resize_index(size);
        }
        m
    }

    /// Deletes (score, member); returns the member if it was present.
    pub fn delete(&mut self, score: f64, member: &[u8]) -> Option<CBytes> {
        let update = self.path(score, member);
        let x = self.fwd(update[0], 0);
        if x == NIL
            || self.nodes[x as usize].score != score
            || &*self.nodes[x as usize].member != member
        {
            return None;
        }
        self.unlink(x, &update);
        Some(self.release(x))
    }

    /// Changes the score of a present member; in place when its position
    /// does not change.
    pub fn update_score(&mut self, cur: f64, member: &[u8], new: f64) -> NodeId {
        let update = self.path(cur, member);
        let x = self.fwd(update[0], 0);
        debug_assert!(x != NIL && &*self.nodes[x as usize].member == member);
        let b = self.nodes[x as usize].back;
        let f = self.fwd(x, 0);
        let after_prev = b == NIL || self.before(b, new, member);
        let before_next = f == NIL || !self.before(f, new, member);
        if after_prev && before_next {
            self.nodes[x as usize].score = new;
            return x;
        }
        // Relinked in place: the slot, its height and its index entry stay.
        self.unlink(x, &update);
        self.nodes[x as usize].score = new;
        self.link(x);
        x
    }

    /// 0-based rank of (score, member), if present.
    pub fn rank(&self, score: f64, member: &[u8]) -> Option<usize> {
        let mut x = HEAD;
        let mut rank = 0usize;
        for i in (0..self.level).rev() {
            loop {
                let f = self.fwd(x, i);
                if f == NIL {
                    break;
                }
                let n = &self.nodes[f as usize];
                if n.score < score || (n.score == score && &*n.member <= member) {
                    rank += self.span(x, i) as usize;
                    x = f;
                } else {
                    break;
                }
            }
            if x != HEAD && &*self.nodes[x as usize].member == member {
                return Some(rank - 1);
            }
        }
        None
    }

    /// Node at 0-based `rank`.
    pub fn by_rank(&self, rank: usize) -> Option<NodeId> {
        if rank >= self.len {
            return None;
        }
        let want = rank + 1;
        let mut x = HEAD;
        let mut t = 0usize;
        for i in (0..self.level).rev() {
            loop {
                let f = self.fwd(x, i);
                if f == NIL || t + self.span(x, i) as usize > want {
                    break;
                }
                t += self.span(x, i) as usize;
                x = f;
            }
            if t == want {
                return Some(x);
            }
        }
        None
    }

    /// 0-based rank of a node.
    pub fn rank_of(&self, x: NodeId) -> usize {
        let n = &self.nodes[x as usize];
        self.rank(n.score, &n.member).expect("node is in the list")
    }

    /// Last node (deepest on each level) for which `go(node)` holds, when
    /// `go` is monotone (true then false) along the order.
    fn last_where(&self, go: impl Fn(&Node) -> bool) -> u32 {
        let mut x = HEAD;
        for i in (0..self.level).rev() {
            loop {
                let f = self.fwd(x, i);
                if f == NIL || !go(&self.nodes[f as usize]) {
                    break;
                }
                x = f;
            }
        }
        x
    }

    pub fn first_in_range(&self, r: &ScoreRange) -> Option<NodeId> {
        if r.is_empty() || self.len == 0 {
            return None;
        }
        let x = self.last_where(|n| !r.gte_min(n.score));
        let x = self.fwd(x, 0);
        (x != NIL && r.lte_max(self.nodes[x as usize].score)).then_some(x)
    }

    pub fn last_in_range(&self, r: &ScoreRange) -> Option<NodeId> {
        if r.is_empty() || self.len == 0 {
            return None;
        }
        let x = self.last_where(|n| r.lte_max(n.score));
        (x != HEAD && r.gte_min(self.nodes[x as usize].score)).then_some(x)
    }

    pub fn first_in_lex(&self, r: &LexRange) -> Option<NodeId> {
        if r.is_empty() || self.len == 0 {
            return None;
        }
        let x = self.last_where(|n| !r.gte_min(&n.member));
        let x = self.fwd(x, 0);
        (x != NIL && r.lte_max(&self.nodes[x as usize].member)).then_some(x)
    }

    pub fn last_in_lex(&self, r: &LexRange) -> Option<NodeId> {
        if r.is_empty() || self.len == 0 {
            return None;
        }
        let x = self.last_where(|n| r.lte_max(&n.member));
        (x != HEAD && r.gte_min(&self.nodes[x as usize].member)).then_some(x)
    }

    /// Deletes the nodes of 0-based ranks `start..end`, handing each
    /// removed (member, score) to `f`.
    pub fn delete_ranks(&mut self, start: usize, end: usize, mut f: impl FnMut(CBytes, f64)) {
        if start >= end || start >= self.len {
            return;
        }
        let Some(x) = self.by_rank(start) else {
            return;
        };
        let (score, member) = (
            self.nodes[x as usize].score,
            self.nodes[x as usize].member.clone(),
        );
        let update = self.path(score, &member);
        let mut x = x;
        for _ in start..end.min(self.len) {
            let next = self.fwd(x, 0);
            // After unlinking, the update path stays valid: every level's
            // predecessor of the next node is the same predecessor.
            self.unlink(x, &update);
            let s = self.nodes[x as usize].score;
            let m = self.release(x);
            f(m, s);
            x = next;
        }
    }

    /// Walk from node `x` in order (`forward`) or backwards.
    pub fn walk(&self, x: Option<NodeId>, forward: bool) -> impl Iterator<Item = (&CBytes, f64)> {
        let mut cur = x;
        std::iter::from_fn(move || {
            let id = cur?;
            cur = if forward {
                self.next(id)
            } else {
                self.prev(id)
            };
            let n = &self.nodes[id as usize];
            Some((&n.member, n.score))
        })
    }

    /// Checks the structural invariants (tests).
    #[cfg(test)]
    pub fn check(&self) {
        let mut x = self.fwd(HEAD, 0);
        let mut prev = NIL;
        let mut count = 0usize;
        while x != NIL {
            let n = &self.nodes[x as usize];
            assert_eq!(n.back, prev);
            if prev != NIL {
                let p = &self.nodes[prev as usize];
                assert!((p.score, &p.member) < (n.score, &n.member));
            }
            assert_eq!(self.find(&n.member), Some(x));
            prev = x;
            x = n.l0.fwd;
            count += 1;
        }
        assert_eq!(count, self.len);
        let mut indexed = 0;
        for &b in &self.buckets {
            let mut x = b;
            while x != NIL {
                indexed += 1;
                x = self.nodes[x as usize].next;
            }
        }
        assert_eq!(indexed, self.len);
        assert!(self.buckets.len() >= self.len);
        assert_eq!(self.tail, prev);
        for i in 0..self.level {
            let mut x = HEAD;
            let mut sum = 0usize;
            loop {
                sum += self.span(x, i) as usize;
                let f = self.fwd(x, i);
                if f == NIL {
                    break;
                }
                x = f;
            }
            // Spans to NIL count the distance past the tail.
            assert_eq!(sum, self.len, "level {i}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_size() {
        assert_eq!(std::mem::size_of::<Node>(), 56);
        assert_eq!(std::mem::size_of::<Level>(), 8);
    }

    #[test]
    fn ranks_and_ranges() {
        let mut z = Skiplist::new();
        for i in 0..1000 {
            z.insert((i / 2) as f64, CBytes::from(format!("m{i:04}").as_str()));
        }
        z.check();
        for i in 0..1000 {
            let m = format!("m{i:04}");
            assert_eq!(z.rank((i / 2) as f64, m.as_bytes()), Some(i));
            let x = z.by_rank(i).unwrap();
            assert_eq!(&**z.member(x), m.as_bytes());
        }
        let r = ScoreRange::parse(b"(10", b"20").unwrap();
        let a = z.first_in_range(&r).unwrap();
        let b = z.last_in_range(&r).unwrap();
        assert_eq!((z.rank_of(a), z.rank_of(b)), (22, 41));
        let mut removed = 0;
        z.delete_ranks(10, 500, |_, _| removed += 1);
        assert_eq!(removed, 490);
        z.check();
        assert_eq!(z.len(), 510);
    }
}
