//! Consumer groups: XGROUP, XACK, XPENDING, XCLAIM, XAUTOCLAIM.
//!
//! Claims propagate as Redis propagates them: one `XCLAIM key group
//! consumer 0 id TIME ms RETRYCOUNT n FORCE JUSTID LASTID id` per entry
//! whose ownership or delivery changed (so a replica or the AOF rebuilds
//! the PEL exactly), and `XGROUP SETID … ENTRIESREAD n` when only the
//! group's last ID moved (XCLAIM's LASTID). What Redis 7.0.15 writes to
//! its AOF for each was checked against it.

use super::ops::{id_bytes, interval_id, parse_id, reply_entry, strict_id};
use crate::cmd::help::{bad_sub, help_reply};
use crate::cmd::{int_arg, is, Ctx, Handler};
use crate::core::config::class;
use crate::core::error::{CmdResult, Error};
use bytes::Bytes;
use storage::stream::{Group, ENTRIES_READ_INVALID};
use storage::{Stream, StreamId, Value};

pub static HANDLERS: &[(&str, Handler)] = &[
    ("xgroup|create", xgroup_create),
    ("xgroup|setid", xgroup_setid),
    ("xgroup|destroy", xgroup_destroy),
    ("xgroup|createconsumer", xgroup_createconsumer),
    ("xgroup|delconsumer", xgroup_delconsumer),
    ("xgroup|help", xgroup_help),
    ("xack", xack),
    ("xpending", xpending),
    ("xclaim", xclaim),
    ("xautoclaim", xautoclaim),
];

/// `XCLAIM … FORCE JUSTID LASTID …` recreating pending entry `id` as it
/// is now.
pub fn xclaim_propagation(key: &[u8], gname: &[u8], g: &Group, id: StreamId) -> Vec<Bytes> {
    let n = &g.pel[&id];
    let b = |s: &[u8]| Bytes::copy_from_slice(s);
    vec![
        Bytes::from_static(b"XCLAIM"),
        b(key),
        b(gname),
        b(&n.consumer),
        Bytes::from_static(b"0"),
        id_bytes(id),
        Bytes::from_static(b"TIME"),
        Bytes::from(n.delivery_time.to_string()),
        Bytes::from_static(b"RETRYCOUNT"),
        Bytes::from(n.delivery_count.to_string()),
        Bytes::from_static(b"FORCE"),
        Bytes::from_static(b"JUSTID"),
        Bytes::from_static(b"LASTID"),
        id_bytes(g.last_id),
    ]
}

/// `XGROUP CREATECONSUMER key group consumer`: a consumer a NOACK read
/// created, so it exists on replay though it owns no pending entry.
pub fn consumer_propagation(key: &[u8], gname: &[u8], cname: &[u8]) -> Vec<Bytes> {
    vec![
        Bytes::from_static(b"XGROUP"),
        Bytes::from_static(b"CREATECONSUMER"),
        Bytes::copy_from_slice(key),
        Bytes::copy_from_slice(gname),
        Bytes::copy_from_slice(cname),
    ]
}

/// `XGROUP SETID key group last-id ENTRIESREAD n`.
pub fn group_id_propagation(key: &[u8], gname: &[u8], g: &Group) -> Vec<Bytes> {
    vec![
        Bytes::from_static(b"XGROUP"),
        Bytes::from_static(b"SETID"),
        Bytes::copy_from_slice(key),
        Bytes::copy_from_slice(gname),
        id_bytes(g.last_id),
        Bytes::from_static(b"ENTRIESREAD"),
        Bytes::from(g.entries_read.to_string()),
    ]
}

/// Moves entry `id`'s NACK to consumer `cname` (created if new: then
/// true) as delivered at `delivery`, `count` times (XCLAIM, XAUTOCLAIM).
fn claim(g: &mut Group, cname: &[u8], id: StreamId, delivery: i64, count: u64, now: i64) -> bool {
    let (k, new) = g.consumer(cname, now);
    k.seen_time = now;
    g.assign(id, cname, delivery, count, now);
    new
}

