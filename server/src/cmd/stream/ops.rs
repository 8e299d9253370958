//! What the stream family's files share: IDs as arguments and replies,
//! entries and ranges as replies, the node limits.

use crate::cmd::Ctx;
use crate::core::error::Error;
use bytes::Bytes;
use protocol::ReplyBuf;
use storage::stream::{Entry, NodeLimits};
use storage::{LpVal, Stream, StreamId};

pub const INVALID_ID: &str = "ERR Invalid stream ID specified as stream command argument";

fn invalid_id() -> Error {
    Error::other(INVALID_ID)
}

/// Redis's `string2ull`: a strict integer first (negative refused), then
/// `strtoull`'s looser form (leading blanks, a sign, leading zeros; a
/// minus wraps): SCAN's cursor rule after the blanks, with a digit needed.
/// A number that fits an i64 must not be negative (Redis's `string2ull`).
fn parse_u64(s: &[u8]) -> Option<u64> {
    if let Some(n) = storage::num::parse_i64(s) {
        return u64::try_from(n).ok();
    }
    let blanks = s
        .iter()
        .take_while(|c| matches!(c, b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c))
        .count();
    let t = &s[blanks..];
    if t.is_empty() {
        return None;
    }
    crate::cmd::scan::parse_cursor(t)
}

/// Parses `ms-seq`, `ms` (seq = `missing_seq`), and unless `strict` the
/// `-`/`+` shorthands. With `seq_given`, `ms-*` parses with seq 0 and
/// clears it.
pub fn parse_id(
    a: &[u8],
    missing_seq: u64,
    strict: bool,
    seq_given: Option<&mut bool>,
) -> Result<StreamId, Error> {
    // Redis reads the argument as a C string of at most 127 bytes.
    if a.len() > 127 {
        return Err(invalid_id());
    }
    let a = a.split(|&b| b == 0).next().unwrap_or(a);
    if !strict {
        if a == b"-" {
            return Ok(StreamId::MIN);
        }
        if a == b"+" {
            return Ok(StreamId::MAX);
        }
    } else if a == b"-" || a == b"+" {
        return Err(invalid_id());
    }
    let (ms, seq) = match a.iter().position(|&b| b == b'-') {
        Some(d) => (&a[..d], Some(&a[d + 1..])),
        None => (a, None),
    };
    let ms = parse_u64(ms).ok_or_else(invalid_id)?;
    let seq = match seq {
        None => missing_seq,
        Some(b"*") if seq_given.is_some() => {
            if let Some(g) = seq_given {
                *g = false;
            }
            0
        }
        Some(s) => parse_u64(s).ok_or_else(invalid_id)?,
    };
    Ok(StreamId::new(ms, seq))
}

/// A strict ID (no `-`/`+`), seq 0 when missing.
pub fn strict_id(a: &[u8]) -> Result<StreamId, Error> {
    parse_id(a, 0, true, None)
}

/// A range bound: `(` makes it exclusive.
pub fn interval_id(a: &[u8], missing_seq: u64) -> Result<(StreamId, bool), Error> {
    if a.len() > 1 && a[0] == b'(' {
        Ok((parse_id(&a[1..], missing_seq, true, None)?, true))
    } else {
        Ok((parse_id(a, missing_seq, false, None)?, false))
    }
}

pub fn id_bytes(id: StreamId) -> Bytes {
    Bytes::copy_from_slice(id.text(&mut [0; 41]))
}

pub fn node_limits(c: &Ctx) -> NodeLimits {
    NodeLimits {
        max_bytes: c.st.cfg.stream_node_max_bytes.max(0) as usize,
        max_entries: c.st.cfg.stream_node_max_entries.max(0) as usize,
    }
}

/// Writes one entry: its ID and its fields and values, flat.
pub fn reply_entry(out: &mut ReplyBuf, e: &Entry) {
    out.array(2);
    out.bulk(e.id.text(&mut [0; 41]));
    out.array(e.num_fields() * 2);
    let mut buf = itoa::Buffer::new();
    e.for_each(|f, v| {
        out.bulk(lp_bytes(f, &mut buf));
        out.bulk(lp_bytes(v, &mut buf));
    });
}

fn lp_bytes<'a>(v: LpVal<'a>, buf: &'a mut itoa::Buffer) -> &'a [u8] {
    match v {
        LpVal::Int(n) => buf.format(n).as_bytes(),
        LpVal::Str(s) => s,
    }
}

/// Writes up to `count` (0: all) entries of `s` in `start..=end`; returns
/// how many.
pub fn reply_range(
    out: &mut ReplyBuf,
    s: &Stream,
    start: StreamId,
    end: StreamId,
    count: usize,
    rev: bool,
) -> usize {
    let mut n = 0;
    let mut body = ReplyBuf::new(out.resp3);
    s.range(start, end, rev, |e| {
        reply_entry(&mut body, e);
        n += 1;
        count == 0 || n < count
    });
    out.array(n);
    out.raw(&body.buf);
    n
}
