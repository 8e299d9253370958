//! What the operating system reports about this process and machine:
//! resident memory, CPU times, the kernel's name. INFO, MEMORY, eviction
//! and the RDB header read them; nothing here knows about commands. And
//! socket sends that do not wait, for a full sync's transfer.

/// Turns TCP keepalive on for socket `fd` with Redis's timing for
/// `tcp-keepalive`: the first probe after `interval` seconds idle, then one
/// every third of it, the peer dead after 3 unanswered.
pub fn keepalive(fd: std::os::fd::RawFd, interval: i64) {
    let idle = interval.clamp(1, i32::MAX as i64) as libc::c_int;
    let opts = [
        (libc::SOL_SOCKET, libc::SO_KEEPALIVE, 1),
        (libc::IPPROTO_TCP, libc::TCP_KEEPIDLE, idle),
        (libc::IPPROTO_TCP, libc::TCP_KEEPINTVL, (idle / 3).max(1)),
        (libc::IPPROTO_TCP, libc::TCP_KEEPCNT, 3),
    ];
    for (level, name, v) in opts {
        set_int_opt(fd, level, name, v);
    }
}

/// setsockopt(2) of a c_int option; a socket that refuses it (a Unix
/// socket for TCP options) is left as it was.
fn set_int_opt(fd: std::os::fd::RawFd, level: libc::c_int, name: libc::c_int, v: libc::c_int) {
    // SAFETY: `fd` is an open socket and the value a c_int of the size given.
    unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            (&v as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        );
    }
}

/// Sets TCP_NODELAY on socket `fd` (a Unix socket refuses it, harmlessly).
pub fn nodelay(fd: std::os::fd::RawFd, on: bool) {
    set_int_opt(fd, libc::IPPROTO_TCP, libc::TCP_NODELAY, on.into());
}

/// Resident set size of the process, from /proc/self/statm.
pub fn rss_bytes() -> u64 {
    let page = {
        // SAFETY: sysconf has no memory effects.
        let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
        if p > 0 {
            p as u64
        } else {
            4096
        }
    };
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1)?.parse::<u64>().ok())
        .map_or(0, |pages| pages * page)
}

pub fn total_system_memory() -> u64 {
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|s| {
            let line = s.lines().find(|l| l.starts_with("MemTotal:"))?;
            line.split_whitespace().nth(1)?.parse::<u64>().ok()
        })
        .map_or(0, |kb| kb * 1024)
}

pub fn rusage(who: libc::c_int) -> (f64, f64) {
    // SAFETY: getrusage writes only into the zeroed struct we pass.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    if unsafe { libc::getrusage(who, &mut ru) } != 0 {
        return (0.0, 0.0);
    }
    let t = |tv: libc::timeval| tv.tv_sec as f64 + tv.tv_usec as f64 / 1e6;
    (t(ru.ru_stime), t(ru.ru_utime))
}

pub fn uname() -> String {
    // SAFETY: uname fills the zeroed struct; the fields are NUL-terminated.
    let mut u: libc::utsname = unsafe { std::mem::zeroed() };
    if unsafe { libc::uname(&mut u) } != 0 {
        return "Linux".into();
    }
    let f = |b: &[libc::c_char]| {
        let bytes: Vec<u8> = b
            .iter()
            .take_while(|&&c| c != 0)
            .map(|&c| c as u8)
            .collect();
        String::from_utf8_lossy(&bytes).into_owned()
    };
    format!("{} {} {}", f(&u.sysname), f(&u.release), f(&u.machine))
}

/// Sends what socket `fd` takes of `buf` without waiting: the bytes
/// taken (0 when it takes none or fails; its owner then meets the error).
pub fn send_nowait(fd: i32, buf: &[u8]) -> usize {
    // SAFETY: `buf` is valid for `buf.len()` bytes; the caller owns `fd`
    // for the call (a connection's socket, open while its client is).
    let n = unsafe {
        libc::send(
            fd,
            buf.as_ptr().cast(),
            buf.len(),
            libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL,
        )
    };
    n.max(0) as usize
}

/// Copies up to `len` bytes of `file` from `offset` to socket `fd` in the
/// kernel, without waiting: the bytes taken (0 when it takes none or
/// fails; its owner then meets the error).
pub fn sendfile_nowait(fd: i32, file: &std::fs::File, offset: u64, len: usize) -> usize {
    use std::os::fd::AsRawFd;
    let mut off = offset as libc::off_t;
    // SAFETY: both descriptors are open for the call (the caller owns
    // `fd`, `file` is borrowed); `off` is a valid offset pointer.
    let n = unsafe { libc::sendfile(fd, file.as_raw_fd(), &mut off, len) };
    n.max(0) as usize
}

/// Why the library at `path` does not load: what dlopen says first about
/// a missing or non-executable file, else that modules are not supported.
pub fn module_load_error(path: &str) -> String {
    use std::os::unix::fs::PermissionsExt;
    match std::fs::metadata(path) {
        Err(_) => format!("{path}: cannot open shared object file: No such file or directory"),
        Ok(m) if m.permissions().mode() & 0o111 == 0 => {
            "It does not have execute permissions.".into()
        }
        Ok(_) => format!("{path}: Redis modules are not supported by this server"),
    }
}

/// An OS error as C's strerror words it (Rust adds " (os error N)").
pub fn strerror(e: &std::io::Error) -> String {
    let s = e.to_string();
    s.split(" (os error").next().unwrap_or(&s).to_string()
}
