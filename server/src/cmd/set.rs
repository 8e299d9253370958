//! Set commands.
//!
//! Results of SINTER/SUNION/SDIFF (and their STORE forms) are built as
//! Redis 7.0 builds them: a fresh intset that converts to a table when a
//! non-integer arrives or it outgrows `set-max-intset-entries`. SDIFF
//! picks between Redis's two algorithms with the same cost estimate, since
//! the second one (copy the first set, then remove) can convert on the way
//! and the stored result keeps that encoding.

use super::scan::{cursor_arg, scan_opts, scan_reply};
use super::{int_arg, rand_count, Ctx, Handler};
use crate::core::config::class;
use crate::core::error::{CmdResult, Error};
use crate::core::random::distinct_indices;
use crate::state::shard::Keys;
use bytes::Bytes;
use rand::Rng;
use std::collections::HashSet;
use storage::{CBytes, Intset, LpVal, Set, Value};

pub static HANDLERS: &[(&str, Handler)] = &[
    ("sadd", sadd),
    ("srem", srem),
    ("scard", scard),
    ("sismember", sismember),
    ("smismember", smismember),
    ("smembers", smembers),
    ("srandmember", srandmember),
    ("spop", spop),
    ("smove", smove),
    ("sinter", sinter),
    ("sintercard", sintercard),
    ("sinterstore", sinterstore),
    ("sunion", sunion),
    ("sunionstore", sunionstore),
    ("sdiff", sdiff),
    ("sdiffstore", sdiffstore),
    ("sscan", sscan),
];

fn bulk_val(out: &mut protocol::ReplyBuf, v: LpVal) {
    out.bulk(v.bytes(&mut itoa::Buffer::new()));
}

/// SADD key member [member ...]
fn sadd(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let max = c.st.tun.set_max_intset;
    let added = op_sadd(&mut c.keys(), &a[1], &a[2..], max)?;
    if added > 0 {
        c.st.changed_n(class::SET, "sadd", c.cl.db, &a[1], added as u64);
    }
    c.out.int(added);
    Ok(())
}

/// Adds `members` to the set at `key` (created if absent); how many were
/// new.
pub fn op_sadd(k: &mut Keys, key: &[u8], members: &[Bytes], max: usize) -> Result<i64, Error> {
    let first = &members[0];
    let s = k.write_or_create::<Set>(key, || Value::Set(Set::new_for(first)))?;
    Ok(members.iter().map(|m| s.add(m, max) as i64).sum())
}

/// SREM key member [member ...]
fn srem(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let n = c
        .keys()
        .remove_each(&a[1], &a[2..], Set::remove, Set::is_empty)?;
    c.removed(class::SET, "srem", &a[1], n);
    Ok(())
}

/// SCARD key
fn scard(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let s = c.keys().read::<Set>(&a[1])?.map_or(0, |s| s.len());
    c.out.int(s as i64);
    Ok(())
}

/// SISMEMBER key member
fn sismember(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let mut k = c.st.keys(c.cl.db, c.now);
    let s = k.read::<Set>(&a[1])?;
    c.out.int(s.is_some_and(|s| s.contains(&a[2])) as i64);
    Ok(())
}

/// SMISMEMBER key member [member ...]
fn smismember(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let mut k = c.st.keys(c.cl.db, c.now);
    let s = k.read::<Set>(&a[1])?;
    c.out.array(a.len() - 2);
    for m in &a[2..] {
        c.out.int(s.is_some_and(|s| s.contains(m)) as i64);
    }
    Ok(())
}

/// SMEMBERS key
fn smembers(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let mut k = c.st.keys(c.cl.db, c.now);
    let Some(s) = k.read::<Set>(&a[1])? else {
        c.out.set(0);
        return Ok(());
    };
    c.out.set(s.len());
    for v in s.iter() {
        bulk_val(c.out, v);
    }
    Ok(())
}

