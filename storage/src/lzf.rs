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
/// fresh zeroed one per string cost more than the compression of a short
/// string. Each slot holds the generation (call) that wrote it above the
/// position, so an old generation reads as "never seen" and the table is
/// cleared once every 65535 calls. 4-byte slots: 256 KB a thread, as
/// liblzf's.
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

/// Entries of [`Keyed`]; twice the longest input it takes, so that at
/// most half are used.
const KEYED: usize = 2048;
/// The longest input compressed with [`Keyed`].
const SHORT: usize = KEYED / 2;

/// The table of a short input: only the slots it uses, keyed by their
/// index (open addressing), so it compresses exactly as with the full
/// table. A snapshot compresses mostly short strings, whose scattered
/// slots touch every page of the full table in time: 256 KB of a full
/// sync's memory, where this takes 16 KB. Entries: generation (call)
/// above the slot's index above the position, reused as in [`Htab`].
struct Keyed {
    gen: u64,
    slots: Vec<u64>,
}

impl Keyed {
    /// Where slot `i` is, or the free entry it would take.
    fn find(&self, i: usize) -> (usize, bool) {
        let mut at = i & (KEYED - 1);
        loop {
            let e = self.slots[at];
            if e >> 32 != self.gen {
                return (at, false);
            }
            if (e >> 16) & 0xffff == i as u64 {
                return (at, true);
            }
            at = (at + 1) & (KEYED - 1);
        }
    }
}

impl Table for Keyed {
    fn get(&self, i: usize) -> u32 {
        match self.find(i) {
            (at, true) => (self.slots[at] & 0xffff) as u32,
            _ => 0,
        }
    }
    fn set(&mut self, i: usize, pos: u32) {
        let (at, _) = self.find(i);
        self.slots[at] = (self.gen << 32) | ((i as u64) << 16) | u64::from(pos);
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
    static KEYED_TAB: std::cell::RefCell<Keyed> = const {
        std::cell::RefCell::new(Keyed { gen: 0, slots: Vec::new() })
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
    if input.len() > 0xffff {
        return compress_with(input, max_out, &mut Wide(vec![0; HSIZE]));
    }
    if input.len() <= SHORT {
        return KEYED_TAB.with(|t| {
            let mut t = t.borrow_mut();
            if t.slots.is_empty() {
                t.slots = vec![0; KEYED];
            } else if t.gen == u64::from(u32::MAX) {
                t.slots.fill(0);
                t.gen = 0;
            }
            t.gen += 1;
            compress_with(input, max_out, &mut *t)
        });
    }
    HTAB.with(|t| {
        let mut t = t.borrow_mut();
        if t.slots.is_empty() {
            t.slots = vec![0; HSIZE];
        } else if t.gen == 0xffff {
            // In place: a new table beside the old would double its memory.
            t.slots.fill(0);
            t.gen = 0;
        }
        t.gen += 1;
        compress_with(input, max_out, &mut *t)
    })
}

fn compress_with(input: &[u8], max_out: usize, htab: &mut impl Table) -> Option<Vec<u8>> {
    let n = input.len();
    if n == 0 || max_out == 0 {
        return None;
    }
    // Positions; 0 means "never seen" (liblzf's table holds offsets from
    // the input start, and a reference to position 0 is never taken).
    let mut out: Vec<u8> = Vec::with_capacity(max_out + 1);
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
            let op = out.len();
            if op + 3 + 1 >= max_out && op - usize::from(lit == 0) + 3 + 1 >= max_out {
                return None;
            }
            let run_start = op - lit - 1;
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
            if out.len() >= max_out {
                return None;
            }
            push_literal(&mut out, &mut lit, input[ip]);
            ip += 1;
        }
    }
    if out.len() + 3 > max_out {
        return None;
    }
    while ip < n {
        push_literal(&mut out, &mut lit, input[ip]);
        ip += 1;
    }
    let p = out.len() - lit - 1;
    out[p] = (lit as u8).wrapping_sub(1);
    if lit == 0 {
        out.pop();
    }
    if out.len() > max_out {
        return None;
    }
    Some(out)
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

    #[test]
    fn the_reused_table_compresses_as_a_fresh_one() {
        // Many calls in a row: old generations must read as never seen.
        for i in 0..70_000u32 {
            let s: Vec<u8> = format!("value:{i:08}:{}", "ab".repeat((i % 40) as usize)).into();
            let fresh = compress_with(&s, s.len(), &mut Wide(vec![0; HSIZE]));
            assert_eq!(compress(&s, s.len()), fresh, "{i}");
            // Short inputs go to the keyed table; these to the full one.
            let s: Vec<u8> = format!("{}:{i}", "xy".repeat(600)).into();
            let fresh = compress_with(&s, s.len(), &mut Wide(vec![0; HSIZE]));
            assert_eq!(compress(&s, s.len()), fresh, "{i}");
        }
    }

    #[test]
    fn the_keyed_table_compresses_as_the_full_one() {
        // Inputs up to its limit whose slots collide in the keyed table
        // (noise) or repeat (runs): as the full table, byte for byte.
        let mut x = 12345u32;
        for len in (3..=SHORT).step_by(7).chain([SHORT - 1, SHORT]) {
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
            let fresh = compress_with(&s, s.len() + 64, &mut Wide(vec![0; HSIZE]));
            assert_eq!(compress(&s, s.len() + 64), fresh, "{len}");
        }
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
