//! What this server tells of its place in replication: INFO replication
//! and ROLE.

use crate::state::repl::{Link, MasterState, Replica};
use crate::state::State;
use protocol::ReplyBuf;
use std::sync::atomic::Ordering::Relaxed;

/// INFO replication.
pub fn info(st: &State, now_ms: i64) -> String {
    let r = &st.repl;
    let mut s = String::new();
    match &r.master {
        None => s += "role:master\r\n",
        Some(m) => {
            let up = m.state == MasterState::Connected;
            s += "role:slave\r\n";
            s += &format!("master_host:{}\r\n", m.host);
            s += &format!("master_port:{}\r\n", m.port);
            s += &format!("master_link_status:{}\r\n", if up { "up" } else { "down" });
            s += &format!(
                "master_last_io_seconds_ago:{}\r\n",
                if up { now_ms / 1000 - m.last_io_s } else { -1 }
            );
            s += &format!(
                "master_sync_in_progress:{}\r\n",
                (m.state == MasterState::Sync) as u8
            );
            s += &format!("slave_read_repl_offset:{}\r\n", r.offset + m.unapplied);
            s += &format!("slave_repl_offset:{}\r\n", r.offset);
            if let Some(t) = &m.transfer {
                let read = t.received.bytes.load(Relaxed) as i64;
                let perc = if t.total == 0 {
                    0.0
                } else {
                    read as f64 / t.total as f64 * 100.0
                };
                s += &format!("master_sync_total_bytes:{}\r\n", t.total);
                s += &format!("master_sync_read_bytes:{read}\r\n");
                s += &format!("master_sync_left_bytes:{}\r\n", t.total - read);
                s += &format!("master_sync_perc:{perc:.2}\r\n");
                s += &format!(
                    "master_sync_last_io_seconds_ago:{}\r\n",
                    now_ms / 1000 - t.received.last_io_s.load(Relaxed)
                );
            }
            if !up {
                let since = match m.down_since_s {
                    0 => -1,
                    t => now_ms / 1000 - t,
                };
                s += &format!("master_link_down_since_seconds:{since}\r\n");
            }
            s += &format!("slave_priority:{}\r\n", st.cfg.replica_priority);
            s += &format!("slave_read_only:{}\r\n", st.cfg.replica_read_only as u8);
            s += &format!("replica_announced:{}\r\n", st.cfg.replica_announced as u8);
        }
    }
    s += &format!("connected_slaves:{}\r\n", r.replicas.len());
    if st.cfg.min_replicas_to_write > 0 && st.cfg.min_replicas_max_lag > 0 {
        s += &format!(
            "min_slaves_good_slaves:{}\r\n",
            r.good_replicas(now_ms / 1000, st.cfg.min_replicas_max_lag)
        );
    }
    for (i, x) in r.replicas.iter().enumerate() {
        s += &format!(
            "slave{i}:ip={},port={},state={},offset={},lag={}\r\n",
            x.ip,
            x.port,
            x.state_name(),
            x.ack_offset,
            now_ms / 1000 - x.ack_time_s
        );
    }
    let (first, histlen) = r.backlog_span();
    s += &format!("master_failover_state:{}\r\n", r.failover.state.name());
    s += &format!("master_replid:{}\r\n", st.replid);
    let none = "0000000000000000000000000000000000000000";
    s += &format!(
        "master_replid2:{}\r\n",
        r.replid2.as_deref().unwrap_or(none)
    );
    s += &format!("master_repl_offset:{}\r\n", r.offset);
    s += &format!("second_repl_offset:{}\r\n", r.second_offset);
    s += &format!("repl_backlog_active:{}\r\n", r.backlog_active() as u8);
    s += &format!("repl_backlog_size:{}\r\n", st.cfg.repl_backlog_size);
    s += &format!("repl_backlog_first_byte_offset:{first}\r\n");
    s += &format!("repl_backlog_histlen:{histlen}\r\n");
    s
}

/// ROLE: a replica's master and link; a master's offset and its online
/// replicas.
pub fn role(st: &State, out: &mut ReplyBuf) {
    if let Some(m) = &st.repl.master {
        out.array(5);
        out.bulk(b"slave");
        out.bulk(m.host.as_bytes());
        out.int(m.port as i64);
        out.bulk(m.state.role_name().as_bytes());
        out.int(st.repl.offset as i64);
        return;
    }
    let online: Vec<&Replica> = st
        .repl
        .replicas
        .iter()
        .filter(|r| matches!(r.link, Link::Online))
        .collect();
    out.array(3);
    out.bulk(b"master");
    out.int(st.repl.offset as i64);
    out.array(online.len());
    for r in online {
        out.array(3);
        out.bulk(r.ip.as_bytes());
        out.bulk(r.port.to_string().as_bytes());
        out.bulk(r.ack_offset.to_string().as_bytes());
    }
}
