//! XINFO STREAM [FULL [COUNT n]], XINFO GROUPS, XINFO CONSUMERS, XINFO
//! HELP: Redis 7.0's fields, in its order (maps under RESP3).

use super::ops::{reply_entry, reply_range};
use crate::cmd::help::{bad_sub, help_reply};
use crate::cmd::{int_arg, is, Ctx, Handler};
use crate::core::error::{CmdResult, Error};
use bytes::Bytes;
use protocol::ReplyBuf;
use storage::stream::{Group, ENTRIES_READ_INVALID};
use storage::{Stream, StreamId};

pub static HANDLERS: &[(&str, Handler)] = &[
    ("xinfo|stream", xinfo_stream),
    ("xinfo|groups", xinfo_groups),
    ("xinfo|consumers", xinfo_consumers),
    ("xinfo|help", xinfo_help),
];

fn no_key() -> Error {
    Error::NoSuchKey
}

fn id(out: &mut ReplyBuf, id: StreamId) {
    out.bulk(id.to_string().as_bytes());
}

/// The group's `entries-read` and `lag` fields.
fn read_and_lag(out: &mut ReplyBuf, s: &Stream, g: &Group) {
    out.bulk(b"entries-read");
    if g.entries_read != ENTRIES_READ_INVALID {
        out.int(g.entries_read);
    } else {
        out.null();
    }
    out.bulk(b"lag");
    match s.lag(g) {
        Some(l) => out.int(l),
        None => out.null(),
    }
}

/// XINFO STREAM key [FULL [COUNT count]]
fn xinfo_stream(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let full = match a.len() {
        3 => None,
        4 if is(&a[3], "full") => Some(10),
        6 if is(&a[3], "full") && is(&a[4], "count") => {
            let n = int_arg(&a[5])?;
            Some(if n < 0 { 10 } else { n as usize })
        }
        _ => return Err(bad_sub(&a[1], "XINFO")),
    };
    let now = c.now;
    let s =
        c.st.read::<Stream>(c.cl.db, &a[2], now)?
            .ok_or_else(no_key)?;
    let out = &mut *c.out;
    out.map(if full.is_some() { 9 } else { 10 });
    out.bulk(b"length");
    out.int(s.len() as i64);
    out.bulk(b"radix-tree-keys");
    out.int(s.node_count() as i64);
    out.bulk(b"radix-tree-nodes");
    out.int(s.radix_tree_nodes() as i64);
    out.bulk(b"last-generated-id");
    id(out, s.last_id);
    out.bulk(b"max-deleted-entry-id");
    id(out, s.max_deleted_id);
    out.bulk(b"entries-added");
    out.int(s.entries_added as i64);
    out.bulk(b"recorded-first-entry-id");
    id(out, s.first_id);
    let Some(count) = full else {
        out.bulk(b"groups");
        out.int(s.groups.len() as i64);
        for (name, last) in [("first-entry", false), ("last-entry", true)] {
            out.bulk(name.as_bytes());
            let mut found = false;
            s.range(StreamId::MIN, StreamId::MAX, last, |e| {
                reply_entry(out, e);
                found = true;
                false
            });
            if !found {
                out.null();
            }
        }
        return Ok(());
    };
    let take = if count == 0 { usize::MAX } else { count };
    out.bulk(b"entries");
    reply_range(out, s, StreamId::MIN, StreamId::MAX, count, false);
    out.bulk(b"groups");
    out.array(s.groups.len());
    for (name, g) in &s.groups {
        out.map(7);
        out.bulk(b"name");
        out.bulk(name);
        out.bulk(b"last-delivered-id");
        id(out, g.last_id);
        read_and_lag(out, s, g);
        out.bulk(b"pel-count");
        out.int(g.pel.len() as i64);
        out.bulk(b"pending");
        out.array(g.pel.len().min(take));
        for (pid, n) in g.pel.iter().take(take) {
            out.array(4);
            id(out, *pid);
            out.bulk(&n.consumer);
            out.int(n.delivery_time);
            out.int(n.delivery_count as i64);
        }
        out.bulk(b"consumers");
        out.array(g.consumers.len());
        for (cname, k) in &g.consumers {
            out.map(4);
            out.bulk(b"name");
            out.bulk(cname);
            out.bulk(b"seen-time");
            out.int(k.seen_time);
            out.bulk(b"pel-count");
            out.int(k.pel.len() as i64);
            out.bulk(b"pending");
            out.array(k.pel.len().min(take));
            for pid in k.pel.iter().take(take) {
                let n = &g.pel[pid];
                out.array(3);
                id(out, *pid);
                out.int(n.delivery_time);
                out.int(n.delivery_count as i64);
            }
        }
    }
    Ok(())
}

/// XINFO GROUPS key
fn xinfo_groups(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let s =
        c.st.read::<Stream>(c.cl.db, &a[2], c.now)?
            .ok_or_else(no_key)?;
    let out = &mut *c.out;
    out.array(s.groups.len());
    for (name, g) in &s.groups {
        out.map(6);
        out.bulk(b"name");
        out.bulk(name);
        out.bulk(b"consumers");
        out.int(g.consumers.len() as i64);
        out.bulk(b"pending");
        out.int(g.pel.len() as i64);
        out.bulk(b"last-delivered-id");
        id(out, g.last_id);
        read_and_lag(out, s, g);
    }
    Ok(())
}

/// XINFO CONSUMERS key group
fn xinfo_consumers(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let now = c.now;
    let s =
        c.st.read::<Stream>(c.cl.db, &a[2], now)?
            .ok_or_else(no_key)?;
    let Some(g) = s.groups.get(&a[3][..]) else {
        return Err(super::group::no_group_for_key(&a[2], &a[3]));
    };
    let out = &mut *c.out;
    out.array(g.consumers.len());
    for (name, k) in &g.consumers {
        out.map(3);
        out.bulk(b"name");
        out.bulk(name);
        out.bulk(b"pending");
        out.int(k.pel.len() as i64);
        out.bulk(b"idle");
        out.int((now - k.seen_time).max(0));
    }
    Ok(())
}

/// XINFO HELP
fn xinfo_help(c: &mut Ctx, _a: &[Bytes]) -> CmdResult {
    help_reply(
        c,
        "XINFO",
        &[
            "CONSUMERS <key> <groupname>",
            "    Show consumers of <groupname>.",
            "GROUPS <key>",
            "    Show the stream consumer groups.",
            "STREAM <key> [FULL [COUNT <count>]",
            "    Show information about the stream.",
        ],
    );
    Ok(())
}
