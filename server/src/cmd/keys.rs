//! Generic keyspace commands: DEL UNLINK EXISTS TYPE RENAME RENAMENX COPY
//! MOVE EXPIRE PEXPIRE EXPIREAT PEXPIREAT TTL PTTL EXPIRETIME PEXPIRETIME
//! PERSIST TOUCH KEYS SCAN RANDOMKEY OBJECT DBSIZE FLUSHDB FLUSHALL SWAPDB.

use super::scan::{cursor_arg, reply_cursor, scan_opts};
use super::{int_arg, is, Ctx, Handler};
use crate::core::config::class;
use crate::core::error::{CmdResult, Error};
use crate::state::lazyfree::lazy_free;
use bytes::Bytes;
use storage::CBytes;

pub static HANDLERS: &[(&str, Handler)] = &[
    ("del", del),
    ("unlink", unlink),
    ("exists", exists),
    ("type", type_cmd),
    ("rename", rename),
    ("renamenx", renamenx),
    ("copy", copy),
    ("move", move_cmd),
    ("expire", expire),
    ("pexpire", pexpire),
    ("expireat", expireat),
    ("pexpireat", pexpireat),
    ("ttl", ttl),
    ("pttl", pttl),
    ("expiretime", expiretime),
    ("pexpiretime", pexpiretime),
    ("persist", persist),
    ("touch", touch),
    ("keys", keys),
    ("scan", scan),
    ("randomkey", randomkey),
    ("object|encoding", object_encoding),
    ("object|refcount", object_refcount),
    ("object|idletime", object_idletime),
    ("object|freq", object_freq),
    ("object|help", object_help),
    ("dbsize", dbsize),
    ("flushdb", flushdb),
    ("flushall", flushall),
    ("swapdb", swapdb),
];

use crate::state::lazyfree::drop_value;

fn del_generic(c: &mut Ctx, a: &[Bytes], lazy: bool) -> CmdResult {
    let db = c.cl.db;
    let mut n = 0;
    for k in &a[1..] {
        c.st.expire_if_needed(db, k, c.now);
        if let Some(v) = c.st.shard.dbs[db].remove(k) {
            drop_value(v, lazy);
            c.st.changed(class::GENERIC, "del", db, k);
            n += 1;
        }
    }
    c.out.int(n);
    Ok(())
}

/// DEL key [key ...]
fn del(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let lazy = c.st.cfg.lazyfree_lazy_user_del;
    del_generic(c, a, lazy)
}

/// UNLINK key [key ...]
fn unlink(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    del_generic(c, a, true)
}

/// EXISTS key [key ...]
fn exists(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let db = c.cl.db;
    let mut n = 0;
    for k in &a[1..] {
        if c.st.lookup_read_notouch(db, k, c.now).is_some() {
            n += 1;
        }
    }
    c.out.int(n);
    Ok(())
}

/// TYPE key
fn type_cmd(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let t = match c.st.lookup_read_notouch(c.cl.db, &a[1], c.now) {
        Some(v) => v.type_name(),
        None => "none",
    };
    c.out.simple(t);
    Ok(())
}

fn rename_generic(c: &mut Ctx, a: &[Bytes], nx: bool) -> CmdResult {
    let db = c.cl.db;
    let (src, dst) = (&a[1], &a[2]);
    if c.st.lookup_write(db, src, c.now).is_none() {
        return Err(Error::NoSuchKey);
    }
    if src == dst {
        if nx {
            c.out.int(0);
        } else {
            c.out.ok();
        }
        return Ok(());
    }
    if c.st.lookup_write(db, dst, c.now).is_some() {
        if nx {
            c.out.int(0);
            return Ok(());
        }
        if let Some(old) = c.st.shard.dbs[db].remove(dst) {
            drop_value(old, c.st.cfg.lazyfree_lazy_server_del);
        }
    }
    let d = &mut c.st.shard.dbs[db];
    if let Some((_, v, access, exp)) = d.take_entry(src) {
        d.put_entry(CBytes::new(dst), v, access, exp);
    }
    c.st.changed(class::GENERIC, "rename_from", db, src);
    c.st.changed_again(class::GENERIC, "rename_to", db, dst);
    if nx {
        c.out.int(1);
    } else {
        c.out.ok();
    }
    Ok(())
}

