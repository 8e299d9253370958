//! The sorted set type with Redis 7.0's two encodings behind one API.
//!
//! - `Listpack`: member, score, member, score, … sorted by (score, member).
//!   A score is stored as a listpack integer when it is integral and within
//!   ±2^62 (-0 becomes 0, as Redis's listpack does), else as its shortest
//!   round-trip decimal text (Redis writes `%.17g`, e.g. 21 bytes for 0.1
//!   where we write 3; both read back to the same double). Every operation is a linear walk, fine while
//!   the set has at most `zset-max-listpack-entries` members.
//! - `Skiplist`: a [`Skiplist`] ordered by (score, member) with spans, which
//!   is also a hash index of its members (O(1) ZSCORE and membership; the
//!   member is stored once, where Redis keeps a second dict).
//!
//! Invariants: no NaN score is stored; members are unique.
//! Encoding changes: listpack → skiplist when an insert makes the set
//! exceed `max_listpack_entries` or brings a member longer than
//! `max_listpack_value`; never back on its own — only a command creating a
//! new set picks its encoding up front ([`SortedSet::with_hint`]) or asks
//! for [`SortedSet::convert_to_listpack_if_fits`] (ZUNIONSTORE,
//! ZRANGESTORE, … as Redis does).
//!
//! Every range (by rank, score or lex) is a contiguous run of ranks, so the
//! range operations first find the rank interval `[a, b)` (O(log n) in a
//! skiplist) and then walk or delete it.
//!
//! Complexity (skiplist): add/remove/rank O(log n), score O(1), range
//! O(log n + m). Listpack: O(n) everything, n ≤ 128 by default.
//!
//! Measured (test `bytes_per_element`): 10 members "member:N" with integer
//! scores take 120 bytes of listpack, 12 bytes per element; with the 7
//! header bytes that is 127, exactly what Redis 7.0.15's DEBUG LISTPACK
//! reports for the same set (its entries are byte-identical); stored as one
//! exact allocation of 124 bytes held unboxed in the `Value`. A skiplist
//! element: ~65 bytes with a short member, see [`crate::skiplist`].

use crate::listpack::{Listpack, LpVal};
use crate::skiplist::{LexRange, ScoreRange, Skiplist};
use crate::CBytes;

/// `zset-max-listpack-entries` / `zset-max-listpack-value`.
#[derive(Clone, Copy, Debug)]
pub struct ZsetLimits {
    pub max_listpack_entries: usize,
    pub max_listpack_value: usize,
}

impl Default for ZsetLimits {
    fn default() -> Self {
        ZsetLimits {
            max_listpack_entries: 128,
            max_listpack_value: 64,
        }
    }
}

/// ZADD's options.
#[derive(Clone, Copy, Debug, Default)]
pub struct ZaddFlags {
    pub nx: bool,
    pub xx: bool,
    pub gt: bool,
    pub lt: bool,
    pub incr: bool,
}

/// What one ZADD element did.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ZaddOutcome {
    /// INCR produced NaN (`ERR resulting score is not a number (NaN)`).
    Nan,
    /// Skipped by NX / XX / GT / LT (ZADD INCR replies nil).
    Nop,
    Added(f64),
    /// The score changed (counts for CH).
    Updated(f64),
    /// Present with that same score.
    Unchanged(f64),
}

#[derive(Clone)]
pub enum SortedSet {
    Listpack(Listpack),
    /// The skiplist is also the member index (see [`crate::skiplist`]).
    Skiplist(Box<Skiplist>),
}

/// One result element: member and score.
pub type ZEntry = (CBytes, f64);

fn score_val(s: f64) -> ScoreEnc {
    // Integral and within ±2^62: store as an integer (-0.0 ends up as 0),
    // as Redis's `double2ll` decides.
    let lim = (i64::MAX / 2) as f64;
    if s.fract() == 0.0 && (-lim..=lim).contains(&s) {
        ScoreEnc::Int(s as i64)
    } else {
        ScoreEnc::Text(format!("{s:?}"))
    }
}

enum ScoreEnc {
    Int(i64),
    Text(String),
}

impl ScoreEnc {
    fn val(&self) -> LpVal<'_> {
        match self {
            ScoreEnc::Int(n) => LpVal::Int(*n),
            ScoreEnc::Text(t) => LpVal::Str(t.as_bytes()),
        }
    }
}

fn lp_score(v: LpVal) -> f64 {
    match v {
        LpVal::Int(n) => n as f64,
        LpVal::Str(s) => std::str::from_utf8(s)
            .ok()
            .and_then(|t| t.parse().ok())
            .expect("zset listpack scores are written by us"),
    }
}

