//! Replication, the replica's side: the link task that follows this
//! server's master (REPLICAOF). It connects, does the handshake (PING,
//! AUTH with `masteruser`/`masterauth`, REPLCONF listening-port and capa,
//! PSYNC with the replication ID and offset it has), loads the master's
//! RDB on a full resync, then applies the stream through the dispatcher as
//! the master's client (which read-only does not stop, and CLIENT PAUSE
//! WRITE holds back as Redis 7.0 does), acknowledging its offset every
//! second and on `REPLCONF GETACK`. A dropped link is retried
//! every second; a newer REPLICAOF stops the task. A writable replica
//! expires the keys with a TTL it wrote itself (Redis's
//! `slaveKeysWithExpire`): its master never sends DELs for them.

use crate::core::clock::now_ms;
use crate::state::persist::{LoadOpts, LoadProgress, Loading};
use crate::state::repl::{MasterState, Received, Transfer};
use crate::state::{Client, Shared, State};
use bytes::{Buf, BufMut, Bytes, BytesMut};
use protocol::{Decoder, ReplyBuf};
use std::io::{self, Read, Write};
use std::path::Path;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::Duration;
use storage::rdb::{Input, LoadError, LoadSummary};
use storage::Db;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::mpsc;
use tracing::{info, warn};

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

fn drop_replicas(st: &mut State) {
    let ids: Vec<u64> = st.repl.replicas.iter().map(|r| r.id).collect();
    for id in ids {
        st.kill_client(id);
    }
}

fn current(st: &State, gen: u64) -> bool {
    st.repl.master.as_ref().is_some_and(|m| m.gen == gen)
}

