//! Pub/Sub delivery: the server-wide subscription registry, message
//! fan-out into subscribers' `pending` output, keyspace notifications and
//! the `client-output-buffer-limit` check that protects the server from
//! subscribers that do not read.
//!
//! Subscribers are kept by client id. The client running a command is not
//! in `State::clients` while it runs (see `state`), so output for it goes to
//! `PubSub::self_out`, which `cmd::execute` places before the command's own
//! reply — where Redis puts it (a client publishing to itself, or touching
//! a key whose events it listens to, gets the message first).

use crate::state::{Client, State};
use bytes::{BufMut, Bytes, BytesMut};
use std::collections::{HashMap, HashSet};

/// The `n` class: a key was created.
pub const NOTIFY_NEW: u32 = crate::core::config::NOTIFY_CLASSES[11].1;
/// The `m` class: a read found no key.
pub const NOTIFY_KEY_MISS: u32 = crate::core::config::NOTIFY_CLASSES[9].1;

/// One client's subscriptions.
#[derive(Default)]
pub struct Subs {
    pub channels: HashSet<Bytes>,
    /// In subscription order: PUNSUBSCRIBE without arguments answers in it.
    pub patterns: Vec<Bytes>,
    pub shard: HashSet<Bytes>,
}

impl Subs {
    /// The count (P)SUBSCRIBE and (P)UNSUBSCRIBE replies carry.
    pub fn count(&self) -> usize {
        self.channels.len() + self.patterns.len()
    }

    /// Whether the client is in subscribed mode (flag `P`).
    pub fn any(&self) -> bool {
        !self.channels.is_empty() || !self.patterns.is_empty() || !self.shard.is_empty()
    }
}

/// Channel, pattern or shard channel.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Channel,
    Pattern,
    Shard,
}

impl Kind {
    fn sub_name(self) -> &'static [u8] {
        match self {
            Kind::Channel => b"subscribe",
            Kind::Pattern => b"psubscribe",
            Kind::Shard => b"ssubscribe",
        }
    }

    fn unsub_name(self) -> &'static [u8] {
        match self {
            Kind::Channel => b"unsubscribe",
            Kind::Pattern => b"punsubscribe",
            Kind::Shard => b"sunsubscribe",
        }
    }
}

/// `client-output-buffer-limit` for one client class.
#[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
pub struct ObufLimit {
    pub hard: u64,
    pub soft: u64,
    pub soft_secs: u64,
}

/// Limits for the classes output can pile up for: normal and pubsub
/// (replicas do not exist here).
#[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
pub struct ObufLimits {
    pub normal: ObufLimit,
    pub pubsub: ObufLimit,
    pub replica: ObufLimit,
}

/// Reads the option's value as CONFIG GET shows it (`normal 0 0 0 slave …
/// pubsub …`, bytes already normalised). Unknown parts are ignored: the
/// value was validated when it was set.
pub fn parse_limits(v: &str) -> ObufLimits {
    let w: Vec<&str> = v.split_whitespace().collect();
    let mut l = ObufLimits::default();
    for c in w.chunks(4) {
        let [class, hard, soft, secs] = c else {
            continue;
        };
        let n = |s: &str| crate::core::config::parse_memory_u64(s).unwrap_or(0);
        let lim = ObufLimit {
            hard: n(hard),
            soft: n(soft),
            soft_secs: secs.parse().unwrap_or(0),
        };
        match class.to_ascii_lowercase().as_str() {
            "normal" => l.normal = lim,
            "pubsub" => l.pubsub = lim,
            "slave" | "replica" => l.replica = lim,
            _ => {}
        }
    }
    l
}

/// The server-wide registry.
#[derive(Default)]
pub struct PubSub {
    /// Channel → subscriber ids, in subscription order (delivery order).
    pub channels: HashMap<Bytes, Vec<u64>>,
    pub patterns: HashMap<Bytes, Vec<u64>>,
    pub shard: HashMap<Bytes, Vec<u64>>,
    /// The client running the current command (0: none) and its protocol.
    pub running: u64,
    pub running_resp3: bool,
    /// Messages for the running client, placed before its reply.
    pub self_out: BytesMut,
    /// (db, key) named by the running write command that did not exist
    /// when it started: the ones it creates get the `new` event.
    pub new_keys: Vec<(usize, Bytes)>,
}

