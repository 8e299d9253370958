//! Failure detection and the cluster's state (Redis's
//! `markNodeAsFailingIfNeeded`, `clearNodeFailureIfNeeded` and
//! `clusterUpdateState`): a node is FAIL once a majority of masters saw it
//! unreachable, and the cluster is ok when its slots are served and a
//! majority of its masters is reachable.

use super::{Cluster, Health, Outbox, FAIL_UNDO_TIME_MULT, SLOTS};
use protocol::bus::flag;

/// How long a master that was in a minority waits before it takes
/// writes again (clamped node timeout), and after start-up.
const MIN_REJOIN_DELAY: i64 = 500;
const MAX_REJOIN_DELAY: i64 = 5000;
const WRITABLE_DELAY: i64 = 2000;

impl Cluster {
    /// Marks node `i` FAIL once a majority of masters (this one included,
    /// if it is one) report it unreachable, and tells everyone.
    pub fn mark_failing_if_needed(&mut self, i: usize, now: i64, out: &mut Outbox) {
        let n = &self.nodes[i];
        if !n.is(flag::PFAIL) || n.failed() {
            return;
        }
        let mut failures = self.count_failure_reports(i, now);
        if self.me().is_master() {
            failures += 1;
        }
        if failures < self.quorum() {
            return;
        }
        tracing::info!(
            "Marking node {} as failing (quorum reached).",
            self.nodes[i].name_str()
        );
        let n = &mut self.nodes[i];
        n.flags = (n.flags & !flag::PFAIL) | flag::FAIL;
        n.fail_time = now;
        let name = n.name;
        let frame = self.fail_message(&name);
        self.broadcast(protocol::bus::kind::FAIL, &frame);
        out.update_state = true;
        out.save = true;
    }

    /// Clears FAIL from a node that is reachable again: at once for a
    /// replica or a master without slots, after a while for a master whose
    /// slots nobody took.
    pub fn clear_failure_if_needed(&mut self, i: usize, now: i64, out: &mut Outbox) {
        let n = &self.nodes[i];
        let timeout = self.set.node_timeout;
        let slots = self.count_slots(i);
        if !n.is_master() || slots == 0 {
            tracing::info!(
                "Clear FAIL state for node {}: {} is reachable again.",
                n.name_str(),
                if n.is_master() {
                    "master without slots"
                } else {
                    "replica"
                }
            );
        } else if now - n.fail_time > timeout * FAIL_UNDO_TIME_MULT {
            tracing::info!(
                "Clear FAIL state for node {}: is reachable again and nobody is serving its slots after some time.",
                n.name_str()
            );
        } else {
            return;
        }
        self.nodes[i].flags &= !flag::FAIL;
        out.update_state = true;
        out.save = true;
    }

    /// `cluster_state`: ok when every slot is served by a node not FAIL
    /// (unless full coverage is not required) and a majority of the masters
    /// serving slots is reachable; a master back from a minority waits a
    /// little before it says ok.
    pub fn health_update(&mut self, now: i64) {
        if self.first_state_call == 0 {
            self.first_state_call = now;
        }
        if self.me().is_master()
            && self.health == Health::Fail
            && now - self.first_state_call < WRITABLE_DELAY
        {
            return;
        }
        let mut new = Health::Ok;
        if self.set.require_full_coverage
            && (0..SLOTS).any(|s| self.slots[s].is_none_or(|o| self.nodes[o].failed()))
        {
            new = Health::Fail;
        }
        let mut counts = vec![0usize; self.nodes.len()];
        for o in self.slots.iter().flatten() {
            counts[*o] += 1;
        }
        let (mut size, mut reachable) = (0, 0);
        for (n, count) in self.nodes.iter().zip(counts) {
            if n.is_master() && count > 0 {
                size += 1;
                if !n.is(flag::FAIL | flag::PFAIL) {
                    reachable += 1;
                }
            }
        }
        self.size = size;
        if reachable < size / 2 + 1 {
            new = Health::Fail;
            self.among_minority_time = now;
        }
        if new == self.health {
            return;
        }
        let rejoin = self
            .set
            .node_timeout
            .clamp(MIN_REJOIN_DELAY, MAX_REJOIN_DELAY);
        if new == Health::Ok && self.me().is_master() && now - self.among_minority_time < rejoin {
            return;
        }
        tracing::warn!(
            "Cluster state changed: {}",
            if new == Health::Ok { "ok" } else { "fail" }
        );
        self.health = new;
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Node, Outbox};
    use super::*;
    use protocol::bus::{kind, Header, Name};