fn set_state(st: &mut State, gen: u64, s: MasterState) {
    if let Some(m) = st.repl.master.as_mut().filter(|m| m.gen == gen) {
        let now_s = now_ms() / 1000;
        if s != MasterState::Connected && m.state == MasterState::Connected {
            m.down_since_s = now_s;
        }
        m.state = s;
        m.last_io_s = now_s;
        m.transfer = (s == MasterState::Sync).then(|| Transfer {
            total: -1,
            received: Arc::new(Received {
                last_io_s: now_s.into(),
                ..Received::default()
            }),
        });
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

/// Reads one line (without CRLF), skipping the newlines a master sends as
/// keep-alives before it.
async fn line<S: AsyncRead + Unpin>(sock: &mut S, buf: &mut BytesMut) -> io::Result<String> {
    loop {
        while buf.first() == Some(&b'\n') {
            buf.advance(1);
        }
        if let Some(i) = buf.iter().position(|&b| b == b'\n') {
            let l = buf.split_to(i + 1);
            return Ok(String::from_utf8_lossy(&l).trim_end().to_string());
        }
        read_more(sock, buf).await?;
    }
}

tokio::task_local! {
    /// `repl-timeout` when the link started: the longest silence of the
    /// master (which sends newlines while the replica waits) before the
    /// link is dropped.
    static REPL_TIMEOUT: Duration;
}

async fn read_more<S: AsyncRead + Unpin>(sock: &mut S, buf: &mut BytesMut) -> io::Result<()> {
    buf.reserve(64 * 1024);
    let t = REPL_TIMEOUT
        .try_with(|t| *t)
        .unwrap_or(Duration::from_secs(60));
    let n = tokio::time::timeout(t, sock.read_buf(buf))
        .await
        .map_err(|_| io::Error::other("Timeout connecting to the MASTER..."))??;
    if n == 0 {
        return Err(io::Error::other("the master closed the connection"));
    }
    Ok(())
}

fn resp(args: &[&str]) -> Vec<u8> {
    let mut v = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        v.extend_from_slice(format!("${}\r\n{a}\r\n", a.len()).as_bytes());
    }
    v
}

async fn ask<S: AsyncRead + AsyncWrite + Unpin>(
    sock: &mut S,
    buf: &mut BytesMut,
    args: &[&str],
) -> io::Result<String> {
    sock.write_all(&resp(args)).await?;
    sock.flush().await?;
    line(sock, buf).await
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
            .then(|| crate::core::tls::client_context(&st.cfg))
    };
    match tls {
        None => sync(shared, sock, ends, gen, ended).await,
        Some(ctx) => {
            let ctx = ctx.map_err(io::Error::other)?;
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

/// Up to the stream: the handshake, then the master's RDB or its backlog;
/// false if a newer REPLICAOF took over.
async fn handshake<S: AsyncRead + AsyncWrite + Unpin>(
    shared: &Arc<Shared>,
    sock: &mut S,
    buf: &mut BytesMut,
    gen: u64,
) -> io::Result<bool> {
    set_state(
        &mut *shared.lock_eventually().await,
        gen,
        MasterState::Handshake,
    );
    let (user, pass, my_port, replid, offset, failover) = {
        let st = shared.lock_eventually().await;
        (
            st.cfg.masteruser.clone(),
            st.cfg.masterauth.clone(),
            // The port replicas of this one connect to, as Redis tells it.
            if st.cfg.tls_replication {
                st.cfg.tls_port as u16
            } else {
                st.tcp_port
            },
            st.replid.clone(),
            st.repl.offset,
            st.repl.failover.state == crate::state::repl::FailoverState::InProgress,
        )
    };
    let pong = ask(sock, buf, &["PING"]).await?;
    if pong.starts_with('-') && !pong.starts_with("-NOAUTH") {
        return Err(io::Error::other(format!(
            "Error reply to PING from master: '{pong}'"
        )));
    }
    if !pass.is_empty() {
        let r = if user.is_empty() {
            ask(sock, buf, &["AUTH", &pass]).await?
        } else {
            ask(sock, buf, &["AUTH", &user, &pass]).await?
        };
        if r.starts_with('-') {
            return Err(io::Error::other(format!("Unable to AUTH to MASTER: {r}")));
        }
    }
    ask(
        sock,
        buf,
        &["REPLCONF", "listening-port", &my_port.to_string()],
    )
    .await?;
    ask(sock, buf, &["REPLCONF", "capa", "eof", "capa", "psync2"]).await?;
    let offset = (offset + 1).to_string();
    let mut psync = vec!["PSYNC", &replid, &offset];
    if failover {
        // The target promotes itself on this.
        psync.push("FAILOVER");
    }
    let reply = ask(sock, buf, &psync).await?;
    if failover {
        let mut st = shared.lock_eventually().await;
        if !current(&st, gen) {
            return Ok(false);
        }
        if reply.starts_with("+FULLRESYNC") || reply.starts_with("+CONTINUE") {
            crate::state::failover::clear_failover(&mut st);
        } else {
            crate::state::failover::abort_failover(
                &mut st,
                "Failover target rejected psync request",
            );
            return Ok(false);
        }
    }
    if let Some(rest) = reply.strip_prefix("+FULLRESYNC ") {
        let mut w = rest.split(' ');
        let (Some(id), Some(Ok(off))) = (w.next(), w.next().map(str::parse::<u64>)) else {
            return Err(io::Error::other(format!("bad FULLRESYNC reply: {reply}")));
        };
        info!("Full resync from master: {id}:{off}");
        set_state(&mut *shared.lock_eventually().await, gen, MasterState::Sync);
        let head = line(sock, buf).await?;
        if !full_sync(shared, sock, buf, &head, id, gen).await? {
            return Ok(false);
        }
        let mut st = shared.lock_eventually().await;
        st.replica_keys_with_expire = storage::Dict::new();
        st.replid = id.to_string();
        let size = st.cfg.repl_backlog_size;
        st.repl.reset_backlog(size, off);
        // A new history: this server's replicas sync with it again.
        drop_replicas(&mut st);
        info!("MASTER <-> REPLICA sync: Finished with success");
    } else if let Some(rest) = reply.strip_prefix("+CONTINUE") {
        info!("Successful partial resynchronization with master.");
        let mut st = shared.lock_eventually().await;
        if let Some(id) = rest.split_whitespace().next().filter(|id| *id != st.replid) {
            // The master's history changed ID (it was promoted).
            let old = std::mem::replace(&mut st.replid, id.to_string());
            st.repl.shift_id(old);
            // Its replicas learn the new ID by reconnecting (they resync
            // partially with the old one).
            drop_replicas(&mut st);
        }
        let size = st.cfg.repl_backlog_size;
        st.repl.ensure_backlog(size);
        info!("MASTER <-> REPLICA sync: Master accepted a Partial Resynchronization.");
    } else {
        return Err(io::Error::other(format!(
            "unexpected reply to PSYNC: {reply}"
        )));
    }
    Ok(true)
}

/// How this replica takes its master's RDB (`repl-diskless-load`).
#[derive(Clone, Copy, PartialEq)]
enum LoadInto {
    /// Saved as this server's RDB file first, then loaded, as Redis does
    /// (`disabled`, and `on-empty-db` over data).
    Disk,
    /// Loaded from the socket into the emptied databases (`on-empty-db`).
    Emptied,
    /// Loaded from the socket beside the old data, which stays until the
    /// load succeeds and is kept if it fails (`swapdb`). Asynchronous when
    /// the master continues this replica's own history: clients go on
    /// using the old data meanwhile (`async_loading`), as it is an earlier
    /// point of the same dataset.
    Swap { is_async: bool },
}

/// Receives and loads the master's RDB (after its header line, `head`),
/// replacing the dataset; false if a newer REPLICAOF took over meanwhile.
/// The image is parsed without the lock, into databases of its own, while
/// the state shows the load (`loading`, or `async_loading`). It is parsed
/// as it arrives, or written to the RDB file as it arrives and parsed
/// from there: never held whole in memory.
async fn full_sync<S: AsyncRead + Unpin>(
    shared: &Arc<Shared>,
    sock: &mut S,
    buf: &mut BytesMut,
    head: &str,
    master_replid: &str,
    gen: u64,
) -> io::Result<bool> {
    let size = rdb_size(head)?;
    let (into, progress, received, opts, n, path) = {
        let mut st = shared.lock_eventually().await;
        if !current(&st, gen) {
            return Ok(false);
        }
        let into = match st.cfg.repl_diskless_load.as_str() {
            "swapdb" => LoadInto::Swap {
                is_async: st.replid == master_replid,
            },
            "on-empty-db" if st.dbs.iter().all(|d| d.is_empty()) => LoadInto::Emptied,
            _ => LoadInto::Disk,
        };
        let to = if into == LoadInto::Disk {
            "disk"
        } else {
            "parser"
        };
        match size {
            Some(n) => info!("MASTER <-> REPLICA sync: receiving {n} bytes from master to {to}"),
            None => info!(
                "MASTER <-> REPLICA sync: receiving streamed RDB from master with EOF to {to}"
            ),
        }
        let loading = Loading::new(size.unwrap_or(0) as u64);
        let progress = loading.progress.clone();
        if into != LoadInto::Disk {
            if into == LoadInto::Emptied {
                flush_old_data(&mut st);
            }
            info!("MASTER <-> REPLICA sync: Loading DB in memory");
            st.loading = Some(Loading {
                is_async: into == (LoadInto::Swap { is_async: true }),
                ..loading
            });
        }
        let received = st.repl.master.as_mut().and_then(|m| m.transfer.as_mut());
        let received = received.map(|t| {
            t.total = size.map_or(0, |n| n as i64);
            t.received.clone()
        });
        let opts = crate::state::persist::load_opts(&st, false).apart();
        let path = crate::state::persist::rdb_path(&st);
        (into, progress, received, opts, st.dbs.len(), path)
    };
    let (tx, rx) = mpsc::channel(16);
    let loaded = if into == LoadInto::Disk {
        let tmp = path.with_file_name(format!(
            "temp-{}.{}.rdb",
            now_ms() / 1000,
            std::process::id()
        ));
        // Created here, so that the name is gone however this ends:
        // renamed, failed, or dropped by a newer REPLICAOF mid-transfer
        // (whose own file may take the same name while the writer still
        // writes to this one).
        let file = std::fs::File::create(&tmp).map_err(|e| {
            io::Error::other(format!(
                "Opening the temp file needed for MASTER <-> REPLICA synchronization: {e}"
            ))
        })?;
        let _unlink = Unlink(&tmp);
        let writer = tokio::task::spawn_blocking(move || write_chunks(file, rx));
        let got = pass_rdb(sock, buf, head, size, tx, received.as_deref()).await;
        let written = writer.await.map_err(io::Error::other)?;
        {
            let mut st = shared.lock_eventually().await;
            let res = got.and(written).and_then(|()| {
                if !current(&st, gen) {
                    return Ok(false);
                }
                std::fs::rename(&tmp, &path).map(|()| true).map_err(|e| {
                    let name = &st.cfg.dbfilename;
                    io::Error::other(format!("Failed trying to rename the temp DB into {name} in MASTER <-> REPLICA synchronization: {e}"))
                })
            });
            if !matches!(res, Ok(true)) {
                return res;
            }
            flush_old_data(&mut st);
            info!("MASTER <-> REPLICA sync: Loading DB in memory");
            let len = std::fs::metadata(&path).map_or(0, |m| m.len());
            st.loading = Some(Loading {
                progress: progress.clone(),
                ..Loading::new(len)
            });
        }
        tokio::task::spawn_blocking(move || match std::fs::File::open(&path) {
            Ok(mut f) => load_apart(n, Input::file(&mut f), &opts, &progress),
            Err(e) => {
                let e = LoadError {
                    msg: e.to_string(),
                    offset: 0,
                };
                (Err(e), Vec::new(), None)
            }
        })
        .await
        .map_err(io::Error::other)?
    } else {
        let prog = progress.clone();
        let parser = tokio::task::spawn_blocking(move || {
            let mut src = Chunks {
                rx,
                cur: Bytes::new(),
            };
            load_apart(n, Input::stream(&mut src, size), &opts, &prog)
        });
        let got = pass_rdb(sock, buf, head, size, tx, None).await;
        let loaded = parser.await.map_err(io::Error::other)?;
        if let Err(e) = got {
            let mut st = shared.lock_eventually().await;
            st.loading = None;
            warn!("Internal error in RDB reading offset {}, function at rdbLoad -> Unexpected EOF reading RDB file. Failure loading rdb format from socket, assuming connection error, resuming operation.", progress.loaded_bytes.load(Relaxed));
            warn!("Failed trying to load the MASTER synchronization DB from socket: {e}");
            if matches!(into, LoadInto::Swap { .. }) {
                info!("MASTER <-> REPLICA sync: Discarding temporary DB in background");
            }
            free_dbs(loaded.1);
            return Err(e);
        }
        loaded
    };
    let (res, dbs, engine) = loaded;
    let mut st = shared.lock_eventually().await;
    st.loading = None;
    if !current(&st, gen) {
        free_dbs(dbs);
        return Ok(false);
    }
    let sum = match res {
        Ok(sum) => sum,
        Err(e) => {
            warn!(
                "Internal error in RDB reading offset {}, function at rdbLoad -> {}",
                e.offset, e.msg
            );
            let from = if into == LoadInto::Disk {
                "disk"
            } else {
                "socket"
            };
            warn!("Failed trying to load the MASTER synchronization DB from {from}, check server logs.");
            if matches!(into, LoadInto::Swap { .. }) {
                info!("MASTER <-> REPLICA sync: Discarding temporary DB in background");
            }
            free_dbs(dbs);
            return Err(io::Error::other(format!("loading the master's RDB: {e}")));
        }
    };
    crate::cmd::replay::log_done(&sum);
    st.rdb.last_load_keys_loaded = sum.keys as u64;
    st.rdb.last_load_keys_expired = sum.expired as u64;
    if matches!(into, LoadInto::Swap { .. }) {
        info!("MASTER <-> REPLICA sync: Swapping active DB with loaded DB");
    }
    let old = replace_dataset(&mut st, dbs, engine);
    if matches!(into, LoadInto::Swap { .. }) {
        info!("MASTER <-> REPLICA sync: Discarding old DB in background");
    }
    free_dbs(old);
    Ok(true)
}

type Parsed = (
    Result<LoadSummary, LoadError>,
    Vec<Db>,
    Option<scripting::Engine>,
);

/// Parses `input` into `n` databases of their own (and an interpreter,
/// if it holds function libraries).
fn load_apart(n: usize, input: Input, opts: &LoadOpts, progress: &LoadProgress) -> Parsed {
    let mut dbs: Vec<Db> = (0..n).map(|_| Db::default()).collect();
    let mut engine = None;
    let res = crate::state::persist::load_dbs(&mut dbs, &mut engine, input, opts, Some(progress));
    (res, dbs, engine)
}

/// `repl-diskless-load disabled`: the master's RDB is written to a
/// temporary file as it arrives, then synced, to become this server's RDB
/// file, as Redis does.
fn write_chunks(mut f: std::fs::File, mut rx: mpsc::Receiver<Bytes>) -> io::Result<()> {
    while let Some(b) = rx.blocking_recv() {
        f.write_all(&b)?;
    }
    f.sync_all()
}

struct Unlink<'a>(&'a Path);

impl Drop for Unlink<'_> {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(self.0);
    }
}