/// A claimed entry in the reply: the entry, or its ID alone (JUSTID).
fn reply_claimed(body: &mut protocol::ReplyBuf, s: &Stream, id: StreamId, justid: bool) {
    if justid {
        body.bulk(id.to_string().as_bytes());
    } else {
        s.range(id, id, false, |e| {
            reply_entry(body, e);
            false
        });
    }
}

fn no_group(key: &[u8], g: &[u8]) -> Error {
    Error::other(format!(
        "NOGROUP No such key '{}' or consumer group '{}'",
        String::from_utf8_lossy(key),
        String::from_utf8_lossy(g)
    ))
}

pub(super) fn no_group_for_key(key: &[u8], g: &[u8]) -> Error {
    Error::other(format!(
        "NOGROUP No such consumer group '{}' for key name '{}'",
        String::from_utf8_lossy(g),
        String::from_utf8_lossy(key)
    ))
}

fn entries_read_arg(a: &[u8]) -> Result<i64, Error> {
    let n = int_arg(a)?;
    if n < 0 && n != ENTRIES_READ_INVALID {
        return Err(Error::other(
            "ERR value for ENTRIESREAD must be positive or -1",
        ));
    }
    Ok(n)
}

/// The stream at `key` for an XGROUP subcommand, which needs it to exist.
fn group_stream<'a>(c: &'a mut Ctx, key: &[u8]) -> Result<&'a mut Stream, Error> {
    c.st.write::<Stream>(c.cl.db, key, c.now)?.ok_or_else(|| {
        Error::other(
            "ERR The XGROUP subcommand requires the key to exist. Note that for CREATE you may want to use the MKSTREAM option to create an empty stream automatically.",
        )
    })
}

/// XGROUP CREATE key group id|$ [MKSTREAM] [ENTRIESREAD entries-read]
fn xgroup_create(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let mut mkstream = false;
    let mut entries_read = ENTRIES_READ_INVALID;
    let mut i = 5;
    while i < a.len() {
        if is(&a[i], "mkstream") {
            mkstream = true;
            i += 1;
        } else if is(&a[i], "entriesread") && i + 1 < a.len() {
            entries_read = entries_read_arg(&a[i + 1])?;
            i += 2;
        } else {
            return Err(bad_sub(&a[1], "XGROUP"));
        }
    }
    let (db, now) = (c.cl.db, c.now);
    let exists = c.st.write::<Stream>(db, &a[2], now)?.is_some();
    if !exists && !mkstream {
        group_stream(c, &a[2])?;
    }
    if a.len() > 8 {
        return Err(bad_sub(&a[1], "XGROUP"));
    }
    let id = if &a[4][..] == b"$" {
        c.st.write::<Stream>(db, &a[2], now)?
            .map_or(StreamId::MIN, |s| s.last_id)
    } else {
        strict_id(&a[4])?
    };
    let s =
        c.st.write_or_create::<Stream>(db, &a[2], now, || Value::Stream(Box::default()))?;
    if s.groups.contains_key(&a[3][..]) {
        return Err(Error::other("BUSYGROUP Consumer Group name already exists"));
    }
    s.groups.insert(a[3].to_vec(), Group::new(id, entries_read));
    c.st.changed(class::STREAM, "xgroup-create", db, &a[2]);
    c.out.ok();
    Ok(())
}

/// The group `a[3]` of the stream `a[2]`, which must both exist.
fn existing_group<'a>(c: &'a mut Ctx, a: &[Bytes]) -> Result<&'a mut Stream, Error> {
    let s = group_stream(c, &a[2])?;
    if !s.groups.contains_key(&a[3][..]) {
        return Err(no_group_for_key(&a[2], &a[3]));
    }
    Ok(s)
}

