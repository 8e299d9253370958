//! The reply buffer's size as Redis 7.0 reports it (CLIENT LIST's `rbs`
//! and `rbp`) and resizes it in its clients cron: it shrinks towards the
//! peak use of the last period (at least 1 KB) and doubles, up to 16 KB,
//! while replies fill it. Replies here leave through the connection's own
//! buffer, so this models the sizes Redis would show from each batch's
//! reply bytes; DEBUG REPLYBUFFER tunes it as in Redis.

/// The size a client starts with, and the most it grows to.
pub const CHUNK: usize = 16 * 1024;
const MIN: usize = 1024;
/// How long a peak counts by default (DEBUG REPLYBUFFER PEAK-RESET-TIME).
pub const DEFAULT_PEAK_RESET_MS: i64 = 5000;

/// The reply buffer of one client.
#[derive(Clone, Copy, Debug)]
pub struct ReplyBufSize {
    /// Its size (`rbs`).
    pub size: usize,
    /// The most of it a batch's replies used since the last reset (`rbp`).
    pub peak: usize,
    pub peak_reset_ms: i64,
}

/// A new client's peak is forgotten at the cron's first visit, so an idle
/// client shrinks within two visits: Redis 7.0.15 does so (a new client's
/// buffer is 1 KB 150 ms after it connects).
impl Default for ReplyBufSize {
    fn default() -> Self {
        ReplyBufSize {
            size: CHUNK,
            peak: CHUNK,
            peak_reset_ms: 0,
        }
    }
}

impl ReplyBufSize {
    /// A batch's replies took `bytes`.
    #[inline]
    pub fn used(&mut self, bytes: usize) {
        self.peak = self.peak.max(bytes.min(self.size));
    }

    /// The clients cron's resize; `reset_ms` < 0 never forgets a peak.
    /// Says whether the buffer shrank (`Less`) or grew (`Greater`).
    pub fn resize(&mut self, now: i64, reset_ms: i64) -> std::cmp::Ordering {
        let before = self.size;
        if self.size / 2 >= MIN && self.peak < self.size / 2 {
            self.size = MIN.max(self.peak + 1);
        } else if self.size * 2 < 2 * CHUNK && self.peak == self.size {
            self.size = CHUNK.min(self.size * 2);
        }
        if reset_ms >= 0 && now - self.peak_reset_ms >= reset_ms {
            self.peak = 0;
            self.peak_reset_ms = now;
        }
        self.size.cmp(&before)
    }
}
