//! The byte layouts of the aggregate blobs inside RDB values: listpack
//! (written and read), intset (written and read), ziplist and zipmap (read
//! only: Redis 7.0 still loads them from older files).
//!
//! Parsers validate as they go (header sizes, every entry's bounds, the
//! terminator) and report the offset inside the blob of what is wrong.

use crate::listpack::{backlen, decode_entry, encode_entry, LpVal};

/// A problem inside a blob: what, and where (offset inside the blob).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlobError {
    pub msg: &'static str,
    pub at: usize,
}

fn err<T>(msg: &'static str, at: usize) -> Result<T, BlobError> {
    Err(BlobError { msg, at })
}

// ------------------------------------------------------------ listpack

/// Builds a listpack the way Redis's `lpAppend` does: strings that are
/// canonical integers are stored as integers, in the narrowest encoding.
pub struct LpBuilder {
    buf: Vec<u8>,
    count: usize,
}

impl Default for LpBuilder {
    fn default() -> Self {
        Self::new()
    }
}

impl LpBuilder {
    pub fn new() -> Self {
        LpBuilder {
            buf: vec![0; 6],
            count: 0,
        }
    }

    pub fn len(&self) -> usize {
        self.count
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Total bytes the listpack will have (header and terminator included).
    pub fn bytes(&self) -> usize {
        self.buf.len() + 1
    }

    pub fn push(&mut self, v: LpVal) {
        let v = match v {
            LpVal::Str(s) => LpVal::from_bytes(s),
            int => int,
        };
        encode_entry(v, &mut self.buf);
        self.count += 1;
    }

    pub fn push_bytes(&mut self, s: &[u8]) {
        self.push(LpVal::Str(s));
    }

    pub fn finish(mut self) -> Vec<u8> {
        self.buf.push(0xff);
        let total = self.buf.len() as u32;
        self.buf[..4].copy_from_slice(&total.to_le_bytes());
        let n = self.count.min(65535) as u16;
        self.buf[4..6].copy_from_slice(&n.to_le_bytes());
        self.buf
    }
}

/// Calls `f` for each entry of the listpack `lp`, validating the whole
/// structure.
pub fn lp_each<'a>(
    lp: &'a [u8],
    mut f: impl FnMut(LpVal<'a>) -> Result<(), BlobError>,
) -> Result<usize, BlobError> {
    if lp.len() < 7 {
        return err("listpack too short", 0);
    }
    let total = u32::from_le_bytes([lp[0], lp[1], lp[2], lp[3]]) as usize;
    if total != lp.len() {
        return err("listpack header size mismatch", 0);
    }
    let declared = u16::from_le_bytes([lp[4], lp[5]]) as usize;
    let mut p = 6usize;
    let mut count = 0usize;
    let end = lp.len() - 1;
    loop {
        if p > end {
            return err("listpack entry past the end", p);
        }
        let b = lp[p];
        if b == 0xff {
            if p != end {
                return err("listpack terminator before the end", p);
            }
            break;
        }
        let start = p;
        let (val, enc_len) =
            decode_entry(&lp[start..end]).map_err(|msg| BlobError { msg, at: p })?;
        // The back length must read as a reverse walk would read it.
        let (want, bl) = backlen(enc_len);
        if lp
            .get(start + enc_len..end)
            .and_then(|r| r.get(..bl))
            .is_none()
        {
            return err("listpack entry past the end", start);
        }
        if lp[start + enc_len..start + enc_len + bl] != want[..bl] {
            return err("listpack bad entry back length", p);
        }
        f(val)?;
        count += 1;
        p = start + enc_len + bl;
    }
    if declared != 65535 && declared != count {
        return err("listpack entry count mismatch", 4);
    }
    Ok(count)
}

// ------------------------------------------------------------- ziplist

/// Calls `f` for each entry of the ziplist `zl` (pre-7.0 RDB files).
pub fn zl_each<'a>(
    zl: &'a [u8],
    mut f: impl FnMut(LpVal<'a>) -> Result<(), BlobError>,
) -> Result<usize, BlobError> {
    if zl.len() < 11 {
        return err("ziplist too short", 0);
    }
    let total = u32::from_le_bytes([zl[0], zl[1], zl[2], zl[3]]) as usize;
    if total != zl.len() {
        return err("ziplist header size mismatch", 0);
    }
    let tail = u32::from_le_bytes([zl[4], zl[5], zl[6], zl[7]]) as usize;
    let declared = u16::from_le_bytes([zl[8], zl[9]]) as usize;
    let end = zl.len() - 1;
    if zl[end] != 0xff {
        return err("ziplist without terminator", end);
    }
    let mut p = 10usize;
    let mut prev_len = 0usize;
    let mut last = 10usize;
    let mut count = 0usize;
    while p < end {
        let start = p;
        let get = |i: usize| -> Result<u8, BlobError> {
            if i < end {
                Ok(zl[i])
            } else {
                err("ziplist entry past the end", start)
            }
        };
        let (prevlen, mut q) = if get(p)? < 254 {
            (get(p)? as usize, p + 1)
        } else {
            let b = [get(p + 1)?, get(p + 2)?, get(p + 3)?, get(p + 4)?];
            (u32::from_le_bytes(b) as usize, p + 5)
        };
        if prevlen != prev_len {
            return err("ziplist bad previous entry length", start);
        }
        let enc = get(q)?;
        let slice = |from: usize, n: usize| -> Result<&'a [u8], BlobError> {
            match from.checked_add(n) {
                Some(e) if e <= end => Ok(&zl[from..e]),
                _ => err("ziplist entry past the end", start),
            }
        };
        let val = match enc >> 6 {
            0 => {
                let l = (enc & 0x3f) as usize;
                q += 1;
                let s = slice(q, l)?;
                q += l;
                LpVal::Str(s)
            }
            1 => {
                let l = ((enc & 0x3f) as usize) << 8 | get(q + 1)? as usize;
                q += 2;
                let s = slice(q, l)?;
                q += l;
                LpVal::Str(s)
            }
            2 => {
                if enc != 0x80 {
                    return err("ziplist bad entry encoding", start);
                }
                let h = slice(q + 1, 4)?;
                let l = u32::from_be_bytes([h[0], h[1], h[2], h[3]]) as usize;
                q += 5;
                let s = slice(q, l)?;
                q += l;
                LpVal::Str(s)
            }
            _ => {
                q += 1;
                let v = match enc {
                    0xc0 => {
                        let d = slice(q, 2)?;
                        q += 2;
                        i16::from_le_bytes([d[0], d[1]]) as i64
                    }
                    0xd0 => {
                        let d = slice(q, 4)?;
                        q += 4;
                        i32::from_le_bytes([d[0], d[1], d[2], d[3]]) as i64
                    }
                    0xe0 => {
                        let d = slice(q, 8)?;
                        q += 8;
                        let mut a = [0u8; 8];
                        a.copy_from_slice(d);
                        i64::from_le_bytes(a)
                    }
                    0xf0 => {
                        let d = slice(q, 3)?;
                        q += 3;
                        (i32::from_le_bytes([0, d[0], d[1], d[2]]) >> 8) as i64
                    }
                    0xfe => {
                        let d = slice(q, 1)?;
                        q += 1;
                        d[0] as i8 as i64
                    }
                    0xf1..=0xfd => (enc & 0x0f) as i64 - 1,
                    _ => return err("ziplist bad entry encoding", start),
                };
                LpVal::Int(v)
            }
        };
        f(val)?;
        count += 1;
        prev_len = q - start;
        last = start;
        p = q;
    }
    if count > 0 && tail != last {
        return err("ziplist bad tail offset", 4);
    }
    if declared != 65535 && declared != count {
        return err("ziplist entry count mismatch", 8);
    }
    Ok(count)
}

