//! Blocked clients' bookkeeping: the queues of clients waiting on each
//! key (`State::blocking`), the keys a write made ready for them, and the
//! statistics of a wait that ends. Serving them runs their commands
//! again, which is the dispatcher's part.

use crate::state::{BlockKind, Blocked, Client, State};
use bytes::Bytes;
use storage::Value;

impl State {
    /// Registers client `id` as waiting on each of `b`'s keys, keeping its
    /// place in a queue it is already in.
    pub fn register_blocked(&mut self, id: u64, b: &Blocked) {
        for k in &b.keys {
            let q = self.shard.blocking.entry((b.db, k.clone())).or_default();
            if !q.contains(&id) {
                q.push_back(id);
            }
        }
    }

    pub fn unregister_blocked(&mut self, id: u64, b: &Blocked) {
        for k in &b.keys {
            let slot = (b.db, k.clone());
            if let Some(q) = self.shard.blocking.get_mut(&slot) {
                q.retain(|&c| c != id);
                if q.is_empty() {
                    self.shard.blocking.remove(&slot);
                }
            }
        }
    }

    pub fn signal_ready(&mut self, db: usize, key: &[u8]) {
        let slot = (db, Bytes::copy_from_slice(key));
        if self.shard.blocking.contains_key(&slot) && !self.shard.ready_keys.contains(&slot) {
            self.shard.ready_keys.push(slot);
        }
    }

    /// Why a blocked XREADGROUP on `key` cannot go on: its stream or its
    /// group went away (Redis 7.0 fails it then; XREAD keeps waiting).
    pub fn stream_wait_gone(&self, cl: &Client, db: usize, key: &[u8]) -> Option<&'static str> {
        let b = cl
            .blocked
            .as_ref()
            .filter(|b| b.kind == BlockKind::Stream)?;
        if !b.args[0].eq_ignore_ascii_case(b"xreadgroup") {
            return None;
        }
        let Some(Value::Stream(s)) = self.shard.dbs[db].get(key) else {
            return Some("UNBLOCKED the stream key no longer exists");
        };
        let at = b
            .args
            .iter()
            .position(|x| x.eq_ignore_ascii_case(b"group"))?;
        let group = b.args.get(at + 1)?;
        (!s.groups.contains_key(&group[..]))
            .then_some("NOGROUP the consumer group this client was blocked on no longer exists")
    }

    /// A blocked command's end (served, timed out, or failed by CLIENT
    /// UNBLOCK) in its statistics: the time its last run took, a
    /// failure, a latency sample, as Redis counts it when it unblocks.
    pub fn unblocked_stats(&mut self, slot: usize, dur: u64, failed: bool) {
        let track = self.tun.latency_tracking;
        let stat = self.stats.cmd_mut(slot);
        stat.usec += dur;
        stat.failed += failed as u64;
        if track {
            crate::state::record_latency(stat, dur);
        }
    }
}
