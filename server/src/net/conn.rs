//! One task per client connection.
//!
//! The loop: read what the socket has, decode every complete request (up to
//! a bounded batch, for fairness), take the state lock once, execute the
//! batch, release the lock, write all replies with one write. Output other
//! clients produced for this one (MONITOR, pub/sub, unblocking) sits in
//! `Client::pending` and is flushed when the task is woken. While the socket
//! takes no more output, the client's next requests are still read and run
//! (their replies queue behind), so a client that does not read grows its
//! output toward its limits and client eviction, as in Redis.

use crate::cmd::busy::BusyTx;
use crate::cmd::execute_owned;
use crate::core::clock::now_ms;
use crate::state::{Client, Shared};
use bytes::{Buf, Bytes, BytesMut};
use protocol::{Decoder, ReplyBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// Bytes a socket read asks for at least.
const READ_CHUNK: usize = 16 * 1024;

/// A connection's input or output buffer larger than this is freed once
/// empty.
const KEEP_BUF: usize = 64 * 1024;

/// The room a connection's output buffer starts with (`ReplyBuf::new`)
/// and is given back to once written.
const OUT_START: usize = 4096;

/// Output a batch adds between two client eviction checks: Redis's reply
/// block.
const EVICT_STEP: usize = 16 * 1024;

/// Output past this much, in a batch or left unwritten, is held in the
/// client's `spill`.
const SPILL_AT: usize = 64 * 1024;

/// Requests executed per lock acquisition at most.
const MAX_BATCH: usize = 256;

/// How often a client held back by CLIENT PAUSE checks the pause again.
const PAUSE_POLL: Duration = Duration::from_millis(5);

const DENIED: &str = "-DENIED Redis is running in protected mode because protected mode is enabled and no password is set for the default user. In this mode connections are only accepted from the loopback interface. If you want to connect from external computers to Redis you may adopt one of the following solutions: 1) Just disable protected mode sending the command 'CONFIG SET protected-mode no' from the loopback interface by connecting to Redis from the same host the server is running, however MAKE SURE Redis is not publicly accessible from internet if you do so. Use CONFIG REWRITE to make this change permanent. 2) Alternatively you can just disable the protected mode by editing the Redis configuration file, and setting the protected mode option to 'no', and then restarting the server. 3) If you started the server manually just for testing, restart it with the '--protected-mode no' option. 4) Set up an authentication password for the default user. NOTE: You only need to do one of the above things in order for the server to start accepting connections from the outside.\r\n";

/// Where a connection comes from, as CLIENT LIST shows it.
pub struct Peer {
    pub addr: String,
    pub laddr: String,
    /// From this host: loopback TCP or the Unix socket (protected mode
    /// lets it in).
    pub local: bool,
    pub unix: bool,
}

/// Serves one connection, TCP or Unix socket alike.
pub async fn serve<S>(shared: Arc<Shared>, mut sock: S, peer: Peer)
where
    S: AsyncRead + AsyncWrite + Unpin + std::os::fd::AsRawFd + Duplex,
{
    let fd = sock.as_raw_fd();
    let mut inbuf = BytesMut::with_capacity(READ_CHUNK);
    let mut out = ReplyBuf::new(false);
    // A script past busy-reply-threshold holds the lock: a new connection
    // is still served, with -BUSY (or SCRIPT KILL), until it ends.
    let admitted = loop {
        if let Some(mut st) = shared.lock_or_busy().await {
            break {
                st.stats.total_connections += 1;
                if st.clients.len() >= st.tun.maxclients {
                    st.stats.rejected_connections += 1;
                    Err("-ERR max number of clients reached\r\n")
                } else if st.tun.protected_mode && !st.acl.auth_required() && !peer.local {
                    Err(DENIED)
                } else {
                    let id = st.next_client_id;
                    st.next_client_id += 1;
                    let authed = !st.acl.auth_required();
                    let mut c = Client::new(id, peer.addr.clone(), peer.laddr.clone(), fd, authed);
                    c.unix = peer.unix;
                    c.tls = sock.is_tls();
                    let wake = c.wake.clone();
                    let unsent = c.out_unsent.clone();
                    let spill = c.spill.clone();
                    st.clients.insert(id, Box::new(c));
                    Ok((
                        id,
                        wake,
                        unsent,
                        spill,
                        st.tun.max_bulk,
                        st.tun.timeout_s,
                        authed,
                    ))
                }
            };
        }
        let mut dec = Decoder::new(protocol::DEFAULT_MAX_BULK);
        let mut batch = Vec::new();
        while let Ok(Some(args)) = dec.decode(&mut inbuf) {
            batch.push(args);
        }
        busy_replies(&shared, None, &mut batch, &mut out, &mut BusyTx::default()).await;
        if !out.is_empty() {
            if sock.write_all(&out.buf).await.is_err() || sock.flush().await.is_err() {
                return;
            }
            out.buf.clear();
        }
        tokio::select! {
            r = sock.read_buf(&mut inbuf) => if matches!(r, Ok(0) | Err(_)) { return },
            _ = tokio::time::sleep(Duration::from_millis(10)) => {}
        }
    };
    let (id, wake, unsent, spill, max_bulk, timeout_s, authenticated) = match admitted {
        Ok(x) => x,
        Err(msg) => {
            if sock.write_all(msg.as_bytes()).await.is_ok() {
                let _ = sock.flush().await;
            }
            return;
        }
    };

    let outbox = crate::core::round::Outbox::new(fd, wake.clone(), unsent.clone());
    sock.attach(&outbox);
    let mut dec = Decoder::new(max_bulk);
    dec.unauthenticated = !authenticated;
    let mut batch: Vec<Vec<Bytes>> = Vec::new();
    let mut bytes_in = 0u64;
    let mut timeout_s = timeout_s;
    let mut monitor = false;
    // Set when CLIENT PAUSE holds back the rest of the batch.
    let mut paused = false;
    // Some(deadline) while the client waits in a blocking command: it then
    // runs nothing, but the socket is still read to notice a disconnect.
    let mut blocked: Option<Option<i64>> = None;
    // A protocol error ends decoding; it is reported after the requests
    // before it have run.
    let mut proto_err = None;
    let mut busy_tx = BusyTx::default();
    // Input arrived that client eviction has not seen.
    let mut unreported = false;
    loop {
        // Until AUTH succeeds, one request at a time: the next one is decoded
        // with the limits that apply after it.
        let max_batch = if dec.unauthenticated { 1 } else { MAX_BATCH };
        while blocked.is_none() && proto_err.is_none() && batch.len() < max_batch {
            match dec.decode(&mut inbuf) {
                Ok(Some(args)) => batch.push(args),
                Ok(None) => break,
                Err(e) => {
                    proto_err = Some(e);
                    break;
                }
            }
        }
        // A large request still arriving counts toward client memory now.
        if std::mem::take(&mut unreported)
            && batch.is_empty()
            && (inbuf.capacity() > KEEP_BUF || dec.in_progress() && dec.partial_len() > KEEP_BUF)
            && !report_input(&shared, id, &inbuf, &dec).await
        {
            break;
        }
        let mut timed_out = false;
        if paused {
            // Poll the pause; wake early for output others produce for us.
            tokio::select! {
                biased;
                _ = wake.notified() => {}
                _ = tokio::time::sleep(PAUSE_POLL) => {}
            }
        } else if blocked.is_some() || (batch.is_empty() && proto_err.is_none()) {
            // Idle clients are closed after `timeout` seconds; MONITOR and
            // blocked clients are exempt, as in Redis.
            let idle = (blocked.is_none() && timeout_s > 0 && !monitor)
                .then(|| Duration::from_secs(timeout_s as u64));
            // `read_buf` grows a full buffer by only 64 bytes: make room for a
            // real read (this also reclaims space consumed by earlier requests).
            if inbuf.capacity() - inbuf.len() < READ_CHUNK / 4 {
                inbuf.reserve(READ_CHUNK);
            }
            let read = sock.read_buf(&mut inbuf);
            let event = tokio::select! {
                biased;
                _ = wake.notified() => Event::Wake,
                r = read => match r {
                    Ok(0) | Err(_) => break,
                    Ok(n) => { bytes_in += n as u64; Event::Read }
                },
                _ = sleep_until_ms(blocked.flatten()), if blocked.is_some() => Event::Deadline,
                _ = sleep_or_never(idle) => break,
            };
            match event {
                Event::Read => {
                    unreported = true;
                    continue;
                }
                Event::Deadline => timed_out = true,
                Event::Wake => {}
            }
        }
        // Replies still in the outbox go out ahead of this batch's (and
        // count as unsent meanwhile).
        let stalled = sock.reclaim(&outbox, &mut out.buf);
        let guard = shared.lock_or_busy().await;
        let mut defer = false;
        // A replica's stream is pulled a piece per pass, and the task wakes
        // itself for the next: its output is written by itself.
        let mut replica = false;
        let mut aof_wait = None;
        let mut self_evicted = false;
        let close = if let Some(mut guard) = guard {
            let st = &mut *guard;
            st.tick(std::time::Instant::now());
            let woken = st.woken;
            let Some(mut cl) = st.clients.remove(&id) else {
                break;
            };
            if cl.killed {
                st.clients.insert(id, cl);
                break;
            }
            busy_tx.apply(st, &mut cl);
            st.stats.net_input_bytes += std::mem::take(&mut bytes_in);
            let aof_mark = st.aof.offset;
            // Replies of earlier batches the socket has not taken yet: from
            // here they are counted in `out`, not as unsent.
            let carried = out.len();
            let mut spilled = 0;
            unsent.store(0, Ordering::Relaxed);
            let had_pending = !cl.pending.is_empty();
            if !cl.pending.is_empty() {
                out.buf.extend_from_slice(&cl.pending);
                cl.pending.clear();
                cl.pending_trim();
            }
            if blocked.is_some() && (cl.blocked.is_none() || timed_out) {
                // Served by another client's command (the reply was in
                // `pending`), or out of time.
                crate::cmd::blocking::unblock_timed_out(st, &mut cl, &mut out);
                blocked = None;
            }
            if blocked.is_none() {
                let mut done = 0;
                paused = false;
                out.cap = crate::state::pubsub::hard_limit(&cl, &st.tun.obuf_limits);
                let weigh = st.cfg.maxmemory_clients.bytes(st.cfg.maxmemory) > 0;
                let mut weighed = out.len() + spill.len();
                for args in batch.iter_mut() {
                    if st.pause.is_some() && crate::cmd::pause::must_pause(st, &cl, args, now_ms())
                    {
                        paused = true;
                        break;
                    }
                    execute_owned(st, &mut cl, &mut out, args);
                    done += 1;
                    // Large output is held as a list (`spill`) of copies
                    // sized to it: the buffer, grown by doubling, may be
                    // twice its size, and is reused for the next replies.
                    if out.len() >= SPILL_AT {
                        spilled += out.len();
                        spill.push(Bytes::copy_from_slice(&out.buf));
                        out.buf.clear();
                    }
                    // Past its output limit the client gets nothing more and
                    // the rest of its pipeline is not run, as in Redis.
                    if crate::state::pubsub::close_if_over_limit(
                        &mut cl,
                        &st.tun.obuf_limits,
                        out.len(),
                    ) {
                        out.buf.clear();
                        spill.clear();
                        cl.close_after_reply = true;
                        done = batch.len();
                        break;
                    }
                    // Client eviction weighs the output as it grows, as
                    // Redis does before each command: the clients go
                    // before the next command evicts keys for them.
                    if weigh && out.len() + spill.len() >= weighed + EVICT_STEP {
                        weighed = out.len() + spill.len();
                        unsent.store(out.len(), Ordering::Relaxed);
                        let gone = st.evict_clients_with(Some(&cl));
                        unsent.store(0, Ordering::Relaxed);
                        if gone {
                            self_evicted = true;
                            done = batch.len();
                            break;
                        }
                    }
                    if let Some(b) = &cl.blocked {
                        blocked = Some(b.deadline);
                        break;
                    }
                    if cl.close_after_reply || st.shutdown.is_some() {
                        done = batch.len();
                        break;
                    }
                }
                batch.drain(..done);
                // The buffer grown for the spilled replies is not held
                // while the socket takes them.
                if spilled > 0 && out.buf.capacity() > OUT_START {
                    spilled += out.len();
                    spill.push(Bytes::copy_from_slice(&out.buf));
                    out.buf = ReplyBuf::new(false).buf;
                }
                cl.paused = paused;
                if let Some(e) = proto_err.as_ref().filter(|_| batch.is_empty()) {
                    out.error(&format!("ERR {e}"));
                    cl.close_after_reply = true;
                }
            }
            replica = cl.peer.replica;
            if replica {
                st.repl_pull(&mut cl, &mut out.buf);
            }
            cl.last_interaction_ms = st.wall_ms();
            cl.qbuf = inbuf.len();
            cl.qbuf_alloc = dec.reserved();
            cl.argv_pending = if dec.in_progress() {
                dec.partial_len()
            } else {
                0
            };
            let produced = out.len() + spilled - carried;
            // A replica's output is its sync and the stream (counted as
            // it is queued), as Redis counts neither here.
            if !replica {
                st.stats.net_output_bytes += produced as u64;
            }
            cl.rbuf.used(produced);
            // The replies count as the client's output until written.
            unsent.store(out.len(), Ordering::Relaxed);
            timeout_s = st.tun.timeout_s;
            monitor = cl.monitor || cl.peer.replica;
            busy_tx.in_multi = cl.multi.is_some();
            dec.unauthenticated = !cl.authenticated;
            let close = cl.close_after_reply;
            // Replies wait for the end of the round (see `round`), except
            // after a batch that woke other connections (PUBLISH): their
            // writes already form the burst, and holding the publisher back
            // only made subscribers flush smaller batches (fan-out to 100
            // subscribers: 1.5 -> 0.8 of Redis). Nor does output others
            // queued for this client wait (tracking messages after an
            // eviction round): Redis writes it before it reads the next
            // command, so that command's eviction check does not count it.
            defer = st.woken == woken && !had_pending;
            st.clients.insert(id, cl);
            // Evicted by its own command: no reply.
            if self_evicted {
                st.remove_client(id);
            }
            let evicted = self_evicted || st.evict_clients() && !st.clients.contains_key(&id);
            if evicted {
                out.buf.clear();
            }
            aof_wait = st.aof.commit(aof_mark, had_pending);
            close || evicted
        } else {
            if blocked.is_none() {
                busy_replies(&shared, Some(id), &mut batch, &mut out, &mut busy_tx).await;
            }
            false
        };
        crate::core::round::batch_ran();
        if let Some(d) = aof_wait {
            // It waits for the end of the round too.
            crate::state::aof::wait_durable(&shared, d).await;
            defer = false;
        }
        // Only when the task will next wait for input: otherwise it would
        // run on, and its output wait, until the round ends.
        let idle = batch.is_empty() && !wake.is_set();
        let small = (1..=crate::core::round::OUTBOX_MAX).contains(&out.len());
        let queued = !spill.is_empty();
        if defer
            && idle
            && small
            && !close
            && !stalled
            && !replica
            && !queued
            && sock.seal(&mut out.buf)
        {
            outbox.put(&mut out.buf);
        }
        // (Records a TLS stream took back may wait with no new output.)
        if !out.is_empty() || queued || sock.buffered() {
            if defer {
                crate::core::round::after().await;
            }
            // While the socket takes nothing, the client's next requests
            // are read and run, as Redis does: its output keeps growing
            // toward its limits.
            let read = (blocked.is_none() && !paused && !close).then_some(Input {
                buf: &mut inbuf,
                dec: &mut dec,
                batch: &mut batch,
                err: &mut proto_err,
                bytes: &mut bytes_in,
            });
            let held = Held {
                buf: &mut out.buf,
                spill: &spill,
                unsent: &unsent,
            };
            match write_out(&mut sock, held, &shared, id, &wake, read).await {
                Written::All => {}
                Written::Closed => break,
                Written::Part(off) => {
                    compact_unsent(&mut out.buf, off);
                    continue;
                }
            }
            out.buf.clear();
            // Buffers grown for one big batch are given back: they count in
            // used_memory, and a pipelining client's idle megabyte was a
            // megabyte of keys evicted under maxmemory, and tracking
            // messages to ten clients kept 120 KB that evicted more keys.
            if out.buf.capacity() > OUT_START {
                out.buf = ReplyBuf::new(false).buf;
            }
        }
        if inbuf.is_empty() && inbuf.capacity() > KEEP_BUF {
            inbuf = BytesMut::with_capacity(READ_CHUNK);
        }
        if close {
            break;
        }
    }
    // A client that sent its last request and closed its side still gets
    // the replies in the outbox, if the socket takes them now.
    out.buf.clear();
    sock.reclaim(&outbox, &mut out.buf);
    outbox.close();
    if !out.is_empty() || sock.buffered() {
        let _ = sock.try_write(&out.buf);
    }
    // A busy script may be waiting for this client to leave (INFO's
    // connected_slaves in a loop).
    shared.with_state(move |st| st.remove_client(id)).await;
}

/// Drops the `off` bytes written from output the socket has not taken.
/// A buffer mostly empty room (grown by doubling for a slow reader) is
/// copied to one sized to the rest plus a quarter: unsent output costs
/// about its size in `used_memory`, as Redis's reply list, so client
/// eviction (which weighs `omem`) comes before key eviction. The quarter
/// keeps copies rare: one per quarter of the rest written or added.
fn compact_unsent(buf: &mut BytesMut, off: usize) {
    let rest = buf.len() - off;
    if buf.capacity() > rest + rest / 2 + READ_CHUNK {
        let mut b = BytesMut::with_capacity(rest + rest / 4 + READ_CHUNK);
        b.extend_from_slice(&buf[off..]);
        *buf = b;
    } else {
        buf.advance(off);
    }
}

/// Shows input not yet runnable (a large request arriving) in the
/// client's CLIENT LIST fields and lets client eviction weigh it. False
/// when the client is gone.
async fn report_input(shared: &Shared, id: u64, inbuf: &BytesMut, dec: &Decoder) -> bool {
    // A busy script holds the lock: the next batch reports it.
    let Some(mut st) = shared.lock_or_busy().await else {
        return true;
    };
    let Some(cl) = st.clients.get_mut(&id) else {
        return false;
    };
    cl.qbuf = inbuf.len();
    cl.qbuf_alloc = dec.reserved();
    cl.argv_pending = dec.partial_len();
    st.evict_clients();
    st.clients.contains_key(&id)
}

/// Answers requests while a script is busy: SCRIPT KILL and FUNCTION KILL
/// act on it, FUNCTION STATS shows a running function, SHUTDOWN NOSAVE
/// exits, the other commands Redis allows then run for client `id` (on
/// the script's thread), EXEC goes through `tx`, anything else is refused
/// with -BUSY.
async fn busy_replies(
    shared: &Shared,
    id: Option<u64>,
    batch: &mut Vec<Vec<Bytes>>,
    out: &mut ReplyBuf,
    tx: &mut BusyTx,
) {
    use crate::cmd::busy::{busy_error, busy_function_stats, kill_running};
    let run = &shared.script;
    for args in batch.drain(..) {
        let is = |i: usize, w: &str| {
            args.get(i)
                .is_some_and(|a| a.eq_ignore_ascii_case(w.as_bytes()))
        };
        // A script replayed from the AOF: the dataset is still loading,
        // which is what a command that may not run then is told first.
        let ok_loading = crate::cmd::lookup(&args[0])
            .is_some_and(|c| c.has(crate::core::command::flags::LOADING));
        if run
            .dataset_loading
            .load(std::sync::atomic::Ordering::Relaxed)
            && !ok_loading
        {
            out.error(crate::cmd::LOADING);
            continue;
        }
        let r = if args.len() == 2 && is(0, "script") && is(1, "kill") {
            kill_running(run, false).map_err(String::from)
        } else if args.len() == 2 && is(0, "function") && is(1, "kill") {
            kill_running(run, true).map_err(String::from)
        } else if args.len() == 2 && is(0, "function") && is(1, "stats") {
            if let Err(e) = busy_function_stats(run, out) {
                out.error(e);
            }
            continue;
        } else if is(0, "shutdown") && args[1..].iter().any(|a| a.eq_ignore_ascii_case(b"nosave")) {
            tracing::warn!("User requested shutdown while a script was busy, exiting now.");
            crate::core::listening::stop_listening();
            std::process::exit(0);
        } else if let Some(id) = id.filter(|_| crate::cmd::busy::runs_while_busy(&args)) {
            let reply = crate::cmd::busy::busy_call(shared, id, args, tx).await;
            out.buf.extend_from_slice(&reply);
            continue;
        } else {
            let busy = busy_error(run.function.load(std::sync::atomic::Ordering::Relaxed));
            tx.answer(&args, busy)
        };
        match r {
            Ok(()) => out.ok(),
            Err(e) => out.error(&e),
        }
    }
}

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
struct Input<'a> {
    buf: &'a mut BytesMut,
    dec: &'a mut Decoder,
    batch: &'a mut Vec<Vec<Bytes>>,
    err: &'a mut Option<protocol::ProtocolError>,
    bytes: &'a mut u64,
}

