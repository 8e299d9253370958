//! XREAD and XREADGROUP: reading several streams after given IDs, for a
//! group's consumer (`>` delivers new entries and adds them to the PELs;
//! another ID rereads the consumer's own pending history), and blocking
//! until a stream has something.
//!
//! A blocked read waits in `State::blocking` under `BlockKind::Stream`
//! with its arguments rewritten so that running it again reads what it
//! was waiting for: `$` becomes the ID it stood for when the client
//! blocked, and a read without COUNT gets Redis's blocked default of 1000.
//! XREADGROUP propagates what it changed as Redis 7.0.15 does: an `XCLAIM
//! … FORCE JUSTID LASTID` per entry added to the PEL; with NOACK, `XGROUP
//! CREATECONSUMER` for a new consumer and `XGROUP SETID … ENTRIESREAD` for
//! the group's new last ID; never itself.

use super::group::{group_id_propagation, xclaim_propagation};
use super::ops::{reply_entry, strict_id};
use crate::cmd::{int_arg, is, Ctx, Handler};
use crate::core::config::class;
use crate::core::error::{CmdResult, Error};
use crate::state::BlockKind;
use bytes::Bytes;
use protocol::ReplyBuf;
use storage::stream::ENTRIES_READ_INVALID;
use storage::{Stream, StreamId};

pub static HANDLERS: &[(&str, Handler)] = &[("xread", xread), ("xreadgroup", xreadgroup)];

/// The count a blocked read without COUNT gets.
const BLOCKED_DEFAULT_COUNT: usize = 1000;

/// XREAD [COUNT count] [BLOCK milliseconds] STREAMS key [key ...] id [id ...]
fn xread(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    read_generic(c, a, false)
}

/// XREADGROUP GROUP group consumer [COUNT count] [BLOCK milliseconds] [NOACK] STREAMS key [key ...] id [id ...]
fn xreadgroup(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    read_generic(c, a, true)
}

/// Where to start reading one stream.
#[derive(Clone, Copy)]
enum From {
    /// Entries after this ID.
    After(StreamId),
    /// `>`: the group's undelivered entries.
    New,
}

