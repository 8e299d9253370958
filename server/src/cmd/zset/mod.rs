//! Sorted set commands.
//!
//! Argument checks run in Redis's order (options and numbers first, then
//! the key's type), so the same bad request gets the same error. The set
//! operations (ZUNION, ZINTER, ZDIFF and their STORE forms) are in
//! `combine`; the geo commands, whose positions are scores, in `geo`.

pub mod combine;
pub mod geo;
mod ops;

use self::ops::{build, limits, positive_long, range_long, store_result, zadd_generic};
use crate::cmd::scan::{cursor_arg, reply_cursor, scan_opts, scan_reply};
use crate::cmd::{int_arg, is, timeout_arg, Ctx, Handler};
use crate::core::config::class;
use crate::core::error::{CmdResult, Error, NOT_INTEGER};
use crate::core::propagate::int;
use crate::state::BlockKind;
use bytes::Bytes;
use storage::zset::ZEntry;
use storage::{LexRange, ScoreRange, SortedSet, ZaddFlags};

pub static HANDLERS: &[(&str, Handler)] = &[
    ("zadd", zadd),
    ("zincrby", zincrby),
    ("zscore", zscore),
    ("zmscore", zmscore),
    ("zcard", zcard),
    ("zcount", zcount),
    ("zlexcount", zlexcount),
    ("zrank", zrank),
    ("zrevrank", zrevrank),
    ("zrange", zrange),
    ("zrangestore", zrangestore),
    ("zrevrange", zrevrange),
    ("zrangebyscore", zrangebyscore),
    ("zrevrangebyscore", zrevrangebyscore),
    ("zrangebylex", zrangebylex),
    ("zrevrangebylex", zrevrangebylex),
    ("zrem", zrem),
    ("zremrangebyrank", zremrangebyrank),
    ("zremrangebyscore", zremrangebyscore),
    ("zremrangebylex", zremrangebylex),
    ("zpopmin", zpopmin),
    ("zpopmax", zpopmax),
    ("zmpop", zmpop),
    ("zrandmember", zrandmember),
    ("zscan", zscan),
    ("bzpopmin", bzpopmin),
    ("bzpopmax", bzpopmax),
    ("bzmpop", bzmpop),
];

fn score_range(min: &[u8], max: &[u8]) -> Result<ScoreRange, Error> {
    ScoreRange::parse(min, max).ok_or_else(|| Error::other("ERR min or max is not a float"))
}

fn lex_range(min: &[u8], max: &[u8]) -> Result<LexRange, Error> {
    LexRange::parse(min, max)
        .ok_or_else(|| Error::other("ERR min or max not valid string range item"))
}

/// Writes `(member, score)` results: flat in RESP2, pairs in RESP3 when
/// `withscores`.
fn reply_entries(c: &mut Ctx, v: &[ZEntry], withscores: bool) {
    if withscores && !c.out.resp3 {
        c.out.array(v.len() * 2);
    } else {
        c.out.array(v.len());
    }
    for (m, s) in v {
        if withscores && c.out.resp3 {
            c.out.array(2);
        }
        c.out.bulk(m);
        if withscores {
            c.out.double(*s);
        }
    }
}

/// ZADD key [NX|XX] [GT|LT] [CH] [INCR] score member [score member ...]
fn zadd(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let mut f = ZaddFlags::default();
    let mut ch = false;
    let mut i = 2;
    while i < a.len() {
        let o = &a[i];
        if is(o, "nx") {
            f.nx = true;
        } else if is(o, "xx") {
            f.xx = true;
        } else if is(o, "ch") {
            ch = true;
        } else if is(o, "incr") {
            f.incr = true;
        } else if is(o, "gt") {
            f.gt = true;
        } else if is(o, "lt") {
            f.lt = true;
        } else {
            break;
        }
        i += 1;
    }
    let elems = a.len() - i;
    if elems == 0 || !elems.is_multiple_of(2) {
        return Err(Error::Syntax);
    }
    if f.nx && f.xx {
        return Err(Error::other(
            "ERR XX and NX options at the same time are not compatible",
        ));
    }
    if [f.gt, f.lt, f.nx].iter().filter(|x| **x).count() > 1 {
        return Err(Error::other(
            "ERR GT, LT, and/or NX options at the same time are not compatible",
        ));
    }
    if f.incr && elems > 2 {
        return Err(Error::other(
            "ERR INCR option supports a single increment-element pair",
        ));
    }
    zadd_generic(c, &a[1], &a[i..], f, ch)
}