impl PubSub {
    fn map(&mut self, kind: Kind) -> &mut HashMap<Bytes, Vec<u64>> {
        match kind {
            Kind::Channel => &mut self.channels,
            Kind::Pattern => &mut self.patterns,
            Kind::Shard => &mut self.shard,
        }
    }

    /// Whether nobody subscribes to anything (the cheap early exit).
    pub fn idle(&self) -> bool {
        self.channels.is_empty() && self.patterns.is_empty()
    }
}

/// Appends a RESP bulk string.
fn put_bulk(b: &mut BytesMut, s: &[u8]) {
    b.put_u8(b'$');
    b.put_slice(itoa::Buffer::new().format(s.len()).as_bytes());
    b.put_slice(b"\r\n");
    b.put_slice(s);
    b.put_slice(b"\r\n");
}

/// A message frame in RESP2 form; RESP3 differs only in the first byte
/// (`>` instead of `*`).
fn frame(parts: &[&[u8]]) -> BytesMut {
    let mut b = BytesMut::with_capacity(16 + parts.iter().map(|p| p.len() + 16).sum::<usize>());
    b.put_u8(b'*');
    b.put_slice(itoa::Buffer::new().format(parts.len()).as_bytes());
    b.put_slice(b"\r\n");
    for p in parts {
        put_bulk(&mut b, p);
    }
    b
}

fn put_frame(dst: &mut BytesMut, f: &[u8], resp3: bool) {
    dst.put_u8(if resp3 { b'>' } else { b'*' });
    dst.put_slice(&f[1..]);
}

/// The (un)subscribe confirmation: `[kind, name or null, count]`.
fn confirm(out: &mut protocol::ReplyBuf, what: &[u8], name: Option<&[u8]>, count: usize) {
    out.push(3);
    out.bulk(what);
    match name {
        Some(n) => out.bulk(n),
        None => out.null(),
    }
    out.int(count as i64);
}

impl State {
    /// Subscribes the running client `cl` to `names`, one confirmation each.
    pub fn subscribe(
        &mut self,
        cl: &mut Client,
        out: &mut protocol::ReplyBuf,
        kind: Kind,
        names: &[Bytes],
    ) {
        for n in names {
            let added = match kind {
                Kind::Channel => cl.subs.channels.insert(n.clone()),
                Kind::Shard => cl.subs.shard.insert(n.clone()),
                Kind::Pattern => {
                    let new = !cl.subs.patterns.contains(n);
                    if new {
                        cl.subs.patterns.push(n.clone());
                    }
                    new
                }
            };
            if added {
                self.pubsub
                    .map(kind)
                    .entry(n.clone())
                    .or_default()
                    .push(cl.id);
            }
            let count = match kind {
                Kind::Shard => cl.subs.shard.len(),
                _ => cl.subs.count(),
            };
            confirm(out, kind.sub_name(), Some(n), count);
        }
    }

    /// Unsubscribes `cl` from `names`, or from everything of `kind` when
    /// `names` is empty. With `out`, confirms each (a null name when there
    /// was nothing to leave).
    pub fn unsubscribe(
        &mut self,
        cl: &mut Client,
        mut out: Option<&mut protocol::ReplyBuf>,
        kind: Kind,
        names: &[Bytes],
    ) {
        let all: Vec<Bytes>;
        let names = if names.is_empty() {
            all = match kind {
                Kind::Channel => cl.subs.channels.iter().cloned().collect(),
                Kind::Pattern => cl.subs.patterns.clone(),
                Kind::Shard => cl.subs.shard.iter().cloned().collect(),
            };
            if all.is_empty() {
                if let Some(out) = out {
                    let count = match kind {
                        Kind::Shard => cl.subs.shard.len(),
                        _ => cl.subs.count(),
                    };
                    confirm(out, kind.unsub_name(), None, count);
                }
                return;
            }
            &all[..]
        } else {
            names
        };
        for n in names {
            let removed = match kind {
                Kind::Channel => cl.subs.channels.remove(n),
                Kind::Shard => cl.subs.shard.remove(n),
                Kind::Pattern => match cl.subs.patterns.iter().position(|p| p == n) {
                    Some(i) => {
                        cl.subs.patterns.remove(i);
                        true
                    }
                    None => false,
                },
            };
            if removed {
                let map = self.pubsub.map(kind);
                if let Some(ids) = map.get_mut(n) {
                    ids.retain(|&i| i != cl.id);
                    if ids.is_empty() {
                        map.remove(n);
                    }
                }
            }
            if let Some(out) = out.as_deref_mut() {
                let count = match kind {
                    Kind::Shard => cl.subs.shard.len(),
                    _ => cl.subs.count(),
                };
                confirm(out, kind.unsub_name(), Some(n), count);
            }
        }
    }

