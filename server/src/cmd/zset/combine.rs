//! The sorted-set operations: ZUNION, ZINTER, ZINTERCARD, ZDIFF and their
//! STORE forms. Their inputs may also be plain sets, whose members score 1.

use super::ops::{build, limits, positive_long, store_result};
use crate::cmd::{int_arg, is, Ctx, Handler};
use crate::core::error::{CmdResult, Error, WRONGTYPE};
use bytes::Bytes;
use std::cmp::Ordering;
use std::collections::HashMap;
use storage::num::parse_score;
use storage::{Set, SortedSet, Value};

pub static HANDLERS: &[(&str, Handler)] = &[
    ("zinter", zinter),
    ("zinterstore", zinterstore),
    ("zintercard", zintercard),
    ("zunion", zunion),
    ("zunionstore", zunionstore),
    ("zdiff", zdiff),
    ("zdiffstore", zdiffstore),
];

/// An input of the set operations.
enum Src<'a> {
    Missing,
    Z(&'a SortedSet),
    S(&'a Set),
}

impl Src<'_> {
    fn len(&self) -> usize {
        match self {
            Src::Missing => 0,
            Src::Z(z) => z.len(),
            Src::S(s) => s.len(),
        }
    }

    fn score(&self, m: &[u8]) -> Option<f64> {
        match self {
            Src::Missing => None,
            Src::Z(z) => z.score(m),
            Src::S(s) => s.contains(m).then_some(1.0),
        }
    }

    fn for_each(&self, mut f: impl FnMut(&[u8], f64)) {
        match self {
            Src::Missing => {}
            Src::Z(z) => z.for_each(f),
            Src::S(s) => {
                let mut buf = itoa::Buffer::new();
                for m in s.iter() {
                    f(m.bytes(&mut buf), 1.0);
                }
            }
        }
    }
}

#[derive(Clone, Copy, PartialEq)]
enum SetOp {
    Union,
    Inter,
    Diff,
}

#[derive(Clone, Copy)]
enum Aggregate {
    Sum,
    Min,
    Max,
}

fn aggregate(target: &mut f64, val: f64, how: Aggregate) {
    match how {
        Aggregate::Sum => {
            *target += val;
            // inf + -inf: Redis keeps 0 rather than NaN.
            if target.is_nan() {
                *target = 0.0;
            }
        }
        Aggregate::Min => {
            if val < *target {
                *target = val;
            }
        }
        Aggregate::Max => {
            if val > *target {
                *target = val;
            }
        }
    }
}

fn by_score(a: &(Vec<u8>, f64), b: &(Vec<u8>, f64)) -> Ordering {
    a.1.partial_cmp(&b.1)
        .unwrap_or(Ordering::Equal)
        .then_with(|| a.0.cmp(&b.0))
}

/// The options after the keys of ZUNION/ZINTER/ZDIFF[STORE] and ZINTERCARD.
struct SetopOpts {
    weights: Vec<f64>,
    how: Aggregate,
    withscores: bool,
    /// ZINTERCARD's LIMIT; 0 for none.
    limit: usize,
}

/// Parses the options from `a[j..]`, for `setnum` keys, as Redis reads
/// them: WEIGHTS and AGGREGATE only where they mean something, WITHSCORES
/// only where a reply has scores.
fn setop_opts(
    a: &[Bytes],
    mut j: usize,
    setnum: usize,
    op: SetOp,
    store: bool,
    card_only: bool,
) -> Result<SetopOpts, Error> {
    let mut o = SetopOpts {
        weights: vec![1.0f64; setnum],
        how: Aggregate::Sum,
        withscores: false,
        limit: 0,
    };
    while j < a.len() {
        let remaining = a.len() - j;
        let arg = &a[j];
        if op != SetOp::Diff && !card_only && remaining > setnum && is(arg, "weights") {
            j += 1;
            for w in o.weights.iter_mut() {
                *w = parse_score(&a[j])
                    .ok_or_else(|| Error::other("ERR weight value is not a float"))?;
                j += 1;
            }
        } else if op != SetOp::Diff && !card_only && remaining >= 2 && is(arg, "aggregate") {
            let v = &a[j + 1];
            o.how = if is(v, "sum") {
                Aggregate::Sum
            } else if is(v, "min") {
                Aggregate::Min
            } else if is(v, "max") {
                Aggregate::Max
            } else {
                return Err(Error::Syntax);
            };
            j += 2;
        } else if !store && !card_only && is(arg, "withscores") {
            o.withscores = true;
            j += 1;
        } else if card_only && remaining >= 2 && is(arg, "limit") {
            o.limit = positive_long(&a[j + 1])
                .map_err(|_| Error::other("ERR LIMIT can't be negative"))?
                as usize;
            j += 2;
        } else {
            return Err(Error::Syntax);
        }
    }
    Ok(o)
}

