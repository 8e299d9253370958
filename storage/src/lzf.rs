//! LZF, the compression of RDB strings (`rdbcompression yes`) and of
//! quicklist nodes (`list-compress-depth`).
//!
//! The compressor follows liblzf 3.6's algorithm as Redis builds it (16-bit
//! hash table, "very fast" mode re-hashing two positions after a match), so
//! a string compresses to the bytes Redis writes. The decompressor checks
//! every reference and length against its buffers.

const HLOG: u32 = 16;
const HSIZE: usize = 1 << HLOG;
const MAX_LIT: usize = 1 << 5;
const MAX_OFF: usize = 1 << 13;
const MAX_REF: usize = (1 << 8) + (1 << 3);

fn idx(h: u32) -> usize {
    (((h >> (3 * 8 - HLOG)).wrapping_sub(h.wrapping_mul(5))) as usize) & (HSIZE - 1)
}

/// Where a hash was last seen; 0 means never.
trait Table {
    fn get(&self, i: usize) -> u32;
    fn set(&mut self, i: usize, pos: u32);
}

/// The table of inputs up to 64 KB, reused by every call on a thread: a
/// fresh zeroed one per string cost more than the compression of a
/// string this long. Each slot holds the generation (call) that wrote it
/// above the position, so an old generation reads as "never seen" and the
/// table is cleared once every 65535 calls. 4-byte slots: 256 KB a
/// thread, as liblzf's.
struct Htab {
    gen: u32,
    slots: Vec<u32>,
}

impl Table for Htab {
    fn get(&self, i: usize) -> u32 {
        let e = self.slots[i];
        if e >> 16 == self.gen {
            e & 0xffff
        } else {
            0
        }
    }
    fn set(&mut self, i: usize, pos: u32) {
        self.slots[i] = (self.gen << 16) | pos;
    }
}

/// The table of a short input (at most `N / 2` bytes), on the stack: only
/// the slots it uses, keyed by their index (open addressing), so it
/// compresses exactly as with the full table. A snapshot compresses
/// mostly short strings: with this, its saver allocates nothing for
/// them, where the full table's scattered slots touched all of its
/// 256 KB (a full sync's memory). Entries: the slot above the position;
/// all ones is free (no position of a short input is 0xffff).
struct Keyed<const N: usize>([u32; N]);

impl<const N: usize> Keyed<N> {
    const FREE: u32 = u32::MAX;

    /// Where slot `i` is, or the free entry it would take.
    fn find(&self, i: usize) -> (usize, bool) {
        let mut at = i & (N - 1);
        loop {
            match self.0[at] {
                Self::FREE => return (at, false),
                e if (e >> 16) as usize == i => return (at, true),
                _ => at = (at + 1) & (N - 1),
            }
        }
    }
}

impl<const N: usize> Table for Keyed<N> {
    fn get(&self, i: usize) -> u32 {
        match self.find(i) {
            (at, true) => self.0[at] & 0xffff,
            _ => 0,
        }
    }
    fn set(&mut self, i: usize, pos: u32) {
        let (at, _) = self.find(i);
        self.0[at] = ((i as u32) << 16) | pos;
    }
}

/// A longer input's table: positions alone, zeroed for the call.
struct Wide(Vec<u32>);

impl Table for Wide {
    fn get(&self, i: usize) -> u32 {
        self.0[i]
    }
    fn set(&mut self, i: usize, pos: u32) {
        self.0[i] = pos;
    }
}

thread_local! {
    static HTAB: std::cell::RefCell<Htab> = const {
        std::cell::RefCell::new(Htab { gen: 0, slots: Vec::new() })
    };
}

/// Appends a literal byte to the open run (`lit` bytes so far, its length
/// byte reserved before them); a full run is closed and a new one opened.
fn push_literal(out: &mut Vec<u8>, lit: &mut usize, b: u8) {
    *lit += 1;
    out.push(b);
    if *lit == MAX_LIT {
        let p = out.len() - *lit - 1;
        out[p] = (*lit - 1) as u8;
        *lit = 0;
        out.push(0);
    }
}

/// Compresses `input` into at most `max_out` bytes; `None` when the result
/// would not fit (Redis then stores the string as is).
pub fn compress(input: &[u8], max_out: usize) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(max_out + 1);
    compress_into(input, max_out, &mut out).then_some(out)
}

