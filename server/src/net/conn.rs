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

use super::duplex::{write_out, Duplex, Held, Input, Written, MAX_BATCH, READ_CHUNK};
use crate::cmd::busy::BusyTx;
use crate::core::clock::now_ms;
use crate::state::{Client, Shared, State};
use bytes::{Buf, Bytes, BytesMut};
use protocol::{Decoder, ReplyBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// A connection's input or output buffer larger than this is freed once
/// empty.
const KEEP_BUF: usize = 64 * 1024;

/// The room a connection's output buffer starts with (`ReplyBuf::new`)
/// and is given back to once written.
const OUT_START: usize = 4096;

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

/// A client admitted: its id and the handles its task keeps.
struct Admitted {
    id: u64,
    wake: Arc<crate::core::wake::Wake>,
    unsent: Arc<AtomicUsize>,
    spill: Arc<crate::core::spill::Spill>,
    max_bulk: i64,
    timeout_s: i64,
    qbuf_limit: usize,
    authenticated: bool,
}

/// The client's admission: refused past `maxclients` or by protected
/// mode (the refusal written), or registered; while a busy script holds
/// the lock, its requests get -BUSY meanwhile.
async fn admit<S>(
    shared: &Shared,
    sock: &mut S,
    peer: &Peer,
    inbuf: &mut BytesMut,
    out: &mut ReplyBuf,
) -> Option<Admitted>
where
    S: AsyncRead + AsyncWrite + Unpin + std::os::fd::AsRawFd + Duplex,
{
    let fd = sock.as_raw_fd();
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
                    if !peer.unix && st.tun.tcp_keepalive > 0 {
                        crate::core::os::keepalive(fd, st.tun.tcp_keepalive);
                    }
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
                    Ok(Admitted {
                        id,
                        wake,
                        unsent,
                        spill,
                        max_bulk: st.tun.max_bulk,
                        timeout_s: st.tun.timeout_s,
                        qbuf_limit: st.tun.qbuf_limit,
                        authenticated: authed,
                    })
                }
            };
        }
        let mut dec = Decoder::new(protocol::DEFAULT_MAX_BULK);
        let mut batch = Vec::new();
        while let Ok(Some(args)) = dec.decode(inbuf) {
            batch.push(args);
        }
        busy_replies(shared, None, &mut batch, out, &mut BusyTx::default()).await;
        if !out.is_empty() {
            if sock.write_all(&out.buf).await.is_err() || sock.flush().await.is_err() {
                return None;
            }
            out.buf.clear();
        }
        tokio::select! {
            r = sock.read_buf(inbuf) => if matches!(r, Ok(0) | Err(_)) { return None },
            _ = tokio::time::sleep(Duration::from_millis(10)) => {}
        }
    };
    match admitted {
        Ok(a) => Some(a),
        Err(msg) => {
            if sock.write_all(msg.as_bytes()).await.is_ok() {
                let _ = sock.flush().await;
            }
            None
        }
    }
}

/// Writes the replies (once the round ends, if they may wait for it),
/// reading and running the client's next requests meanwhile while the
/// socket takes nothing. `Part`: the rest is still to be written.
async fn write_replies<S: Duplex>(
    sock: &mut S,
    shared: &Shared,
    c: &mut Conn,
    wake: &crate::core::wake::Wake,
    defer: bool,
    close: bool,
) -> Written {
    if defer {
        crate::core::round::after().await;
    }
    // While the socket takes nothing, the client's next requests
    // are read and run, as Redis does: its output keeps growing
    // toward its limits.
    let read = (c.blocked.is_none() && !c.paused && !close).then_some(Input {
        buf: &mut c.inbuf,
        dec: &mut c.dec,
        batch: &mut c.batch,
        err: &mut c.proto_err,
    });
    let held = Held {
        buf: &mut c.out.buf,
        spill: &c.spill,
        unsent: &c.unsent,
    };
    match write_out(sock, held, shared, c.id, wake, read).await {
        Written::All => {}
        Written::Part(off) => {
            compact_unsent(&mut c.out.buf, off);
            return Written::Part(off);
        }
        Written::Closed => return Written::Closed,
    }
    c.out.buf.clear();
    // Buffers grown for one big batch are given back: they count in
    // used_memory, and a pipelining client's idle megabyte was a
    // megabyte of keys evicted under maxmemory, and tracking
    // messages to ten clients kept 120 KB that evicted more keys.
    if c.out.buf.capacity() > OUT_START {
        c.out.buf = ReplyBuf::new(false).buf;
    }
    Written::All
}