fn read_generic(c: &mut Ctx, a: &[Bytes], xreadgroup: bool) -> CmdResult {
    let mut block: Option<i64> = None;
    let mut count: usize = 0;
    let mut streams_at = 0;
    let mut group: Option<(&Bytes, &Bytes)> = None;
    let mut noack = false;
    let mut i = 1;
    while i < a.len() {
        let more = a.len() - i - 1;
        let o = &a[i];
        if is(o, "block") && more > 0 {
            i += 1;
            let ms = storage::num::parse_i64(&a[i])
                .ok_or_else(|| Error::other("ERR timeout is not an integer or out of range"))?;
            if ms < 0 {
                return Err(Error::other("ERR timeout is negative"));
            }
            block = Some(ms);
        } else if is(o, "count") && more > 0 {
            i += 1;
            count = int_arg(&a[i])?.max(0) as usize;
        } else if is(o, "streams") && more > 0 {
            streams_at = i + 1;
            if !(a.len() - streams_at).is_multiple_of(2) {
                let name = if xreadgroup { "XREADGROUP" } else { "XREAD" };
                return Err(Error::other(format!(
                    "ERR Unbalanced {name} list of streams: for each stream key an ID or '$' must be specified."
                )));
            }
            break;
        } else if is(o, "group") && more >= 2 {
            if !xreadgroup {
                return Err(Error::other(
                    "ERR The GROUP option is only supported by XREADGROUP. You called XREAD instead.",
                ));
            }
            group = Some((&a[i + 1], &a[i + 2]));
            i += 2;
        } else if is(o, "noack") {
            if !xreadgroup {
                return Err(Error::other(
                    "ERR The NOACK option is only supported by XREADGROUP. You called XREAD instead.",
                ));
            }
            noack = true;
        } else {
            return Err(Error::Syntax);
        }
        i += 1;
    }
    if streams_at == 0 {
        return Err(Error::Syntax);
    }
    if xreadgroup && group.is_none() {
        return Err(Error::other("ERR Missing GROUP option for XREADGROUP"));
    }
    // A script cannot wait (inside MULTI the read just does not block).
    if block.is_some() && c.cl.id == 0 && c.cl.deny_blocking {
        let name = if xreadgroup { "xreadgroup" } else { "xread" };
        return Err(Error::other(format!(
            "ERR {name} command is not allowed with BLOCK option from scripts"
        )));
    }
    let n = (a.len() - streams_at) / 2;
    let keys = &a[streams_at..streams_at + n];
    let (db, now) = (c.cl.db, c.now);
    let mut from = Vec::with_capacity(n);
    for (key, arg) in keys.iter().zip(&a[streams_at + n..]) {
        let s = c.st.read::<Stream>(db, key, now)?;
        if let Some((g, _)) = group {
            if !s.is_some_and(|s| s.groups.contains_key(&g[..])) {
                return Err(Error::other(format!(
                    "NOGROUP No such key '{}' or consumer group '{}' in XREADGROUP with GROUP option",
                    String::from_utf8_lossy(key),
                    String::from_utf8_lossy(g)
                )));
            }
        }
        from.push(if &arg[..] == b"$" {
            if xreadgroup {
                return Err(Error::other(
                    "ERR The $ ID is meaningless in the context of XREADGROUP: you want to read the history of this consumer by specifying a proper ID, or use the > ID to get new messages. The $ ID would just return an empty result set.",
                ));
            }
            From::After(s.map_or(StreamId::MIN, |s| s.last_id))
        } else if &arg[..] == b">" {
            if !xreadgroup {
                return Err(Error::other(
                    "ERR The > ID can be specified only when calling XREADGROUP using the GROUP <group> <consumer> option.",
                ));
            }
            From::New
        } else {
            From::After(strict_id(arg)?)
        });
    }
    if xreadgroup {
        c.no_propagate();
    }
    let mut body = ReplyBuf::new(c.out.resp3);
    let mut served = 0;
    for (key, f) in keys.iter().zip(&from) {
        let done = match group {
            Some((g, consumer)) => read_group(c, &mut body, key, g, consumer, *f, count, noack)?,
            None => read_plain(c, &mut body, key, *f, count)?,
        };
        served += done as usize;
    }
    if served > 0 {
        if c.out.resp3 {
            c.out.map(served);
        } else {
            c.out.array(served);
        }
        c.out.raw(&body.buf);
        return Ok(());
    }
    let Some(ms) = block else {
        c.out.null_array();
        return Ok(());
    };
    if !c.may_block() {
        c.out.null_array();
        return Ok(());
    }
    let deadline = (ms > 0).then(|| now.saturating_add(ms));
    let mut args: Vec<Bytes> = a[..streams_at - 1].to_vec();
    if count == 0 {
        args.push(Bytes::from_static(b"COUNT"));
        args.push(Bytes::from(BLOCKED_DEFAULT_COUNT.to_string()));
    }
    args.extend_from_slice(&a[streams_at - 1..streams_at + n]);
    for f in &from {
        args.push(match f {
            From::After(id) => super::ops::id_bytes(*id),
            From::New => Bytes::from_static(b">"),
        });
    }
    c.block(BlockKind::Stream, keys, deadline, &args);
    Ok(())
}

/// Writes `[key, entries]` for a plain read if the stream has entries
/// after the ID; true if it did.
fn read_plain(
    c: &mut Ctx,
    body: &mut ReplyBuf,
    key: &Bytes,
    from: From,
    count: usize,
) -> Result<bool, Error> {
    let From::After(after) = from else {
        return Ok(false);
    };
    let Some(s) = c.st.read::<Stream>(c.cl.db, key, c.now)? else {
        return Ok(false);
    };
    let Some(start) = after.incr().filter(|_| !s.is_empty()) else {
        return Ok(false);
    };
    if s.edge_id(true).is_none_or(|top| top <= after) {
        return Ok(false);
    }
    if !body.resp3 {
        body.array(2);
    }
    body.bulk(key);
    super::ops::reply_range(body, s, start, StreamId::MAX, count, false);
    Ok(true)
}

