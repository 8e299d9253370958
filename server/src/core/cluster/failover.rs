//! Failover (Redis's `clusterHandleSlaveFailover` and its neighbours): a
//! replica of a failed master waits a delay that grows with its rank
//! (replicas with more of the stream go first), asks the masters for their
//! votes at a new epoch, and takes its master's slots once a majority
//! granted it; a master votes once per epoch and once per master in two
//! node timeouts. A manual failover (CLUSTER FAILOVER) first has the master
//! pause its writers until the replica has processed everything.

use super::{Action, CantFailover, Cluster, Manual, Outbox, SLOTS};
use protocol::bus::{self, flag, kind, mflag0, Header};
use rand::Rng;

/// How long a manual failover may take, and how much longer the master
/// pauses its writers (ms).
pub const MF_TIMEOUT: i64 = 5000;
const MF_PAUSE_MULT: i64 = 2;

impl Cluster {
    /// Makes this node a replica of node `m`.
    pub fn set_my_master(&mut self, m: usize, out: &mut Outbox) {
        let name = self.nodes[m].name;
        let me = self.me_mut();
        if me.is_master() {
            me.flags &= !(flag::MASTER | flag::MIGRATE_TO);
            me.flags |= flag::REPLICA;
        }
        let old = me.master.replace(name);
        self.nodes[m].flags |= flag::MIGRATE_TO;
        self.replica_left(old);
        self.migrating.clear();
        self.importing.clear();
        let n = &self.nodes[m];
        out.actions.push(Action::Replicate(n.ip.clone(), n.port));
        self.reset_manual_failover(out);
        out.save = true;
        out.update_state = true;
    }

    /// Ends a manual failover; writers paused for it (on the master side,
    /// which may have just turned replica) resume.
    pub fn reset_manual_failover(&mut self, out: &mut Outbox) {
        if self.mf.end != 0 {
            out.actions.push(Action::Unpause);
        }
        self.mf = Manual::default();
    }

    /// A replica of this master asks for a manual failover: pause writers
    /// and tell it the offset to reach.
    pub fn manual_failover_requested(&mut self, s: usize, link: u64, now: i64, out: &mut Outbox) {
        self.reset_manual_failover(out);
        self.mf.end = now + MF_TIMEOUT;
        self.mf.replica = Some(self.nodes[s].name);
        out.actions
            .push(Action::PauseWrites(now + MF_TIMEOUT * MF_PAUSE_MULT));
        tracing::warn!(
            "Manual failover requested by replica {}.",
            self.nodes[s].name_str()
        );
        self.send_ping(link, kind::PING, now);
    }

    /// A replica asks for this master's vote (`clusterSendFailoverAuthIfNeeded`).
    pub fn vote(&mut self, s: usize, h: &Header, now: i64, out: &mut Outbox) {
        let me = self.my_index();
        if !self.nodes[me].is_master() || self.count_slots(me) == 0 {
            return;
        }
        let who = self.nodes[s].name_str().to_string();
        let denied = |why: String| tracing::warn!("Failover auth denied to {who}: {why}");
        if h.current_epoch < self.current_epoch {
            return denied(format!(
                "reqEpoch ({}) < curEpoch({})",
                h.current_epoch, self.current_epoch
            ));
        }
        if self.last_vote_epoch == self.current_epoch {
            return denied(format!("already voted for epoch {}", self.current_epoch));
        }
        let force = h.mflags[0] & mflag0::FORCEACK != 0;
        let master = self.nodes[s].master.and_then(|m| self.index_of(&m));
        let Some(m) =
            master.filter(|&m| !self.nodes[s].is_master() && (self.nodes[m].failed() || force))
        else {
            return denied(if self.nodes[s].is_master() {
                "it is a master node".into()
            } else if master.is_none() {
                "I don't know its master".into()
            } else {
                "its master is up".into()
            });
        };
        let wait = self.set.node_timeout * 2;
        if now - self.nodes[m].voted_time < wait {
            return denied(format!(
                "can't vote about this master before {} milliseconds",
                wait - (now - self.nodes[m].voted_time)
            ));
        }
        for j in 0..SLOTS as u16 {
            if !bus::has_slot(&h.slots, j) {
                continue;
            }
            let Some(o) = self.slots[j as usize] else {
                continue;
            };
            if self.nodes[o].config_epoch > h.config_epoch {
                return denied(format!(
                    "slot {j} epoch ({}) > reqEpoch ({})",
                    self.nodes[o].config_epoch, h.config_epoch
                ));
            }
        }
        self.last_vote_epoch = self.current_epoch;
        self.nodes[m].voted_time = now;
        out.save = true;
        out.fsync = true;
        let ack = self.bare_message(kind::FAILOVER_AUTH_ACK, 0);
        if let Some(l) = self.nodes[s].link {
            self.send(l, kind::FAILOVER_AUTH_ACK, ack);
        }
        tracing::warn!(
            "Failover auth granted to {who} for epoch {}",
            self.current_epoch
        );
    }