/// Waits for the client's next input, output others queued for it, the
/// end of its blocking wait, or the end of the connection (closed, or idle
/// past `timeout`).
async fn wait_input<S: AsyncRead + Unpin>(
    sock: &mut S,
    c: &mut Conn,
    wake: &crate::core::wake::Wake,
) -> Event {
    // Idle clients are closed after `timeout` seconds; MONITOR and
    // blocked clients are exempt, as in Redis.
    let idle = (c.blocked.is_none() && c.timeout_s > 0 && !c.monitor)
        .then(|| Duration::from_secs(c.timeout_s as u64));
    // `read_buf` grows a full buffer by only 64 bytes: make room for a
    // real read (this also reclaims space consumed by earlier requests).
    if c.inbuf.capacity() - c.inbuf.len() < READ_CHUNK / 4 {
        c.inbuf.reserve(READ_CHUNK);
    }
    let read = sock.read_buf(&mut c.inbuf);
    tokio::select! {
        biased;
        _ = wake.notified() => Event::Wake,
        r = read => match r {
            Ok(0) | Err(_) => Event::Closed,
            Ok(n) => {
                c.read_peak = c.read_peak.max(c.inbuf.len());
                crate::core::netstat::read_event(n);
                Event::Read
            }
        },
        _ = sleep_until_ms(c.blocked.flatten()), if c.blocked.is_some() => Event::Deadline,
        _ = sleep_or_never(idle) => Event::Closed,
    }
}

/// Serves one connection, TCP or Unix socket alike.
/// A connection's state between two batches.
struct Conn {
    id: u64,
    inbuf: BytesMut,
    out: ReplyBuf,
    dec: Decoder,
    batch: Vec<Vec<Bytes>>,
    /// The most input buffered at once since the last batch.
    read_peak: usize,
    timeout_s: i64,
    /// `client-query-buffer-limit`.
    qbuf_limit: usize,
    /// MONITOR or a replica: exempt from the idle timeout.
    monitor: bool,
    /// Set when CLIENT PAUSE holds back the rest of the batch.
    paused: bool,
    /// Some(deadline) while the client waits in a blocking command: it then
    /// runs nothing, but the socket is still read to notice a disconnect.
    blocked: Option<Option<i64>>,
    /// A protocol error ends decoding; it is reported after the requests
    /// before it have run.
    proto_err: Option<protocol::ProtocolError>,
    busy_tx: BusyTx,
    unsent: Arc<AtomicUsize>,
    spill: Arc<crate::core::spill::Spill>,
}

impl Conn {
    /// Decodes the requests the input holds, up to a batch. Until AUTH
    /// succeeds, one at a time: the next one is decoded with the limits
    /// that apply after it.
    #[inline]
    fn decode_batch(&mut self) {
        let max_batch = if self.dec.unauthenticated {
            1
        } else {
            MAX_BATCH
        };
        while self.blocked.is_none() && self.proto_err.is_none() && self.batch.len() < max_batch {
            match self.dec.decode(&mut self.inbuf) {
                Ok(Some(args)) => self.batch.push(args),
                Ok(None) => break,
                Err(e) => {
                    self.proto_err = Some(e);
                    break;
                }
            }
        }
    }
}

/// What a pass under the lock leaves to the task.
#[derive(Default)]
struct Locked {
    close: bool,
    /// The replies may wait for the end of the round.
    defer: bool,
    /// A replica: its stream is pulled a piece per pass.
    replica: bool,
    aof_wait: Option<crate::state::aof::Durable>,
}

