//! Stream commands: XADD, XRANGE/XREVRANGE, XLEN, XDEL, XTRIM, XSETID
//! here; XREAD/XREADGROUP in [`read`], consumer groups in [`group`],
//! XINFO in [`info`].
//!
//! The structure (nodes, trimming, the entries-read bookkeeping) lives in
//! `storage::stream`; here are the arguments in Redis's order, the
//! replies, the keyspace events and what is propagated: XADD with the ID
//! it generated, and an approximate trim (`~`, LIMIT) rewritten to the
//! exact one it performed, so the AOF replays the same stream.

pub(crate) mod group;
pub mod info;
pub mod ops;
pub mod read;

use self::ops::{id_bytes, interval_id, node_limits, parse_id, reply_range, strict_id};
use super::{int_arg, is, Ctx, Handler};
use crate::core::config::class;
use crate::core::error::{CmdResult, Error};
use bytes::Bytes;
use storage::stream::Trim;
use storage::{Stream, StreamId, Value};

pub static HANDLERS: &[(&str, Handler)] = &[
    ("xadd", xadd),
    ("xrange", xrange),
    ("xrevrange", xrevrange),
    ("xlen", xlen),
    ("xdel", xdel),
    ("xtrim", xtrim),
    ("xsetid", xsetid),
];

/// Trimming options shared by XADD and XTRIM (Redis's
/// `streamParseAddOrTrimArgsOrReply`).
struct TrimArgs {
    how: Option<Trim>,
    approx: bool,
    limit: u64,
    /// Index of the MAXLEN/MINID value, rewritten for propagation.
    arg_at: usize,
    no_mkstream: bool,
    /// XADD's ID: `None` for `*`; the flag is false for `ms-*`.
    id: Option<(StreamId, bool)>,
    /// Index of XADD's ID argument.
    id_at: usize,
}

fn trim_args(c: &Ctx, a: &[Bytes], xadd: bool) -> Result<TrimArgs, Error> {
    let mut t = TrimArgs {
        how: None,
        approx: false,
        limit: 0,
        arg_at: 0,
        no_mkstream: false,
        id: None,
        id_at: 0,
    };
    let mut limit: Option<i64> = None;
    let mut i = 2;
    while i < a.len() {
        let more = a.len() - 1 - i;
        let opt = &a[i];
        if xadd && &opt[..] == b"*" {
            break;
        } else if (is(opt, "maxlen") || is(opt, "minid")) && more > 0 {
            if t.how.is_some() {
                return Err(Error::other(
                    "ERR syntax error, MAXLEN and MINID options at the same time are not compatible",
                ));
            }
            t.approx = false;
            let next = &a[i + 1][..];
            if more >= 2 && next == b"~" {
                t.approx = true;
                i += 1;
            } else if more >= 2 && next == b"=" {
                i += 1;
            }
            if is(opt, "maxlen") {
                let n = int_arg(&a[i + 1])?;
                if n < 0 {
                    return Err(Error::other("ERR The MAXLEN argument must be >= 0."));
                }
                t.how = Some(Trim::MaxLen(n as u64));
            } else {
                t.how = Some(Trim::MinId(strict_id(&a[i + 1])?));
            }
            i += 1;
            t.arg_at = i;
        } else if is(opt, "limit") && more > 0 {
            let n = int_arg(&a[i + 1])?;
            if n < 0 {
                return Err(Error::other("ERR The LIMIT argument must be >= 0."));
            }
            limit = Some(n);
            i += 1;
        } else if xadd && is(opt, "nomkstream") {
            t.no_mkstream = true;
        } else if xadd {
            let mut seq_given = true;
            let id = parse_id(opt, 0, true, Some(&mut seq_given))?;
            t.id = Some((id, seq_given));
            break;
        } else {
            return Err(Error::Syntax);
        }
        i += 1;
    }
    t.id_at = i;
    if limit.is_some_and(|l| l > 0) && t.how.is_none() {
        return Err(Error::other(
            "ERR syntax error, LIMIT cannot be used without specifying a trimming strategy",
        ));
    }
    if !xadd && t.how.is_none() {
        return Err(Error::other(
            "ERR syntax error, XTRIM must be called with a trimming strategy",
        ));
    }
    if c.st.aof.loading {
        // Replayed commands were rewritten to exact trims.
        t.limit = 0;
    } else if let Some(l) = limit {
        if !t.approx {
            return Err(Error::other(
                "ERR syntax error, LIMIT cannot be used without the special ~ option",
            ));
        }
        t.limit = l as u64;
    } else if t.approx {
        let l = 100 * c.st.cfg.stream_node_max_entries;
        t.limit = if l <= 0 || l > 1_000_000 {
            10_000
        } else {
            l as u64
        };
    }
    Ok(t)
}