    /// Drops every subscription of `cl` without replies (disconnect, RESET).
    pub fn unsubscribe_all(&mut self, cl: &mut Client) {
        if cl.subs.any() {
            for k in [Kind::Channel, Kind::Pattern, Kind::Shard] {
                self.unsubscribe(cl, None, k, &[]);
            }
        }
    }

    /// PUBLISH / SPUBLISH: delivers `msg` to the subscribers of `channel`
    /// (and, unless sharded, of every matching pattern); the number of
    /// deliveries.
    pub fn publish(&mut self, shard: bool, channel: &[u8], msg: &[u8]) -> usize {
        let mut n = 0;
        let ids = if shard {
            self.pubsub.shard.get(channel)
        } else {
            self.pubsub.channels.get(channel)
        };
        if let Some(ids) = ids {
            let kind: &[u8] = if shard { b"smessage" } else { b"message" };
            let f = frame(&[kind, channel, msg]);
            let ids = ids.clone();
            for id in ids {
                self.deliver(id, &f);
                n += 1;
            }
        }
        if shard || self.pubsub.patterns.is_empty() {
            return n;
        }
        let matched: Vec<(Bytes, Vec<u64>)> = self
            .pubsub
            .patterns
            .iter()
            .filter(|(p, _)| storage::glob::matches(p, channel, false))
            .map(|(p, ids)| (p.clone(), ids.clone()))
            .collect();
        for (p, ids) in matched {
            let f = frame(&[b"pmessage", &p, channel, msg]);
            for id in ids {
                self.deliver(id, &f);
                n += 1;
            }
        }
        n
    }

    /// Queues a message frame for client `id` and wakes it, unless that
    /// would take its unsent output past its class's limit: then the client
    /// is closed instead, as Redis closes it.
    pub(crate) fn deliver(&mut self, id: u64, f: &[u8]) {
        if id == self.pubsub.running {
            let resp3 = self.pubsub.running_resp3;
            put_frame(&mut self.pubsub.self_out, f, resp3);
            return;
        }
        // Absent: being served by another command (a blocked client) or
        // just gone; the message is lost as for a closing client in Redis.
        let Some(cl) = self.clients.get_mut(&id) else {
            return;
        };
        if cl.killed {
            return;
        }
        put_frame(&mut cl.pending, f, cl.resp3);
        close_if_over_limit(cl, &self.tun.obuf_limits, 0);
        if let Some(ids) = &mut self.memory.round_output {
            ids.push(id);
        }
        cl.wake.notify_one();
        self.woken += 1;
    }

    /// Before a write command runs with the `n` class on: remembers the
    /// arguments that are not keys yet (in the client's db, and in the
    /// target db of MOVE / COPY … DB). Returns the outer command's list.
    pub fn note_new_candidates(
        &mut self,
        db: usize,
        args: &[Bytes],
        now: i64,
    ) -> Vec<(usize, Bytes)> {
        let outer = std::mem::take(&mut self.pubsub.new_keys);
        if self.tun.notify_flags & NOTIFY_NEW == 0 || self.pubsub.idle() {
            return outer;
        }
        let mut dbs = vec![db];
        let other = if args[0].eq_ignore_ascii_case(b"move") {
            args.get(2)
        } else if args[0].eq_ignore_ascii_case(b"copy") {
            args.iter()
                .position(|a| a.eq_ignore_ascii_case(b"db"))
                .and_then(|i| args.get(i + 1))
        } else {
            None
        };
        if let Some(n) = other.and_then(|a| storage::num::parse_i64(a)) {
            if n >= 0 && (n as usize) < self.shard.dbs.len() && n as usize != db {
                dbs.push(n as usize);
            }
        }
        for &d in &dbs {
            for a in &args[1..] {
                if !self.shard.dbs[d].contains(a) || self.shard.dbs[d].is_expired(a, now) {
                    self.pubsub.new_keys.push((d, a.clone()));
                }
            }
        }
        outer
    }

