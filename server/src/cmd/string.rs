//! String commands.

use super::{int_arg, is, norm_range, Ctx, Handler};
use crate::core::config::class;
use crate::core::error::{CmdResult, Error, NOT_FLOAT, NOT_INTEGER};
use crate::core::propagate::int;
use crate::state::shard::Keys;
use bytes::Bytes;
use storage::num::LDouble;
use storage::{CBytes, StrValue, Value};

pub static HANDLERS: &[(&str, Handler)] = &[
    ("get", get),
    ("set", set),
    ("setnx", setnx),
    ("setex", setex),
    ("psetex", psetex),
    ("getset", getset),
    ("getdel", getdel),
    ("getex", getex),
    ("mget", mget),
    ("mset", mset),
    ("msetnx", msetnx),
    ("append", append),
    ("strlen", strlen),
    ("getrange", getrange),
    ("substr", getrange),
    ("setrange", setrange),
    ("incr", incr),
    ("decr", decr),
    ("incrby", incrby),
    ("decrby", decrby),
    ("incrbyfloat", incrbyfloat),
    ("lcs", lcs),
];

/// Writes a string value as a bulk reply.
pub fn reply_str(c: &mut Ctx, s: &StrValue) {
    c.out.bulk(s.as_bytes(&mut itoa::Buffer::new()));
}

/// `ERR string exceeds maximum allowed size (proto-max-bulk-len)` unless
/// `a + b` bytes fit.
pub fn check_len(c: &Ctx, a: u64, b: u64) -> CmdResult {
    match a.checked_add(b) {
        Some(t) if t <= c.st.tun.max_bulk.max(0) as u64 => Ok(()),
        _ => Err(storage::Error::StringTooLong.into()),
    }
}

/// GET key
fn get(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let mut k = c.st.keys(c.cl.db, c.now);
    match k.read::<StrValue>(&a[1])? {
        Some(s) => c.out.bulk(s.as_bytes(&mut itoa::Buffer::new())),
        None => c.out.null(),
    }
    Ok(())
}

/// Expiry options shared by SET and GETEX.
#[derive(Clone, Copy, PartialEq)]
pub enum Ttl {
    None,
    Keep,
    Persist,
    /// Absolute unix time in ms.
    At(i64),
}

/// Converts EX/PX/EXAT/PXAT's argument to an absolute ms time, refusing
/// non-positive values and overflow with `invalid expire time in '<cmd>'`.
pub fn ttl_arg(kind: &[u8], arg: &[u8], now: i64, cmd: &'static str) -> Result<i64, Error> {
    let n = int_arg(arg)?;
    if n <= 0 {
        return Err(Error::InvalidExpire(cmd));
    }
    let ms = if is(kind, "ex") || is(kind, "exat") {
        n.checked_mul(1000).ok_or(Error::InvalidExpire(cmd))?
    } else {
        n
    };
    if is(kind, "ex") || is(kind, "px") {
        ms.checked_add(now).ok_or(Error::InvalidExpire(cmd))
    } else {
        Ok(ms)
    }
}

/// SET's and GETEX's options after the fixed arguments, with Redis's
/// conflict rules: a repeated option is accepted (the last time wins), two
/// different expiry options are a syntax error.
#[derive(Default)]
struct ExtArgs {
    nx: bool,
    xx: bool,
    get: bool,
    keepttl: bool,
    persist: bool,
    /// Index of the EX/PX/EXAT/PXAT keyword; its value follows it.
    expire: Option<usize>,
}

