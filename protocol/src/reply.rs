//! Reply encoding and decoding.
//!
//! [`ReplyBuf`] is the one place replies are written: command handlers call
//! its typed methods and never format RESP by hand. It knows the client's
//! protocol version, so RESP3-only types (map, set, double, boolean, null,
//! push) degrade to their RESP2 forms exactly as Redis does.

use bytes::{BufMut, Bytes, BytesMut};

#[derive(Debug, Default)]
pub struct ReplyBuf {
    pub buf: BytesMut,
    pub resp3: bool,
    /// Output past this many bytes is never sent (the client is closed for
    /// its output buffer limit), so a command producing an unbounded reply
    /// may stop early once it is [`full`](Self::full). 0: no cap.
    pub cap: usize,
}

/// Formats a double the way Redis 7.0 replies with one (`%.17g`, `inf`).
pub fn format_double(v: f64) -> String {
    if v.is_nan() {
        return "nan".into();
    }
    if v.is_infinite() {
        return if v > 0.0 { "inf".into() } else { "-inf".into() };
    }
    format_g(v, 17)
}

/// C's `%.{p}g`.
pub fn format_g(v: f64, p: usize) -> String {
    if v == 0.0 {
        return if v.is_sign_negative() {
            "-0".into()
        } else {
            "0".into()
        };
    }
    let sci = format!("{:.*e}", p - 1, v);
    let (mant, exp) = sci.split_once('e').unwrap();
    let x: i32 = exp.parse().unwrap();
    if x < -4 || x >= p as i32 {
        let mant = trim_zeros(mant);
        let sign = if x < 0 { '-' } else { '+' };
        format!("{mant}e{sign}{:02}", x.abs())
    } else {
        let s = format!("{:.*}", (p as i32 - 1 - x) as usize, v);
        trim_zeros(&s).to_string()
    }
}

fn trim_zeros(s: &str) -> &str {
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.')
    } else {
        s
    }
}

impl ReplyBuf {
    pub fn new(resp3: bool) -> Self {
        ReplyBuf {
            buf: BytesMut::with_capacity(4096),
            resp3,
            cap: 0,
        }
    }

    fn line(&mut self, prefix: u8, n: i64) {
        self.buf.put_u8(prefix);
        self.buf.put_slice(itoa::Buffer::new().format(n).as_bytes());
        self.buf.put_slice(b"\r\n");
    }

    pub fn ok(&mut self) {
        self.buf.put_slice(b"+OK\r\n");
    }

    /// `+text`: the text must not contain CR or LF.
    pub fn simple(&mut self, s: &str) {
        self.buf.put_u8(b'+');
        self.buf.put_slice(s.as_bytes());
        self.buf.put_slice(b"\r\n");
    }

    /// `-text`: `text` starts with the error code (`ERR`, `WRONGTYPE`, …).
    /// CR and LF would break the framing, so they become spaces as in Redis.
    pub fn error(&mut self, s: &str) {
        self.buf.put_u8(b'-');
        for &b in s.as_bytes() {
            self.buf
                .put_u8(if b == b'\r' || b == b'\n' { b' ' } else { b });
        }
        self.buf.put_slice(b"\r\n");
    }

    pub fn int(&mut self, n: i64) {
        self.line(b':', n);
    }

    pub fn bulk(&mut self, b: &[u8]) {
        self.line(b'$', b.len() as i64);
        self.buf.put_slice(b);
        self.buf.put_slice(b"\r\n");
    }

    pub fn bulk_int(&mut self, n: i64) {
        self.bulk(itoa::Buffer::new().format(n).as_bytes());
    }

    /// The null reply: `$-1` in RESP2, `_` in RESP3.
    pub fn null(&mut self) {
        if self.resp3 {
            self.buf.put_slice(b"_\r\n");
        } else {
            self.buf.put_slice(b"$-1\r\n");
        }
    }

    /// The null array: `*-1` in RESP2, `_` in RESP3.
    pub fn null_array(&mut self) {
        if self.resp3 {
            self.buf.put_slice(b"_\r\n");
        } else {
            self.buf.put_slice(b"*-1\r\n");
        }
    }

    pub fn array(&mut self, n: usize) {
        self.line(b'*', n as i64);
    }

    /// A map of `n` pairs; a flat array of `2n` in RESP2.
    pub fn map(&mut self, n: usize) {
        if self.resp3 {
            self.line(b'%', n as i64);
        } else {
            self.line(b'*', 2 * n as i64);
        }
    }

    pub fn set(&mut self, n: usize) {
        self.line(if self.resp3 { b'~' } else { b'*' }, n as i64);
    }

    pub fn push(&mut self, n: usize) {
        self.line(if self.resp3 { b'>' } else { b'*' }, n as i64);
    }

    pub fn double(&mut self, v: f64) {
        let s = format_double(v);
        if self.resp3 {
            self.buf.put_u8(b',');
            self.buf.put_slice(s.as_bytes());
            self.buf.put_slice(b"\r\n");
        } else {
            self.bulk(s.as_bytes());
        }
    }

    pub fn boolean(&mut self, b: bool) {
        if self.resp3 {
            self.buf.put_slice(if b { b"#t\r\n" } else { b"#f\r\n" });
        } else {
            self.int(b as i64);
        }
    }

    pub fn big_number(&mut self, digits: &str) {
        if self.resp3 {
            self.buf.put_u8(b'(');
            self.buf.put_slice(digits.as_bytes());
            self.buf.put_slice(b"\r\n");
        } else {
            self.bulk(digits.as_bytes());
        }
    }

