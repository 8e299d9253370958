//! The socket of a SCRIPT DEBUG SYNC session: the
//! debugger reads and writes the client's connection itself.

use scripting::DebugIo;

/// The debugging client's socket, used blocking by the session: its
/// connection task is inside this very command meanwhile. Writes give up
/// after 5 s, as Redis's send timeout.
pub(super) struct SocketIo(pub(super) i32);

impl SocketIo {
    /// Waits for `events`; false on error or after `ms` (-1: no limit).
    fn wait(&self, events: i16, ms: i32) -> bool {
        let mut p = libc::pollfd {
            fd: self.0,
            events,
            revents: 0,
        };
        // SAFETY: one valid pollfd for the call.
        let n = unsafe { libc::poll(&mut p, 1, ms) };
        n > 0
            || (n < 0 && std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted)
    }
}

fn retry(e: std::io::Error) -> bool {
    matches!(
        e.kind(),
        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::Interrupted
    )
}

impl DebugIo for SocketIo {
    fn read(&mut self, buf: &mut [u8]) -> usize {
        loop {
            // SAFETY: reads into `buf`, within its length.
            let n = unsafe { libc::read(self.0, buf.as_mut_ptr().cast(), buf.len()) };
            if n >= 0 {
                return n as usize;
            }
            if !retry(std::io::Error::last_os_error()) || !self.wait(libc::POLLIN, -1) {
                return 0;
            }
        }
    }

    fn write(&mut self, mut b: &[u8]) {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while !b.is_empty() {
            // SAFETY: sends from `b`, within its length.
            let n = unsafe { libc::send(self.0, b.as_ptr().cast(), b.len(), libc::MSG_NOSIGNAL) };
            if n > 0 {
                b = &b[n as usize..];
                continue;
            }
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            if n == 0
                || !retry(std::io::Error::last_os_error())
                || left.is_zero()
                || !self.wait(libc::POLLOUT, left.as_millis().max(1) as i32)
            {
                return;
            }
        }
    }
}
