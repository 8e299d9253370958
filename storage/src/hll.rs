//! HyperLogLog in Redis's string layout, so values move between cinnabar and
//! Redis (GET/SET, DUMP/RESTORE, RDB, AOF) and count the same.
//!
//! A value is a 16-byte header — `HYLL`, the encoding (0 dense, 1 sparse),
//! three zero bytes, the cached cardinality as a little-endian u64 whose top
//! bit set means "stale" — followed by 16384 registers:
//!
//! - dense: 6 bits per register, packed from the least significant bit of
//!   the first byte (12288 bytes);
//! - sparse: runs of opcodes, ZERO `00llllll` (1–64 zero registers), XZERO
//!   `01llllll llllllll` (1–16384 zero registers) and VAL `1vvvvvll` (1–4
//!   registers of value 1–32). A value above 32, or a run split that would
//!   take the string past `hll-sparse-max-bytes`, converts it to dense.
//!
//! An element's register is the low 14 bits of its MurmurHash64A (seed
//! 0xadc83b19) and its value one more than the trailing zeros of the other
//! 50 bits; the estimate is Ertl's improved estimator, as Redis 7.0 computes
//! it. Functions taking a value expect its header checked by [`is_hll`];
//! what they find wrong beyond that is [`Corrupt`].

/// Registers: 2^14.
pub const REGISTERS: usize = 1 << P;
/// Header bytes before the registers.
pub const HEADER: usize = 16;
/// Length of a dense value.
pub const DENSE_LEN: usize = HEADER + REGISTERS * 6 / 8;

const P: u32 = 14;
/// Hash bits left for the run of zeros.
const Q: usize = 64 - P as usize;
const MAGIC: &[u8] = b"HYLL";
const DENSE: u8 = 0;
const SPARSE: u8 = 1;
const VAL_MAX_VALUE: u8 = 32;
const VAL_MAX_LEN: usize = 4;
const ZERO_MAX_LEN: usize = 64;
const SEED: u64 = 0xadc83b19;

/// Registers that do not add up to 16384 (Redis's "Corrupted HLL object").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Corrupt;

/// Whether `b` is a HyperLogLog as far as its header and length tell.
pub fn is_hll(b: &[u8]) -> bool {
    b.len() >= HEADER
        && &b[..4] == MAGIC
        && b[4] <= SPARSE
        && (b[4] == SPARSE || b.len() == DENSE_LEN)
}

/// A new empty HyperLogLog: sparse, one XZERO run, stale cache.
pub fn new_value() -> Vec<u8> {
    let mut v = Vec::with_capacity(HEADER + 2);
    v.extend_from_slice(MAGIC);
    v.extend_from_slice(&[SPARSE, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x80]);
    push_zeros(&mut v, REGISTERS);
    v
}

pub fn is_sparse(b: &[u8]) -> bool {
    b[4] == SPARSE
}

/// The cached cardinality, if fresh.
pub fn cached(b: &[u8]) -> Option<u64> {
    (b[15] & 0x80 == 0).then(|| u64::from_le_bytes(b[8..16].try_into().unwrap()))
}

pub fn set_cache(b: &mut [u8], card: u64) {
    b[8..16].copy_from_slice(&card.to_le_bytes());
}

pub fn invalidate_cache(b: &mut [u8]) {
    b[15] |= 0x80;
}

/// MurmurHash64A, little-endian blocks.
fn murmur64a(key: &[u8], seed: u64) -> u64 {
    const M: u64 = 0xc6a4a7935bd1e995;
    const R: u32 = 47;
    let mut h = seed ^ (key.len() as u64).wrapping_mul(M);
    let mut blocks = key.chunks_exact(8);
    for b in &mut blocks {
        let mut k = u64::from_le_bytes(b.try_into().unwrap());
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h ^= k;
        h = h.wrapping_mul(M);
    }
    let tail = blocks.remainder();
    if !tail.is_empty() {
        for (i, &x) in tail.iter().enumerate() {
            h ^= (x as u64) << (8 * i);
        }
        h = h.wrapping_mul(M);
    }
    h ^= h >> R;
    h = h.wrapping_mul(M);
    h ^= h >> R;
    h
}

/// The register an element falls in and the value it proposes.
pub fn register_of(ele: &[u8]) -> (usize, u8) {
    let h = murmur64a(ele, SEED);
    let idx = (h & (REGISTERS as u64 - 1)) as usize;
    // The guard bit caps the run at Q zeros, so the value is at most Q + 1.
    let rest = (h >> P) | (1u64 << Q);
    (idx, rest.trailing_zeros() as u8 + 1)
}