/// What a set operation gives: its members with their scores, or, for
/// ZINTERCARD (`card_only`), only how many (up to `o.limit`).
fn combine(
    mut srcs: Vec<(Src, f64)>,
    op: SetOp,
    o: &SetopOpts,
    card_only: bool,
) -> (Vec<(Vec<u8>, f64)>, usize) {
    let mut result: Vec<(Vec<u8>, f64)> = Vec::new();
    let mut card = 0usize;
    match op {
        SetOp::Inter => {
            // Smallest first: the fewest lookups, and the order scores are
            // aggregated in, as Redis.
            srcs.sort_by_key(|(s, _)| s.len());
            if srcs[0].0.len() > 0 {
                let (first, rest) = srcs.split_first().expect("setnum >= 1");
                let mut done = false;
                first.0.for_each(|m, s| {
                    if done {
                        return;
                    }
                    let mut score = first.1 * s;
                    if score.is_nan() {
                        score = 0.0;
                    }
                    for (src, w) in rest {
                        match src.score(m) {
                            Some(v) => aggregate(&mut score, v * w, o.how),
                            None => return,
                        }
                    }
                    if card_only {
                        card += 1;
                        if o.limit > 0 && card >= o.limit {
                            done = true;
                        }
                    } else {
                        result.push((m.to_vec(), score));
                    }
                });
            }
        }
        SetOp::Union => {
            srcs.sort_by_key(|(s, _)| s.len());
            let mut acc: HashMap<Vec<u8>, f64> = HashMap::new();
            for (src, w) in &srcs {
                src.for_each(|m, s| {
                    let mut score = w * s;
                    if score.is_nan() {
                        score = 0.0;
                    }
                    match acc.get_mut(m) {
                        Some(t) => aggregate(t, score, o.how),
                        None => {
                            acc.insert(m.to_vec(), score);
                        }
                    }
                });
            }
            result = acc.into_iter().collect();
        }
        SetOp::Diff => {
            let (first, rest) = srcs.split_first().expect("setnum >= 1");
            first.0.for_each(|m, s| {
                if rest.iter().all(|(src, _)| src.score(m).is_none()) {
                    result.push((m.to_vec(), s));
                }
            });
        }
    }
    (result, card)
}

/// ZUNION/ZINTER/ZDIFF[STORE] and ZINTERCARD (Redis's
/// `zunionInterDiffGenericCommand`). `nk` is the index of numkeys; `dst`
/// the destination key of the STORE forms.
fn setop_generic(
    c: &mut Ctx,
    a: &[Bytes],
    dst: Option<&Bytes>,
    nk: usize,
    op: SetOp,
    card_only: bool,
) -> CmdResult {
    let setnum = int_arg(&a[nk])?;
    if setnum < 1 {
        let name = crate::cmd::lookup(&a[0]).map_or("", |cmd| cmd.name);
        return Err(Error::other(format!(
            "ERR at least 1 input key is needed for '{name}' command"
        )));
    }
    if setnum > (a.len() - nk - 1) as i64 {
        return Err(Error::Syntax);
    }
    let setnum = setnum as usize;
    let keys = &a[nk + 1..nk + 1 + setnum];
    let mut k = c.st.keys(c.cl.db, c.now);
    for key in keys {
        match k.lookup_read(key) {
            None | Some(Value::ZSet(_)) | Some(Value::Set(_)) => {}
            Some(_) => return Err(WRONGTYPE),
        }
    }
    let o = setop_opts(a, nk + 1 + setnum, setnum, op, dst.is_some(), card_only)?;
    let d = k.db();
    let srcs: Vec<(Src, f64)> = keys
        .iter()
        .zip(&o.weights)
        .map(|(k, &w)| {
            let s = match d.get(k) {
                Some(Value::ZSet(z)) => Src::Z(z),
                Some(Value::Set(s)) => Src::S(s),
                _ => Src::Missing,
            };
            (s, w)
        })
        .collect();
    let (mut result, card) = combine(srcs, op, &o, card_only);
    if card_only {
        c.out.int(card as i64);
        return Ok(());
    }
    if let Some(dst) = dst {
        let lim = limits(c);
        let z = build(result, &lim);
        let event = match op {
            SetOp::Union => "zunionstore",
            SetOp::Inter => "zinterstore",
            SetOp::Diff => "zdiffstore",
        };
        store_result(c, dst, z, event);
        return Ok(());
    }
    result.sort_by(by_score);
    if o.withscores && !c.out.resp3 {
        c.out.array(result.len() * 2);
    } else {
        c.out.array(result.len());
    }
    for (m, s) in &result {
        if o.withscores && c.out.resp3 {
            c.out.array(2);
        }
        c.out.bulk(m);
        if o.withscores {
            c.out.double(*s);
        }
    }
    Ok(())
}

/// ZUNION numkeys key [key ...] [WEIGHTS weight ...] [AGGREGATE SUM|MIN|MAX] [WITHSCORES]
fn zunion(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    setop_generic(c, a, None, 1, SetOp::Union, false)
}

/// ZUNIONSTORE destination numkeys key [key ...] [WEIGHTS weight ...] [AGGREGATE SUM|MIN|MAX]
fn zunionstore(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    setop_generic(c, a, Some(&a[1]), 2, SetOp::Union, false)
}

/// ZINTER numkeys key [key ...] [WEIGHTS weight ...] [AGGREGATE SUM|MIN|MAX] [WITHSCORES]
fn zinter(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    setop_generic(c, a, None, 1, SetOp::Inter, false)
}

/// ZINTERSTORE destination numkeys key [key ...] [WEIGHTS weight ...] [AGGREGATE SUM|MIN|MAX]
fn zinterstore(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    setop_generic(c, a, Some(&a[1]), 2, SetOp::Inter, false)
}

/// ZINTERCARD numkeys key [key ...] [LIMIT limit]
fn zintercard(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    setop_generic(c, a, None, 1, SetOp::Inter, true)
}

/// ZDIFF numkeys key [key ...] [WITHSCORES]
fn zdiff(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    setop_generic(c, a, None, 1, SetOp::Diff, false)
}

/// ZDIFFSTORE destination numkeys key [key ...]
fn zdiffstore(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    setop_generic(c, a, Some(&a[1]), 2, SetOp::Diff, false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aggregate_sum_of_opposite_infinities_is_zero() {
        let mut t = f64::INFINITY;
        aggregate(&mut t, f64::NEG_INFINITY, Aggregate::Sum);
        assert_eq!(t, 0.0);
    }
}
