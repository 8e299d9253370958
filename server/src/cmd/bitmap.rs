//! Bitmap commands: single bits, counts and searches over string values,
//! bitwise operations between keys, and BITFIELD's integer fields.
//!
//! Bits are numbered from the most significant bit of the first byte, as in
//! Redis. Reads past the end see zeros; writes grow the string with zeros
//! and turn it into the `raw` encoding.

use super::{clamp_range, is, norm_range, Ctx, Handler};
use crate::core::config::class;
use crate::core::error::{CmdResult, Error, NOT_INTEGER, WRONGTYPE};
use bytes::Bytes;
use storage::{num::parse_i64, StrValue, Value};

pub static HANDLERS: &[(&str, Handler)] = &[
    ("setbit", setbit),
    ("getbit", getbit),
    ("bitcount", bitcount),
    ("bitpos", bitpos),
    ("bitop", bitop),
    ("bitfield", bitfield),
    ("bitfield_ro", bitfield_ro),
];

fn bad_offset() -> Error {
    Error::other("ERR bit offset is not an integer or out of range")
}

/// A bit offset argument: `n`, or with `hash_bits` set (BITFIELD) also
/// `#n` meaning `n` fields of that width. Refuses offsets whose byte lies
/// beyond proto-max-bulk-len.
fn offset_arg(c: &Ctx, a: &[u8], hash_bits: Option<u32>) -> Result<u64, Error> {
    let (num, mul) = match (a.first(), hash_bits) {
        (Some(b'#'), Some(bits)) => (&a[1..], bits as i64),
        _ => (a, 1),
    };
    // Redis multiplies in C; a `#` offset that overflows wraps the same way.
    let off = parse_i64(num).ok_or_else(bad_offset)?.wrapping_mul(mul);
    if off < 0 || (off >> 3) >= c.st.tun.max_bulk {
        return Err(bad_offset());
    }
    Ok(off as u64)
}

fn get_bit(b: &[u8], off: u64) -> bool {
    let byte = (off >> 3) as usize;
    byte < b.len() && b[byte] >> (7 - (off & 7)) & 1 == 1
}

fn set_bit(b: &mut [u8], off: u64, on: bool) {
    let byte = (off >> 3) as usize;
    let mask = 1u8 << (7 - (off & 7));
    if on {
        b[byte] |= mask;
    } else {
        b[byte] &= !mask;
    }
}

/// The string at `key` as a growable buffer at least `bytes` long, created
/// if missing (Redis's `lookupStringForBitCommand`); the flag tells whether
/// it was created or grown.
fn string_for_write<'a>(
    c: &'a mut Ctx,
    key: &[u8],
    bytes: usize,
) -> Result<(&'a mut Vec<u8>, bool), Error> {
    let db = c.cl.db;
    let mut grown = false;
    if c.st.write_str(db, key, c.now)?.is_none() {
        c.st.shard.dbs[db].add(key, Value::Str(StrValue::raw(Vec::new())));
        grown = true;
    }
    match c.st.shard.dbs[db].get_mut(key) {
        Some(Value::Str(s)) => {
            let v = s.make_raw();
            if v.len() < bytes {
                v.resize(bytes, 0);
                grown = true;
            }
            Ok((v, grown))
        }
        #[allow(unreachable_patterns)]
        _ => Err(WRONGTYPE),
    }
}

/// The bytes of the string at `key` for reading (`None` if missing).
fn string_for_read(c: &mut Ctx, key: &[u8]) -> Result<Option<Vec<u8>>, Error> {
    Ok(c.st.read_str(c.cl.db, key, c.now)?.map(|s| s.to_vec()))
}

/// SETBIT key offset value
fn setbit(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let off = offset_arg(c, &a[2], None)?;
    let on = match parse_i64(&a[3]) {
        Some(v @ (0 | 1)) => v == 1,
        _ => return Err(Error::other("ERR bit is not an integer or out of range")),
    };
    let (v, grown) = string_for_write(c, &a[1], (off >> 3) as usize + 1)?;
    let old = get_bit(v, off);
    set_bit(v, off, on);
    // Rewriting a bit with its own value changes nothing Redis counts.
    if grown || old != on {
        c.st.changed(class::STRING, "setbit", c.cl.db, &a[1]);
    }
    c.out.int(old as i64);
    Ok(())
}

