//! Glob-style matching as Redis's KEYS, SCAN MATCH, CONFIG GET and PSUBSCRIBE
//! use it: `*`, `?`, `[abc]`, `[^a-z]`, and `\x` to match `x` literally.
//!
//! `*` is matched by remembering the last star and retrying from one byte
//! further on failure (classic backtracking with a single saved position),
//! which is O(pattern × string) in the worst case instead of exponential.

pub fn matches(pat: &[u8], s: &[u8], nocase: bool) -> bool {
    let eq = |a: u8, b: u8| {
        if nocase {
            a.eq_ignore_ascii_case(&b)
        } else {
            a == b
        }
    };
    let (mut p, mut i) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    loop {
        if p < pat.len() {
            match pat[p] {
                b'*' => {
                    while p < pat.len() && pat[p] == b'*' {
                        p += 1;
                    }
                    if p == pat.len() {
                        return true;
                    }
                    star = Some((p, i));
                    continue;
                }
                _ if i < s.len() => {
                    if let Some(np) = match_one(pat, p, s[i], &eq) {
                        p = np;
                        i += 1;
                        continue;
                    }
                }
                _ => {}
            }
        } else if i == s.len() {
            return true;
        }
        match star {
            Some((sp, si)) if si < s.len() => {
                star = Some((sp, si + 1));
                p = sp;
                i = si + 1;
            }
            _ => return false,
        }
    }
}

/// Matches one byte `c` against the pattern element at `p`; returns the
/// position after that element on success.
fn match_one(pat: &[u8], mut p: usize, c: u8, eq: &impl Fn(u8, u8) -> bool) -> Option<usize> {
    match pat[p] {
        b'?' => Some(p + 1),
        b'\\' if p + 1 < pat.len() => eq(pat[p + 1], c).then_some(p + 2),
        b'[' => {
            p += 1;
            let not = p < pat.len() && pat[p] == b'^';
            if not {
                p += 1;
            }
            let mut hit = false;
            loop {
                if p >= pat.len() {
                    // Unterminated class: Redis treats the end as closing it.
                    p -= 1;
                    break;
                }
                if pat[p] == b']' {
                    break;
                }
                if pat[p] == b'\\' && p + 1 < pat.len() {
                    p += 1;
                    hit |= eq(pat[p], c);
                } else if p + 2 < pat.len() && pat[p + 1] == b'-' {
                    let (mut lo, mut hi) = (pat[p], pat[p + 2]);
                    if lo > hi {
                        std::mem::swap(&mut lo, &mut hi);
                    }
                    let (c2, lo2, hi2) = if nocase_of(eq) {
                        (
                            c.to_ascii_lowercase(),
                            lo.to_ascii_lowercase(),
                            hi.to_ascii_lowercase(),
                        )
                    } else {
                        (c, lo, hi)
                    };
                    hit |= c2 >= lo2 && c2 <= hi2;
                    p += 2;
                } else {
                    hit |= eq(pat[p], c);
                }
                p += 1;
            }
            (hit != not).then_some(p + 1)
        }
        other => eq(other, c).then_some(p + 1),
    }
}

fn nocase_of(eq: &impl Fn(u8, u8) -> bool) -> bool {
    eq(b'a', b'A')
}

#[cfg(test)]
mod tests {
    use super::matches;

    #[test]
    fn globs() {
        let m = |p: &str, s: &str| matches(p.as_bytes(), s.as_bytes(), false);
        assert!(m("*", ""));
        assert!(m("h?llo", "hello"));
        assert!(m("h*llo", "heeeello"));
        assert!(m("h[ae]llo", "hallo"));
        assert!(!m("h[^e]llo", "hello"));
        assert!(m("h[a-b]llo", "hbllo"));
        assert!(m("a\\*b", "a*b"));
        assert!(!m("a\\*b", "axb"));
        assert!(m("*:*:x", "a:b:c:x"));
        assert!(!m("a*", "ba"));
        assert!(matches(b"HELLO", b"hello", true));
        assert!(m("*a*a*a*a*a*a*a*b", &"a".repeat(5000)) == false);
    }
}
