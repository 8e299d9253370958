//! `oom-score-adj`: the process's `/proc/self/oom_score_adj` set from
//! `oom-score-adj-values` for its role (master, replica), relative to the
//! value it had when the feature was turned on (`yes`/`relative`) or
//! absolute, and put back when it is turned off. The third value (Redis's
//! background child) has no process to apply to here: snapshots are
//! written by a thread of this process.

use crate::core::config::OomMode;

const PATH: &str = "/proc/self/oom_score_adj";

/// The value found when the feature was turned on, to restore.
#[derive(Default)]
pub struct OomScore {
    base: Option<i64>,
}

impl OomScore {
    /// Applies the settings; `replica` selects the second value. An error
    /// is CONFIG SET's reason.
    pub fn apply(&mut self, mode: OomMode, values: &[i64], replica: bool) -> Result<(), String> {
        let want = match (mode, self.base) {
            (OomMode::No, None) => return Ok(()),
            (OomMode::No, Some(base)) => {
                self.base = None;
                base
            }
            (_, base) => {
                let base = match base {
                    Some(b) => b,
                    None => read()?,
                };
                self.base = Some(base);
                let v = values.get(usize::from(replica)).copied().unwrap_or(0);
                let v = if mode == OomMode::Absolute {
                    v
                } else {
                    base + v
                };
                v.clamp(-1000, 1000)
            }
        };
        std::fs::write(PATH, want.to_string()).map_err(|e| {
            tracing::warn!("Unable to write oom_score_adj: {e}");
            "Failed to set current oom_score_adj. Check server logs.".to_string()
        })
    }
}

fn read() -> Result<i64, String> {
    std::fs::read_to_string(PATH)
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .ok_or_else(|| {
            tracing::warn!("Unable to read oom_score_adj");
            "Failed to set current oom_score_adj. Check server logs.".to_string()
        })
}