/// XGROUP SETID key group id|$ [ENTRIESREAD entries-read]
fn xgroup_setid(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let s = existing_group(c, a)?;
    if a.len() != 5 && a.len() != 7 {
        return Err(bad_sub(&a[1], "XGROUP"));
    }
    let id = if &a[4][..] == b"$" {
        s.last_id
    } else {
        parse_id(&a[4], 0, false, None)?
    };
    let mut entries_read = ENTRIES_READ_INVALID;
    if a.len() == 7 {
        if !is(&a[5], "entriesread") {
            return Err(bad_sub(&a[1], "XGROUP"));
        }
        entries_read = int_arg(&a[6])?;
        if entries_read < 0 && entries_read != ENTRIES_READ_INVALID {
            return Err(Error::other(
                "ERR value for ENTRIESREAD must be positive or -1",
            ));
        }
    }
    let g = s.groups.get_mut(&a[3][..]).expect("checked");
    g.last_id = id;
    g.entries_read = entries_read;
    c.st.changed(class::STREAM, "xgroup-setid", c.cl.db, &a[2]);
    c.out.ok();
    Ok(())
}

/// XGROUP DESTROY key group
fn xgroup_destroy(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let s = group_stream(c, &a[2])?;
    if s.groups.remove(&a[3][..]).is_none() {
        c.out.int(0);
        return Ok(());
    }
    // Also wakes the group's blocked readers, which then fail.
    c.st.changed(class::STREAM, "xgroup-destroy", c.cl.db, &a[2]);
    c.out.int(1);
    Ok(())
}

/// XGROUP CREATECONSUMER key group consumer
fn xgroup_createconsumer(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let now = c.now;
    let s = existing_group(c, a)?;
    let g = s.groups.get_mut(&a[3][..]).expect("checked");
    let created = g.consumer(&a[4], now).1;
    if created {
        c.st.changed(class::STREAM, "xgroup-createconsumer", c.cl.db, &a[2]);
    }
    c.out.int(created as i64);
    Ok(())
}

/// XGROUP DELCONSUMER key group consumer
fn xgroup_delconsumer(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let s = existing_group(c, a)?;
    let g = s.groups.get_mut(&a[3][..]).expect("checked");
    let pending = g.delete_consumer(&a[4]);
    if pending.is_some() {
        c.st.changed(class::STREAM, "xgroup-delconsumer", c.cl.db, &a[2]);
    }
    c.out.int(pending.unwrap_or(0) as i64);
    Ok(())
}

/// XGROUP HELP
fn xgroup_help(c: &mut Ctx, _a: &[Bytes]) -> CmdResult {
    help_reply(
        c,
        "XGROUP",
        &[
            "CREATE <key> <groupname> <id|$> [option]",
            "    Create a new consumer group. Options are:",
            "    * MKSTREAM",
            "      Create the empty stream if it does not exist.",
            "    * ENTRIESREAD entries_read",
            "      Set the group's entries_read counter (internal use).",
            "CREATECONSUMER <key> <groupname> <consumer>",
            "    Create a new consumer in the specified group.",
            "DELCONSUMER <key> <groupname> <consumer>",
            "    Remove the specified consumer.",
            "DESTROY <key> <groupname>",
            "    Remove the specified group.",
            "SETID <key> <groupname> <id|$> [ENTRIESREAD entries_read]",
            "    Set the current group ID and entries_read counter.",
        ],
    );
    Ok(())
}

/// XACK key group id [id ...]
fn xack(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let (db, now) = (c.cl.db, c.now);
    let g =
        c.st.write::<Stream>(db, &a[1], now)?
            .and_then(|s| s.groups.get_mut(&a[2][..]));
    let Some(g) = g else {
        c.out.int(0);
        return Ok(());
    };
    // Every ID is checked before any is acknowledged.
    let ids = a[3..]
        .iter()
        .map(|x| strict_id(x))
        .collect::<Result<Vec<_>, _>>()?;
    let n = ids.into_iter().filter(|id| g.ack(*id)).count();
    c.st.dirty += n as u64;
    c.out.int(n as i64);
    Ok(())
}