/// RENAME key newkey
fn rename(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    rename_generic(c, a, false)
}

/// RENAMENX key newkey
fn renamenx(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    rename_generic(c, a, true)
}

/// A database index argument as COPY and MOVE take it: a 32-bit integer,
/// then in range.
fn db_index(c: &Ctx, arg: &[u8]) -> Result<usize, Error> {
    let n = int_arg(arg)?;
    if n < i32::MIN as i64 || n > i32::MAX as i64 {
        return Err(Error::other(
            "ERR value is out of range, value must between -2147483648 and 2147483647",
        ));
    }
    if n < 0 || n as usize >= c.st.shard.dbs.len() {
        return Err(Error::DbIndexOutOfRange);
    }
    Ok(n as usize)
}

/// COPY source destination [DB destination-db] [REPLACE]
fn copy(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let src_db = c.cl.db;
    let mut dst_db = src_db;
    let mut replace = false;
    let mut i = 3;
    while i < a.len() {
        if is(&a[i], "replace") {
            replace = true;
        } else if is(&a[i], "db") && i + 1 < a.len() {
            dst_db = db_index(c, &a[i + 1])?;
            i += 1;
        } else {
            return Err(Error::Syntax);
        }
        i += 1;
    }
    if c.st.cluster.is_some() && (src_db != 0 || dst_db != 0) {
        return Err(Error::other(
            "ERR Copying to another database is not allowed in cluster mode",
        ));
    }
    let (src, dst) = (&a[1], &a[2]);
    if src == dst && src_db == dst_db {
        return Err(Error::other(
            "ERR source and destination objects are the same",
        ));
    }
    let Some(v) = c.st.lookup_read(src_db, src, c.now).cloned() else {
        c.out.int(0);
        return Ok(());
    };
    let exp = c.st.shard.dbs[src_db].expire_at(src);
    if c.st.lookup_write(dst_db, dst, c.now).is_some() {
        if !replace {
            c.out.int(0);
            return Ok(());
        }
        if let Some(old) = c.st.shard.dbs[dst_db].remove(dst) {
            drop_value(old, c.st.cfg.lazyfree_lazy_server_del);
        }
    }
    let d = &mut c.st.shard.dbs[dst_db];
    d.set_clock(c.now);
    d.add(dst, v);
    if let Some(t) = exp {
        d.set_expire(dst, t);
    }
    c.st.changed(class::GENERIC, "copy_to", dst_db, dst);
    c.out.int(1);
    Ok(())
}

/// MOVE key db
fn move_cmd(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    if c.st.cluster.is_some() {
        return Err(Error::other("ERR MOVE is not allowed in cluster mode"));
    }
    let src_db = c.cl.db;
    let dst_db = db_index(c, &a[2])?;
    if src_db == dst_db {
        return Err(Error::other(
            "ERR source and destination objects are the same",
        ));
    }
    let key = &a[1];
    if c.st.lookup_write(src_db, key, c.now).is_none()
        || c.st.lookup_write(dst_db, key, c.now).is_some()
    {
        c.out.int(0);
        return Ok(());
    }
    if let Some((k, v, access, exp)) = c.st.shard.dbs[src_db].take_entry(key) {
        c.st.shard.dbs[dst_db].put_entry(k, v, access, exp);
    }
    c.st.changed(class::GENERIC, "move_from", src_db, key);
    c.st.changed_again(class::GENERIC, "move_to", dst_db, key);
    c.out.int(1);
    Ok(())
}

const EXPIRE_NX: u8 = 1;
const EXPIRE_XX: u8 = 2;
const EXPIRE_GT: u8 = 4;
const EXPIRE_LT: u8 = 8;