/// GETBIT key offset
fn getbit(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let off = offset_arg(c, &a[2], None)?;
    let bit = match c.st.read_str(c.cl.db, &a[1], c.now)? {
        Some(s) => get_bit(s.as_bytes(&mut itoa::Buffer::new()), off),
        None => false,
    };
    c.out.int(bit as i64);
    Ok(())
}

/// Set bits of `b` in the inclusive bit range `from..=to`.
pub fn count_bits(b: &[u8], from: u64, to: u64) -> u64 {
    let (fb, tb) = ((from >> 3) as usize, (to >> 3) as usize);
    let head = 0xffu8 >> (from & 7);
    let tail = 0xffu8 << (7 - (to & 7));
    if fb == tb {
        return (b[fb] & head & tail).count_ones() as u64;
    }
    let mut n = (b[fb] & head).count_ones() as u64 + (b[tb] & tail).count_ones() as u64;
    let mid = &b[fb + 1..tb];
    let mut chunks = mid.chunks_exact(8);
    for ch in &mut chunks {
        let mut w = [0u8; 8];
        w.copy_from_slice(ch);
        n += u64::from_ne_bytes(w).count_ones() as u64;
    }
    n += chunks
        .remainder()
        .iter()
        .map(|x| x.count_ones() as u64)
        .sum::<u64>();
    n
}

/// First bit equal to `bit` in the inclusive bit range `from..=to`.
pub fn find_bit(b: &[u8], bit: bool, from: u64, to: u64) -> Option<u64> {
    let mut i = from;
    // Bit by bit up to a byte boundary, then whole bytes.
    while i <= to && i & 7 != 0 {
        if get_bit(b, i) == bit {
            return Some(i);
        }
        i += 1;
    }
    let skip = if bit { 0u8 } else { 0xff };
    while i + 7 <= to {
        let byte = b[(i >> 3) as usize];
        if byte != skip {
            let lead = if bit {
                byte.leading_zeros()
            } else {
                byte.leading_ones()
            };
            return Some(i + lead as u64);
        }
        i += 8;
    }
    while i <= to {
        if get_bit(b, i) == bit {
            return Some(i);
        }
        i += 1;
    }
    None
}

/// BYTE|BIT unit argument; true for BIT.
fn unit_arg(a: &[u8]) -> Result<bool, Error> {
    if is(a, "bit") {
        Ok(true)
    } else if is(a, "byte") {
        Ok(false)
    } else {
        Err(Error::Syntax)
    }
}

/// The inclusive bit range for `start..=end` counted in bytes or bits,
/// normalized by `norm`; `None` if empty.
fn bit_range(
    start: i64,
    end: i64,
    bytes: usize,
    isbit: bool,
    norm: fn(i64, i64, i64) -> Option<(i64, i64)>,
) -> Option<(u64, u64)> {
    let len = if isbit {
        bytes as i64 * 8
    } else {
        bytes as i64
    };
    let (s, e) = norm(start, end, len)?;
    Some(if isbit {
        (s as u64, e as u64)
    } else {
        (s as u64 * 8, e as u64 * 8 + 7)
    })
}

/// BITCOUNT key [start end [BYTE | BIT]]
fn bitcount(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let mut buf = itoa::Buffer::new();
    let Some(sv) = c.st.read_str(c.cl.db, &a[1], c.now)? else {
        c.out.int(0);
        return Ok(());
    };
    let b = sv.as_bytes(&mut buf);
    let range = match a.len() {
        2 => None,
        4 | 5 => {
            let start = super::int_arg(&a[2])?;
            let end = super::int_arg(&a[3])?;
            // Redis answers a reversed negative range before reading the unit.
            if start < 0 && end < 0 && start > end {
                c.out.int(0);
                return Ok(());
            }
            let isbit = a.len() == 5 && unit_arg(&a[4])?;
            Some(bit_range(start, end, b.len(), isbit, norm_range))
        }
        _ => return Err(Error::Syntax),
    };
    let n = match range {
        None if b.is_empty() => 0,
        None => count_bits(b, 0, b.len() as u64 * 8 - 1),
        Some(None) => 0,
        Some(Some((from, to))) => count_bits(b, from, to),
    };
    c.out.int(n as i64);
    Ok(())
}

