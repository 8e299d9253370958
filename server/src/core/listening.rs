//! The listening sockets, as the process knows them: SHUTDOWN, a signal
//! and a busy script's SHUTDOWN NOSAVE stop them from wherever they run,
//! without the state lock.

use parking_lot::Mutex;
use std::os::fd::RawFd;

/// The listening sockets, apart from the state lock (a busy script may
/// hold it when SHUTDOWN NOSAVE ends the process), for [`stop_listening`].
pub static LISTENING: Mutex<Vec<RawFd>> = Mutex::new(Vec::new());

/// Refuses new connections from now on, as a Redis that is exiting does:
/// the listeners stop before any client sees its connection closed (a
/// client that reconnects after SHUTDOWN is refused, not served).
pub fn stop_listening() {
    for fd in LISTENING.lock().drain(..) {
        // SAFETY: `fd` is a listener still open: it leaves the list before
        // its accept loop is stopped (`relisten`). shutdown() keeps the fd.
        unsafe {
            libc::shutdown(fd, libc::SHUT_RDWR);
        }
    }
}
