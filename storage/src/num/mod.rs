//! Number parsing and formatting with Redis's exact acceptance rules.

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

/// Parses a double as Redis does for scores and increments: the whole
/// string must be a number, no leading blank, `inf`/`-inf` allowed, NaN not.
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

/// Formats an i64 into its decimal bytes.
pub fn fmt_i64(v: i64) -> Vec<u8> {
    itoa::Buffer::new().format(v).as_bytes().to_vec()
}

/// Formats the result of INCRBYFLOAT / HINCRBYFLOAT: plain decimal notation
/// (never an exponent), the shortest digits that read back to the same
/// double, no trailing zeros.
pub fn fmt_incr_float(v: f64) -> String {
    if v.is_infinite() {
        return if v > 0.0 { "inf".into() } else { "-inf".into() };
    }
    let s = format!("{v}");
    if s == "-0" {
        "0".into()
    } else {
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        assert_eq!(fmt_incr_float(10.5 + 0.1), "10.6");
        assert_eq!(fmt_incr_float(5.0e3), "5000");
    }
}
