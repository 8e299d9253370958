//! What the sorted-set family's files share: its limits and numbers, building
//! a set from members, storing a result, and ZADD's core (GEOADD adds
//! through it).

use crate::cmd::Ctx;
use crate::core::config::class;
use crate::core::error::{CmdResult, Error, NOT_FLOAT};

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

/// Stores `z` at `dst` (replacing any value and TTL) and replies its size;
/// an empty result deletes `dst` instead and replies 0.
pub fn store_result(c: &mut Ctx, dst: &[u8], z: SortedSet, event: &str) {
    let db = c.cl.db;
    let n = z.len();
    if n > 0 {
        c.st.expire_if_needed(db, dst, c.now);
        c.st.shard.dbs[db].set(dst, Value::ZSet(z), false);
        c.st.changed(class::ZSET, event, db, dst);
    } else {
        c.st.expire_if_needed(db, dst, c.now);
        if c.st.shard.dbs[db].remove(dst).is_some() {
            c.st.changed(class::GENERIC, "del", db, dst);
        }
    }
    c.out.int(n as i64);
}

pub fn zadd_generic(c: &mut Ctx, key: &[u8], pairs: &[Bytes], f: ZaddFlags, ch: bool) -> CmdResult {
    let scores = pairs
        .chunks(2)
        .map(|p| score_arg(&p[0]))
        .collect::<Result<Vec<f64>, Error>>()?;
    let db = c.cl.db;
    let lim = limits(c);
    let z = if f.xx {
        match c.st.write::<SortedSet>(db, key, c.now)? {
            Some(z) => z,
            None => {
                if f.incr {
                    c.out.null();
                } else {
                    c.out.int(0);
                }
                return Ok(());
            }
        }
    } else {
        // Redis picks the encoding of a new set from its first member only.
        let first = pairs[1].len();
        c.st.write_or_create::<SortedSet>(db, key, c.now, || {
            Value::ZSet(SortedSet::with_hint(1, first, &lim))
        })?
    };
    let (mut added, mut updated) = (0i64, 0i64);
    let mut last = None;
    let mut nan = false;
    for (p, &s) in pairs.chunks(2).zip(&scores) {
        match z.add(&p[1], s, f, &lim) {
            ZaddOutcome::Nan => {
                nan = true;
                break;
            }
            ZaddOutcome::Nop => last = None,
            ZaddOutcome::Added(v) => {
                added += 1;
                last = Some(v);
            }
            ZaddOutcome::Updated(v) => {
                updated += 1;
                last = Some(v);
            }
            ZaddOutcome::Unchanged(v) => last = Some(v),
        }
    }
    if added + updated > 0 {
        let event = if f.incr { "zincr" } else { "zadd" };
        c.st.changed_n(class::ZSET, event, db, key, (added + updated) as u64);
    }
    if nan {
        c.st.delete_if_empty(db, key);
        return Err(Error::other("ERR resulting score is not a number (NaN)"));
    }
    if f.incr {
        match last {
            Some(v) => c.out.double(v),
            None => c.out.null(),
        }
    } else {
        c.out.int(added + if ch { updated } else { 0 });
    }
    Ok(())
}
