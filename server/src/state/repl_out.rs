//! What the replicas' connections send: the replication stream's new bytes
//! delivered to them, and a BGSAVE's RDB pushed to diskless replicas.

use crate::core::clock::now_ms;
use crate::state::{Client, State};
use ahash::AHashMap as HashMap;
use bytes::BytesMut;
use std::sync::Arc;

/// The replication stream (`crate::state::repl`) wired to the clients: what the
/// replicas' connections send.
impl State {
    /// Tells the replicas of the stream's new bytes: each one that holds
    /// the buffer counts them as its output, an online one's connection is
    /// woken to take them (once until it does). A replica whose output
    /// goes past its `client-output-buffer-limit` is closed (see
    /// `repl::replica_limit_floor`).
    pub fn repl_deliver(&mut self) {
        let end = self.repl.offset;
        self.repl.delivered = end;
        let limits = self.tun.obuf_limits;
        for r in self.repl.replicas.iter_mut() {
            let Some(cursor) = r.cursor else {
                continue;
            };
            let Some(cl) = self.clients.get_mut(&r.id) else {
                continue;
            };
            cl.repl_unsent = (end - cursor) as usize;
            if matches!(r.link, crate::state::repl::Link::Online) && !r.woken {
                r.woken = true;
                cl.wake.notify_one();
            }
            if crate::state::pubsub::close_if_over_limit(cl, &limits, 0) {
                cl.wake.notify_one();
            }
        }
    }

    /// The replicas' output, which Redis leaves out of what eviction
    /// weighs (`mem_not_counted_for_evict`): the replication buffer beyond
    /// the backlog's size, and what their connections hold (`pending`'s
    /// room, and what the socket has not taken).
    pub fn not_counted_memory(&self) -> u64 {
        let conns: usize = self
            .repl
            .replicas
            .iter()
            .filter_map(|r| self.clients.get(&r.id))
            .map(|c| c.pending.capacity() + c.unsent())
            .sum();
        (self.repl.replicas_memory() + conns) as u64
    }

    /// What replica `cl`'s connection sends next, into `out`: bytes held
    /// for it, then the next piece of its RDB file (disk-based sync, which
    /// ends online) or, online, the stream after its cursor, up to a write's
    /// worth in `out` (the rest stays in the shared buffer, counted as its
    /// output, and it is woken again for it).
    pub fn repl_pull(&mut self, cl: &mut Client, out: &mut BytesMut) {
        const WRITE: usize = 64 * 1024;
        let Some(r) = self.repl.replicas.iter_mut().find(|r| r.id == cl.id) else {
            return;
        };
        out.extend_from_slice(&std::mem::take(&mut r.held));
        r.woken = false;
        if let crate::state::repl::Link::SendBulk(bulk) = &mut r.link {
            let direct = out.is_empty() && cl.socket_is_next();
            match bulk.next(out, direct.then_some(cl.fd), cl.tls) {
                Ok(true) => {
                    // Woken again for the next piece once this one is
                    // written, which is at once, not at the round's end
                    // (the round's replies do not make it any larger).
                    r.woken = true;
                    cl.wake.notify_one();
                    self.woken += 1;
                }
                Ok(false) => {
                    self.repl_online(cl.id);
                    if cl.peer.rdb_only {
                        cl.close_after_reply = true;
                    }
                    cl.wake.notify_one();
                }
                Err(e) => {
                    tracing::warn!("Read error sending DB to replica: {e}");
                    cl.killed = true;
                    cl.wake.notify_one();
                }
            }
            return;
        }
        // What carried its RDB is not kept (it counts as its memory).
        if cl.pending.is_empty() && cl.pending.capacity() > 16 * 1024 {
            cl.pending = BytesMut::new();
        }
        let (Some(cursor), crate::state::repl::Link::Online) = (r.cursor, &r.link) else {
            return;
        };
        let room = WRITE.saturating_sub(out.len());
        let n = self.repl.copy_stream(cursor, room, out);
        if n == 0 && room > 0 && cursor < self.repl.offset {
            // Only a failed read of the buffer's part on disk copies
            // nothing: the replica cannot be given its stream.
            tracing::warn!("Replication buffer unreadable: dropping the replica");
            cl.killed = true;
            cl.wake.notify_one();
            return;
        }
        self.stats.net_repl_output_bytes += n as u64;
        let end = self.repl.offset;
        let r = self.repl.replica_mut(cl.id).expect("found above");
        r.cursor = Some(cursor + n as u64);
        cl.repl_unsent = (end - cursor) as usize - n;
        if cl.repl_unsent > 0 {
            r.woken = true;
            cl.wake.notify_one();
        }
        if n > 0 {
            self.repl.trim();
        }
    }

    /// Queues `bytes` on replica `id`'s connection.
    pub fn repl_send(&mut self, id: u64, bytes: &[u8]) {
        if let Some(r) = self.repl.replica_mut(id) {
            send_to(&mut self.clients, r, bytes);
        }
    }

    /// Queues a piece of an RDB on the connections of replicas `ids`
    /// (those gone are dropped from the list), unless one of them has more
    /// than `window` bytes unsent: the sender then waits, as the slowest
    /// replica paces a transfer.
    pub fn repl_rdb_push(&mut self, ids: &mut Vec<u64>, piece: &[u8], window: usize) -> RdbPush {
        if !self.rdb_replicas_left(ids) {
            return RdbPush::Gone;
        }
        let unsent = |st: &State, id: u64| {
            let held = st.repl.replicas.iter().find(|r| r.id == id);
            held.map_or(0, |r| r.held.len())
                + st.clients
                    .get(&id)
                    .map_or(0, |c| c.pending.len() + c.unsent())
        };
        if ids.iter().any(|&id| unsent(self, id) > window) {
            return RdbPush::Full;
        }
        for &id in ids.iter() {
            if let Some(r) = self.repl.replica_mut(id) {
                send_piece(&mut self.clients, r, piece);
            }
        }
        RdbPush::Sent
    }