/// XPENDING key group [[IDLE min-idle-time] start end count [consumer]]
fn xpending(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    if a.len() != 3 && (a.len() < 6 || a.len() > 9) {
        return Err(Error::Syntax);
    }
    let mut range = None;
    if a.len() >= 6 {
        let mut at = 3;
        let mut min_idle = 0;
        if is(&a[3], "idle") {
            min_idle = int_arg(&a[4])?;
            if a.len() < 8 {
                return Err(Error::Syntax);
            }
            at += 2;
        }
        let count = int_arg(&a[at + 2])?.max(0) as usize;
        let (mut start, sx) = interval_id(&a[at], 0)?;
        if sx {
            start = start
                .incr()
                .ok_or_else(|| Error::other("ERR invalid start ID for the interval"))?;
        }
        let (mut end, ex) = interval_id(&a[at + 1], u64::MAX)?;
        if ex {
            end = end
                .decr()
                .ok_or_else(|| Error::other("ERR invalid end ID for the interval"))?;
        }
        range = Some((min_idle, start, end, count, a.get(at + 3)));
    }
    let now = c.now;
    let s = c.st.read::<Stream>(c.cl.db, &a[1], now)?;
    let Some(g) = s.and_then(|s| s.groups.get(&a[2][..])) else {
        return Err(no_group(&a[1], &a[2]));
    };
    let Some((min_idle, start, end, count, consumer)) = range else {
        c.out.array(4);
        c.out.int(g.pel.len() as i64);
        match (g.pel.keys().next(), g.pel.keys().next_back()) {
            (Some(first), Some(last)) => {
                c.out.bulk(first.to_string().as_bytes());
                c.out.bulk(last.to_string().as_bytes());
                let owners: Vec<_> = g
                    .consumers
                    .iter()
                    .filter(|(_, k)| !k.pel.is_empty())
                    .collect();
                c.out.array(owners.len());
                for (name, k) in owners {
                    c.out.array(2);
                    c.out.bulk(name);
                    c.out.bulk(k.pel.len().to_string().as_bytes());
                }
            }
            _ => {
                c.out.null();
                c.out.null();
                c.out.null_array();
            }
        }
        return Ok(());
    };
    let ids: Box<dyn Iterator<Item = &StreamId>> = match consumer {
        Some(name) => match g.consumers.get(&name[..]) {
            Some(k) => Box::new(k.pel.range(start..)),
            None => {
                c.out.array(0);
                return Ok(());
            }
        },
        None => Box::new(g.pel.range(start..).map(|(id, _)| id)),
    };
    let mut rows = Vec::new();
    if start <= end {
        for id in ids.take_while(|id| **id <= end) {
            if rows.len() == count {
                break;
            }
            let n = &g.pel[id];
            if min_idle > 0 && now - n.delivery_time < min_idle {
                continue;
            }
            rows.push((*id, n));
        }
    }
    c.out.array(rows.len());
    for (id, n) in rows {
        c.out.array(4);
        c.out.bulk(id.to_string().as_bytes());
        c.out.bulk(&n.consumer);
        c.out.int((now - n.delivery_time).max(0));
        c.out.int(n.delivery_count as i64);
    }
    Ok(())
}

/// The stream and group a claim works on (NOGROUP if either is missing).
fn claim_target(c: &mut Ctx, a: &[Bytes]) -> Result<(), Error> {
    let s = c.st.read::<Stream>(c.cl.db, &a[1], c.now)?;
    if !s.is_some_and(|s| s.groups.contains_key(&a[2][..])) {
        return Err(no_group(&a[1], &a[2]));
    }
    Ok(())
}

