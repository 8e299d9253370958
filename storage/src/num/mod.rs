//! Redis's number rules, in one place: how each kind of argument or stored
//! text is read as a number, and how numbers are printed.
//!
//! What mirrors which Redis 7.0 function (C names):
//!
//! - [`parse_i64`]: `string2ll` (also behind `string2l`, `getLongLongFromObject`).
//! - [`strtod()`]: C's `strtod` (glibc: blanks, sign, decimal, hex with a
//!   binary exponent, `inf`/`infinity`/`nan`, `ERANGE`), which Redis calls
//!   with different acceptance tests around it:
//!   - [`parse_score`]: `string2d` / `getDoubleFromObject` (ZADD scores,
//!     ZINCRBY increments, ZUNIONSTORE weights, …);
//!   - [`parse_score_bound`]: `zslParseRange` (`(` exclusive, `-inf`/`+inf`);
//!   - [`parse_sort_score`]: `sortCommandGeneric`'s own `strtod` call.
//! - [`parse_f64`]: decimal only, for configuration values.
//! - [`LDouble`]: the x87 `long double` of `string2ld` / `strtold`
//!   (INCRBYFLOAT, HINCRBYFLOAT and blocking timeouts via
//!   `getLongDoubleFromObject`), its addition, `ld2string` in human mode
//!   (`%.17Lf`, trailing zeros dropped) and `getTimeoutFromObjectOrReply`'s
//!   `(long long)ceill(x * 1000)`.
//! - [`fmt_g17`]: `printf("%.17g")`; [`d2string`]: `d2string` (how Redis
//!   writes doubles it stores as text, e.g. listpack scores in an RDB).
//!
//! RESP double replies are formatted in the protocol crate, which storage
//! does not depend on.

mod ldouble;
mod strtod;

pub use ldouble::LDouble;
pub use strtod::{parse_score, parse_score_bound, parse_sort_score, strtod, Strtod};

/// C's `atoi`, as Redis calls it on arguments it does not validate (DEBUG,
/// COMMAND GETKEYS numkeys): C blanks, an optional sign, then the digits
/// up to the first other byte; 0 when there are none. Saturates where C
/// would overflow.
pub fn atoi(s: &[u8]) -> i64 {
    let i = s.iter().take_while(|&&c| strtod::is_c_space(c)).count();
    let (neg, digits) = match s.get(i) {
        Some(b'-') => (true, &s[i + 1..]),
        Some(b'+') => (false, &s[i + 1..]),
        _ => (false, &s[i..]),
    };
    let n = digits
        .iter()
        .take_while(|b| b.is_ascii_digit())
        .fold(0i64, |n, d| {
            n.saturating_mul(10).saturating_add((d - b'0') as i64)
        });
    if neg {
        -n
    } else {
        n
    }
}

/// Parses a strict decimal i64 as Redis's `string2ll`: optional `-`, no `+`,
/// no blanks, no leading zeros, no overflow.
pub fn parse_i64(s: &[u8]) -> Option<i64> {
    if s.is_empty() || s.len() > 20 {
        return None;
    }
    if s == b"0" {
        return Some(0);
    }
    let (neg, d) = if s[0] == b'-' {
        (true, &s[1..])
    } else {
        (false, s)
    };
    if d.is_empty() || !(b'1'..=b'9').contains(&d[0]) {
        return None;
    }
    let mut v: u64 = 0;
    for &c in d {
        if !c.is_ascii_digit() {
            return None;
        }
        v = v.checked_mul(10)?.checked_add((c - b'0') as u64)?;
    }
    if neg {
        if v > i64::MAX as u64 + 1 {
            None
        } else {
            Some((v as i64).wrapping_neg())
        }
    } else {
        i64::try_from(v).ok()
    }
}