/// BITPOS key bit [start [end [BYTE | BIT]]]
fn bitpos(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let bit = match super::int_arg(&a[2])? {
        0 => false,
        1 => true,
        _ => return Err(Error::other("ERR The bit argument must be 1 or 0.")),
    };
    let mut buf = itoa::Buffer::new();
    let Some(sv) = c.st.read_str(c.cl.db, &a[1], c.now)? else {
        c.out.int(if bit { -1 } else { 0 });
        return Ok(());
    };
    let b = sv.as_bytes(&mut buf);
    if a.len() > 6 {
        return Err(Error::Syntax);
    }
    let start = if a.len() > 3 {
        super::int_arg(&a[3])?
    } else {
        0
    };
    let isbit = a.len() == 6 && unit_arg(&a[5])?;
    let end_given = a.len() > 4;
    let end = if end_given {
        super::int_arg(&a[4])?
    } else {
        -1
    };
    // Unlike BITCOUNT, a negative start past a negative end is clamped,
    // not empty (as Redis).
    let Some((from, to)) = bit_range(start, end, b.len(), isbit, clamp_range) else {
        c.out.int(-1);
        return Ok(());
    };
    let pos = match find_bit(b, bit, from, to) {
        Some(p) => p as i64,
        // Without an explicit end the string is seen as followed by zeros.
        None if !bit && !end_given => to as i64 + 1,
        None => -1,
    };
    c.out.int(pos);
    Ok(())
}

/// BITOP <AND | OR | XOR | NOT> destkey key [key ...]
fn bitop(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    #[derive(PartialEq)]
    enum Op {
        And,
        Or,
        Xor,
        Not,
    }
    let op = if is(&a[1], "and") {
        Op::And
    } else if is(&a[1], "or") {
        Op::Or
    } else if is(&a[1], "xor") {
        Op::Xor
    } else if is(&a[1], "not") {
        Op::Not
    } else {
        return Err(Error::Syntax);
    };
    if op == Op::Not && a.len() != 4 {
        return Err(Error::other(
            "ERR BITOP NOT must be called with a single source key.",
        ));
    }
    let mut srcs: Vec<Vec<u8>> = Vec::with_capacity(a.len() - 3);
    for k in &a[3..] {
        srcs.push(string_for_read(c, k)?.unwrap_or_default());
    }
    let maxlen = srcs.iter().map(Vec::len).max().unwrap_or(0);
    let mut res = vec![0u8; maxlen];
    for (i, r) in res.iter_mut().enumerate() {
        let byte = |s: &Vec<u8>| s.get(i).copied().unwrap_or(0);
        *r = match op {
            Op::Not => !byte(&srcs[0]),
            Op::And => srcs.iter().fold(0xff, |acc, s| acc & byte(s)),
            Op::Or => srcs.iter().fold(0, |acc, s| acc | byte(s)),
            Op::Xor => srcs.iter().fold(0, |acc, s| acc ^ byte(s)),
        };
    }
    let db = c.cl.db;
    c.st.expire_if_needed(db, &a[2], c.now);
    if maxlen > 0 {
        c.st.keys(db, c.now)
            .set(&a[2], Value::Str(StrValue::raw(res)), false);
        c.st.changed(class::STRING, "set", db, &a[2]);
    } else if c.st.shard.dbs[db].remove(&a[2]).is_some() {
        c.st.changed(class::GENERIC, "del", db, &a[2]);
    }
    c.out.int(maxlen as i64);
    Ok(())
}