fn parse_ext(a: &[Bytes], from: usize, set_cmd: bool) -> Result<ExtArgs, Error> {
    let mut e = ExtArgs::default();
    let mut i = from;
    while i < a.len() {
        let o = &a[i];
        let has_next = i + 1 < a.len();
        let ttl_kw = ["ex", "px", "exat", "pxat"].into_iter().find(|k| is(o, k));
        let other_ttl = |k: &str| e.expire.is_some_and(|j| !is(&a[j], k));
        if set_cmd && is(o, "nx") && !e.xx {
            e.nx = true;
        } else if set_cmd && is(o, "xx") && !e.nx {
            e.xx = true;
        } else if set_cmd && is(o, "get") {
            e.get = true;
        } else if set_cmd && is(o, "keepttl") && !e.persist && e.expire.is_none() {
            e.keepttl = true;
        } else if !set_cmd && is(o, "persist") && !e.keepttl && e.expire.is_none() {
            e.persist = true;
        } else if let Some(k) = ttl_kw.filter(|k| !e.keepttl && !e.persist && !other_ttl(k)) {
            if !has_next {
                return Err(Error::Syntax);
            }
            let _ = k;
            e.expire = Some(i);
            i += 1;
        } else {
            return Err(Error::Syntax);
        }
        i += 1;
    }
    Ok(e)
}

/// SET key value [NX | XX] [GET] [EX seconds | PX milliseconds |
///   EXAT unix-time-seconds | PXAT unix-time-milliseconds | KEEPTTL]
fn set(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let e = parse_ext(a, 3, true)?;
    let ttl = match e.expire {
        Some(j) => Ttl::At(ttl_arg(&a[j], &a[j + 1], c.now, "set")?),
        None if e.keepttl => Ttl::Keep,
        None => Ttl::None,
    };
    set_generic(c, &a[1], &a[2], e.nx, e.xx, e.get, ttl)?;
    if e.expire.is_some() {
        propagate_set_pxat(c, &a[1], &a[2]);
    } else if e.get {
        // GET reads: the write is the rest.
        let write = a
            .iter()
            .enumerate()
            .filter(|&(i, o)| i < 3 || !is(o, "get"));
        c.propagate_as(write.map(|(_, o)| o.clone()));
    }
    Ok(())
}

/// A write with an expiry propagates its absolute time, so a replay
/// later expires the key at the same moment: `SET key value PXAT t`.
fn propagate_set_pxat(c: &mut Ctx, key: &Bytes, val: &Bytes) {
    if !c.propagating() {
        return;
    }
    let mut op = vec![Bytes::from_static(b"SET"), key.clone(), val.clone()];
    if let Some(t) = c.keys().db().expire_at(key) {
        op.extend([Bytes::from_static(b"PXAT"), int(t)]);
    }
    c.propagate_as(op);
}

/// The common part of SET, SETNX, SETEX and PSETEX.
fn set_generic(
    c: &mut Ctx,
    key: &[u8],
    val: &[u8],
    nx: bool,
    xx: bool,
    get: bool,
    ttl: Ttl,
) -> CmdResult {
    let (written, old) = op_set(&mut c.keys(), key, val, nx, xx, get, ttl)?;
    if written {
        let db = c.cl.db;
        c.st.changed(class::STRING, "set", db, key);
        if let Ttl::At(_) = ttl {
            c.st.notify(class::GENERIC, "expire", db, key);
        }
    }
    match (get, old) {
        (true, Some(v)) => c.out.bulk(&v),
        (false, None) if written => c.out.ok(),
        _ => c.out.null(),
    }
    Ok(())
}

/// SET's operation: whether it wrote, and with `get` the old value.
#[inline]
pub fn op_set(
    k: &mut Keys,
    key: &[u8],
    val: &[u8],
    nx: bool,
    xx: bool,
    get: bool,
    ttl: Ttl,
) -> Result<(bool, Option<Vec<u8>>), Error> {
    // With GET the old value is read as GET reads it (hits/misses counted).
    let old = if get {
        k.read::<StrValue>(key)?.map(|s| s.to_vec())
    } else {
        k.expire_if_needed(key);
        None
    };
    let exists = (nx || xx) && k.db().contains(key);
    if (nx && exists) || (xx && !exists) {
        return Ok((false, old));
    }
    k.set(key, Value::str(val), ttl == Ttl::Keep);
    if let Ttl::At(t) = ttl {
        k.db().set_expire(key, t);
    }
    Ok((true, old))
}

/// SETNX key value
fn setnx(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let set = op_setnx(&mut c.keys(), &a[1], &a[2]);
    if set {
        c.st.changed(class::STRING, "set", c.cl.db, &a[1]);
    }
    c.out.int(set as i64);
    Ok(())
}

