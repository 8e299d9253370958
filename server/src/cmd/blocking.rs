//! Blocking commands: their timeout argument, and serving the clients
//! waiting on a key when a write gives it data (see docs/ARCHITECTURE.md).

use super::{resolve, Ctx};
use crate::core::error::Error;
use crate::state::{BlockKind, Client, State};
use bytes::Bytes;
use protocol::ReplyBuf;
use storage::num::LDouble;
use storage::Value;

/// Parses a blocking command's timeout (seconds, fractions allowed) into an
/// absolute deadline in ms; 0 waits forever.
///
/// Redis reads the timeout as a C `long double` (`strtold`: decimal or hex
/// floats, `inf`), multiplies by 1000, rounds up and converts to a 64-bit
/// integer ([`LDouble::mul_ceil_i64`]). A result that does not fit (huge
/// values, `inf`) comes out as the most negative integer, hence "timeout
/// is negative" for them; a text beyond the long double range (ERANGE) is
/// "not a float". Tiny positive values round up to 1ms, tiny negative ones
/// to 0 (forever).
pub fn timeout_arg(a: &[u8], now: i64) -> Result<Option<i64>, Error> {
    let secs = LDouble::parse(a)
        .ok_or_else(|| Error::other("ERR timeout is not a float or out of range"))?;
    let ms = secs.mul_ceil_i64(1000);
    if ms < 0 {
        return Err(Error::other("ERR timeout is negative"));
    }
    Ok((ms > 0).then(|| now.saturating_add(ms)))
}

/// Blocked clients: waking them when a key they wait on gets data.
impl State {
    pub fn signal_ready(&mut self, db: usize, key: &[u8]) {
        let slot = (db, Bytes::copy_from_slice(key));
        if self.blocking.contains_key(&slot) && !self.ready_keys.contains(&slot) {
            self.ready_keys.push(slot);
        }
    }

    /// Serves clients blocked on keys that became ready, in the order they
    /// blocked, while the keys have data. A served command can make more
    /// keys ready (BLMOVE pushes), so this loops until none are left.
    pub fn serve_blocked(&mut self) {
        while !self.ready_keys.is_empty() {
            for (db, key) in std::mem::take(&mut self.ready_keys) {
                let Some(queue) = self.blocking.get(&(db, key.clone())) else {
                    continue;
                };
                for id in queue.clone() {
                    let has_data = match self.dbs[db].get(&key) {
                        Some(Value::List(_)) => Some(BlockKind::List),
                        Some(Value::ZSet(_)) => Some(BlockKind::ZSet),
                        Some(Value::Stream(_)) => Some(BlockKind::Stream),
                        _ => None,
                    };
                    let Some(mut cl) = self.clients.remove(&id) else {
                        continue;
                    };
                    if cl.killed {
                        // Closing: its element stays for the next waiter.
                        self.clients.insert(id, cl);
                        continue;
                    }
                    if let Some(e) = self.stream_wait_gone(&cl, db, &key) {
                        let b = cl.blocked.take().expect("blocked");
                        self.unregister_blocked(id, &b);
                        let mut out = ReplyBuf::new(cl.resp3);
                        out.error(e);
                        self.count_error(e);
                        if let Some(c) = super::table().get("xreadgroup") {
                            self.stats.cmd_mut(c.slot).failed += 1;
                        }
                        cl.pending.extend_from_slice(&out.buf);
                        cl.wake.notify_one();
                        self.woken += 1;
                        self.clients.insert(id, cl);
                        continue;
                    }
                    let Some(b) = cl.blocked.take_if(|b| Some(b.kind) == has_data) else {
                        self.clients.insert(id, cl);
                        continue;
                    };
                    let mut out = ReplyBuf::new(cl.resp3);
                    let cmd = resolve(&b.args).expect("blocked command is in the table");
                    let now = crate::core::clock::now_ms();
                    // The handler runs again, so it propagates what it
                    // pops now (LPOP for BLPOP, …).
                    let prop = self.command_start(cl.db);
                    let tracking = self.tracking_serve(&cl);
                    let start = std::time::Instant::now();
                    let mut ctx = Ctx {
                        st: self,
                        cl: &mut cl,
                        out: &mut out,
                        now,
                    };
                    let res = (cmd.handler)(&mut ctx, &b.args);
                    self.command_end(prop, &b.args);
                    let failed = res.is_err();
                    if let Err(e) = res {
                        out.error(&e.to_string());
                    }
                    if std::mem::take(&mut self.dirty_cas_running) {
                        cl.dirty_cas = true;
                    }
                    if let Some(again) = &mut cl.blocked {
                        // Still nothing for it: it keeps its place in the queues.
                        again.deadline = b.deadline;
                    } else {
                        let dur = start.elapsed().as_micros() as u64;
                        self.unblocked_stats(cmd.slot, dur, failed);
                        super::call::slowlog_if_slow(self, &cl, cmd, &b.args, dur);
                        self.unregister_blocked(id, &b);
                        cl.pending.extend_from_slice(&out.buf);
                        cl.wake.notify_one();
                        self.woken += 1;
                    }
                    self.tracking_served(&mut cl, tracking);
                    self.clients.insert(id, cl);
                }
            }
        }
    }

