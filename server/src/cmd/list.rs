//! List commands, blocking pops included.
//!
//! Argument checks run in the order Redis 7.0.15 runs them (checked against
//! the real server), because that order decides which error a client sees:
//! e.g. LPOP validates its count before looking at the key, LSET looks the
//! key up before parsing the index, BLMPOP parses its timeout last.
//!
//! Blocking commands try to serve at once; otherwise they register with
//! [`Ctx::block`] and write nothing. When a key they wait on gets data the
//! dispatcher runs the same handler again for them (first come first
//! served), so serving and replying live here in one place.

use super::{int_arg, is, timeout_arg, Ctx, Handler};
use crate::core::config::class;
use crate::core::error::{CmdResult, Error};
use crate::core::propagate::int;
use crate::state::shard::Keys;
use crate::state::BlockKind;
use bytes::Bytes;
use storage::{LpVal, Quicklist, Value};

pub static HANDLERS: &[(&str, Handler)] = &[
    ("lpush", lpush),
    ("rpush", rpush),
    ("lpushx", lpushx),
    ("rpushx", rpushx),
    ("lpop", lpop),
    ("rpop", rpop),
    ("llen", llen),
    ("lrange", lrange),
    ("lindex", lindex),
    ("lset", lset),
    ("linsert", linsert),
    ("lrem", lrem),
    ("ltrim", ltrim),
    ("lpos", lpos),
    ("lmove", lmove),
    ("rpoplpush", rpoplpush),
    ("lmpop", lmpop),
    ("blpop", blpop),
    ("brpop", brpop),
    ("brpoplpush", brpoplpush),
    ("blmove", blmove),
    ("blmpop", blmpop),
];

/// Writes one list element as a bulk reply.
fn bulk_val(out: &mut protocol::ReplyBuf, v: LpVal) {
    out.bulk(v.bytes(&mut itoa::Buffer::new()));
}

fn new_list(fill: i32) -> impl FnOnce() -> Value {
    move || Value::List(Box::new(Quicklist::new(fill)))
}

fn pop_event(front: bool) -> &'static str {
    if front {
        "lpop"
    } else {
        "rpop"
    }
}

fn push_event(front: bool) -> &'static str {
    if front {
        "lpush"
    } else {
        "rpush"
    }
}

/// Records a change of `key` that counts as `n` changes for the dirty
/// counter (INFO's rdb_changes_since_last_save), as Redis counts them:
/// one per element pushed, popped, removed or trimmed.
fn changed_n(c: &mut Ctx, event: &str, db: usize, key: &[u8], n: usize) {
    c.st.changed(class::LIST, event, db, key);
    c.st.dirty = (c.st.dirty - 1).saturating_add(n as u64);
}

/// `LEFT` / `RIGHT` (true for LEFT), else a syntax error.
fn end_arg(a: &[u8]) -> Result<bool, Error> {
    if is(a, "left") {
        Ok(true)
    } else if is(a, "right") {
        Ok(false)
    } else {
        Err(Error::Syntax)
    }
}

/// LPUSH key element [element ...]
fn lpush(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    push(c, a, true, false)
}

/// RPUSH key element [element ...]
fn rpush(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    push(c, a, false, false)
}

/// LPUSHX key element [element ...]
fn lpushx(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    push(c, a, true, true)
}

/// RPUSHX key element [element ...]
fn rpushx(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    push(c, a, false, true)
}

fn push(c: &mut Ctx, a: &[Bytes], front: bool, only_existing: bool) -> CmdResult {
    let fill = c.st.tun.list_fill;
    let len = op_push(&mut c.keys(), &a[1], &a[2..], front, only_existing, fill)?;
    if len > 0 {
        changed_n(c, push_event(front), c.cl.db, &a[1], a.len() - 2);
    }
    c.out.int(len as i64);
    Ok(())
}

/// Pushes `elems` onto one end of the list at `key`, created if absent
/// unless `only_existing`; the list's length (0: no list).
pub fn op_push(
    k: &mut Keys,
    key: &[u8],
    elems: &[Bytes],
    front: bool,
    only_existing: bool,
    fill: i32,
) -> Result<usize, Error> {
    let list = if only_existing {
        match k.write::<Quicklist>(key)? {
            Some(l) => l,
            None => return Ok(0),
        }
    } else {
        k.write_or_create::<Quicklist>(key, new_list(fill))?
    };
    for e in elems {
        if front {
            list.push_front(e);
        } else {
            list.push_back(e);
        }
    }
    Ok(list.len())
}

