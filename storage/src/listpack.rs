//! A listpack: a sequence of small integers and byte strings packed in one
//! contiguous buffer, walkable in both directions.
//!
//! Layout: one exact-size heap buffer, `[count: u32 LE][entries…]`, held
//! by a 16-byte `Box<[u8]>` (an empty listpack owns no allocation at all),
//! so a small hash or sorted set is a single allocation of its exact size,
//! as Redis's listpack (whose header holds total bytes + count). Every
//! write reallocates to the new exact size; the allocator resizes in place
//! while the block's size class still fits, and Redis reallocates on every
//! listpack write too. Offsets in the API are relative to the first entry
//! (`as_bytes()` is the entries without the count). Entry layout:
//!
//! ```text
//! entry := header data backlen
//! header (first byte decides):
//!   0xxxxxxx                 uint 0..=127, no data
//!   10LLLLLL                 string, len 0..=63, then len bytes
//!   110xxxxx xxxxxxxx        int13 (-4096..=4095), the 13 bits big-endian
//!   1110LLLL LLLLLLLL        string, len 64..=4095
//!   11110000 +u32 LE len     string, any length
//!   11110001 / 0010 / 0011 / 0100
//!                            int16 / int24 / int32 / int64, little-endian
//! backlen := size of header+data in 7-bit groups, most significant first;
//!   every byte but the first has bit 7 set, so reading right to left from
//!   the last byte ("more bytes before me" flag) recovers the size;
//!   its byte count follows Redis's thresholds (see `backlen_size`).
//! ```
//!
//! The entry codec (`encode_entry`, `decode_entry`, `backlen`) is also
//! what the RDB writer and reader use for listpack blobs (`rdb::blob`),
//! which hold the same entries between Redis's own header and terminator.
//!
//! Invariants: `len` is the number of entries; every entry is encoded in
//! the smallest form that holds it; a byte string that reads as a strict
//! canonical i64 (see [`crate::num::parse_i64`]) is always stored as an
//! integer, so equality with a user string is byte equality.
//!
//! Complexity: push/pop at the back O(1) amortized; anything at the front or
//! in the middle is O(bytes) (a memmove) and seeking an index O(entries) —
//! listpacks are only used while small (the `*-max-listpack-*` limits).
//! Overhead per entry: 1 header byte + 1 backlen byte for strings < 64
//! bytes; integers 0..=127 take 2 bytes in all, up to ±4096 3 bytes.
//! The entry encodings are Redis 7.0's own, so sizes agree byte for byte:
//! quicklist node sizes and zset/hash listpack totals were checked against
//! DEBUG OBJECT / DEBUG LISTPACK of redis-server 7.0.15 (see the tests in
//! quicklist.rs, zset.rs, hash.rs).

use crate::num::parse_i64;

/// Bytes Redis's listpack spends on its header (total bytes + count) and
/// end marker; counted by [`Listpack::lp_bytes`] so limits match Redis.
pub const LP_HEADER_OVERHEAD: usize = 7;

/// Our own header: the entry count.
const HDR: usize = 4;

/// One listpack element, borrowed from the buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LpVal<'a> {
    Int(i64),
    Str(&'a [u8]),
}

impl<'a> LpVal<'a> {
    /// The form a user string is stored in: integers when canonical.
    pub fn from_bytes(b: &'a [u8]) -> Self {
        if b.len() <= 20 {
            if let Some(n) = parse_i64(b) {
                return LpVal::Int(n);
            }
        }
        LpVal::Str(b)
    }

    /// The element's bytes; integers are formatted into `buf`.
    pub fn bytes<'s>(&'s self, buf: &'s mut itoa::Buffer) -> &'s [u8]
    where
        'a: 's,
    {
        match self {
            LpVal::Int(n) => buf.format(*n).as_bytes(),
            LpVal::Str(s) => s,
        }
    }

    pub fn to_vec(&self) -> Vec<u8> {
        self.bytes(&mut itoa::Buffer::new()).to_vec()
    }

