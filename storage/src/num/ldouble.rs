//! Redis's `long double` arithmetic, bit-exact with Redis 7.0 on x86-64.
//!
//! Redis parses INCRBYFLOAT's operands and blocking timeouts with `strtold`
//! into x87 80-bit long doubles (64-bit significand), adds (or scales) them
//! there and prints INCRBYFLOAT's sum with `%.17Lf`, trailing zeros
//! removed. Doing this with f64 gives visibly different results
//! (`0.1 + 0.2` is `0.3` in Redis), and Rust has no 80-bit float, so these
//! steps are emulated here exactly, on a small big-integer type.

use super::strtod::{digits, exponent, mantissa};
use std::cmp::Ordering;

/// Smallest binary exponent of the last significand bit (subnormals).
const MIN_EXP: i64 = -16445;
/// Largest binary exponent of the last significand bit.
const MAX_EXP: i64 = 16320;
/// Redis's `MAX_LONG_DOUBLE_CHARS`: longer inputs are refused.
const MAX_CHARS: usize = 5 * 1024;

/// An unsigned big integer, little-endian u32 limbs, no trailing zeros.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Big(Vec<u32>);

impl Big {
    fn from_u64(v: u64) -> Big {
        let mut b = Big(vec![v as u32, (v >> 32) as u32]);
        b.trim();
        b
    }

    fn trim(&mut self) {
        while self.0.last() == Some(&0) {
            self.0.pop();
        }
    }

    fn is_zero(&self) -> bool {
        self.0.is_empty()
    }

    fn bits(&self) -> u64 {
        match self.0.last() {
            None => 0,
            Some(&top) => (self.0.len() as u64 - 1) * 32 + (32 - top.leading_zeros() as u64),
        }
    }

    fn bit(&self, i: u64) -> bool {
        let limb = (i / 32) as usize;
        limb < self.0.len() && self.0[limb] >> (i % 32) & 1 == 1
    }

    /// True if any bit below `i` is set.
    fn any_below(&self, i: u64) -> bool {
        let limb = (i / 32) as usize;
        let full = limb.min(self.0.len());
        if self.0[..full].iter().any(|&l| l != 0) {
            return true;
        }
        limb < self.0.len() && !i.is_multiple_of(32) && self.0[limb] & ((1u32 << (i % 32)) - 1) != 0
    }

    fn mul_add_small(&mut self, m: u32, add: u32) {
        let mut carry = add as u64;
        for l in self.0.iter_mut() {
            let v = *l as u64 * m as u64 + carry;
            *l = v as u32;
            carry = v >> 32;
        }
        if carry != 0 {
            self.0.push(carry as u32);
        }
        self.trim();
    }

    fn mul_pow10(&mut self, mut e: u64) {
        while e >= 9 {
            self.mul_add_small(1_000_000_000, 0);
            e -= 9;
        }
        if e > 0 {
            self.mul_add_small(10u32.pow(e as u32), 0);
        }
    }

    /// Divides in place by `d`, returning the remainder.
    fn divmod_small(&mut self, d: u32) -> u32 {
        let mut rem = 0u64;
        for l in self.0.iter_mut().rev() {
            let v = (rem << 32) | *l as u64;
            *l = (v / d as u64) as u32;
            rem = v % d as u64;
        }
        self.trim();
        rem as u32
    }

    fn shl(&self, n: u64) -> Big {
        if self.is_zero() {
            return self.clone();
        }
        let limbs = (n / 32) as usize;
        let bits = (n % 32) as u32;
        let mut v = vec![0u32; limbs];
        v.reserve(self.0.len() + 1);
        let mut carry = 0u32;
        for &l in &self.0 {
            if bits == 0 {
                v.push(l);
            } else {
                v.push((l << bits) | carry);
                carry = l >> (32 - bits);
            }
        }
        if carry != 0 {
            v.push(carry);
        }
        let mut b = Big(v);
        b.trim();
        b
    }