// -------------------------------------------------------------- zipmap

/// Calls `f` for each (field, value) of a zipmap (RDB version < 4 hashes).
pub fn zipmap_each<'a>(
    zm: &'a [u8],
    mut f: impl FnMut(&'a [u8], &'a [u8]) -> Result<(), BlobError>,
) -> Result<usize, BlobError> {
    if zm.len() < 2 {
        return err("zipmap too short", 0);
    }
    let mut p = 1usize;
    let mut count = 0usize;
    let len_at = |p: usize| -> Result<(usize, usize), BlobError> {
        match zm.get(p) {
            Some(&b) if b < 254 => Ok((b as usize, 1)),
            Some(&254) => match zm.get(p + 1..p + 5) {
                Some(d) => Ok((u32::from_le_bytes([d[0], d[1], d[2], d[3]]) as usize, 5)),
                None => err("zipmap entry past the end", p),
            },
            _ => err("zipmap bad length", p),
        }
    };
    loop {
        match zm.get(p) {
            None => return err("zipmap without terminator", p),
            Some(&255) => {
                if p != zm.len() - 1 {
                    return err("zipmap terminator before the end", p);
                }
                break;
            }
            _ => {}
        }
        let start = p;
        let (kl, n) = len_at(p)?;
        p += n;
        let k = zm.get(p..p.saturating_add(kl)).ok_or(BlobError {
            msg: "zipmap entry past the end",
            at: start,
        })?;
        p += kl;
        let (vl, n) = len_at(p)?;
        p += n;
        let free = *zm.get(p).ok_or(BlobError {
            msg: "zipmap entry past the end",
            at: start,
        })? as usize;
        p += 1;
        let v = zm.get(p..p.saturating_add(vl)).ok_or(BlobError {
            msg: "zipmap entry past the end",
            at: start,
        })?;
        p = p.saturating_add(vl).saturating_add(free);
        f(k, v)?;
        count += 1;
    }
    Ok(count)
}