/// A decimal double in Rust's grammar (no hex, no leading blank; `inf`
/// and `infinity` in any case, NaN refused), for configuration values.
pub fn parse_f64(s: &[u8]) -> Option<f64> {
    if s.is_empty() || s[0].is_ascii_whitespace() || s.len() > 5000 {
        return None;
    }
    let t = std::str::from_utf8(s).ok()?;
    let v: f64 = match t.to_ascii_lowercase().as_str() {
        "inf" | "+inf" | "infinity" | "+infinity" => f64::INFINITY,
        "-inf" | "-infinity" => f64::NEG_INFINITY,
        l if l.contains("inf") || l.contains("nan") => return None,
        _ => t.parse().ok()?,
    };
    (!v.is_nan()).then_some(v)
}

/// C's `%.17g`, as Redis formats scores it stores as text.
pub fn fmt_g17(v: f64) -> String {
    if v.is_nan() {
        return "nan".into();
    }
    if v.is_infinite() {
        return if v > 0.0 { "inf".into() } else { "-inf".into() };
    }
    if v == 0.0 {
        return if v.is_sign_negative() {
            "-0".into()
        } else {
            "0".into()
        };
    }
    let sci = format!("{:.16e}", v);
    let (mant, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let x: i32 = exp.parse().unwrap_or(0);
    let trim = |s: &str| -> String {
        if s.contains('.') {
            s.trim_end_matches('0').trim_end_matches('.').to_string()
        } else {
            s.to_string()
        }
    };
    if !(-4..17).contains(&x) {
        format!(
            "{}e{}{:02}",
            trim(mant),
            if x < 0 { '-' } else { '+' },
            x.abs()
        )
    } else {
        trim(&format!("{:.*}", (16 - x) as usize, v))
    }
}

/// Redis's `d2string`: integral values within ±2^52 print as integers,
/// everything else as `%.17g`.
pub fn d2string(v: f64) -> String {
    if v.is_finite()
        && v != 0.0
        && v > -4503599627370495.0
        && v < 4503599627370496.0
        && v == (v as i64) as f64
    {
        return (v as i64).to_string();
    }
    fmt_g17(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn atoi_reads_as_c_does() {
        assert_eq!(atoi(b" \x0b\t-42abc"), -42);
        assert_eq!(atoi(b"+7"), 7);
        assert_eq!(atoi(b"x1"), 0);
        assert_eq!(atoi(b""), 0);
        assert_eq!(atoi(b"99999999999999999999"), i64::MAX);
    }

    #[test]
    fn strict_integers() {
        assert_eq!(parse_i64(b"9223372036854775807"), Some(i64::MAX));
        assert_eq!(parse_i64(b"-9223372036854775808"), Some(i64::MIN));
        for bad in [
            &b"9223372036854775808"[..],
            b"+1",
            b" 1",
            b"01",
            b"-0",
            b"1a",
            b"",
            b"-",
        ] {
            assert_eq!(parse_i64(bad), None, "{:?}", bad);
        }
    }

    #[test]
    fn doubles() {
        assert_eq!(parse_f64(b"1.5"), Some(1.5));
        assert_eq!(parse_f64(b"-inf"), Some(f64::NEG_INFINITY));
        assert_eq!(parse_f64(b"nan"), None);
        assert_eq!(parse_f64(b" 1"), None);
        assert_eq!(parse_f64(b"1x"), None);
    }

    #[test]
    fn g17_as_c() {
        assert_eq!(fmt_g17(0.1), "0.10000000000000001");
        assert_eq!(fmt_g17(1.5), "1.5");
        assert_eq!(fmt_g17(1e300), "1.0000000000000001e+300");
        assert_eq!(fmt_g17(1e-5), "1.0000000000000001e-05");
        assert_eq!(fmt_g17(123456.0), "123456");
        assert_eq!(d2string(3.0), "3");
        assert_eq!(d2string(-0.0), "-0");
        assert_eq!(d2string(f64::INFINITY), "inf");
    }
}
