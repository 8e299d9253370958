//! Request decoder.
//!
//! Redis accepts two request forms: multibulk (`*N\r\n$len\r\narg\r\n…`) and
//! inline (a line of space separated, optionally quoted words). The decoder
//! consumes the input buffer as it goes and keeps its position inside a
//! multibulk request (`remaining`, `bulk_len`), so a large request arriving in
//! many reads is parsed in linear time: nothing is scanned twice except an
//! incomplete header line, which is bounded by [`MAX_INLINE`].

use bytes::{Buf, Bytes, BytesMut};
use std::fmt;

/// Longest inline request or multibulk header line Redis accepts (64 KiB).
pub const MAX_INLINE: usize = 64 * 1024;
/// Largest argument count of one multibulk request (Redis 7.0: INT_MAX).
pub const MAX_MULTIBULK: i64 = i32::MAX as i64;
/// Before a client authenticates Redis accepts only tiny requests, so an
/// unauthenticated peer cannot make it buffer much.
pub const UNAUTH_MAX_MULTIBULK: i64 = 10;
pub const UNAUTH_MAX_BULK: i64 = 16384;
/// `proto-max-bulk-len` default (512 MB).
pub const DEFAULT_MAX_BULK: i64 = 512 * 1024 * 1024;

/// A malformed request. Redis replies `-ERR Protocol error: …` and closes the
/// connection; `Display` gives the text after `ERR `.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProtocolError {
    TooBigInline,
    TooBigMbulkCount,
    TooBigBulkCount,
    InvalidMultibulkLength,
    InvalidBulkLength,
    UnauthenticatedMultibulkLength,
    UnauthenticatedBulkLength,
    UnbalancedQuotes,
    ExpectedDollar(u8),
}

impl fmt::Display for ProtocolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Protocol error: ")?;
        match self {
            Self::TooBigInline => f.write_str("too big inline request"),
            Self::TooBigMbulkCount => f.write_str("too big mbulk count string"),
            Self::TooBigBulkCount => f.write_str("too big bulk count string"),
            Self::InvalidMultibulkLength => f.write_str("invalid multibulk length"),
            Self::InvalidBulkLength => f.write_str("invalid bulk length"),
            Self::UnauthenticatedMultibulkLength => f.write_str("unauthenticated multibulk length"),
            Self::UnauthenticatedBulkLength => f.write_str("unauthenticated bulk length"),
            Self::UnbalancedQuotes => f.write_str("unbalanced quotes in request"),
            Self::ExpectedDollar(c) => write!(f, "expected '$', got '{}'", *c as char),
        }
    }
}

impl std::error::Error for ProtocolError {}

#[derive(Debug)]
pub struct Decoder {
    /// Arguments still expected by the multibulk request in progress (0: none).
    remaining: usize,
    /// Length of the bulk argument whose header has been read.
    bulk_len: Option<usize>,
    args: Vec<Bytes>,
    pub max_bulk: i64,
    /// Apply the small limits of a client that has not authenticated.
    pub unauthenticated: bool,
}

impl Default for Decoder {
    fn default() -> Self {
        Self::new(DEFAULT_MAX_BULK)
    }
}

/// An argument this large gets its room reserved once, when its header
/// arrives.
const BIG_ARG: usize = 32 * 1024;

fn find_crlf(buf: &[u8]) -> Option<usize> {
    memchr_nl(buf).and_then(|i| (i > 0 && buf[i - 1] == b'\r').then(|| i - 1))
}

fn memchr_nl(buf: &[u8]) -> Option<usize> {
    buf.iter().position(|&b| b == b'\n')
}

/// A length header's digits from `at` to its `\r\n` when they are plain
/// (1 to 9 digits, no sign), and the offset after the `\r\n`.
fn small_len(b: &[u8], at: usize) -> Option<(usize, usize)> {
    let mut v = 0usize;
    let mut i = at;
    while let Some(&c) = b.get(i).filter(|c| c.is_ascii_digit() && i - at < 10) {
        v = v * 10 + (c - b'0') as usize;
        i += 1;
    }
    let digits = i - at;
    if digits == 0 || digits > 9 || b.get(i) != Some(&b'\r') || b.get(i + 1) != Some(&b'\n') {
        return None;
    }
    Some((v, i + 2))
}

