//! The process title (what `ps` and `/proc/<pid>/cmdline` show), rewritten
//! in place from `proc-title-template` as Redis does on Linux: the title is
//! written over the argument strings, and over the environment strings once
//! those are copied to the heap, NUL-padded so `cmdline` reads as Redis's.
//!
//! [`init`] runs first thing in `main`, before any thread; [`set`] at
//! start-up and after each CONFIG SET. Any failure leaves the title alone.

use crate::core::config::Config;
use std::sync::Mutex;

/// The writable argument (and environment) strings of this process.
struct Area {
    base: *mut u8,
    /// Bytes from `base` the title may use, its NUL included.
    cap: usize,
    /// Length of the original argv[0]: `{title}`, and where the kernel's
    /// reader once saw the first NUL.
    argv0_len: usize,
    argv0: String,
}

// SAFETY: the area is only touched under `AREA`'s lock.
unsafe impl Send for Area {}

static AREA: Mutex<Option<Area>> = Mutex::new(None);

extern "C" {
    static mut environ: *mut *mut libc::c_char;
}

/// Finds the argument area and moves the environment out of it. Must run
/// before any other thread exists: `environ` is repointed unguarded.
pub fn init() {
    *AREA.lock().unwrap_or_else(|e| e.into_inner()) = locate();
}

/// `arg_start`, `arg_end`, `env_start`, `env_end` of /proc/self/stat.
fn stat_bounds() -> Option<[usize; 4]> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the command name (which may hold spaces) start at 3.
    let rest = &stat[stat.rfind(')')? + 1..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    let field = |n: usize| f.get(n - 3)?.parse::<usize>().ok();
    Some([field(48)?, field(49)?, field(50)?, field(51)?])
}

fn locate() -> Option<Area> {
    let argv0 = std::env::args_os().next()?.into_string().ok()?;
    let [arg_start, arg_end, env_start, env_end] = stat_bounds()?;
    if arg_start == 0 || arg_end <= arg_start + argv0.len() || env_end < env_start {
        return None;
    }
    // SAFETY: the kernel reports [arg_start, arg_end) as this process's
    // argument strings, mapped and writable for its whole life; the
    // comparison checks the bytes are argv[0] before anything is written.
    let first = unsafe { std::slice::from_raw_parts(arg_start as *const u8, argv0.len() + 1) };
    if first[..argv0.len()] != *argv0.as_bytes() || first[argv0.len()] != 0 {
        return None;
    }
    let mut end = arg_end;
    if env_start == arg_end && env_end > env_start {
        // SAFETY: no other thread runs yet (see `init`), so nothing reads
        // `environ` meanwhile. Every string is copied to a leaked heap
        // buffer and the new NULL-terminated array is leaked too, so the
        // pointers stay valid for the process's life; only then may the
        // old strings be overwritten.
        unsafe {
            let mut copies: Vec<*mut libc::c_char> = Vec::new();
            let mut p = environ;
            while !p.is_null() && !(*p).is_null() {
                copies.push(libc::strdup(*p));
                if copies.last().is_some_and(|c| c.is_null()) {
                    return None;
                }
                p = p.add(1);
            }
            copies.push(std::ptr::null_mut());
            environ = Box::leak(copies.into_boxed_slice()).as_mut_ptr();
        }
        end = env_end;
    }
    Some(Area {
        base: arg_start as *mut u8,
        cap: end - arg_start,
        argv0_len: argv0.len(),
        argv0,
    })
}

/// Writes the title `cfg`'s template gives (unless `set-proc-title no`).
pub fn set(cfg: &Config) {
    if cfg.get("set-proc-title") != Some("yes") {
        return;
    }
    let mut guard = AREA.lock().unwrap_or_else(|e| e.into_inner());
    let Some(a) = guard.as_mut() else {
        tracing::debug!("Process title not set: argument area not found");
        return;
    };
    let template = cfg.get("proc-title-template").unwrap_or_default();
    let title = cfg.expand_title(template, &a.argv0);
    // Redis formats the title into a 256-byte buffer: 255 bytes at most.
    let len = title.len().min(255).min(a.cap - 1);
    // SAFETY: [base, base + cap) is the area `locate` checked: the
    // arguments, plus the environment strings nothing points at any more.
    // The lock keeps writers apart; the kernel reads it as bytes only.
    // std's saved argv still points here, so `std::env::args` would now
    // read the title: `main` takes its arguments before `init`.
    let area = unsafe { std::slice::from_raw_parts_mut(a.base, a.cap) };
    area.fill(0);
    area[..len].copy_from_slice(&title.as_bytes()[..len]);
    // As setproctitle does, where argv[0] ended: a shorter title leaves a
    // '.' there, one as long gets a trailing space.
    if len < a.argv0_len {
        area[a.argv0_len] = b'.';
    } else if len == a.argv0_len && len + 1 < a.cap {
        area[len] = b' ';
    }
}