    /// Replicas of this node's master with more of the stream than this
    /// one (those that may fail over).
    fn rank(&self) -> usize {
        let Some(m) = self.my_master() else { return 0 };
        let mine = self.set.repl_offset;
        self.replicas_of(m)
            .filter(|&r| r != self.my_index() && !self.nodes[r].is(flag::NOFAILOVER))
            .filter(|&r| self.nodes[r].repl_offset > mine)
            .count()
    }

    fn cant_failover(&mut self, why: CantFailover, now: i64) {
        const LOG_EVERY: i64 = 10_000;
        if why == self.fo.cant_reason && now - self.fo.cant_logged < LOG_EVERY {
            return;
        }
        self.fo.cant_reason = why;
        // Nothing to say until the master has been down a while.
        let down_for = self
            .my_master()
            .map_or(0, |m| now - self.nodes[m].fail_time);
        if down_for < self.set.node_timeout + 5000 && why != CantFailover::DataAge {
            return;
        }
        self.fo.cant_logged = now;
        let msg = match why {
            CantFailover::DataAge => "Disconnected from master for longer than allowed. Please check the 'cluster-replica-validity-factor' configuration option.",
            CantFailover::WaitingDelay => "Waiting the delay before I can start a new failover.",
            CantFailover::Expired => "Failover attempt expired.",
            CantFailover::WaitingVotes => "Waiting for votes, but majority still not reached.",
            CantFailover::None => return,
        };
        tracing::info!("Currently unable to failover: {msg}");
    }