// -------------------------------------------------------------- intset

/// An intset blob: encoding width, length, the values ascending (LE).
pub fn intset_blob(width: usize, values: impl ExactSizeIterator<Item = i64>) -> Vec<u8> {
    let mut out = Vec::with_capacity(8 + width * values.len());
    out.extend_from_slice(&(width as u32).to_le_bytes());
    out.extend_from_slice(&(values.len() as u32).to_le_bytes());
    for v in values {
        out.extend_from_slice(&v.to_le_bytes()[..width]);
    }
    out
}

/// The values of an intset blob, checked ascending and distinct.
pub fn intset_values(b: &[u8]) -> Result<Vec<i64>, BlobError> {
    if b.len() < 8 {
        return err("intset too short", 0);
    }
    let width = u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize;
    if !matches!(width, 2 | 4 | 8) {
        return err("intset bad encoding", 0);
    }
    let n = u32::from_le_bytes([b[4], b[5], b[6], b[7]]) as usize;
    if n.checked_mul(width).and_then(|x| x.checked_add(8)) != Some(b.len()) {
        return err("intset size mismatch", 4);
    }
    let mut out = Vec::with_capacity(n);
    for (i, c) in b[8..].chunks_exact(width).enumerate() {
        let v = match width {
            2 => i16::from_le_bytes([c[0], c[1]]) as i64,
            4 => i32::from_le_bytes([c[0], c[1], c[2], c[3]]) as i64,
            _ => i64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]),
        };
        if out.last().is_some_and(|&l| l >= v) {
            return err("intset not sorted", 8 + i * width);
        }
        out.push(v);
    }
    if n == 0 {
        return err("intset empty", 4);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn collect(lp: &[u8]) -> Vec<Vec<u8>> {
        let mut v = Vec::new();
        lp_each(lp, |x| {
            v.push(x.to_vec());
            Ok(())
        })
        .unwrap();
        v
    }

    #[test]
    fn listpack_round_trip() {
        let items: Vec<Vec<u8>> = vec![
            b"0".to_vec(),
            b"127".to_vec(),
            b"128".to_vec(),
            b"-4096".to_vec(),
            b"4095".to_vec(),
            b"32767".to_vec(),
            b"-8388608".to_vec(),
            b"2147483647".to_vec(),
            b"-9223372036854775808".to_vec(),
            b"".to_vec(),
            b"-0".to_vec(),
            b"007".to_vec(),
            vec![b'x'; 63],
            vec![b'y'; 64],
            vec![b'z'; 4095],
            vec![b'w'; 5000],
        ];
        let mut b = LpBuilder::new();
        for i in &items {
            b.push_bytes(i);
        }
        let lp = b.finish();
        assert_eq!(collect(&lp), items);
        // Every truncation or single-byte change is an error or a value,
        // never a panic.
        for cut in 0..lp.len() {
            let _ = lp_each(&lp[..cut], |_| Ok(()));
        }
    }

    #[test]
    fn listpack_matches_redis() {
        // HSET h a 1 b hello, as Redis 7.0.15 DUMPs it.
        let mut b = LpBuilder::new();
        for x in [&b"a"[..], b"1", b"b", b"hello"] {
            b.push_bytes(x);
        }
        assert_eq!(
            b.finish(),
            b"\x16\x00\x00\x00\x04\x00\x81a\x02\x01\x01\x81b\x02\x85hello\x06\xff"
        );
    }

    #[test]
    fn intset_round_trip() {
        let b = intset_blob(4, [-70000i64, 1, 2].into_iter());
        assert_eq!(intset_values(&b).unwrap(), vec![-70000, 1, 2]);
        assert!(intset_values(&intset_blob(2, [2i64, 1].into_iter())).is_err());
    }
}
