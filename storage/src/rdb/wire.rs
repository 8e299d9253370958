//! The format's primitives both directions share: lengths, strings and
//! their special encodings, and the bounds-checked reader. They sit below
//! decode, encode and stream and import none of them, so those three need
//! not import one another.

use super::blob::BlobError;
use crate::lzf;
use std::borrow::Cow;

/// Why a file was refused, and the byte offset where the problem is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadError {
    pub msg: String,
    pub offset: usize,
}

impl std::fmt::Display for LoadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} at offset {}", self.msg, self.offset)
    }
}

impl std::error::Error for LoadError {}

pub(super) struct Reader<'a> {
    d: &'a [u8],
    pub(super) p: usize,
    /// More input may follow `d`: running past its end sets `short`
    /// rather than meaning the input is cut.
    more: bool,
    short: bool,
}

pub(super) type R<T> = Result<T, LoadError>;

pub(super) fn at<T>(msg: impl Into<String>, offset: usize) -> R<T> {
    Err(LoadError {
        msg: msg.into(),
        offset,
    })
}

enum Len {
    Plain(u64),
    /// The special string encodings: 0..2 integers, 3 LZF.
    Enc(u8),
}

impl<'a> Reader<'a> {
    pub(super) fn new(d: &'a [u8]) -> Self {
        Self::window(d, false)
    }

    /// `d` with `more` input possibly after it, as a streamed load reads.
    pub(super) fn window(d: &'a [u8], more: bool) -> Self {
        Reader {
            d,
            p: 0,
            more,
            short: false,
        }
    }

    /// The last read ran past a window that more input may follow: the
    /// record is to be read again with more held, not refused.
    pub(super) fn short(&self) -> bool {
        self.short
    }

    fn past_the_end<T>(&mut self) -> R<T> {
        self.short = self.more;
        at("unexpected end of file", self.d.len())
    }

    pub(super) fn take(&mut self, n: usize) -> R<&'a [u8]> {
        match self.p.checked_add(n) {
            Some(e) if e <= self.d.len() => {
                let s = &self.d[self.p..e];
                self.p = e;
                Ok(s)
            }
            _ => self.past_the_end(),
        }
    }

    pub(super) fn byte(&mut self) -> R<u8> {
        Ok(self.take(1)?[0])
    }

    fn len_or_enc(&mut self) -> R<Len> {
        let start = self.p;
        let b = self.byte()?;
        Ok(match b >> 6 {
            0 => Len::Plain((b & 0x3f) as u64),
            1 => Len::Plain(((b & 0x3f) as u64) << 8 | self.byte()? as u64),
            2 => match b {
                0x80 => {
                    let s = self.take(4)?;
                    Len::Plain(u32::from_be_bytes([s[0], s[1], s[2], s[3]]) as u64)
                }
                0x81 => {
                    let s = self.take(8)?;
                    let mut a = [0u8; 8];
                    a.copy_from_slice(s);
                    Len::Plain(u64::from_be_bytes(a))
                }
                _ => return at(format!("unknown length encoding 0x{b:02x}"), start),
            },
            _ => Len::Enc(b & 0x3f),
        })
    }

    pub(super) fn len(&mut self) -> R<u64> {
        let start = self.p;
        match self.len_or_enc()? {
            Len::Plain(n) => Ok(n),
            Len::Enc(_) => at("encoded string where a length was expected", start),
        }
    }

    /// A length that counts items each taking at least one byte: bounded by
    /// what is left, so it can size an allocation.
    pub(super) fn count(&mut self, per_item: usize) -> R<usize> {
        let start = self.p;
        let n = self.len()?;
        let left = (self.d.len() - self.p) as u64;
        if n > left / per_item.max(1) as u64 {
            if self.more {
                return self.past_the_end();
            }
            return at(format!("length {n} exceeds the remaining input"), start);
        }
        Ok(n as usize)
    }

    pub(super) fn string(&mut self) -> R<Cow<'a, [u8]>> {
        let start = self.p;
        match self.len_or_enc()? {
            Len::Plain(n) => {
                let n = usize::try_from(n).unwrap_or(usize::MAX);
                Ok(Cow::Borrowed(self.take(n)?))
            }
            Len::Enc(0) => Ok(Cow::Owned((self.byte()? as i8).to_string().into_bytes())),
            Len::Enc(1) => {
                let s = self.take(2)?;
                Ok(Cow::Owned(
                    i16::from_le_bytes([s[0], s[1]]).to_string().into_bytes(),
                ))
            }
            Len::Enc(2) => {
                let s = self.take(4)?;
                let v = i32::from_le_bytes([s[0], s[1], s[2], s[3]]);
                Ok(Cow::Owned(v.to_string().into_bytes()))
            }
            Len::Enc(3) => {
                let clen = self.len()?;
                let ulen = self.len()?;
                let clen = usize::try_from(clen).unwrap_or(usize::MAX);
                let comp = self.take(clen)?;
                // LZF expands at most ~90x; anything claiming more is corrupt
                // (and must not size an allocation).
                if ulen == 0 || ulen > (clen as u64).saturating_mul(100).saturating_add(64) {
                    return at(format!("bad LZF lengths ({clen} -> {ulen})"), start);
                }
                lzf::decompress(comp, ulen as usize)
                    .map(Cow::Owned)
                    .or_else(|e| at(format!("invalid LZF string: {e}"), start))
            }
            Len::Enc(e) => at(format!("unknown string encoding {e}"), start),
        }
    }

    pub(super) fn f64_bin(&mut self) -> R<f64> {
        let s = self.take(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(s);
        Ok(f64::from_le_bytes(a))
    }

    /// The text doubles of the old ZSET type.
    pub(super) fn f64_text(&mut self) -> R<f64> {
        let start = self.p;
        let n = self.byte()?;
        match n {
            255 => Ok(f64::NEG_INFINITY),
            254 => Ok(f64::INFINITY),
            253 => Ok(f64::NAN),
            _ => {
                let s = self.take(n as usize)?;
                parse_f64_text(s).map_or_else(|| at("invalid double value", start), Ok)
            }
        }
    }
}