    fn name(c: u8) -> Name {
        [c; 40]
    }

    /// Three masters (this node `a` and `b`, `c`), a third of the slots
    /// each, and `r` a replica of `b`; an hour after start-up.
    fn three() -> (Cluster, i64) {
        let mut cl = Cluster::new(name(b'a'));
        cl.set.node_timeout = 1000;
        cl.set.require_full_coverage = true;
        for c in [b'b', b'c'] {
            cl.add_node(Node::new(name(c), flag::MASTER));
        }
        let mut r = Node::new(name(b'r'), flag::REPLICA);
        r.master = Some(name(b'b'));
        cl.add_node(r);
        for s in 0..SLOTS as u16 {
            cl.assign(s, Some(s as usize % 3));
        }
        for (i, n) in cl.nodes.iter_mut().enumerate() {
            n.config_epoch = i as u64 + 1;
        }
        cl.current_epoch = 3;
        let now = 3_600_000;
        cl.first_state_call = 1;
        cl.health_update(now);
        (cl, now)
    }

    #[test]
    fn the_state_follows_coverage_and_the_majority() {
        let (mut cl, now) = three();
        assert_eq!((cl.health, cl.size), (Health::Ok, 3));
        // A master only suspected: its slots still count as served.
        cl.nodes[1].flags |= flag::PFAIL;
        cl.health_update(now);
        assert_eq!(cl.health, Health::Ok);
        cl.nodes[1].flags = flag::MASTER | flag::FAIL;
        cl.health_update(now);
        assert_eq!(cl.health, Health::Fail);
        // Without full coverage, two masters of three are a majority...
        cl.set.require_full_coverage = false;
        cl.health_update(now + 10_000);
        assert_eq!(cl.health, Health::Ok);
        // ...and one of three is not.
        cl.nodes[2].flags |= flag::PFAIL;
        cl.health_update(now + 20_000);
        assert_eq!(cl.health, Health::Fail);
    }

    #[test]
    fn a_majority_of_reports_marks_a_node_failed() {
        let (mut cl, now) = three();
        let mut out = Outbox::default();
        cl.nodes[1].flags |= flag::PFAIL;
        // This master alone is one of the two votes needed.
        cl.mark_failing_if_needed(1, now, &mut out);
        assert!(!cl.nodes[1].failed());
        cl.add_failure_report(1, name(b'c'), now);
        cl.mark_failing_if_needed(1, now, &mut out);
        assert!(cl.nodes[1].failed());
        // Reports older than two node timeouts do not count.
        let (mut cl, now) = three();
        cl.nodes[1].flags |= flag::PFAIL;
        cl.add_failure_report(1, name(b'c'), now - 2001);
        cl.mark_failing_if_needed(1, now, &mut out);
        assert!(!cl.nodes[1].failed());
    }

    #[test]
    fn a_master_votes_once_per_epoch_for_a_replica_of_a_failed_master() {
        let (mut cl, now) = three();
        let mut out = Outbox::default();
        let mut req = Header::new(kind::FAILOVER_AUTH_REQUEST, name(b'r'));
        req.current_epoch = 4;
        cl.current_epoch = 4;
        // Its master is up: no vote.
        cl.vote(3, &req, now, &mut out);
        assert_eq!(cl.last_vote_epoch, 0);
        cl.nodes[1].flags |= flag::FAIL;
        cl.vote(3, &req, now, &mut out);
        assert_eq!(cl.last_vote_epoch, 4);
        // Not twice in an epoch, nor for the same master within two node
        // timeouts.
        cl.last_vote_epoch = 0;
        cl.vote(3, &req, now + 1000, &mut out);
        assert_eq!(cl.last_vote_epoch, 0);
        cl.vote(3, &req, now + 2001, &mut out);
        assert_eq!(cl.last_vote_epoch, 4);
        // A request at an old epoch, or claiming slots a newer epoch owns.
        cl.current_epoch = 5;
        cl.last_vote_epoch = 0;
        cl.vote(3, &req, now + 10_000, &mut out);
        assert_eq!(cl.last_vote_epoch, 0);
        req.current_epoch = 5;
        req.config_epoch = 1;
        protocol::bus::set_slot(&mut req.slots, 2);
        cl.vote(3, &req, now + 10_000, &mut out);
        assert_eq!(cl.last_vote_epoch, 0);
    }
}