/// The arguments with an approximate trim made exact: `~` becomes `=`
/// and the value what the stream now holds.
fn exact_trim_args(a: &[Bytes], t: &TrimArgs, s: &Stream) -> Vec<Bytes> {
    let mut v = a.to_vec();
    v[t.arg_at - 1] = Bytes::from_static(b"=");
    v[t.arg_at] = match t.how {
        Some(Trim::MaxLen(_)) => Bytes::from(s.len().to_string()),
        _ => id_bytes(s.first_entry_id().unwrap_or(StreamId::MAX)),
    };
    v
}

/// XADD key [NOMKSTREAM] [MAXLEN|MINID [=|~] threshold [LIMIT count]] *|id field value [field value ...]
fn xadd(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let t = trim_args(c, a, true)?;
    let fields = &a[(t.id_at + 1).min(a.len())..];
    if fields.len() < 2 || fields.len() % 2 == 1 {
        return Err(Error::Arity("xadd".into()));
    }
    if let Some((id, true)) = t.id {
        if id.is_zero() {
            return Err(Error::other(
                "ERR The ID specified in XADD must be greater than 0-0",
            ));
        }
    }
    let (db, now, lim) = (c.cl.db, c.now, node_limits(c));
    // The rewritten arguments are built only if someone reads them.
    let prop_on = c.propagating();
    if t.no_mkstream && c.st.write::<Stream>(db, &a[1], now)?.is_none() {
        c.out.null();
        return Ok(());
    }
    let s =
        c.st.write_or_create::<Stream>(db, &a[1], now, || Value::Stream(Box::default()))?;
    if s.last_id == StreamId::MAX {
        return Err(Error::other(
            "ERR The stream has exhausted the last possible ID, unable to add more items",
        ));
    }
    let last = s.last_id;
    let id = match t.id {
        None => {
            let ms = now as u64;
            if ms > last.ms {
                Some(StreamId::new(ms, 0))
            } else {
                last.incr()
            }
        }
        Some((id, true)) => (id > last).then_some(id),
        Some((id, false)) => match id.ms.cmp(&last.ms) {
            std::cmp::Ordering::Greater => Some(id),
            std::cmp::Ordering::Equal => last.seq.checked_add(1).map(|q| StreamId::new(id.ms, q)),
            std::cmp::Ordering::Less => None,
        },
    };
    let Some(id) = id else {
        if matches!(t.id, Some((id, false)) if id.ms == last.ms) {
            // Redis's text for a sequence that cannot grow.
            return Err(Error::other("ERR Elements are too large to be stored"));
        }
        return Err(Error::other(
            "ERR The ID specified in XADD is equal or smaller than the target stream top item",
        ));
    };
    if fields.iter().map(|f| f.len()).sum::<usize>() > storage::stream::MAX_ENTRY_BYTES {
        return Err(Error::other("ERR Elements are too large to be stored"));
    }
    s.append(id, fields, lim);
    let idb = id_bytes(id);
    c.out.bulk(&idb);
    let mut trimmed = 0;
    let mut prop = None;
    if let Some(how) = t.how {
        trimmed = s.trim(how, t.approx, t.limit);
        if t.approx && prop_on {
            prop = Some(exact_trim_args(a, &t, s));
        }
    }
    c.st.changed(class::STREAM, "xadd", db, &a[1]);
    if trimmed > 0 {
        c.st.notify(class::STREAM, "xtrim", db, &a[1]);
    }
    if prop_on && (prop.is_some() || !matches!(t.id, Some((_, true)))) {
        let mut v = prop.unwrap_or_else(|| a.to_vec());
        v[t.id_at] = idb;
        c.propagate_as(v);
    }
    Ok(())
}

/// XRANGE key start end [COUNT count]
fn xrange(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    range_generic(c, a, false)
}

/// XREVRANGE key end start [COUNT count]
fn xrevrange(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    range_generic(c, a, true)
}

fn range_generic(c: &mut Ctx, a: &[Bytes], rev: bool) -> CmdResult {
    let (sa, ea) = if rev { (&a[3], &a[2]) } else { (&a[2], &a[3]) };
    let (mut start, sx) = interval_id(sa, 0)?;
    if sx {
        start = start
            .incr()
            .ok_or_else(|| Error::other("ERR invalid start ID for the interval"))?;
    }
    let (mut end, ex) = interval_id(ea, u64::MAX)?;
    if ex {
        end = end
            .decr()
            .ok_or_else(|| Error::other("ERR invalid end ID for the interval"))?;
    }
    let mut count: i64 = -1;
    let mut j = 4;
    while j < a.len() {
        if is(&a[j], "count") && j + 1 < a.len() {
            count = int_arg(&a[j + 1])?.max(0);
            j += 2;
        } else {
            return Err(Error::Syntax);
        }
    }
    let Some(s) = c.st.read::<Stream>(c.cl.db, &a[1], c.now)? else {
        c.out.array(0);
        return Ok(());
    };
    if count == 0 {
        c.out.null_array();
        return Ok(());
    }
    reply_range(c.out, s, start, end, count.max(0) as usize, rev);
    Ok(())
}