/// The parser's side of the chunks `pass_rdb` sends: the end of the
/// channel is the end of the input.
struct Chunks {
    rx: mpsc::Receiver<Bytes>,
    cur: Bytes,
}

impl Read for Chunks {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        while self.cur.is_empty() {
            match self.rx.blocking_recv() {
                Some(b) => self.cur = b,
                None => return Ok(0),
            }
        }
        let n = out.len().min(self.cur.len());
        out[..n].copy_from_slice(&self.cur[..n]);
        self.cur.advance(n);
        Ok(n)
    }
}

/// The RDB's size from its header line: `$<len>` (disk-based sync), or
/// none for `$EOF:<40-byte mark>` (diskless), the image then ending with
/// the mark.
fn rdb_size(head: &str) -> io::Result<Option<usize>> {
    let bad = || {
        io::Error::other(format!("Bad protocol from MASTER, the first byte is not '$' (we received '{head}'), are you sure the host and port are right?"))
    };
    let spec = head.strip_prefix('$').ok_or_else(bad)?;
    match spec.strip_prefix("EOF:") {
        Some(mark) if mark.len() == 40 => Ok(None),
        Some(_) => Err(bad()),
        None => spec.parse().map(Some).map_err(|_| bad()),
    }
}

/// Empties the dataset before a load into it: the keys (freed in the
/// background) and the function libraries.
fn flush_old_data(st: &mut State) {
    info!("MASTER <-> REPLICA sync: Flushing old data");
    free_dbs(replace_dataset(st, Vec::new(), None));
}