/// The shared body of EXPIRE, PEXPIRE, EXPIREAT and PEXPIREAT: `seconds`
/// says the unit of the argument, `relative` whether it adds to now.
fn expire_generic(
    c: &mut Ctx,
    a: &[Bytes],
    seconds: bool,
    relative: bool,
    name: &'static str,
) -> CmdResult {
    let mut fl = 0u8;
    for o in &a[3..] {
        fl |= if is(o, "nx") {
            EXPIRE_NX
        } else if is(o, "xx") {
            EXPIRE_XX
        } else if is(o, "gt") {
            EXPIRE_GT
        } else if is(o, "lt") {
            EXPIRE_LT
        } else {
            return Err(Error::other(format!(
                "ERR Unsupported option {}",
                String::from_utf8_lossy(o)
            )));
        };
    }
    if fl & EXPIRE_NX != 0 && fl & (EXPIRE_XX | EXPIRE_GT | EXPIRE_LT) != 0 {
        return Err(Error::other(
            "ERR NX and XX, GT or LT options at the same time are not compatible",
        ));
    }
    if fl & EXPIRE_GT != 0 && fl & EXPIRE_LT != 0 {
        return Err(Error::other(
            "ERR GT and LT options at the same time are not compatible",
        ));
    }
    let mut when = int_arg(&a[2])?;
    if seconds {
        when = when.checked_mul(1000).ok_or(Error::InvalidExpire(name))?;
    }
    if relative {
        when = when.checked_add(c.now).ok_or(Error::InvalidExpire(name))?;
    }
    let db = c.cl.db;
    let key = &a[1];
    if c.st.lookup_write(db, key, c.now).is_none() {
        c.out.int(0);
        return Ok(());
    }
    if fl != 0 {
        let cur = c.st.shard.dbs[db].expire_at(key);
        let refuse = (fl & EXPIRE_NX != 0 && cur.is_some())
            || (fl & EXPIRE_XX != 0 && cur.is_none())
            || (fl & EXPIRE_GT != 0 && cur.is_none_or(|t| when <= t))
            || (fl & EXPIRE_LT != 0 && cur.is_some_and(|t| when >= t));
        if refuse {
            c.out.int(0);
            return Ok(());
        }
    }
    if c.st.already_expired(when, c.now) {
        // A time in the past deletes the key at once (replicated as DEL).
        if let Some(v) = c.st.shard.dbs[db].remove(key) {
            drop_value(v, c.st.cfg.lazyfree_lazy_expire);
        }
        c.st.changed(class::GENERIC, "del", db, key);
    } else {
        c.st.shard.dbs[db].set_expire(key, when);
        c.st.changed(class::GENERIC, "expire", db, key);
    }
    c.propagate_expiry(key, &a[3..]);
    c.out.int(1);
    Ok(())
}

/// EXPIRE key seconds [NX | XX | GT | LT]
fn expire(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    expire_generic(c, a, true, true, "expire")
}

/// PEXPIRE key milliseconds [NX | XX | GT | LT]
fn pexpire(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    expire_generic(c, a, false, true, "pexpire")
}

/// EXPIREAT key unix-time-seconds [NX | XX | GT | LT]
fn expireat(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    expire_generic(c, a, true, false, "expireat")
}

/// PEXPIREAT key unix-time-milliseconds [NX | XX | GT | LT]
fn pexpireat(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    expire_generic(c, a, false, false, "pexpireat")
}

/// The shared body of TTL, PTTL, EXPIRETIME and PEXPIRETIME: -2 for a
/// missing key, -1 without a TTL.
fn ttl_generic(c: &mut Ctx, a: &[Bytes], ms: bool, absolute: bool) -> CmdResult {
    let db = c.cl.db;
    if c.st.lookup_read_notouch(db, &a[1], c.now).is_none() {
        c.out.int(-2);
        return Ok(());
    }
    let Some(at) = c.st.shard.dbs[db].expire_at(&a[1]) else {
        c.out.int(-1);
        return Ok(());
    };
    let t = if absolute { at } else { at - c.now }.max(0);
    c.out.int(if ms { t } else { (t + 500) / 1000 });
    Ok(())
}

