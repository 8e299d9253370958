//! Replication, the replica's side: the link task that follows this
//! server's master (REPLICAOF). It connects, does the handshake (PING,
//! AUTH with `masteruser`/`masterauth`, REPLCONF listening-port and capa,
//! PSYNC with the replication ID and offset it has: [`super::handshake`]),
//! loads the master's RDB on a full resync ([`super::full_sync`]), then
//! applies the stream through the dispatcher as
//! the master's client (which read-only does not stop, and CLIENT PAUSE
//! WRITE holds back as Redis 7.0 does), acknowledging its offset every
//! second and on `REPLCONF GETACK`. A dropped link is retried
//! every second; a newer REPLICAOF stops the task. A writable replica
//! expires the keys with a TTL it wrote itself (Redis's
//! `slaveKeysWithExpire`): its master never sends DELs for them.

use super::handshake::handshake;
use super::link_state::{current, set_state};
use super::link_wire::{resp, REPL_TIMEOUT};
use crate::core::clock::now_ms;
use crate::state::repl::MasterState;
use crate::state::{Client, Shared, State};
use bytes::{BufMut, Bytes, BytesMut};
use protocol::{Decoder, ReplyBuf};
use std::io;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tracing::warn;

/// The server cron's part: the link task of a new REPLICAOF (or of
/// `replicaof` in the config, at start) is started here.
pub fn cron(shared: &Arc<Shared>, st: &mut State) {
    // The data on disk is loaded first, as Redis loads before it connects.
    if st.loading.is_some() {
        return;
    }
    if !st.repl.configured {
        st.repl.configured = true;
        let cfg = st.cfg.replicaof.clone();
        let mut words = cfg.split_whitespace();
        if let (Some(host), Some(Ok(port))) = (words.next(), words.next().map(str::parse)) {
            crate::state::master_link::set_master(st, host, port);
        }
        if let (Some(db), Some(m)) = (st.repl.resume_db.take(), st.repl.master.as_mut()) {
            m.db = db;
        }
    }
    if let Some(m) = st.repl.master.as_mut().filter(|m| !m.started) {
        m.started = true;
        let (host, port, gen) = (m.host.clone(), m.port, m.gen);
        tokio::spawn(run(shared.clone(), host, port, gen, m.ended.subscribe()));
    }
}

