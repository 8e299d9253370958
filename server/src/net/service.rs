//! Running as a system service: `daemonize` (fork, detach, the parent
//! returns 0) and `supervised` (upstart's SIGSTOP, systemd's
//! NOTIFY_SOCKET datagrams: STATUS=…, READY=1, STOPPING=1), as Redis does.

use std::sync::atomic::{AtomicU8, Ordering::Relaxed};
use tracing::{info, warn};

const NONE: u8 = 0;
const SYSTEMD: u8 = 1;
const UPSTART: u8 = 2;

/// The supervision in effect, decided once at start-up.
static MODE: AtomicU8 = AtomicU8::new(NONE);

/// The supervision `supervised` asks for that the environment allows.
fn pick(mode: &str) -> u8 {
    let upstart = std::env::var_os("UPSTART_JOB").is_some();
    let systemd = std::env::var_os("NOTIFY_SOCKET").is_some();
    match mode {
        "upstart" | "auto" if upstart => UPSTART,
        "systemd" | "auto" if systemd => SYSTEMD,
        _ => NONE,
    }
}

/// Whether the process will be supervised (then `daemonize` is ignored,
/// as Redis ignores it).
pub fn will_supervise(mode: &str) -> bool {
    pick(mode) != NONE
}

/// Sets up the supervision and logs what it found; call it once logging
/// is set up.
pub fn supervise(mode: &str) {
    let m = pick(mode);
    match (mode, m) {
        ("upstart", NONE) => warn!("upstart supervision requested, but UPSTART_JOB not found!"),
        ("systemd", NONE) => warn!("systemd supervision error: NOTIFY_SOCKET not found!"),
        (_, SYSTEMD) => info!("Supervised by systemd. Please make sure you set appropriate values for TimeoutStartSec and TimeoutStopSec in your service unit."),
        // Upstart's job variable must not reach children.
        (_, UPSTART) => std::env::remove_var("UPSTART_JOB"),
        _ => {}
    }
    MODE.store(m, Relaxed);
}

/// `daemonize yes`: the parent exits 0 at once; the child goes on in a
/// new session with its standard streams on /dev/null (a log going to
/// stdout is then lost, as Redis's). Must run before any thread exists.
pub fn daemonize() {
    // SAFETY: called while the process has one thread; the child only
    // continues single-threaded start-up code.
    unsafe {
        match libc::fork() {
            -1 => {
                eprintln!("fork: {}", std::io::Error::last_os_error());
                std::process::exit(1);
            }
            0 => {}
            _ => libc::_exit(0),
        }
        libc::setsid();
        let fd = libc::open(c"/dev/null".as_ptr(), libc::O_RDWR, 0);
        if fd != -1 {
            libc::dup2(fd, libc::STDIN_FILENO);
            libc::dup2(fd, libc::STDOUT_FILENO);
            libc::dup2(fd, libc::STDERR_FILENO);
            if fd > libc::STDERR_FILENO {
                libc::close(fd);
            }
        }
    }
}

/// Start-up reached the loading of the dataset.
pub fn loading() {
    notify("STATUS=Redis is loading...\n");
}

/// The server is ready: systemd is told, upstart's job is stopped until
/// upstart continues it.
pub fn ready() {
    match MODE.load(Relaxed) {
        SYSTEMD => {
            notify("STATUS=Ready to accept connections\n");
            notify("READY=1\n");
        }
        // SAFETY: raising a signal on ourselves.
        UPSTART => unsafe {
            libc::raise(libc::SIGSTOP);
        },
        _ => {}
    }
}

/// Shutdown has begun.
pub fn stopping() {
    notify("STOPPING=1\n");
}

/// One datagram to systemd's NOTIFY_SOCKET (a path, or `@name` in the
/// abstract namespace).
fn notify(msg: &str) {
    if MODE.load(Relaxed) != SYSTEMD {
        return;
    }
    let Some(path) = std::env::var_os("NOTIFY_SOCKET") else {
        warn!("systemd supervision error: NOTIFY_SOCKET not found!");
        return;
    };
    let sent = (|| {
        use std::os::unix::net::{SocketAddr, UnixDatagram};
        let sock = UnixDatagram::unbound()?;
        let bytes = std::os::unix::ffi::OsStrExt::as_bytes(path.as_os_str());
        let addr = match bytes.strip_prefix(b"@") {
            Some(name) => {
                use std::os::linux::net::SocketAddrExt;
                SocketAddr::from_abstract_name(name)?
            }
            None => SocketAddr::from_pathname(&path)?,
        };
        sock.send_to_addr(msg.as_bytes(), &addr)
    })();
    if let Err(e) = sent {
        warn!("Can't send notification to systemd: {e}");
    }
}