/// TTL key
fn ttl(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    ttl_generic(c, a, false, false)
}

/// PTTL key
fn pttl(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    ttl_generic(c, a, true, false)
}

/// EXPIRETIME key
fn expiretime(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    ttl_generic(c, a, false, true)
}

/// PEXPIRETIME key
fn pexpiretime(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    ttl_generic(c, a, true, true)
}

/// PERSIST key
fn persist(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let db = c.cl.db;
    let done = c.st.lookup_write(db, &a[1], c.now).is_some() && c.st.shard.dbs[db].persist(&a[1]);
    if done {
        c.st.changed(class::GENERIC, "persist", db, &a[1]);
    }
    c.out.int(done as i64);
    Ok(())
}

/// TOUCH key [key ...]
fn touch(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let db = c.cl.db;
    let mut n = 0;
    for k in &a[1..] {
        if c.st.lookup_read(db, k, c.now).is_some() {
            n += 1;
        }
    }
    c.out.int(n);
    Ok(())
}

/// KEYS pattern
fn keys(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let pat = &a[1][..];
    let all = pat == b"*";
    let d = &c.st.shard.dbs[c.cl.db];
    let now = c.now;
    // Expired keys are skipped, not deleted: KEYS only reads.
    let found: Vec<&[u8]> = d
        .keys()
        .iter()
        .map(|(k, _)| k)
        .filter(|k| (all || storage::glob::matches(pat, k, false)) && !d.is_expired(k, now))
        .collect();
    c.out.array(found.len());
    for k in found {
        if c.out.full() {
            break;
        }
        c.out.bulk(k);
    }
    Ok(())
}

/// SCAN cursor [MATCH pattern] [COUNT count] [TYPE type]
fn scan(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let cursor = cursor_arg(&a[1])?;
    let o = scan_opts(&a[2..], true)?;
    let count = o.count;
    let db = c.cl.db;
    let d = &c.st.shard.dbs[db];
    let mut found: Vec<CBytes> = Vec::new();
    let mut cur = cursor;
    // As Redis: at most 10 buckets per requested key, so a sparse table
    // still answers quickly (maybe with nothing).
    let mut budget = count.saturating_mul(10);
    loop {
        cur = d.keys().scan(cur, |k, _| found.push(CBytes::new(k)));
        if cur == 0 || budget == 0 || found.len() >= count {
            break;
        }
        budget -= 1;
    }
    let mut keep = Vec::with_capacity(found.len());
    for k in found {
        if !o.matches(&k) {
            continue;
        }
        if let Some(t) = o.typ {
            let name =
                c.st.lookup_read_nonotify(db, &k, c.now)
                    .map_or("none", |v| v.type_name());
            if !t.eq_ignore_ascii_case(name.as_bytes()) {
                continue;
            }
        }
        if c.st.expire_if_needed(db, &k, c.now) {
            continue;
        }
        keep.push(k);
    }
    reply_cursor(c.out, cur);
    c.out.array(keep.len());
    for k in keep {
        c.out.bulk(&k);
    }
    Ok(())
}

/// RANDOMKEY
fn randomkey(c: &mut Ctx, _: &[Bytes]) -> CmdResult {
    let db = c.cl.db;
    let mut rng = rand::thread_rng();
    // Expired keys met on the way are deleted, as Redis does. That alone
    // ends (each try removes one), but with many expired keys it could take
    // long, so after 100 tries fall back to one pass for a live key.
    for _ in 0..100 {
        let Some(k) = c.st.shard.dbs[db].random_key(&mut rng) else {
            c.out.null();
            return Ok(());
        };
        if !c.st.expire_if_needed(db, &k, c.now) {
            c.out.bulk(&k);
            return Ok(());
        }
    }
    let d = &c.st.shard.dbs[db];
    let live = d
        .keys()
        .iter()
        .find(|(k, _)| !d.is_expired(k, c.now))
        .map(|(k, _)| k);
    match live {
        Some(k) => c.out.bulk(k),
        None => c.out.null(),
    }
    Ok(())
}