/// XCLAIM key group consumer min-idle-time id [id ...] [IDLE ms] [TIME unix-time-milliseconds] [RETRYCOUNT count] [FORCE] [JUSTID] [LASTID lastid]
fn xclaim(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    claim_target(c, a)?;
    let now = c.now;
    let min_idle = storage::num::parse_i64(&a[4])
        .ok_or_else(|| Error::other("ERR Invalid min-idle-time argument for XCLAIM"))?
        .max(0);
    let mut j = 5;
    let mut ids = Vec::new();
    while j < a.len() {
        match strict_id(&a[j]) {
            Ok(id) => ids.push(id),
            Err(_) => break,
        }
        j += 1;
    }
    let mut delivery: Option<i64> = None;
    let mut retry: Option<i64> = None;
    let (mut force, mut justid) = (false, false);
    let mut last_id: Option<StreamId> = None;
    while j < a.len() {
        let more = a.len() - j - 1;
        let o = &a[j];
        let num = |x: &[u8], what: &str| {
            storage::num::parse_i64(x).ok_or_else(|| {
                Error::other(format!("ERR Invalid {what} option argument for XCLAIM"))
            })
        };
        if is(o, "force") {
            force = true;
        } else if is(o, "justid") {
            justid = true;
        } else if is(o, "idle") && more > 0 {
            j += 1;
            delivery = Some(now - num(&a[j], "IDLE")?);
        } else if is(o, "time") && more > 0 {
            j += 1;
            delivery = Some(num(&a[j], "TIME")?);
        } else if is(o, "retrycount") && more > 0 {
            j += 1;
            retry = Some(num(&a[j], "RETRYCOUNT")?);
        } else if is(o, "lastid") && more > 0 {
            j += 1;
            last_id = Some(strict_id(&a[j])?);
        } else {
            return Err(Error::other(format!(
                "ERR Unrecognized XCLAIM option '{}'",
                String::from_utf8_lossy(o)
            )));
        }
        j += 1;
    }
    let delivery = match delivery {
        Some(t) if (0..=now).contains(&t) => t,
        _ => now,
    };
    // The XCLAIMs to propagate are built only if someone reads them.
    let prop_on = c.propagating();
    let (db, key, gname, cname) = (c.cl.db, &a[1], &a[2], &a[3]);
    let s = c.st.write::<Stream>(db, key, now)?.expect("checked");
    let mut g = s.groups.remove(&gname[..]).expect("checked");
    let mut moved_last = false;
    if let Some(l) = last_id.filter(|l| *l > g.last_id) {
        g.last_id = l;
        moved_last = true;
    }
    let mut props = Vec::new();
    let mut changes = 0u64;
    let mut body = protocol::ReplyBuf::new(c.out.resp3);
    let mut n = 0;
    let mut created = false;
    for id in ids {
        let exists = s.contains(id);
        if !exists {
            if g.pel.contains_key(&id) {
                changes += 1;
                if prop_on {
                    props.push(xclaim_propagation(key, gname, &g, id));
                }
                g.ack(id);
                moved_last = false;
            }
            continue;
        }
        let pending = g.pel.get(&id);
        if pending.is_none() && !force {
            continue;
        }
        if let Some(p) = pending {
            if min_idle > 0 && now - p.delivery_time < min_idle {
                continue;
            }
        }
        let count = match (retry, pending) {
            (Some(r), _) => r as u64,
            (None, Some(p)) if !justid => p.delivery_count + 1,
            (None, Some(p)) => p.delivery_count,
            // A NACK that FORCE creates starts at one delivery.
            (None, None) => 1 + (!justid) as u64,
        };
        created |= claim(&mut g, cname, id, delivery, count, now);
        reply_claimed(&mut body, s, id, justid);
        n += 1;
        changes += 1;
        if prop_on {
            props.push(xclaim_propagation(key, gname, &g, id));
        }
        moved_last = false;
    }
    if moved_last {
        changes += 1;
        if prop_on {
            props.push(group_id_propagation(key, gname, &g));
        }
    }
    s.groups.insert(gname.to_vec(), g);
    c.out.array(n);
    c.out.raw(&body.buf);
    c.no_propagate();
    // Replaying the XCLAIMs recreates a new consumer.
    if created {
        c.st.changed(class::STREAM, "xgroup-createconsumer", db, key);
    }
    c.st.dirty += changes;
    for p in props {
        c.propagate_as(p);
    }
    Ok(())
}

