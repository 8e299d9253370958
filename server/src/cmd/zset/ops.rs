//! What the sorted-set family's files share: its limits and numbers, building
//! a set from members, storing a result, and ZADD's core (GEOADD adds
//! through it).

use crate::cmd::Ctx;
use crate::core::config::class;
use crate::core::error::{CmdResult, Error, NOT_FLOAT};
use crate::state::shard::Keys;

use bytes::Bytes;
use storage::num::parse_score;
use storage::{SortedSet, Value, ZaddFlags, ZaddOutcome, ZsetLimits};

fn score_arg(a: &[u8]) -> Result<f64, Error> {
    parse_score(a).ok_or(NOT_FLOAT)
}

/// Redis's `getRangeLongFromObjectOrReply` with a custom message: the
/// message for a non-integer too.
pub fn range_long(a: &[u8], min: i64, max: i64, msg: &str) -> Result<i64, Error> {
    match storage::num::parse_i64(a) {
        Some(v) if (min..=max).contains(&v) => Ok(v),
        _ => Err(Error::other(msg)),
    }
}

/// `getPositiveLongFromObjectOrReply` without a message.
pub fn positive_long(a: &[u8]) -> Result<i64, Error> {
    range_long(
        a,
        0,
        i64::MAX,
        "ERR value is out of range, must be positive",
    )
}

pub fn limits(c: &Ctx) -> ZsetLimits {
    c.st.tun.zset_limits
}

/// A new set holding `v` (any order), in the encoding Redis gives a set it
/// builds for a store command: listpack iff it fits the limits.
pub fn build(v: impl IntoIterator<Item = (impl AsRef<[u8]>, f64)>, lim: &ZsetLimits) -> SortedSet {
    let mut z = SortedSet::new_skiplist();
    for (m, s) in v {
        z.add(m.as_ref(), s, ZaddFlags::default(), lim);
    }
    z.convert_to_listpack_if_fits(lim);
    z
}

/// Ends a STORE command with its result.
pub fn store_result(c: &mut Ctx, dst: &[u8], z: SortedSet, event: &str) {
    let n = z.len();
    c.store_result(dst, Value::ZSet(z), n, class::ZSET, event);
}

/// What ZADD did.
#[derive(Default)]
pub struct Zadded {
    pub added: i64,
    pub updated: i64,
    /// The score of the last member named (INCR's reply).
    pub last: Option<f64>,
    /// A score became NaN: the members before it stay added.
    pub nan: bool,
}

pub fn zadd_generic(c: &mut Ctx, key: &[u8], pairs: &[Bytes], f: ZaddFlags, ch: bool) -> CmdResult {
    let scores = pairs
        .chunks(2)
        .map(|p| score_arg(&p[0]))
        .collect::<Result<Vec<f64>, Error>>()?;
    let db = c.cl.db;
    let lim = limits(c);
    let Some(r) = op_zadd(&mut c.keys(), key, pairs, &scores, f, &lim)? else {
        if f.incr {
            c.out.null();
        } else {
            c.out.int(0);
        }
        return Ok(());
    };
    if r.added + r.updated > 0 {
        let event = if f.incr { "zincr" } else { "zadd" };
        c.st.changed_n(class::ZSET, event, db, key, (r.added + r.updated) as u64);
    }
    if r.nan {
        c.st.delete_if_empty(db, key);
        return Err(Error::other("ERR resulting score is not a number (NaN)"));
    }
    if f.incr {
        match r.last {
            Some(v) => c.out.double(v),
            None => c.out.null(),
        }
    } else {
        c.out.int(r.added + if ch { r.updated } else { 0 });
    }
    Ok(())
}

/// Adds the (score, member) `pairs` with their parsed `scores` to the set
/// at `key`, created if absent unless XX; `None` if XX found no set.
pub fn op_zadd(
    k: &mut Keys,
    key: &[u8],
    pairs: &[Bytes],
    scores: &[f64],
    f: ZaddFlags,
    lim: &ZsetLimits,
) -> Result<Option<Zadded>, Error> {
    let z = if f.xx {
        match k.write::<SortedSet>(key)? {
            Some(z) => z,
            None => return Ok(None),
        }
    } else {
        // Redis picks the encoding of a new set from its first member only.
        let first = pairs[1].len();
        k.write_or_create::<SortedSet>(key, || Value::ZSet(SortedSet::with_hint(1, first, lim)))?
    };
    let mut r = Zadded::default();
    for (p, &s) in pairs.chunks(2).zip(scores) {
        match z.add(&p[1], s, f, lim) {
            ZaddOutcome::Nan => {
                r.nan = true;
                break;
            }
            ZaddOutcome::Nop => r.last = None,
            ZaddOutcome::Added(v) => {
                r.added += 1;
                r.last = Some(v);
            }
            ZaddOutcome::Updated(v) => {
                r.updated += 1;
                r.last = Some(v);
            }
            ZaddOutcome::Unchanged(v) => r.last = Some(v),
        }
    }
    Ok(Some(r))
}
