//! The cluster's clock (Redis's `clusterCron`, ten times a second, and
//! `clusterUpdateState`): links to open, PINGs to send, nodes that stopped
//! answering within the node timeout flagged PFAIL, handshakes that took
//! too long dropped, a replica's failover and migration, and the cluster's
//! state.

use super::{Cluster, Health, Outbox};
use protocol::bus::{flag, kind};
use rand::seq::SliceRandom;

/// How long a master must be orphaned before a replica migrates to it.
const REPLICA_MIGRATION_DELAY: i64 = 5000;

/// A link the network floor must open: its id, and where to.
pub struct Connect {
    pub link: u64,
    pub ip: String,
    pub cport: u16,
}

impl Cluster {
    /// One tick; returns the links to open.
    pub fn cron(&mut self, now: i64, out: &mut Outbox) -> Vec<Connect> {
        self.iteration += 1;
        let timeout = self.set.node_timeout;
        let handshake_timeout = timeout.max(1000);
        let mut connect = Vec::new();
        let mut i = 0;
        while i < self.nodes.len() {
            let n = &self.nodes[i];
            if n.is(flag::MYSELF | flag::NOADDR) {
                i += 1;
                continue;
            }
            if n.is(flag::HANDSHAKE) && now - n.ctime > handshake_timeout {
                self.del_node(i);
                continue;
            }
            if n.link.is_none() {
                let (ip, cport, name) = (n.ip.clone(), n.cport, n.name);
                let (link, _) = self.new_link(Some(name), now);
                connect.push(Connect { link, ip, cport });
            }
            i += 1;
        }
        if self.iteration.is_multiple_of(10) {
            self.ping_random(now);
        }
        for i in 0..self.nodes.len() {
            let n = &self.nodes[i];
            if n.is(flag::MYSELF | flag::NOADDR | flag::HANDSHAKE) {
                continue;
            }
            let ping_delay = now - n.ping_sent;
            let data_delay = now - n.data_received;
            if let Some(l) = n.link {
                let old = self.links.get(&l).is_some_and(|l| now - l.ctime > timeout);
                if old && n.ping_sent != 0 && ping_delay > timeout / 2 && data_delay > timeout / 2 {
                    self.free_link(l);
                }
            }
            let n = &self.nodes[i];
            if let Some(l) = n.link {
                if n.ping_sent == 0 && now - n.pong_received > timeout / 2 {
                    self.send_ping(l, kind::PING, now);
                    continue;
                }
                if self.mf.end != 0 && self.me().is_master() && self.mf.replica == Some(n.name) {
                    self.send_ping(l, kind::PING, now);
                    continue;
                }
            }
            let n = &mut self.nodes[i];
            if n.ping_sent == 0 {
                continue;
            }
            if ping_delay.min(data_delay) > timeout && !n.is(flag::PFAIL | flag::FAIL) {
                tracing::debug!("*** NODE {} possibly failing", n.name_str());
                n.flags |= flag::PFAIL;
                out.update_state = true;
            }
        }
        if self.mf.end != 0 && self.mf.end < now {
            tracing::warn!("Manual failover timed out.");
            self.reset_manual_failover(out);
        }
        if !self.me().is_master() {
            self.handle_manual_failover();
            self.handle_replica_failover(now, out);
            self.replica_migration(now, out);
        }
        if out.update_state || self.health == Health::Fail {
            self.health_update(now);
        }
        connect
    }

    /// Every second: PING the node whose PONG is oldest of five chosen at
    /// random among those with a link and no PING in flight.
    fn ping_random(&mut self, now: i64) {
        let mut rng = rand::thread_rng();
        let candidates: Vec<usize> = (0..self.nodes.len())
            .filter(|&i| {
                let n = &self.nodes[i];
                n.link.is_some() && n.ping_sent == 0 && !n.is(flag::MYSELF | flag::HANDSHAKE)
            })
            .collect();
        let best = candidates
            .choose_multiple(&mut rng, 5)
            .min_by_key(|&&i| self.nodes[i].pong_received)
            .copied();
        if let Some(l) = best.and_then(|i| self.nodes[i].link) {
            self.send_ping(l, kind::PING, now);
        }
    }

    /// A replica whose master has more working replicas than the barrier
    /// asks moves to a master with slots and none, once that master was
    /// orphaned a while; only the replica with the smallest name moves.
    fn replica_migration(&mut self, now: i64, out: &mut Outbox) {
        if self.health != Health::Ok || !self.set.allow_replica_migration {
            return;
        }
        let Some(m) = self.my_master() else { return };
        let ok = |c: &Cluster, i: usize| -> Vec<usize> {
            c.replicas_of(i)
                .filter(|&r| !c.nodes[r].is(flag::FAIL | flag::PFAIL))
                .collect()
        };
        let mine = ok(self, m);
        // Only from a master with the most working replicas (two at least),
        // and above the barrier.
        let most = (0..self.nodes.len())
            .filter(|&i| self.nodes[i].is_master())
            .map(|i| ok(self, i).len())
            .max()
            .unwrap_or(0);
        if mine.len() < most.max(2) || (mine.len() as i64) <= self.set.migration_barrier {
            return;
        }
        let smallest = mine.iter().min_by_key(|&&r| self.nodes[r].name).copied();
        if smallest != Some(self.my_index()) {
            return;
        }
        let target = (0..self.nodes.len()).find(|&i| {
            let n = &self.nodes[i];
            n.is_master()
                && !n.failed()
                && n.is(flag::MIGRATE_TO)
                && self.count_slots(i) > 0
                && ok(self, i).is_empty()
        });
        let Some(t) = target else {
            self.orphaned_time = 0;
            return;
        };
        if self.orphaned_time == 0 {
            self.orphaned_time = now;
        }
        if now - self.orphaned_time > REPLICA_MIGRATION_DELAY {
            tracing::warn!("Migrating to orphaned master {}", self.nodes[t].name_str());
            self.orphaned_time = 0;
            self.set_my_master(t, out);
        }
    }
}