/// LPOP key [count]
fn lpop(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    pop(c, a, true)
}

/// RPOP key [count]
fn rpop(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    pop(c, a, false)
}

fn pop(c: &mut Ctx, a: &[Bytes], front: bool) -> CmdResult {
    if a.len() > 3 {
        return Err(Error::Arity(pop_event(front).into()));
    }
    let count = match a.get(2) {
        None => None,
        Some(n) => Some(
            storage::num::parse_i64(n)
                .filter(|&n| n >= 0)
                .ok_or_else(|| Error::other("ERR value is out of range, must be positive"))?,
        ),
    };
    let db = c.cl.db;
    // Popped elements are written as they are walked, not copied first.
    let mut k = c.st.keys(db, c.now);
    let Some(list) = k.write::<Quicklist>(&a[1])? else {
        match count {
            Some(_) => c.out.null_array(),
            None => c.out.null(),
        }
        return Ok(());
    };
    let popped = match count {
        None => {
            let v = if front {
                list.pop_front()
            } else {
                list.pop_back()
            };
            c.out.bulk(&v.unwrap_or_default());
            1
        }
        Some(0) => {
            c.out.array(0);
            return Ok(());
        }
        Some(n) => pop_many(c.out, list, front, n),
    };
    changed_n(c, pop_event(front), db, &a[1], popped);
    c.st.delete_if_empty(db, &a[1]);
    Ok(())
}

/// Replies with up to `n` elements taken from one end (an array), walking
/// the nodes once and deleting the run in one go.
fn pop_many(out: &mut protocol::ReplyBuf, list: &mut Quicklist, front: bool, n: i64) -> usize {
    let len = list.len();
    let n = usize::try_from(n).unwrap_or(usize::MAX).min(len);
    out.array(n);
    if n == 0 {
        return 0;
    }
    let start = if front { 0 } else { len - 1 };
    for v in list.iter_from(start, front).take(n) {
        bulk_val(out, v);
    }
    list.delete_range(if front { 0 } else { len - n }, n);
    n
}

/// LLEN key
fn llen(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let n = c.keys().read::<Quicklist>(&a[1])?.map_or(0, |l| l.len());
    c.out.int(n as i64);
    Ok(())
}

/// LRANGE key start stop
fn lrange(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let start = int_arg(&a[2])?;
    let stop = int_arg(&a[3])?;
    let mut k = c.st.keys(c.cl.db, c.now);
    let Some(list) = k.read::<Quicklist>(&a[1])? else {
        c.out.array(0);
        return Ok(());
    };
    match storage::quicklist::normalize_range(start, stop, list.len()) {
        None => c.out.array(0),
        Some((s, e)) => {
            c.out.array(e - s + 1);
            let mut left = e - s + 1;
            list.walk(s, true, |v| {
                bulk_val(c.out, v);
                left -= 1;
                left > 0
            });
        }
    }
    Ok(())
}

/// LINDEX key index
fn lindex(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let mut k = c.st.keys(c.cl.db, c.now);
    let Some(list) = k.read::<Quicklist>(&a[1])? else {
        c.out.null();
        return Ok(());
    };
    let index = int_arg(&a[2])?;
    if list.get_with(index, |v| bulk_val(c.out, v)).is_none() {
        c.out.null();
    }
    Ok(())
}

/// LSET key index element
fn lset(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    op_lset(&mut c.keys(), &a[1], &a[2], &a[3])?;
    c.st.changed(class::LIST, "lset", c.cl.db, &a[1]);
    c.out.ok();
    Ok(())
}

/// Replaces the element at `index` (checked once the list is found).
fn op_lset(k: &mut Keys, key: &[u8], index: &[u8], elem: &[u8]) -> CmdResult {
    let Some(list) = k.write::<Quicklist>(key)? else {
        return Err(Error::NoSuchKey);
    };
    if !list.set(int_arg(index)?, elem) {
        return Err(Error::OutOfRange);
    }
    Ok(())
}