/// Frees databases in the background (counted by their keys).
fn free_dbs(dbs: Vec<Db>) {
    let keys = dbs.iter().map(|d| d.len() as u64).sum();
    crate::state::lazyfree::lazy_free(dbs, keys);
}

/// Puts `dbs` (empty ones if there are fewer) and the libraries of
/// `engine` in place of the dataset, returning the old databases. WATCHed
/// keys there before or after count as changed, and clients tracking keys
/// are told to drop them all, as for a FLUSHALL.
fn replace_dataset(st: &mut State, dbs: Vec<Db>, engine: Option<scripting::Engine>) -> Vec<Db> {
    let mut new = dbs.into_iter();
    let mut old = Vec::with_capacity(st.dbs.len());
    for i in 0..st.dbs.len() {
        st.touch_all_watched(i, None);
        old.push(st.dbs[i].take());
        st.dbs[i].restore(new.next().unwrap_or_default());
        st.touch_all_watched(i, None);
    }
    st.invalidate_all();
    // The master's libraries replace ours, compiled again in the
    // interpreter clients use.
    let codes: Vec<Bytes> = engine
        .iter()
        .flat_map(|e| e.libraries.values().map(|l| l.code.clone()))
        .collect();
    if st.engine.is_none() && !codes.is_empty() {
        match scripting::Engine::new(st.script_run.clone()) {
            Ok(e) => st.engine = Some(e),
            Err(e) => warn!("Lua initialization failed: {e}"),
        }
    }
    if let Some(e) = st.engine.as_mut() {
        e.flush_functions();
        for code in &codes {
            if let Err(err) = e.load_library(code, true) {
                warn!("Failed loading the master's function library: {err}");
            }
        }
        crate::state::evict::set_vm_memory(e.vm_memory());
    }
    old
}

