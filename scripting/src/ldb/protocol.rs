//! The wire between the debugger and its client: reading the client's
//! commands (Redis's forgiving multibulk reader, with its C-string quirks)
//! and writing the logs back as an array of status replies.
//!
//! Apart because it is byte handling only: what the commands do is in
//! `commands`, and nothing here touches the Lua state.

use super::Debugger;

impl Debugger {
    /// The logs as one array of status replies.
    pub(super) fn send_logs(&mut self) {
        let mut proto = format!("*{}\r\n", self.logs.len()).into_bytes();
        for l in self.logs.drain(..) {
            proto.push(b'+');
            proto.extend(
                l.iter()
                    .map(|&c| if c == b'\r' || c == b'\n' { b' ' } else { c }),
            );
            proto.extend_from_slice(b"\r\n");
        }
        self.io.write(&proto);
    }

    /// Parses one command out of `cbuf` as Redis's debugger does (a
    /// forgiving multibulk reader with small limits).
    pub(super) fn parse_command(&self) -> Parsed {
        let buf = &self.cbuf;
        if buf.is_empty() {
            return Parsed::More;
        }
        // Headers are read as C strings: a NUL ends them.
        let Some(star) = buf.iter().take_while(|&&c| c != 0).position(|&c| c == b'*') else {
            return Parsed::Error;
        };
        let Some(eol) = header_end(buf, star) else {
            return Parsed::More;
        };
        let argc = atoi(&buf[star + 1..eol]);
        if argc <= 0 || argc > 1024 {
            return Parsed::Error;
        }
        let mut p = eol + 2;
        let mut argv = Vec::with_capacity(argc as usize);
        while argv.len() < argc as usize {
            match buf.get(p) {
                None | Some(0) => return Parsed::More,
                Some(b'$') => {}
                Some(_) => return Parsed::Error,
            }
            let Some(eol) = header_end(buf, p) else {
                return Parsed::More;
            };
            let len = atoi(&buf[p + 1..eol]);
            if len <= 0 || len > 1024 {
                return Parsed::Error;
            }
            let start = eol + 2;
            let end = start + len as usize;
            if end + 2 > buf.len() {
                return Parsed::More;
            }
            argv.push(buf[start..end].to_vec());
            if &buf[end..end + 2] != b"\r\n" {
                return Parsed::Error;
            }
            p = end + 2;
        }
        Parsed::Command(argv)
    }
}

pub(super) enum Parsed {
    More,
    Error,
    Command(Vec<Vec<u8>>),
}

/// The bytes before the first NUL, as C's string functions see them.
pub(super) fn cstr(b: &[u8]) -> &[u8] {
    b.iter().position(|&c| c == 0).map_or(b, |n| &b[..n])
}

/// Where the `\r\n` ending the header at `from` is, unless a NUL or the
/// end of the buffer comes first (C's `strstr` on the header).
fn header_end(b: &[u8], from: usize) -> Option<usize> {
    let mut i = from;
    while let Some(&c) = b.get(i) {
        match c {
            0 => return None,
            b'\r' if b.get(i + 1) == Some(&b'\n') => return Some(i),
            _ => i += 1,
        }
    }
    None
}

/// C's `atoi`: leading spaces, a sign, digits, anything after ignored.
pub(super) fn atoi(b: &[u8]) -> i64 {
    let b = cstr(b);
    let mut i = 0;
    while i < b.len() && matches!(b[i], b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c) {
        i += 1;
    }
    let neg = match b.get(i) {
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
    let mut n: i64 = 0;
    while let Some(d) = b.get(i).filter(|c| c.is_ascii_digit()) {
        n = n.saturating_mul(10).saturating_add((d - b'0') as i64);
        i += 1;
    }
    let n = if neg { -n } else { n };
    // `atoi` returns an int.
    n as i32 as i64
}

/// Redis's `string2l`: an optional minus, digits, no leading zero, nothing else.
pub(super) fn strict_int(s: &str) -> bool {
    let d = s.strip_prefix('-').unwrap_or(s);
    !d.is_empty()
        && d.bytes().all(|c| c.is_ascii_digit())
        && (d == "0" && !s.starts_with('-') || !d.starts_with('0'))
}

/// Whether the command word (read as a C string) is one of `names`.
pub(super) fn is(arg: &[u8], names: &[&str]) -> bool {
    let a = cstr(arg);
    names.iter().any(|n| a.eq_ignore_ascii_case(n.as_bytes()))
}