fn dense_get(r: &[u8], i: usize) -> u8 {
    let bit = i * 6;
    let (b, s) = (bit / 8, bit % 8);
    let hi = if s > 2 { r[b + 1] << (8 - s) } else { 0 };
    ((r[b] >> s) | hi) & 63
}

fn dense_put(r: &mut [u8], i: usize, v: u8) {
    let bit = i * 6;
    let (b, s) = (bit / 8, bit % 8);
    r[b] = (r[b] & !(63u8 << s)) | (v << s);
    if s > 2 {
        r[b + 1] = (r[b + 1] & !(63u8 >> (8 - s))) | (v >> (8 - s));
    }
}

/// Raises dense register `i` to `v`; true if it grew.
fn dense_set(r: &mut [u8], i: usize, v: u8) -> bool {
    if dense_get(r, i) < v {
        dense_put(r, i, v);
        true
    } else {
        false
    }
}

/// Calls `f` with each group of four registers of a dense value.
#[inline]
fn dense_quads(r: &[u8], mut f: impl FnMut(usize, [u8; 4])) {
    for (g, b) in r.chunks_exact(3).enumerate() {
        let (b0, b1, b2) = (b[0], b[1], b[2]);
        f(
            g * 4,
            [
                b0 & 63,
                ((b0 >> 6) | (b1 << 2)) & 63,
                ((b1 >> 4) | (b2 << 4)) & 63,
                b2 >> 2,
            ],
        );
    }
}

/// One sparse opcode: where it starts, its size in bytes, and the run it
/// encodes (`value` 0 for ZERO/XZERO).
#[derive(Clone, Copy)]
struct Op {
    at: usize,
    size: usize,
    value: u8,
    len: usize,
}

/// The opcode at byte `at`. A truncated XZERO reads its missing byte as
/// zero, as Redis reads the string's terminator.
fn op_at(s: &[u8], at: usize) -> Op {
    let b = s[at];
    if b & 0x80 != 0 {
        Op {
            at,
            size: 1,
            value: ((b >> 2) & 0x1f) + 1,
            len: (b & 3) as usize + 1,
        }
    } else if b & 0x40 != 0 {
        let lo = s.get(at + 1).copied().unwrap_or(0) as usize;
        Op {
            at,
            size: 2,
            value: 0,
            len: (((b & 0x3f) as usize) << 8 | lo) + 1,
        }
    } else {
        Op {
            at,
            size: 1,
            value: 0,
            len: (b & 0x3f) as usize + 1,
        }
    }
}

/// The opcodes of a sparse value, header excluded.
fn ops(s: &[u8]) -> impl Iterator<Item = Op> + '_ {
    let mut at = HEADER;
    std::iter::from_fn(move || {
        (at < s.len()).then(|| {
            let op = op_at(s, at);
            at += op.size;
            op
        })
    })
}

fn val_op(value: u8, len: usize) -> u8 {
    0x80 | ((value - 1) << 2) | (len as u8 - 1)
}

/// Appends a zero run of `n` registers: ZERO when it fits, else XZERO.
fn push_zeros(out: &mut Vec<u8>, n: usize) {
    if n <= ZERO_MAX_LEN {
        out.push(n as u8 - 1);
    } else {
        out.push(0x40 | ((n - 1) >> 8) as u8);
        out.push((n - 1) as u8);
    }
}

/// Calls `f` with each run of a sparse value; Corrupt unless the runs
/// cover exactly the 16384 registers.
fn sparse_runs(s: &[u8], mut f: impl FnMut(usize, u8, usize)) -> Result<(), Corrupt> {
    let mut idx = 0;
    for op in ops(s) {
        if idx + op.len > REGISTERS {
            return Err(Corrupt);
        }
        f(idx, op.value, op.len);
        idx += op.len;
    }
    if idx == REGISTERS {
        Ok(())
    } else {
        Err(Corrupt)
    }
}