/// LINSERT key <BEFORE | AFTER> pivot element
fn linsert(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let after = if is(&a[2], "after") {
        true
    } else if is(&a[2], "before") {
        false
    } else {
        return Err(Error::Syntax);
    };
    let len = op_linsert(&mut c.keys(), &a[1], &a[3], &a[4], after)?;
    if len > 0 {
        c.st.changed(class::LIST, "linsert", c.cl.db, &a[1]);
    }
    c.out.int(len);
    Ok(())
}

/// Inserts `elem` next to the first `pivot`; the list's length, 0 if
/// there is no list, -1 if no pivot.
fn op_linsert(
    k: &mut Keys,
    key: &[u8],
    pivot: &[u8],
    elem: &[u8],
    after: bool,
) -> Result<i64, Error> {
    let Some(list) = k.write::<Quicklist>(key)? else {
        return Ok(0);
    };
    if !list.insert(pivot, elem, after) {
        return Ok(-1);
    }
    Ok(list.len() as i64)
}

/// LREM key count element
fn lrem(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let count = int_arg(&a[2])?;
    let db = c.cl.db;
    let mut k = c.keys();
    let removed = match k.write::<Quicklist>(&a[1])? {
        Some(list) => list.remove(count, &a[3]),
        None => 0,
    };
    if removed > 0 {
        changed_n(c, "lrem", db, &a[1], removed);
        c.st.delete_if_empty(db, &a[1]);
    }
    c.out.int(removed as i64);
    Ok(())
}

/// LTRIM key start stop
fn ltrim(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let start = int_arg(&a[2])?;
    let stop = int_arg(&a[3])?;
    let db = c.cl.db;
    let mut k = c.keys();
    if let Some(list) = k.write::<Quicklist>(&a[1])? {
        let before = list.len();
        list.trim(start, stop);
        let removed = before - list.len();
        changed_n(c, "ltrim", db, &a[1], removed);
        c.st.delete_if_empty(db, &a[1]);
    }
    c.out.ok();
    Ok(())
}

/// LPOS key element [RANK rank] [COUNT num-matches] [MAXLEN len]
fn lpos(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let mut rank: i64 = 1;
    let mut count: Option<i64> = None;
    let mut maxlen: i64 = 0;
    let mut i = 3;
    while i < a.len() {
        let Some(v) = a.get(i + 1) else {
            return Err(Error::Syntax);
        };
        if is(&a[i], "rank") {
            rank = int_arg(v)?;
            if rank == 0 {
                return Err(Error::other(
                    "ERR RANK can't be zero: use 1 to start from the first match, 2 from the second ... or use negative to start from the end of the list",
                ));
            }
        } else if is(&a[i], "count") {
            count = Some(
                storage::num::parse_i64(v)
                    .filter(|&n| n >= 0)
                    .ok_or_else(|| Error::other("ERR COUNT can't be negative"))?,
            );
        } else if is(&a[i], "maxlen") {
            maxlen = storage::num::parse_i64(v)
                .filter(|&n| n >= 0)
                .ok_or_else(|| Error::other("ERR MAXLEN can't be negative"))?;
        } else {
            return Err(Error::Syntax);
        }
        i += 2;
    }
    let mut k = c.st.keys(c.cl.db, c.now);
    let Some(list) = k.read::<Quicklist>(&a[1])? else {
        match count {
            Some(_) => c.out.array(0),
            None => c.out.null(),
        }
        return Ok(());
    };
    // Redis negates the rank to get the skip count; i64::MIN stays negative
    // there, so every match qualifies: the same as rank -1.
    let forward = rank > 0;
    let skip = rank.unsigned_abs().saturating_sub(1);
    let skip = if rank == i64::MIN { 0 } else { skip };
    let limit = match count {
        None | Some(0) => u64::MAX,
        Some(n) => n as u64,
    };
    let maxlen = if maxlen == 0 {
        usize::MAX
    } else {
        usize::try_from(maxlen).unwrap_or(usize::MAX)
    };
    let len = list.len();
    let mut found: Vec<i64> = Vec::new();
    let mut seen: u64 = 0;
    if len > 0 {
        let start = if forward { 0 } else { len - 1 };
        for (k, v) in list.iter_from(start, forward).take(maxlen).enumerate() {
            if !v.eq_bytes(&a[2]) {
                continue;
            }
            seen += 1;
            if seen > skip {
                let idx = if forward { k } else { len - 1 - k };
                found.push(idx as i64);
                if found.len() as u64 >= limit {
                    break;
                }
            }
        }
    }
    match count {
        Some(_) => {
            c.out.array(found.len());
            for i in found {
                c.out.int(i);
            }
        }
        None => match found.first() {
            Some(&i) => c.out.int(i),
            None => c.out.null(),
        },
    }
    Ok(())
}