/// One pass under the state lock: the client's record taken out, output
/// others queued for it, a wait that ended, the batch, then the record's
/// figures and the round's bookkeeping. `None`: the client is gone.
// Inlined: it runs once a pass, and as a call of its own it cost PING
// about 40 instructions (callgrind) in moving the connection's state.
#[inline(always)]
fn under_lock(st: &mut State, c: &mut Conn, timed_out: bool) -> Option<Locked> {
    let mut self_evicted = false;
    st.tick(std::time::Instant::now());
    let woken = st.woken;
    let mut cl = st.clients.remove(&c.id)?;
    if cl.killed {
        st.clients.insert(c.id, cl);
        return None;
    }
    c.busy_tx.apply(st, &mut cl);
    let aof_mark = st.aof.offset;
    // Replies of earlier batches the socket has not taken yet: from
    // here they are counted in `out`, not as unsent.
    let carried = c.out.len();
    let mut spilled = 0;
    c.unsent.store(0, Ordering::Relaxed);
    let had_pending = !cl.pending.is_empty();
    if !cl.pending.is_empty() {
        c.out.buf.extend_from_slice(&cl.pending);
        cl.pending.clear();
        cl.pending_trim();
    }
    if c.blocked.is_some() && (cl.blocked.is_none() || timed_out) {
        // Served by another client's command (the reply was in
        // `pending`), or out of time.
        crate::cmd::blocking::unblock_timed_out(st, &mut cl, &mut c.out);
        c.blocked = None;
    }
    if c.blocked.is_none() {
        let ran = crate::cmd::batch::run(
            st,
            &mut cl,
            &mut c.out,
            &mut c.batch,
            &c.spill,
            &c.unsent,
            OUT_START,
        );
        c.paused = ran.paused;
        c.blocked = ran.blocked;
        self_evicted = ran.self_evicted;
        spilled = ran.spilled;
        if let Some(e) = c.proto_err.as_ref().filter(|_| c.batch.is_empty()) {
            c.out.error(&format!("ERR {e}"));
            cl.close_after_reply = true;
        }
    }
    let replica = cl.peer.replica;
    if replica {
        st.repl_pull(&mut cl, &mut c.out.buf);
    }
    cl.last_interaction_ms = st.wall_ms();
    cl.qbuf = c.inbuf.len();
    cl.qbuf_alloc = c.dec.reserved();
    cl.argv_pending = if c.dec.in_progress() {
        c.dec.partial_len()
    } else {
        0
    };
    cl.input_peak = cl
        .input_peak
        .max(std::mem::take(&mut c.read_peak) + cl.qbuf_alloc);
    let produced = c.out.len() + spilled - carried;
    // A replica's output is its sync and the stream (counted as
    // it is queued), as Redis counts neither here.
    if !replica {
        st.stats.net_output_bytes += produced as u64;
    }
    cl.rbuf.used(produced);
    // The replies count as the client's output until written.
    c.unsent.store(c.out.len(), Ordering::Relaxed);
    c.timeout_s = st.tun.timeout_s;
    c.qbuf_limit = st.tun.qbuf_limit;
    c.monitor = cl.monitor || cl.peer.replica;
    c.busy_tx.in_multi = cl.multi.is_some();
    c.dec.unauthenticated = !cl.authenticated;
    let close = cl.close_after_reply;
    // Replies wait for the end of the round (see `round`), except
    // after a batch that woke other connections (PUBLISH): their
    // writes already form the burst, and holding the publisher back
    // only made subscribers flush smaller batches (fan-out to 100
    // subscribers: 1.5 -> 0.8 of Redis). Nor does output others
    // queued for this client wait (tracking messages after an
    // eviction round): Redis writes it before it reads the next
    // command, so that command's eviction check does not count it.
    let defer = st.woken == woken && !had_pending;
    st.clients.insert(c.id, cl);
    // Evicted by its own command: no reply.
    if self_evicted {
        st.remove_client(c.id);
    }
    let evicted = self_evicted || st.evict_clients() && !st.clients.contains_key(&c.id);
    if evicted {
        c.out.buf.clear();
    }
    let aof_wait = st.aof.commit(aof_mark, had_pending);
    Some(Locked {
        close: close || evicted,
        defer,
        replica,
        aof_wait,
    })
}