/// The opcode covering register `idx`: its byte offset, the first
/// register it covers, and the offset of the opcode before it.
fn locate(s: &[u8], idx: usize) -> Option<(usize, usize, Option<usize>)> {
    let (mut p, mut first, mut prev) = (HEADER, 0, None);
    while p < s.len() {
        // Eight one-byte opcodes at a time while they end before `idx`:
        // the walk over a value of a few thousand opcodes was 85% of
        // PFADD's time.
        if let Some(n) = s
            .get(p..p + 8)
            .and_then(|w| eight_runs(w.try_into().unwrap()))
        {
            if first + n <= idx {
                prev = Some(p + 7);
                p += 8;
                first += n;
                continue;
            }
        }
        let b = s[p];
        // One branch, on the rare XZERO: VAL and ZERO come in a random mix
        // a branch between them would mispredict, and their lengths differ
        // only by the mask.
        let (len, size) = if b & 0xc0 == 0x40 {
            let lo = s.get(p + 1).copied().unwrap_or(0) as usize;
            ((((b & 0x3f) as usize) << 8 | lo) + 1, 2)
        } else {
            // 0x3f for ZERO, 0x03 for VAL: a shift, which the compiler
            // does not turn back into a branch as it does a select.
            ((b & (0x3f >> ((b >> 5) & 4))) as usize + 1, 1)
        };
        if idx < first + len {
            return Some((p, first, prev));
        }
        prev = Some(p);
        p += size;
        first += len;
    }
    None
}

/// The registers eight one-byte opcodes cover; None if one of the bytes
/// could start an XZERO.
fn eight_runs(w: [u8; 8]) -> Option<usize> {
    const ONES: u64 = 0x0101_0101_0101_0101;
    let w = u64::from_le_bytes(w);
    let x = (w & 0xc0c0_c0c0_c0c0_c0c0) ^ 0x4040_4040_4040_4040;
    if x.wrapping_sub(ONES) & !x & 0x8080_8080_8080_8080 != 0 {
        return None;
    }
    // Per byte: the low 6 bits for ZERO, 2 for VAL, plus 1; then summed.
    let vals = (w >> 7) & ONES;
    let lens = (w & (0x3f3f_3f3f_3f3f_3f3f ^ (vals * 0x3c))) + ONES;
    let pairs = (lens & 0x00ff_00ff_00ff_00ff) + ((lens >> 8) & 0x00ff_00ff_00ff_00ff);
    Some((pairs.wrapping_mul(0x0001_0001_0001_0001) >> 48) as usize)
}

/// What setting a register in the sparse encoding came to.
enum SparseSet {
    Unchanged,
    Changed,
    /// The value does not fit a VAL, or the string would outgrow the limit.
    Promote,
}

/// Raises register `idx` to `v` in a sparse value, rewriting the opcode
/// that covers it into at most three (zeros or the old value, the new
/// value, zeros or the old value), then merging equal neighbouring VALs.
fn sparse_set(s: &mut Vec<u8>, idx: usize, v: u8, max_bytes: usize) -> Result<SparseSet, Corrupt> {
    if v > VAL_MAX_VALUE {
        return Ok(SparseSet::Promote);
    }
    let (at, first, prev) = locate(s, idx).ok_or(Corrupt)?;
    let op = op_at(s, at);
    let merge_from = prev.unwrap_or(HEADER);
    if op.value != 0 {
        if op.value >= v {
            return Ok(SparseSet::Unchanged);
        }
        if op.len == 1 {
            s[op.at] = val_op(v, 1);
            merge_vals(s, merge_from);
            return Ok(SparseSet::Changed);
        }
    }
    let (before, after) = (idx - first, first + op.len - 1 - idx);
    let mut seq = Vec::with_capacity(5);
    if before > 0 {
        if op.value == 0 {
            push_zeros(&mut seq, before);
        } else {
            seq.push(val_op(op.value, before));
        }
    }
    seq.push(val_op(v, 1));
    if after > 0 {
        if op.value == 0 {
            push_zeros(&mut seq, after);
        } else {
            seq.push(val_op(op.value, after));
        }
    }
    if seq.len() > op.size && s.len() + seq.len() - op.size > max_bytes {
        return Ok(SparseSet::Promote);
    }
    reserve(s, seq.len());
    // A truncated XZERO at the end still counts as two bytes: the string
    // ends where Redis's length arithmetic ends it, one byte short.
    let missing = (op.at + op.size).saturating_sub(s.len());
    s.splice(op.at..op.at + op.size - missing, seq);
    s.truncate(s.len() - missing);
    merge_vals(s, merge_from);
    Ok(SparseSet::Changed)
}