/// Sets `key` unless it exists; whether it did.
fn op_setnx(k: &mut Keys, key: &[u8], val: &[u8]) -> bool {
    if k.lookup_write(key).is_some() {
        return false;
    }
    k.db().add(key, Value::str(val));
    true
}

/// SETEX key seconds value
fn setex(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let at = ttl_arg(b"ex", &a[2], c.now, "setex")?;
    set_generic(c, &a[1], &a[3], false, false, false, Ttl::At(at))?;
    propagate_set_pxat(c, &a[1], &a[3]);
    Ok(())
}

/// PSETEX key milliseconds value
fn psetex(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let at = ttl_arg(b"px", &a[2], c.now, "psetex")?;
    set_generic(c, &a[1], &a[3], false, false, false, Ttl::At(at))?;
    propagate_set_pxat(c, &a[1], &a[3]);
    Ok(())
}

/// GETSET key value
fn getset(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    set_generic(c, &a[1], &a[2], false, false, true, Ttl::None)?;
    c.propagate_as([Bytes::from_static(b"SET"), a[1].clone(), a[2].clone()]);
    Ok(())
}

/// GETDEL key
fn getdel(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let Some(v) = op_getdel(&mut c.keys(), &a[1])? else {
        c.out.null();
        return Ok(());
    };
    if let Value::Str(s) = &v {
        c.out.bulk(s.as_bytes(&mut itoa::Buffer::new()));
    }
    c.st.changed(class::GENERIC, "del", c.cl.db, &a[1]);
    c.propagate_as([Bytes::from_static(b"DEL"), a[1].clone()]);
    Ok(())
}

/// Removes the string at `key` and hands it over.
fn op_getdel(k: &mut Keys, key: &[u8]) -> Result<Option<Value>, Error> {
    if k.read::<StrValue>(key)?.is_none() {
        return Ok(None);
    }
    Ok(k.db().remove(key))
}

/// GETEX key [EX seconds | PX milliseconds | EXAT unix-time-seconds |
///   PXAT unix-time-milliseconds | PERSIST]
fn getex(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let e = parse_ext(a, 2, false)?;
    let mut k = c.keys();
    let Some(s) = k.read::<StrValue>(&a[1])? else {
        c.out.null();
        return Ok(());
    };
    let val = s.to_vec();
    // The time is checked only once the key is known to exist, as in Redis.
    let at = match e.expire {
        Some(j) => Some(ttl_arg(&a[j], &a[j + 1], c.now, "getex")?),
        None => None,
    };
    c.out.bulk(&val);
    if let Some(event) = op_set_ttl(&mut c.keys(), &a[1], at, e.persist) {
        c.st.changed(class::GENERIC, event, c.cl.db, &a[1]);
    }
    c.propagate_expiry(&a[1], &[]);
    Ok(())
}

/// Sets the expiry of `key` to `at` (deleting it if that has passed), or
/// with `persist` removes it; the event of what changed.
fn op_set_ttl(k: &mut Keys, key: &[u8], at: Option<i64>, persist: bool) -> Option<&'static str> {
    if let Some(at) = at {
        if k.already_expired(at) {
            k.db().remove(key);
            return Some("del");
        }
        k.db().set_expire(key, at);
        return Some("expire");
    }
    (persist && k.db().persist(key)).then_some("persist")
}

/// MGET key [key ...]
fn mget(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    c.out.array(a.len() - 1);
    let mut k = c.st.keys(c.cl.db, c.now);
    for key in &a[1..] {
        match k.lookup_read(key) {
            Some(Value::Str(s)) => c.out.bulk(s.as_bytes(&mut itoa::Buffer::new())),
            #[allow(unreachable_patterns)]
            _ => c.out.null(),
        }
    }
    Ok(())
}

/// MSET key value [key value ...]
fn mset(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    if a.len().is_multiple_of(2) {
        return Err(Error::Arity("mset".into()));
    }
    mset_all(c, a);
    c.out.ok();
    Ok(())
}

