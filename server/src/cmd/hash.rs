//! Hash commands.
//!
//! Small hashes are listpacks (insertion order), large ones tables; the
//! conversion rules live in `storage::hash` and are triggered by every
//! write: a field or value longer than `hash-max-listpack-value` (for
//! HINCRBY/HINCRBYFLOAT the *result*), or more fields than
//! `hash-max-listpack-entries`. HSETNX on an existing field writes nothing
//! and so converts nothing.

use super::scan::{cursor_arg, scan_opts, scan_reply};
use super::{int_arg, is, rand_count, Ctx, Handler};
use crate::core::config::class;
use crate::core::error::{CmdResult, Error};
use crate::core::random::distinct_indices;
use crate::state::shard::Keys;
use bytes::Bytes;
use rand::Rng;
use std::collections::HashSet;
use storage::num::LDouble;
use storage::{CBytes, Hash, HashLimits, LpVal, Value};

pub static HANDLERS: &[(&str, Handler)] = &[
    ("hset", hset),
    ("hmset", hmset),
    ("hsetnx", hsetnx),
    ("hget", hget),
    ("hmget", hmget),
    ("hgetall", hgetall),
    ("hkeys", hkeys),
    ("hvals", hvals),
    ("hdel", hdel),
    ("hexists", hexists),
    ("hlen", hlen),
    ("hstrlen", hstrlen),
    ("hincrby", hincrby),
    ("hincrbyfloat", hincrbyfloat),
    ("hrandfield", hrandfield),
    ("hscan", hscan),
];

fn new_hash() -> Value {
    Value::Hash(Hash::default())
}

/// Writes one listpack/table element as a bulk string.
pub fn bulk_val(c: &mut Ctx, v: LpVal) {
    c.out.bulk(v.bytes(&mut itoa::Buffer::new()));
}

/// HSET key field value [field value ...]
fn hset(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let added = hset_generic(c, a, "hset")?;
    c.out.int(added);
    Ok(())
}

/// HMSET key field value [field value ...]
fn hmset(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    hset_generic(c, a, "hmset")?;
    c.out.ok();
    Ok(())
}

fn hset_generic(c: &mut Ctx, a: &[Bytes], name: &str) -> Result<i64, Error> {
    if !a.len().is_multiple_of(2) {
        return Err(Error::Arity(name.into()));
    }
    let lim = c.st.tun.hash_limits;
    let added = op_hset(&mut c.keys(), &a[1], &a[2..], &lim)?;
    c.st.changed_n(
        class::HASH,
        "hset",
        c.cl.db,
        &a[1],
        (a.len() as u64 - 2) / 2,
    );
    Ok(added)
}

/// Sets each field/value pair of `pairs`; how many fields are new.
pub fn op_hset(k: &mut Keys, key: &[u8], pairs: &[Bytes], lim: &HashLimits) -> Result<i64, Error> {
    let h = k.write_or_create::<Hash>(key, new_hash)?;
    let mut added = 0;
    for p in pairs.chunks_exact(2) {
        added += h.set(&p[0], &p[1], lim) as i64;
    }
    Ok(added)
}

/// HSETNX key field value
fn hsetnx(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let lim = c.st.tun.hash_limits;
    let set = op_hsetnx(&mut c.keys(), &a[1], &a[2], &a[3], &lim)?;
    if set {
        c.st.changed(class::HASH, "hset", c.cl.db, &a[1]);
    }
    c.out.int(set as i64);
    Ok(())
}

/// Sets `field` unless it exists; whether it did.
fn op_hsetnx(
    k: &mut Keys,
    key: &[u8],
    field: &[u8],
    val: &[u8],
    lim: &HashLimits,
) -> Result<bool, Error> {
    let h = k.write_or_create::<Hash>(key, new_hash)?;
    if h.contains(field) {
        return Ok(false);
    }
    h.set(field, val, lim);
    Ok(true)
}

/// HGET key field
fn hget(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let mut k = c.st.keys(c.cl.db, c.now);
    let h = k.read::<Hash>(&a[1])?;
    match h.and_then(|h| h.get_with(&a[2], |v| c.out.bulk(v))) {
        Some(()) => {}
        None => c.out.null(),
    }
    Ok(())
}

/// HMGET key field [field ...]
fn hmget(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let mut k = c.st.keys(c.cl.db, c.now);
    let h = k.read::<Hash>(&a[1])?;
    c.out.array(a.len() - 2);
    for f in &a[2..] {
        if h.and_then(|h| h.get_with(f, |v| c.out.bulk(v))).is_none() {
            c.out.null();
        }
    }
    Ok(())
}