/// OBJECT ENCODING key
fn object_encoding(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    match c.st.lookup_read_nonotify(c.cl.db, &a[2], c.now) {
        Some(v) => {
            let e = v.encoding();
            c.out.bulk(e.as_bytes());
        }
        None => c.out.null(),
    }
    Ok(())
}

/// OBJECT REFCOUNT key
fn object_refcount(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    if c.st.lookup_read_nonotify(c.cl.db, &a[2], c.now).is_none() {
        c.out.null();
        return Ok(());
    }
    let v = c.st.shard.dbs[c.cl.db].peek(&a[2]);
    c.out
        .int(v.map_or(1, |v| crate::state::evict::refcount(&c.st.cfg, v)));
    Ok(())
}

fn lfu_policy(c: &Ctx) -> bool {
    c.st.cfg.maxmemory_policy.lfu()
}

/// OBJECT IDLETIME key
fn object_idletime(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let db = c.cl.db;
    if c.st.lookup_read_nonotify(db, &a[2], c.now).is_none() {
        c.out.null();
        return Ok(());
    }
    if lfu_policy(c) {
        return Err(Error::other("ERR An LFU maxmemory policy is selected, idle time not tracked. Please note that when switching between policies at runtime LRU and LFU data will take some time to adjust."));
    }
    let d = &mut c.st.shard.dbs[db];
    d.set_clock(c.now);
    let idle = d.idle_ms(&a[2]).unwrap_or(0);
    c.out.int((idle / 1000) as i64);
    Ok(())
}

/// OBJECT FREQ key
fn object_freq(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let db = c.cl.db;
    if c.st.lookup_read_nonotify(db, &a[2], c.now).is_none() {
        c.out.null();
        return Ok(());
    }
    if !lfu_policy(c) {
        return Err(Error::other("ERR An LFU maxmemory policy is not selected, access frequency not tracked. Please note that when switching between policies at runtime LRU and LFU data will take some time to adjust."));
    }
    let d = &mut c.st.shard.dbs[db];
    d.set_clock(c.now);
    let f = d.freq(&a[2]).unwrap_or(0);
    c.out.int(f as i64);
    Ok(())
}

/// OBJECT HELP
fn object_help(c: &mut Ctx, _: &[Bytes]) -> CmdResult {
    const HELP: &[&str] = &[
        "OBJECT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "ENCODING <key>",
        "    Return the kind of internal representation used in order to store the value",
        "    associated with a <key>.",
        "FREQ <key>",
        "    Return the access frequency index of the <key>. The returned integer is",
        "    proportional to the logarithm of the recent access frequency of the key.",
        "IDLETIME <key>",
        "    Return the idle time of the <key>, that is the approximated number of",
        "    seconds elapsed since the last access to the key.",
        "REFCOUNT <key>",
        "    Return the number of references of the value associated with the specified",
        "    <key>.",
        "HELP",
        "    Prints this help.",
    ];
    c.out.array(HELP.len());
    for l in HELP {
        c.out.simple(l);
    }
    Ok(())
}

/// DBSIZE
fn dbsize(c: &mut Ctx, _: &[Bytes]) -> CmdResult {
    let n = c.st.shard.dbs[c.cl.db].len();
    c.out.int(n as i64);
    Ok(())
}

/// The `[ASYNC | SYNC]` of FLUSHDB and FLUSHALL; without it,
/// `lazyfree-lazy-user-flush` decides.
fn flush_async(c: &Ctx, a: &[Bytes]) -> Result<bool, Error> {
    match a.len() {
        1 => Ok(c.st.cfg.lazyfree_lazy_user_flush),
        2 if is(&a[1], "async") => Ok(true),
        2 if is(&a[1], "sync") => Ok(false),
        _ => Err(Error::Syntax),
    }
}