    /// The bits from `lo` up, as a u64 (the caller knows they fit).
    fn bits_from(&self, lo: u64) -> u64 {
        let mut v = 0u64;
        for i in (lo..self.bits()).rev() {
            v = (v << 1) | self.bit(i) as u64;
        }
        v
    }

    fn cmp(&self, o: &Big) -> Ordering {
        self.0
            .len()
            .cmp(&o.0.len())
            .then_with(|| self.0.iter().rev().cmp(o.0.iter().rev()))
    }

    fn add(&self, o: &Big) -> Big {
        let (a, b) = if self.0.len() >= o.0.len() {
            (self, o)
        } else {
            (o, self)
        };
        let mut v = Vec::with_capacity(a.0.len() + 1);
        let mut carry = 0u64;
        for (i, &l) in a.0.iter().enumerate() {
            let s = l as u64 + *b.0.get(i).unwrap_or(&0) as u64 + carry;
            v.push(s as u32);
            carry = s >> 32;
        }
        if carry != 0 {
            v.push(carry as u32);
        }
        Big(v)
    }

    /// `self - o`, with `self >= o`.
    fn sub(&self, o: &Big) -> Big {
        let mut v = Vec::with_capacity(self.0.len());
        let mut borrow = 0i64;
        for (i, &l) in self.0.iter().enumerate() {
            let mut d = l as i64 - *o.0.get(i).unwrap_or(&0) as i64 - borrow;
            borrow = 0;
            if d < 0 {
                d += 1 << 32;
                borrow = 1;
            }
            v.push(d as u32);
        }
        let mut b = Big(v);
        b.trim();
        b
    }

    fn to_decimal(&self) -> String {
        let mut n = self.clone();
        let mut chunks = Vec::new();
        while !n.is_zero() {
            chunks.push(n.divmod_small(1_000_000_000));
        }
        let mut s = chunks.pop().map(|c| c.to_string()).unwrap_or_default();
        for c in chunks.iter().rev() {
            s.push_str(&format!("{c:09}"));
        }
        if s.is_empty() {
            s.push('0');
        }
        s
    }
}

/// An x87 extended double: `±m · 2^exp`, or infinity.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LDouble {
    neg: bool,
    m: u64,
    exp: i64,
    inf: bool,
}

impl LDouble {
    fn zero(neg: bool) -> LDouble {
        LDouble {
            neg,
            m: 0,
            exp: 0,
            inf: false,
        }
    }

    fn infinity(neg: bool) -> LDouble {
        LDouble {
            neg,
            m: 0,
            exp: 0,
            inf: true,
        }
    }

    pub fn is_infinite(&self) -> bool {
        self.inf
    }

    pub fn from_i64(v: i64) -> LDouble {
        // Every i64 fits the 64-bit significand exactly.
        LDouble {
            neg: v < 0,
            m: v.unsigned_abs(),
            exp: 0,
            inf: false,
        }
    }

    /// Rounds `n · 2^e` (plus something below the last bit of `n` if
    /// `sticky`) to the nearest extended double, ties to even. `None` means
    /// the result underflowed to zero, which `strtold` reports as ERANGE.
    fn round(neg: bool, n: &Big, e: i64, sticky: bool) -> Option<LDouble> {
        if n.is_zero() {
            return if sticky {
                None
            } else {
                Some(LDouble::zero(neg))
            };
        }
        let len = n.bits() as i64;
        let shift = (len - 64).max(MIN_EXP - e);
        let (mut m, mut exp) = if shift <= 0 {
            (n.bits_from(0) << (-shift) as u64, e + shift)
        } else {
            let s = shift as u64;
            let mut m = if s >= n.bits() { 0 } else { n.bits_from(s) };
            let half = n.bit(s - 1);
            let rest = sticky || n.any_below(s - 1);
            if half && (rest || m & 1 == 1) {
                m = m.wrapping_add(1);
            }
            (m, e + shift)
        };
        if m == 0 && shift > 0 && n.bits() as i64 <= shift {
            // Everything was shifted out and the rounding went down.
            return None;
        }
        if m == 0 {
            // Rounding carried out of the 64 bits.
            m = 1 << 63;
            exp += 1;
        }
        if exp > MAX_EXP {
            return Some(LDouble::infinity(neg));
        }
        Some(LDouble {
            neg,
            m,
            exp,
            inf: false,
        })
    }