/// Room for `extra` more bytes, growing by an eighth: a sparse value grows
/// a byte or two at a time up to a few KB, and doubling would leave up to
/// half of it unused (each insertion moves the tail anyway).
fn reserve(s: &mut Vec<u8>, extra: usize) {
    if s.capacity() - s.len() < extra {
        s.reserve_exact(extra.max(s.len() / 8));
    }
}

/// Merges adjacent VALs of one value whose runs fit one VAL, looking at
/// five opcodes from `p` (the opcode before the change), as Redis does.
fn merge_vals(s: &mut Vec<u8>, mut p: usize) {
    for _ in 0..5 {
        if p >= s.len() {
            return;
        }
        let op = op_at(s, p);
        if op.value != 0 && p + 1 < s.len() && s[p + 1] & 0x80 != 0 {
            let next = op_at(s, p + 1);
            if next.value == op.value && op.len + next.len <= VAL_MAX_LEN {
                s[p + 1] = val_op(op.value, op.len + next.len);
                s.remove(p);
                continue;
            }
        }
        p += op.size;
    }
}

/// Converts a sparse value to dense (header kept); true if it was sparse.
pub fn to_dense(s: &mut Vec<u8>) -> Result<bool, Corrupt> {
    if s[4] == DENSE {
        return Ok(false);
    }
    let mut d = vec![0u8; DENSE_LEN];
    d[..HEADER].copy_from_slice(&s[..HEADER]);
    d[4] = DENSE;
    let r = &mut d[HEADER..];
    sparse_runs(s, |idx, v, len| {
        if v != 0 {
            (idx..idx + len).for_each(|i| dense_put(r, i, v));
        }
    })?;
    *s = d;
    Ok(true)
}

/// Raises register `idx` to `v`; true if it changed.
fn set(s: &mut Vec<u8>, idx: usize, v: u8, max_bytes: usize) -> Result<bool, Corrupt> {
    if s[4] == SPARSE {
        match sparse_set(s, idx, v, max_bytes)? {
            SparseSet::Unchanged => return Ok(false),
            SparseSet::Changed => return Ok(true),
            SparseSet::Promote => {
                to_dense(s)?;
            }
        }
    }
    Ok(dense_set(&mut s[HEADER..], idx, v))
}

/// Adds an element; true if a register changed. The cache is left alone.
pub fn add(s: &mut Vec<u8>, ele: &[u8], max_bytes: usize) -> Result<bool, Corrupt> {
    let (idx, v) = register_of(ele);
    set(s, idx, v, max_bytes)
}

/// Writes merged registers into a value (PFMERGE's destination), in
/// register order, each as one set.
pub fn store_registers(
    s: &mut Vec<u8>,
    regs: &[u8; REGISTERS],
    max_bytes: usize,
) -> Result<(), Corrupt> {
    for (i, &v) in regs.iter().enumerate() {
        if v != 0 {
            set(s, i, v, max_bytes)?;
        }
    }
    Ok(())
}

/// Raises `max` to the registers of a value (PFCOUNT of several keys,
/// PFMERGE).
pub fn merge_into(max: &mut [u8; REGISTERS], s: &[u8]) -> Result<(), Corrupt> {
    if s[4] == DENSE {
        dense_quads(&s[HEADER..], |i, q| {
            for (m, v) in max[i..i + 4].iter_mut().zip(q) {
                *m = (*m).max(v);
            }
        });
        Ok(())
    } else {
        sparse_runs(s, |idx, v, len| {
            if v != 0 {
                max[idx..idx + len]
                    .iter_mut()
                    .for_each(|m| *m = (*m).max(v));
            }
        })
    }
}

/// Every register of a value, in order (PFDEBUG GETREG).
pub fn registers(s: &[u8]) -> Result<Vec<u8>, Corrupt> {
    let mut r = [0u8; REGISTERS];
    merge_into(&mut r, s)?;
    Ok(r.to_vec())
}

/// The estimated cardinality of a value.
pub fn count(s: &[u8]) -> Result<u64, Corrupt> {
    let mut h = [0u32; 64];
    if s[4] == DENSE {
        dense_quads(&s[HEADER..], |_, q| {
            q.iter().for_each(|&v| h[v as usize] += 1)
        });
    } else {
        sparse_runs(s, |_, v, len| h[v as usize] += len as u32)?;
    }
    Ok(estimate(&h))
}

/// The estimated cardinality of raw registers.
pub fn count_registers(regs: &[u8; REGISTERS]) -> u64 {
    let mut h = [0u32; 64];
    regs.iter().for_each(|&v| h[v as usize & 63] += 1);
    estimate(&h)
}

