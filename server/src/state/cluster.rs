//! Cluster mode in the server: the node's `Cluster` (in `core::cluster`)
//! with its config file, and what the bus's logic asks of the rest of the
//! server — follow a master, drop a lost slot's keys, deliver a message
//! published elsewhere, pause writers for a manual failover. The network
//! floor (`net::bus`) calls in here with what arrives and at each tick.

use crate::core::clock::now_ms;
use crate::core::cluster::cron::Connect;
use crate::core::cluster::receive::Arrival;
use crate::core::cluster::{Action, Cluster, LinkOut, Outbox, Settings};
use crate::state::{Pause, State};
use protocol::bus::{self, flag, kind};
use std::fs::File;
use std::io::Read;
use std::os::unix::fs::FileExt;
use std::sync::Arc;

/// This node in its cluster.
pub struct Mode {
    pub cl: Cluster,
    /// `nodes.conf`, held open and locked as long as the node runs.
    file: File,
    /// A manual failover paused the writers (and must resume them).
    paused_writes: bool,
    /// The bus's TLS contexts (`tls-cluster yes`), rebuilt by CONFIG SET
    /// with the clients' one; links already up keep theirs.
    pub tls: Option<Arc<crate::core::tls::Bus>>,
}

/// The client ports this node announces (`port`, `pport`): the TLS port
/// and the plain one beside it under `tls-cluster`, else the plain one
/// alone (Redis 7.0.15 sends `pport` 0 then, even with a `tls-port`).
fn client_ports(st: &State) -> (u16, u16) {
    let c = &st.cfg;
    let (port, pport) = match (c.tls_cluster, c.cluster_announce_tls_port) {
        (true, 0) if c.cluster_announce_port > 0 => (c.cluster_announce_port, c.port),
        (true, 0) => (c.tls_port, c.port),
        (true, tls) => (tls, c.cluster_announce_port),
        (false, _) if c.cluster_announce_port > 0 => (c.cluster_announce_port, 0),
        (false, _) => (c.port, 0),
    };
    (port as u16, pport as u16)
}

/// Whether client `cl` is told nodes' plain-text ports: a plain-text
/// client of a node whose bus speaks TLS (Redis 7.0.15: a TLS client of
/// a plain bus gets the one port there is).
pub fn use_pport(st: &State, cl: &crate::state::Client) -> bool {
    st.cfg.tls_cluster && !cl.tls
}

/// The port the bus's default port is 10000 above: the TLS one when the
/// bus speaks TLS.
fn client_port(c: &crate::core::config::Config) -> i64 {
    if c.tls_cluster {
        c.tls_port
    } else {
        c.port
    }
}

/// The port the bus listens on.
pub fn bus_port(st: &State) -> u16 {
    let c = &st.cfg;
    if c.cluster_port > 0 {
        c.cluster_port as u16
    } else {
        (client_port(c) + 10000) as u16
    }
}

fn settings(st: &State, now: i64) -> Settings {
    let c = &st.cfg;
    let (port, pport) = client_ports(st);
    let (repl_offset, master_link_down_s) = match &st.repl.master {
        None => (st.repl.offset, 0),
        Some(m) if m.state == crate::state::repl::MasterState::Connected => (st.repl.offset, 0),
        // A full sync drops the history: nothing processed yet, which tells
        // the other nodes to keep this replica from clients meanwhile.
        Some(m) if m.state == crate::state::repl::MasterState::Sync => (0, 0),
        // Never connected: as old as can be (Redis's `repl_down_since` 0).
        Some(m) => (st.repl.offset, now / 1000 - m.down_since_s),
    };
    Settings {
        node_timeout: c.cluster_node_timeout,
        announce_ip: c.cluster_announce_ip.clone(),
        announce_hostname: c.cluster_announce_hostname.clone(),
        port,
        pport,
        cport: if c.cluster_announce_bus_port > 0 {
            c.cluster_announce_bus_port as u16
        } else {
            bus_port(st)
        },
        require_full_coverage: c.cluster_require_full_coverage,
        migration_barrier: c.cluster_migration_barrier,
        allow_replica_migration: c.cluster_allow_replica_migration,
        replica_no_failover: c.cluster_replica_no_failover,
        replica_validity_factor: c.cluster_replica_validity_factor,
        link_sendbuf_limit: c.cluster_link_sendbuf_limit,
        repl_offset,
        master_link_down_s,
    }
}