    /// `strtold` as Redis's `string2ld` uses it: the whole input must be a
    /// number, no leading blank, no NaN, no overflow or underflow to zero.
    pub fn parse(s: &[u8]) -> Option<LDouble> {
        if s.is_empty() || s.len() >= MAX_CHARS || s[0].is_ascii_whitespace() {
            return None;
        }
        let (neg, body) = match s[0] {
            b'-' => (true, &s[1..]),
            b'+' => (false, &s[1..]),
            _ => (false, s),
        };
        if body.eq_ignore_ascii_case(b"inf") || body.eq_ignore_ascii_case(b"infinity") {
            return Some(LDouble::infinity(neg));
        }
        let hex = body.len() >= 2 && body[0] == b'0' && body[1] | 0x20 == b'x';
        let (t, radix, mark) = if hex {
            (&body[2..], 16, b'p')
        } else {
            (body, 10, b'e')
        };
        let (m, frac) = mantissa(t, radix)?;
        let e = match &t[m..] {
            [] => 0,
            [c, exp @ ..] if c | 0x20 == mark => match exponent(exp)? {
                (e, n) if n == exp.len() => e,
                _ => return None,
            },
            _ => return None,
        };
        let digits: Vec<u32> = digits(&t[..m]).collect();
        let v = if hex {
            Self::parse_hex(&digits, frac, e, neg)
        } else {
            Self::parse_dec(&digits, frac, e, neg)
        }?;
        (!v.inf).then_some(v)
    }

    /// `digits` (with `frac` of them after the point) `· 10^e`.
    fn parse_dec(digits: &[u32], frac: i64, e: i64, neg: bool) -> Option<LDouble> {
        let first = digits.iter().position(|&d| d != 0);
        let Some(first) = first else {
            return Some(LDouble::zero(neg));
        };
        let mut n = Big(vec![]);
        for &d in &digits[first..] {
            n.mul_add_small(10, d);
        }
        let e10 = e - frac;
        // Magnitude bounds: n · 10^e10 lies in [10^(k-1), 10^k).
        let k = (digits.len() - first) as i64 + e10;
        if k > 4934 {
            return Some(LDouble::infinity(neg));
        }
        if k < -4952 {
            return None;
        }
        if e10 >= 0 {
            n.mul_pow10(e10 as u64);
            return Self::round(neg, &n, 0, false);
        }
        let mut p = Big::from_u64(1);
        p.mul_pow10((-e10) as u64);
        // Scale so the quotient carries at least 66 significant bits.
        let k2 = (p.bits() as i64 - n.bits() as i64 + 66).max(0) as u64;
        let a = n.shl(k2);
        let (q, r) = div(&a, &p);
        Self::round(neg, &q, -(k2 as i64), !r.is_zero())
    }

    /// Hex `digits` (with `frac` of them after the point) `· 2^e`.
    fn parse_hex(digits: &[u32], frac: i64, e: i64, neg: bool) -> Option<LDouble> {
        let mut n = Big(vec![]);
        for &d in digits {
            n.mul_add_small(16, d);
        }
        let e2 = e - 4 * frac;
        if n.is_zero() {
            return Some(LDouble::zero(neg));
        }
        if e2 + n.bits() as i64 > MAX_EXP + 65 {
            return Some(LDouble::infinity(neg));
        }
        if e2 + (n.bits() as i64) < MIN_EXP - 2 {
            return None;
        }
        Self::round(neg, &n, e2, false)
    }