/// ZINCRBY key increment member
fn zincrby(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let f = ZaddFlags {
        incr: true,
        ..Default::default()
    };
    zadd_generic(c, &a[1], &a[2..], f, false)
}

/// ZSCORE key member
fn zscore(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    match c
        .keys()
        .read::<SortedSet>(&a[1])?
        .and_then(|z| z.score(&a[2]))
    {
        Some(s) => c.out.double(s),
        None => c.out.null(),
    }
    Ok(())
}

/// ZMSCORE key member [member ...]
fn zmscore(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let mut k = c.st.keys(c.cl.db, c.now);
    let scores: Vec<Option<f64>> = match k.read::<SortedSet>(&a[1])? {
        Some(z) => a[2..].iter().map(|m| z.score(m)).collect(),
        None => vec![None; a.len() - 2],
    };
    c.out.array(scores.len());
    for s in scores {
        match s {
            Some(s) => c.out.double(s),
            None => c.out.null(),
        }
    }
    Ok(())
}

/// ZCARD key
fn zcard(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let n = c.keys().read::<SortedSet>(&a[1])?.map_or(0, |z| z.len());
    c.out.int(n as i64);
    Ok(())
}

/// ZCOUNT key min max
fn zcount(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let r = score_range(&a[2], &a[3])?;
    let n = c
        .keys()
        .read::<SortedSet>(&a[1])?
        .map_or(0, |z| z.count_in_score(&r));
    c.out.int(n as i64);
    Ok(())
}

/// ZLEXCOUNT key min max
fn zlexcount(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let r = lex_range(&a[2], &a[3])?;
    let n = c
        .keys()
        .read::<SortedSet>(&a[1])?
        .map_or(0, |z| z.count_in_lex(&r));
    c.out.int(n as i64);
    Ok(())
}

fn rank_generic(c: &mut Ctx, a: &[Bytes], rev: bool) -> CmdResult {
    match c
        .keys()
        .read::<SortedSet>(&a[1])?
        .and_then(|z| z.rank(&a[2], rev))
    {
        Some((r, _)) => c.out.int(r as i64),
        None => c.out.null(),
    }
    Ok(())
}

/// ZRANK key member
fn zrank(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    rank_generic(c, a, false)
}

/// ZREVRANK key member
fn zrevrank(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    rank_generic(c, a, true)
}

#[derive(Clone, Copy, PartialEq)]
enum RangeType {
    Rank,
    Score,
    Lex,
}