fn mset_all(c: &mut Ctx, a: &[Bytes]) {
    // Each key's event follows its own write (and its expiry's event).
    for kv in a[1..].chunks_exact(2) {
        let mut k = c.keys();
        k.expire_if_needed(&kv[0]);
        k.set(&kv[0], Value::str(&kv[1]), false);
        c.st.changed(class::STRING, "set", c.cl.db, &kv[0]);
    }
}

/// MSETNX key value [key value ...]
fn msetnx(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    if a.len().is_multiple_of(2) {
        return Err(Error::Arity("msetnx".into()));
    }
    let mut k = c.keys();
    if a[1..]
        .chunks_exact(2)
        .any(|kv| k.lookup_write(&kv[0]).is_some())
    {
        c.out.int(0);
        return Ok(());
    }
    mset_all(c, a);
    c.out.int(1);
    Ok(())
}

/// APPEND key value
fn append(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let max = c.st.tun.max_bulk.max(0) as u64;
    let len = op_append(&mut c.keys(), &a[1], &a[2], max)?;
    c.st.changed(class::STRING, "append", c.cl.db, &a[1]);
    c.out.int(len as i64);
    Ok(())
}

/// Appends `val` to the string at `key` (created if absent); its length.
fn op_append(k: &mut Keys, key: &[u8], val: &[u8], max: u64) -> Result<usize, Error> {
    let Some(s) = k.write::<StrValue>(key)? else {
        k.db().add(key, Value::str(val));
        return Ok(val.len());
    };
    if s.len() as u64 + val.len() as u64 > max {
        return Err(storage::Error::StringTooLong.into());
    }
    let v = s.make_raw();
    v.extend_from_slice(val);
    Ok(v.len())
}

/// STRLEN key
fn strlen(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let mut k = c.st.keys(c.cl.db, c.now);
    let n = k.read::<StrValue>(&a[1])?.map_or(0, |s| s.len());
    c.out.int(n as i64);
    Ok(())
}

/// GETRANGE key start end (and SUBSTR, its old name)
fn getrange(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let start = int_arg(&a[2])?;
    let end = int_arg(&a[3])?;
    let mut k = c.st.keys(c.cl.db, c.now);
    let Some(s) = k.read::<StrValue>(&a[1])? else {
        c.out.bulk(b"");
        return Ok(());
    };
    let mut buf = itoa::Buffer::new();
    let b = s.as_bytes(&mut buf);
    match norm_range(start, end, b.len() as i64) {
        Some((s, e)) => c.out.bulk(&b[s as usize..=e as usize]),
        None => c.out.bulk(b""),
    }
    Ok(())
}

/// SETRANGE key offset value
fn setrange(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let off = int_arg(&a[2])?;
    if off < 0 {
        return Err(Error::other("ERR offset is out of range"));
    }
    let max = c.st.tun.max_bulk.max(0) as u64;
    let (n, wrote) = op_setrange(&mut c.keys(), &a[1], off as u64, &a[3], max)?;
    if wrote {
        c.st.changed(class::STRING, "setrange", c.cl.db, &a[1]);
    }
    c.out.int(n as i64);
    Ok(())
}

/// Writes `val` at `off` of the string at `key`, zero-padded (created if
/// absent and `val` is not empty); its length and whether it wrote.
fn op_setrange(
    k: &mut Keys,
    key: &[u8],
    off: u64,
    val: &[u8],
    max: u64,
) -> Result<(usize, bool), Error> {
    let exists = match k.write::<StrValue>(key)? {
        None => false,
        Some(s) if val.is_empty() => return Ok((s.len(), false)),
        Some(_) => true,
    };
    if !exists && val.is_empty() {
        return Ok((0, false));
    }
    match off.checked_add(val.len() as u64) {
        Some(t) if t <= max => {}
        _ => return Err(storage::Error::StringTooLong.into()),
    }
    if !exists {
        k.db().add(key, Value::Str(StrValue::raw(Vec::new())));
    }
    let Some(s) = k.write::<StrValue>(key)? else {
        return Ok((0, false));
    };
    let v = s.make_raw();
    let off = off as usize;
    if v.len() < off + val.len() {
        v.resize(off + val.len(), 0);
    }
    v[off..off + val.len()].copy_from_slice(val);
    Ok((v.len(), true))
}