    /// The sum, rounded as the x87 FPU does; NaN (∞ − ∞) is `None`.
    // Not `std::ops::Add`: the NaN case needs the `Option`.
    #[allow(clippy::should_implement_trait)]
    pub fn add(self, o: LDouble) -> Option<LDouble> {
        match (self.inf, o.inf) {
            (true, true) if self.neg != o.neg => return None,
            (true, _) => return Some(self),
            (_, true) => return Some(o),
            _ => {}
        }
        if self.m == 0 && o.m == 0 {
            return Some(LDouble::zero(self.neg && o.neg));
        }
        if o.m == 0 {
            return Some(self);
        }
        if self.m == 0 {
            return Some(o);
        }
        let e = self.exp.min(o.exp);
        let a = Big::from_u64(self.m).shl((self.exp - e) as u64);
        let b = Big::from_u64(o.m).shl((o.exp - e) as u64);
        let (neg, n) = if self.neg == o.neg {
            (self.neg, a.add(&b))
        } else {
            match a.cmp(&b) {
                Ordering::Equal => return Some(LDouble::zero(false)),
                Ordering::Greater => (self.neg, a.sub(&b)),
                Ordering::Less => (o.neg, b.sub(&a)),
            }
        };
        // Exact sums never underflow to zero: they are multiples of 2^MIN_EXP.
        Some(Self::round(neg, &n, e, false).unwrap_or(LDouble::zero(neg)))
    }

    /// `(long long)ceill(self * k)` as x86-64 computes it: the product
    /// rounded to a long double, rounded up to an integer, which converts
    /// to `i64::MIN` (the CPU's "integer indefinite") when it does not fit.
    pub fn mul_ceil_i64(self, k: u32) -> i64 {
        let mut n = Big::from_u64(self.m);
        n.mul_add_small(k, 0);
        // A nonzero product is at least the nonzero operand: no underflow.
        let p = Self::round(self.neg, &n, self.exp, false).unwrap_or(LDouble::zero(self.neg));
        if self.inf || p.inf || p.exp >= 64 {
            return i64::MIN;
        }
        let m = p.m as u128;
        let int = if p.exp >= 0 {
            m << p.exp
        } else if p.exp > -64 {
            let s = (-p.exp) as u32;
            // Rounding up moves positive values only.
            (m >> s) + u128::from(!p.neg && m & ((1 << s) - 1) != 0)
        } else {
            u128::from(!p.neg && m != 0)
        };
        match i64::try_from(int) {
            Ok(v) if p.neg => -v,
            Ok(v) => v,
            Err(_) => i64::MIN,
        }
    }

    /// `%.17Lf` with trailing zeros (and a bare point) removed, and `-0`
    /// shown as `0`, as Redis's `ld2string` in human mode.
    pub fn to_human(self) -> String {
        if self.inf {
            return if self.neg { "-inf" } else { "inf" }.into();
        }
        let mut n = Big::from_u64(self.m);
        n.mul_pow10(17);
        let scaled = if self.exp >= 0 {
            n.shl(self.exp as u64)
        } else {
            let s = (-self.exp) as u64;
            let mut q = if s >= n.bits() {
                Big(vec![])
            } else {
                let mut q = Big(vec![]);
                // n >> s, rounded half to even.
                for i in (s..n.bits()).rev() {
                    q.mul_add_small(2, n.bit(i) as u32);
                }
                q
            };
            let half = n.bit(s - 1);
            if half && (n.any_below(s - 1) || q.0.first().is_some_and(|l| l & 1 == 1)) {
                q = q.add(&Big::from_u64(1));
            }
            q
        };
        let mut digits = scaled.to_decimal();
        while digits.len() < 18 {
            digits.insert(0, '0');
        }
        let point = digits.len() - 17;
        let mut s = String::with_capacity(digits.len() + 2);
        if self.neg {
            s.push('-');
        }
        s.push_str(&digits[..point]);
        let frac = digits[point..].trim_end_matches('0');
        if !frac.is_empty() {
            s.push('.');
            s.push_str(frac);
        }
        if s == "-0" {
            s = "0".into();
        }
        s
    }
}

