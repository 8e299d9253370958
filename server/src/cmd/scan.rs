//! What SCAN, HSCAN, SSCAN and ZSCAN share: the cursor, the options after
//! it, and the reply.

use super::{int_arg, is};
use crate::core::error::Error;
use bytes::Bytes;
use storage::LpVal;

/// Parses a SCAN cursor as Redis does (`strtoull`): an optional sign
/// (a minus wraps around), decimal digits only, no leading space.
pub fn parse_cursor(b: &[u8]) -> Option<u64> {
    let (neg, digits) = match b.first() {
        Some(b'-') => (true, &b[1..]),
        Some(b'+') => (false, &b[1..]),
        _ => (false, b),
    };
    if digits.is_empty() && digits.len() != b.len() {
        // A bare sign converts nothing, so the end pointer is at the sign.
        return None;
    }
    let mut n: u64 = 0;
    for &d in digits {
        if !d.is_ascii_digit() {
            return None;
        }
        n = n.checked_mul(10)?.checked_add((d - b'0') as u64)?;
    }
    // strtoull accepts the empty string as 0.
    Some(if neg { n.wrapping_neg() } else { n })
}

pub fn cursor_arg(a: &[u8]) -> Result<u64, Error> {
    parse_cursor(a).ok_or_else(|| Error::other("ERR invalid cursor"))
}

/// The options after the cursor.
pub struct ScanOpts<'a> {
    pub count: usize,
    /// None for no MATCH or `MATCH *`.
    pub pattern: Option<&'a [u8]>,
    /// SCAN's TYPE filter.
    pub typ: Option<&'a [u8]>,
}

/// Parses `[MATCH pattern] [COUNT count]` (and `[TYPE type]` for SCAN).
pub fn scan_opts(a: &[Bytes], allow_type: bool) -> Result<ScanOpts<'_>, Error> {
    let mut o = ScanOpts {
        count: 10,
        pattern: None,
        typ: None,
    };
    for pair in a.chunks(2) {
        let [opt, val] = pair else {
            return Err(Error::Syntax);
        };
        if is(opt, "count") {
            let n = int_arg(val)?;
            if n < 1 {
                return Err(Error::Syntax);
            }
            o.count = usize::try_from(n).unwrap_or(usize::MAX);
        } else if is(opt, "match") {
            o.pattern = (&val[..] != b"*").then_some(&val[..]);
        } else if allow_type && is(opt, "type") {
            o.typ = Some(val);
        } else {
            return Err(Error::Syntax);
        }
    }
    Ok(o)
}

impl ScanOpts<'_> {
    pub fn matches(&self, b: &[u8]) -> bool {
        self.pattern
            .is_none_or(|p| storage::glob::matches(p, b, false))
    }

    pub fn matches_val(&self, v: LpVal) -> bool {
        self.matches(v.bytes(&mut itoa::Buffer::new()))
    }
}

/// Starts a SCAN reply: the next cursor; the elements' array follows.
pub fn reply_cursor(out: &mut protocol::ReplyBuf, cursor: u64) {
    out.array(2);
    out.bulk(itoa::Buffer::new().format(cursor).as_bytes());
}

/// Writes a whole SCAN reply.
pub fn scan_reply(out: &mut protocol::ReplyBuf, cursor: u64, items: &[LpVal]) {
    reply_cursor(out, cursor);
    out.array(items.len());
    let mut buf = itoa::Buffer::new();
    for v in items {
        out.bulk(v.bytes(&mut buf));
    }
}