/// The ZRANGE family: `first` is the index of the source key (1, or 2 for
/// ZRANGESTORE whose destination is a[1]); `ty` / `rev` are fixed by the
/// legacy commands and chosen by options in ZRANGE / ZRANGESTORE.
fn zrange_generic(
    c: &mut Ctx,
    a: &[Bytes],
    first: usize,
    store: bool,
    fixed_ty: Option<RangeType>,
    fixed_rev: Option<bool>,
) -> CmdResult {
    let mut withscores = false;
    let mut offset: i64 = 0;
    let mut limit: i64 = -1;
    let mut ty = fixed_ty;
    let mut rev = fixed_rev;
    let mut j = first + 3;
    while j < a.len() {
        let left = a.len() - j - 1;
        let o = &a[j];
        if !store && is(o, "withscores") {
            withscores = true;
        } else if is(o, "limit") && left >= 2 {
            offset = int_arg(&a[j + 1])?;
            limit = int_arg(&a[j + 2])?;
            j += 2;
        } else if fixed_rev.is_none() && rev.is_none() && is(o, "rev") {
            rev = Some(true);
        } else if fixed_ty.is_none() && is(o, "bylex") && ty.is_none() {
            ty = Some(RangeType::Lex);
        } else if fixed_ty.is_none() && is(o, "byscore") && ty.is_none() {
            ty = Some(RangeType::Score);
        } else {
            return Err(Error::Syntax);
        }
        j += 1;
    }
    let rev = rev.unwrap_or(false);
    let ty = ty.unwrap_or(RangeType::Rank);
    if limit != -1 && ty == RangeType::Rank {
        return Err(Error::other(
            "ERR syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX",
        ));
    }
    if withscores && ty == RangeType::Lex {
        return Err(Error::other(
            "ERR syntax error, WITHSCORES not supported in combination with BYLEX",
        ));
    }
    let (mut lo, mut hi) = (&a[first + 1], &a[first + 2]);
    if rev && ty != RangeType::Rank {
        std::mem::swap(&mut lo, &mut hi);
    }
    enum Parsed {
        Rank(i64, i64),
        Score(ScoreRange),
        Lex(LexRange),
    }
    let parsed = match ty {
        RangeType::Rank => Parsed::Rank(int_arg(lo)?, int_arg(hi)?),
        RangeType::Score => Parsed::Score(score_range(lo, hi)?),
        RangeType::Lex => Parsed::Lex(lex_range(lo, hi)?),
    };
    let lim_n = usize::try_from(limit).ok();
    let mut k = c.st.keys(c.cl.db, c.now);
    let result: Vec<ZEntry> = match k.read::<SortedSet>(&a[first])? {
        None => Vec::new(),
        Some(_) if offset < 0 && ty != RangeType::Rank => Vec::new(),
        Some(z) => match &parsed {
            Parsed::Rank(s, e) => z.range_by_rank(*s, *e, rev),
            Parsed::Score(r) => z.range_by_score(r, rev, offset as usize, lim_n),
            Parsed::Lex(r) => z.range_by_lex(r, rev, offset as usize, lim_n),
        },
    };
    if store {
        let lim = limits(c);
        let z = build(result.iter().map(|(m, s)| (&m[..], *s)), &lim);
        store_result(c, &a[1], z, "zrangestore");
    } else {
        reply_entries(c, &result, withscores);
    }
    Ok(())
}

/// ZRANGE key start stop [BYSCORE|BYLEX] [REV] [LIMIT offset count] [WITHSCORES]
fn zrange(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    zrange_generic(c, a, 1, false, None, None)
}

/// ZRANGESTORE dst src min max [BYSCORE|BYLEX] [REV] [LIMIT offset count]
fn zrangestore(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    zrange_generic(c, a, 2, true, None, None)
}

/// ZREVRANGE key start stop [WITHSCORES]
fn zrevrange(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    zrange_generic(c, a, 1, false, Some(RangeType::Rank), Some(true))
}

/// ZRANGEBYSCORE key min max [WITHSCORES] [LIMIT offset count]
fn zrangebyscore(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    zrange_generic(c, a, 1, false, Some(RangeType::Score), Some(false))
}

/// ZREVRANGEBYSCORE key max min [WITHSCORES] [LIMIT offset count]
fn zrevrangebyscore(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    zrange_generic(c, a, 1, false, Some(RangeType::Score), Some(true))
}

/// ZRANGEBYLEX key min max [LIMIT offset count]
fn zrangebylex(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    zrange_generic(c, a, 1, false, Some(RangeType::Lex), Some(false))
}

/// ZREVRANGEBYLEX key max min [LIMIT offset count]
fn zrevrangebylex(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    zrange_generic(c, a, 1, false, Some(RangeType::Lex), Some(true))
}

/// ZREM key member [member ...]
fn zrem(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let n = c
        .keys()
        .remove_each(&a[1], &a[2..], SortedSet::remove, SortedSet::is_empty)?;
    c.removed(class::ZSET, "zrem", &a[1], n);
    Ok(())
}

