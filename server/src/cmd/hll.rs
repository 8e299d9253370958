//! HyperLogLog commands: PFADD, PFCOUNT, PFMERGE, PFDEBUG, PFSELFTEST over
//! string values in Redis's layout (`storage::hll`).
//!
//! PFCOUNT of one key keeps the estimate in the value's header; refreshing
//! it is a change Redis counts and propagates (dirty, WATCH, tracking), but
//! with no keyspace event.

use super::{is, Ctx, Handler};
use crate::core::config::class;
use crate::core::error::{CmdResult, Error};
use bytes::Bytes;
use storage::hll::{self, REGISTERS};
use storage::{StrValue, Value};

pub static HANDLERS: &[(&str, Handler)] = &[
    ("pfadd", pfadd),
    ("pfcount", pfcount),
    ("pfmerge", pfmerge),
    ("pfdebug", pfdebug),
    ("pfselftest", pfselftest),
];

fn not_hll() -> Error {
    Error::other("WRONGTYPE Key is not a valid HyperLogLog string value.")
}

fn corrupt() -> Error {
    Error::other("INVALIDOBJ Corrupted HLL object detected")
}

/// The bytes of a string that is a HyperLogLog.
fn hll_bytes(s: &StrValue) -> Result<&[u8], Error> {
    let b: &[u8] = match s {
        StrValue::Int(_) => return Err(not_hll()),
        StrValue::Emb(b) => b,
        StrValue::Raw(v) => v,
    };
    if hll::is_hll(b) {
        Ok(b)
    } else {
        Err(not_hll())
    }
}

/// The value at `key` for reading (hit/miss counted): None if missing.
fn read<'a>(c: &'a mut Ctx, key: &[u8]) -> Result<Option<&'a [u8]>, Error> {
    match c.st.read_str(c.cl.db, key, c.now)? {
        Some(s) => hll_bytes(s).map(Some),
        None => Ok(None),
    }
}

/// The value at `key` as a buffer to modify: None if missing.
fn write<'a>(c: &'a mut Ctx, key: &[u8]) -> Result<Option<&'a mut Vec<u8>>, Error> {
    match c.st.write_str(c.cl.db, key, c.now)? {
        Some(s) => {
            hll_bytes(s)?;
            Ok(Some(s.make_raw()))
        }
        None => Ok(None),
    }
}

/// The value at `key`, created empty if missing; the flag tells whether it
/// was created.
fn write_or_create<'a>(c: &'a mut Ctx, key: &[u8]) -> Result<(&'a mut Vec<u8>, bool), Error> {
    let db = c.cl.db;
    let created = c.st.write_str(db, key, c.now)?.is_none();
    if created {
        let v = Value::Str(StrValue::raw(hll::new_value()));
        c.st.shard.dbs[db].add(key, v);
    }
    match c.st.shard.dbs[db].get_mut(key) {
        Some(Value::Str(s)) => {
            hll_bytes(s)?;
            Ok((s.make_raw(), created))
        }
        _ => Err(not_hll()),
    }
}

fn sparse_max(c: &Ctx) -> usize {
    c.st.cfg
        .hll_sparse_max_bytes
        .try_into()
        .unwrap_or(usize::MAX)
}

/// PFADD key [element [element ...]]
fn pfadd(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let max = sparse_max(c);
    let (v, created) = write_or_create(c, &a[1])?;
    // Redis counts a change per element that moved a register.
    let mut updated = created as u64;
    for e in &a[2..] {
        updated += hll::add(v, e, max).map_err(|_| corrupt())? as u64;
    }
    if updated > 0 {
        hll::invalidate_cache(v);
        c.st.changed_n(class::STRING, "pfadd", c.cl.db, &a[1], updated);
    }
    c.out.int((updated > 0) as i64);
    Ok(())
}

/// PFCOUNT key [key ...]
fn pfcount(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    if a.len() > 2 {
        let mut max = [0u8; REGISTERS];
        for key in &a[1..] {
            if let Some(v) = read(c, key)? {
                hll::merge_into(&mut max, v).map_err(|_| corrupt())?;
            }
        }
        c.out.int(hll::count_registers(&max) as i64);
        return Ok(());
    }
    let key = &a[1];
    let card = match read(c, key)? {
        None => 0,
        Some(v) => match hll::cached(v) {
            Some(card) => card,
            None => {
                let card = hll::count(v).map_err(|_| corrupt())?;
                if let Some(Value::Str(s)) = c.st.shard.dbs[c.cl.db].get_mut(key) {
                    hll::set_cache(s.make_raw(), card);
                }
                c.st.changed(0, "", c.cl.db, key);
                card
            }
        },
    };
    c.out.int(card as i64);
    Ok(())
}

/// PFMERGE destkey [sourcekey [sourcekey ...]]
fn pfmerge(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let mut max = [0u8; REGISTERS];
    let mut dense = false;
    // The destination's own registers take part, as a source.
    for key in &a[1..] {
        if let Some(v) = read(c, key)? {
            dense |= !hll::is_sparse(v);
            hll::merge_into(&mut max, v).map_err(|_| corrupt())?;
        }
    }
    let max_bytes = sparse_max(c);
    let (v, _) = write_or_create(c, &a[1])?;
    if dense {
        hll::to_dense(v).map_err(|_| corrupt())?;
    }
    hll::store_registers(v, &max, max_bytes).map_err(|_| corrupt())?;
    hll::invalidate_cache(v);
    c.st.changed(class::STRING, "pfadd", c.cl.db, &a[1]);
    c.out.ok();
    Ok(())
}

/// PFDEBUG <GETREG|DECODE|ENCODING|TODENSE> key
fn pfdebug(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let (sub, key) = (&a[1], &a[2]);
    let v = write(c, key)?.ok_or_else(|| Error::other("ERR The specified key does not exist"))?;
    if is(sub, "getreg") {
        let converted = hll::to_dense(v).map_err(|_| corrupt())?;
        let regs = hll::registers(v).map_err(|_| corrupt())?;
        if converted {
            c.st.dirty += 1;
        }
        c.out.array(regs.len());
        regs.iter().for_each(|&r| c.out.int(r as i64));
    } else if is(sub, "decode") {
        if !hll::is_sparse(v) {
            return Err(Error::other("ERR HLL encoding is not sparse"));
        }
        let text = hll::decode(v);
        c.out.bulk(text.as_bytes());
    } else if is(sub, "encoding") {
        let enc = if hll::is_sparse(v) { "sparse" } else { "dense" };
        c.out.simple(enc);
    } else if is(sub, "todense") {
        let converted = hll::to_dense(v).map_err(|_| corrupt())?;
        if converted {
            c.st.dirty += 1;
        }
        c.out.int(converted as i64);
    } else {
        return Err(Error::other(format!(
            "ERR Unknown PFDEBUG subcommand '{}'",
            String::from_utf8_lossy(sub)
        )));
    }
    Ok(())
}

/// PFSELFTEST
fn pfselftest(c: &mut Ctx, _a: &[Bytes]) -> CmdResult {
    hll::self_test().map_err(Error::other)?;
    c.out.ok();
    Ok(())
}
