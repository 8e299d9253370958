//! Glob-style matching as Redis's KEYS, SCAN MATCH, CONFIG GET and PSUBSCRIBE
//! use it (its `stringmatchlen`): `*`, `?`, `[abc]`, `[^a-z]`, and `\x` to
//! match `x` literally. Redis's corner cases are kept:
//!
//! - an unterminated class (`[abc`) ends at the end of the pattern;
//! - `[]` is an empty class and `]` right after `[` closes it;
//! - a trailing lone `\` matches a backslash;
//! - the empty string matches only the empty pattern (not even `*`);
//! - inside a class an escaped byte is compared exactly even with `nocase`;
//! - ranges compare bytes as C's signed `char`, so a range with a byte
//!   ≥ 0x80 (`[a-\xff]`) is reordered as negative numbers are.
//!
//! `*` is matched by remembering the last star and retrying from one byte
//! further on failure (classic backtracking with a single saved position),
//! which is O(pattern × string) in the worst case instead of exponential.
//! This is equivalent to Redis's recursion because every element other than
//! `*` consumes exactly one byte.

pub fn matches(pat: &[u8], s: &[u8], nocase: bool) -> bool {
    if s.is_empty() {
        // Redis's loop runs only while both remain, so the empty string
        // matches only the empty pattern (KEYS/SCAN special-case a lone `*`).
        return pat.is_empty();
    }
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
                    if let Some(np) = match_one(pat, p, s[i], nocase) {
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

fn eq(a: u8, b: u8, nocase: bool) -> bool {
    if nocase {
        a.eq_ignore_ascii_case(&b)
    } else {
        a == b
    }
}

/// Matches one byte `c` against the pattern element at `p`; returns the
/// position after that element on success.
fn match_one(pat: &[u8], mut p: usize, c: u8, nocase: bool) -> Option<usize> {
    match pat[p] {
        b'?' => Some(p + 1),
        b'\\' if p + 1 < pat.len() => eq(pat[p + 1], c, nocase).then_some(p + 2),
        b'[' => {
            p += 1;
            let not = p < pat.len() && pat[p] == b'^';
            if not {
                p += 1;
            }
            let mut hit = false;
            loop {
                if p < pat.len() && pat[p] == b'\\' && p + 1 < pat.len() {
                    p += 1;
                    hit |= pat[p] == c;
                } else if p < pat.len() && pat[p] == b']' {
                    break;
                } else if p >= pat.len() {
                    // Unterminated class: it ends with the pattern.
                    p -= 1;
                    break;
                } else if p + 2 < pat.len() && pat[p + 1] == b'-' {
                    // C's `char` is signed here: compare as i8.
                    let (mut lo, mut hi) = (pat[p] as i8, pat[p + 2] as i8);
                    if lo > hi {
                        std::mem::swap(&mut lo, &mut hi);
                    }
                    let mut ch = c as i8;
                    if nocase {
                        lo = lower(lo);
                        hi = lower(hi);
                        ch = lower(ch);
                    }
                    hit |= ch >= lo && ch <= hi;
                    p += 2;
                } else {
                    hit |= eq(pat[p], c, nocase);
                }
                p += 1;
            }
            (hit != not).then_some(p + 1)
        }
        other => eq(other, c, nocase).then_some(p + 1),
    }
}

fn lower(c: i8) -> i8 {
    if c >= 0 {
        (c as u8).to_ascii_lowercase() as i8
    } else {
        c
    }
}

#[cfg(test)]
mod tests {
    use super::matches;

    fn m(p: &str, s: &str) -> bool {
        matches(p.as_bytes(), s.as_bytes(), false)
    }

    #[test]
    fn globs() {
        assert!(!m("*", ""));
        assert!(!m("**", ""));
        assert!(m("", ""));
        assert!(m("*", "a"));
        assert!(m("h?llo", "hello"));
        assert!(!m("h?llo", "hllo"));
        assert!(m("h*llo", "heeeello"));
        assert!(m("h*llo", "hllo"));
        assert!(m("h[ae]llo", "hallo"));
        assert!(!m("h[^e]llo", "hello"));
        assert!(m("h[^e]llo", "hallo"));
        assert!(m("h[a-b]llo", "hbllo"));
        assert!(m("h[b-a]llo", "hbllo"));
        assert!(m("a\\*b", "a*b"));
        assert!(!m("a\\*b", "axb"));
        assert!(m("*:*:x", "a:b:c:x"));
        assert!(!m("a*", "ba"));
        assert!(m("a**b", "ab"));
        assert!(m("a*", "a"));
        assert!(!m("*a*a*a*a*a*a*a*b", &"a".repeat(5000)));
    }

    #[test]
    fn classes_as_redis() {
        // Escapes inside a class.
        assert!(m("[\\]]", "]"));
        assert!(m("[\\-]", "-"));
        assert!(m("[a\\-z]", "-"));
        assert!(!m("[a\\-z]", "b"));
        // `]` right after `[` closes an empty class.
        assert!(!m("[]a", "a"));
        assert!(!m("[]", ""));
        assert!(m("[^]a", "xa"));
        // Unterminated classes end with the pattern.
        assert!(m("[abc", "c"));
        assert!(!m("[abc", "d"));
        assert!(m("x[a-", "x-"));
        assert!(m("x[^", "x^"));
        assert!(m("x[^", "xa"));
        // A `-` at the edges is literal.
        // `[a-]` is the range a..] (unterminated), as in Redis.
        assert!(!m("[a-]", "-"));
        assert!(m("[a-]", "^"));
        assert!(m("[-a]", "-"));
        // Trailing backslash matches a backslash.
        assert!(m("a\\", "a\\"));
        assert!(m("[a\\", "\\"));
    }

    #[test]
    fn nocase() {
        assert!(matches(b"HELLO", b"hello", true));
        assert!(matches(b"H[A-C]LLO", b"hbllo", true));
        assert!(matches(b"h[a-c]llo", b"HBLLO", true));
        assert!(matches(b"\\H", b"h", true));
        // Escaped bytes in a class compare exactly.
        assert!(!matches(b"[\\H]", b"h", true));
        assert!(matches(b"[H]", b"h", true));
        assert!(!matches(b"HELLO", b"hello", false));
    }

    #[test]
    fn signed_char_ranges() {
        // 'a'..0xff as signed chars is -1..97.
        assert!(matches(b"[a-\xff]", b"\xff", false));
        assert!(matches(b"[a-\xff]", b"0", false));
        assert!(!matches(b"[a-\xff]", b"b", false));
        assert!(!matches(b"[a-\xff]", b"\x80", false));
        assert!(matches(b"[\x80-\xff]", b"\x90", false));
    }
}
