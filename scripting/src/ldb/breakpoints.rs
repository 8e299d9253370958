//! Breakpoints: the session's list of lines to stop at, and the `break`
//! command that shows and edits it.
//!
//! Apart because the list has rules of its own (at most 64, lines of the
//! script only, and a removal that moves bytes, not entries, as Redis's
//! does) that the rest of the session need not know.

use super::protocol::{cstr, strict_int};
use super::{Debugger, MAX_BREAKPOINTS};

impl Debugger {
    pub(super) fn is_breakpoint(&self, line: i32) -> bool {
        self.bp[..self.bpcount].contains(&line)
    }

    fn add_breakpoint(&mut self, line: i32) -> bool {
        if line <= 0 || line as usize > self.src.len() {
            return false;
        }
        if !self.is_breakpoint(line) && self.bpcount != MAX_BREAKPOINTS {
            self.bp[self.bpcount] = line;
            self.bpcount += 1;
            return true;
        }
        false
    }

    fn del_breakpoint(&mut self, line: i32) -> bool {
        let Some(j) = self.bp[..self.bpcount].iter().position(|&b| b == line) else {
            return false;
        };
        self.bpcount -= 1;
        // Redis moves `bpcount - j` bytes, not entries: removing one but
        // the last breakpoint leaves the list as Redis's does.
        let mut bytes: Vec<u8> = self.bp.iter().flat_map(|b| b.to_ne_bytes()).collect();
        let from = (j + 1) * 4;
        bytes.copy_within(from..from + (self.bpcount - j), j * 4);
        for (b, c) in self.bp.iter_mut().zip(bytes.chunks_exact(4)) {
            *b = i32::from_ne_bytes([c[0], c[1], c[2], c[3]]);
        }
        true
    }

    pub(super) fn breakpoints(&mut self, argv: &[Vec<u8>]) {
        if argv.len() == 1 {
            if self.bpcount == 0 {
                self.log(b"No breakpoints set. Use 'b <line>' to add one.".to_vec());
            } else {
                self.log(format!("{} breakpoints set:", self.bpcount).into_bytes());
                for j in 0..self.bpcount {
                    self.log_source_line(self.bp[j]);
                }
            }
            return;
        }
        for arg in &argv[1..] {
            let Some(line) = std::str::from_utf8(arg)
                .ok()
                .filter(|s| strict_int(s))
                .and_then(|s| s.parse::<i64>().ok())
            else {
                let mut m = b"Invalid argument:'".to_vec();
                m.extend_from_slice(cstr(arg));
                m.push(b'\'');
                self.log(m);
                continue;
            };
            if line == 0 {
                self.bpcount = 0;
                self.log(b"All breakpoints removed.".to_vec());
            } else if line > 0 {
                if self.bpcount == MAX_BREAKPOINTS {
                    self.log(b"Too many breakpoints set.".to_vec());
                } else if self.add_breakpoint(line.try_into().unwrap_or(-1)) {
                    self.list(line as i32, 1);
                } else {
                    self.log(b"Wrong line number.".to_vec());
                }
            } else if self.del_breakpoint((-line).try_into().unwrap_or(0)) {
                self.log(b"Breakpoint removed.".to_vec());
            } else {
                self.log(b"No breakpoint in the specified line.".to_vec());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::ldb::{DebugIo, Debugger};

    #[test]
    fn removing_a_breakpoint_moves_bytes_as_redis() {
        struct NoIo;
        impl DebugIo for NoIo {
            fn read(&mut self, _: &mut [u8]) -> usize {
                0
            }
            fn write(&mut self, _: &[u8]) {}
        }
        let mut d = Debugger::new(Box::new(NoIo), b"a\nb\nc\nd\ne\nf", 0);
        for l in [2, 4, 6] {
            assert!(d.add_breakpoint(l));
        }
        assert!(d.del_breakpoint(2));
        assert_eq!(&d.bp[..d.bpcount], &[4, 4]);
    }
}
