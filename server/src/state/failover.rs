//! FAILOVER's state machine on the master: waiting for a replica to catch
//! up (writes paused), handing over to it, or giving up.

use crate::core::clock::now_ms;
use crate::state::master_link::{set_master, unset_master};
use crate::state::repl::{FailoverState, Link};
use crate::state::State;

/// The FAILOVER ends: writes go on.
pub fn clear_failover(st: &mut State) {
    st.repl.failover = Default::default();
    st.pause = None;
}

/// The FAILOVER ends without a new master: this server stays (or is
/// again) the master, and its replicas resync to learn its new ID.
pub fn abort_failover(st: &mut State, why: &str) {
    tracing::info!("FAILOVER aborted: {why}");
    if st.repl.failover.state == FailoverState::InProgress {
        unset_master(st, "failover aborted");
        let ids: Vec<u64> = st.repl.replicas.iter().map(|r| r.id).collect();
        for id in ids {
            st.kill_client(id);
        }
    }
    clear_failover(st);
}

/// A FAILOVER waiting for a replica: the target (or any replica) that
/// acknowledged the whole stream becomes this server's master; past the
/// timeout, FORCE fails over anyway, else the failover is abandoned.
pub fn failover_cron(st: &mut State) {
    if st.repl.failover.state != FailoverState::WaitForSync {
        return;
    }
    let f = &st.repl.failover;
    if f.end_ms > 0 && f.end_ms <= now_ms() {
        match f.target.clone().filter(|_| f.force) {
            Some((host, port)) => {
                tracing::info!("FAILOVER to {host}:{port} time out exceeded, failing over.");
                fail_over(st, &host, port);
            }
            None => abort_failover(st, "Replica never caught up before timeout"),
        }
        return;
    }
    let offset = st.repl.offset;
    let synced = st.repl.replicas.iter().find(|r| {
        matches!(r.link, Link::Online)
            && r.ack_offset == offset
            && f.target
                .as_ref()
                .is_none_or(|(h, p)| r.ip.eq_ignore_ascii_case(h) && r.port == *p as i64)
    });
    if let Some(r) = synced {
        let (host, port) = (r.ip.clone(), r.port as u16);
        tracing::info!("Failover target {host}:{port} is synced, failing over.");
        fail_over(st, &host, port);
    }
}

fn fail_over(st: &mut State, host: &str, port: u16) {
    st.repl.failover.state = FailoverState::InProgress;
    set_master(st, host, port);
}