/// The shared body of INCR, DECR, INCRBY and DECRBY.
fn incr_by(c: &mut Ctx, key: &[u8], by: i64) -> CmdResult {
    let n = op_incr_by(&mut c.keys(), key, by)?;
    c.st.changed(class::STRING, "incrby", c.cl.db, key);
    c.out.int(n);
    Ok(())
}

/// Adds `by` to the integer at `key` (0 if absent); the result.
pub fn op_incr_by(k: &mut Keys, key: &[u8], by: i64) -> Result<i64, Error> {
    if let Some(s) = k.write::<StrValue>(key)? {
        let cur = s.as_i64().ok_or(NOT_INTEGER)?;
        let n = cur
            .checked_add(by)
            .ok_or(Error::Storage(storage::Error::Overflow))?;
        *s = StrValue::Int(n);
        return Ok(n);
    }
    k.db().add(key, Value::Str(StrValue::Int(by)));
    Ok(by)
}

/// INCR key
fn incr(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    incr_by(c, &a[1], 1)
}

/// DECR key
fn decr(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    incr_by(c, &a[1], -1)
}

/// INCRBY key increment
fn incrby(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let by = int_arg(&a[2])?;
    incr_by(c, &a[1], by)
}

/// DECRBY key decrement
fn decrby(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let by = int_arg(&a[2])?;
    let neg = by
        .checked_neg()
        .ok_or_else(|| Error::other("ERR decrement would overflow"))?;
    incr_by(c, &a[1], neg)
}

/// INCRBYFLOAT key increment
fn incrbyfloat(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let text = op_incrbyfloat(&mut c.keys(), &a[1], &a[2])?;
    c.st.changed(class::STRING, "incrbyfloat", c.cl.db, &a[1]);
    c.out.bulk(text.as_bytes());
    // The result, not the increment: a replay adds no rounding of its own.
    if c.propagating() {
        let v = Bytes::copy_from_slice(text.as_bytes());
        c.propagate_as([
            Bytes::from_static(b"SET"),
            a[1].clone(),
            v,
            Bytes::from_static(b"KEEPTTL"),
        ]);
    }
    Ok(())
}

/// Adds the number `by` to the one at `key` (0 if absent); the result's
/// text.
fn op_incrbyfloat(k: &mut Keys, key: &[u8], by: &[u8]) -> Result<String, Error> {
    let cur = match k.write::<StrValue>(key)? {
        None => LDouble::from_i64(0),
        Some(StrValue::Int(n)) => LDouble::from_i64(*n),
        Some(s) => LDouble::parse(&s.to_vec()).ok_or(NOT_FLOAT)?,
    };
    let by = LDouble::parse(by).ok_or(NOT_FLOAT)?;
    let sum = match cur.add(by) {
        Some(s) if !s.is_infinite() => s,
        _ => return Err(storage::Error::NanOrInfinity.into()),
    };
    let text = sum.to_human();
    // Redis stores the formatted result as a plain string, never `int`.
    let v = Value::Str(StrValue::Emb(CBytes::new(text.as_bytes())));
    k.set(key, v, true);
    Ok(text)
}

/// One common substring found by LCS IDX: start offsets in both strings
/// and its length.
#[derive(Debug, PartialEq)]
pub struct LcsMatch {
    pub a: usize,
    pub b: usize,
    pub len: usize,
}