/// Parses the decimal in a length header. Redis accepts an optional sign
/// and nothing else.
fn parse_len(s: &[u8]) -> Option<i64> {
    let (neg, digits) = match s.first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    if digits.is_empty() || digits.len() > 19 || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let mut v: i64 = 0;
    for &d in digits {
        v = v.checked_mul(10)?.checked_add((d - b'0') as i64)?;
    }
    Some(if neg { -v } else { v })
}

impl Decoder {
    pub fn new(max_bulk: i64) -> Self {
        Decoder {
            remaining: 0,
            bulk_len: None,
            args: Vec::new(),
            max_bulk,
            unauthenticated: false,
        }
    }

    /// True while a request has been started but not completed.
    pub fn in_progress(&self) -> bool {
        self.remaining > 0
    }

    /// Bytes of the arguments of the request in progress read so far.
    pub fn partial_len(&self) -> usize {
        self.args.iter().map(|a| a.len()).sum()
    }

    /// The room reserved for a large argument whose header has been read
    /// (0: none).
    pub fn reserved(&self) -> usize {
        self.bulk_len.filter(|&l| l >= BIG_ARG).map_or(0, |l| l + 2)
    }

    /// Decodes the next complete request from `buf`, consuming its bytes.
    /// `Ok(None)`: more input is needed. Empty requests (`*0`, blank inline
    /// lines) are skipped as Redis skips them.
    pub fn decode(&mut self, buf: &mut BytesMut) -> Result<Option<Vec<Bytes>>, ProtocolError> {
        if self.remaining == 0 {
            if let Some(args) = self.whole(buf) {
                return Ok(Some(args));
            }
        }
        loop {
            if self.remaining == 0 {
                if buf.is_empty() {
                    return Ok(None);
                }
                if buf[0] != b'*' {
                    match self.inline(buf)? {
                        Some(args) if args.is_empty() => continue,
                        other => return Ok(other),
                    }
                }
                let Some(end) = find_crlf(buf) else {
                    if buf.len() > MAX_INLINE {
                        return Err(ProtocolError::TooBigMbulkCount);
                    }
                    return Ok(None);
                };
                let n = parse_len(&buf[1..end]);
                let n = match n {
                    Some(n) if self.unauthenticated && n > UNAUTH_MAX_MULTIBULK => {
                        return Err(ProtocolError::UnauthenticatedMultibulkLength)
                    }
                    Some(n) if n <= MAX_MULTIBULK => n,
                    _ => return Err(ProtocolError::InvalidMultibulkLength),
                };
                buf.advance(end + 2);
                if n <= 0 {
                    continue;
                }
                self.remaining = n as usize;
                self.args = Vec::with_capacity(self.remaining.min(1024));
            }
            while self.remaining > 0 {
                let len = match self.bulk_len {
                    Some(len) => len,
                    None => {
                        let Some(end) = find_crlf(buf) else {
                            if buf.len() > MAX_INLINE {
                                return Err(ProtocolError::TooBigBulkCount);
                            }
                            return Ok(None);
                        };
                        if buf[0] != b'$' {
                            return Err(ProtocolError::ExpectedDollar(buf[0]));
                        }
                        let len = match parse_len(&buf[1..end]) {
                            Some(l) if self.unauthenticated && l > UNAUTH_MAX_BULK => {
                                return Err(ProtocolError::UnauthenticatedBulkLength)
                            }
                            Some(l) if l >= 0 && l <= self.max_bulk => l as usize,
                            _ => return Err(ProtocolError::InvalidBulkLength),
                        };
                        buf.advance(end + 2);
                        self.bulk_len = Some(len);
                        len
                    }
                };
                if buf.len() < len + 2 {
                    // Large arguments: make room once instead of growing by doubling.
                    if len >= BIG_ARG {
                        buf.reserve(len + 2 - buf.len());
                    }
                    return Ok(None);
                }
                let arg = buf.split_to(len).freeze();
                buf.advance(2);
                self.args.push(arg);
                self.bulk_len = None;
                self.remaining -= 1;
            }
            return Ok(Some(std::mem::take(&mut self.args)));
        }
    }