/// Ertl's improved estimator over the histogram of register values.
fn estimate(h: &[u32; 64]) -> u64 {
    let m = REGISTERS as f64;
    let mut z = m * tau((m - h[Q + 1] as f64) / m);
    for &n in h[1..=Q].iter().rev() {
        z += n as f64;
        z *= 0.5;
    }
    z += m * sigma(h[0] as f64 / m);
    let alpha_inf = 0.5 / std::f64::consts::LN_2;
    (alpha_inf * m * m / z).round() as u64
}

fn sigma(mut x: f64) -> f64 {
    if x == 1.0 {
        return f64::INFINITY;
    }
    let (mut y, mut z) = (1.0, x);
    loop {
        x *= x;
        let prev = z;
        z += x * y;
        y += y;
        if z == prev {
            return z;
        }
    }
}

fn tau(mut x: f64) -> f64 {
    if x == 0.0 || x == 1.0 {
        return 0.0;
    }
    let (mut y, mut z) = (1.0, 1.0 - x);
    loop {
        x = x.sqrt();
        let prev = z;
        y *= 0.5;
        z -= (1.0 - x).powi(2) * y;
        if z == prev {
            return z / 3.0;
        }
    }
}

/// PFDEBUG DECODE's text: `z:N` ZERO, `Z:N` XZERO, `v:V,N` VAL.
pub fn decode(s: &[u8]) -> String {
    let mut out = String::new();
    for op in ops(s) {
        if !out.is_empty() {
            out.push(' ');
        }
        out += &match (op.value, op.size) {
            (0, 1) => format!("z:{}", op.len),
            (0, _) => format!("Z:{}", op.len),
            (v, _) => format!("v:{},{}", v, op.len),
        };
    }
    out
}