fn zremrange_generic(c: &mut Ctx, a: &[Bytes], ty: RangeType) -> CmdResult {
    enum Parsed {
        Rank(i64, i64),
        Score(ScoreRange),
        Lex(LexRange),
    }
    let parsed = match ty {
        RangeType::Rank => Parsed::Rank(int_arg(&a[2])?, int_arg(&a[3])?),
        RangeType::Score => Parsed::Score(score_range(&a[2], &a[3])?),
        RangeType::Lex => Parsed::Lex(lex_range(&a[2], &a[3])?),
    };
    let n = match c.keys().write::<SortedSet>(&a[1])? {
        None => 0,
        Some(z) => match &parsed {
            Parsed::Rank(s, e) => z.remove_range_by_rank(*s, *e),
            Parsed::Score(r) => z.remove_range_by_score(r),
            Parsed::Lex(r) => z.remove_range_by_lex(r),
        },
    };
    let event = match ty {
        RangeType::Rank => "zremrangebyrank",
        RangeType::Score => "zremrangebyscore",
        RangeType::Lex => "zremrangebylex",
    };
    c.removed(class::ZSET, event, &a[1], n as i64);
    Ok(())
}

/// ZREMRANGEBYRANK key start stop
fn zremrangebyrank(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    zremrange_generic(c, a, RangeType::Rank)
}

/// ZREMRANGEBYSCORE key min max
fn zremrangebyscore(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    zremrange_generic(c, a, RangeType::Score)
}

/// ZREMRANGEBYLEX key min max
fn zremrangebylex(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    zremrange_generic(c, a, RangeType::Lex)
}

/// Reply shape of a pop.
#[derive(Clone, Copy)]
struct PopShape {
    /// The key leads the reply (BZPOP*, ZMPOP, BZMPOP).
    emit_key: bool,
    /// Elements as [member, score] pairs (ZMPOP family; ZPOP* with a count
    /// in RESP3).
    nested: bool,
    /// No key: a null array instead of an empty one (ZMPOP family).
    nil_when_empty: bool,
}

/// Redis's `genericZpopCommand`: pops from the first existing key among
/// `keys`; `count` None is the plain single pop. Returns false if no key
/// had data (the empty reply was written).
fn zpop_generic(
    c: &mut Ctx,
    keys: &[Bytes],
    max: bool,
    count: Option<usize>,
    shape: PopShape,
) -> Result<bool, Error> {
    let db = c.cl.db;
    let mut found = None;
    let mut k = c.keys();
    for key in keys {
        if k.read::<SortedSet>(key)?.is_some() {
            found = Some(key);
            break;
        }
    }
    let Some(key) = found else {
        if shape.nil_when_empty {
            c.out.null_array();
        } else {
            c.out.array(0);
        }
        return Ok(false);
    };
    if count == Some(0) {
        c.out.array(0);
        return Ok(true);
    }
    let z = k.write::<SortedSet>(key)?.expect("looked up above");
    let popped = z.pop(count.unwrap_or(1), max);
    let n = popped.len();
    match (shape.emit_key, shape.nested) {
        (false, false) => c.out.array(n * 2),
        (false, true) => c.out.array(n),
        (true, false) => {
            c.out.array(n * 2 + 1);
            c.out.bulk(key);
        }
        (true, true) => {
            c.out.array(2);
            c.out.bulk(key);
            c.out.array(n);
        }
    }
    for (m, s) in &popped {
        if shape.nested {
            c.out.array(2);
        }
        c.out.bulk(m);
        c.out.double(*s);
    }
    if n > 0 {
        let event = if max { "zpopmax" } else { "zpopmin" };
        c.st.changed_n(class::ZSET, event, db, key, n as u64);
        c.st.delete_if_empty(db, key);
    }
    // The multi-key and blocking forms propagate the plain pop of the key
    // served, with a count for the ZMPOP family.
    if shape.emit_key {
        let pop = Bytes::from_static(if max { b"ZPOPMAX" } else { b"ZPOPMIN" });
        let n = count.map(|_| int(n as i64));
        c.propagate_as([pop, key.clone()].into_iter().chain(n));
    }
    Ok(true)
}

fn zpop_minmax(c: &mut Ctx, a: &[Bytes], max: bool) -> CmdResult {
    if a.len() > 3 {
        return Err(Error::Syntax);
    }
    let count = match a.get(2) {
        Some(n) => Some(positive_long(n)? as usize),
        None => None,
    };
    let shape = PopShape {
        emit_key: false,
        nested: c.out.resp3 && count.is_some(),
        nil_when_empty: false,
    };
    zpop_generic(c, &a[1..2], max, count, shape)?;
    Ok(())
}

/// ZPOPMIN key [count]
fn zpopmin(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    zpop_minmax(c, a, false)
}