/// Builds the bus's TLS contexts when it speaks TLS (see
/// `State::build_tls`).
pub fn set_tls(st: &mut State, ctx: &crate::core::tls::Contexts) -> Result<(), String> {
    let tls = match st.cfg.tls_cluster {
        true => Some(Arc::new(crate::core::tls::bus(&st.cfg, ctx)?)),
        false => None,
    };
    if let Some(m) = st.cluster.as_mut() {
        m.tls = tls;
    }
    Ok(())
}

/// At start-up, with `cluster-enabled yes`: reads (or creates) the node's
/// config file and locks it, as Redis does, so two nodes never share one.
pub fn init(st: &mut State) -> Result<(), String> {
    if !st.cfg.cluster_enabled {
        return Ok(());
    }
    if st.cfg.cluster_port == 0 && client_port(&st.cfg) > 55535 {
        return Err("Redis port number too high. Cluster communication port is 10,000 port numbers higher than your Redis port. Your Redis port number must be 55535 or less.".into());
    }
    let path = std::path::Path::new(&st.cfg.dir).join(&st.cfg.cluster_config_file);
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
        .map_err(|e| {
            format!(
                "Can't open {} in order to acquire a lock: {e}",
                path.display()
            )
        })?;
    // SAFETY: flock on a descriptor this function owns.
    if unsafe {
        libc::flock(
            std::os::fd::AsRawFd::as_raw_fd(&file),
            libc::LOCK_EX | libc::LOCK_NB,
        )
    } != 0
    {
        return Err(format!("Sorry, the cluster configuration file {} is already used by a different Redis Cluster node. Please make sure that different nodes use different cluster configuration files.", st.cfg.cluster_config_file));
    }
    let mut text = String::new();
    file.read_to_string(&mut text)
        .map_err(|e| format!("Unrecoverable error: can't read the cluster config file: {e}"))?;
    let loaded = Cluster::from_conf(&text).map_err(|e| {
        let line = text.lines().nth(e.line.saturating_sub(1)).unwrap_or("");
        format!("Unrecoverable error: corrupted cluster config file \"{line}\".")
    })?;
    let now = now_ms();
    let cl = match loaded {
        Some(mut cl) => {
            for n in cl.nodes.iter_mut() {
                n.connected = n.is(flag::MYSELF);
                n.ctime = now;
            }
            tracing::info!("Node configuration loaded, I'm {}", cl.me().name_str());
            cl
        }
        None => {
            let cl = Cluster::new(crate::core::cluster::random_name());
            tracing::info!("No cluster configuration found, I'm {}", cl.me().name_str());
            cl
        }
    };
    for db in st.shard.dbs.iter_mut() {
        *db = storage::Db::slotted();
    }
    st.cluster = Some(Box::new(Mode {
        cl,
        file,
        paused_writes: false,
        tls: None,
    }));
    refresh(st, now);
    let mut out = Outbox {
        save: true,
        fsync: true,
        ..Outbox::default()
    };
    with(st, |cl, _| cl.health_update(now), &mut out);
    // A replica in the file follows its master again.
    let master = st
        .cluster
        .as_ref()
        .and_then(|m| m.cl.my_master().map(|i| m.cl.nodes[i].clone()));
    if let Some(n) = master.filter(|n| n.has_addr() && !n.ip.is_empty()) {
        crate::state::master_link::set_master(st, &n.ip, n.port);
    }
    Ok(())
}

/// Updates what the logic reads of the config and of this node (a
/// CONFIG SET of an announced port shows at once).
pub fn refresh(st: &mut State, now: i64) {
    let set = settings(st, now);
    if let Some(m) = st.cluster.as_mut() {
        let me = m.cl.me_mut();
        (me.port, me.pport, me.cport) = (set.port, set.pport, set.cport);
        // Other nodes learn from this flag not to count on this replica.
        if set.replica_no_failover {
            me.flags |= flag::NOFAILOVER;
        } else {
            me.flags &= !flag::NOFAILOVER;
        }
        me.hostname = set.announce_hostname.clone();
        if !set.announce_ip.is_empty() {
            me.ip = set.announce_ip.clone();
        }
        m.cl.set = set;
    }
}