    /// The common case, a whole multibulk request already in `buf` within
    /// every limit, taken in one piece: its arguments share one split of
    /// the buffer. `None` (nothing consumed) leaves anything else, errors
    /// included, to the general path above.
    fn whole(&self, buf: &mut BytesMut) -> Option<Vec<Bytes>> {
        let b = &buf[..];
        if b.first() != Some(&b'*') {
            return None;
        }
        let (n, mut p) = small_len(b, 1)?;
        let max_args = if self.unauthenticated {
            UNAUTH_MAX_MULTIBULK
        } else {
            1024
        };
        if n == 0 || n > max_args as usize {
            return None;
        }
        let max_bulk = if self.unauthenticated {
            UNAUTH_MAX_BULK.min(self.max_bulk)
        } else {
            self.max_bulk.min(BIG_ARG as i64 - 1)
        };
        let start = p;
        for _ in 0..n {
            if b.get(p) != Some(&b'$') {
                return None;
            }
            let (len, q) = small_len(b, p + 1)?;
            if len as i64 > max_bulk || b.len() < q + len + 2 {
                return None;
            }
            p = q + len + 2;
        }
        // Checked above: every header is `$<digits>\r\n`.
        buf.advance(start);
        let mut chunk = buf.split_to(p - start).freeze();
        let mut args = Vec::with_capacity(n);
        for _ in 0..n {
            let d = chunk[1..].iter().position(|&c| c == b'\r').unwrap_or(0);
            let len = chunk[1..1 + d]
                .iter()
                .fold(0, |v, &c| v * 10 + (c - b'0') as usize);
            chunk.advance(d + 3);
            args.push(chunk.split_to(len));
            chunk.advance(2);
        }
        Some(args)
    }

    fn inline(&mut self, buf: &mut BytesMut) -> Result<Option<Vec<Bytes>>, ProtocolError> {
        // Redis looks for the newline in a C string: a NUL before it hides
        // it, and the request waits for one (until it is too big), so a
        // TLS hello on the plain port gets silence, as from Redis.
        let nl = memchr_nl(buf).filter(|&nl| !buf[..nl].contains(&0));
        let Some(nl) = nl else {
            if buf.len() > MAX_INLINE {
                return Err(ProtocolError::TooBigInline);
            }
            return Ok(None);
        };
        let line = buf.split_to(nl + 1);
        let mut line = &line[..nl];
        if line.last() == Some(&b'\r') {
            line = &line[..line.len() - 1];
        }
        split_args(line)
            .map(Some)
            .ok_or(ProtocolError::UnbalancedQuotes)
    }
}

