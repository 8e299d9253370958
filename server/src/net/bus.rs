//! The cluster bus's sockets: the listener on the bus port, a task per
//! link that reads frames (handed to `state::cluster` under the lock) and
//! writes what the logic queued, and the cluster's tick, which also opens
//! the links the logic asks for.

use crate::core::cluster::LinkOut;
use crate::state::{cluster, Shared};
use protocol::bus;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// Redis's `clusterCron` runs ten times a second.
const TICK: Duration = Duration::from_millis(100);
/// A message longer than this ends the link (Redis has no limit but its
/// memory; a peer announcing 4 GB must not get it reserved).
const MAX_FRAME: usize = 1 << 30;

/// Starts the bus on its listeners (bound by `server`, so that a port in
/// use fails the start as in Redis).
pub fn start(shared: &Arc<Shared>, listeners: Vec<TcpListener>) {
    if listeners.is_empty() {
        return;
    }
    for l in listeners {
        tokio::spawn(accept(shared.clone(), l));
    }
    tokio::spawn(tick(shared.clone()));
}

async fn accept(shared: Arc<Shared>, l: TcpListener) {
    loop {
        let Ok((sock, peer)) = l.accept().await else {
            tokio::time::sleep(Duration::from_millis(10)).await;
            continue;
        };
        tokio::spawn(accepted(shared.clone(), sock, peer.ip().to_string()));
    }
}

/// An incoming link: its TLS handshake (`tls-cluster`) in its own task, so
/// a slow peer holds up no other, then the link.
async fn accepted(shared: Arc<Shared>, sock: TcpStream, peer: String) {
    let _ = sock.set_nodelay(true);
    let local = sock
        .local_addr()
        .map(|a| a.ip().to_string())
        .unwrap_or_default();
    let sock = match bus_tls(&shared).await {
        None => Link::Plain(sock),
        Some(tls) => {
            let handshake = async {
                crate::core::tls::expect_handshake(&sock).await?;
                tokio_rustls::TlsAcceptor::from(tls.accept.clone())
                    .accept(sock)
                    .await
            };
            match handshake.await {
                Ok(s) => Link::In(Box::new(s)),
                Err(e) => return tracing::warn!("Error accepting cluster node connection: {e}"),
            }
        }
    };
    let link = cluster::accepted(&mut *shared.lock_eventually().await);
    if let Some((id, out)) = link {
        sock.run(shared, id, out, peer, local).await
    }
}

/// The bus's TLS contexts when it speaks TLS now.
async fn bus_tls(shared: &Arc<Shared>) -> Option<Arc<crate::core::tls::Bus>> {
    let st = shared.lock_eventually().await;
    match st.cfg.tls_cluster {
        true => st.cluster.as_ref().and_then(|m| m.tls.clone()),
        false => None,
    }
}

async fn tick(shared: Arc<Shared>) {
    loop {
        tokio::time::sleep(TICK).await;
        let (connects, timeout) = {
            let mut st = shared.lock_eventually().await;
            (
                cluster::cron(&mut st),
                st.cfg.cluster_node_timeout.max(1) as u64,
            )
        };
        for c in connects {
            tokio::spawn(connect(shared.clone(), c, Duration::from_millis(timeout)));
        }
    }
}