/// (member, score) pairs of a zset listpack, both directions.
fn lp_pairs(lp: &Listpack) -> impl DoubleEndedIterator<Item = (LpVal<'_>, f64)> {
    struct Pairs<'a>(crate::listpack::Iter<'a>);
    impl<'a> Iterator for Pairs<'a> {
        type Item = (LpVal<'a>, f64);
        fn next(&mut self) -> Option<Self::Item> {
            let m = self.0.next()?;
            let s = self.0.next().expect("pairs");
            Some((m, lp_score(s)))
        }
    }
    impl DoubleEndedIterator for Pairs<'_> {
        fn next_back(&mut self) -> Option<Self::Item> {
            let s = self.0.next_back()?;
            let m = self.0.next_back().expect("pairs");
            Some((m, lp_score(s)))
        }
    }
    Pairs(lp.iter())
}

fn entry(m: LpVal, s: f64) -> ZEntry {
    (CBytes::new(m.bytes(&mut itoa::Buffer::new())), s)
}

impl Default for SortedSet {
    fn default() -> Self {
        SortedSet::Listpack(Listpack::new())
    }
}

impl SortedSet {
    pub fn new_listpack() -> Self {
        SortedSet::Listpack(Listpack::new())
    }

    pub fn new_skiplist() -> Self {
        SortedSet::Skiplist(Box::default())
    }

    /// The encoding a new set of about `size` members, the longest
    /// `max_member_len` bytes, starts with (Redis's `zsetTypeCreate`).
    pub fn with_hint(size: usize, max_member_len: usize, lim: &ZsetLimits) -> Self {
        if lim.max_listpack_entries == 0
            || size > lim.max_listpack_entries
            || max_member_len > lim.max_listpack_value
        {
            Self::new_skiplist()
        } else {
            Self::new_listpack()
        }
    }