/// Splits an inline request into words the way redis-cli and Redis's inline
/// protocol do: blanks separate words, `"…"` supports `\n \r \t \b \a \\ \"`
/// and `\xHH` escapes, `'…'` supports only `\'`; a closing quote must be
/// followed by a blank or the end. `None` on unbalanced quotes.
pub fn split_args(line: &[u8]) -> Option<Vec<Bytes>> {
    // Redis splits a C string: a NUL ends the line.
    let line = &line[..line.iter().position(|&b| b == 0).unwrap_or(line.len())];
    let mut out = Vec::new();
    let mut i = 0;
    let n = line.len();
    loop {
        while i < n && line[i].is_ascii_whitespace() {
            i += 1;
        }
        if i >= n {
            return Some(out);
        }
        let mut cur = Vec::new();
        let mut in_dq = false;
        let mut in_sq = false;
        loop {
            if in_dq {
                if i >= n {
                    return None;
                }
                let c = line[i];
                if c == b'\\'
                    && i + 3 < n
                    && line[i + 1] == b'x'
                    && is_hex(line[i + 2])
                    && is_hex(line[i + 3])
                {
                    cur.push(hex(line[i + 2]) * 16 + hex(line[i + 3]));
                    i += 3;
                } else if c == b'\\' && i + 1 < n {
                    i += 1;
                    cur.push(match line[i] {
                        b'n' => b'\n',
                        b'r' => b'\r',
                        b't' => b'\t',
                        b'b' => 8,
                        b'a' => 7,
                        other => other,
                    });
                } else if c == b'"' {
                    if i + 1 < n && !line[i + 1].is_ascii_whitespace() {
                        return None;
                    }
                    i += 1;
                    break;
                } else {
                    cur.push(c);
                }
            } else if in_sq {
                if i >= n {
                    return None;
                }
                let c = line[i];
                if c == b'\\' && i + 1 < n && line[i + 1] == b'\'' {
                    i += 1;
                    cur.push(b'\'');
                } else if c == b'\'' {
                    if i + 1 < n && !line[i + 1].is_ascii_whitespace() {
                        return None;
                    }
                    i += 1;
                    break;
                } else {
                    cur.push(c);
                }
            } else {
                if i >= n {
                    break;
                }
                match line[i] {
                    b' ' | b'\n' | b'\r' | b'\t' => break,
                    b'"' => in_dq = true,
                    b'\'' => in_sq = true,
                    c => cur.push(c),
                }
            }
            i += 1;
        }
        out.push(Bytes::from(cur));
    }
}

fn is_hex(c: u8) -> bool {
    c.is_ascii_hexdigit()
}

fn hex(c: u8) -> u8 {
    (c as char).to_digit(16).unwrap_or(0) as u8
}

/// Appends a command in RESP (a multibulk of bulk strings), as clients,
/// the AOF and the replication stream write it.
pub fn write_command<A: AsRef<[u8]>>(buf: &mut Vec<u8>, args: &[A]) {
    let mut ib = itoa::Buffer::new();
    buf.push(b'*');
    buf.extend_from_slice(ib.format(args.len()).as_bytes());
    buf.extend_from_slice(b"\r\n");
    for a in args {
        let a = a.as_ref();
        buf.push(b'$');
        buf.extend_from_slice(ib.format(a.len()).as_bytes());
        buf.extend_from_slice(b"\r\n");
        buf.extend_from_slice(a);
        buf.extend_from_slice(b"\r\n");
    }
}