/// SRANDMEMBER key [count]
fn srandmember(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    if a.len() > 3 {
        return Err(Error::Syntax);
    }
    if a.len() == 2 {
        let mut k = c.st.keys(c.cl.db, c.now);
        let s = k.read::<Set>(&a[1])?;
        match s.and_then(|s| s.random(&mut rand::thread_rng())) {
            Some(m) => c.out.bulk(&m),
            None => c.out.null(),
        }
        return Ok(());
    }
    let count = rand_count(&a[2])?;
    let mut k = c.st.keys(c.cl.db, c.now);
    let Some(s) = k.read::<Set>(&a[1])? else {
        c.out.array(0);
        return Ok(());
    };
    let n = s.len();
    let mut rng = rand::thread_rng();
    if count < 0 {
        let k = count.unsigned_abs() as usize;
        c.out.array(k);
        match s.as_intset() {
            Some(is) => {
                for _ in 0..k {
                    if c.out.full() {
                        break;
                    }
                    let i = rng.gen_range(0..n);
                    bulk_val(c.out, LpVal::Int(is.get(i).unwrap_or_default()));
                }
            }
            None => {
                for _ in 0..k {
                    if c.out.full() {
                        break;
                    }
                    if let Some(d) = s.as_table() {
                        if let Some((m, _)) = d.fair_random(&mut rng) {
                            c.out.bulk(m);
                        }
                    }
                }
            }
        }
    } else if count as u64 >= n as u64 {
        c.out.array(n);
        for v in s.iter() {
            bulk_val(c.out, v);
        }
    } else {
        let k = count as usize;
        c.out.array(k);
        match s.as_intset() {
            Some(is) => {
                for i in distinct_indices(&mut rng, n, k) {
                    bulk_val(c.out, LpVal::Int(is.get(i).unwrap_or_default()));
                }
            }
            None if k * 3 > n => {
                let all: Vec<LpVal> = s.iter().collect();
                for i in distinct_indices(&mut rng, n, k) {
                    bulk_val(c.out, all[i]);
                }
            }
            None => {
                // Few of many: draw until enough are distinct.
                let mut seen: HashSet<&[u8]> = HashSet::with_capacity(k);
                while seen.len() < k {
                    let Some((m, _)) = s.as_table().and_then(|d| d.fair_random(&mut rng)) else {
                        break;
                    };
                    if seen.insert(m) {
                        c.out.bulk(m);
                    }
                }
            }
        }
    }
    Ok(())
}

/// SPOP key [count]
fn spop(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let db = c.cl.db;
    if a.len() > 3 {
        return Err(Error::Syntax);
    }
    if a.len() == 2 {
        let Some(m) = op_spop(&mut c.keys(), &a[1], None)?.and_then(|mut p| p.some.pop()) else {
            c.out.null();
            return Ok(());
        };
        c.out.bulk(&m);
        c.st.changed(class::SET, "spop", db, &a[1]);
        c.st.delete_if_empty(db, &a[1]);
        // As Redis 7.0: SREM even when the set is gone with it.
        c.propagate_as([Bytes::from_static(b"SREM"), a[1].clone(), Bytes::from(m)]);
        return Ok(());
    }
    let count = int_arg(&a[2])
        .ok()
        .filter(|n| *n >= 0)
        .ok_or_else(|| Error::other("ERR value is out of range, must be positive"))?;
    let popped = match op_spop(&mut c.keys(), &a[1], Some(count as u64))? {
        Some(p) if count > 0 => p,
        _ => {
            c.out.set(0);
            return Ok(());
        }
    };
    if let Some(all) = popped.all {
        // The whole set went: reply with it, the key is deleted.
        reply_set(c, &all);
        c.st.changed_n(class::SET, "spop", db, &a[1], all.len() as u64);
        c.st.notify(class::GENERIC, "del", db, &a[1]);
        c.propagate_as([Bytes::from_static(b"DEL"), a[1].clone()]);
        return Ok(());
    }
    c.out.set(popped.some.len());
    for m in &popped.some {
        c.out.bulk(m);
    }
    c.st.changed_n(class::SET, "spop", db, &a[1], popped.some.len() as u64);
    // As Redis 7.0: one SREM per member, in one unit.
    if c.propagating() {
        for m in popped.some {
            c.propagate_as([Bytes::from_static(b"SREM"), a[1].clone(), Bytes::from(m)]);
        }
    }
    Ok(())
}

/// What SPOP took: the whole set (its key deleted) or some members.
#[derive(Default)]
struct Popped {
    all: Option<Set>,
    some: Vec<Vec<u8>>,
}

/// Pops `count` random members of the set at `key` (`None`: no set); a
/// count of at least its size takes the set itself. Without a count one
/// member, leaving an emptied set to the caller.
fn op_spop(k: &mut Keys, key: &[u8], count: Option<u64>) -> Result<Option<Popped>, Error> {
    let Some(s) = k.write::<Set>(key)? else {
        return Ok(None);
    };
    let mut p = Popped::default();
    if count.is_some_and(|n| n > 0 && n >= s.len() as u64) {
        if let Some(Value::Set(all)) = k.db().remove(key) {
            p.all = Some(all);
        }
        return Ok(Some(p));
    }
    let mut rng = rand::thread_rng();
    for _ in 0..count.unwrap_or(1) {
        if let Some(m) = s.pop_random(&mut rng) {
            p.some.push(m);
        }
    }
    Ok(Some(p))
}