/// Passes the master's RDB to `tx` as it arrives: `size` bytes, or up to
/// the end mark the header line (`head`) gave, which comes last as the
/// master sends nothing more before this replica's first ACK (so the last
/// 40 bytes received are held back until more come). Stops early when the
/// receiver is gone: it failed, and says why. `received`, if given, counts
/// the bytes passed.
async fn pass_rdb<S: AsyncRead + Unpin>(
    sock: &mut S,
    buf: &mut BytesMut,
    head: &str,
    size: Option<usize>,
    tx: mpsc::Sender<Bytes>,
    received: Option<&Received>,
) -> io::Result<()> {
    const MARK: usize = 40;
    let mut sent = 0;
    loop {
        let (ready, done) = match size {
            Some(n) => {
                let ready = (n - sent).min(buf.len());
                (ready, sent + ready == n)
            }
            None if buf.ends_with(&head.as_bytes()[5..]) => (buf.len() - MARK, true),
            None => (buf.len().saturating_sub(MARK), false),
        };
        if ready > 0 {
            sent += ready;
            if tx.send(buf.split_to(ready).freeze()).await.is_err() {
                return Ok(());
            }
            if let Some(r) = received {
                r.bytes.store(sent as u64, Relaxed);
                r.last_io_s.store(now_ms() / 1000, Relaxed);
            }
        }
        if done {
            if size.is_none() {
                buf.advance(MARK);
            }
            break;
        }
        read_more(sock, buf).await?;
    }
    // What follows the image gets a buffer of its own: sharing the image's
    // last allocation would keep it for as long as the link lasts.
    *buf = BytesMut::from(&buf[..]);
    Ok(())
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
