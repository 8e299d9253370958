//! The replica link's handshake: PING, AUTH with `masteruser`/`masterauth`,
//! REPLCONF listening-port and capa, PSYNC with the replication ID and
//! offset this server has; then the full resync (see [`super::full_sync`])
//! or the partial one, after which this server follows the master's
//! history.

use super::full_sync::full_sync;
use super::link_state::{current, set_state};
use super::link_wire::{ask, line};
use crate::state::repl::MasterState;
use crate::state::{Shared, State};
use bytes::BytesMut;
use std::io;
use std::sync::Arc;
use tokio::io::{AsyncRead, AsyncWrite};
use tracing::info;

/// Up to the stream: the handshake, then the master's RDB or its backlog;
/// false if a newer REPLICAOF took over.
pub(super) async fn handshake<S: AsyncRead + AsyncWrite + Unpin>(
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
    let (user, pass, my_port, my_ip, replid, offset, failover) = {
        let st = shared.lock_eventually().await;
        (
            st.cfg.masteruser.clone(),
            st.cfg.masterauth.clone(),
            // The port replicas of this one connect to, as Redis tells it
            // (`replica-announce-port` for one behind NAT).
            match st.cfg.replica_announce_port {
                0 if st.cfg.tls_replication => st.cfg.tls_port as u16,
                0 => st.tcp_port,
                p => p as u16,
            },
            st.cfg.replica_announce_ip.clone(),
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
    if !my_ip.is_empty() {
        let r = ask(sock, buf, &["REPLCONF", "ip-address", &my_ip]).await?;
        if r.starts_with('-') {
            tracing::info!("(Non critical) Master does not understand REPLCONF ip-address: {r}");
        }
    }
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
        st.shard.replica_keys_with_expire = storage::Dict::new();
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

fn drop_replicas(st: &mut State) {
    let ids: Vec<u64> = st.repl.replicas.iter().map(|r| r.id).collect();
    for id in ids {
        st.kill_client(id);
    }
}