/// The link task of one REPLICAOF: it ends when its master is replaced or
/// removed, at once while it connects or waits in the handshake or the
/// transfer (`ended` closes: see [`sync`]).
async fn run(shared: Arc<Shared>, host: String, port: u16, gen: u64, mut ended: Ended) {
    loop {
        if !current(&*shared.lock_eventually().await, gen) {
            return;
        }
        let timeout = shared.lock_eventually().await.cfg.repl_timeout.max(1) as u64;
        let link = REPL_TIMEOUT.scope(
            Duration::from_secs(timeout),
            session(&shared, &host, port, gen, &mut ended),
        );
        if let Err(e) = link.await {
            warn!("Replication link to MASTER {host}:{port}: {e}");
        }
        set_state(
            &mut *shared.lock_eventually().await,
            gen,
            MasterState::Connect,
        );
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

async fn session(
    shared: &Arc<Shared>,
    host: &str,
    port: u16,
    gen: u64,
    ended: &mut Ended,
) -> io::Result<()> {
    set_state(
        &mut *shared.lock_eventually().await,
        gen,
        MasterState::Connecting,
    );
    let source = shared.lock_eventually().await.cfg.bind_source_addr.clone();
    let sock = tokio::select! {
        sock = connect(host, port, &source) => sock?,
        _ = ended.changed() => return Ok(()),
    };
    let _ = sock.set_nodelay(true);
    let addr = |a: io::Result<std::net::SocketAddr>| a.map(|a| a.to_string()).unwrap_or_default();
    use std::os::fd::AsRawFd;
    let ends = Ends {
        peer: addr(sock.peer_addr()),
        local: addr(sock.local_addr()),
        fd: sock.as_raw_fd(),
    };
    let tls = {
        let st = shared.lock_eventually().await;
        st.cfg
            .tls_replication
            .then(|| st.tls.get().map(|c| c.client.clone()))
    };
    match tls {
        None => sync(shared, sock, ends, gen, ended).await,
        Some(ctx) => {
            // tls-replication builds the contexts (`tls::wanted`).
            let ctx = ctx.ok_or_else(|| io::Error::other("no TLS context"))?;
            let name = rustls::pki_types::ServerName::try_from(host.to_string())
                .map_err(io::Error::other)?;
            let sock = tokio_rustls::TlsConnector::from(ctx)
                .connect(name, sock)
                .await?;
            sync(shared, sock, ends, gen, ended).await
        }
    }
}

/// Connects to the master from `source` (`bind-source-addr`) if that can
/// be bound, else from any address, as Redis's best-effort binding.
async fn connect(host: &str, port: u16, source: &str) -> io::Result<TcpStream> {
    let Ok(ip) = source.parse::<std::net::IpAddr>() else {
        return TcpStream::connect((host, port)).await;
    };
    let mut last = io::Error::other("could not resolve the master's address");
    for addr in tokio::net::lookup_host((host, port)).await? {
        let socket = || {
            if addr.is_ipv4() {
                tokio::net::TcpSocket::new_v4()
            } else {
                tokio::net::TcpSocket::new_v6()
            }
        };
        let s = socket()?;
        let s = match s.bind((ip, 0).into()) {
            Ok(()) => s,
            Err(_) => socket()?,
        };
        match s.connect(addr).await {
            Ok(sock) => return Ok(sock),
            Err(e) => last = e,
        }
    }
    Err(last)
}

/// The link's socket as CLIENT LIST shows the master's client.
struct Ends {
    peer: String,
    local: String,
    fd: i32,
}

/// Closes when this link's master is replaced or removed (its sender is
/// dropped with [`crate::state::repl::Master`]; nothing is ever sent).
type Ended = tokio::sync::watch::Receiver<()>;

/// The handshake, the RDB or the backlog, then the stream, over plain TCP
/// or TLS (`tls-replication`). A new REPLICAOF cuts the first part short,
/// as Redis cancels a handshake; not a load, which REPLICAOF waits for
/// (-LOADING).
async fn sync<S: AsyncRead + AsyncWrite + Unpin>(
    shared: &Arc<Shared>,
    mut sock: S,
    ends: Ends,
    gen: u64,
    ended: &mut Ended,
) -> io::Result<()> {
    let mut buf = BytesMut::new();
    let ready = tokio::select! {
        ready = handshake(shared, &mut sock, &mut buf, gen) => ready?,
        _ = ended.changed() => false,
    };
    if !ready {
        return Ok(());
    }
    set_state(
        &mut *shared.lock_eventually().await,
        gen,
        MasterState::Connected,
    );
    follow(shared, &mut sock, ends, buf, gen).await
}

/// Applies the master's stream until the link drops or REPLICAOF changes.
async fn follow<S: AsyncRead + AsyncWrite + Unpin>(
    shared: &Arc<Shared>,
    sock: &mut S,
    ends: Ends,
    buf: BytesMut,
    gen: u64,
) -> io::Result<()> {
    // The master's client is in the client list (flags=M) between
    // batches, where CLIENT KILL can end it.
    let (id, wake) = {
        let mut st = shared.lock_eventually().await;
        st.next_client_id += 1;
        let id = st.next_client_id - 1;
        let mut master = Client::new(id, ends.peer, ends.local, ends.fd, true);
        master.peer.master = true;
        master.user.name = "(superuser)".into();
        master.db = st.repl.master.as_ref().map_or(0, |m| m.db);
        let wake = master.wake.clone();
        st.clients.insert(id, Box::new(master));
        (id, wake)
    };
    let res = apply_stream(shared, sock, buf, gen, id, &wake).await;
    shared.lock_eventually().await.remove_client(id);
    res
}

async fn apply_stream<S: AsyncRead + AsyncWrite + Unpin>(
    shared: &Arc<Shared>,
    sock: &mut S,
    mut buf: BytesMut,
    gen: u64,
    id: u64,
    wake: &crate::core::wake::Wake,
) -> io::Result<()> {
    let mut dec = Decoder::new(protocol::DEFAULT_MAX_BULK);
    // The start of a command the decoder has taken but not completed: it
    // counts (and is relayed) with the command, once applied.
    let mut partial: Vec<u8> = Vec::new();
    // A command CLIENT PAUSE WRITE holds back, with its bytes: nothing
    // after it is applied (nor counted in the offset) until the pause
    // ends, as Redis postpones its master's client.
    let mut held: Option<(Vec<Bytes>, Vec<u8>)> = None;
    let mut ack_due = tokio::time::Instant::now();
    // Stream bytes read since the last batch (INFO's total_net_repl_input_bytes).
    let mut read_in = buf.len() as u64;
    loop {
        let mut acks: Vec<u64> = Vec::new();
        {
            let mut guard = shared.lock_eventually().await;
            let st = &mut *guard;
            if !current(st, gen) {
                return Ok(());
            }
            st.stats.net_repl_input_bytes += std::mem::take(&mut read_in);
            let Some(mut master) = st.clients.remove(&id).filter(|c| !c.killed) else {
                return Err(io::Error::other("the link was killed"));
            };
            st.tick(std::time::Instant::now());
            let mut out = ReplyBuf::new(false);
            let mut res = Ok(());
            let paused = |st: &State, master: &Client, args: &[Bytes]| {
                st.pause.is_some() && crate::cmd::pause::must_pause(st, master, args, now_ms())
            };
            // A large argument still arriving (the decoder made room for
            // it): nothing to decode, and copying what came so far for
            // every read made its arrival quadratic.
            let big = dec.reserved();
            let arriving = big > buf.len();
            if !arriving
                && !held
                    .as_ref()
                    .is_some_and(|(args, _)| paused(st, &master, args))
            {
                if let Some((args, raw)) = held.take() {
                    apply(st, &mut master, &mut out, &args, &mut acks);
                    st.repl.proxy(&raw);
                }
                // What the master sent, relayed as applied.
                let sent = buf.clone().freeze();
                let mut pos = 0;
                loop {
                    let before = buf.len();
                    let args: Vec<Bytes> = match dec.decode(&mut buf) {
                        Ok(Some(a)) => a,
                        Ok(None) => {
                            partial.extend_from_slice(&sent[pos..pos + before - buf.len()]);
                            break;
                        }
                        Err(e) => {
                            res = Err(io::Error::other(format!("protocol error from master: {e}")));
                            break;
                        }
                    };
                    let used = before - buf.len();
                    let raw = &sent[pos..pos + used];
                    pos += used;
                    if paused(st, &master, &args) {
                        partial.extend_from_slice(raw);
                        held = Some((args, std::mem::take(&mut partial)));
                        break;
                    }
                    apply(st, &mut master, &mut out, &args, &mut acks);
                    if !partial.is_empty() {
                        st.repl.proxy(&std::mem::take(&mut partial));
                    }
                    st.repl.proxy(raw);
                }
            }
            if big > 0 && dec.reserved() == 0 {
                // The large argument is applied: what follows it moves to a
                // buffer of its own, or its allocation would stay the read
                // buffer for the rest of the link.
                buf = BytesMut::from(&buf[..]);
            }
            master.last_interaction_ms = st.wall_ms();
            master.paused = held.is_some();
            if let Some(m) = st.repl.master.as_mut().filter(|m| m.gen == gen) {
                m.db = master.db;
                m.unapplied = (held.as_ref().map_or(0, |(_, raw)| raw.len())
                    + partial.len()
                    + buf.len()) as u64;
            }
            st.clients.insert(id, master);
            res?;
            if st.repl.undelivered() {
                st.repl_deliver();
            }
            if let Some(m) = st.repl.master.as_mut() {
                m.last_io_s = now_ms() / 1000;
            }
            if tokio::time::Instant::now() >= ack_due {
                acks.push(st.repl.offset);
            }
        }
        for off in acks {
            sock.write_all(&resp(&["REPLCONF", "ACK", &off.to_string()]))
                .await?;
            sock.flush().await?;
            ack_due = tokio::time::Instant::now() + Duration::from_secs(1);
        }
        // Other clients are served, and their replies written (the round
        // ends), between two batches, however much of the stream is waiting
        // (a master's backlog after a full sync): a batch is at most one
        // bounded read.
        crate::core::round::batch_ran();
        tokio::task::yield_now().await;
        // The decoder's room for a large argument is all it needs: more
        // would double the buffer the stored value keeps.
        if dec.reserved() == 0 {
            buf.reserve(STREAM_READ);
        }
        let mut room = (&mut buf).limit(STREAM_READ);
        tokio::select! {
            r = sock.read_buf(&mut room) => match r {
                Ok(0) => return Err(io::Error::other("the master closed the connection")),
                Ok(n) => read_in += n as u64,
                Err(e) => return Err(e),
            },
            _ = tokio::time::sleep_until(ack_due) => {}
            // CLIENT KILL: seen at the top of the loop.
            _ = wake.notified() => {}
            // The end of a pause holding a command back.
            _ = tokio::time::sleep(PAUSE_POLL), if held.is_some() => {}
        }
    }
}

/// The most of the master's stream one batch reads.
const STREAM_READ: usize = 64 * 1024;

/// How often a link held back by CLIENT PAUSE checks the pause again.
const PAUSE_POLL: Duration = Duration::from_millis(5);

/// Runs one command of the master's stream as its client; `REPLCONF
/// GETACK` asks for an ACK at the offset reached so far.
fn apply(
    st: &mut State,
    master: &mut Client,
    out: &mut ReplyBuf,
    args: &[Bytes],
    acks: &mut Vec<u64>,
) {
    if args.len() >= 2
        && args[0].eq_ignore_ascii_case(b"replconf")
        && args[1].eq_ignore_ascii_case(b"getack")
    {
        acks.push(st.repl.offset);
    } else if !args.is_empty() {
        st.repl.applying = true;
        crate::cmd::execute(st, master, out, args);
        st.repl.applying = false;
        crate::cmd::check_source_reply(st, &out.buf, args, false);
        out.buf.clear();
    }
}
