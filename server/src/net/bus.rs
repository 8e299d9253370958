//! The cluster bus's sockets: the listener on the bus port, a task per
//! link that reads frames (handed to `state::cluster` under the lock) and
//! writes what the logic queued, and the cluster's tick, which also opens
//! the links the logic asks for.

use crate::core::cluster::LinkOut;
use crate::state::{cluster, Shared};
use protocol::bus;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
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
        let local = sock
            .local_addr()
            .map(|a| a.ip().to_string())
            .unwrap_or_default();
        let link = cluster::accepted(&mut *shared.lock_eventually().await);
        if let Some((id, out)) = link {
            tokio::spawn(run_link(
                shared.clone(),
                id,
                out,
                sock,
                peer.ip().to_string(),
                local,
            ));
        }
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
    let sock = tokio::time::timeout(timeout, TcpStream::connect(&addr)).await;
    let mut st = shared.lock_eventually().await;
    let out = st
        .cluster
        .as_ref()
        .and_then(|m| m.cl.links.get(&c.link).map(|l| l.out.clone()));
    match (sock, out) {
        (Ok(Ok(sock)), Some(out)) => {
            let _ = sock.set_nodelay(true);
            let local = sock
                .local_addr()
                .map(|a| a.ip().to_string())
                .unwrap_or_default();
            cluster::connected(&mut st, c.link);
            drop(st);
            tokio::spawn(run_link(shared.clone(), c.link, out, sock, c.ip, local));
        }
        (Ok(Err(e)), _) => {
            tracing::debug!("Unable to connect to Cluster Node [{addr}]: {e}");
            cluster::closed(&mut st, c.link);
        }
        _ => cluster::closed(&mut st, c.link),
    }
}

/// One link: writes what is queued, reads frames until either side
/// closes it.
async fn run_link(
    shared: Arc<Shared>,
    id: u64,
    out: Arc<LinkOut>,
    sock: TcpStream,
    peer_ip: String,
    local_ip: String,
) {
    let _ = sock.set_nodelay(true);
    let (mut rd, mut wr) = sock.into_split();
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