/// PFSELFTEST: dense registers hold every value at every position, and
/// sparse and dense values of the same elements count the same, within
/// the estimator's error.
pub fn self_test() -> Result<(), String> {
    let mut r = vec![0u8; DENSE_LEN - HEADER];
    let mut seed = 0x2545f4914f6cdd1du64;
    let mut next = || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    for _ in 0..100 {
        let vals: Vec<u8> = (0..REGISTERS).map(|_| (next() & 63) as u8).collect();
        vals.iter()
            .enumerate()
            .for_each(|(i, &v)| dense_put(&mut r, i, v));
        if let Some(i) = (0..REGISTERS).find(|&i| dense_get(&r, i) != vals[i]) {
            return Err(format!("ERR TESTFAILED Register error at {i}"));
        }
    }
    let (mut sparse, mut dense) = (new_value(), new_value());
    to_dense(&mut dense).map_err(|_| "ERR TESTFAILED dense conversion".to_string())?;
    let relerr = 1.04 / (REGISTERS as f64).sqrt();
    let mut checkpoint = 1u64;
    for j in 1..=100_000u64 {
        let ele = j.to_le_bytes();
        let bad = |_| "ERR TESTFAILED corrupt value".to_string();
        add(&mut sparse, &ele, 3000).map_err(bad)?;
        add(&mut dense, &ele, 3000).map_err(bad)?;
        if j != checkpoint {
            continue;
        }
        checkpoint *= 10;
        let (a, b) = (count(&sparse).map_err(bad)?, count(&dense).map_err(bad)?);
        if a != b {
            return Err(format!("ERR TESTFAILED sparse/dense mismatch: {a} {b}"));
        }
        // Five standard errors, with slack for tiny counts.
        let max = (j as f64 * relerr * 5.0).max(2.0);
        if (a as f64 - j as f64).abs() > max {
            return Err(format!("ERR TESTFAILED too big error. card:{j} error:{a}"));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn filled(elems: impl Iterator<Item = Vec<u8>>, max_bytes: usize) -> Vec<u8> {
        let mut v = new_value();
        for e in elems {
            add(&mut v, &e, max_bytes).unwrap();
        }
        v
    }

    #[test]
    fn registers_of_known_elements() {
        // PFADD h a b c on Redis 7.0.15 decodes as
        // Z:8436 v:1,1 Z:4274 v:2,1 Z:3068 v:1,1 Z:603.
        assert_eq!(register_of(b"a"), (12711, 2));
        let v = filled([b"a", b"b", b"c"].iter().map(|e| e.to_vec()), 3000);
        assert_eq!(decode(&v), "Z:8436 v:1,1 Z:4274 v:2,1 Z:3068 v:1,1 Z:603");
        assert_eq!(count(&v), Ok(3));
    }

    #[test]
    fn empty_value_is_redis_bytes() {
        let v = new_value();
        assert_eq!(v, b"HYLL\x01\0\0\0\0\0\0\0\0\0\0\x80\x7f\xff");
        assert!(is_hll(&v) && is_sparse(&v));
        assert_eq!(cached(&v), None);
        assert_eq!(count(&v), Ok(0));
    }

    #[test]
    fn cache_round_trip() {
        let mut v = new_value();
        set_cache(&mut v, 1234);
        assert_eq!(cached(&v), Some(1234));
        invalidate_cache(&mut v);
        assert_eq!(cached(&v), None);
    }

    #[test]
    fn sparse_and_dense_agree() {
        for n in [0usize, 1, 10, 100, 1000, 5000] {
            let elems = || (0..n).map(|i| format!("e{i}").into_bytes());
            let s = filled(elems(), usize::MAX);
            let mut d = new_value();
            to_dense(&mut d).unwrap();
            for e in elems() {
                add(&mut d, &e, 3000).unwrap();
            }
            assert!(is_sparse(&s));
            assert_eq!(count(&s), count(&d), "n={n}");
            assert_eq!(registers(&s), registers(&d));
            let mut s2 = s.clone();
            assert_eq!(to_dense(&mut s2), Ok(true));
            assert_eq!(s2[HEADER..], d[HEADER..]);
        }
    }

    #[test]
    fn promotes_past_the_limit() {
        let v = filled((0..2000).map(|i| format!("{i}").into_bytes()), 3000);
        assert!(!is_sparse(&v));
        assert_eq!(v.len(), DENSE_LEN);
        let small = filled((0..100).map(|i| format!("{i}").into_bytes()), 3000);
        assert!(is_sparse(&small) && small.len() <= 3000);
    }

    #[test]
    fn sparse_runs_stay_canonical() {
        // Adjacent VALs of one value merge up to four registers.
        let mut v = new_value();
        for i in 0..6 {
            set(&mut v, 100 + i, 3, 3000).unwrap();
        }
        assert_eq!(decode(&v), "Z:100 v:3,4 v:3,2 Z:16278");
        assert_eq!(count(&v).map(|c| c > 0), Ok(true));
    }

    #[test]
    fn locate_agrees_with_the_opcode_walk() {
        let mut v = filled((0..1200).map(|i| format!("{i}").into_bytes()), 3000);
        v.extend_from_slice(&[0x7f, 0xff, 0x80, 0x81]);
        for idx in (0..REGISTERS + 16400).step_by(7) {
            let mut first = 0;
            let mut prev = None;
            let mut want = None;
            for op in ops(&v) {
                if idx < first + op.len {
                    want = Some((op.at, first, prev));
                    break;
                }
                prev = Some(op.at);
                first += op.len;
            }
            assert_eq!(locate(&v, idx), want, "register {idx}");
        }
    }

    #[test]
    fn corrupt_values_are_errors_not_panics() {
        let mut v = filled([b"x".to_vec()].into_iter(), 3000);
        v.extend_from_slice(b"hello");
        assert_eq!(count(&v), Err(Corrupt));
        assert_eq!(to_dense(&mut v.clone()), Err(Corrupt));
        let mut trunc = new_value();
        trunc.pop();
        assert_eq!(count(&trunc), Err(Corrupt));
        // Redis 7.0.15 leaves these bytes (its length arithmetic counts
        // the missing byte).
        assert_eq!(add(&mut trunc, b"a", 3000), Ok(true));
        assert_eq!(trunc[HEADER..], [0x71, 0xa6, 0x84, 0x4d]);
        let mut short = new_value();
        short.truncate(HEADER);
        assert_eq!(add(&mut short, b"a", 3000), Err(Corrupt));
    }

    #[test]
    fn estimates_within_error() {
        for n in [100u64, 10_000, 200_000] {
            let v = filled((0..n).map(|i| i.to_le_bytes().to_vec()), 3000);
            let c = count(&v).unwrap() as f64;
            assert!((c - n as f64).abs() < n as f64 * 0.05, "n={n} c={c}");
        }
    }

    #[test]
    fn self_test_passes() {
        assert_eq!(self_test(), Ok(()));
    }
}
