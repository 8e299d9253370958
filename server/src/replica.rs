//! Replication, the replica's side: the link task that follows this
//! server's master (REPLICAOF). It connects, does the handshake (PING,
//! AUTH with `masteruser`/`masterauth`, REPLCONF listening-port and capa,
//! PSYNC with the replication ID and offset it has), loads the master's
//! RDB on a full resync, then applies the stream through the dispatcher as
//! the master's client (which read-only does not stop), acknowledging its
//! offset every second and on `REPLCONF GETACK`. A dropped link is retried
//! every second; a newer REPLICAOF stops the task.

use crate::repl::MasterState;
use crate::state::{now_ms, Client, Shared, State};
use bytes::{Buf, Bytes, BytesMut};
use protocol::{Decoder, ReplyBuf};
use std::io;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tracing::{info, warn};

/// The server cron's part: the link task of a new REPLICAOF (or of
/// `replicaof` in the config, at start) is started here.
pub fn cron(shared: &Arc<Shared>, st: &mut State) {
    if !st.repl.configured {
        st.repl.configured = true;
        let cfg = st.cfg.replicaof.clone();
        let mut words = cfg.split_whitespace();
        if let (Some(host), Some(Ok(port))) = (words.next(), words.next().map(str::parse)) {
            crate::cmd::replication::set_master(st, host, port);
        }
    }
    if let Some(m) = st.repl.master.as_mut().filter(|m| !m.started) {
        m.started = true;
        let (host, port, gen) = (m.host.clone(), m.port, m.gen);
        tokio::spawn(run(shared.clone(), host, port, gen));
    }
}

fn current(st: &State, gen: u64) -> bool {
    st.repl.master.as_ref().is_some_and(|m| m.gen == gen)
}

fn set_state(st: &mut State, gen: u64, s: MasterState) {
    if let Some(m) = st.repl.master.as_mut().filter(|m| m.gen == gen) {
        if s != MasterState::Connected && m.state == MasterState::Connected {
            m.down_since_s = now_ms() / 1000;
        }
        m.state = s;
        m.last_io_s = now_ms() / 1000;
    }
}

