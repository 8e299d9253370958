//! INFO: which sections a request names; their text is `state::info`'s.

use super::{Ctx, Handler};
use crate::core::error::CmdResult;
use crate::state::info::{section, SECTIONS};
use bytes::Bytes;

pub static HANDLERS: &[(&str, Handler)] = &[("info", info)];

/// INFO [section [section ...]]
fn info(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let mut want = [false; SECTIONS.len()];
    if a.len() == 1 {
        for (w, s) in want.iter_mut().zip(SECTIONS) {
            *w = s.1;
        }
    }
    for arg in &a[1..] {
        let name = String::from_utf8_lossy(arg).to_ascii_lowercase();
        match name.as_str() {
            "default" => {
                for (w, s) in want.iter_mut().zip(SECTIONS) {
                    *w |= s.1;
                }
            }
            "all" | "everything" => want = [true; SECTIONS.len()],
            n => {
                if let Some(i) = SECTIONS.iter().position(|s| s.0 == n) {
                    want[i] = true;
                }
            }
        }
    }
    let mut out = String::new();
    for (i, s) in SECTIONS.iter().enumerate() {
        if !want[i] {
            continue;
        }
        if !out.is_empty() {
            out.push_str("\r\n");
        }
        section(c.st, s.0, &mut out);
    }
    c.out.verbatim(out.as_bytes());
    Ok(())
}