/// Empties database `db`; counts the removed keys as changes.
fn flush_db(c: &mut Ctx, db: usize, lazy: bool) {
    c.st.touch_all_watched(db, None);
    let old = c.st.shard.dbs[db].take();
    c.st.dirty += old.len() as u64;
    // Blocked XREADGROUPs on its keys fail now.
    let waiting: Vec<_> =
        c.st.shard
            .blocking
            .keys()
            .filter(|(d, _)| *d == db)
            .cloned()
            .collect();
    for (d, key) in waiting {
        c.st.signal_ready(d, &key);
    }
    // An asynchronous flush hands the whole table to the lazy-free thread
    // whatever its size, and INFO counts its keys, as Redis 7.0.15 does.
    if lazy && !old.is_empty() {
        let n = old.len() as u64;
        lazy_free(old, n);
    }
}

/// FLUSHDB [ASYNC | SYNC]
fn flushdb(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let lazy = flush_async(c, a)?;
    flush_db(c, c.cl.db, lazy);
    c.st.force_propagate();
    c.st.invalidate_all();
    c.out.ok();
    Ok(())
}

/// FLUSHALL [ASYNC | SYNC]
fn flushall(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let lazy = flush_async(c, a)?;
    let save = !c.st.cfg.save.is_empty();
    if save && crate::state::persist::bgsave_in_progress(c.st) {
        // Its image of the old data is abandoned, as Redis kills its
        // child; replicas waiting for it fail their sync.
        crate::state::persist::abort_bgsave(c.st);
        c.st.repl_bgsave_done(false, None);
    }
    for db in 0..c.st.shard.dbs.len() {
        flush_db(c, db, lazy);
    }
    if save {
        // With save points the empty dataset is saved at once, so none
        // fires for the flush (Redis's flushAllDataAndResetRDB); this save
        // is not one of INFO's rdb_saves.
        let saves = c.st.rdb.saves;
        let _ = crate::state::persist::save(c.st);
        c.st.rdb.saves = saves;
    }
    c.st.force_propagate();
    c.st.invalidate_all();
    c.out.ok();
    Ok(())
}

