//! C's `strtod` (as glibc implements it) and the acceptance tests Redis's
//! callers put around it; also the number scanners the long double parser
//! shares.

use super::parse_i64;

/// C's `isspace` in the C locale (Rust's `is_ascii_whitespace` lacks `\v`).
pub(super) fn is_c_space(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
}

/// What `strtod` reads at the start of a string.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Strtod {
    /// The value read; 0 when there is no number.
    pub v: f64,
    /// Bytes read (blanks included); 0 when there is no number, as C's
    /// `endptr == nptr`.
    pub len: usize,
    /// C's `errno == ERANGE`: a finite literal overflowed to ±inf, or a
    /// nonzero one came out below the smallest normal double (zero or
    /// subnormal) and inexact. glibc's test; a decimal that small is taken
    /// as inexact (an exact one needs hundreds of digits).
    pub erange: bool,
}

/// C's `strtod`: leading blanks, a sign, then `inf`/`infinity`, `nan`
/// (read as 3 bytes: every caller refuses NaN, so a `(…)` suffix does not
/// matter), hex (`0x` mantissa with an optional `p` binary exponent) or
/// decimal, each rounded to nearest as glibc does.
pub fn strtod(s: &[u8]) -> Strtod {
    let mut i = s.iter().take_while(|c| is_c_space(**c)).count();
    let neg = match s.get(i) {
        Some(b'-') => {
            i += 1;
            true
        }
        Some(b'+') => {
            i += 1;
            false
        }
        _ => false,
    };
    let t = &s[i..];
    let word = |w: &[u8]| t.get(..w.len()).is_some_and(|p| p.eq_ignore_ascii_case(w));
    let (v, n, erange) = if word(b"infinity") {
        (f64::INFINITY, 8, false)
    } else if word(b"inf") {
        (f64::INFINITY, 3, false)
    } else if word(b"nan") {
        (f64::NAN, 3, false)
    } else if let Some(r) = hex(t).or_else(|| decimal(t)) {
        r
    } else {
        return Strtod {
            v: 0.0,
            len: 0,
            erange: false,
        };
    };
    Strtod {
        v: if neg { -v } else { v },
        len: i + n,
        erange,
    }
}

/// Redis's `string2d` / `getDoubleFromObject` (ZADD scores, ZINCRBY
/// increments, weights): the whole string, no leading blank, decimal or
/// hex, `inf`/`infinity` in any case; NaN, overflow to ±inf and underflow
/// to 0 are refused (a subnormal result is accepted: glibc returns it
/// nonzero).
pub fn parse_score(s: &[u8]) -> Option<f64> {
    if s.is_empty() || is_c_space(s[0]) || s.len() > 5000 {
        return None;
    }
    let r = strtod(s);
    let range_err = r.erange && (r.v.is_infinite() || r.v == 0.0);
    (r.len == s.len() && !r.v.is_nan() && !range_err).then_some(r.v)
}

/// One end of a ZRANGEBYSCORE-style range, as Redis's `zslParseRange`
/// reads it: an optional `(` (exclusive, the flag returned), then `strtod`
/// on the rest: leading blanks allowed, the whole rest, NaN refused, no
/// range check (`1e999` is +inf); an empty rest reads as 0 (Redis accepts
/// `""` and `"("`). `None` is "ERR min or max is not a float".
pub fn parse_score_bound(b: &[u8]) -> Option<(f64, bool)> {
    let (ex, s) = match b.first() {
        Some(b'(') => (true, &b[1..]),
        _ => (false, b),
    };
    let r = strtod(s);
    (r.len == s.len() && !r.v.is_nan()).then_some((r.v, ex))
}

/// A SORT element or BY value as Redis's SORT reads it: `strtod` on the C
/// string (up to the first NUL), leading blanks allowed, up to its end, no
/// NaN and no `ERANGE` at all (subnormal results are refused too); an
/// empty C string reads as 0.
pub fn parse_sort_score(b: &[u8]) -> Option<f64> {
    // The common case, and exactly what strtod gives (both round to nearest).
    if let Some(n) = parse_i64(b) {
        return Some(n as f64);
    }
    let s = b.split(|&c| c == 0).next().unwrap_or(b);
    let r = strtod(s);
    (r.len == s.len() && !r.erange && !r.v.is_nan()).then_some(r.v)
}

/// `digits[.digits]` in `radix` at the start of `s`, with at least one
/// digit: the bytes it spans and how many digits follow the point.
pub(super) fn mantissa(s: &[u8], radix: u32) -> Option<(usize, i64)> {
    let is_digit = |c: &u8| (*c as char).is_digit(radix);
    let int = s.iter().take_while(|c| is_digit(c)).count();
    let frac = match s.get(int) {
        Some(b'.') => s[int + 1..].iter().take_while(|c| is_digit(c)).count(),
        _ => 0,
    };
    let len = if s.get(int) == Some(&b'.') {
        int + 1 + frac
    } else {
        int
    };
    (int + frac > 0).then_some((len, frac as i64))
}