async fn run(shared: Arc<Shared>, host: String, port: u16, gen: u64) {
    loop {
        if !current(&*shared.lock_eventually().await, gen) {
            return;
        }
        if let Err(e) = session(&shared, &host, port, gen).await {
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
async fn line(sock: &mut TcpStream, buf: &mut BytesMut) -> io::Result<String> {
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

async fn read_more(sock: &mut TcpStream, buf: &mut BytesMut) -> io::Result<()> {
    buf.reserve(64 * 1024);
    let n = tokio::time::timeout(Duration::from_secs(60), sock.read_buf(buf))
        .await
        .map_err(|_| io::Error::other("timeout reading from the master"))??;
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

async fn ask(sock: &mut TcpStream, buf: &mut BytesMut, args: &[&str]) -> io::Result<String> {
    sock.write_all(&resp(args)).await?;
    line(sock, buf).await
}

async fn session(shared: &Arc<Shared>, host: &str, port: u16, gen: u64) -> io::Result<()> {
    set_state(
        &mut *shared.lock_eventually().await,
        gen,
        MasterState::Connecting,
    );
    let mut sock = TcpStream::connect((host, port)).await?;
    let _ = sock.set_nodelay(true);
    let mut buf = BytesMut::new();
    let (user, pass, my_port, replid, offset) = {
        let st = shared.lock_eventually().await;
        (
            st.cfg.masteruser.clone(),
            st.cfg.masterauth.clone(),
            st.tcp_port,
            st.replid.clone(),
            st.repl.offset,
        )
    };
    let pong = ask(&mut sock, &mut buf, &["PING"]).await?;
    if pong.starts_with('-') && !pong.starts_with("-NOAUTH") {
        return Err(io::Error::other(format!(
            "Error reply to PING from master: '{pong}'"
        )));
    }
    if !pass.is_empty() {
        let r = if user.is_empty() {
            ask(&mut sock, &mut buf, &["AUTH", &pass]).await?
        } else {
            ask(&mut sock, &mut buf, &["AUTH", &user, &pass]).await?
        };
        if r.starts_with('-') {
            return Err(io::Error::other(format!("Unable to AUTH to MASTER: {r}")));
        }
    }
    ask(
        &mut sock,
        &mut buf,
        &["REPLCONF", "listening-port", &my_port.to_string()],
    )
    .await?;
    ask(&mut sock, &mut buf, &["REPLCONF", "capa", "psync2"]).await?;
    let reply = ask(
        &mut sock,
        &mut buf,
        &["PSYNC", &replid, &(offset + 1).to_string()],
    )
    .await?;
    if let Some(rest) = reply.strip_prefix("+FULLRESYNC ") {
        let mut w = rest.split(' ');
        let (Some(id), Some(Ok(off))) = (w.next(), w.next().map(str::parse::<u64>)) else {
            return Err(io::Error::other(format!("bad FULLRESYNC reply: {reply}")));
        };
        set_state(&mut *shared.lock_eventually().await, gen, MasterState::Sync);
        let head = line(&mut sock, &mut buf).await?;
        let len: usize = head
            .strip_prefix('$')
            .and_then(|n| n.parse().ok())
            .ok_or_else(|| io::Error::other(format!("bad bulk header from master: {head}")))?;
        while buf.len() < len {
            read_more(&mut sock, &mut buf).await?;
        }
        let rdb = buf.split_to(len);
        let mut st = shared.lock_eventually().await;
        if !current(&st, gen) {
            return Ok(());
        }
        for db in st.dbs.iter_mut() {
            drop(db.take());
        }
        if let Err(e) = crate::persist::load_bytes(&mut st, &rdb) {
            return Err(io::Error::other(format!("loading the master's RDB: {e}")));
        }
        st.replid = id.to_string();
        let size = st.cfg.repl_backlog_size;
        st.repl.reset_backlog(size, off);
        info!("MASTER <-> REPLICA sync: Finished with success");
    } else if let Some(rest) = reply.strip_prefix("+CONTINUE") {
        let mut st = shared.lock_eventually().await;
        if let Some(id) = rest.split_whitespace().next().filter(|id| *id != st.replid) {
            // The master's history changed ID (it was promoted).
            let old = std::mem::replace(&mut st.replid, id.to_string());
            st.repl.shift_id(old);
        }
        let size = st.cfg.repl_backlog_size;
        st.repl.ensure_backlog(size);
        info!("MASTER <-> REPLICA sync: Master accepted a Partial Resynchronization.");
    } else {
        return Err(io::Error::other(format!(
            "unexpected reply to PSYNC: {reply}"
        )));
    }
    set_state(
        &mut *shared.lock_eventually().await,
        gen,
        MasterState::Connected,
    );
    follow(shared, &mut sock, buf, gen).await
}

/// Applies the master's stream until the link drops or REPLICAOF changes.
async fn follow(
    shared: &Arc<Shared>,
    sock: &mut TcpStream,
    mut buf: BytesMut,
    gen: u64,
) -> io::Result<()> {
    let id = {
        let mut st = shared.lock_eventually().await;
        st.next_client_id += 1;
        st.next_client_id - 1
    };
    let mut master = Client::new(id, String::new(), String::new(), -1, true);
    master.peer.master = true;
    let mut dec = Decoder::new(protocol::DEFAULT_MAX_BULK);
    let mut ack_due = tokio::time::Instant::now();
    loop {
        let mut acks: Vec<u64> = Vec::new();
        {
            let mut guard = shared.lock_eventually().await;
            let st = &mut *guard;
            if !current(st, gen) {
                return Ok(());
            }
            st.last_tick = std::time::Instant::now();
            let mut out = ReplyBuf::new(false);
            // What the master sent, relayed as applied.
            let sent = buf.clone().freeze();
            let mut pos = 0;
            loop {
                let before = buf.len();
                let args: Vec<Bytes> = match dec.decode(&mut buf) {
                    Ok(Some(a)) => a,
                    Ok(None) => {
                        // The start of a command still arriving: its bytes
                        // count in the offset now, as they are consumed.
                        let used = before - buf.len();
                        st.repl.proxy(&sent[pos..pos + used]);
                        break;
                    }
                    Err(e) => {
                        return Err(io::Error::other(format!("protocol error from master: {e}")))
                    }
                };
                let used = (before - buf.len()) as u64;
                if args.len() >= 2
                    && args[0].eq_ignore_ascii_case(b"replconf")
                    && args[1].eq_ignore_ascii_case(b"getack")
                {
                    acks.push(st.repl.offset);
                } else if !args.is_empty() {
                    st.repl.applying = true;
                    crate::cmd::execute(st, &mut master, &mut out, &args);
                    st.repl.applying = false;
                    out.buf.clear();
                }
                st.repl.proxy(&sent[pos..pos + used as usize]);
                pos += used as usize;
            }
            if !st.repl.fresh.is_empty() {
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
            ack_due = tokio::time::Instant::now() + Duration::from_secs(1);
        }
        buf.reserve(64 * 1024);
        tokio::select! {
            r = sock.read_buf(&mut buf) => match r {
                Ok(0) => return Err(io::Error::other("the master closed the connection")),
                Ok(_) => {}
                Err(e) => return Err(e),
            },
            _ = tokio::time::sleep_until(ack_due) => {}
        }
    }
}