/// [`compress`], appending to `out`; false (and `out` as it was) when the
/// result would not fit.
pub fn compress_into(input: &[u8], max_out: usize, out: &mut Vec<u8>) -> bool {
    match input.len() {
        0..=64 => compress_with(input, max_out, &mut Keyed([Keyed::<128>::FREE; 128]), out),
        65..=256 => compress_with(input, max_out, &mut Keyed([Keyed::<512>::FREE; 512]), out),
        257..=1024 => compress_with(input, max_out, &mut Keyed([Keyed::<2048>::FREE; 2048]), out),
        1025..=0xffff => HTAB.with(|t| {
            let mut t = t.borrow_mut();
            if t.slots.is_empty() {
                t.slots = vec![0; HSIZE];
            } else if t.gen == 0xffff {
                // In place: a new table beside the old would double its memory.
                t.slots.fill(0);
                t.gen = 0;
            }
            t.gen += 1;
            compress_with(input, max_out, &mut *t, out)
        }),
        _ => compress_with(input, max_out, &mut Wide(vec![0; HSIZE]), out),
    }
}

fn compress_with(input: &[u8], max_out: usize, htab: &mut impl Table, out: &mut Vec<u8>) -> bool {
    let n = input.len();
    if n == 0 || max_out == 0 {
        return false;
    }
    // Positions; 0 means "never seen" (liblzf's table holds offsets from
    // the input start, and a reference to position 0 is never taken).
    let base = out.len();
    let fail = |out: &mut Vec<u8>| {
        out.truncate(base);
        false
    };
    let mut lit: usize = 0;
    out.push(0); // the control byte of the first literal run
    let mut ip = 0usize;
    let frst = |p: usize| (u32::from(input[p]) << 8) | u32::from(input[p + 1]);
    let mut hval = if n >= 2 { frst(0) } else { 0 };
    while n >= 3 && ip < n - 2 {
        hval = (hval << 8) | u32::from(input[ip + 2]);
        let slot = idx(hval);
        let rf = htab.get(slot) as usize;
        htab.set(slot, ip as u32);
        let matched = rf > 0 && rf < ip && ip - rf - 1 < MAX_OFF && {
            input[rf + 2] == input[ip + 2]
                && input[rf] == input[ip]
                && input[rf + 1] == input[ip + 1]
        };
        if matched {
            let off = ip - rf - 1;
            let mut len = 2usize;
            let maxlen = (n - ip - len).min(MAX_REF);
            let op = out.len() - base;
            if op + 3 + 1 >= max_out && op - usize::from(lit == 0) + 3 + 1 >= max_out {
                return fail(out);
            }
            let run_start = out.len() - lit - 1;
            out[run_start] = (lit as u8).wrapping_sub(1);
            if lit == 0 {
                out.pop();
            }
            let mut done = false;
            if maxlen > 16 {
                for _ in 0..16 {
                    len += 1;
                    if input[rf + len] != input[ip + len] {
                        done = true;
                        break;
                    }
                }
            }
            if !done {
                loop {
                    len += 1;
                    if !(len < maxlen && input[rf + len] == input[ip + len]) {
                        break;
                    }
                }
            }
            len -= 2;
            ip += 1;
            if len < 7 {
                out.push(((off >> 8) + (len << 5)) as u8);
            } else {
                out.push(((off >> 8) + (7 << 5)) as u8);
                out.push((len - 7) as u8);
            }
            out.push(off as u8);
            lit = 0;
            out.push(0);
            ip += len + 1;
            if ip >= n - 2 {
                break;
            }
            ip -= 2;
            hval = frst(ip);
            hval = (hval << 8) | u32::from(input[ip + 2]);
            htab.set(idx(hval), ip as u32);
            ip += 1;
            hval = (hval << 8) | u32::from(input[ip + 2]);
            htab.set(idx(hval), ip as u32);
            ip += 1;
        } else {
            if out.len() - base >= max_out {
                return fail(out);
            }
            push_literal(out, &mut lit, input[ip]);
            ip += 1;
        }
    }
    if out.len() - base + 3 > max_out {
        return fail(out);
    }
    while ip < n {
        push_literal(out, &mut lit, input[ip]);
        ip += 1;
    }
    let p = out.len() - lit - 1;
    out[p] = (lit as u8).wrapping_sub(1);
    if lit == 0 {
        out.pop();
    }
    if out.len() - base > max_out {
        return fail(out);
    }
    true
}