    /// Keeps in `ids` the replicas still connected; false if none is.
    pub fn rdb_replicas_left(&self, ids: &mut Vec<u64>) -> bool {
        ids.retain(|id| {
            self.repl.replicas.iter().any(|r| r.id == *id)
                && self.clients.get(id).is_none_or(|c| !c.killed)
        });
        !ids.is_empty()
    }

    /// A BGSAVE for replicas ended (`file`: the image of a disk-based
    /// sync, opened). Disk-based, the replicas waiting for it get the file
    /// through their connections, then the stream since it started;
    /// diskless, the replicas it streamed to get the stream after their
    /// first ACK. They are dropped if it failed.
    pub fn repl_bgsave_done(&mut self, ok: bool, file: Option<std::fs::File>) {
        if !std::mem::take(&mut self.repl.bgsave_for_replicas) {
            return;
        }
        let diskless = std::mem::take(&mut self.repl.bgsave_diskless);
        let file = file.filter(|_| ok);
        let len = file
            .as_ref()
            .and_then(|f| f.metadata().ok())
            .map(|m| m.len());
        let file = file.map(Arc::new);
        let mut failed = Vec::new();
        for r in self.repl.replicas.iter_mut() {
            if !matches!(r.link, crate::state::repl::Link::WaitBgsaveEnd) {
                continue;
            }
            if diskless && ok {
                tracing::info!(
                    "Streamed RDB transfer with replica {}:{} succeeded (socket). Waiting for REPLCONF ACK from slave to enable streaming",
                    r.ip,
                    r.port
                );
                r.link = crate::state::repl::Link::WaitAck;
                r.ack_time_s = now_ms() / 1000;
                if r.rdb_only {
                    if let Some(cl) = self.clients.get_mut(&r.id) {
                        cl.close_after_reply = true;
                        cl.wake.notify_one();
                    }
                }
                continue;
            }
            let (Some(len), Some(file)) = (len.filter(|_| !diskless), &file) else {
                failed.push(r.id);
                continue;
            };
            r.link = crate::state::repl::Link::SendBulk(crate::state::repl::Bulk {
                file: file.clone(),
                sent: 0,
                len,
            });
            // Its connection sends the file from its next pass.
            send_to(&mut self.clients, r, format!("${len}\r\n").as_bytes());
        }
        for id in failed {
            tracing::warn!("SYNC failed. BGSAVE child returned an error");
            self.kill_client(id);
        }
    }

    /// A replica has its whole RDB: it is online, and gets the stream
    /// since its RDB (`redis-cli --rdb` is closed instead).
    pub fn repl_online(&mut self, id: u64) {
        let now_s = now_ms() / 1000;
        let Some(r) = self.repl.replica_mut(id) else {
            return;
        };
        r.link = crate::state::repl::Link::Online;
        r.ack_time_s = now_s;
        if r.rdb_only {
            if let Some(cl) = self.clients.get_mut(&id) {
                cl.close_after_reply = true;
                cl.wake.notify_one();
            }
            return;
        }
        tracing::info!("Synchronization with replica {}:{} succeeded", r.ip, r.port);
        r.woken = true;
        if let Some(cl) = self.clients.get_mut(&id) {
            cl.wake.notify_one();
        }
    }
}

/// What [`State::repl_rdb_push`] did.
pub enum RdbPush {
    Sent,
    /// A replica has not taken enough of the last pieces yet.
    Full,
    /// No replica is left to send to.
    Gone,
}

/// Bytes of RDB a replica's connection may have unsent before the
/// transfer waits for it: the socket's own buffer keeps the replica busy
/// meanwhile, and what waits here is the sync's memory.
pub const RDB_WINDOW: usize = 16 * 1024;

/// Queues a piece of an RDB transfer on replica `r`'s connection. When
/// nothing waits in its buffers, the piece goes to its socket at once, as
/// a forked child writes it (if the socket is next), and what the socket
/// does not take onto the connection's list; else it queues as other
/// output.
fn send_piece(
    clients: &mut HashMap<u64, Box<Client>>,
    r: &mut crate::state::repl::Replica,
    piece: &[u8],
) {
    match clients.get_mut(&r.id) {
        Some(cl)
            if r.held.is_empty()
                && cl.pending.is_empty()
                && cl.out_unsent.load(std::sync::atomic::Ordering::Relaxed) == 0 =>
        {
            let sent = match cl.socket_is_next() {
                true => crate::core::os::send_nowait(cl.fd, piece),
                false => 0,
            };
            if sent < piece.len() {
                cl.spill.push(bytes::Bytes::copy_from_slice(&piece[sent..]));
                cl.wake.notify_one();
            }
        }
        _ => send_to(clients, r, piece),
    }
}

/// Queues `bytes` on replica `r`'s connection, or holds them while the
/// connection runs (its client is out of the map).
fn send_to(
    clients: &mut HashMap<u64, Box<Client>>,
    r: &mut crate::state::repl::Replica,
    bytes: &[u8],
) {
    match clients.get_mut(&r.id) {
        Some(cl) => {
            if !r.held.is_empty() {
                cl.pending.extend_from_slice(&std::mem::take(&mut r.held));
            }
            cl.pending.extend_from_slice(bytes);
            cl.wake.notify_one();
        }
        None => r.held.extend_from_slice(bytes),
    }
}