/// Long division `a / p` for a quotient of a few dozen bits.
fn div(a: &Big, p: &Big) -> (Big, Big) {
    let mut r = a.clone();
    let mut q = Big(vec![]);
    if a.bits() < p.bits() {
        return (q, r);
    }
    let top = a.bits() - p.bits();
    for i in (0..=top).rev() {
        let t = p.shl(i);
        let bit = r.cmp(&t) != Ordering::Less;
        if bit {
            r = r.sub(&t);
        }
        q.mul_add_small(2, bit as u32);
    }
    (q, r)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sum(a: &str, b: &str) -> String {
        let x = LDouble::parse(a.as_bytes()).unwrap();
        let y = LDouble::parse(b.as_bytes()).unwrap();
        x.add(y).unwrap().to_human()
    }

    #[test]
    fn sums_match_redis() {
        assert_eq!(sum("10.5", "0.1"), "10.6");
        assert_eq!(sum("0.1", "0.2"), "0.3");
        assert_eq!(sum("5.0e3", "0"), "5000");
        assert_eq!(sum("320", "-.5e-1"), "319.95000000000000001");
        assert_eq!(sum("1", "0x1.8p1"), "4");
        assert_eq!(sum("-1e-20", "0"), "0");
        assert_eq!(sum("-0", "-0"), "0");
        assert_eq!(
            sum("10", "1e300"),
            "1000000000000000000008997324079559193870523944273290747938260082321265646596180935755849152083750497190350372508614274835903592556184672983913096260520748646287327135641843653294084255107606016789726652932370030551382947620994540294772781889620606179267611627097410650567187386105690089424915104006144"
        );
        assert_eq!(sum("9223372036854775807", "0"), "9223372036854775807");
    }

    #[test]
    fn parse_limits_match_strtold() {
        for bad in [
            "",
            " 1",
            "1 ",
            "nan",
            "1e",
            "e2",
            ".",
            "0x",
            "1e5000",
            "1e-5000",
            "1.19e4932",
            "1e-4951",
            "0x1p-16446",
            "abc",
        ] {
            assert_eq!(LDouble::parse(bad.as_bytes()), None, "{bad}");
        }
        for good in [
            "3e-4951",
            "0x1p-16445",
            "1.18e4932",
            ".5",
            "5.",
            "+5",
            "INF",
            "-0",
        ] {
            assert!(LDouble::parse(good.as_bytes()).is_some(), "{good}");
        }
        assert!(LDouble::parse(b"infinity").unwrap().is_infinite());
        assert_eq!(LDouble::parse(b"3e-4951").unwrap().to_human(), "0");
    }

    #[test]
    fn scaled_and_rounded_up_as_ceill() {
        let ms = |s: &str| LDouble::parse(s.as_bytes()).unwrap().mul_ceil_i64(1000);
        assert_eq!(ms("1.5"), 1500);
        assert_eq!(ms("0.0001"), 1);
        assert_eq!(ms("1e-400"), 1);
        assert_eq!(ms("-0.0001"), 0);
        assert_eq!(ms("-1.0011"), -1001);
        assert_eq!(ms("0x1p3"), 8000);
        assert_eq!(ms("9223372036854775"), 9223372036854775000);
        assert_eq!(ms("9223372036854776"), i64::MIN);
        assert_eq!(ms("-9223372036854775"), -9223372036854775000);
        assert_eq!(ms("-9223372036854776"), i64::MIN);
        assert_eq!(ms("1e300"), i64::MIN);
        assert_eq!(ms("-inf"), i64::MIN);
    }

    #[test]
    fn overflowing_sum_is_infinite() {
        let max = LDouble::parse(b"1.18e4932").unwrap();
        assert!(max.add(max).unwrap().is_infinite());
    }
}
