//! Writing a connection's output while still reading it: the socket kinds
//! a connection runs on (TCP, Unix, TLS) behind [`Duplex`], and
//! [`write_out`], which keeps reading and decoding requests while the
//! socket takes no more output, so a client that does not read still has
//! its requests run, its output grow toward its limits, and a CLIENT KILL
//! noticed.

use crate::cmd::batch::SPILL_AT;
use crate::state::Shared;
use bytes::{Bytes, BytesMut};
use protocol::Decoder;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// Bytes a socket read asks for at least.
pub(super) const READ_CHUNK: usize = 16 * 1024;

/// Requests executed per lock acquisition at most.
pub(super) const MAX_BATCH: usize = 256;

/// A socket `write_out` can read while it writes: readiness, and
/// non-blocking reads and writes. A TLS stream (`tls::TlsStream`) is one
/// too, so each kind of socket gets its own copy of the connection code.
pub trait Duplex {
    fn readable(&self) -> impl std::future::Future<Output = std::io::Result<()>> + Send;
    fn writable(&self) -> impl std::future::Future<Output = std::io::Result<()>> + Send;
    fn try_read_buf(&mut self, buf: &mut BytesMut) -> std::io::Result<usize>;
    fn try_write(&mut self, buf: &[u8]) -> std::io::Result<usize>;
    /// Output taken by `try_write` and not yet on the socket (TLS records
    /// the socket did not take): `try_write(&[])` sends it.
    fn buffered(&self) -> bool {
        false
    }
    /// Encrypted: the socket cannot be used raw (the Lua debugger does).
    fn is_tls(&self) -> bool {
        false
    }
    /// Gives the socket the connection's outbox (TLS writes through it).
    fn attach(&mut self, _ob: &Arc<crate::core::round::Outbox>) {}
    /// Takes back what the outbox has not written, ahead of `out`; true if
    /// the socket stalled (see `round::Outbox::take`).
    fn reclaim(&mut self, ob: &crate::core::round::Outbox, out: &mut BytesMut) -> bool {
        ob.take(out)
    }
    /// Turns `out` into the bytes for the wire, if it can be now.
    fn seal(&mut self, _out: &mut BytesMut) -> bool {
        true
    }
}

macro_rules! duplex {
    ($t:ty) => {
        impl Duplex for $t {
            fn readable(&self) -> impl std::future::Future<Output = std::io::Result<()>> + Send {
                <$t>::readable(self)
            }
            fn writable(&self) -> impl std::future::Future<Output = std::io::Result<()>> + Send {
                <$t>::writable(self)
            }
            fn try_read_buf(&mut self, buf: &mut BytesMut) -> std::io::Result<usize> {
                <$t>::try_read_buf(self, buf)
            }
            fn try_write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
                <$t>::try_write(self, buf)
            }
        }
    };
}
duplex!(tokio::net::TcpStream);
duplex!(tokio::net::UnixStream);

impl Duplex for crate::core::tls::TlsStream {
    fn readable(&self) -> impl std::future::Future<Output = std::io::Result<()>> + Send {
        crate::core::tls::TlsStream::readable(self)
    }
    fn writable(&self) -> impl std::future::Future<Output = std::io::Result<()>> + Send {
        crate::core::tls::TlsStream::writable(self)
    }
    fn try_read_buf(&mut self, buf: &mut BytesMut) -> std::io::Result<usize> {
        crate::core::tls::TlsStream::try_read_buf(self, buf)
    }
    fn try_write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        crate::core::tls::TlsStream::try_write(self, buf)
    }
    fn buffered(&self) -> bool {
        crate::core::tls::TlsStream::buffered(self)
    }
    fn is_tls(&self) -> bool {
        true
    }
    fn attach(&mut self, ob: &Arc<crate::core::round::Outbox>) {
        crate::core::tls::TlsStream::attach(self, ob.clone())
    }
    fn reclaim(&mut self, ob: &crate::core::round::Outbox, _out: &mut BytesMut) -> bool {
        crate::core::tls::TlsStream::reclaim(self, ob)
    }
    fn seal(&mut self, out: &mut BytesMut) -> bool {
        crate::core::tls::TlsStream::seal(self, out)
    }
}

/// Where input read while writing goes.
pub(super) struct Input<'a> {
    pub(super) buf: &'a mut BytesMut,
    pub(super) dec: &'a mut Decoder,
    pub(super) batch: &'a mut Vec<Vec<Bytes>>,
    pub(super) err: &'a mut Option<protocol::ProtocolError>,
}