/// LMOVE source destination <LEFT | RIGHT> <LEFT | RIGHT>
fn lmove(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let from = end_arg(&a[3])?;
    let to = end_arg(&a[4])?;
    move_one(c, &a[1], &a[2], from, to)
}

/// RPOPLPUSH source destination
fn rpoplpush(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    move_one(c, &a[1], &a[2], false, true)
}

/// Pops from `src` and pushes onto `dst`, replying with the element (null
/// if `src` is absent).
fn move_one(c: &mut Ctx, src: &[u8], dst: &[u8], from: bool, to: bool) -> CmdResult {
    let (db, fill) = (c.cl.db, c.st.tun.list_fill);
    let Some(v) = op_move(&mut c.keys(), src, dst, from, to, fill)? else {
        c.out.null();
        return Ok(());
    };
    // One change in all for the dirty counter.
    c.st.changed(class::LIST, push_event(to), db, dst);
    changed_n(c, pop_event(from), db, src, 0);
    c.st.delete_if_empty(db, src);
    c.out.bulk(&v);
    Ok(())
}

/// Moves one element from an end of `src` to an end of `dst` (created if
/// absent); `dst`'s type is checked before anything moves. The element,
/// `None` if `src` is absent; an emptied `src` is left to the caller.
pub fn op_move(
    k: &mut Keys,
    src: &[u8],
    dst: &[u8],
    from: bool,
    to: bool,
    fill: i32,
) -> Result<Option<Vec<u8>>, Error> {
    // Write lookups, as in Redis: no keyspace hit/miss statistics.
    if k.write::<Quicklist>(src)?.is_none() {
        return Ok(None);
    }
    k.write::<Quicklist>(dst)?;
    let Some(list) = k.write::<Quicklist>(src)? else {
        return Ok(None);
    };
    let Some(v) = (if from {
        list.pop_front()
    } else {
        list.pop_back()
    }) else {
        return Ok(None);
    };
    // With src == dst the list is still there (maybe empty for a moment).
    let dl = k.write_or_create::<Quicklist>(dst, new_list(fill))?;
    if to {
        dl.push_front(&v);
    } else {
        dl.push_back(&v);
    }
    Ok(Some(v))
}

/// BLPOP key [key ...] timeout
fn blpop(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    bpop(c, a, true)
}

/// BRPOP key [key ...] timeout
fn brpop(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    bpop(c, a, false)
}

fn bpop(c: &mut Ctx, a: &[Bytes], front: bool) -> CmdResult {
    let keys = &a[1..a.len() - 1];
    let deadline = timeout_arg(&a[a.len() - 1], c.now)?;
    let db = c.cl.db;
    for key in keys {
        let Some(v) = op_pop(&mut c.keys(), key, front)? else {
            continue;
        };
        c.st.changed(class::LIST, pop_event(front), db, key);
        c.st.delete_if_empty(db, key);
        c.out.array(2);
        c.out.bulk(key);
        c.out.bulk(&v);
        c.propagate_as([pop_cmd(front), key.clone()]);
        return Ok(());
    }
    if c.may_block() {
        c.block(BlockKind::List, keys, deadline, a);
    } else {
        c.out.null_array();
    }
    Ok(())
}

/// Pops one element from an end of the list at `key`; an emptied list is
/// left to the caller.
fn op_pop(k: &mut Keys, key: &[u8], front: bool) -> Result<Option<Vec<u8>>, Error> {
    let Some(list) = k.write::<Quicklist>(key)? else {
        return Ok(None);
    };
    Ok(if front {
        list.pop_front()
    } else {
        list.pop_back()
    })
}