/// BITFIELD's overflow policy.
#[derive(Clone, Copy, PartialEq, Debug)]
pub enum Overflow {
    Wrap,
    Sat,
    Fail,
}

/// A BITFIELD integer type: `i1`..`i64` or `u1`..`u63`.
#[derive(Clone, Copy, PartialEq, Debug)]
pub struct FieldType {
    pub signed: bool,
    pub bits: u32,
}

impl FieldType {
    pub fn parse(a: &[u8]) -> Option<FieldType> {
        let signed = match a.first()? {
            b'i' => true,
            b'u' => false,
            _ => return None,
        };
        let bits = parse_i64(&a[1..])?;
        let max = if signed { 64 } else { 63 };
        (1..=max).contains(&bits).then_some(FieldType {
            signed,
            bits: bits as u32,
        })
    }
}

/// Reads the `bits`-wide unsigned field at bit `off`.
pub fn get_field(b: &[u8], off: u64, bits: u32) -> u64 {
    (0..bits as u64).fold(0u64, |v, i| (v << 1) | get_bit(b, off + i) as u64)
}

/// Reads a field as signed, sign-extending from its top bit.
pub fn get_signed_field(b: &[u8], off: u64, bits: u32) -> i64 {
    let v = get_field(b, off, bits);
    if bits < 64 && v >> (bits - 1) & 1 == 1 {
        (v | (u64::MAX << bits)) as i64
    } else {
        v as i64
    }
}

/// Writes the low `bits` of `v` at bit `off`; `b` is long enough.
pub fn set_field(b: &mut [u8], off: u64, bits: u32, v: u64) {
    for i in 0..bits as u64 {
        set_bit(b, off + i, v >> (bits as u64 - 1 - i) & 1 == 1);
    }
}

/// Redis's unsigned overflow check for `value + incr` in a `bits` field:
/// `None` if it fits, else the wrapped or saturated result (unused for FAIL).
/// The arithmetic mirrors Redis's C, wrap-arounds included.
pub fn unsigned_overflow(value: u64, incr: i64, bits: u32, ow: Overflow) -> Option<u64> {
    let max = if bits == 64 {
        u64::MAX
    } else {
        (1u64 << bits) - 1
    };
    let maxincr = max.wrapping_sub(value) as i64;
    let minincr = value.wrapping_neg() as i64;
    let wrap = || value.wrapping_add(incr as u64) & !(u64::MAX.checked_shl(bits).unwrap_or(0));
    if value > max || (incr > 0 && incr > maxincr) {
        Some(if ow == Overflow::Sat { max } else { wrap() })
    } else if incr < 0 && incr < minincr {
        Some(if ow == Overflow::Sat { 0 } else { wrap() })
    } else {
        None
    }
}

/// Redis's signed overflow check, as [`unsigned_overflow`].
pub fn signed_overflow(value: i64, incr: i64, bits: u32, ow: Overflow) -> Option<i64> {
    let max = if bits == 64 {
        i64::MAX
    } else {
        (1i64 << (bits - 1)) - 1
    };
    let min = -max - 1;
    let maxincr = (max as u64).wrapping_sub(value as u64) as i64;
    let minincr = min.wrapping_sub(value);
    let wrap = || {
        let mut r = (value as u64).wrapping_add(incr as u64);
        if bits < 64 {
            let mask = u64::MAX << bits;
            if r >> (bits - 1) & 1 == 1 {
                r |= mask;
            } else {
                r &= !mask;
            }
        }
        r as i64
    };
    if value > max || (bits != 64 && incr > maxincr) || (value >= 0 && incr > 0 && incr > maxincr) {
        Some(if ow == Overflow::Sat { max } else { wrap() })
    } else if value < min
        || (bits != 64 && incr < minincr)
        || (value < 0 && incr < 0 && incr < minincr)
    {
        Some(if ow == Overflow::Sat { min } else { wrap() })
    } else {
        None
    }
}

#[derive(Clone, Copy, PartialEq)]
enum FieldOp {
    Get,
    Set(i64),
    Incr(i64),
}