    /// Equality with a user string. Exact because integer-looking strings
    /// are always stored as integers.
    pub fn eq_bytes(&self, b: &[u8]) -> bool {
        match self {
            LpVal::Str(s) => *s == b,
            LpVal::Int(n) => b.len() <= 20 && parse_i64(b) == Some(*n),
        }
    }

    /// Byte-wise comparison with a user string (lexicographic order).
    pub fn cmp_bytes(&self, b: &[u8]) -> std::cmp::Ordering {
        self.bytes(&mut itoa::Buffer::new()).cmp(b)
    }

    /// Length in bytes of the element's string form.
    pub fn str_len(&self) -> usize {
        match self {
            LpVal::Str(s) => s.len(),
            LpVal::Int(n) => itoa::Buffer::new().format(*n).len(),
        }
    }
}

#[derive(Clone, Default, PartialEq, Eq)]
pub struct Listpack {
    /// Empty, or the count header followed by the entries.
    buf: Box<[u8]>,
}

// ---- The entry codec, shared by the in-memory listpack and the RDB
// listpack blobs (`rdb::blob`), whose entries are the same bytes.

/// Bytes of the backlen of an entry whose header + data take `l` bytes.
/// Redis's `lpEncodeBacklen` switches to the next size one value early
/// (16383 takes 3 bytes though 14 bits hold it; DUMP of redis-server
/// 7.0.15 shows it), and the sizes must agree byte for byte.
pub(crate) fn backlen_size(l: usize) -> usize {
    match l {
        0..=127 => 1,
        128..=16382 => 2,
        16383..=2097150 => 3,
        2097151..=268435454 => 4,
        _ => 5,
    }
}

/// The backlen of an entry of `l` bytes (header + data): 7-bit groups,
/// most significant first, every byte but the first flagged with bit 7 so
/// a right-to-left read knows when to stop. Only the first `.1` bytes of
/// `.0` are used.
pub(crate) fn backlen(l: usize) -> ([u8; 5], usize) {
    let n = backlen_size(l);
    let mut b = [0u8; 5];
    for (i, byte) in b[..n].iter_mut().enumerate() {
        let group = ((l >> (7 * (n - 1 - i))) & 0x7f) as u8;
        *byte = if i == 0 { group } else { group | 0x80 };
    }
    (b, n)
}

/// Size of header + data for a value.
fn enc_size(v: LpVal) -> usize {
    match v {
        LpVal::Int(n) => match n {
            0..=127 => 1,
            -4096..=4095 => 2,
            -32768..=32767 => 3,
            -8388608..=8388607 => 4,
            -2147483648..=2147483647 => 5,
            _ => 9,
        },
        LpVal::Str(s) => match s.len() {
            0..=63 => 1 + s.len(),
            64..=4095 => 2 + s.len(),
            _ => 5 + s.len(),
        },
    }
}

/// Encoded size of a whole entry (header, data, backlen).
pub fn entry_size(v: LpVal) -> usize {
    let e = enc_size(v);
    e + backlen_size(e)
}

/// Appends the entry for `v` (header, data, backlen) in the narrowest
/// encoding that holds it.
pub(crate) fn encode_entry(v: LpVal, out: &mut Vec<u8>) {
    let start = out.len();
    match v {
        LpVal::Int(n) => match n {
            0..=127 => out.push(n as u8),
            -4096..=4095 => {
                let u = (n as u16) & 0x1fff;
                out.push(0xc0 | (u >> 8) as u8);
                out.push(u as u8);
            }
            -32768..=32767 => {
                out.push(0xf1);
                out.extend_from_slice(&(n as i16).to_le_bytes());
            }
            -8388608..=8388607 => {
                out.push(0xf2);
                out.extend_from_slice(&(n as i32).to_le_bytes()[..3]);
            }
            -2147483648..=2147483647 => {
                out.push(0xf3);
                out.extend_from_slice(&(n as i32).to_le_bytes());
            }
            _ => {
                out.push(0xf4);
                out.extend_from_slice(&n.to_le_bytes());
            }
        },
        LpVal::Str(s) => {
            let l = s.len();
            if l <= 63 {
                out.push(0x80 | l as u8);
            } else if l <= 4095 {
                out.push(0xe0 | (l >> 8) as u8);
                out.push(l as u8);
            } else {
                out.push(0xf0);
                // Strings are bounded by proto-max-bulk-len (512MB) upstream.
                out.extend_from_slice(&(l as u32).to_le_bytes());
            }
            out.extend_from_slice(s);
        }
    }
    let (b, n) = backlen(out.len() - start);
    out.extend_from_slice(&b[..n]);
}