pub async fn serve<S>(shared: Arc<Shared>, mut sock: S, peer: Peer)
where
    S: AsyncRead + AsyncWrite + Unpin + std::os::fd::AsRawFd + Duplex,
{
    let fd = sock.as_raw_fd();
    let mut inbuf = BytesMut::with_capacity(READ_CHUNK);
    let mut out = ReplyBuf::new(false);
    let Some(Admitted {
        id,
        wake,
        unsent,
        spill,
        max_bulk,
        timeout_s,
        qbuf_limit,
        authenticated,
    }) = admit(&shared, &mut sock, &peer, &mut inbuf, &mut out).await
    else {
        return;
    };
    let outbox = crate::core::round::Outbox::new(fd, wake.clone(), unsent.clone());
    sock.attach(&outbox);
    let mut dec = Decoder::new(max_bulk);
    dec.unauthenticated = !authenticated;
    let mut c = Conn {
        id,
        inbuf,
        out,
        dec,
        batch: Vec::new(),
        read_peak: 0,
        timeout_s,
        qbuf_limit,
        monitor: false,
        paused: false,
        blocked: None,
        proto_err: None,
        busy_tx: BusyTx::default(),
        unsent: unsent.clone(),
        spill: spill.clone(),
    };
    // Input arrived that client eviction has not seen.
    let mut unreported = false;
    loop {
        c.decode_batch();
        if std::mem::take(&mut unreported) && !account_input(&shared, &c).await {
            break;
        }
        let mut timed_out = false;
        if c.paused {
            // Poll the pause; wake early for output others produce for us.
            tokio::select! {
                biased;
                _ = wake.notified() => {}
                _ = tokio::time::sleep(PAUSE_POLL) => {}
            }
        } else if c.blocked.is_some() || (c.batch.is_empty() && c.proto_err.is_none()) {
            match wait_input(&mut sock, &mut c, &wake).await {
                Event::Read => {
                    unreported = true;
                    continue;
                }
                Event::Deadline => timed_out = true,
                Event::Wake => {}
                Event::Closed => break,
            }
        }
        // Replies still in the outbox go out ahead of this batch's (and
        // count as unsent meanwhile).
        let stalled = sock.reclaim(&outbox, &mut c.out.buf);
        let l = if let Some(mut guard) = shared.lock_or_busy().await {
            match under_lock(&mut guard, &mut c, timed_out) {
                Some(l) => l,
                None => break,
            }
        } else {
            if c.blocked.is_none() {
                busy_replies(
                    &shared,
                    Some(c.id),
                    &mut c.batch,
                    &mut c.out,
                    &mut c.busy_tx,
                )
                .await;
            }
            Locked::default()
        };
        let Locked {
            close,
            mut defer,
            replica,
            aof_wait,
        } = l;
        crate::core::round::batch_ran();
        if let Some(d) = aof_wait {
            // It waits for the end of the round too.
            crate::state::aof::wait_durable(&shared, d).await;
            defer = false;
        }
        // Only when the task will next wait for input: otherwise it would
        // run on, and its output wait, until the round ends.
        let idle = c.batch.is_empty() && !wake.is_set();
        let small = (1..=crate::core::round::OUTBOX_MAX).contains(&c.out.len());
        let queued = !c.spill.is_empty();
        if defer
            && idle
            && small
            && !close
            && !stalled
            && !replica
            && !queued
            && sock.seal(&mut c.out.buf)
        {
            outbox.put(&mut c.out.buf);
        }
        // (Records a TLS stream took back may wait with no new output.)
        if !c.out.is_empty() || queued || sock.buffered() {
            match write_replies(&mut sock, &shared, &mut c, &wake, defer, close).await {
                Written::All => {}
                Written::Closed => break,
                Written::Part(_) => continue,
            }
        }
        if c.inbuf.is_empty() && c.inbuf.capacity() > KEEP_BUF {
            c.inbuf = BytesMut::with_capacity(READ_CHUNK);
        }
        if close {
            break;
        }
    }
    // A client that sent its last request and closed its side still gets
    // the replies in the outbox, if the socket takes them now.
    c.out.buf.clear();
    sock.reclaim(&outbox, &mut c.out.buf);
    outbox.close();
    if !c.out.is_empty() || sock.buffered() {
        let _ = sock.try_write(&c.out.buf);
    }
    // A busy script may be waiting for this client to leave (INFO's
    // connected_slaves in a loop).
    shared.with_state(move |st| st.remove_client(c.id)).await;
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

/// After a read: the input not yet decoded is the request still
/// arriving (a read adds at most a chunk of whole ones), and past
/// `client-query-buffer-limit` the client goes, as in Redis; a large one
/// counts toward client memory now. False: the connection ends.
async fn account_input(shared: &Shared, c: &Conn) -> bool {
    if c.inbuf.len() > c.qbuf_limit {
        log_query_limit(shared, c.id, &c.inbuf).await;
        return false;
    }
    let large =
        c.inbuf.capacity() > KEEP_BUF || c.dec.in_progress() && c.dec.partial_len() > KEEP_BUF;
    !(c.batch.is_empty() && large) || report_input(shared, c.id, &c.inbuf, &c.dec).await
}

/// Logs the closing of a client past `client-query-buffer-limit` as Redis
/// does: its CLIENT LIST line and the buffer's first bytes.
async fn log_query_limit(shared: &Shared, id: u64, inbuf: &BytesMut) {
    let Some(mut st) = shared.lock_or_busy().await else {
        return;
    };
    let now = st.wall_ms();
    let Some(cl) = st.clients.get_mut(&id) else {
        return;
    };
    cl.qbuf = inbuf.len();
    let first = protocol::repr(&inbuf[..inbuf.len().min(64)]);
    tracing::warn!(
        "Closing client that reached max query buffer length: {} (qbuf initial bytes: {first})",
        cl.line(now, None)
    );
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
    cl.input_peak = cl.input_peak.max(cl.qbuf + cl.qbuf_alloc);
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

enum Event {
    /// The peer closed, or the client was idle past `timeout`.
    Closed,
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