/// ZPOPMAX key [count]
fn zpopmax(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    zpop_minmax(c, a, true)
}

/// Parses `numkeys key... MIN|MAX [COUNT count]` from `a[at]`: the keys,
/// whether MAX, and the count.
fn mpop_args(a: &[Bytes], at: usize) -> Result<(&[Bytes], bool, usize), Error> {
    let numkeys = range_long(&a[at], 1, i64::MAX, "ERR numkeys should be greater than 0")?;
    let where_idx = (at as i64).saturating_add(numkeys).saturating_add(1);
    if where_idx >= a.len() as i64 {
        return Err(Error::Syntax);
    }
    let where_idx = where_idx as usize;
    let max = if is(&a[where_idx], "min") {
        false
    } else if is(&a[where_idx], "max") {
        true
    } else {
        return Err(Error::Syntax);
    };
    let mut count = None;
    let mut j = where_idx + 1;
    while j < a.len() {
        if count.is_none() && is(&a[j], "count") && j + 1 < a.len() {
            j += 1;
            count = Some(
                range_long(&a[j], 1, i64::MAX, "ERR count should be greater than 0")? as usize,
            );
        } else {
            return Err(Error::Syntax);
        }
        j += 1;
    }
    Ok((&a[at + 1..where_idx], max, count.unwrap_or(1)))
}

const MPOP_SHAPE: PopShape = PopShape {
    emit_key: true,
    nested: true,
    nil_when_empty: true,
};

/// ZMPOP numkeys key [key ...] MIN|MAX [COUNT count]
fn zmpop(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let (keys, max, count) = mpop_args(a, 1)?;
    zpop_generic(c, keys, max, Some(count), MPOP_SHAPE)?;
    Ok(())
}

/// The blocking pops: serve the first key with data, else block (or, when
/// blocking is not allowed, reply as on timeout: a null array).
fn bzpop_generic(
    c: &mut Ctx,
    a: &[Bytes],
    keys: &[Bytes],
    timeout: &[u8],
    max: bool,
    count: Option<usize>,
    shape: PopShape,
) -> CmdResult {
    let deadline = timeout_arg(timeout, c.now)?;
    for key in keys {
        if c.keys().read::<SortedSet>(key)?.is_some() {
            zpop_generic(c, std::slice::from_ref(key), max, count, shape)?;
            return Ok(());
        }
    }
    if !c.may_block() {
        c.out.null_array();
        return Ok(());
    }
    c.block(BlockKind::ZSet, keys, deadline, a);
    Ok(())
}

const BZPOP_SHAPE: PopShape = PopShape {
    emit_key: true,
    nested: false,
    nil_when_empty: true,
};

/// BZPOPMIN key [key ...] timeout
fn bzpopmin(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let n = a.len();
    bzpop_generic(c, a, &a[1..n - 1], &a[n - 1], false, None, BZPOP_SHAPE)
}

/// BZPOPMAX key [key ...] timeout
fn bzpopmax(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let n = a.len();
    bzpop_generic(c, a, &a[1..n - 1], &a[n - 1], true, None, BZPOP_SHAPE)
}

/// BZMPOP timeout numkeys key [key ...] MIN|MAX [COUNT count]
fn bzmpop(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let (keys, max, count) = mpop_args(a, 2)?;
    bzpop_generic(c, a, keys, &a[1], max, Some(count), MPOP_SHAPE)
}

/// ZRANDMEMBER key [count [WITHSCORES]]
fn zrandmember(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    if a.len() >= 3 {
        let l = int_arg(&a[2]).map_err(|_| NOT_INTEGER)?;
        if l == i64::MIN {
            return Err(Error::other(format!(
                "ERR value is out of range, value must between {} and {}",
                -i64::MAX,
                i64::MAX
            )));
        }
        let mut withscores = false;
        if a.len() > 4 || (a.len() == 4 && !is(&a[3], "withscores")) {
            return Err(Error::Syntax);
        } else if a.len() == 4 {
            withscores = true;
            if !(-i64::MAX / 2..=i64::MAX / 2).contains(&l) {
                return Err(Error::other("ERR value is out of range"));
            }
        }
        return zrandmember_count(c, &a[1], l, withscores);
    }
    let mut rng = rand::thread_rng();
    match c
        .keys()
        .read::<SortedSet>(&a[1])?
        .and_then(|z| z.random_entry(&mut rng))
    {
        Some((m, _)) => c.out.bulk(&m),
        None => c.out.null(),
    }
    Ok(())
}