pub(super) enum Written {
    All,
    Closed,
    /// Stopped after this many bytes: requests arrived to run.
    Part(usize),
}

/// A connection's output: its buffer, the larger output held before it,
/// and the gauge of the buffer's unsent bytes (`Client::out_unsent`).
pub(super) struct Held<'a> {
    pub(super) buf: &'a mut BytesMut,
    pub(super) spill: &'a crate::core::spill::Spill,
    pub(super) unsent: &'a AtomicUsize,
}

/// Writes the spill, then `buf`, while staying responsive to wake-ups: a
/// client that does not read must still notice CLIENT KILL or an output
/// limit, and its unsent bytes are what the limit counts. Output others
/// queue meanwhile is appended to `buf`. With `input`, the socket is read
/// too, and complete requests end the write early.
pub(super) async fn write_out<S: Duplex>(
    sock: &mut S,
    out: Held<'_>,
    shared: &Shared,
    id: u64,
    wake: &crate::core::wake::Wake,
    mut input: Option<Input<'_>>,
) -> Written {
    let Held { buf, spill, unsent } = out;
    if !buf.is_empty() || !spill.is_empty() {
        crate::core::netstat::write_event();
    }
    let mut off = 0;
    let mut woken = false;
    let ok = loop {
        let queued = !spill.is_empty();
        if off == buf.len() && !queued && !sock.buffered() {
            break Written::All;
        }
        unsent.store(buf.len() - off, Ordering::Relaxed);
        let reading = input.is_some();
        tokio::select! {
            biased;
            r = sock.writable() => {
                let r = r.and_then(|()| if queued {
                    spill.write_with(|b| sock.try_write(b))
                } else {
                    sock.try_write(&buf[off..])
                });
                match r {
                    Ok(0) if queued || off < buf.len() => break Written::Closed,
                    Ok(n) if !queued => off += n,
                    Ok(_) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                        // The socket is full: large output waits as a list,
                        // its memory about its size.
                        if buf.len() - off >= SPILL_AT {
                            spill_unsent(spill, buf, &mut off);
                        }
                    }
                    Err(_) => break Written::Closed,
                }
            },
            r = sock.readable(), if reading => {
                let inp = input.as_mut().expect("reading");
                if inp.buf.capacity() - inp.buf.len() < READ_CHUNK / 4 {
                    inp.buf.reserve(READ_CHUNK);
                }
                match r.and_then(|()| sock.try_read_buf(inp.buf)) {
                    // The rest is written; the main loop sees the end.
                    Ok(0) => input = None,
                    Ok(n) => {
                        crate::core::netstat::read_event(n);
                        while inp.err.is_none() && inp.batch.len() < MAX_BATCH {
                            match inp.dec.decode(inp.buf) {
                                Ok(Some(args)) => inp.batch.push(args),
                                Ok(None) => break,
                                Err(e) => *inp.err = Some(e),
                            }
                        }
                        if !inp.batch.is_empty() || inp.err.is_some() {
                            break Written::Part(off);
                        }
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                    Err(_) => input = None,
                }
            },
            _ = wake.notified() => {
                woken = true;
                // A busy script holds the lock: the main loop collects the
                // output once it ends.
                let Some(mut st) = shared.lock_or_busy().await else {
                    continue;
                };
                match st.clients.get_mut(&id) {
                    Some(cl) if !cl.killed => {
                        if buf.len() - off + cl.pending.len() >= SPILL_AT {
                            // The socket is behind: the output waits as a
                            // list, freed at once if the client is evicted.
                            spill_unsent(spill, buf, &mut off);
                            spill.push(Bytes::copy_from_slice(&cl.pending));
                        } else {
                            buf.extend_from_slice(&cl.pending);
                        }
                        cl.pending.clear();
                        cl.pending_trim();
                        // Under the lock: a diskless sync's piece goes
                        // straight out only when nothing is unsent.
                        unsent.store(buf.len() - off, Ordering::Relaxed);
                    }
                    _ => break Written::Closed,
                }
            }
        }
    };
    unsent.store(0, Ordering::Relaxed);
    if woken {
        // The main loop may be waiting for this wake-up (a served blocked
        // client): hand it on.
        wake.notify_one();
    }
    ok
}

/// Moves what `buf` holds past `off` to the end of `spill`, and lets the
/// buffer go.
fn spill_unsent(spill: &crate::core::spill::Spill, buf: &mut BytesMut, off: &mut usize) {
    spill.push(Bytes::copy_from_slice(&buf[*off..]));
    *buf = BytesMut::new();
    *off = 0;
}