/// BITFIELD key [GET encoding offset | [OVERFLOW <WRAP | SAT | FAIL>]
///   <SET encoding offset value | INCRBY encoding offset increment> ...]
fn bitfield(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    bitfield_generic(c, a, false)
}

/// BITFIELD_RO key [GET encoding offset ...]
fn bitfield_ro(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    bitfield_generic(c, a, true)
}

fn bitfield_generic(c: &mut Ctx, a: &[Bytes], ro: bool) -> CmdResult {
    let mut ops: Vec<(FieldOp, FieldType, u64, Overflow)> = Vec::new();
    let mut ow = Overflow::Wrap;
    let mut highest: Option<u64> = None;
    let mut j = 2;
    while j < a.len() {
        let rem = a.len() - j - 1;
        let sub = &a[j];
        let kind = if is(sub, "get") && rem >= 2 {
            0
        } else if is(sub, "set") && rem >= 3 {
            1
        } else if is(sub, "incrby") && rem >= 3 {
            2
        } else if is(sub, "overflow") && rem >= 1 {
            let t = &a[j + 1];
            ow = if is(t, "wrap") {
                Overflow::Wrap
            } else if is(t, "sat") {
                Overflow::Sat
            } else if is(t, "fail") {
                Overflow::Fail
            } else {
                return Err(Error::other("ERR Invalid OVERFLOW type specified"));
            };
            j += 2;
            continue;
        } else {
            return Err(Error::Syntax);
        };
        let ty = FieldType::parse(&a[j + 1]).ok_or_else(|| {
            Error::other(
                "ERR Invalid bitfield type. Use something like i16 u8. Note that u64 is not supported but i64 is.",
            )
        })?;
        let off = offset_arg(c, &a[j + 2], Some(ty.bits))?;
        let op = if kind == 0 {
            FieldOp::Get
        } else {
            let last = off + ty.bits as u64 - 1;
            highest = Some(highest.map_or(last, |h| h.max(last)));
            let v = parse_i64(&a[j + 3]).ok_or(NOT_INTEGER)?;
            if kind == 1 {
                FieldOp::Set(v)
            } else {
                FieldOp::Incr(v)
            }
        };
        ops.push((op, ty, off, ow));
        j += if kind == 0 { 3 } else { 4 };
    }
    let db = c.cl.db;
    let Some(highest) = highest else {
        let mut buf = itoa::Buffer::new();
        let b = match c.st.read_str(db, &a[1], c.now)? {
            Some(sv) => sv.as_bytes(&mut buf),
            None => &[],
        };
        c.out.array(ops.len());
        for (_, ty, off, _) in ops {
            if ty.signed {
                c.out.int(get_signed_field(b, off, ty.bits));
            } else {
                c.out.int(get_field(b, off, ty.bits) as i64);
            }
        }
        return Ok(());
    };
    if ro {
        return Err(Error::other(
            "ERR BITFIELD_RO only supports the GET subcommand",
        ));
    }
    let mut changes = 0u64;
    let mut replies: Vec<Option<i64>> = Vec::with_capacity(ops.len());
    {
        // As Redis: a write counts when it changes its field, or when the
        // command created or grew the string.
        let (b, grown) = string_for_write(c, &a[1], (highest >> 3) as usize + 1)?;
        for (op, ty, off, ow) in ops {
            let bits = ty.bits;
            let reply = if ty.signed {
                let old = get_signed_field(b, off, bits);
                let (new, over, ret) = match op {
                    FieldOp::Get => {
                        replies.push(Some(old));
                        continue;
                    }
                    FieldOp::Incr(by) => {
                        let o = signed_overflow(old, by, bits, ow);
                        let new = o.unwrap_or_else(|| old.wrapping_add(by));
                        (new, o.is_some(), new)
                    }
                    FieldOp::Set(v) => {
                        let o = signed_overflow(v, 0, bits, ow);
                        (o.unwrap_or(v), o.is_some(), old)
                    }
                };
                (!(over && ow == Overflow::Fail)).then(|| {
                    set_field(b, off, bits, new as u64);
                    changes += (new != old || grown) as u64;
                    ret
                })
            } else {
                let old = get_field(b, off, bits);
                let (new, over, ret) = match op {
                    FieldOp::Get => {
                        replies.push(Some(old as i64));
                        continue;
                    }
                    FieldOp::Incr(by) => {
                        let o = unsigned_overflow(old, by, bits, ow);
                        let new = o.unwrap_or_else(|| old.wrapping_add(by as u64));
                        (new, o.is_some(), new)
                    }
                    FieldOp::Set(v) => {
                        let o = unsigned_overflow(v as u64, 0, bits, ow);
                        (o.unwrap_or(v as u64), o.is_some(), old)
                    }
                };
                (!(over && ow == Overflow::Fail)).then(|| {
                    set_field(b, off, bits, new);
                    changes += (new != old || grown) as u64;
                    ret as i64
                })
            };
            replies.push(reply);
        }
    }
    if changes > 0 {
        c.st.changed(class::STRING, "setbit", db, &a[1]);
        c.st.dirty += changes - 1;
    }
    c.out.array(replies.len());
    for r in replies {
        match r {
            Some(v) => c.out.int(v),
            None => c.out.null(),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_and_searches() {
        let b = b"foobar";
        assert_eq!(count_bits(b, 0, 47), 26);
        assert_eq!(count_bits(b, 5, 30), 17);
        assert_eq!(count_bits(b, 8, 15), 6);
        assert_eq!(find_bit(b"\xff\xf0\x00", false, 0, 23), Some(12));
        assert_eq!(find_bit(b"\x00\x00\x01", true, 0, 23), Some(23));
        assert_eq!(find_bit(b"\x00\x00\x01", true, 3, 22), None);
        assert_eq!(find_bit(b"\xff", false, 0, 7), None);
    }

    #[test]
    fn fields_round_trip() {
        let mut b = vec![0u8; 4];
        set_field(&mut b, 3, 13, 0x1abc);
        assert_eq!(get_field(&b, 3, 13), 0x1abc);
        set_field(&mut b, 0, 8, 0xff);
        assert_eq!(get_signed_field(&b, 0, 8), -1);
        assert_eq!(get_signed_field(&b, 0, 1), -1);
        assert_eq!(FieldType::parse(b"u64"), None);
        assert_eq!(FieldType::parse(b"i0"), None);
        assert_eq!(
            FieldType::parse(b"i64"),
            Some(FieldType {
                signed: true,
                bits: 64
            })
        );
    }

    #[test]
    fn overflow_math() {
        use Overflow::*;
        assert_eq!(unsigned_overflow(250, 10, 8, Wrap), Some(4));
        assert_eq!(unsigned_overflow(250, 10, 8, Sat), Some(255));
        assert_eq!(unsigned_overflow(5, -10, 8, Sat), Some(0));
        assert_eq!(unsigned_overflow(5, -10, 8, Wrap), Some(251));
        assert_eq!(unsigned_overflow(5, 10, 8, Wrap), None);
        assert_eq!(unsigned_overflow(u64::MAX, 0, 8, Sat), Some(255));
        assert_eq!(signed_overflow(100, 100, 8, Wrap), Some(-56));
        assert_eq!(signed_overflow(100, 100, 8, Sat), Some(127));
        assert_eq!(signed_overflow(-100, -100, 8, Sat), Some(-128));
        assert_eq!(signed_overflow(-100, -100, 8, Wrap), Some(56));
        assert_eq!(signed_overflow(i64::MAX, 1, 64, Wrap), Some(i64::MIN));
        assert_eq!(signed_overflow(i64::MIN, -1, 64, Sat), Some(i64::MIN));
        assert_eq!(signed_overflow(1, 1, 64, Sat), None);
        // Redis's C wraps computing the limit, so this "overflows" upwards.
        assert_eq!(signed_overflow(i64::MIN, 0, 8, Sat), Some(127));
    }
}