    /// Keyspace notification: `__keyspace@<db>__:<key>` carries the event
    /// and `__keyevent@<db>__:<event>` the key, as `notify-keyspace-events`
    /// selects. Keys the running command created get `new` first.
    pub fn notify(&mut self, class: u32, event: &str, db: usize, key: &[u8]) {
        self.settle();
        if !self.pubsub.new_keys.is_empty() {
            let mut created = Vec::new();
            self.pubsub.new_keys.retain(|(d, k)| {
                if self.shard.dbs[*d].contains(k) {
                    if !created.contains(&(*d, k.clone())) {
                        created.push((*d, k.clone()));
                    }
                    false
                } else {
                    true
                }
            });
            for (d, k) in created {
                self.emit(NOTIFY_NEW, "new", d, &k);
            }
        }
        self.emit(class, event, db, key);
    }

    fn emit(&mut self, class: u32, event: &str, db: usize, key: &[u8]) {
        let flags = self.tun.notify_flags;
        if flags & class == 0 || self.pubsub.idle() {
            return;
        }
        if flags & crate::core::config::NOTIFY_KEYSPACE != 0 {
            let mut ch = format!("__keyspace@{db}__:").into_bytes();
            ch.extend_from_slice(key);
            self.publish(false, &ch, event.as_bytes());
        }
        if flags & crate::core::config::NOTIFY_KEYEVENT != 0 {
            let ch = format!("__keyevent@{db}__:{event}");
            self.publish(false, ch.as_bytes(), key);
        }
    }
}

/// The hard limit of `cl`'s class (0: none).
pub(crate) fn hard_limit(cl: &Client, limits: &ObufLimits) -> usize {
    limits.of(cl).hard as usize
}

/// Closes `cl` when its output, with `extra` bytes its connection holds
/// beyond `output_bytes`, is past its class's limit, as Redis does:
/// logged, no further reply, nothing more of its output sent. True if so.
pub(crate) fn close_if_over_limit(cl: &mut Client, limits: &ObufLimits, extra: usize) -> bool {
    if !over_limit(cl, limits, extra) {
        return false;
    }
    tracing::warn!(
        "Client {} scheduled to be closed ASAP for overcoming of output buffer limits.",
        cl.line(crate::core::clock::now_ms(), None)
    );
    cl.killed = true;
    cl.pending = BytesMut::new();
    true
}

impl ObufLimits {
    fn of(&self, cl: &Client) -> ObufLimit {
        if cl.peer.replica {
            self.replica
        } else if cl.subs.any() {
            self.pubsub
        } else {
            self.normal
        }
    }
}

/// Redis's check: over the hard limit, or over the soft limit for longer
/// than its seconds (the clock starts when the soft limit is first
/// exceeded and resets when output drops below it).
fn over_limit(cl: &mut Client, limits: &ObufLimits, extra: usize) -> bool {
    let lim = limits.of(cl);
    if lim.hard == 0 && lim.soft == 0 {
        return false;
    }
    let used = (cl.output_bytes() + extra) as u64;
    let hard = lim.hard > 0 && used >= lim.hard;
    let mut soft = lim.soft > 0 && used >= lim.soft;
    if soft {
        let now = crate::core::clock::now_ms();
        match cl.obuf_soft_since {
            None => {
                cl.obuf_soft_since = Some(now);
                soft = false;
            }
            Some(t) => {
                if (now - t) / 1000 <= lim.soft_secs as i64 {
                    soft = false;
                }
            }
        }
    } else {
        cl.obuf_soft_since = None;
    }
    hard || soft
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_parse() {
        let l = parse_limits("normal 0 0 0 slave 268435456 67108864 60 pubsub 33554432 8388608 60");
        assert_eq!(l.normal, ObufLimit::default());
        assert_eq!(
            l.pubsub,
            ObufLimit {
                hard: 33554432,
                soft: 8388608,
                soft_secs: 60
            }
        );
    }

    #[test]
    fn frames() {
        let f = frame(&[b"message", b"ch", b"hi"]);
        assert_eq!(&f[..], b"*3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$2\r\nhi\r\n");
        let mut d = BytesMut::new();
        put_frame(&mut d, &f, true);
        assert_eq!(&d[..4], b">3\r\n");
    }
}