/// A group read of one stream; true if it wrote `[key, entries]`.
#[allow(clippy::too_many_arguments)]
fn read_group(
    c: &mut Ctx,
    body: &mut ReplyBuf,
    key: &Bytes,
    gname: &Bytes,
    cname: &Bytes,
    from: From,
    count: usize,
    noack: bool,
) -> Result<bool, Error> {
    let (db, now) = (c.cl.db, c.now);
    // What to propagate is built only if someone reads it.
    let prop_on = c.propagating();
    let s = c.st.write::<Stream>(db, key, now)?.expect("checked");
    let mut g = s.groups.remove(&gname[..]).expect("checked");
    let mut props: Vec<Vec<Bytes>> = Vec::new();
    let serve = match from {
        From::After(_) => true,
        From::New => s.edge_id(true).is_some_and(|top| top > g.last_id),
    };
    // The consumer comes to be when it is served something.
    let mut created = false;
    if serve {
        let (cons, new) = g.consumer(cname, now);
        cons.seen_time = now;
        created = new;
        if !body.resp3 {
            body.array(2);
        }
        body.bulk(key);
    }
    match (serve, from) {
        (false, _) => {}
        (true, From::After(after)) => {
            // History: the consumer's own pending entries after `after`.
            let start = after.incr().unwrap_or(StreamId::MAX);
            let ids: Vec<StreamId> = g.consumers[&cname[..]]
                .pel
                .range(start..)
                .take(if count == 0 { usize::MAX } else { count })
                .copied()
                .collect();
            body.array(ids.len());
            for id in ids {
                let mut found = false;
                s.range(id, id, false, |e| {
                    reply_entry(body, e);
                    found = true;
                    false
                });
                if found {
                    let nack = g.pel.get_mut(&id).expect("consumer PEL entry");
                    nack.delivery_time = now;
                    nack.delivery_count += 1;
                } else {
                    // Deleted since delivered: the ID with no fields.
                    body.array(2);
                    body.bulk(id.to_string().as_bytes());
                    body.null_array();
                }
            }
        }
        (true, From::New) => {
            let start = g.last_id.incr().unwrap_or(StreamId::MAX);
            let mut ids = Vec::new();
            let mut entries = ReplyBuf::new(body.resp3);
            s.range(start, StreamId::MAX, false, |e| {
                reply_entry(&mut entries, e);
                ids.push(e.id);
                count == 0 || ids.len() < count
            });
            body.array(ids.len());
            body.raw(&entries.buf);
            for &id in &ids {
                if id > g.last_id {
                    if g.entries_read != ENTRIES_READ_INVALID && !s.has_tombstones_from(id) {
                        g.entries_read += 1;
                    } else if s.entries_added > 0 {
                        g.entries_read = s.estimate_entries_read(id);
                    }
                    g.last_id = id;
                }
                if !noack {
                    g.assign(id, cname, now, 1, now);
                    if prop_on {
                        props.push(xclaim_propagation(key, gname, &g, id));
                    }
                }
            }
            // Without PEL entries to claim, the group's new position and
            // its consumer go out as such (as Redis 7.0.15 does).
            if prop_on && noack && !ids.is_empty() {
                props.push(group_id_propagation(key, gname, &g));
            }
        }
    }
    s.groups.insert(gname.to_vec(), g);
    if created {
        c.st.changed(class::STREAM, "xgroup-createconsumer", db, key);
        if noack {
            c.propagate_as(super::group::consumer_propagation(key, gname, cname));
        }
    }
    if serve {
        c.st.dirty += 1;
    }
    for p in props {
        c.propagate_as(p);
    }
    Ok(serve)
}