/// Runs `f` on the cluster, then does what it left to do.
pub fn with<R>(
    st: &mut State,
    f: impl FnOnce(&mut Cluster, &mut Outbox) -> R,
    out: &mut Outbox,
) -> Option<R> {
    refresh(st, now_ms());
    let r = f(&mut st.cluster.as_mut()?.cl, out);
    finish(st, std::mem::take(out));
    Some(r)
}

/// Does what the logic asked for, then saves the config if it changed.
pub fn finish(st: &mut State, out: Outbox) {
    for a in out.actions {
        match a {
            Action::Replicate(ip, port) => crate::state::master_link::set_master(st, &ip, port),
            Action::BecomeMaster => crate::state::master_link::unset_master(st, "cluster failover"),
            Action::DropSlots(slots) => {
                for s in slots {
                    drop_slot_keys(st, s);
                }
            }
            Action::Publish {
                shard,
                channel,
                message,
            } => {
                st.publish(shard, &channel, &message);
            }
            Action::PauseWrites(until_ms) => {
                if st.pause.is_none() {
                    st.pause = Some(Pause {
                        until_ms,
                        writes_only: true,
                    });
                    if let Some(m) = st.cluster.as_mut() {
                        m.paused_writes = true;
                    }
                }
            }
            Action::Unpause => {
                if st
                    .cluster
                    .as_mut()
                    .is_some_and(|m| std::mem::take(&mut m.paused_writes))
                {
                    st.pause = None;
                }
            }
        }
    }
    if out.update_state {
        let now = now_ms();
        if let Some(m) = st.cluster.as_mut() {
            m.cl.health_update(now);
        }
    }
    if out.save {
        save(st, out.fsync);
    }
    redirect_blocked(st);
    unsubscribe_lost_slots(st);
}

/// Subscribers of shard channels in slots that left this node's shard are
/// unsubscribed from them, each told with a `sunsubscribe`, as Redis does.
fn unsubscribe_lost_slots(st: &mut State) {
    let Some(m) = st.cluster.as_mut().filter(|m| !m.cl.lost.is_empty()) else {
        return;
    };
    let mut lost = vec![false; crate::core::cluster::SLOTS];
    for s in m.cl.lost.drain(..) {
        lost[s as usize] = true;
    }
    let channels: Vec<bytes::Bytes> = (st.pubsub.shard.keys())
        .filter(|c| lost[storage::slot::key_hash_slot(c) as usize])
        .cloned()
        .collect();
    for ch in channels {
        let ids = st.pubsub.shard.get(&ch).cloned().unwrap_or_default();
        for id in ids {
            let Some(mut cl) = st.clients.remove(&id) else {
                continue;
            };
            let mut out = protocol::ReplyBuf::new(cl.resp3);
            st.unsubscribe(
                &mut cl,
                Some(&mut out),
                crate::state::pubsub::Kind::Shard,
                std::slice::from_ref(&ch),
            );
            cl.pending.extend_from_slice(&out.buf);
            cl.wake.notify_one();
            st.woken += 1;
            st.clients.insert(id, cl);
        }
    }
}

/// Clients blocked on keys this node no longer serves, or while the
/// cluster is down, are answered -MOVED or -CLUSTERDOWN and unblocked
/// (Redis's `clusterRedirectBlockedClientIfNeeded`).
fn redirect_blocked(st: &mut State) {
    let Some(m) = st
        .cluster
        .as_ref()
        .filter(|_| !st.shard.blocking.is_empty())
    else {
        return;
    };
    let c = &m.cl;
    let me = c.my_index();
    let pref = st.cfg.cluster_preferred_endpoint_type.as_str();
    let mut answered = Vec::new();
    for cl in st.clients.values() {
        let Some(b) = cl.blocked.as_ref().filter(|b| !b.keys.is_empty()) else {
            continue;
        };
        if c.health == crate::core::cluster::Health::Fail {
            answered.push((cl.id, "CLUSTERDOWN The cluster is down".to_string()));
            continue;
        }
        for k in &b.keys {
            let slot = storage::slot::key_hash_slot(k);
            let owner = c.slots[slot as usize];
            let readable = cl.readonly && c.my_master() == owner && owner.is_some();
            if owner == Some(me) || readable || c.importing_from(slot).is_some() {
                continue;
            }
            let e = match owner {
                None => "CLUSTERDOWN Hash slot not served".to_string(),
                Some(o) => format!("MOVED {slot} {}", c.endpoint(o, pref, use_pport(st, cl))),
            };
            answered.push((cl.id, e));
            break;
        }
    }
    for (id, e) in answered {
        let Some(mut cl) = st.clients.remove(&id) else {
            continue;
        };
        if let Some(b) = cl.blocked.take() {
            st.unregister_blocked(id, &b);
        }
        let mut out = protocol::ReplyBuf::new(cl.resp3);
        out.error(&e);
        st.count_error(&e);
        cl.pending.extend_from_slice(&out.buf);
        cl.wake.notify_one();
        st.woken += 1;
        st.clients.insert(id, cl);
    }
}

