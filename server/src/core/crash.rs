//! What happens when the server fails or stalls: a panic ends the process
//! as Redis's `serverPanic` does (abort, or exit(1) under the test-only
//! `use-exit-on-panic`); a fatal signal (SIGSEGV, SIGBUS, SIGFPE, SIGILL,
//! SIGABRT, which a panic's abort raises) logs Redis's bug report — the
//! signal, the stack trace, INFO and the clients — and then takes its
//! default action; the watchdog (`watchdog-period`) logs when the event
//! loop has not come round for longer than the period, with the stack
//! trace of the worker thread where it is stuck.

use crate::core::log::RAW;
use std::sync::atomic::Ordering::{Acquire, Relaxed, Release};
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicI64, AtomicU64, AtomicUsize};
use std::sync::OnceLock;
use std::time::Duration;
use tracing::warn;

static EXIT_ON_PANIC: AtomicBool = AtomicBool::new(false);
/// `crash-log-enabled`: off, a fatal signal ends the process at once, with
/// nothing logged, as Redis then installs no handler.
static CRASH_LOG: AtomicBool = AtomicBool::new(true);
/// `watchdog-period` in ms, 0 when off.
static WATCHDOG_MS: AtomicI64 = AtomicI64::new(0);
/// When the cron last came round (unix ms).
static HEARTBEAT: AtomicU64 = AtomicU64::new(0);
/// The thread the cron last ran on: the worker the watchdog interrupts.
static WORKER_TID: AtomicI32 = AtomicI32::new(0);

/// `use-exit-on-panic`, `watchdog-period` and `crash-log-enabled` took new
/// values.
pub fn configure(exit_on_panic: bool, watchdog_ms: i64, crash_log: bool) {
    EXIT_ON_PANIC.store(exit_on_panic, Relaxed);
    CRASH_LOG.store(crash_log, Relaxed);
    let was = WATCHDOG_MS.swap(watchdog_ms, Relaxed);
    if was == 0 && watchdog_ms > 0 {
        beat();
        install_watchdog_handler();
        std::thread::spawn(watchdog);
    }
}

/// Called by the cron each time round.
pub fn beat() {
    HEARTBEAT.store(crate::core::clock::now_ms() as u64, Relaxed);
    if WATCHDOG_MS.load(Relaxed) > 0 {
        // SAFETY: gettid has no arguments and cannot fail.
        WORKER_TID.store(unsafe { libc::gettid() }, Relaxed);
    }
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

/// What the bug report shows of the server (INFO, the clients), installed
/// by the server once it runs; `None` when the state is not at hand.
type Report = Box<dyn Fn() -> Option<String> + Send + Sync>;
static REPORT: OnceLock<Report> = OnceLock::new();

pub fn set_report(f: impl Fn() -> Option<String> + Send + Sync + 'static) {
    let _ = REPORT.set(Box::new(f));
}

const FATAL: [libc::c_int; 5] = [
    libc::SIGSEGV,
    libc::SIGBUS,
    libc::SIGFPE,
    libc::SIGILL,
    libc::SIGABRT,
];

/// Fatal signals get the bug report, once: the handler is reset on entry
/// (a fault inside it ends the process). It runs on the faulting thread's
/// own stack: resolving the stack trace needs more than an alternate
/// signal stack holds, so a stack overflow ends without a report.
pub fn install_signal_handlers() {
    for sig in FATAL {
        // SAFETY: a zeroed sigaction with an empty mask and a handler of
        // the SA_SIGINFO signature.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_fatal_signal as *const () as usize;
            sa.sa_flags = libc::SA_SIGINFO | libc::SA_RESETHAND | libc::SA_NODEFER;
            libc::sigemptyset(&mut sa.sa_mask);
            libc::sigaction(sig, &sa, std::ptr::null_mut());
        }
    }
}

/// The bug report, then the signal again with its default action. Not
/// async-signal-safe (it allocates and logs), as Redis's is not either:
/// the process is going down and the report is worth the risk.
extern "C" fn on_fatal_signal(sig: libc::c_int, info: *mut libc::siginfo_t, _: *mut libc::c_void) {
    if CRASH_LOG.load(Relaxed) {
        bug_report(sig, info);
    }
    // SAFETY: restores the default action and raises the signal again.
    unsafe {
        libc::signal(sig, libc::SIG_DFL);
        libc::raise(sig);
    }
}