pub(super) fn parse_f64_text(s: &[u8]) -> Option<f64> {
    std::str::from_utf8(s).ok()?.parse::<f64>().ok()
}

pub(super) fn blob_err(e: BlobError, blob_start: usize) -> LoadError {
    LoadError {
        msg: format!("{} at blob offset {}", e.msg, e.at),
        offset: blob_start,
    }
}

/// Names the blob an error was found in the way Redis logs it (`Zset
/// ziplist integrity check failed.`, which tools and tests grep for),
/// with our detail after it.
pub(super) fn in_blob<T>(what: &str, r: R<T>) -> R<T> {
    r.map_err(|e| LoadError {
        msg: format!("{what} integrity check failed. ({})", e.msg),
        offset: e.offset,
    })
}

pub(crate) fn put_len(out: &mut Vec<u8>, n: u64) {
    if n < 1 << 6 {
        out.push(n as u8);
    } else if n < 1 << 14 {
        out.push(0x40 | (n >> 8) as u8);
        out.push(n as u8);
    } else if n <= u32::MAX as u64 {
        out.push(0x80);
        out.extend_from_slice(&(n as u32).to_be_bytes());
    } else {
        out.push(0x81);
        out.extend_from_slice(&n.to_be_bytes());
    }
}

/// Redis's `rdbEncodeInteger`: the 1/2/4-byte special encodings.
pub(super) fn put_int_special(out: &mut Vec<u8>, v: i64) -> bool {
    if let Ok(b) = i8::try_from(v) {
        out.push(0xc0);
        out.push(b as u8);
    } else if let Ok(h) = i16::try_from(v) {
        out.push(0xc1);
        out.extend_from_slice(&h.to_le_bytes());
    } else if let Ok(w) = i32::try_from(v) {
        out.push(0xc2);
        out.extend_from_slice(&w.to_le_bytes());
    } else {
        return false;
    }
    true
}

/// An LZF string: `c`, the compressed form of `len` bytes.
pub(super) fn put_lzf(out: &mut Vec<u8>, c: &[u8], len: usize) {
    out.push(0xc3);
    put_len(out, c.len() as u64);
    put_len(out, len as u64);
    out.extend_from_slice(c);
}

/// `s` as an LZF string if that saves at least 4 bytes: compressed
/// straight into `out`, its header written after it and rotated in front
/// (no buffer of its own: a snapshot's saver compresses without
/// allocating).
fn put_compressed(out: &mut Vec<u8>, s: &[u8]) -> bool {
    let at = out.len();
    if !lzf::compress_into(s, s.len() - 4, out) {
        return false;
    }
    let data = out.len() - at;
    out.push(0xc3);
    put_len(out, data as u64);
    put_len(out, s.len() as u64);
    let head = out.len() - at - data;
    out[at..].rotate_right(head);
    true
}

/// Strings this long at most are never compressed.
pub(crate) const MIN_COMPRESS: usize = 20;

/// A string as Redis's `rdbSaveRawString` writes it: short canonical
/// integers int-encoded, longer strings LZF-compressed when that saves at
/// least 4 bytes, else length + bytes.
pub(crate) fn put_string(out: &mut Vec<u8>, s: &[u8], compress: bool) {
    if s.len() <= 11 {
        if let Some(v) = crate::num::parse_i64(s) {
            if put_int_special(out, v) {
                return;
            }
        }
    }
    if compress && s.len() > MIN_COMPRESS && put_compressed(out, s) {
        return;
    }
    put_len(out, s.len() as u64);
    out.extend_from_slice(s);
}