/// The digit values of a mantissa spanned by [`mantissa`].
pub(super) fn digits(m: &[u8]) -> impl Iterator<Item = u32> + '_ {
    m.iter()
        .filter(|&&c| c != b'.')
        .map(|&c| (c as char).to_digit(16).unwrap_or(0))
}

/// An exponent `[+-]digits` at the start of `s` (after its `e` or `p`):
/// its value, clamped far beyond any representable range, and the bytes
/// it spans; `None` without a digit.
pub(super) fn exponent(s: &[u8]) -> Option<(i64, usize)> {
    let sign = usize::from(matches!(s.first(), Some(b'+' | b'-')));
    let d = s[sign..].iter().take_while(|c| c.is_ascii_digit()).count();
    if d == 0 {
        return None;
    }
    let v = s[sign..sign + d]
        .iter()
        .fold(0i64, |v, &c| (v * 10 + (c - b'0') as i64).min(1 << 40));
    Some((if s[0] == b'-' { -v } else { v }, sign + d))
}

/// An unsigned decimal at the start of `t`: value, bytes read, ERANGE.
fn decimal(t: &[u8]) -> Option<(f64, usize, bool)> {
    let (m, _) = mantissa(t, 10)?;
    let mut n = m;
    if matches!(t.get(n), Some(b'e' | b'E')) {
        if let Some((_, l)) = exponent(&t[n + 1..]) {
            n += 1 + l;
        }
    }
    // Rust's parser rounds to nearest like glibc, on the same grammar.
    let v: f64 = std::str::from_utf8(&t[..n]).ok()?.parse().ok()?;
    let nonzero = t[..m].iter().any(|c| (b'1'..=b'9').contains(c));
    Some((v, n, v.is_infinite() || (nonzero && v < f64::MIN_POSITIVE)))
}

/// An unsigned hex float at the start of `t` (`0x`, at least one hex
/// digit, an optional point and `p` exponent): value, bytes read, ERANGE.
/// `None` when `t` does not start so (strtod then reads just the `0`).
fn hex(t: &[u8]) -> Option<(f64, usize, bool)> {
    if t.len() < 3 || t[0] != b'0' || t[1] | 0x20 != b'x' {
        return None;
    }
    let b = &t[2..];
    let (m, frac) = mantissa(b, 16)?;
    let mut n = m;
    let mut e2 = -4 * frac;
    if matches!(b.get(n), Some(b'p' | b'P')) {
        if let Some((e, l)) = exponent(&b[n + 1..]) {
            e2 += e;
            n += 1 + l;
        }
    }
    // 16 hex digits fill a u64; later ones only scale and break ties.
    let mut v: u64 = 0;
    let mut sticky = false;
    for d in digits(&b[..m]) {
        if v >> 60 == 0 {
            v = (v << 4) | d as u64;
        } else {
            sticky |= d != 0;
            e2 += 4;
        }
    }
    let (v, erange) = round_f64(v, e2, sticky);
    Some((v, 2 + n, erange))
}