enum Written {
    All,
    Closed,
    /// Stopped after this many bytes: requests arrived to run.
    Part(usize),
}

/// A connection's output: its buffer, the larger output held before it,
/// and the gauge of the buffer's unsent bytes (`Client::out_unsent`).
struct Held<'a> {
    buf: &'a mut BytesMut,
    spill: &'a crate::core::spill::Spill,
    unsent: &'a AtomicUsize,
}

/// Writes the spill, then `buf`, while staying responsive to wake-ups: a
/// client that does not read must still notice CLIENT KILL or an output
/// limit, and its unsent bytes are what the limit counts. Output others
/// queue meanwhile is appended to `buf`. With `input`, the socket is read
/// too, and complete requests end the write early.
async fn write_out<S: Duplex>(
    sock: &mut S,
    out: Held<'_>,
    shared: &Shared,
    id: u64,
    wake: &crate::core::wake::Wake,
    mut input: Option<Input<'_>>,
) -> Written {
    let Held { buf, spill, unsent } = out;
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
                        *inp.bytes += n as u64;
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

enum Event {
    Wake,
    Read,
    Deadline,
}

async fn sleep_until_ms(deadline: Option<i64>) {
    match deadline {
        Some(t) => tokio::time::sleep(Duration::from_millis((t - now_ms()).max(0) as u64)).await,
        None => std::future::pending().await,
    }
}

async fn sleep_or_never(d: Option<Duration>) {
    match d {
        Some(d) => tokio::time::sleep(d).await,
        None => std::future::pending().await,
    }
}
