//! What a handler gets ([`Ctx`]) and the argument rules families share.

use crate::core::error::Error;
use crate::state::shard::Keys;
use crate::state::{BlockKind, Blocked, Client, State};
use bytes::Bytes;
use protocol::ReplyBuf;
use storage::num::LDouble;
use storage::{Db, Value};

/// What a handler gets: the state (under the lock), its client, where its
/// reply goes, and the time the command started (ms), used for expiry so a
/// command sees one consistent clock.
pub struct Ctx<'a> {
    pub st: &'a mut State,
    pub cl: &'a mut Client,
    pub out: &'a mut ReplyBuf,
    pub now: i64,
}

impl Ctx<'_> {
    pub fn db(&mut self) -> &mut Db {
        &mut self.st.shard.dbs[self.cl.db]
    }

    /// The data operations' view of the client's database.
    #[inline]
    pub fn keys(&mut self) -> Keys<'_> {
        self.st.keys(self.cl.db, self.now)
    }

    /// A removal's ending (HDEL, SREM, ZREM): `n` elements of `key` gone,
    /// the key too if that emptied it, and the count replied.
    pub fn removed(&mut self, class: u32, event: &str, key: &[u8], n: i64) {
        if n > 0 {
            let db = self.cl.db;
            self.st.changed_n(class, event, db, key, n as u64);
            self.st.delete_if_empty(db, key);
        }
        self.out.int(n);
    }

    /// A STORE command's ending: its result `v` of `n` elements stored at
    /// `dst` with `event`, or for an empty one `dst` deleted; the reply is
    /// the size.
    pub fn store_result(&mut self, dst: &[u8], v: Value, n: usize, class: u32, event: &str) {
        let db = self.cl.db;
        match self.keys().store(dst, (n > 0).then_some(v)) {
            true if n == 0 => self
                .st
                .changed(crate::core::config::class::GENERIC, "del", db, dst),
            true => self.st.changed(class, event, db, dst),
            false => {}
        }
        self.out.int(n as i64);
    }

    /// Whether a blocking command may block now; if not (MULTI, scripts) it
    /// must reply as on timeout.
    pub fn may_block(&self) -> bool {
        !self.cl.deny_blocking
    }

    /// Blocks the client on `keys` until one is served or `deadline` (unix
    /// ms) passes. The handler writes no reply: the one it writes when run
    /// again for a ready key, or the timeout reply, is sent instead.
    pub fn block(
        &mut self,
        kind: BlockKind,
        keys: &[Bytes],
        deadline: Option<i64>,
        args: &[Bytes],
    ) {
        let b = Blocked {
            kind,
            db: self.cl.db,
            keys: keys.to_vec(),
            deadline,
            args: args.to_vec(),
        };
        self.st.register_blocked(self.cl.id, &b);
        self.cl.blocked = Some(b);
    }

    /// Whether what commands propagate is read (the AOF is on): a rewrite
    /// that costs something to build is built only then.
    pub fn propagating(&mut self) -> bool {
        self.st.propagating()
    }

    /// Propagates what a command left of `key`'s expiry, as Redis 7.0 does:
    /// the absolute time (`PEXPIREAT`, followed by `extra` options),
    /// `PERSIST` when it has none, `DEL` when the key is gone.
    pub fn propagate_expiry(&mut self, key: &Bytes, extra: &[Bytes]) {
        if !self.propagating() {
            return;
        }
        let d = &self.st.shard.dbs[self.cl.db];
        let op = if !d.contains(key) {
            vec![Bytes::from_static(b"DEL"), key.clone()]
        } else if let Some(t) = d.expire_at(key) {
            let mut op = vec![
                Bytes::from_static(b"PEXPIREAT"),
                key.clone(),
                crate::core::propagate::int(t),
            ];
            op.extend_from_slice(extra);
            op
        } else {
            vec![Bytes::from_static(b"PERSIST"), key.clone()]
        };
        self.propagate_as(op);
    }

    /// This command, if it changed data, propagates `op` instead of its
    /// arguments (Redis's `rewriteClientCommandVector`); called again, it
    /// propagates one more op. `op` is collected only if it is read.
    pub fn propagate_as(&mut self, op: impl IntoIterator<Item = Bytes>) {
        self.st.propagate_as(op);
    }

    /// This command propagates nothing of its own: the commands it runs
    /// propagate themselves (EXEC, scripts).
    pub fn no_propagate(&mut self) {
        self.st.no_propagate();
    }
}

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

/// Parses an integer argument (`ERR value is not an integer or out of range`).
pub fn int_arg(a: &[u8]) -> Result<i64, Error> {
    storage::num::parse_i64(a).ok_or(crate::core::error::NOT_INTEGER)
}

/// Parses the count of HRANDFIELD / SRANDMEMBER: any i64 but i64::MIN.
pub fn rand_count(a: &[u8]) -> Result<i64, Error> {
    let n = int_arg(a)?;
    if n == i64::MIN {
        return Err(Error::other(
            "ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807",
        ));
    }
    Ok(n)
}

/// Redis's index normalization for GETRANGE (and BITCOUNT/BITPOS): the
/// inclusive range `start..=end` in a string of `len`, or `None` if empty.
pub fn norm_range(start: i64, end: i64, len: i64) -> Option<(i64, i64)> {
    if start < 0 && end < 0 && start > end {
        return None;
    }
    clamp_range(start, end, len)
}

/// `norm_range` without its first rule (BITPOS has none): negative indexes
/// count from the end, then both are clamped into the string.
pub fn clamp_range(start: i64, end: i64, len: i64) -> Option<(i64, i64)> {
    let mut s = if start < 0 { len + start } else { start };
    let mut e = if end < 0 { len + end } else { end };
    s = s.max(0);
    e = e.max(0);
    if e >= len {
        e = len - 1;
    }
    (s <= e && len > 0).then_some((s, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_as_redis() {
        assert_eq!(norm_range(0, -100, 5), Some((0, 0)));
        assert_eq!(norm_range(-100, -200, 5), None);
        assert_eq!(norm_range(-3, -1, 5), Some((2, 4)));
        assert_eq!(norm_range(0, i64::MAX, 5), Some((0, 4)));
        assert_eq!(norm_range(i64::MIN, 2, 5), Some((0, 2)));
        assert_eq!(norm_range(0, 0, 0), None);
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