/// HGETALL key
fn hgetall(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let mut k = c.st.keys(c.cl.db, c.now);
    let Some(h) = k.read::<Hash>(&a[1])? else {
        c.out.map(0);
        return Ok(());
    };
    c.out.map(h.len());
    let mut buf = itoa::Buffer::new();
    for (f, v) in h.iter() {
        c.out.bulk(f.bytes(&mut buf));
        c.out.bulk(v.bytes(&mut buf));
    }
    Ok(())
}

/// HKEYS key
fn hkeys(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    hkeys_or_vals(c, a, true)
}

/// HVALS key
fn hvals(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    hkeys_or_vals(c, a, false)
}

fn hkeys_or_vals(c: &mut Ctx, a: &[Bytes], keys: bool) -> CmdResult {
    let mut k = c.st.keys(c.cl.db, c.now);
    let Some(h) = k.read::<Hash>(&a[1])? else {
        c.out.array(0);
        return Ok(());
    };
    c.out.array(h.len());
    let mut buf = itoa::Buffer::new();
    for (f, v) in h.iter() {
        c.out.bulk(if keys { f } else { v }.bytes(&mut buf));
    }
    Ok(())
}

/// HDEL key field [field ...]
fn hdel(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let n = c
        .keys()
        .remove_each(&a[1], &a[2..], Hash::remove, Hash::is_empty)?;
    c.removed(class::HASH, "hdel", &a[1], n);
    Ok(())
}

/// HEXISTS key field
fn hexists(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let mut k = c.st.keys(c.cl.db, c.now);
    let h = k.read::<Hash>(&a[1])?;
    c.out.int(h.is_some_and(|h| h.contains(&a[2])) as i64);
    Ok(())
}

/// HLEN key
fn hlen(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let mut k = c.st.keys(c.cl.db, c.now);
    let h = k.read::<Hash>(&a[1])?;
    c.out.int(h.map_or(0, |h| h.len()) as i64);
    Ok(())
}

/// HSTRLEN key field
fn hstrlen(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let mut k = c.st.keys(c.cl.db, c.now);
    let h = k.read::<Hash>(&a[1])?;
    c.out
        .int(h.and_then(|h| h.value_len(&a[2])).unwrap_or(0) as i64);
    Ok(())
}

/// HINCRBY key field increment
fn hincrby(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let by = int_arg(&a[3])?;
    let lim = c.st.tun.hash_limits;
    let new = op_hincrby(&mut c.keys(), &a[1], &a[2], by, &lim)?;
    c.st.changed(class::HASH, "hincrby", c.cl.db, &a[1]);
    c.out.int(new);
    Ok(())
}

/// Adds `by` to the integer at `field` (0 if absent); the result.
fn op_hincrby(
    k: &mut Keys,
    key: &[u8],
    field: &[u8],
    by: i64,
    lim: &HashLimits,
) -> Result<i64, Error> {
    let h = k.write_or_create::<Hash>(key, new_hash)?;
    let cur = match h.get_with(field, storage::num::parse_i64) {
        None => 0,
        Some(Some(n)) => n,
        Some(None) => return Err(Error::other("ERR hash value is not an integer")),
    };
    let new = cur
        .checked_add(by)
        .ok_or(Error::Storage(storage::Error::Overflow))?;
    h.set(field, itoa::Buffer::new().format(new).as_bytes(), lim);
    Ok(new)
}

/// HINCRBYFLOAT key field increment
fn hincrbyfloat(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let by = LDouble::parse(&a[3]).ok_or(crate::core::error::NOT_FLOAT)?;
    if by.is_infinite() {
        return Err(Error::other("ERR value is NaN or Infinity"));
    }
    let lim = c.st.tun.hash_limits;
    let text = op_hincrbyfloat(&mut c.keys(), &a[1], &a[2], by, &lim)?;
    c.st.changed(class::HASH, "hincrbyfloat", c.cl.db, &a[1]);
    c.out.bulk(text.as_bytes());
    // The result, not the increment: a replay adds no rounding of its own.
    if c.propagating() {
        let v = Bytes::copy_from_slice(text.as_bytes());
        c.propagate_as([Bytes::from_static(b"HSET"), a[1].clone(), a[2].clone(), v]);
    }
    Ok(())
}

/// Adds `by` to the number at `field` (0 if absent); the result's text.
fn op_hincrbyfloat(
    k: &mut Keys,
    key: &[u8],
    field: &[u8],
    by: LDouble,
    lim: &HashLimits,
) -> Result<String, Error> {
    let h = k.write_or_create::<Hash>(key, new_hash)?;
    let cur = match h.get_with(field, LDouble::parse) {
        None => LDouble::from_i64(0),
        Some(Some(v)) => v,
        Some(None) => return Err(Error::other("ERR hash value is not a float")),
    };
    let sum = match cur.add(by) {
        Some(s) if !s.is_infinite() => s,
        _ => return Err(storage::Error::NanOrInfinity.into()),
    };
    let text = sum.to_human();
    h.set(field, text.as_bytes(), lim);
    Ok(text)
}