    /// One step of this replica's failover, from the cron.
    pub fn handle_replica_failover(&mut self, now: i64, out: &mut Outbox) {
        let manual = self.mf.end != 0 && self.mf.can_start;
        let Some(m) = self.my_master() else { return };
        let timeout = self.set.node_timeout;
        if (!manual && (!self.nodes[m].failed() || self.set.replica_no_failover))
            || self.count_slots(m) == 0
        {
            self.fo.cant_reason = CantFailover::None;
            return;
        }
        let mut data_age = self.set.master_link_down_s * 1000;
        if data_age > timeout {
            data_age -= timeout;
        }
        let factor = self.set.replica_validity_factor;
        if factor > 0 && data_age > timeout * factor + 10_000 && !manual {
            return self.cant_failover(CantFailover::DataAge, now);
        }
        let auth_timeout = (timeout * 2).max(2000);
        if now - self.fo.auth_time > auth_timeout * 2 {
            self.fo.auth_rank = self.rank();
            self.fo.auth_time = now + 500 + rand::thread_rng().gen_range(0..500);
            self.fo.auth_time += self.fo.auth_rank as i64 * 1000;
            self.fo.auth_count = 0;
            self.fo.auth_sent = false;
            if self.mf.end != 0 {
                self.fo.auth_time = now;
                self.fo.auth_rank = 0;
            }
            tracing::warn!(
                "Start of election delayed for {} milliseconds (rank #{}, offset {}).",
                self.fo.auth_time - now,
                self.fo.auth_rank,
                self.set.repl_offset
            );
            // Tell the other replicas our offset, for their ranks.
            let links: Vec<u64> = (self.replicas_of(m))
                .filter(|&r| r != self.my_index())
                .filter_map(|r| self.nodes[r].link)
                .collect();
            for l in links {
                self.send_ping(l, kind::PONG, now);
            }
            return;
        }
        if !self.fo.auth_sent && self.mf.end == 0 {
            let rank = self.rank();
            if rank > self.fo.auth_rank {
                let added = (rank - self.fo.auth_rank) as i64 * 1000;
                self.fo.auth_time += added;
                self.fo.auth_rank = rank;
                tracing::warn!(
                    "Replica rank updated to #{rank}, added {added} milliseconds of delay."
                );
            }
        }
        if now < self.fo.auth_time {
            return self.cant_failover(CantFailover::WaitingDelay, now);
        }
        if now - self.fo.auth_time > auth_timeout {
            return self.cant_failover(CantFailover::Expired, now);
        }
        if !self.fo.auth_sent {
            self.current_epoch += 1;
            self.fo.auth_epoch = self.current_epoch;
            tracing::warn!(
                "Starting a failover election for epoch {}.",
                self.current_epoch
            );
            let f = if self.mf.end != 0 {
                mflag0::FORCEACK
            } else {
                0
            };
            let req = self.bare_message(kind::FAILOVER_AUTH_REQUEST, f);
            self.broadcast(kind::FAILOVER_AUTH_REQUEST, &req);
            self.fo.auth_sent = true;
            out.save = true;
            out.fsync = true;
            out.update_state = true;
            return;
        }
        if self.fo.auth_count >= self.quorum() {
            tracing::warn!("Failover election won: I'm the new master.");
            if self.me().config_epoch < self.fo.auth_epoch {
                let e = self.fo.auth_epoch;
                self.me_mut().config_epoch = e;
                tracing::warn!("configEpoch set to {e} after successful failover");
            }
            self.replace_my_master(now, out);
        } else {
            self.cant_failover(CantFailover::WaitingVotes, now);
        }
    }

    /// This replica becomes the master of its master's slots and says so.
    pub fn replace_my_master(&mut self, now: i64, out: &mut Outbox) {
        let Some(old) = self.my_master() else { return };
        let me = self.my_index();
        self.set_node_as_master(me, out);
        out.actions.push(Action::BecomeMaster);
        for s in 0..SLOTS as u16 {
            if self.slots[s as usize] == Some(old) {
                self.assign(s, Some(me));
            }
        }
        out.update_state = true;
        out.save = true;
        out.fsync = true;
        self.health_update(now);
        self.broadcast_pong(now);
        self.reset_manual_failover(out);
    }

    /// A manual failover's replica: can it start (has it processed all
    /// the paused master sent)?
    pub fn handle_manual_failover(&mut self) {
        if self.mf.end == 0 || self.mf.can_start || self.mf.master_offset == -1 {
            return;
        }
        if self.mf.master_offset == self.set.repl_offset as i64 {
            self.mf.can_start = true;
            tracing::warn!("All master replication stream processed, manual failover can start.");
        }
    }

    /// A higher config epoch than any other node's, without asking anyone
    /// (CLUSTER FAILOVER TAKEOVER, BUMPEPOCH): true if it changed.
    pub fn bump_epoch_without_consensus(&mut self, out: &mut Outbox) -> bool {
        let max = (self.nodes.iter().map(|n| n.config_epoch))
            .chain([self.current_epoch])
            .max()
            .unwrap_or(0);
        let mine = self.me().config_epoch;
        if mine == 0 || mine != max {
            self.current_epoch += 1;
            let e = self.current_epoch;
            self.me_mut().config_epoch = e;
            out.save = true;
            out.fsync = true;
            tracing::warn!("New configEpoch set to {e}");
            true
        } else {
            false
        }
    }
}