/// SWAPDB index1 index2
fn swapdb(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    if c.st.cluster.is_some() {
        return Err(Error::other("ERR SWAPDB is not allowed in cluster mode"));
    }
    let parse = |b: &[u8], which: &str| {
        storage::num::parse_i64(b)
            .filter(|n| (i32::MIN as i64..=i32::MAX as i64).contains(n))
            .ok_or_else(|| Error::other(format!("ERR invalid {which} DB index")))
    };
    let x = parse(&a[1], "first")?;
    let y = parse(&a[2], "second")?;
    let n = c.st.shard.dbs.len() as i64;
    if x < 0 || x >= n || y < 0 || y >= n {
        return Err(Error::DbIndexOutOfRange);
    }
    let (x, y) = (x as usize, y as usize);
    c.st.touch_all_watched(x, Some(y));
    c.st.touch_all_watched(y, Some(x));
    c.st.shard.dbs.swap(x, y);
    // Clients blocked on a key of either database may now find data.
    let waiting: Vec<(usize, Bytes)> =
        c.st.shard
            .blocking
            .keys()
            .filter(|(d, _)| *d == x || *d == y)
            .cloned()
            .collect();
    for (d, key) in waiting {
        c.st.signal_ready(d, &key);
    }
    c.st.dirty += 1;
    c.out.ok();
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::cmd::scan::parse_cursor;

    /// Arity, flags and key positions as COMMAND INFO shows them on Redis
    /// 7.0.15.
    #[test]
    fn registered_as_redis() {
        crate::cmd::families::install();
        use crate::cmd::{flags::NAMES, lookup, lookup_sub};
        type Spec = (&'static str, i32, &'static str, (i32, i32, i32));
        let want: &[Spec] = &[
            ("del", -2, "write", (1, -1, 1)),
            ("unlink", -2, "write fast", (1, -1, 1)),
            ("exists", -2, "readonly fast", (1, -1, 1)),
            ("type", 2, "readonly fast", (1, 1, 1)),
            ("rename", 3, "write", (1, 2, 1)),
            ("renamenx", 3, "write fast", (1, 2, 1)),
            ("copy", -3, "write denyoom", (1, 2, 1)),
            ("move", 3, "write fast", (1, 1, 1)),
            ("expire", -3, "write fast", (1, 1, 1)),
            ("pexpire", -3, "write fast", (1, 1, 1)),
            ("expireat", -3, "write fast", (1, 1, 1)),
            ("pexpireat", -3, "write fast", (1, 1, 1)),
            ("ttl", 2, "readonly fast", (1, 1, 1)),
            ("pttl", 2, "readonly fast", (1, 1, 1)),
            ("expiretime", 2, "readonly fast", (1, 1, 1)),
            ("pexpiretime", 2, "readonly fast", (1, 1, 1)),
            ("persist", 2, "write fast", (1, 1, 1)),
            ("touch", -2, "readonly fast", (1, -1, 1)),
            ("keys", 2, "readonly", (0, 0, 0)),
            ("scan", -2, "readonly", (0, 0, 0)),
            ("randomkey", 1, "readonly", (0, 0, 0)),
            ("object", -2, "", (0, 0, 0)),
            ("object|encoding", 3, "readonly", (2, 2, 1)),
            ("object|refcount", 3, "readonly", (2, 2, 1)),
            ("object|idletime", 3, "readonly", (2, 2, 1)),
            ("object|freq", 3, "readonly", (2, 2, 1)),
            ("object|help", 2, "loading stale", (0, 0, 0)),
            ("dbsize", 1, "readonly fast", (0, 0, 0)),
            ("flushdb", -1, "write", (0, 0, 0)),
            ("flushall", -1, "write", (0, 0, 0)),
            ("swapdb", 3, "write fast", (0, 0, 0)),
        ];
        for &(name, arity, fl, keys) in want {
            let c = match name.split_once('|') {
                Some((p, s)) => lookup_sub(lookup(p.as_bytes()).unwrap(), s.as_bytes()),
                None => lookup(name.as_bytes()),
            }
            .unwrap_or_else(|| panic!("{name} missing"));
            assert_eq!(c.arity, arity, "{name}");
            let got: Vec<&str> = NAMES
                .iter()
                .filter(|(f, _)| c.has(*f))
                .map(|(_, n)| *n)
                .collect();
            assert_eq!(got.join(" "), fl, "{name}");
            assert_eq!((c.first_key, c.last_key, c.step), keys, "{name}");
        }
    }

    #[test]
    fn config_options_used_exist() {
        for name in [
            "lazyfree-lazy-user-del",
            "lazyfree-lazy-server-del",
            "lazyfree-lazy-expire",
            "lazyfree-lazy-user-flush",
            "maxmemory",
            "maxmemory-policy",
            "lfu-log-factor",
            "lfu-decay-time",
        ] {
            assert!(crate::core::config::find(name).is_some(), "{name}");
        }
    }

    #[test]
    fn cursor_parses_as_strtoull() {
        assert_eq!(parse_cursor(b"0"), Some(0));
        assert_eq!(parse_cursor(b"01"), Some(1));
        assert_eq!(parse_cursor(b"+1"), Some(1));
        assert_eq!(parse_cursor(b"-1"), Some(u64::MAX));
        assert_eq!(parse_cursor(b""), Some(0));
        assert_eq!(parse_cursor(b"-"), None);
        assert_eq!(parse_cursor(b"-0"), Some(0));
        assert_eq!(parse_cursor(b"18446744073709551615"), Some(u64::MAX));
        assert_eq!(parse_cursor(b"18446744073709551616"), None);
        assert_eq!(parse_cursor(b" 1"), None);
        assert_eq!(parse_cursor(b"1 "), None);
        assert_eq!(parse_cursor(b"1.5"), None);
        assert_eq!(parse_cursor(b"abc"), None);
    }
}
