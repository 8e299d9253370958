//! What happens when the server fails or stalls: a panic ends the process
//! as Redis's `serverPanic` does (abort, or exit(1) under the test-only
//! `use-exit-on-panic`), and the watchdog (`watchdog-period`) logs when the
//! event loop has not come round for longer than the period.

use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering::Relaxed};
use std::time::Duration;

static EXIT_ON_PANIC: AtomicBool = AtomicBool::new(false);
/// `watchdog-period` in ms, 0 when off.
static WATCHDOG_MS: AtomicI64 = AtomicI64::new(0);
/// When the cron last came round (unix ms).
static HEARTBEAT: AtomicU64 = AtomicU64::new(0);

/// `use-exit-on-panic` and `watchdog-period` took new values.
pub fn configure(exit_on_panic: bool, watchdog_ms: i64) {
    EXIT_ON_PANIC.store(exit_on_panic, Relaxed);
    let was = WATCHDOG_MS.swap(watchdog_ms, Relaxed);
    if was == 0 && watchdog_ms > 0 {
        beat();
        std::thread::spawn(watchdog);
    }
}

/// Called by the cron each time round.
pub fn beat() {
    HEARTBEAT.store(crate::state::now_ms() as u64, Relaxed);
}

/// A panic anywhere takes the process down, as a failed assertion does in
/// Redis: a panicking task would otherwise leave the shared state half
/// changed behind the lock.
pub fn install_panic_hook() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let p = info.payload();
        let msg = p
            .downcast_ref::<&str>()
            .copied()
            .or_else(|| p.downcast_ref::<String>().map(String::as_str))
            .unwrap_or("panic");
        let at = info
            .location()
            .map_or(String::new(), |l| format!(" #{}:{}", l.file(), l.line()));
        tracing::warn!("------------------------------------------------");
        tracing::warn!("Guru Meditation: {msg}{at}");
        default(info);
        if EXIT_ON_PANIC.load(Relaxed) {
            std::process::exit(1);
        }
        std::process::abort();
    }));
}

/// Runs while the period is set; logs once per stall.
fn watchdog() {
    let mut reported = 0;
    loop {
        let period = WATCHDOG_MS.load(Relaxed);
        if period <= 0 {
            return;
        }
        std::thread::sleep(Duration::from_millis((period as u64 / 4).clamp(10, 1000)));
        let last = HEARTBEAT.load(Relaxed);
        let now = crate::state::now_ms() as u64;
        if now.saturating_sub(last) > period as u64 && last != reported {
            reported = last;
            tracing::warn!("--- WATCHDOG TIMER EXPIRED ---");
        }
    }
}