/// Decodes the entry at the start of `b`: its value and the size of its
/// header + data (the backlen is not read). `Err` says what is wrong when
/// `b` does not start with a whole entry (only an RDB blob can be corrupt).
pub(crate) fn decode_entry(b: &[u8]) -> Result<(LpVal<'_>, usize), &'static str> {
    const PAST_END: &str = "listpack entry past the end";
    let need = |n: usize| b.get(..n).ok_or(PAST_END);
    let h = *b.first().ok_or(PAST_END)?;
    Ok(if h & 0x80 == 0 {
        (LpVal::Int(h as i64), 1)
    } else if h & 0xc0 == 0x80 {
        let l = (h & 0x3f) as usize;
        (LpVal::Str(&need(1 + l)?[1..]), 1 + l)
    } else if h & 0xe0 == 0xc0 {
        let e = need(2)?;
        let u = (((e[0] & 0x1f) as u16) << 8) | e[1] as u16;
        // Sign-extend 13 bits.
        (LpVal::Int(((u << 3) as i16 >> 3) as i64), 2)
    } else if h & 0xf0 == 0xe0 {
        let e = need(2)?;
        let l = (((e[0] & 0x0f) as usize) << 8) | e[1] as usize;
        (LpVal::Str(&need(2 + l)?[2..]), 2 + l)
    } else {
        match h {
            0xf0 => {
                let e = need(5)?;
                let l = u32::from_le_bytes([e[1], e[2], e[3], e[4]]) as usize;
                (LpVal::Str(&need(5usize.saturating_add(l))?[5..]), 5 + l)
            }
            0xf1 => {
                let e = need(3)?;
                (LpVal::Int(i16::from_le_bytes([e[1], e[2]]) as i64), 3)
            }
            0xf2 => {
                let e = need(4)?;
                let v = i32::from_le_bytes([0, e[1], e[2], e[3]]) >> 8;
                (LpVal::Int(v as i64), 4)
            }
            0xf3 => {
                let e = need(5)?;
                let v = i32::from_le_bytes([e[1], e[2], e[3], e[4]]);
                (LpVal::Int(v as i64), 5)
            }
            0xf4 => {
                let mut a = [0u8; 8];
                a.copy_from_slice(&need(9)?[1..9]);
                (LpVal::Int(i64::from_le_bytes(a)), 9)
            }
            _ => return Err("listpack bad entry encoding"),
        }
    })
}

/// Decodes the in-memory entry starting at `off`, which is never corrupt.
fn decode(buf: &[u8], off: usize) -> (LpVal<'_>, usize) {
    decode_entry(&buf[off..]).expect("corrupt listpack")
}

impl Listpack {
    pub fn new() -> Self {
        Listpack::default()
    }

    /// The listpack of `count` entries whose bytes are `entries` (as
    /// `as_bytes` returned them).
    pub fn from_entries(count: usize, entries: &[u8]) -> Self {
        let mut v = Vec::with_capacity(HDR + entries.len());
        v.extend_from_slice(&u32::try_from(count).expect("listpack count").to_le_bytes());
        v.extend_from_slice(entries);
        Listpack {
            buf: v.into_boxed_slice(),
        }
    }

    pub fn len(&self) -> usize {
        match self.buf.get(..HDR) {
            Some(h) => u32::from_le_bytes([h[0], h[1], h[2], h[3]]) as usize,
            None => 0,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    /// Size as Redis counts a listpack (header and end marker included).
    pub fn lp_bytes(&self) -> usize {
        self.data().len() + LP_HEADER_OVERHEAD
    }

    /// The raw entry bytes.
    pub fn as_bytes(&self) -> &[u8] {
        self.data()
    }

    fn data(&self) -> &[u8] {
        self.buf.get(HDR..).unwrap_or(&[])
    }

    /// Heap bytes owned (the buffer is always exact-size).
    pub fn heap_size(&self) -> usize {
        self.buf.len()
    }

    pub fn clear(&mut self) {
        self.buf = Box::default();
    }

    /// The one write primitive: replaces the entry bytes in `range` with
    /// what `fill` appends to the vector it gets (which holds everything
    /// before `range`), changes the count by `delta`, and reallocates the
    /// buffer to the exact new size. Returns the offset just past the new
    /// bytes.
    fn edit(
        &mut self,
        range: std::ops::Range<usize>,
        delta: isize,
        add: usize,
        fill: impl FnOnce(&mut Vec<u8>),
    ) -> usize {
        let count = (self.len() as isize + delta) as usize;
        if count == 0 {
            self.buf = Box::default();
            return 0;
        }
        let mut v = std::mem::take(&mut self.buf).into_vec();
        if v.is_empty() {
            v.extend_from_slice(&[0; HDR]);
        }
        let (a, b) = (range.start + HDR, range.end + HDR);
        if b == v.len() {
            // At the end (pushes, pops, the last entry): no tail to move.
            v.truncate(a);
            v.reserve_exact(add);
            fill(&mut v);
        } else {
            let mut ins = Vec::with_capacity(add);
            fill(&mut ins);
            v.reserve_exact(add.saturating_sub(b - a));
            v.splice(a..b, ins);
        }
        debug_assert!(v.len() > HDR);
        v[..HDR].copy_from_slice(&u32::try_from(count).expect("listpack count").to_le_bytes());
        let end = a + add - HDR;
        self.buf = v.into_boxed_slice();
        end
    }

    // ---- offset-level primitives: an offset is the start of an entry, or
    // `as_bytes().len()` for "past the end".

    /// Offset of the first entry.
    pub fn first(&self) -> Option<usize> {
        (!self.is_empty()).then_some(0)
    }

    /// Offset of the last entry.
    pub fn last(&self) -> Option<usize> {
        self.prev(self.data().len())
    }

    /// Offset of the entry after the one at `off`.
    pub fn next(&self, off: usize) -> Option<usize> {
        let n = self.next_raw(off);
        (n < self.data().len()).then_some(n)
    }

    fn next_raw(&self, off: usize) -> usize {
        let (_, e) = decode(self.data(), off);
        off + e + backlen_size(e)
    }

    /// Offset of the entry before `off` (which may be the end offset).
    pub fn prev(&self, off: usize) -> Option<usize> {
        (off > 0).then(|| prev_off(self.data(), off))
    }

    /// The entry at `off`.
    pub fn get_at(&self, off: usize) -> LpVal<'_> {
        decode(self.data(), off).0
    }

    /// Offset of entry `index`; negative counts from the end (-1 = last).
    /// Walks from whichever end is nearer.
    pub fn seek(&self, index: isize) -> Option<usize> {
        let len = self.len() as isize;
        let i = if index < 0 { len + index } else { index };
        if i < 0 || i >= len {
            return None;
        }
        if i < len / 2 {
            let mut off = 0;
            for _ in 0..i {
                off = self.next_raw(off);
            }
            Some(off)
        } else {
            let mut off = self.data().len();
            for _ in i..len {
                off = self.prev(off)?;
            }
            Some(off)
        }
    }

    /// Inserts before the entry at `off` (`off == as_bytes().len()` appends).
    pub fn insert_at(&mut self, off: usize, v: LpVal) {
        self.edit(off..off, 1, entry_size(v), |out| encode_entry(v, out));
    }

    /// Deletes the entry at `off`; the following entry (if any) now starts
    /// at `off`.
    pub fn delete_at(&mut self, off: usize) {
        let end = self.next_raw(off);
        self.edit(off..end, -1, 0, |_| {});
    }

    /// Deletes `count` entries starting at `off`.
    pub fn delete_run_at(&mut self, off: usize, count: usize) {
        let mut end = off;
        let mut n = 0;
        while n < count && end < self.data().len() {
            end = self.next_raw(end);
            n += 1;
        }
        self.edit(off..end, -(n as isize), 0, |_| {});
    }

    /// Replaces the entry at `off` with `v`.
    pub fn replace_at(&mut self, off: usize, v: LpVal) {
        let end = self.next_raw(off);
        self.edit(off..end, 0, entry_size(v), |out| encode_entry(v, out));
    }

    // ---- index-level API over user bytes.

    pub fn push_back(&mut self, b: &[u8]) {
        self.push_back_val(LpVal::from_bytes(b));
    }

    pub fn push_back_val(&mut self, v: LpVal) {
        let end = self.data().len();
        self.insert_at(end, v);
    }

    /// Appends several entries with one reallocation.
    pub fn extend_vals<'v>(&mut self, vals: &[LpVal<'v>]) {
        let end = self.data().len();
        let add = vals.iter().map(|v| entry_size(*v)).sum();
        self.edit(end..end, vals.len() as isize, add, |out| {
            for v in vals {
                encode_entry(*v, out);
            }
        });
    }

    pub fn push_front(&mut self, b: &[u8]) {
        self.insert_at(0, LpVal::from_bytes(b));
    }

    pub fn push_int(&mut self, n: i64) {
        self.push_back_val(LpVal::Int(n));
    }

    pub fn pop_front(&mut self) -> Option<Vec<u8>> {
        let off = self.first()?;
        let v = self.get_at(off).to_vec();
        self.delete_at(off);
        Some(v)
    }

    pub fn pop_back(&mut self) -> Option<Vec<u8>> {
        let off = self.last()?;
        let v = self.get_at(off).to_vec();
        self.delete_at(off);
        Some(v)
    }

    /// Entry at `index` (negative counts from the end).
    pub fn get(&self, index: isize) -> Option<LpVal<'_>> {
        self.seek(index).map(|o| self.get_at(o))
    }

    /// Inserts so the new entry has index `index` (0..=len). False if out
    /// of range.
    pub fn insert(&mut self, index: usize, b: &[u8]) -> bool {
        let off = if index == self.len() {
            self.data().len()
        } else {
            match self.seek(index as isize) {
                Some(o) => o,
                None => return false,
            }
        };
        self.insert_at(off, LpVal::from_bytes(b));
        true
    }

    pub fn delete(&mut self, index: isize) -> bool {
        match self.seek(index) {
            Some(o) => {
                self.delete_at(o);
                true
            }
            None => false,
        }
    }

    /// Deletes up to `count` entries starting at index `start`.
    pub fn delete_range(&mut self, start: usize, count: usize) {
        if let Some(o) = self.seek(start as isize) {
            self.delete_run_at(o, count);
        }
    }

    pub fn replace(&mut self, index: isize, b: &[u8]) -> bool {
        match self.seek(index) {
            Some(o) => {
                self.replace_at(o, LpVal::from_bytes(b));
                true
            }
            None => false,
        }
    }

    /// Entries front to back; `.rev()` walks back to front.
    pub fn iter(&self) -> Iter<'_> {
        Iter {
            buf: self.data(),
            front: 0,
            back: self.data().len(),
        }
    }

    /// Like [`Listpack::iter`] but each entry comes with its offset.
    pub fn iter_offsets(&self) -> IterOff<'_> {
        IterOff(self.iter())
    }
}