/// SMOVE source destination member
fn smove(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let (db, max) = (c.cl.db, c.st.tun.set_max_intset);
    let (src, dst, m) = (&a[1], &a[2], &a[3]);
    let moved = op_smove(&mut c.keys(), src, dst, m, max)?;
    if let Some(added) = moved.filter(|_| src != dst) {
        c.st.changed(class::SET, "srem", db, src);
        c.st.delete_if_empty(db, src);
        if added {
            c.st.changed(class::SET, "sadd", db, dst);
        }
    }
    c.out.int(moved.is_some() as i64);
    Ok(())
}

/// Moves `m` from the set at `src` to the one at `dst` (created if
/// absent), both checked for their type first; `None` if `m` was not in
/// `src`, else whether `dst` gained it. An emptied `src` is left to the
/// caller.
fn op_smove(
    k: &mut Keys,
    src: &[u8],
    dst: &[u8],
    m: &[u8],
    max: usize,
) -> Result<Option<bool>, Error> {
    k.expire_if_needed(src);
    k.expire_if_needed(dst);
    let d = k.db();
    let Some(sv) = d.get(src) else {
        return Ok(None);
    };
    let Value::Set(s) = sv else {
        return Err(crate::core::error::WRONGTYPE);
    };
    if d.get(dst).is_some_and(|v| !matches!(v, Value::Set(_))) {
        return Err(crate::core::error::WRONGTYPE);
    }
    if src == dst {
        return Ok(s.contains(m).then_some(false));
    }
    let Some(Value::Set(s)) = d.get_mut(src) else {
        unreachable!("checked above")
    };
    if !s.remove(m) {
        return Ok(None);
    }
    let s = k.write_or_create::<Set>(dst, || Value::Set(Set::new_for(m)))?;
    Ok(Some(s.add(m, max)))
}

/// Looks every key up as a set (lazy expiry, hit/miss stats), failing
/// with WRONGTYPE if any holds another type, as Redis checks all of them
/// before computing anything.
fn check_sets(k: &mut Keys, keys: &[Bytes]) -> CmdResult {
    for key in keys {
        k.read::<Set>(key)?;
    }
    Ok(())
}

fn sets_at<'a>(d: &'a storage::Db, keys: &[Bytes]) -> Vec<Option<&'a Set>> {
    keys.iter()
        .map(|k| match d.get(k) {
            Some(Value::Set(s)) => Some(s),
            _ => None,
        })
        .collect()
}

/// The members common to all `sets` (none missing), in the iteration order
/// of the smallest; at most `limit` of them if non-zero.
fn inter<'a>(sets: &mut [&'a Set], limit: usize) -> Vec<LpVal<'a>> {
    sets.sort_by_key(|s| s.len());
    let mut out = Vec::new();
    let Some((first, rest)) = sets.split_first() else {
        return out;
    };
    for v in first.iter() {
        if rest.iter().all(|s| s.contains_val(v)) {
            out.push(v);
            if limit > 0 && out.len() >= limit {
                break;
            }
        }
    }
    out
}

/// Ends a STORE command with its result.
fn store(c: &mut Ctx, dst: &[u8], set: Set, event: &str) {
    let n = set.len();
    c.store_result(dst, Value::Set(set), n, class::SET, event);
}

fn new_result() -> Set {
    Set::Intset(Intset::new())
}

/// SINTER key [key ...]
fn sinter(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let mut k = c.st.keys(c.cl.db, c.now);
    check_sets(&mut k, &a[1..])?;
    let found = sets_at(k.db(), &a[1..]);
    let Some(mut sets) = found.into_iter().collect::<Option<Vec<&Set>>>() else {
        c.out.set(0);
        return Ok(());
    };
    let members = inter(&mut sets, 0);
    c.out.set(members.len());
    for v in members {
        bulk_val(c.out, v);
    }
    Ok(())
}

/// SINTERSTORE destination key [key ...]
fn sinterstore(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let max = c.st.tun.set_max_intset;
    let mut k = c.st.keys(c.cl.db, c.now);
    check_sets(&mut k, &a[2..])?;
    let found = sets_at(k.db(), &a[2..]);
    let mut result = new_result();
    if let Some(mut sets) = found.into_iter().collect::<Option<Vec<&Set>>>() {
        for v in inter(&mut sets, 0) {
            result.add_val(v, max);
        }
    }
    store(c, &a[1], result, "sinterstore");
    Ok(())
}