/// Writes `nodes.conf` in place (the file stays locked); false if it
/// failed, which Redis treats as fatal at start-up and logs otherwise.
pub fn save(st: &mut State, fsync: bool) -> bool {
    let Some(m) = st.cluster.as_mut() else {
        return false;
    };
    let text = m.cl.to_conf();
    let ok = m.file.set_len(0).is_ok()
        && m.file.write_all_at(text.as_bytes(), 0).is_ok()
        && (!fsync || m.file.sync_all().is_ok());
    if !ok {
        tracing::warn!("Could not save the cluster configuration to disk");
    }
    ok
}

/// Deletes the keys of a slot this node lost, as Redis's `delKeysInSlot`:
/// each as if deleted by DEL, propagated.
pub fn drop_slot_keys(st: &mut State, slot: u16) -> usize {
    let keys = st.shard.dbs[0].slot_keys(slot as usize, usize::MAX);
    for k in &keys {
        st.shard.dbs[0].remove(k);
        st.dirty += 1;
        st.server_deleted(0, k, crate::core::config::class::GENERIC, "del");
    }
    keys.len()
}

/// A link another node opened to this one.
pub fn accepted(st: &mut State) -> Option<(u64, Arc<LinkOut>)> {
    let m = st.cluster.as_mut()?;
    Some(m.cl.new_link(None, now_ms()))
}

/// A link this node opened is up: MEET or PING first.
pub fn connected(st: &mut State, link: u64) {
    let now = now_ms();
    with(
        st,
        |cl, _| {
            let Some(i) = cl
                .links
                .get(&link)
                .and_then(|l| l.node)
                .and_then(|n| cl.index_of(&n))
            else {
                return;
            };
            let old_ping = cl.nodes[i].ping_sent;
            let k = if cl.nodes[i].is(flag::MEET) {
                kind::MEET
            } else {
                kind::PING
            };
            cl.send_ping(link, k, now);
            if old_ping != 0 {
                cl.nodes[i].ping_sent = old_ping;
            }
            cl.nodes[i].flags &= !flag::MEET;
            tracing::debug!(
                "Connecting with Node {} at {}:{}",
                cl.nodes[i].name_str(),
                cl.nodes[i].ip,
                cl.nodes[i].cport
            );
        },
        &mut Outbox::default(),
    );
}

/// A link broke or could not be made.
pub fn closed(st: &mut State, link: u64) {
    if let Some(m) = st.cluster.as_mut() {
        m.cl.free_link(link);
    }
}

/// A message arrived on `link`; bad ones are logged and dropped, the
/// link kept, as Redis does.
pub fn receive(st: &mut State, link: u64, frame: &[u8], peer_ip: &str, local_ip: &str) {
    let msg = match bus::decode(frame) {
        Ok(m) => m,
        Err(e) => {
            tracing::warn!("Dropping a malformed cluster bus message: {e}");
            return;
        }
    };
    refresh(st, now_ms());
    let Some(mut m) = st.cluster.take() else {
        return;
    };
    let mut out = Outbox::default();
    let at = Arrival {
        link,
        peer_ip,
        local_ip,
        now: now_ms(),
    };
    let db = &st.shard.dbs[0];
    m.cl.receive(&at, msg, &|s| db.slot_len(s as usize), &mut out);
    st.cluster = Some(m);
    finish(st, out);
}

/// The cluster's tick: the links to open.
pub fn cron(st: &mut State) -> Vec<Connect> {
    let now = now_ms();
    with(st, |cl, out| cl.cron(now, out), &mut Outbox::default()).unwrap_or_default()
}