/// XLEN key
fn xlen(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let n =
        c.st.read::<Stream>(c.cl.db, &a[1], c.now)?
            .map_or(0, |s| s.len());
    c.out.int(n as i64);
    Ok(())
}

/// XDEL key id [id ...]
fn xdel(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let db = c.cl.db;
    if c.st.write::<Stream>(db, &a[1], c.now)?.is_none() {
        c.out.int(0);
        return Ok(());
    }
    let ids = a[2..]
        .iter()
        .map(|x| strict_id(x))
        .collect::<Result<Vec<_>, _>>()?;
    let s = c.st.write::<Stream>(db, &a[1], c.now)?.expect("checked");
    let n = s.delete_ids(&ids);
    if n > 0 {
        c.st.changed(class::STREAM, "xdel", db, &a[1]);
    }
    c.out.int(n as i64);
    Ok(())
}

/// XTRIM key MAXLEN|MINID [=|~] threshold [LIMIT count]
fn xtrim(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let t = trim_args(c, a, false)?;
    let db = c.cl.db;
    let Some(s) = c.st.write::<Stream>(db, &a[1], c.now)? else {
        c.out.int(0);
        return Ok(());
    };
    let n = s.trim(t.how.expect("checked"), t.approx, t.limit);
    if n > 0 {
        let prop = t.approx.then(|| exact_trim_args(a, &t, s));
        c.st.changed(class::STREAM, "xtrim", db, &a[1]);
        if let Some(p) = prop {
            c.propagate_as(p);
        }
    }
    c.out.int(n as i64);
    Ok(())
}

/// XSETID key last-id [ENTRIESADDED entries-added] [MAXDELETEDID max-deleted-id]
fn xsetid(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let id = strict_id(&a[2])?;
    let mut added: Option<u64> = None;
    let mut max_del: Option<StreamId> = None;
    let mut i = 3;
    while i < a.len() {
        if is(&a[i], "entriesadded") && i + 1 < a.len() {
            let n = int_arg(&a[i + 1])?;
            if n < 0 {
                return Err(Error::other("ERR entries_added must be positive"));
            }
            added = Some(n as u64);
        } else if is(&a[i], "maxdeletedid") && i + 1 < a.len() {
            let m = strict_id(&a[i + 1])?;
            if id < m {
                return Err(Error::other(
                    "ERR The ID specified in XSETID is smaller than the provided max_deleted_entry_id",
                ));
            }
            max_del = Some(m);
        } else {
            return Err(Error::Syntax);
        }
        i += 2;
    }
    let db = c.cl.db;
    let Some(s) = c.st.write::<Stream>(db, &a[1], c.now)? else {
        return Err(Error::NoSuchKey);
    };
    if !s.is_empty() {
        if s.edge_id(true).is_some_and(|top| id < top) {
            return Err(Error::other(
                "ERR The ID specified in XSETID is smaller than the target stream top item",
            ));
        }
        if added.is_some_and(|n| n < s.len()) {
            return Err(Error::other(
                "ERR The entries_added specified in XSETID is smaller than the target stream length",
            ));
        }
    }
    s.last_id = id;
    if let Some(n) = added {
        s.entries_added = n;
    }
    if let Some(m) = max_del.filter(|m| !m.is_zero()) {
        s.max_deleted_id = m;
    }
    c.st.changed(class::STREAM, "xsetid", db, &a[1]);
    c.out.ok();
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_parse_as_redis() {
        let p = |s: &str| parse_id(s.as_bytes(), 0, false, None).ok();
        assert_eq!(p("1-2"), Some(StreamId::new(1, 2)));
        assert_eq!(p("01-+2"), Some(StreamId::new(1, 2)));
        assert_eq!(p(" 5"), Some(StreamId::new(5, 0)));
        assert_eq!(p("-"), Some(StreamId::MIN));
        assert_eq!(p("-1"), None);
        assert_eq!(p("-05"), None);
        assert_eq!(p("1--05"), Some(StreamId::new(1, 5u64.wrapping_neg())));
        assert_eq!(p("1-2-3"), None);
        assert_eq!(p("1-"), None);
        assert_eq!(p("18446744073709551616"), None);
        assert_eq!(
            p("18446744073709551615-18446744073709551615"),
            Some(StreamId::MAX)
        );
        let mut g = true;
        assert_eq!(
            parse_id(b"7-*", 0, true, Some(&mut g)).ok(),
            Some(StreamId::new(7, 0))
        );
        assert!(!g);
        assert!(parse_id(b"+", 0, true, None).is_err());
    }
}