/// The longest common subsequence of `a` and `b`, and the runs it is made
/// of, last run first (the order Redis reports them).
pub fn lcs_compute(a: &[u8], b: &[u8]) -> (Vec<u8>, Vec<LcsMatch>) {
    let w = b.len() + 1;
    let mut dp = vec![0u32; (a.len() + 1) * w];
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            dp[i * w + j] = if a[i - 1] == b[j - 1] {
                dp[(i - 1) * w + j - 1] + 1
            } else {
                dp[(i - 1) * w + j].max(dp[i * w + j - 1])
            };
        }
    }
    let n = dp[a.len() * w + b.len()] as usize;
    let mut out = vec![0u8; n];
    let mut idx = n;
    let mut matches = Vec::new();
    let (mut i, mut j) = (a.len(), b.len());
    let mut cur: Option<LcsMatch> = None;
    while i > 0 && j > 0 {
        if a[i - 1] == b[j - 1] {
            idx -= 1;
            out[idx] = a[i - 1];
            match &mut cur {
                Some(m) if m.a == i && m.b == j => {
                    m.a -= 1;
                    m.b -= 1;
                    m.len += 1;
                }
                _ => {
                    if let Some(m) = cur.take() {
                        matches.push(m);
                    }
                    cur = Some(LcsMatch {
                        a: i - 1,
                        b: j - 1,
                        len: 1,
                    });
                }
            }
            i -= 1;
            j -= 1;
        } else if dp[(i - 1) * w + j] > dp[i * w + j - 1] {
            i -= 1;
        } else {
            j -= 1;
        }
    }
    if let Some(m) = cur {
        matches.push(m);
    }
    (out, matches)
}

/// LCS key1 key2 [LEN] [IDX] [MINMATCHLEN min-match-len] [WITHMATCHLEN]
fn lcs(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let mut strs = Vec::with_capacity(2);
    let mut k = c.keys();
    for key in &a[1..3] {
        strs.push(match k.lookup_read(key) {
            None => Vec::new(),
            Some(Value::Str(s)) => s.to_vec(),
            #[allow(unreachable_patterns)]
            Some(_) => {
                return Err(Error::other(
                    "ERR The specified keys must contain string values",
                ))
            }
        });
    }
    let (mut len, mut idx, mut withlen, mut minlen) = (false, false, false, 0i64);
    let mut i = 3;
    while i < a.len() {
        if is(&a[i], "idx") {
            idx = true;
        } else if is(&a[i], "len") {
            len = true;
        } else if is(&a[i], "withmatchlen") {
            withlen = true;
        } else if is(&a[i], "minmatchlen") && i + 1 < a.len() {
            minlen = int_arg(&a[i + 1])?.max(0);
            i += 1;
        } else {
            return Err(Error::Syntax);
        }
        i += 1;
    }
    if len && idx {
        return Err(Error::other(
            "ERR If you want both the length and indexes, please just use IDX.",
        ));
    }
    let (x, y) = (&strs[0], &strs[1]);
    let cells = (x.len() as u128 + 1) * (y.len() as u128 + 1) * 4;
    if cells > c.st.tun.max_bulk.max(0) as u128 {
        return Err(Error::other(
            "ERR Insufficient memory, transient memory for LCS exceeds proto-max-bulk-len",
        ));
    }
    let (common, matches) = lcs_compute(x, y);
    if !idx {
        if len {
            c.out.int(common.len() as i64);
        } else {
            c.out.bulk(&common);
        }
        return Ok(());
    }
    let shown: Vec<&LcsMatch> = matches.iter().filter(|m| m.len as i64 >= minlen).collect();
    c.out.map(2);
    c.out.bulk(b"matches");
    c.out.array(shown.len());
    for m in shown {
        c.out.array(if withlen { 3 } else { 2 });
        c.out.array(2);
        c.out.int(m.a as i64);
        c.out.int((m.a + m.len - 1) as i64);
        c.out.array(2);
        c.out.int(m.b as i64);
        c.out.int((m.b + m.len - 1) as i64);
        if withlen {
            c.out.int(m.len as i64);
        }
    }
    c.out.bulk(b"len");
    c.out.int(common.len() as i64);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lcs_runs_last_first() {
        let (s, m) = lcs_compute(b"ohmytext", b"mynewtext");
        assert_eq!(s, b"mytext");
        assert_eq!(
            m,
            vec![
                LcsMatch { a: 4, b: 5, len: 4 },
                LcsMatch { a: 2, b: 0, len: 2 }
            ]
        );
        assert_eq!(lcs_compute(b"", b"abc").0, b"");
    }
}