/// Redis's `sdscatrepr`: a double-quoted string with C escapes, which
/// [`split_args`] reads back (MONITOR lines, the AOF manifest).
pub fn repr(a: &[u8]) -> String {
    let mut s = String::from("\"");
    for &b in a {
        match b {
            b'\\' => s.push_str("\\\\"),
            b'"' => s.push_str("\\\""),
            b'\n' => s.push_str("\\n"),
            b'\r' => s.push_str("\\r"),
            b'\t' => s.push_str("\\t"),
            7 => s.push_str("\\a"),
            8 => s.push_str("\\b"),
            0x20..=0x7e => s.push(b as char),
            _ => s.push_str(&format!("\\x{b:02x}")),
        }
    }
    s.push('"');
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all(input: &[u8]) -> Result<Vec<Vec<Bytes>>, ProtocolError> {
        let mut d = Decoder::default();
        let mut buf = BytesMut::from(input);
        let mut out = vec![];
        while let Some(a) = d.decode(&mut buf)? {
            out.push(a);
        }
        Ok(out)
    }

    #[test]
    fn multibulk_and_inline() {
        let r = all(b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\nPING\r\n*0\r\n\r\nset a \"b c\"\n").unwrap();
        assert_eq!(r.len(), 3);
        assert_eq!(r[0], vec![Bytes::from("GET"), Bytes::from("k")]);
        assert_eq!(r[1], vec![Bytes::from("PING")]);
        assert_eq!(
            r[2],
            vec![Bytes::from("set"), Bytes::from("a"), Bytes::from("b c")]
        );
    }

    #[test]
    fn byte_by_byte_is_resumable() {
        let input = b"*3\r\n$3\r\nSET\r\n$4\r\nk\r\n\0\r\n$0\r\n\r\n";
        let mut d = Decoder::default();
        let mut buf = BytesMut::new();
        let mut got = None;
        for &b in input.iter() {
            buf.extend_from_slice(&[b]);
            if let Some(a) = d.decode(&mut buf).unwrap() {
                got = Some(a);
            }
        }
        let got = got.unwrap();
        assert_eq!(&got[1][..], b"k\r\n\0");
        assert_eq!(&got[2][..], b"");
        assert!(buf.is_empty());
    }

    /// Whole requests take the one-piece path, requests fed a byte at a
    /// time the general one: both read the same arguments.
    #[test]
    fn whole_and_piecewise_agree() {
        let mut input = b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$0\r\n\r\n".to_vec();
        input.extend_from_slice(b"*2\r\n$+3\r\nGET\r\n$01\r\nk\r\n*0\r\n");
        input.extend_from_slice(b"*2\r\n$4\r\nECHO\r\n$40000\r\n");
        input.extend(vec![b'x'; 40000]);
        input.extend_from_slice(b"\r\nPING\r\n*1\r\n$4\r\nPING\r\n");
        let whole = all(&input).unwrap();
        let mut d = Decoder::default();
        let mut buf = BytesMut::new();
        let mut piecewise = vec![];
        for &b in &input {
            buf.extend_from_slice(&[b]);
            while let Some(a) = d.decode(&mut buf).unwrap() {
                piecewise.push(a);
            }
        }
        assert_eq!(whole, piecewise);
        assert_eq!(whole.len(), 5);
        assert_eq!(whole[0][2], Bytes::new());
        assert_eq!(whole[1], vec![Bytes::from("GET"), Bytes::from("k")]);
        assert_eq!(whole[2][1].len(), 40000);
    }

    #[test]
    fn errors() {
        assert_eq!(
            all(b"*1\r\n+foo\r\n"),
            Err(ProtocolError::ExpectedDollar(b'+'))
        );
        assert_eq!(all(b"*abc\r\n"), Err(ProtocolError::InvalidMultibulkLength));
        assert_eq!(
            all(b"*2147483648\r\n"),
            Err(ProtocolError::InvalidMultibulkLength)
        );
        let mut unauth = Decoder {
            unauthenticated: true,
            ..Decoder::default()
        };
        let mut buf = BytesMut::from(&b"*11\r\n"[..]);
        assert_eq!(
            unauth.decode(&mut buf),
            Err(ProtocolError::UnauthenticatedMultibulkLength)
        );
        let mut buf = BytesMut::from(&b"*1\r\n$16385\r\n"[..]);
        assert_eq!(
            unauth.decode(&mut buf),
            Err(ProtocolError::UnauthenticatedBulkLength)
        );
        assert_eq!(all(b"*1\r\n$-1\r\n"), Err(ProtocolError::InvalidBulkLength));
        assert_eq!(
            all(b"*1\r\n$536870913\r\n"),
            Err(ProtocolError::InvalidBulkLength)
        );
        assert_eq!(all(b"set \"a\n"), Err(ProtocolError::UnbalancedQuotes));
        assert_eq!(all(&vec![b'a'; 70000]), Err(ProtocolError::TooBigInline));
        let mut big = b"*".to_vec();
        big.extend(vec![b'1'; 70000]);
        assert_eq!(all(&big), Err(ProtocolError::TooBigMbulkCount));
    }

    #[test]
    fn split_quotes() {
        let a = split_args(br#"a "x\x41\n" 'it\'s' """#).unwrap();
        assert_eq!(
            a,
            vec![
                Bytes::from("a"),
                Bytes::from("xA\n"),
                Bytes::from("it's"),
                Bytes::from("")
            ]
        );
        assert!(split_args(br#""a"b"#).is_none());
    }

    /// Found by the fuzzer: a NUL in an inline request made the splitter
    /// push empty words forever (out of memory).
    #[test]
    fn nul_ends_an_inline_line() {
        assert_eq!(split_args(b"\0"), Some(vec![]));
        assert_eq!(
            split_args(b"get a\0b"),
            Some(vec![Bytes::from("get"), Bytes::from("a")])
        );
    }
}
