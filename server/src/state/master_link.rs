//! This server as a replica: following a master (REPLICAOF, a FAILOVER's
//! hand-over), dropping the link to make it again, and going back to being
//! a master. The link task itself is the network floor's; it starts at the
//! next cron from `State::repl.master`.

use crate::core::clock::now_ms;
use crate::state::repl::{Master, MasterState};
use crate::state::State;
use protocol::ReplyBuf;

impl State {
    /// A replica without its master that must not serve stale data.
    pub fn serving_stale_refused(&self) -> bool {
        !self.cfg.replica_serve_stale_data
            && self
                .repl
                .master
                .as_ref()
                .is_some_and(|m| m.state != crate::state::repl::MasterState::Connected)
    }
}

/// Makes this server a replica of `host:port`; the link task starts at
/// the next cron. Its own replicas stay, as in Redis 7.0: they are dropped
/// (to resync) only once the history changes, when the new master's RDB
/// has arrived or a partial resync brings a new replication ID.
pub fn set_master(st: &mut State, host: &str, port: u16) {
    st.repl.gens += 1;
    let now_s = now_ms() / 1000;
    // A replica keeps its place in the stream, database included, to
    // resume it with the next master (Redis's cached master).
    let db = st.repl.master.as_ref().map_or(0, |m| m.db);
    // Leaving a master it was connected to is a link going down (what a
    // cluster replica's failover measures its data's age from).
    let down_since_s = match st.repl.master.as_ref() {
        Some(m) if m.state == MasterState::Connected => now_s,
        Some(m) => m.down_since_s,
        None => 0,
    };
    st.repl.master = Some(Master {
        host: host.to_string(),
        port,
        gen: st.repl.gens,
        started: false,
        state: MasterState::Connect,
        last_io_s: now_s,
        down_since_s,
        db,
        unapplied: 0,
        transfer: None,
        ended: tokio::sync::watch::Sender::new(()),
    });
    // Its blocked clients would be served by writes it no longer makes
    // (Redis closes them too).
    let blocked: Vec<u64> = st
        .clients
        .values()
        .filter(|cl| cl.blocked.is_some() && !cl.killed)
        .map(|cl| cl.id)
        .collect();
    for id in blocked {
        let Some(mut cl) = st.clients.remove(&id) else {
            continue;
        };
        if let Some(b) = cl.blocked.take() {
            st.unregister_blocked(id, &b);
            st.repl.waiters.retain(|w| w.id != id);
        }
        let mut out = ReplyBuf::new(cl.resp3);
        out.error("UNBLOCKED force unblock from blocking operation, instance state changed (master -> replica?)");
        cl.pending.extend_from_slice(&out.buf);
        cl.close_after_reply = true;
        cl.wake.notify_one();
        st.clients.insert(id, cl);
    }
    crate::core::log::set_role(true);
    tracing::info!("Connecting to MASTER {host}:{port}");
    // CONFIG GET and CONFIG REWRITE show the live master, as Redis's do.
    st.cfg.set("replicaof", &format!("{host} {port}")).ok();
    apply_oom(st);
}

/// `oom-score-adj` follows the role.
fn apply_oom(st: &mut State) {
    if let Err(e) = st.apply_oom() {
        tracing::warn!("{e}");
    }
}

/// CLIENT KILL TYPE master: the link to the master is dropped and made
/// again (PSYNC, partial if the master still holds the offset). False
/// when this server has no master.
pub fn drop_master_link(st: &mut State) -> bool {
    let Some(m) = st.repl.master.as_mut() else {
        return false;
    };
    st.repl.gens += 1;
    m.gen = st.repl.gens;
    m.started = false;
    m.state = MasterState::Connect;
    true
}

/// This server stops following its master (`why` is logged): its data
/// stays; its history is its own from here, and the master's so far stays
/// valid for PSYNC.
pub fn unset_master(st: &mut State, why: &str) {
    if st.repl.master.take().is_some() {
        let old = std::mem::replace(&mut st.replid, crate::core::random::random_hex40());
        st.repl.shift_id(old);
        st.repl.sel_db = None;
        st.cfg.set("replicaof", "").ok();
        crate::core::log::set_role(false);
        tracing::info!("MASTER MODE enabled ({why})");
        apply_oom(st);
    }
}