    /// Why a blocked XREADGROUP on `key` cannot go on: its stream or its
    /// group went away (Redis 7.0 fails it then; XREAD keeps waiting).
    fn stream_wait_gone(&self, cl: &Client, db: usize, key: &[u8]) -> Option<&'static str> {
        let b = cl
            .blocked
            .as_ref()
            .filter(|b| b.kind == BlockKind::Stream)?;
        if !b.args[0].eq_ignore_ascii_case(b"xreadgroup") {
            return None;
        }
        let Some(Value::Stream(s)) = self.dbs[db].get(key) else {
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

    /// CLIENT UNBLOCK: ends client `id`'s wait as if it timed out, or with
    /// an `-UNBLOCKED` error. False when it is not blocked.
    pub fn unblock_client(&mut self, id: u64, error: bool) -> bool {
        let Some(mut cl) = self.clients.remove(&id) else {
            return false;
        };
        let done = cl.blocked.is_some() && !cl.killed;
        if done {
            let mut out = ReplyBuf::new(cl.resp3);
            if error {
                let b = cl.blocked.take().expect("blocked");
                self.unregister_blocked(id, &b);
                const UNBLOCKED: &str = "UNBLOCKED client unblocked via CLIENT UNBLOCK";
                out.error(UNBLOCKED);
                self.count_error(UNBLOCKED);
                if let Ok(cmd) = resolve(&b.args) {
                    self.unblocked_stats(cmd.slot, 0, true);
                }
            } else {
                self.unblock_timed_out(&mut cl, &mut out);
            }
            cl.pending.extend_from_slice(&out.buf);
            cl.wake.notify_one();
            self.woken += 1;
        }
        self.clients.insert(id, cl);
        done
    }

    /// A blocked command's end (served, timed out, or failed by CLIENT
    /// UNBLOCK) in its statistics: the time its last run took, a
    /// failure, a latency sample, as Redis counts it when it unblocks.
    fn unblocked_stats(&mut self, slot: usize, dur: u64, failed: bool) {
        let track = self.tun.latency_tracking;
        let stat = self.stats.cmd_mut(slot);
        stat.usec += dur;
        stat.failed += failed as u64;
        if track {
            super::call::record_latency(stat, dur);
        }
    }

    /// Ends a client's wait with its timeout reply (a null array; WAIT's
    /// is the number of replicas that acknowledged its writes).
    pub fn unblock_timed_out(&mut self, cl: &mut Client, out: &mut ReplyBuf) {
        if let Some(b) = cl.blocked.take() {
            self.unregister_blocked(cl.id, &b);
            if let Ok(cmd) = resolve(&b.args) {
                self.unblocked_stats(cmd.slot, 0, false);
                super::call::slowlog_if_slow(self, cl, cmd, &b.args, 0);
            }
            out.resp3 = cl.resp3;
            match b.kind {
                BlockKind::Wait => out.int(self.repl.end_wait(cl.id)),
                _ => out.null_array(),
            }
        }
    }
}

#[cfg(test)]
mod timeout_tests {
    use super::*;

    /// Each case checked with BLPOP on redis-server 7.0.15.
    #[test]
    fn timeouts_as_redis_reads_them() {
        let now = 1_000_000;
        let ok = |s: &str| timeout_arg(s.as_bytes(), now).map_err(|e| e.to_string());
        let nf = Err("ERR timeout is not a float or out of range".to_string());
        let neg = Err("ERR timeout is negative".to_string());
        assert_eq!(ok("0"), Ok(None));
        assert_eq!(ok("-0"), Ok(None));
        assert_eq!(ok("-0.0001"), Ok(None));
        assert_eq!(ok("0.0001"), Ok(Some(now + 1)));
        assert_eq!(ok("1e-400"), Ok(Some(now + 1)));
        assert_eq!(ok("-1e-400"), Ok(None));
        assert_eq!(ok("1.5"), Ok(Some(now + 1500)));
        assert_eq!(ok(".5"), Ok(Some(now + 500)));
        assert_eq!(ok("5."), Ok(Some(now + 5000)));
        assert_eq!(ok("+1"), Ok(Some(now + 1000)));
        assert_eq!(ok("0.5e1"), Ok(Some(now + 5000)));
        assert_eq!(ok("00001"), Ok(Some(now + 1000)));
        assert_eq!(ok("0x10"), Ok(Some(now + 16000)));
        assert_eq!(ok("0x1p3"), Ok(Some(now + 8000)));
        assert_eq!(ok("0x.8"), Ok(Some(now + 500)));
        assert!(ok("9223372036854").is_ok());
        for bad in [
            "", " 1", "1 ", "abc", "1e", "1_0", "nan", "-nan", "1e5000", "1e-5000", "0x", ".", "e5",
        ] {
            assert_eq!(ok(bad), nf, "{bad:?}");
        }
        for n in [
            "-1",
            "inf",
            "-inf",
            "infinity",
            "1e400",
            "92233720368547758",
            "-1e20",
        ] {
            assert_eq!(ok(n), neg, "{n:?}");
        }
    }
}