impl std::fmt::Debug for Listpack {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

/// Double-ended walk over a listpack's entries.
pub struct Iter<'a> {
    buf: &'a [u8],
    front: usize,
    back: usize,
}

impl<'a> Iterator for Iter<'a> {
    type Item = LpVal<'a>;
    fn next(&mut self) -> Option<LpVal<'a>> {
        if self.front >= self.back {
            return None;
        }
        let (v, e) = decode(self.buf, self.front);
        self.front += e + backlen_size(e);
        Some(v)
    }
}

impl<'a> DoubleEndedIterator for Iter<'a> {
    fn next_back(&mut self) -> Option<LpVal<'a>> {
        if self.front >= self.back {
            return None;
        }
        let p = prev_off(self.buf, self.back);
        self.back = p;
        Some(decode(self.buf, p).0)
    }
}

/// [`Iter`] yielding each entry's offset too.
pub struct IterOff<'a>(Iter<'a>);

impl<'a> Iterator for IterOff<'a> {
    type Item = (usize, LpVal<'a>);
    fn next(&mut self) -> Option<Self::Item> {
        let o = self.0.front;
        self.0.next().map(|v| (o, v))
    }
}

impl DoubleEndedIterator for IterOff<'_> {
    fn next_back(&mut self) -> Option<Self::Item> {
        let v = self.0.next_back()?;
        Some((self.0.back, v))
    }
}