async fn connect(shared: Arc<Shared>, c: crate::core::cluster::cron::Connect, timeout: Duration) {
    let addr = if c.ip.contains(':') {
        format!("[{}]:{}", c.ip, c.cport)
    } else {
        format!("{}:{}", c.ip, c.cport)
    };
    let tls = bus_tls(&shared).await;
    let sock = tokio::time::timeout(timeout, async {
        let sock = TcpStream::connect(&addr).await?;
        let _ = sock.set_nodelay(true);
        let local = sock
            .local_addr()
            .map(|a| a.ip().to_string())
            .unwrap_or_default();
        let sock = match &tls {
            None => Link::Plain(sock),
            Some(tls) => {
                // Nodes are named by address; the chain is what is checked.
                let name = rustls::pki_types::ServerName::try_from(c.ip.clone())
                    .map_err(std::io::Error::other)?;
                let connector = tokio_rustls::TlsConnector::from(tls.connect.clone());
                Link::Out(Box::new(connector.connect(name, sock).await?))
            }
        };
        Ok::<_, std::io::Error>((sock, local))
    })
    .await;
    let mut st = shared.lock_eventually().await;
    let out = st
        .cluster
        .as_ref()
        .and_then(|m| m.cl.links.get(&c.link).map(|l| l.out.clone()));
    match (sock, out) {
        (Ok(Ok((sock, local))), Some(out)) => {
            cluster::connected(&mut st, c.link);
            drop(st);
            tokio::spawn(sock.run(shared.clone(), c.link, out, c.ip, local));
        }
        (Ok(Err(e)), _) => {
            tracing::debug!("Unable to connect to Cluster Node [{addr}]: {e}");
            cluster::closed(&mut st, c.link);
        }
        _ => cluster::closed(&mut st, c.link),
    }
}

/// A link's socket: plain, or TLS from either end (`tls-cluster`).
enum Link {
    Plain(TcpStream),
    In(Box<tokio_rustls::server::TlsStream<TcpStream>>),
    Out(Box<tokio_rustls::client::TlsStream<TcpStream>>),
}

impl Link {
    async fn run(
        self,
        shared: Arc<Shared>,
        id: u64,
        out: Arc<LinkOut>,
        peer: String,
        local: String,
    ) {
        match self {
            Link::Plain(s) => run_link(shared, id, out, s, peer, local).await,
            Link::In(s) => run_link(shared, id, out, *s, peer, local).await,
            Link::Out(s) => run_link(shared, id, out, *s, peer, local).await,
        }
    }
}

/// One link: writes what is queued, reads frames until either side
/// closes it.
async fn run_link<S: AsyncRead + AsyncWrite + Send + 'static>(
    shared: Arc<Shared>,
    id: u64,
    out: Arc<LinkOut>,
    sock: S,
    peer_ip: String,
    local_ip: String,
) {
    let (mut rd, mut wr) = tokio::io::split(sock);
    let writer = {
        let out = out.clone();
        async move {
            loop {
                let frames: Vec<Vec<u8>> = out.queue.lock().drain(..).collect();
                for f in frames {
                    if wr.write_all(&f).await.is_err() {
                        return;
                    }
                }
                if out.is_closed() {
                    return;
                }
                out.wake.notified().await;
            }
        }
    };
    let reader = async {
        let mut buf: Vec<u8> = Vec::with_capacity(bus::HEADER_LEN);
        let mut chunk = vec![0u8; 16 * 1024];
        loop {
            match bus::frame_len(&buf) {
                Err(e) => {
                    tracing::warn!(
                        "Bad message length or signature received on the Cluster bus: {e}"
                    );
                    return;
                }
                Ok(Some(len)) if len > MAX_FRAME => return,
                Ok(Some(len)) if buf.len() >= len => {
                    let frame: Vec<u8> = buf.drain(..len).collect();
                    let (p, l) = (peer_ip.clone(), local_ip.clone());
                    let closed = out.clone();
                    shared
                        .with_state(move |st| {
                            if !closed.is_closed() {
                                cluster::receive(st, id, &frame, &p, &l)
                            }
                        })
                        .await;
                    continue;
                }
                _ => {}
            }
            match rd.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(n) => {
                    buf.extend_from_slice(&chunk[..n]);
                    out.rcvbuf.store(
                        buf.capacity() + chunk.len(),
                        std::sync::atomic::Ordering::Relaxed,
                    );
                }
            }
        }
    };
    tokio::select! {
        _ = writer => {}
        _ = reader => {}
    }
    out.close();
    shared.with_state(move |st| cluster::closed(st, id)).await;
}