/// Decompresses `input` into exactly `out_len` bytes.
pub fn decompress(input: &[u8], out_len: usize) -> Result<Vec<u8>, &'static str> {
    let mut out: Vec<u8> = Vec::with_capacity(out_len);
    let mut ip = 0usize;
    while ip < input.len() {
        let ctrl = input[ip] as usize;
        ip += 1;
        if ctrl < 32 {
            let run = ctrl + 1;
            if out.len() + run > out_len {
                return Err("LZF output overflow");
            }
            let lits = input.get(ip..ip + run).ok_or("LZF input truncated")?;
            out.extend_from_slice(lits);
            ip += run;
        } else {
            let mut len = ctrl >> 5;
            if len == 7 {
                len += *input.get(ip).ok_or("LZF input truncated")? as usize;
                ip += 1;
            }
            let low = *input.get(ip).ok_or("LZF input truncated")? as usize;
            ip += 1;
            let back = ((ctrl & 0x1f) << 8) + low + 1;
            len += 2;
            if out.len() + len > out_len {
                return Err("LZF output overflow");
            }
            if back > out.len() {
                return Err("LZF back reference out of range");
            }
            let start = out.len() - back;
            for i in 0..len {
                let b = out[start + i];
                out.push(b);
            }
        }
    }
    if out.len() != out_len {
        return Err("LZF length mismatch");
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What the full table, zeroed for the call, makes of `s`.
    fn fresh(s: &[u8], max_out: usize) -> Option<Vec<u8>> {
        let mut out = Vec::new();
        compress_with(s, max_out, &mut Wide(vec![0; HSIZE]), &mut out).then_some(out)
    }

    #[test]
    fn the_reused_table_compresses_as_a_fresh_one() {
        // Many calls in a row: old generations must read as never seen.
        for i in 0..70_000u32 {
            let s: Vec<u8> = format!("value:{i:08}:{}", "ab".repeat((i % 40) as usize)).into();
            assert_eq!(compress(&s, s.len()), fresh(&s, s.len()), "{i}");
            // Short inputs go to a keyed table; these to the reused one.
            let s: Vec<u8> = format!("{}:{i}", "xy".repeat(600)).into();
            assert_eq!(compress(&s, s.len()), fresh(&s, s.len()), "{i}");
        }
    }

    #[test]
    fn the_keyed_tables_compress_as_the_full_one() {
        // Inputs up to the keyed tables' limit whose slots collide there
        // (noise) or repeat (runs): as the full table, byte for byte.
        let mut x = 12345u32;
        for len in (3..=1024).step_by(3).chain([64, 65, 256, 257, 1024]) {
            let s: Vec<u8> = (0..len)
                .map(|i| {
                    x = x.wrapping_mul(1103515245).wrapping_add(12345);
                    if i % 3 == 0 {
                        (x >> 16) as u8
                    } else {
                        b'a' + (i % 5) as u8
                    }
                })
                .collect();
            assert_eq!(compress(&s, s.len() + 64), fresh(&s, s.len() + 64), "{len}");
        }
    }

    #[test]
    fn compress_into_appends_or_leaves_out_as_it_was() {
        let s = b"abcabcabcabcabcabcabcabcabcabcabcabc";
        let mut out = b"head".to_vec();
        assert!(compress_into(s, s.len(), &mut out));
        assert_eq!(&out[..4], b"head");
        assert_eq!(out[4..], compress(s, s.len()).unwrap());
        let noise: Vec<u8> = (0..40u32)
            .map(|i| (i.wrapping_mul(2654435761) >> 7) as u8)
            .collect();
        let mut out = b"head".to_vec();
        assert!(!compress_into(&noise, noise.len() - 4, &mut out));
        assert_eq!(out, b"head");
    }

    #[test]
    fn round_trips() {
        let samples: Vec<Vec<u8>> = vec![
            b"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa".to_vec(),
            b"hello world hello world hello world hello world!".to_vec(),
            (0..5000u32).map(|i| (i % 251) as u8).collect(),
            (0..3000u32).map(|i| (i * i % 7) as u8).collect(),
            (0..300u32)
                .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8)
                .collect(),
            // Past 64 KB: the per-call table.
            (0..100_000u32).map(|i| (i % 251 + i / 997) as u8).collect(),
        ];
        for s in samples {
            if let Some(c) = compress(&s, s.len() - 4) {
                assert!(c.len() <= s.len() - 4);
                assert_eq!(decompress(&c, s.len()).unwrap(), s);
            }
        }
    }

    #[test]
    fn matches_redis_bytes() {
        // A zset listpack as Redis 7.0.15 DUMPs it, LZF-compressed.
        let lp: &[u8] = b"H\x00\x00\x00\x08\x00\x81a\x02\x930.10000000000000001\x14\x81b\x02\x831.5\x04\x81c\x02\x03\x01\x81d\x02\x971.0000000000000001e+300\x18\xff";
        let redis: &[u8] = b"\r\x48\x00\x00\x00\x08\x00\x81a\x02\x930.10\xe0\x05\x00\x141\x14\x81b\x02\x831.5\x04\x81c\x02\x03\x01\x81d\x02\x971.\xe0\x05\"\x0801e+300\x18\xff";
        assert_eq!(compress(lp, lp.len() - 4).unwrap(), redis);
        assert_eq!(decompress(redis, lp.len()).unwrap(), lp);
    }

    #[test]
    fn corrupt_input_is_an_error() {
        assert!(decompress(b"\x20\x05", 10).is_err());
        assert!(decompress(b"\x05ab", 6).is_err());
        assert!(decompress(b"\x01ab", 3).is_err());
    }
}