/// HRANDFIELD key [count [WITHVALUES]]
fn hrandfield(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    if a.len() == 2 {
        let mut k = c.st.keys(c.cl.db, c.now);
        let h = k.read::<Hash>(&a[1])?;
        match h.and_then(|h| h.random(&mut rand::thread_rng())) {
            Some((f, _)) => c.out.bulk(&f),
            None => c.out.null(),
        }
        return Ok(());
    }
    let withvalues = match a.len() {
        3 => false,
        4 if is(&a[3], "withvalues") => true,
        _ => return Err(Error::Syntax),
    };
    let count = rand_count(&a[2])?;
    if withvalues && !(-(i64::MAX / 2)..=i64::MAX / 2).contains(&count) {
        return Err(Error::other("ERR value is out of range"));
    }
    let resp3 = c.out.resp3;
    let mut k = c.st.keys(c.cl.db, c.now);
    let Some(h) = k.read::<Hash>(&a[1])? else {
        c.out.array(0);
        return Ok(());
    };
    let n = h.len();
    let out = &mut *c.out;
    let mut buf = itoa::Buffer::new();
    let mut emit = |out: &mut protocol::ReplyBuf, f: LpVal, v: LpVal| {
        if withvalues && resp3 {
            out.array(2);
        }
        out.bulk(f.bytes(&mut buf));
        if withvalues {
            out.bulk(v.bytes(&mut buf));
        }
    };
    let header = |out: &mut protocol::ReplyBuf, k: usize| {
        out.array(if withvalues && !resp3 { k * 2 } else { k });
    };
    let mut rng = rand::thread_rng();
    if count < 0 {
        // Repeats allowed: each pick independent.
        let k = count.unsigned_abs() as usize;
        header(out, k);
        if let Some(d) = h.as_table() {
            for _ in 0..k {
                if out.full() {
                    break;
                }
                if let Some((f, v)) = d.fair_random(&mut rng) {
                    emit(out, LpVal::Str(f), LpVal::Str(v));
                }
            }
        } else {
            let e = h.entries();
            for _ in 0..k {
                if out.full() {
                    break;
                }
                let (f, v) = e[rng.gen_range(0..n)];
                emit(out, f, v);
            }
        }
    } else if count as u64 >= n as u64 {
        header(out, n);
        for (f, v) in h.iter() {
            emit(out, f, v);
        }
    } else {
        let k = count as usize;
        header(out, k);
        match h.as_table() {
            // Few of many: draw until enough are distinct.
            Some(d) if k * 3 <= n => {
                let mut seen: HashSet<&[u8]> = HashSet::with_capacity(k);
                while seen.len() < k {
                    let Some((f, v)) = d.fair_random(&mut rng) else {
                        break;
                    };
                    if seen.insert(f) {
                        emit(out, LpVal::Str(f), LpVal::Str(v));
                    }
                }
            }
            _ => {
                let e = h.entries();
                for i in distinct_indices(&mut rng, n, k) {
                    emit(out, e[i].0, e[i].1);
                }
            }
        }
    }
    Ok(())
}

/// HSCAN key cursor [MATCH pattern] [COUNT count]
fn hscan(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let cursor = cursor_arg(&a[2])?;
    let mut k = c.st.keys(c.cl.db, c.now);
    let Some(h) = k.read::<Hash>(&a[1])? else {
        scan_reply(c.out, 0, &[]);
        return Ok(());
    };
    let o = scan_opts(&a[3..], false)?;
    let mut items: Vec<LpVal> = Vec::new();
    let next = match h.as_table() {
        // A listpack is small: all of it at once, and the scan is over.
        None => {
            for (f, v) in h.iter() {
                if o.matches_val(f) {
                    items.push(f);
                    items.push(v);
                }
            }
            0
        }
        Some(d) => {
            // As Redis: up to 10 buckets per requested field, so sparse
            // tables still answer fast; COUNT counts fields, not values.
            let mut budget = o.count.saturating_mul(10);
            let mut cur = cursor;
            let mut found: Vec<CBytes> = Vec::new();
            loop {
                cur = d.scan(cur, |f, v| {
                    found.push(CBytes::new(f));
                    found.push(v.clone());
                });
                budget -= 1;
                if cur == 0 || budget == 0 || found.len() / 2 >= o.count {
                    break;
                }
            }
            let mut kept = Vec::with_capacity(found.len());
            for p in found.chunks_exact(2) {
                if o.matches(&p[0]) {
                    kept.push(LpVal::Str(&p[0]));
                    kept.push(LpVal::Str(&p[1]));
                }
            }
            scan_reply(c.out, cur, &kept);
            return Ok(());
        }
    };
    scan_reply(c.out, next, &items);
    Ok(())
}