fn zrandmember_count(c: &mut Ctx, key: &[u8], l: i64, withscores: bool) -> CmdResult {
    let mut k = c.st.keys(c.cl.db, c.now);
    let Some(z) = k.read::<SortedSet>(key)? else {
        c.out.array(0);
        return Ok(());
    };
    if l == 0 {
        c.out.array(0);
        return Ok(());
    }
    let size = z.len();
    let mut rng = rand::thread_rng();
    let out = &mut *c.out;
    let emit = |out: &mut protocol::ReplyBuf, (m, s): ZEntry| {
        if withscores && out.resp3 {
            out.array(2);
        }
        out.bulk(&m);
        if withscores {
            out.double(s);
        }
    };
    let header = |out: &mut protocol::ReplyBuf, n: usize| {
        if withscores && !out.resp3 {
            out.array(n * 2);
        } else {
            out.array(n);
        }
    };
    if l < 0 || l == 1 {
        // Repetitions allowed: sample the whole set every time.
        let n = l.unsigned_abs() as usize;
        header(out, n);
        for _ in 0..n {
            if out.full() {
                break;
            }
            let e = z.random_entry(&mut rng).expect("non-empty");
            emit(out, e);
        }
        return Ok(());
    }
    let n = l as usize;
    if n >= size {
        // The whole set, from the highest score down, as Redis replies.
        header(out, size);
        for e in z.entries(0, size, true) {
            emit(out, e);
        }
        return Ok(());
    }
    header(out, n);
    for i in rand::seq::index::sample(&mut rng, size, n) {
        let e = z.entry_at(i).expect("in range");
        emit(out, e);
    }
    Ok(())
}

/// Largest magnitude of a score a listpack stores as an integer.
const LP_INT_MAX: f64 = (i64::MAX / 2) as f64;

/// ZSCAN key cursor [MATCH pattern] [COUNT count]
fn zscan(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let cursor = cursor_arg(&a[2])?;
    let mut k = c.st.keys(c.cl.db, c.now);
    let Some(z) = k.read::<SortedSet>(&a[1])? else {
        scan_reply(c.out, 0, &[]);
        return Ok(());
    };
    let o = scan_opts(&a[3..], false)?;
    let count = o.count;
    // A listpack holds integral scores within ±2^62 as integers (Redis's
    // `double2ll`), which ZSCAN prints as such; other scores as `%.17g`.
    let listpack = z.as_listpack().is_some();
    let mut found: Vec<(Vec<u8>, f64)> = Vec::new();
    let mut cur = cursor;
    // As Redis: at most 10 buckets per requested element; the element
    // count compared is of members and scores together.
    let mut budget = count.saturating_mul(10);
    loop {
        cur = z.scan(cur, |m, s| found.push((m.to_vec(), s)));
        if cur == 0 || budget == 0 || found.len().saturating_mul(2) >= count {
            break;
        }
        budget -= 1;
    }
    found.retain(|(m, _)| o.matches(m));
    reply_cursor(c.out, cur);
    c.out.array(found.len() * 2);
    for (m, s) in found {
        c.out.bulk(&m);
        if listpack && s.fract() == 0.0 && s.abs() <= LP_INT_MAX {
            c.out.bulk_int(s as i64);
        } else {
            c.out.bulk(protocol::format_double(s).as_bytes());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn registered_as_redis() {
        crate::cmd::families::install();
        let t = super::super::table();
        for (name, arity, keys) in [
            ("zadd", -4, (1, 1, 1)),
            ("zrangestore", -5, (1, 2, 1)),
            ("bzpopmin", -3, (1, -2, 1)),
            ("bzmpop", -5, (0, 0, 0)),
            ("zunionstore", -4, (1, 1, 1)),
        ] {
            let c = t[name];
            assert_eq!(c.arity, arity, "{name}");
            assert_eq!((c.first_key, c.last_key, c.step), keys, "{name}");
        }
    }
}