/// SINTERCARD numkeys key [key ...] [LIMIT limit]
fn sintercard(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let numkeys = int_arg(&a[1])
        .ok()
        .filter(|n| *n >= 1)
        .ok_or_else(|| Error::other("ERR numkeys should be greater than 0"))?;
    if numkeys as u64 > (a.len() - 2) as u64 {
        return Err(Error::other(
            "ERR Number of keys can't be greater than number of args",
        ));
    }
    let end = 2 + numkeys as usize;
    let mut limit = 0usize;
    let mut i = end;
    while i < a.len() {
        if super::is(&a[i], "limit") && i + 1 < a.len() {
            let l = int_arg(&a[i + 1])
                .ok()
                .filter(|n| *n >= 0)
                .ok_or_else(|| Error::other("ERR LIMIT can't be negative"))?;
            limit = usize::try_from(l).unwrap_or(usize::MAX);
            i += 2;
        } else {
            return Err(Error::Syntax);
        }
    }
    let keys = &a[2..end];
    let mut k = c.st.keys(c.cl.db, c.now);
    check_sets(&mut k, keys)?;
    let found = sets_at(k.db(), keys);
    let n = match found.into_iter().collect::<Option<Vec<&Set>>>() {
        Some(mut sets) => inter(&mut sets, limit).len(),
        None => 0,
    };
    c.out.int(n as i64);
    Ok(())
}

#[derive(Clone, Copy, PartialEq)]
enum Op {
    Union,
    Diff,
}

/// SUNION/SDIFF of `keys` as a new set, built as Redis builds it.
fn union_diff(c: &mut Ctx, keys: &[Bytes], op: Op) -> Result<Set, Error> {
    let max = c.st.tun.set_max_intset;
    op_union_diff(&mut c.keys(), keys, op, max)
}

/// SUNION/SDIFF of `keys` as a new set, built as Redis builds it.
fn op_union_diff(k: &mut Keys, keys: &[Bytes], op: Op, max: usize) -> Result<Set, Error> {
    check_sets(k, keys)?;
    let sets = sets_at(k.db(), keys);
    let mut out = new_result();
    match op {
        Op::Union => {
            for s in sets.iter().flatten() {
                for v in s.iter() {
                    out.add_val(v, max);
                }
            }
        }
        Op::Diff => {
            let Some(first) = sets[0] else {
                return Ok(out);
            };
            let others: Vec<&Set> = sets[1..].iter().flatten().copied().collect();
            // Redis's estimate: checking each member of the first set
            // against the others (halved, as it usually stops early) versus
            // copying the first set and removing everything else.
            let present = 1 + others.len();
            let one = first.len().saturating_mul(present) / 2;
            let two = first.len() + others.iter().map(|s| s.len()).sum::<usize>();
            if one <= two {
                for v in first.iter() {
                    if !others.iter().any(|s| s.contains_val(v)) {
                        out.add_val(v, max);
                    }
                }
            } else {
                for v in first.iter() {
                    out.add_val(v, max);
                }
                'sets: for s in &others {
                    for v in s.iter() {
                        out.remove_val(v);
                        if out.is_empty() {
                            break 'sets;
                        }
                    }
                }
            }
        }
    }
    Ok(out)
}

fn reply_set(c: &mut Ctx, s: &Set) {
    c.out.set(s.len());
    for v in s.iter() {
        bulk_val(c.out, v);
    }
}

/// SUNION key [key ...]
fn sunion(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let s = union_diff(c, &a[1..], Op::Union)?;
    reply_set(c, &s);
    Ok(())
}

/// SDIFF key [key ...]
fn sdiff(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let s = union_diff(c, &a[1..], Op::Diff)?;
    reply_set(c, &s);
    Ok(())
}

/// SUNIONSTORE destination key [key ...]
fn sunionstore(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let s = union_diff(c, &a[2..], Op::Union)?;
    store(c, &a[1], s, "sunionstore");
    Ok(())
}

/// SDIFFSTORE destination key [key ...]
fn sdiffstore(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let s = union_diff(c, &a[2..], Op::Diff)?;
    store(c, &a[1], s, "sdiffstore");
    Ok(())
}

/// SSCAN key cursor [MATCH pattern] [COUNT count]
fn sscan(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let cursor = cursor_arg(&a[2])?;
    let mut k = c.st.keys(c.cl.db, c.now);
    let Some(s) = k.read::<Set>(&a[1])? else {
        scan_reply(c.out, 0, &[]);
        return Ok(());
    };
    let o = scan_opts(&a[3..], false)?;
    let mut items: Vec<LpVal> = Vec::new();
    let next = match s.as_table() {
        // An intset is small: all of it at once, and the scan is over.
        None => {
            items.extend(s.iter().filter(|v| o.matches_val(*v)));
            0
        }
        Some(d) => {
            let mut budget = o.count.saturating_mul(10);
            let mut cur = cursor;
            let mut found: Vec<CBytes> = Vec::new();
            loop {
                cur = d.scan(cur, |m, _| found.push(CBytes::new(m)));
                budget -= 1;
                if cur == 0 || budget == 0 || found.len() >= o.count {
                    break;
                }
            }
            let kept: Vec<LpVal> = found
                .iter()
                .map(|m| LpVal::Str(m))
                .filter(|v| o.matches_val(*v))
                .collect();
            scan_reply(c.out, cur, &kept);
            return Ok(());
        }
    };
    scan_reply(c.out, next, &items);
    Ok(())
}