/// Start of the entry that ends right before `off` (`off > 0`).
fn prev_off(buf: &[u8], off: usize) -> usize {
    let mut p = off - 1;
    let mut e = 0usize;
    let mut shift = 0;
    loop {
        let b = buf[p];
        e |= ((b & 0x7f) as usize) << shift;
        shift += 7;
        if b & 0x80 == 0 {
            break;
        }
        p -= 1;
    }
    p - e
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    fn rand_elem(rng: &mut StdRng) -> Vec<u8> {
        match rng.gen_range(0..8) {
            0 => rng.gen_range(-200i64..200).to_string().into_bytes(),
            1 => rng.gen::<i64>().to_string().into_bytes(),
            2 => rng.gen_range(-40000i64..40000).to_string().into_bytes(),
            3 => rng
                .gen_range(-(1i64 << 33)..(1i64 << 33))
                .to_string()
                .into_bytes(),
            4 => {
                let n = rng.gen_range(60..5000);
                (0..n).map(|_| rng.gen::<u8>()).collect()
            }
            5 => b"007".to_vec(),
            _ => {
                let n = rng.gen_range(0..20);
                (0..n).map(|_| rng.gen_range(b'a'..=b'z')).collect()
            }
        }
    }

    #[test]
    fn every_encoding_round_trips() {
        let samples: Vec<Vec<u8>> = [
            "0",
            "127",
            "128",
            "-1",
            "-4096",
            "4095",
            "4096",
            "-4097",
            "32767",
            "-32768",
            "32768",
            "8388607",
            "-8388608",
            "8388608",
            "2147483647",
            "-2147483648",
            "2147483648",
            "9223372036854775807",
            "-9223372036854775808",
            "",
            "abc",
            "-0",
            "01",
            "+1",
            "9223372036854775808",
        ]
        .iter()
        .map(|s| s.as_bytes().to_vec())
        .chain([
            vec![b'x'; 63],
            vec![b'y'; 64],
            vec![b'z'; 4095],
            vec![b'w'; 4096],
            vec![0; 70000],
        ])
        .collect();
        let mut lp = Listpack::new();
        for s in &samples {
            lp.push_back(s);
        }
        let fwd: Vec<Vec<u8>> = lp.iter().map(|v| v.to_vec()).collect();
        assert_eq!(fwd, samples);
        let mut back: Vec<Vec<u8>> = lp.iter().rev().map(|v| v.to_vec()).collect();
        back.reverse();
        assert_eq!(back, samples);
        assert!(matches!(lp.get(0), Some(LpVal::Int(0))));
        assert!(matches!(lp.get(21), Some(LpVal::Str(b"-0"))));
        assert_eq!(lp.get(-1).unwrap().to_vec(), vec![0; 70000]);
    }

    /// Entries whose header + data take 127, 128, 16382, 16383 and 16384
    /// bytes (strings of 125, 126, 16377, 16378, 16379 bytes), against the
    /// header and backlen bytes of redis-server 7.0.15's DUMP of a hash
    /// holding such a value. The in-memory listpack and the RDB writer
    /// must both produce them, and the RDB reader accept them.
    #[test]
    fn backlen_boundaries_match_redis() {
        let cases: [(usize, &[u8], &[u8]); 5] = [
            (125, &[0xe0, 0x7d], &[0x7f]),
            (126, &[0xe0, 0x7e], &[0x01, 0x80]),
            (16377, &[0xf0, 0xf9, 0x3f, 0, 0], &[0x7f, 0xfe]),
            (16378, &[0xf0, 0xfa, 0x3f, 0, 0], &[0x00, 0xff, 0xff]),
            (16379, &[0xf0, 0xfb, 0x3f, 0, 0], &[0x01, 0x80, 0x80]),
        ];
        for (len, header, back) in cases {
            let data = vec![b'v'; len];
            let want = [header, &data[..], back].concat();
            let mut lp = Listpack::new();
            lp.push_back(&data);
            lp.push_back(b"x");
            assert_eq!(&lp.as_bytes()[..want.len()], &want[..], "{len}");
            assert_eq!(entry_size(LpVal::Str(&data)), want.len());
            assert_eq!(lp.iter().next_back(), Some(LpVal::Str(b"x")));
            assert_eq!(lp.iter().rev().nth(1), Some(LpVal::Str(&data[..])));

            let mut b = crate::rdb::blob::LpBuilder::new();
            b.push_bytes(&data);
            let blob = b.finish();
            assert_eq!(&blob[6..blob.len() - 1], &want[..], "{len}");
            let mut seen = Vec::new();
            let n = crate::rdb::blob::lp_each(&blob, |v| {
                seen.push(v.to_vec());
                Ok(())
            });
            assert_eq!((n, seen), (Ok(1), vec![data]));
        }
    }

    #[test]
    fn is_compact() {
        let mut lp = Listpack::new();
        for i in 0..100 {
            lp.push_back(format!("{i}").as_bytes());
        }
        assert_eq!(lp.as_bytes().len(), 200);
        let mut lp = Listpack::new();
        lp.push_back(b"hello");
        assert_eq!(lp.as_bytes().len(), 7);
    }

    #[test]
    fn matches_a_vec_under_random_operations() {
        let mut rng = StdRng::seed_from_u64(7);
        for round in 0..40 {
            let mut lp = Listpack::new();
            let mut m: Vec<Vec<u8>> = Vec::new();
            for _ in 0..300 {
                let len = m.len() as isize;
                match rng.gen_range(0..10) {
                    0 => {
                        let e = rand_elem(&mut rng);
                        lp.push_back(&e);
                        m.push(e);
                    }
                    1 => {
                        let e = rand_elem(&mut rng);
                        lp.push_front(&e);
                        m.insert(0, e);
                    }
                    2 => assert_eq!(lp.pop_back(), m.pop()),
                    3 => {
                        let want = if m.is_empty() {
                            None
                        } else {
                            Some(m.remove(0))
                        };
                        assert_eq!(lp.pop_front(), want);
                    }
                    4 => {
                        let i = rng.gen_range(-len - 2..len + 2);
                        let want = if i < 0 { len + i } else { i };
                        let want = (0..len).contains(&want).then(|| m[want as usize].clone());
                        assert_eq!(lp.get(i).map(|v| v.to_vec()), want);
                    }
                    5 => {
                        let i = rng.gen_range(0..=m.len());
                        let e = rand_elem(&mut rng);
                        assert!(lp.insert(i, &e));
                        m.insert(i, e);
                    }
                    6 if !m.is_empty() => {
                        let i = rng.gen_range(-len..len);
                        assert!(lp.delete(i));
                        let j = if i < 0 { len + i } else { i };
                        m.remove(j as usize);
                    }
                    7 if !m.is_empty() => {
                        let i = rng.gen_range(-len..len);
                        let e = rand_elem(&mut rng);
                        assert!(lp.replace(i, &e));
                        let j = if i < 0 { len + i } else { i };
                        m[j as usize] = e;
                    }
                    8 if !m.is_empty() => {
                        let s = rng.gen_range(0..m.len());
                        let c = rng.gen_range(0..5);
                        lp.delete_range(s, c);
                        let e = (s + c).min(m.len());
                        m.drain(s..e);
                    }
                    _ => {
                        let fwd: Vec<Vec<u8>> = lp.iter().map(|v| v.to_vec()).collect();
                        assert_eq!(fwd, m, "round {round}");
                        let mut rev: Vec<Vec<u8>> = lp.iter().rev().map(|v| v.to_vec()).collect();
                        rev.reverse();
                        assert_eq!(rev, m);
                    }
                }
                assert_eq!(lp.len(), m.len());
            }
            let fwd: Vec<Vec<u8>> = lp.iter().map(|v| v.to_vec()).collect();
            assert_eq!(fwd, m);
        }
    }
}