    /// OBJECT ENCODING name.
    pub fn encoding(&self) -> &'static str {
        match self {
            SortedSet::Listpack(_) => "listpack",
            SortedSet::Skiplist(_) => "skiplist",
        }
    }

    pub fn len(&self) -> usize {
        match self {
            SortedSet::Listpack(lp) => lp.len() / 2,
            SortedSet::Skiplist(z) => z.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Approximate heap bytes owned.
    pub fn heap_size(&self) -> usize {
        match self {
            SortedSet::Listpack(lp) => lp.heap_size(),
            SortedSet::Skiplist(z) => std::mem::size_of::<Skiplist>() + z.heap_size(),
        }
    }

    fn lp_find(lp: &Listpack, member: &[u8]) -> Option<(usize, usize, f64)> {
        let mut it = lp.iter_offsets();
        let mut i = 0;
        while let Some((off, m)) = it.next() {
            let (_, s) = it.next().expect("pairs");
            if m.eq_bytes(member) {
                return Some((off, i, lp_score(s)));
            }
            i += 1;
        }
        None
    }

    fn lp_insert(lp: &mut Listpack, member: &[u8], score: f64) {
        let mut at = lp.as_bytes().len();
        let mut it = lp.iter_offsets();
        while let Some((off, m)) = it.next() {
            let s = lp_score(it.next().expect("pairs").1);
            if s > score || (s == score && m.cmp_bytes(member).is_gt()) {
                at = off;
                break;
            }
        }
        let enc = score_val(score);
        lp.insert_at(at, enc.val());
        lp.insert_at(at, LpVal::from_bytes(member));
    }

    pub fn score(&self, member: &[u8]) -> Option<f64> {
        match self {
            SortedSet::Listpack(lp) => Self::lp_find(lp, member).map(|x| x.2),
            SortedSet::Skiplist(z) => z.get_score(member),
        }
    }

    pub fn contains(&self, member: &[u8]) -> bool {
        self.score(member).is_some()
    }

    /// Rewrites a listpack set as a skiplist.
    pub fn convert_to_skiplist(&mut self) {
        let SortedSet::Listpack(lp) = self else {
            return;
        };
        let mut zsl = Box::<Skiplist>::default();
        for (m, s) in lp_pairs(lp) {
            zsl.insert(s, CBytes::new(m.bytes(&mut itoa::Buffer::new())));
        }
        *self = SortedSet::Skiplist(zsl);
    }

    /// Back to a listpack if the set is within the limits (used by commands
    /// that build a new set, as Redis's `zsetConvertToListpackIfNeeded`).
    pub fn convert_to_listpack_if_fits(&mut self, lim: &ZsetLimits) {
        let SortedSet::Skiplist(z) = self else {
            return;
        };
        if z.len() > lim.max_listpack_entries {
            return;
        }
        let mut lp = Listpack::new();
        for (m, s) in z.walk(z.first(), true) {
            if m.len() > lim.max_listpack_value {
                return;
            }
            lp.push_back(m);
            lp.push_back_val(score_val(s).val());
        }
        *self = SortedSet::Listpack(lp);
    }

    /// ZADD for one element (Redis's `zsetAdd`).
    pub fn add(
        &mut self,
        member: &[u8],
        score: f64,
        f: ZaddFlags,
        lim: &ZsetLimits,
    ) -> ZaddOutcome {
        if score.is_nan() {
            return ZaddOutcome::Nan;
        }
        if let Some(cur) = self.score(member) {
            if f.nx {
                return ZaddOutcome::Nop;
            }
            let new = if f.incr { cur + score } else { score };
            if new.is_nan() {
                return ZaddOutcome::Nan;
            }
            if (f.gt && new <= cur) || (f.lt && new >= cur) {
                return ZaddOutcome::Nop;
            }
            if new == cur {
                return ZaddOutcome::Unchanged(new);
            }
            match self {
                SortedSet::Listpack(lp) => {
                    let (off, _, _) = Self::lp_find(lp, member).expect("present");
                    lp.delete_run_at(off, 2);
                    Self::lp_insert(lp, member, new);
                }
                SortedSet::Skiplist(z) => {
                    z.update_score(cur, member, new);
                }
            }
            return ZaddOutcome::Updated(new);
        }
        if f.xx {
            return ZaddOutcome::Nop;
        }
        if let SortedSet::Listpack(lp) = self {
            if lp.len() / 2 + 1 > lim.max_listpack_entries || member.len() > lim.max_listpack_value
            {
                self.convert_to_skiplist();
            }
        }
        match self {
            SortedSet::Listpack(lp) => Self::lp_insert(lp, member, score),
            SortedSet::Skiplist(z) => {
                z.insert(score, CBytes::new(member));
            }
        }
        ZaddOutcome::Added(score)
    }

    /// ZREM of one member.
    pub fn remove(&mut self, member: &[u8]) -> bool {
        match self {
            SortedSet::Listpack(lp) => match Self::lp_find(lp, member) {
                Some((off, _, _)) => {
                    lp.delete_run_at(off, 2);
                    true
                }
                None => false,
            },
            SortedSet::Skiplist(z) => match z.get_score(member) {
                Some(s) => z.delete(s, member).is_some(),
                None => false,
            },
        }
    }

    /// 0-based rank, from the highest score when `rev` (ZRANK/ZREVRANK),
    /// with the member's score.
    pub fn rank(&self, member: &[u8], rev: bool) -> Option<(usize, f64)> {
        let (r, s) = match self {
            SortedSet::Listpack(lp) => Self::lp_find(lp, member).map(|(_, i, s)| (i, s))?,
            SortedSet::Skiplist(z) => {
                let x = z.find(member)?;
                (z.rank_of(x), z.score(x))
            }
        };
        Some((if rev { self.len() - 1 - r } else { r }, s))
    }

    /// Ranks `[a, b)` of the members whose score is in `r`.
    pub fn score_span(&self, r: &ScoreRange) -> (usize, usize) {
        if r.is_empty() {
            return (0, 0);
        }
        match self {
            SortedSet::Listpack(lp) => {
                let mut a = None;
                let mut b = 0;
                for (i, (_, s)) in lp_pairs(lp).enumerate() {
                    if a.is_none() {
                        if !r.gte_min(s) {
                            continue;
                        }
                        a = Some(i);
                    }
                    if !r.lte_max(s) {
                        break;
                    }
                    b = i + 1;
                }
                match a {
                    Some(a) if b > a => (a, b),
                    _ => (0, 0),
                }
            }
            SortedSet::Skiplist(z) => {
                let (Some(x), Some(y)) = (z.first_in_range(r), z.last_in_range(r)) else {
                    return (0, 0);
                };
                (z.rank_of(x), z.rank_of(y) + 1)
            }
        }
    }

    /// Ranks `[a, b)` of the members in lex range `r` (meaningful when all
    /// scores are equal, as in Redis), as a forward walk finds them.
    pub fn lex_span(&self, r: &LexRange) -> (usize, usize) {
        self.lex_span_dir(r, false)
    }

    /// The lex range as a walk finds it, forward or (`rev`) backward. With
    /// equal scores both are the members between the bounds. With mixed
    /// scores a listpack answers exactly as Redis's walks do: forward from
    /// the first member ≥ min while ≤ max, backward from the last member
    /// ≤ max while ≥ min, nothing if the first member is above max or the
    /// last below min.
    pub fn lex_span_dir(&self, r: &LexRange, rev: bool) -> (usize, usize) {
        if r.is_empty() {
            return (0, 0);
        }
        let mut buf = itoa::Buffer::new();
        match self {
            SortedSet::Listpack(lp) => {
                let n = lp.len() / 2;
                let (Some((first, _)), Some((last, _))) =
                    (lp_pairs(lp).next(), lp_pairs(lp).next_back())
                else {
                    return (0, 0);
                };
                if !r.lte_max(first.bytes(&mut buf)) || !r.gte_min(last.bytes(&mut buf)) {
                    return (0, 0);
                }
                if rev {
                    let Some(back) = lp_pairs(lp)
                        .rev()
                        .position(|(m, _)| r.lte_max(m.bytes(&mut buf)))
                    else {
                        return (0, 0);
                    };
                    let run = lp_pairs(lp)
                        .rev()
                        .skip(back)
                        .take_while(|(m, _)| r.gte_min(m.bytes(&mut buf)))
                        .count();
                    (n - back - run, n - back)
                } else {
                    let Some(a) = lp_pairs(lp).position(|(m, _)| r.gte_min(m.bytes(&mut buf)))
                    else {
                        return (0, 0);
                    };
                    let run = lp_pairs(lp)
                        .skip(a)
                        .take_while(|(m, _)| r.lte_max(m.bytes(&mut buf)))
                        .count();
                    (a, a + run)
                }
            }
            SortedSet::Skiplist(z) => {
                let (Some(x), Some(y)) = (z.first_in_lex(r), z.last_in_lex(r)) else {
                    return (0, 0);
                };
                let (a, b) = (z.rank_of(x), z.rank_of(y) + 1);
                if b > a {
                    (a, b)
                } else {
                    (0, 0)
                }
            }
        }
    }

    /// ZCOUNT.
    pub fn count_in_score(&self, r: &ScoreRange) -> usize {
        let (a, b) = self.score_span(r);
        b - a
    }

    /// ZLEXCOUNT.
    pub fn count_in_lex(&self, r: &LexRange) -> usize {
        let (a, b) = self.lex_span(r);
        b - a
    }

    /// The members of ranks `[a, b)`, ascending, or descending if `rev`.
    pub fn entries(&self, a: usize, b: usize, rev: bool) -> Vec<ZEntry> {
        let b = b.min(self.len());
        if a >= b {
            return Vec::new();
        }
        let n = b - a;
        let mut out = Vec::with_capacity(n);
        match self {
            SortedSet::Listpack(lp) => {
                if rev {
                    let skip = self.len() - b;
                    out.extend(
                        lp_pairs(lp)
                            .rev()
                            .skip(skip)
                            .take(n)
                            .map(|(m, s)| entry(m, s)),
                    );
                } else {
                    out.extend(lp_pairs(lp).skip(a).take(n).map(|(m, s)| entry(m, s)));
                }
            }
            SortedSet::Skiplist(z) => {
                let start = if rev { b - 1 } else { a };
                out.extend(
                    z.walk(z.by_rank(start), !rev)
                        .take(n)
                        .map(|(m, s)| (m.clone(), s)),
                );
            }
        }
        out
    }

    /// ZRANGE by index (`start..=stop`, negative from the end); with `rev`
    /// the indexes count from the highest score.
    pub fn range_by_rank(&self, start: i64, stop: i64, rev: bool) -> Vec<ZEntry> {
        let len = self.len();
        let Some((s, e)) = crate::quicklist::normalize_range(start, stop, len) else {
            return Vec::new();
        };
        if rev {
            self.entries(len - 1 - e, len - s, true)
        } else {
            self.entries(s, e + 1, false)
        }
    }

    /// Applies REV, LIMIT offset count to the rank span `[a, b)`.
    fn limited(
        &self,
        (a, b): (usize, usize),
        rev: bool,
        offset: usize,
        limit: Option<usize>,
    ) -> Vec<ZEntry> {
        let n = (b - a)
            .saturating_sub(offset)
            .min(limit.unwrap_or(usize::MAX));
        if n == 0 {
            return Vec::new();
        }
        if rev {
            let hi = b - offset;
            self.entries(hi - n, hi, true)
        } else {
            self.entries(a + offset, a + offset + n, false)
        }
    }

    /// ZRANGE BYSCORE [REV] [LIMIT offset count]; a negative count is
    /// `None`, a negative offset is the caller's empty reply.
    pub fn range_by_score(
        &self,
        r: &ScoreRange,
        rev: bool,
        offset: usize,
        limit: Option<usize>,
    ) -> Vec<ZEntry> {
        self.limited(self.score_span(r), rev, offset, limit)
    }

    /// ZRANGE BYLEX [REV] [LIMIT offset count].
    pub fn range_by_lex(
        &self,
        r: &LexRange,
        rev: bool,
        offset: usize,
        limit: Option<usize>,
    ) -> Vec<ZEntry> {
        self.limited(self.lex_span_dir(r, rev), rev, offset, limit)
    }

    /// Removes ranks `[a, b)`; returns how many.
    pub fn remove_ranks(&mut self, a: usize, b: usize) -> usize {
        let b = b.min(self.len());
        if a >= b {
            return 0;
        }
        match self {
            SortedSet::Listpack(lp) => lp.delete_range(2 * a, 2 * (b - a)),
            SortedSet::Skiplist(z) => {
                z.delete_ranks(a, b, |_, _| {});
            }
        }
        b - a
    }

    /// ZREMRANGEBYRANK.
    pub fn remove_range_by_rank(&mut self, start: i64, stop: i64) -> usize {
        match crate::quicklist::normalize_range(start, stop, self.len()) {
            Some((s, e)) => self.remove_ranks(s, e + 1),
            None => 0,
        }
    }

    /// ZREMRANGEBYSCORE.
    pub fn remove_range_by_score(&mut self, r: &ScoreRange) -> usize {
        let (a, b) = self.score_span(r);
        self.remove_ranks(a, b)
    }

    /// ZREMRANGEBYLEX.
    pub fn remove_range_by_lex(&mut self, r: &LexRange) -> usize {
        let (a, b) = self.lex_span(r);
        self.remove_ranks(a, b)
    }

    /// ZPOPMIN / ZPOPMAX of up to `count` members, in pop order.
    pub fn pop(&mut self, count: usize, max: bool) -> Vec<ZEntry> {
        let len = self.len();
        let n = count.min(len);
        let out = if max {
            self.entries(len - n, len, true)
        } else {
            self.entries(0, n, false)
        };
        if max {
            self.remove_ranks(len - n, len);
        } else {
            self.remove_ranks(0, n);
        }
        out
    }

    /// The member of 0-based ascending rank `r`.
    pub fn entry_at(&self, r: usize) -> Option<ZEntry> {
        self.entries(r, r + 1, false).pop()
    }

    /// A uniformly random member (ZRANDMEMBER's building block).
    pub fn random_entry<R: rand::Rng>(&self, rng: &mut R) -> Option<ZEntry> {
        let n = self.len();
        if n == 0 {
            return None;
        }
        self.entry_at(rng.gen_range(0..n))
    }

    /// Calls `f` for every member in ascending order (no allocation).
    pub fn for_each(&self, mut f: impl FnMut(&[u8], f64)) {
        match self {
            SortedSet::Listpack(lp) => {
                let mut buf = itoa::Buffer::new();
                for (m, s) in lp_pairs(lp) {
                    f(m.bytes(&mut buf), s);
                }
            }
            SortedSet::Skiplist(z) => {
                for (m, s) in z.walk(z.first(), true) {
                    f(m, s);
                }
            }
        }
    }

    /// Calls `f` for the members whose score is in `r`, ascending, while it
    /// returns true (no allocation; the geo searches' scan of a cell).
    pub fn for_each_in_score(&self, r: &ScoreRange, mut f: impl FnMut(&[u8], f64) -> bool) {
        match self {
            SortedSet::Listpack(lp) => {
                let mut buf = itoa::Buffer::new();
                for (m, s) in lp_pairs(lp).skip_while(|&(_, s)| !r.gte_min(s)) {
                    if !r.lte_max(s) || !f(m.bytes(&mut buf), s) {
                        break;
                    }
                }
            }
            SortedSet::Skiplist(z) => {
                for (m, s) in z.walk(z.first_in_range(r), true) {
                    if !r.lte_max(s) || !f(m, s) {
                        break;
                    }
                }
            }
        }
    }

    /// One step of ZSCAN over a skiplist set's member dict (Redis's
    /// `dictScan`); a listpack set is returned whole with cursor 0.
    pub fn scan(&self, cursor: u64, mut f: impl FnMut(&[u8], f64)) -> u64 {
        match self {
            SortedSet::Listpack(_) => {
                self.for_each(f);
                0
            }
            SortedSet::Skiplist(z) => z.scan(cursor, |m, s| f(m, s)),
        }
    }

    /// The listpack, when that is the encoding (for DEBUG and memory
    /// checks).
    pub fn as_listpack(&self) -> Option<&Listpack> {
        match self {
            SortedSet::Listpack(lp) => Some(lp),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::skiplist::LexBound;
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};
    use std::collections::BTreeMap;

    /// The model: member → score, sorted on demand.
    fn sorted(m: &BTreeMap<Vec<u8>, f64>) -> Vec<(Vec<u8>, f64)> {
        let mut v: Vec<(Vec<u8>, f64)> = m.iter().map(|(k, s)| (k.clone(), *s)).collect();
        v.sort_by(|a, b| a.1.partial_cmp(&b.1).unwrap().then_with(|| a.0.cmp(&b.0)));
        v
    }

    fn plain(v: Vec<ZEntry>) -> Vec<(Vec<u8>, f64)> {
        v.into_iter().map(|(m, s)| (m.to_vec(), s)).collect()
    }

    fn model_limited(
        v: Vec<(Vec<u8>, f64)>,
        rev: bool,
        off: usize,
        lim: Option<usize>,
    ) -> Vec<(Vec<u8>, f64)> {
        let it: Box<dyn Iterator<Item = _>> = if rev {
            Box::new(v.into_iter().rev())
        } else {
            Box::new(v.into_iter())
        };
        it.skip(off).take(lim.unwrap_or(usize::MAX)).collect()
    }

    fn rand_score(rng: &mut StdRng, same: bool) -> f64 {
        if same {
            return 0.0;
        }
        match rng.gen_range(0..8) {
            0 => f64::INFINITY,
            1 => f64::NEG_INFINITY,
            2 => rng.gen_range(-5.0..5.0),
            3 => 1e300 * rng.gen_range(-2.0..2.0),
            4 => -0.0,
            _ => rng.gen_range(-10..10) as f64,
        }
    }

    fn rand_member(rng: &mut StdRng) -> Vec<u8> {
        match rng.gen_range(0..6) {
            0 => rng.gen_range(-20..20).to_string().into_bytes(),
            1 => vec![b'q'; rng.gen_range(60..70)],
            _ => (0..rng.gen_range(0..3))
                .map(|_| rng.gen_range(b'a'..b'g'))
                .collect(),
        }
    }

    fn bound(rng: &mut StdRng, same: bool) -> Vec<u8> {
        let ex = if rng.gen_bool(0.3) { "(" } else { "" };
        format!("{ex}{}", rand_score(rng, same)).into_bytes()
    }

    fn lex_bound(rng: &mut StdRng) -> Vec<u8> {
        match rng.gen_range(0..6) {
            0 => b"-".to_vec(),
            1 => b"+".to_vec(),
            n => {
                let mut v = vec![if n % 2 == 0 { b'[' } else { b'(' }];
                v.extend(rand_member(rng));
                v
            }
        }
    }

    #[test]
    fn matches_a_model_in_both_encodings() {
        let mut rng = StdRng::seed_from_u64(5);
        for round in 0..72 {
            let lim = match round % 3 {
                0 => ZsetLimits {
                    max_listpack_entries: 1000,
                    max_listpack_value: 1000,
                },
                1 => ZsetLimits {
                    max_listpack_entries: 0,
                    max_listpack_value: 0,
                },
                _ => ZsetLimits {
                    max_listpack_entries: 12,
                    max_listpack_value: 64,
                },
            };
            let same = round % 4 == 0;
            let mut z = SortedSet::with_hint(1, 1, &lim);
            let mut m: BTreeMap<Vec<u8>, f64> = BTreeMap::new();
            let mut was_listpack = false;
            for _ in 0..400 {
                was_listpack |= z.encoding() == "listpack";
                let len = m.len() as i64;
                match rng.gen_range(0..16) {
                    0..=3 => {
                        let mem = rand_member(&mut rng);
                        let score = rand_score(&mut rng, same);
                        let f = ZaddFlags {
                            nx: rng.gen_bool(0.15),
                            xx: rng.gen_bool(0.15),
                            gt: rng.gen_bool(0.15),
                            lt: rng.gen_bool(0.1),
                            incr: rng.gen_bool(0.2) && !same,
                        };
                        let want = match m.get(&mem).copied() {
                            Some(_) if f.nx => ZaddOutcome::Nop,
                            Some(cur) => {
                                let new = if f.incr { cur + score } else { score };
                                if new.is_nan() {
                                    ZaddOutcome::Nan
                                } else if (f.gt && new <= cur) || (f.lt && new >= cur) {
                                    ZaddOutcome::Nop
                                } else if new == cur {
                                    ZaddOutcome::Unchanged(new)
                                } else {
                                    m.insert(mem.clone(), new);
                                    ZaddOutcome::Updated(new)
                                }
                            }
                            None if f.xx => ZaddOutcome::Nop,
                            None => {
                                m.insert(mem.clone(), score);
                                ZaddOutcome::Added(score)
                            }
                        };
                        assert_eq!(z.add(&mem, score, f, &lim), want);
                    }
                    4 => {
                        let mem = rand_member(&mut rng);
                        assert_eq!(z.remove(&mem), m.remove(&mem).is_some());
                    }
                    5 => {
                        let mem = rand_member(&mut rng);
                        let got = z.score(&mem);
                        let want = m.get(&mem).copied();
                        // -0 reads back as 0 from a listpack, as in Redis.
                        assert_eq!(got, want);
                        if let (Some(g), Some(w)) = (got, want) {
                            if !was_listpack {
                                assert_eq!(g.to_bits(), w.to_bits());
                            }
                        }
                    }
                    6 => {
                        let mem = rand_member(&mut rng);
                        let rev = rng.gen_bool(0.5);
                        let s = sorted(&m);
                        let want = s.iter().position(|(k, _)| *k == mem).map(|i| {
                            let r = if rev { s.len() - 1 - i } else { i };
                            (r, s[i].1)
                        });
                        assert_eq!(z.rank(&mem, rev), want);
                    }
                    7 => {
                        let a = rng.gen_range(-len - 2..len + 2);
                        let b = rng.gen_range(-len - 2..len + 2);
                        let rev = rng.gen_bool(0.5);
                        let mut s = sorted(&m);
                        if rev {
                            s.reverse();
                        }
                        let want = match crate::quicklist::normalize_range(a, b, s.len()) {
                            Some((x, y)) => s[x..=y].to_vec(),
                            None => vec![],
                        };
                        assert_eq!(plain(z.range_by_rank(a, b, rev)), want);
                    }
                    8 | 9 => {
                        let (lo, hi) = (bound(&mut rng, same), bound(&mut rng, same));
                        let r = ScoreRange::parse(&lo, &hi).unwrap();
                        let rev = rng.gen_bool(0.5);
                        let off = rng.gen_range(0..4);
                        let lim = rng.gen_bool(0.5).then(|| rng.gen_range(0..6));
                        let inr: Vec<_> = sorted(&m)
                            .into_iter()
                            .filter(|(_, s)| r.contains(*s))
                            .collect();
                        assert_eq!(z.count_in_score(&r), inr.len());
                        assert_eq!(
                            plain(z.range_by_score(&r, rev, off, lim)),
                            model_limited(inr, rev, off, lim)
                        );
                    }
                    10 if same => {
                        let r =
                            LexRange::parse(&lex_bound(&mut rng), &lex_bound(&mut rng)).unwrap();
                        let rev = rng.gen_bool(0.5);
                        let off = rng.gen_range(0..4);
                        let lim = rng.gen_bool(0.5).then(|| rng.gen_range(0..6));
                        let inr: Vec<_> = sorted(&m)
                            .into_iter()
                            .filter(|(k, _)| r.gte_min(k) && r.lte_max(k))
                            .collect();
                        assert_eq!(z.count_in_lex(&r), inr.len(), "{r:?}");
                        assert_eq!(
                            plain(z.range_by_lex(&r, rev, off, lim)),
                            model_limited(inr, rev, off, lim)
                        );
                    }
                    11 if rng.gen_bool(0.3) => {
                        let which = rng.gen_range(0..3);
                        let s = sorted(&m);
                        let gone: Vec<Vec<u8>> = match which {
                            0 => {
                                let a = rng.gen_range(-len - 2..len + 2);
                                let b = rng.gen_range(-len - 2..len + 2);
                                let want = match crate::quicklist::normalize_range(a, b, s.len()) {
                                    Some((x, y)) => s[x..=y].iter().map(|e| e.0.clone()).collect(),
                                    None => vec![],
                                };
                                assert_eq!(z.remove_range_by_rank(a, b), want.len());
                                want
                            }
                            1 => {
                                let r = ScoreRange::parse(
                                    &bound(&mut rng, same),
                                    &bound(&mut rng, same),
                                )
                                .unwrap();
                                let want: Vec<Vec<u8>> = s
                                    .iter()
                                    .filter(|e| r.contains(e.1))
                                    .map(|e| e.0.clone())
                                    .collect();
                                assert_eq!(z.remove_range_by_score(&r), want.len());
                                want
                            }
                            _ if same => {
                                let r = LexRange::parse(&lex_bound(&mut rng), &lex_bound(&mut rng))
                                    .unwrap();
                                let want: Vec<Vec<u8>> = s
                                    .iter()
                                    .filter(|e| r.gte_min(&e.0) && r.lte_max(&e.0))
                                    .map(|e| e.0.clone())
                                    .collect();
                                assert_eq!(z.remove_range_by_lex(&r), want.len());
                                want
                            }
                            _ => vec![],
                        };
                        for g in gone {
                            m.remove(&g);
                        }
                    }
                    12 => {
                        let n = rng.gen_range(0..4);
                        let max = rng.gen_bool(0.5);
                        let mut s = sorted(&m);
                        if max {
                            s.reverse();
                        }
                        s.truncate(n);
                        for e in &s {
                            m.remove(&e.0);
                        }
                        assert_eq!(plain(z.pop(n, max)), s);
                    }
                    13 => {
                        if let Some((mem, s)) = z.random_entry(&mut rng) {
                            assert_eq!(m.get(&mem[..]), Some(&s));
                        } else {
                            assert!(m.is_empty());
                        }
                    }
                    14 if rng.gen_bool(0.1) => {
                        let l2 = ZsetLimits {
                            max_listpack_entries: 20,
                            max_listpack_value: 64,
                        };
                        z.convert_to_listpack_if_fits(&l2);
                        let fits = m.len() <= 20 && m.keys().all(|k| k.len() <= 64);
                        if fits {
                            assert_eq!(z.encoding(), "listpack");
                        }
                    }
                    _ => {
                        let mut all = Vec::new();
                        z.for_each(|mem, s| all.push((mem.to_vec(), s)));
                        assert_eq!(all, sorted(&m));
                    }
                }
                assert_eq!(z.len(), m.len());
                if let SortedSet::Skiplist(s) = &z {
                    s.check();
                }
                // Conversion happens on the insert that crosses a limit.
                if let SortedSet::Listpack(_) = &z {
                    assert!(m.len() <= lim.max_listpack_entries.max(20));
                }
            }
        }
    }

    #[test]
    fn converts_at_the_limits() {
        let lim = ZsetLimits {
            max_listpack_entries: 3,
            max_listpack_value: 5,
        };
        let mut z = SortedSet::with_hint(1, 1, &lim);
        for m in ["a", "b", "c"] {
            z.add(m.as_bytes(), 1.0, ZaddFlags::default(), &lim);
        }
        assert_eq!(z.encoding(), "listpack");
        z.add(b"d", 1.0, ZaddFlags::default(), &lim);
        assert_eq!(z.encoding(), "skiplist");
        let mut z = SortedSet::with_hint(1, 1, &lim);
        z.add(b"123456", 1.0, ZaddFlags::default(), &lim);
        assert_eq!(z.encoding(), "skiplist");
        assert_eq!(SortedSet::with_hint(4, 1, &lim).encoding(), "skiplist");
        assert_eq!(SortedSet::with_hint(3, 6, &lim).encoding(), "skiplist");
        let lex = LexRange {
            min: LexBound::NegInf,
            max: LexBound::NegInf,
        };
        assert_eq!(z.count_in_lex(&lex), 0);
    }

    #[test]
    fn for_each_in_score_visits_the_range_until_told_to_stop() {
        let lim = ZsetLimits::default();
        let mut lp = SortedSet::new_listpack();
        for i in 0..10 {
            lp.add(
                format!("m{i}").as_bytes(),
                i as f64,
                ZaddFlags::default(),
                &lim,
            );
        }
        let mut sl = lp.clone();
        sl.convert_to_skiplist();
        let r = ScoreRange {
            min: 2.0,
            max: 6.0,
            minex: false,
            maxex: true,
        };
        for z in [&lp, &sl] {
            let mut seen = Vec::new();
            z.for_each_in_score(&r, |m, s| {
                seen.push((m.to_vec(), s));
                true
            });
            let want: Vec<(Vec<u8>, f64)> = (2..6)
                .map(|i| (format!("m{i}").into_bytes(), i as f64))
                .collect();
            assert_eq!(seen, want, "{}", z.encoding());
            let mut n = 0;
            z.for_each_in_score(&r, |_, _| {
                n += 1;
                n < 2
            });
            assert_eq!(n, 2, "{}", z.encoding());
        }
    }

    #[test]
    fn bytes_per_element() {
        let lim = ZsetLimits::default();
        let mut z = SortedSet::new_listpack();
        for i in 0..10 {
            z.add(
                format!("member:{i}").as_bytes(),
                i as f64,
                ZaddFlags::default(),
                &lim,
            );
        }
        let lp = z.as_listpack().unwrap();
        // member: 1 header + 8 + 1 backlen; score 0..9: 1 + 1.
        assert_eq!(lp.as_bytes().len(), 120);
        assert_eq!(lp.lp_bytes(), 127);
        assert_eq!(z.score(b"member:3"), Some(3.0));
    }
}

#[cfg(test)]
mod scan_tests {
    use super::*;

    #[test]
    fn scan_visits_everything() {
        let lim = ZsetLimits::default();
        let mut z = SortedSet::new_listpack();
        let long = vec![b'x'; 70];
        let mut names: Vec<Vec<u8>> = (b'a'..=b't').map(|c| vec![c]).collect();
        names.push(long);
        for m in &names {
            z.add(m, 0.0, ZaddFlags::default(), &lim);
        }
        assert_eq!(z.encoding(), "skiplist");
        let mut seen = Vec::new();
        let mut cur = 0;
        let mut steps = 0;
        loop {
            cur = z.scan(cur, |m, _| seen.push(m.to_vec()));
            steps += 1;
            assert!(steps < 1000, "cursor {cur}");
            if cur == 0 {
                break;
            }
        }
        seen.sort();
        names.sort();
        assert_eq!(seen, names);
    }
}