/// BRPOPLPUSH source destination timeout
fn brpoplpush(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    bmove(c, a, false, true, &a[3])?;
    c.propagate_as([Bytes::from_static(b"RPOPLPUSH"), a[1].clone(), a[2].clone()]);
    Ok(())
}

/// BLMOVE source destination <LEFT | RIGHT> <LEFT | RIGHT> timeout
fn blmove(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let from = end_arg(&a[3])?;
    let to = end_arg(&a[4])?;
    bmove(c, a, from, to, &a[5])?;
    let lmove = Bytes::from_static(b"LMOVE");
    c.propagate_as([
        lmove,
        a[1].clone(),
        a[2].clone(),
        a[3].clone(),
        a[4].clone(),
    ]);
    Ok(())
}

/// The non-blocking pop a blocking one propagates as.
fn pop_cmd(front: bool) -> Bytes {
    Bytes::from_static(if front { b"LPOP" } else { b"RPOP" })
}

fn bmove(c: &mut Ctx, a: &[Bytes], from: bool, to: bool, timeout: &[u8]) -> CmdResult {
    let deadline = timeout_arg(timeout, c.now)?;
    if c.keys().write::<Quicklist>(&a[1])?.is_some() {
        return move_one(c, &a[1], &a[2], from, to);
    }
    if c.may_block() {
        c.block(BlockKind::List, &a[1..2], deadline, a);
    } else {
        c.out.null();
    }
    Ok(())
}

/// LMPOP/BLMPOP's arguments from `numkeys` (at `at`) on: the keys, the
/// end to pop from, and the count.
fn mpop_args(a: &[Bytes], at: usize) -> Result<(&[Bytes], bool, i64), Error> {
    let numkeys = storage::num::parse_i64(&a[at])
        .filter(|&n| n > 0)
        .ok_or_else(|| Error::other("ERR numkeys should be greater than 0"))?;
    let first = at + 1;
    // The end keyword must follow the keys.
    if numkeys >= (a.len() - first) as i64 {
        return Err(Error::Syntax);
    }
    let where_at = first + numkeys as usize;
    let front = end_arg(&a[where_at])?;
    let mut count = None;
    let mut i = where_at + 1;
    while i < a.len() {
        match a.get(i + 1) {
            Some(v) if is(&a[i], "count") && count.is_none() => {
                count = Some(
                    storage::num::parse_i64(v)
                        .filter(|&n| n > 0)
                        .ok_or_else(|| Error::other("ERR count should be greater than 0"))?,
                );
                i += 2;
            }
            _ => return Err(Error::Syntax),
        }
    }
    Ok((&a[first..where_at], front, count.unwrap_or(1)))
}

/// Pops up to `count` from the first non-empty list among `keys`, replying
/// `[key, [elements]]`; false (nothing written) if all are empty.
fn mpop_from(c: &mut Ctx, keys: &[Bytes], front: bool, count: i64) -> Result<bool, Error> {
    let db = c.cl.db;
    for key in keys {
        let mut k = c.st.keys(db, c.now);
        let Some(list) = k.write::<Quicklist>(key)? else {
            continue;
        };
        if list.is_empty() {
            continue;
        }
        c.out.array(2);
        c.out.bulk(key);
        let n = pop_many(c.out, list, front, count);
        changed_n(c, pop_event(front), db, key, n);
        c.st.delete_if_empty(db, key);
        c.propagate_as([pop_cmd(front), key.clone(), int(n as i64)]);
        return Ok(true);
    }
    Ok(false)
}

/// LMPOP numkeys key [key ...] <LEFT | RIGHT> [COUNT count]
fn lmpop(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let (keys, front, count) = mpop_args(a, 1)?;
    if !mpop_from(c, keys, front, count)? {
        c.out.null_array();
    }
    Ok(())
}

/// BLMPOP timeout numkeys key [key ...] <LEFT | RIGHT> [COUNT count]
fn blmpop(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let (keys, front, count) = mpop_args(a, 2)?;
    let deadline = timeout_arg(&a[1], c.now)?;
    if mpop_from(c, keys, front, count)? {
        return Ok(());
    }
    if c.may_block() {
        c.block(BlockKind::List, keys, deadline, a);
    } else {
        c.out.null_array();
    }
    Ok(())
}
