//! Output a connection holds beyond its reply buffer: large output (a
//! batch's replies past 64 KB, or what a socket that stopped taking it
//! left) kept as the list of buffers it was built in, each filled before
//! the next is taken, as Redis keeps a reply list. Its memory is then about
//! its size (a doubling buffer held up to twice that), so client eviction,
//! which weighs `omem`, acts before keys are evicted for it. The client's
//! record shares it, so closing the client (client eviction) frees it at
//! once, not when the connection's task next runs.

use bytes::Bytes;
use parking_lot::Mutex;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

#[derive(Default)]
pub struct Spill {
    inner: Mutex<Inner>,
    /// Bytes held, readable without the lock.
    len: AtomicUsize,
}

#[derive(Default)]
struct Inner {
    chunks: VecDeque<Bytes>,
    /// The client is gone: nothing is kept any more.
    closed: bool,
}

impl Spill {
    /// Queues `b` after what is held.
    pub fn push(&self, b: Bytes) {
        let mut h = self.inner.lock();
        if h.closed || b.is_empty() {
            return;
        }
        self.len.fetch_add(b.len(), Relaxed);
        h.chunks.push_back(b);
    }

    pub fn len(&self) -> usize {
        self.len.load(Relaxed)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Drops what is held (the client is past its output limit).
    pub fn clear(&self) {
        let mut h = self.inner.lock();
        h.chunks = VecDeque::new();
        self.len.store(0, Relaxed);
    }

    /// The client is closed: frees what is held, and keeps nothing from
    /// now on.
    pub fn close(&self) {
        self.inner.lock().closed = true;
        self.clear();
    }

    /// Writes what `write` takes, oldest first, until it takes less than
    /// offered or all is written. The bytes written; `write`'s error if
    /// it took none.
    pub fn write_with(
        &self,
        mut write: impl FnMut(&[u8]) -> std::io::Result<usize>,
    ) -> std::io::Result<usize> {
        let mut h = self.inner.lock();
        let mut total = 0;
        while let Some(front) = h.chunks.front_mut() {
            let n = match write(front) {
                Ok(n) => n,
                Err(e) if total == 0 => return Err(e),
                Err(_) => break,
            };
            total += n;
            self.len.fetch_sub(n, Relaxed);
            if n < front.len() {
                bytes::Buf::advance(front, n);
                break;
            }
            h.chunks.pop_front();
        }
        Ok(total)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_in_order_what_the_socket_takes() {
        let s = Spill::default();
        s.push(Bytes::from_static(b"abc"));
        s.push(Bytes::from_static(b"defg"));
        assert_eq!(s.len(), 7);
        let mut got = Vec::new();
        // Takes 5 bytes at most.
        let n = s
            .write_with(|b| {
                let n = b.len().min(5 - got.len());
                got.extend_from_slice(&b[..n]);
                Ok(n)
            })
            .unwrap();
        assert_eq!((n, &got[..], s.len()), (5, &b"abcde"[..], 2));
        let err = s.write_with(|_| Err(std::io::ErrorKind::WouldBlock.into()));
        assert!(err.is_err());
        s.close();
        s.push(Bytes::from_static(b"x"));
        assert!(s.is_empty());
    }
}