    /// Verbatim text (`=len\r\ntxt:…`), a bulk string in RESP2.
    pub fn verbatim(&mut self, text: &[u8]) {
        if self.resp3 {
            self.line(b'=', text.len() as i64 + 4);
            self.buf.put_slice(b"txt:");
            self.buf.put_slice(text);
            self.buf.put_slice(b"\r\n");
        } else {
            self.bulk(text);
        }
    }

    pub fn raw(&mut self, bytes: &[u8]) {
        self.buf.put_slice(bytes);
    }

    pub fn len(&self) -> usize {
        self.buf.len()
    }

    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    pub fn full(&self) -> bool {
        self.cap != 0 && self.buf.len() >= self.cap
    }
}

/// A decoded reply.
#[derive(Debug, Clone, PartialEq)]
pub enum Frame {
    Simple(Bytes),
    Error(Bytes),
    Integer(i64),
    Bulk(Bytes),
    /// `$-1`, `*-1` or `_`.
    Null,
    Array(Vec<Frame>),
    Map(Vec<(Frame, Frame)>),
    Set(Vec<Frame>),
    Push(Vec<Frame>),
    Double(f64),
    Boolean(bool),
    BigNumber(Bytes),
    Verbatim(Bytes),
}

/// Parses one reply from the front of `buf`: the frame and the bytes it took,
/// or `None` if `buf` holds no complete, well-formed reply.
pub fn parse_reply(buf: &[u8]) -> Option<(Frame, usize)> {
    let end = buf.windows(2).position(|w| w == b"\r\n")?;
    let line = &buf[1..end];
    let text = || Bytes::copy_from_slice(line);
    let num = || std::str::from_utf8(line).ok()?.parse::<i64>().ok();
    let mut pos = end + 2;
    let items = |n: i64, pos: &mut usize| -> Option<Vec<Frame>> {
        let mut v = Vec::with_capacity(n.clamp(0, 1024) as usize);
        for _ in 0..n {
            let (f, used) = parse_reply(&buf[*pos..])?;
            *pos += used;
            v.push(f);
        }
        Some(v)
    };
    let frame = match *buf.first()? {
        b'+' => Frame::Simple(text()),
        b'-' => Frame::Error(text()),
        b':' => Frame::Integer(num()?),
        b'(' => Frame::BigNumber(text()),
        b'#' => Frame::Boolean(line == b"t"),
        b',' => Frame::Double(match line {
            b"inf" => f64::INFINITY,
            b"-inf" => f64::NEG_INFINITY,
            _ => std::str::from_utf8(line).ok()?.parse().ok()?,
        }),
        b'_' => Frame::Null,
        b'$' | b'=' => {
            let n = num()?;
            if n < 0 {
                Frame::Null
            } else {
                let n = n as usize;
                if buf.len() < pos + n + 2 {
                    return None;
                }
                let data = Bytes::copy_from_slice(&buf[pos..pos + n]);
                pos += n + 2;
                if buf[0] == b'=' {
                    Frame::Verbatim(data.slice(4.min(data.len())..))
                } else {
                    Frame::Bulk(data)
                }
            }
        }
        b'*' | b'~' | b'>' => {
            let n = num()?;
            if n < 0 {
                Frame::Null
            } else {
                let v = items(n, &mut pos)?;
                match buf[0] {
                    b'*' => Frame::Array(v),
                    b'~' => Frame::Set(v),
                    _ => Frame::Push(v),
                }
            }
        }
        b'%' => {
            let n = num()?;
            let mut v = items(2 * n, &mut pos)?.into_iter();
            let mut pairs = Vec::new();
            while let (Some(k), Some(val)) = (v.next(), v.next()) {
                pairs.push((k, val));
            }
            Frame::Map(pairs)
        }
        _ => return None,
    };
    Some((frame, pos))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_like_printf() {
        assert_eq!(format_double(0.1), "0.10000000000000001");
        assert_eq!(format_double(1.0), "1");
        assert_eq!(format_double(1.5e300), "1.5000000000000001e+300");
        assert_eq!(format_double(1e17), "1e+17");
        assert_eq!(format_double(123456.0), "123456");
        assert_eq!(format_double(0.0001), "0.0001");
        assert_eq!(format_double(0.00001), "1.0000000000000001e-05");
        assert_eq!(format_double(-2.5), "-2.5");
        assert_eq!(format_double(f64::INFINITY), "inf");
    }

    #[test]
    fn resp2_and_resp3_shapes() {
        let mut r = ReplyBuf::new(false);
        r.map(1);
        r.bulk(b"a");
        r.double(1.5);
        r.null();
        r.boolean(true);
        assert_eq!(&r.buf[..], b"*2\r\n$1\r\na\r\n$3\r\n1.5\r\n$-1\r\n:1\r\n");
        let mut r = ReplyBuf::new(true);
        r.map(1);
        r.bulk(b"a");
        r.double(1.5);
        r.null();
        r.boolean(true);
        assert_eq!(&r.buf[..], b"%1\r\n$1\r\na\r\n,1.5\r\n_\r\n#t\r\n");
        let (f, used) = parse_reply(&r.buf).unwrap();
        assert_eq!(
            f,
            Frame::Map(vec![(Frame::Bulk("a".into()), Frame::Double(1.5))])
        );
        assert_eq!(used, 17);
    }
}
