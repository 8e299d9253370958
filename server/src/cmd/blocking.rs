//! Blocking commands: their timeout argument, and serving the clients
//! waiting on a key when a write gives it data (see docs/ARCHITECTURE.md).

use super::{resolve, Ctx};
use crate::error::Error;
use crate::state::{BlockKind, Client, State};
use bytes::Bytes;
use protocol::ReplyBuf;
use storage::Value;

/// Parses a blocking command's timeout (seconds, fractions allowed) into an
/// absolute deadline in ms; 0 waits forever.
///
/// Redis reads the timeout as a C `long double` (`strtold`: decimal or hex
/// floats, `inf`), multiplies by 1000, rounds up and converts to a 64-bit
/// integer. A result that does not fit (huge values, `inf`) comes out as
/// the most negative integer, hence "timeout is negative" for them; a text
/// beyond the long double range (ERANGE) is "not a float". Tiny positive
/// values round up to 1ms, tiny negative ones to 0 (forever).
pub fn timeout_arg(a: &[u8], now: i64) -> Result<Option<i64>, Error> {
    let not_float = || Error::other("ERR timeout is not a float or out of range");
    let secs = parse_long_double(a).ok_or_else(not_float)?;
    let ms = match secs {
        Ld::Finite(v) => (v * 1000.0).ceil(),
        Ld::Huge => f64::INFINITY,
        Ld::Tiny(neg) => {
            if neg {
                0.0
            } else {
                1.0
            }
        }
    };
    // Exactly the values whose conversion to i64 would overflow.
    if !(0.0..9_223_372_036_854_775_808.0).contains(&ms) {
        return Err(Error::other("ERR timeout is negative"));
    }
    let ms = ms as i64;
    Ok((ms > 0).then(|| now.saturating_add(ms)))
}

/// A number as `strtold` reads it, with f64 standing in for long double.
#[derive(Debug, PartialEq)]
enum Ld {
    Finite(f64),
    /// Beyond f64 (or infinite) but within long double range.
    Huge,
    /// Nonzero but below f64's range; the flag is the sign.
    Tiny(bool),
}

/// Redis's `string2ld` acceptance: the whole text is one number, no
/// leading blank, no NaN, no overflow or underflow of a long double
/// (decimal exponent roughly within ±4932, binary within ±16382).
fn parse_long_double(a: &[u8]) -> Option<Ld> {
    if a.is_empty() || a.len() >= 5 * 1024 || a[0].is_ascii_whitespace() {
        return None;
    }
    let t = std::str::from_utf8(a).ok()?;
    let (neg, body) = match t.as_bytes()[0] {
        b'-' => (true, &t[1..]),
        b'+' => (false, &t[1..]),
        _ => (false, t),
    };
    let lower = body.to_ascii_lowercase();
    if lower == "inf" || lower == "infinity" {
        return Some(Ld::Huge);
    }
    let (mant, exp, radix_exp_scale, max_exp) = if let Some(hex) = lower.strip_prefix("0x") {
        let (m, e) = hex.split_once('p').unwrap_or((hex, "0"));
        (m, e, 4, 16384)
    } else {
        let (m, e) = lower.split_once('e').unwrap_or((&lower, "0"));
        (m, e, 1, 4932)
    };
    let digit_ok = |ch: char| {
        if radix_exp_scale == 4 {
            ch.is_ascii_hexdigit()
        } else {
            ch.is_ascii_digit()
        }
    };
    let (int_part, frac_part) = mant.split_once('.').unwrap_or((mant, ""));
    if int_part.len() + frac_part.len() == 0
        || !int_part.chars().all(digit_ok)
        || !frac_part.chars().all(digit_ok)
    {
        return None;
    }
    let e_digits = exp.strip_prefix(['+', '-']).unwrap_or(exp);
    if e_digits.is_empty() || !e_digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    // Exponent clamped: anything this far out is out of range anyway.
    let e: i64 = e_digits
        .get(..e_digits.len().min(7))
        .and_then(|d| d.parse().ok())
        .unwrap_or(0)
        * if exp.starts_with('-') { -1 } else { 1 };
    let e = if e_digits.trim_start_matches('0').len() > 7 {
        if exp.starts_with('-') {
            -10_000_000
        } else {
            10_000_000
        }
    } else {
        e
    };
    // Position of the leading nonzero digit, in digits of the radix.
    let digits: Vec<u32> = int_part
        .chars()
        .chain(frac_part.chars())
        .map(|ch| ch.to_digit(16).unwrap_or(0))
        .collect();
    let Some(lead) = digits.iter().position(|&d| d != 0) else {
        return Some(Ld::Finite(if neg { -0.0 } else { 0.0 }));
    };
    let magnitude = int_part.len() as i64 - lead as i64 - 1;
    let magnitude = magnitude * radix_exp_scale + e;
    if magnitude > max_exp {
        return None;
    }
    if magnitude < -(max_exp + if radix_exp_scale == 4 { 64 } else { 19 }) {
        return None;
    }
    let v = if radix_exp_scale == 4 {
        // 13 significant hex digits hold all of an f64's mantissa.
        let sig = &digits[lead..digits.len().min(lead + 13)];
        let m = sig.iter().fold(0f64, |m, &d| m * 16.0 + d as f64);
        let scale = (magnitude - 4 * (sig.len() as i64 - 1)).clamp(-20_000, 20_000) as i32;
        m * 2f64.powi(scale / 2) * 2f64.powi(scale - scale / 2)
    } else {
        t.parse::<f64>().ok()?
    };
    let v = v.abs();
    Some(if v.is_infinite() {
        Ld::Huge
    } else if v == 0.0 {
        Ld::Tiny(neg)
    } else {
        Ld::Finite(if neg { -v } else { v })
    })
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
                        Some(Value::List(_)) => BlockKind::List,
                        Some(Value::ZSet(_)) => BlockKind::ZSet,
                        _ => break,
                    };
                    let Some(mut cl) = self.clients.remove(&id) else {
                        continue;
                    };
                    if cl.killed {
                        // Closing: its element stays for the next waiter.
                        self.clients.insert(id, cl);
                        continue;
                    }
                    let Some(b) = cl.blocked.take_if(|b| b.kind == has_data) else {
                        self.clients.insert(id, cl);
                        continue;
                    };
                    let mut out = ReplyBuf::new(cl.resp3);
                    let cmd = resolve(&b.args).expect("blocked command is in the table");
                    let now = crate::state::now_ms();
                    // The handler runs again, so it propagates what it
                    // pops now (LPOP for BLPOP, …).
                    let prop = self.command_start(cl.db);
                    let mut ctx = Ctx {
                        st: self,
                        cl: &mut cl,
                        out: &mut out,
                        now,
                    };
                    let res = (cmd.handler)(&mut ctx, &b.args);
                    self.command_end(prop, &b.args);
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
                        self.unregister_blocked(id, &b);
                        cl.pending.extend_from_slice(&out.buf);
                        cl.wake.notify_one();
                        self.woken += 1;
                    }
                    self.clients.insert(id, cl);
                }
            }
        }
    }

    /// Ends a client's wait with its timeout reply (a null array; WAIT's
    /// is the number of replicas reached, always 0 here).
    pub fn unblock_timed_out(&mut self, cl: &mut Client, out: &mut ReplyBuf) {
        if let Some(b) = cl.blocked.take() {
            self.unregister_blocked(cl.id, &b);
            out.resp3 = cl.resp3;
            match b.kind {
                BlockKind::Wait => out.int(0),
                _ => out.null_array(),
            }
        }
    }
}