/// `m · 2^e` (plus a little more when `sticky`) rounded to the nearest
/// double, ties to even, subnormals included; and whether that is
/// ERANGE (overflow, or a nonzero value below the smallest normal).
fn round_f64(m: u64, e: i64, sticky: bool) -> (f64, bool) {
    if m == 0 {
        return (0.0, false);
    }
    let lz = m.leading_zeros();
    // Binary exponent of the leading bit.
    let top = e + 63 - lz as i64;
    if top > 1023 {
        return (f64::INFINITY, true);
    }
    let big = (m as u128) << (64 + lz);
    // 53 bits kept for a normal result, fewer below 2^-1022.
    let shift = (75 + (-1022 - top).max(0)).min(200) as u32;
    let below = |n: u32| {
        if n >= 128 {
            big != 0
        } else {
            big & ((1u128 << n) - 1) != 0
        }
    };
    let q = if shift >= 128 {
        0
    } else {
        (big >> shift) as u64
    };
    let half = shift <= 128 && (big >> (shift - 1)) & 1 == 1;
    let inexact = half || sticky || below(shift - 1);
    let q = q + u64::from(half && (sticky || below(shift - 1) || q & 1 == 1));
    // A normal q has its implicit bit (2^52) set, which adds one to the
    // biased exponent; a subnormal q that rounded up to 2^52 becomes the
    // smallest normal the same way.
    let v = f64::from_bits((((top + 1022).max(0) as u64) << 52) + q);
    (v, v.is_infinite() || (inexact && v < f64::MIN_POSITIVE))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Acceptance as Redis 7.0.15's ZADD showed it.
    #[test]
    fn scores_read_like_redis() {
        let ok = |s: &str| parse_score(s.as_bytes());
        assert_eq!(ok("0x10"), Some(16.0));
        assert_eq!(ok("-0x10"), Some(-16.0));
        assert_eq!(ok("0x1p3"), Some(8.0));
        assert_eq!(ok("+5"), Some(5.0));
        assert_eq!(ok(".5"), Some(0.5));
        assert_eq!(ok("5."), Some(5.0));
        assert_eq!(ok("Infinity"), Some(f64::INFINITY));
        assert_eq!(ok("-INF"), Some(f64::NEG_INFINITY));
        assert_eq!(ok("1e308"), Some(1e308));
        assert!(ok("1e-310").is_some_and(|v| v > 0.0));
        assert_eq!(ok("0e-999"), Some(0.0));
        for bad in [
            "nan", "1e", "", "1_0", "0x", " 1", "1 ", "1e400", "1e-400", "-1e-400", "--1",
        ] {
            assert_eq!(ok(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn range_bounds_read_like_strtod() {
        let ok = |b: &[u8]| parse_score_bound(b);
        assert_eq!(ok(b"0x1"), Some((1.0, false)));
        assert_eq!(ok(b" 1"), Some((1.0, false)));
        assert_eq!(ok(b""), Some((0.0, false)));
        assert_eq!(ok(b"("), Some((0.0, true)));
        assert_eq!(ok(b"+1"), Some((1.0, false)));
        assert_eq!(ok(b".5"), Some((0.5, false)));
        assert_eq!(ok(b"1.5e+2"), Some((150.0, false)));
        assert_eq!(ok(b"(inf"), Some((f64::INFINITY, true)));
        assert_eq!(ok(b"-Infinity"), Some((f64::NEG_INFINITY, false)));
        for bad in [
            &b"1 "[..],
            b" ",
            b"1e",
            b"-nan",
            b"nan",
            b"0x",
            b"1_0",
            b"--1",
            b"+-1",
        ] {
            assert_eq!(ok(bad), None, "{:?}", String::from_utf8_lossy(bad));
        }
    }

    #[test]
    fn sort_scores_parse_as_strtod() {
        let ok: &[(&[u8], f64)] = &[
            (b"", 0.0),
            (b"3", 3.0),
            (b" 7", 7.0),
            (b"\t3", 3.0),
            (b"+5", 5.0),
            (b".5", 0.5),
            (b"5.", 5.0),
            (b"1e+1", 10.0),
            (b"1e2", 100.0),
            (b"-1.5", -1.5),
            (b"inf", f64::INFINITY),
            (b"-INF", f64::NEG_INFINITY),
            (b"infinity", f64::INFINITY),
            (b"0x10", 16.0),
            (b"0X1p4", 16.0),
            (b"0x1.8p1", 3.0),
            (b"0x.8", 0.5),
            (b"5\x00abc", 5.0),
            (b"\x00abc", 0.0),
            (b"-1e-300", -1e-300),
            (b"1e308", 1e308),
            (b"0e500", 0.0),
            (b"2.2250738585072014e-308", 2.2250738585072014e-308),
        ];
        for (s, v) in ok {
            let got = parse_sort_score(s);
            assert_eq!(got, Some(*v), "{:?}", String::from_utf8_lossy(s));
        }
        let bad: &[&[u8]] = &[
            b"7 ",
            b"  ",
            b"a",
            b"nan",
            b"nan(123)",
            b"-nan",
            b"1e400",
            b"1e-400",
            b"1e-310",
            b"1e-308",
            b"0x",
            b"1e",
            b"1e+",
            b".",
            b"infx",
            b"--1",
            b"1_0",
            b"0x1p",
        ];
        for s in bad {
            let got = parse_sort_score(s);
            assert_eq!(got, None, "{:?}", String::from_utf8_lossy(s));
        }
    }

    /// Hex floats round to nearest (ties to even) at every magnitude,
    /// subnormals and overflow included, as glibc's strtod.
    #[test]
    fn hex_floats_round_like_glibc() {
        let v = |s: &str| strtod(s.as_bytes());
        assert_eq!(v("0x1p-1074").v, 5e-324);
        // Exact, so no ERANGE: redis-server 7.0.15 sorts it.
        assert!(!v("0x1p-1074").erange);
        assert_eq!(parse_sort_score(b"0x1p-1074"), Some(5e-324));
        assert!(v("0x1.1p-1074").erange);
        assert_eq!(v("0x1p-1075").v, 0.0);
        assert_eq!(v("0x1.8p-1075").v, 5e-324);
        assert_eq!(v("0x1p-1022").v, f64::MIN_POSITIVE);
        assert!(!v("0x1p-1022").erange);
        assert_eq!(v("0x1.fffffffffffff8p1023").v, f64::INFINITY);
        assert_eq!(v("0x1.fffffffffffff7ffp1023").v, f64::MAX);
        assert_eq!(v("0x10000000000000801").v, 2f64.powi(64) + 2f64.powi(12));
        assert_eq!(v("0x10000000000000800").v, 2f64.powi(64));
        assert_eq!(v("0x1.00000000000008").v, 1.0);
        assert_eq!(v("0x1.000000000000080001").v, 1.0 + f64::EPSILON);
        assert_eq!(v("0x1.00000000000018").v, 1.0 + 2.0 * f64::EPSILON);
        assert_eq!(v("0x1p").len, 3);
        assert_eq!(v("0xg").len, 1);
        assert_eq!(v(" -0x.8p+1").v, -1.0);
    }
}