/// XAUTOCLAIM key group consumer min-idle-time start [COUNT count] [JUSTID]
fn xautoclaim(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    // Arguments are checked before the group is looked for.
    c.st.read::<Stream>(c.cl.db, &a[1], c.now)?;
    let now = c.now;
    let min_idle = storage::num::parse_i64(&a[4])
        .ok_or_else(|| Error::other("ERR Invalid min-idle-time argument for XAUTOCLAIM"))?
        .max(0);
    let (mut start, sx) = interval_id(&a[5], 0)?;
    if sx {
        start = start
            .incr()
            .ok_or_else(|| Error::other("ERR invalid start ID for the interval"))?;
    }
    let mut count: i64 = 100;
    let mut justid = false;
    let mut j = 6;
    while j < a.len() {
        if is(&a[j], "count") && j + 1 < a.len() {
            const ATTEMPTS_FACTOR: i64 = 10;
            count = storage::num::parse_i64(&a[j + 1])
                .filter(|n| (1..=i64::MAX / ATTEMPTS_FACTOR).contains(n))
                .ok_or_else(|| Error::other("ERR COUNT must be > 0"))?;
            j += 2;
        } else if is(&a[j], "justid") {
            justid = true;
            j += 1;
        } else {
            return Err(Error::Syntax);
        }
    }
    claim_target(c, a)?;
    // The XCLAIMs to propagate are built only if someone reads them.
    let prop_on = c.propagating();
    let (db, key, gname, cname) = (c.cl.db, &a[1], &a[2], &a[3]);
    let s = c.st.write::<Stream>(db, key, now)?.expect("checked");
    let mut g = s.groups.remove(&gname[..]).expect("checked");
    let mut created = false;
    let mut attempts = count.saturating_mul(10);
    let mut props = Vec::new();
    let mut changes = 0u64;
    let mut deleted = Vec::new();
    let mut body = protocol::ReplyBuf::new(c.out.resp3);
    let mut n = 0;
    let mut cursor = start;
    let mut next = None;
    while let Some((&id, nack)) = g.pel.range(cursor..).next() {
        if attempts == 0 || count == 0 {
            next = Some(id);
            break;
        }
        attempts -= 1;
        cursor = match id.incr() {
            Some(x) => x,
            None => StreamId::MAX,
        };
        if !s.contains(id) {
            changes += 1;
            if prop_on {
                props.push(xclaim_propagation(key, gname, &g, id));
            }
            g.ack(id);
            deleted.push(id);
            count -= 1;
        } else if min_idle == 0 || now - nack.delivery_time >= min_idle {
            let dc = nack.delivery_count + (!justid) as u64;
            created |= claim(&mut g, cname, id, now, dc, now);
            reply_claimed(&mut body, s, id, justid);
            n += 1;
            count -= 1;
            changes += 1;
            if prop_on {
                props.push(xclaim_propagation(key, gname, &g, id));
            }
        }
        if id == StreamId::MAX {
            break;
        }
    }
    s.groups.insert(gname.to_vec(), g);
    c.out.array(3);
    c.out
        .bulk(next.unwrap_or(StreamId::MIN).to_string().as_bytes());
    c.out.array(n);
    c.out.raw(&body.buf);
    c.out.array(deleted.len());
    for id in deleted {
        c.out.bulk(id.to_string().as_bytes());
    }
    c.no_propagate();
    // Replaying the XCLAIMs recreates a new consumer.
    if created {
        c.st.changed(class::STREAM, "xgroup-createconsumer", db, key);
    }
    c.st.dirty += changes;
    for p in props {
        c.propagate_as(p);
    }
    Ok(())
}