fn bug_report(sig: libc::c_int, info: *mut libc::siginfo_t) {
    warn!(target: RAW, "\n\n=== REDIS BUG REPORT START: Cut & paste starting from here ===");
    // SAFETY: the kernel passes a valid siginfo to an SA_SIGINFO handler.
    let (code, addr, pid, uid) = unsafe {
        let i = &*info;
        (i.si_code, i.si_addr(), i.si_pid(), i.si_uid())
    };
    warn!("Redis 7.0.15 crashed by signal: {sig}, si_code: {code}");
    if sig == libc::SIGSEGV || sig == libc::SIGBUS {
        warn!("Accessing address: {addr:p}");
    }
    if code == libc::SI_USER || code == libc::SI_TKILL {
        warn!("Killed by PID: {pid}, UID: {uid}");
    }
    warn!(
        target: RAW,
        "\n------ STACK TRACE ------\n\nBacktrace:\n{}",
        std::backtrace::Backtrace::force_capture()
    );
    let report = REPORT.get().and_then(|f| f());
    warn!(
        target: RAW,
        "{}",
        report.unwrap_or_else(|| "\n(INFO and the clients are not at hand: the state lock is held)".into())
    );
    warn!(target: RAW, "\n=== REDIS BUG REPORT END. Make sure to include from START to END. ===\n");
}

/// DEBUG SEGFAULT: a real invalid memory access (a write to a read-only
/// page), so the report shows a genuine fault.
pub fn segfault() -> ! {
    // SAFETY: deliberately faulting; the handler above ends the process.
    unsafe {
        let p = libc::mmap(
            std::ptr::null_mut(),
            4096,
            libc::PROT_READ,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        );
        std::ptr::write_volatile(p.cast::<u8>(), b'x');
        libc::raise(libc::SIGSEGV);
    }
    unreachable!("the SIGSEGV handler ends the process")
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
        let now = crate::core::clock::now_ms() as u64;
        if now.saturating_sub(last) > period as u64 && last != reported {
            reported = last;
            tracing::warn!("--- WATCHDOG TIMER EXPIRED ---");
            log_worker_stack();
        }
    }
}

const MAX_FRAMES: usize = 100;
/// The stalled worker's return addresses, written by its signal handler.
static FRAMES: [AtomicUsize; MAX_FRAMES] = [const { AtomicUsize::new(0) }; MAX_FRAMES];
static NFRAMES: AtomicUsize = AtomicUsize::new(0);
static CAPTURED: AtomicBool = AtomicBool::new(false);

/// SIGALRM, sent by the watchdog to the worker, as Redis's watchdog
/// timer is: the handler only walks the stack into `FRAMES` (no
/// allocation, no lock), and the watchdog thread names the frames.
fn install_watchdog_handler() {
    // The unwinder's first use may load and set up what it needs: done
    // here, not in the handler.
    backtrace::trace(|_| false);
    // SAFETY: as in `install_signal_handlers`; SA_RESTART so that the
    // interrupted system call goes on.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = on_watchdog_signal as *const () as usize;
        sa.sa_flags = libc::SA_RESTART;
        libc::sigemptyset(&mut sa.sa_mask);
        libc::sigaction(libc::SIGALRM, &sa, std::ptr::null_mut());
    }
}

extern "C" fn on_watchdog_signal(_: libc::c_int) {
    let mut n = 0;
    // SAFETY: walks this thread's own stack; the closure only stores
    // into atomics. No other thread traces meanwhile: the watchdog waits.
    unsafe {
        backtrace::trace_unsynchronized(|f| {
            FRAMES[n].store(f.ip() as usize, Relaxed);
            n += 1;
            n < MAX_FRAMES
        });
    }
    NFRAMES.store(n, Relaxed);
    CAPTURED.store(true, Release);
}

/// Interrupts the worker and logs its stack trace, as Redis's watchdog
/// report: the frames below the signal handler, innermost first.
fn log_worker_stack() {
    let tid = WORKER_TID.load(Relaxed);
    CAPTURED.store(false, Relaxed);
    // SAFETY: signals a thread of this process; a stale id fails (ESRCH).
    if tid == 0
        || unsafe { libc::syscall(libc::SYS_tgkill, libc::getpid(), tid, libc::SIGALRM) } != 0
    {
        return;
    }
    let deadline = std::time::Instant::now() + Duration::from_millis(500);
    while !CAPTURED.load(Acquire) {
        if std::time::Instant::now() > deadline {
            return;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    let mut lines = Vec::new();
    for f in &FRAMES[..NFRAMES.load(Relaxed)] {
        let ip = f.load(Relaxed);
        if ip == 0 {
            continue;
        }
        let mut name = String::from("??");
        backtrace::resolve(ip as *mut std::ffi::c_void, |sym| {
            if let Some(n) = sym.name() {
                name = format!("{n:#}");
            }
        });
        lines.push(format!("{name} [{ip:#x}]"));
    }
    // The handler's own frames and the kernel's signal trampoline first.
    let skip = lines
        .iter()
        .position(|l| l.contains("on_watchdog_signal"))
        .map_or(0, |i| i + 2);
    let pid = std::process::id();
    let time = crate::core::clock::now_ms() / 1000;
    warn!(
        target: RAW,
        "\n------ STACK TRACE ------\n\nBacktrace:\n{}\n{pid}:signal-handler ({time}) --------",
        lines[skip.min(lines.len())..].join("\n")
    );
}
