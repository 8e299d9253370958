//! Client-side caching (CLIENT TRACKING): the table of keys clients may
//! hold in a cache, the BCAST prefixes, and the invalidation messages sent
//! when those keys change, with Redis 7.0's semantics.
//!
//! Keys are tracked by name across databases, by client id. A client that
//! turns tracking off or disconnects leaves its ids behind; they are
//! skipped and dropped when the key is next invalidated, so turning
//! tracking off costs nothing per key (Redis does the same).
//!
//! Where messages go: a RESP3 client gets `>2 invalidate [keys]` pushes on
//! its own connection; a client that redirects gets them on the redirect
//! client's, as a push in RESP3 or, in RESP2, as a `__redis__:invalidate`
//! message when that client is subscribed to anything. A flush sends a
//! null instead of keys.
//!
//! The client whose command runs (the current client) is not in
//! `State::clients`. Invalidations meant for it are kept in `deferred`
//! and written when it is at hand: before its reply when they arose
//! before the command ran (the table limit, maxmemory evictions), after it
//! otherwise, as Redis sends them after the command's (or EXEC's) reply.
//! BCAST announcements are collected per prefix and sent after the
//! top-level command (Redis sends them before the event loop sleeps).

use crate::state::{Client, State};
use bytes::{BufMut, Bytes, BytesMut};
use std::collections::{BTreeMap, HashMap};

/// A client's CLIENT TRACKING state.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Mode {
    pub on: bool,
    pub bcast: bool,
    pub optin: bool,
    pub optout: bool,
    pub noloop: bool,
    /// CLIENT CACHING was given for the next command (YES under OPTIN,
    /// NO under OPTOUT).
    pub caching: bool,
    /// The redirect client was found gone.
    pub broken: bool,
    /// The client invalidations go to; 0: this connection.
    pub redirect: u64,
    /// How many BCAST prefixes the client has (its memory, `clientmem`).
    pub prefixes: usize,
}

impl Mode {
    /// Whether the keys a read command reads are remembered for this
    /// client.
    pub fn remembers(&self) -> bool {
        // CLIENT CACHING turns the default over for one command.
        let default = !self.optin;
        self.on && !self.bcast && default != self.caching
    }

    /// CLIENT LIST's letters for this state, in Redis's order.
    pub fn letters(&self) -> impl Iterator<Item = char> {
        [(self.on, 't'), (self.broken, 'R'), (self.bcast, 'B')]
            .into_iter()
            .filter_map(|(set, c)| set.then_some(c))
    }
}

/// One BCAST prefix: its clients, and the keys under it changed since the
/// last announcement with the client that changed each (0: none, as for
/// expiry, eviction and scripts), for NOLOOP.
#[derive(Default)]
struct Prefix {
    clients: Vec<u64>,
    keys: BTreeMap<Bytes, u64>,
}

/// A tracking client as routing needs it.
#[derive(Clone, Copy, Default)]
struct Src {
    id: u64,
    mode: Mode,
    resp3: bool,
    subscribed: bool,
}

impl Src {
    fn of(c: &Client) -> Src {
        Src {
            id: c.id,
            mode: c.tracking,
            resp3: c.resp3,
            subscribed: c.subs.any(),
        }
    }
}

/// What a message says: these keys changed, or everything did (a flush).
enum Payload<'a> {
    Keys(&'a [Bytes]),
    Flush,
}

/// The current client and what waits for it.
#[derive(Default)]
struct Running {
    /// The current client (id 0: none), as of its command's start.
    cur: Src,
    /// Invalidations for it (`None`: a flush).
    deferred: Vec<Option<Bytes>>,
    /// Messages for it as another client's redirect target, produced
    /// while no reply of its own was being written.
    direct: BytesMut,
}

/// What serving a blocked client set aside (see `State::tracking_serve`).
pub struct Served(Running, u64);

/// The server-wide tracking state.
#[derive(Default)]
pub struct Tracking {
    /// Clients with tracking on (INFO's `tracking_clients`).
    pub clients: usize,
    prefixes: BTreeMap<Bytes, Prefix>,
    /// The distinct lengths of `prefixes`: a key's prefixes are looked up
    /// by these, not by walking every prefix.
    prefix_lens: Vec<usize>,
    /// Whether a key change has anything to do: the shard's table of
    /// tracked keys or a prefix exists. The one test a write pays while nobody tracks.
    pub armed: bool,
    /// Some prefix holds keys to announce.
    bcast_pending: bool,
    run: Running,
    /// The client executing a command (a script's own client is 0): who
    /// changed a key, for BCAST NOLOOP.
    pub executing: u64,
    /// Consecutive table-limit rounds that ended over the limit: each
    /// round tries harder.
    limit_rounds: u32,
    /// A command run by a script read keys: the script's declared keys are
    /// remembered for its caller.
    script_read: bool,
}

/// The keys clients may cache, part of the data (it lives in the shard).
#[derive(Default)]
pub struct Tracked {
    /// Key → ids of the clients that may cache it, ascending (the order
    /// Redis sends in).
    table: HashMap<Bytes, Vec<u64>>,
    /// (key, client) pairs in `table`.
    items: usize,
}

impl Tracked {
    fn remember(&mut self, key: &Bytes, id: u64) {
        let ids = self.table.entry(key.clone()).or_default();
        if let Err(at) = ids.binary_search(&id) {
            ids.insert(at, id);
            self.items += 1;
        }
    }

    fn take(&mut self, key: &[u8]) -> Option<Vec<u64>> {
        let ids = self.table.remove(key)?;
        self.items -= ids.len();
        Some(ids)
    }

    fn clear(&mut self) {
        *self = Tracked::default();
    }
}

impl Tracking {
    fn rearm(&mut self, tracked: &Tracked) {
        self.armed = !tracked.table.is_empty() || !self.prefixes.is_empty();
    }

    fn relens(&mut self) {
        let mut lens: Vec<usize> = self.prefixes.keys().map(|p| p.len()).collect();
        lens.sort_unstable();
        lens.dedup();
        self.prefix_lens = lens;
    }

    /// INFO's tracking_total_keys, tracking_total_items,
    /// tracking_total_prefixes.
    pub fn totals(&self, tracked: &Tracked) -> (usize, usize, usize) {
        (tracked.table.len(), tracked.items, self.prefixes.len())
    }

    /// The BCAST prefixes of client `id`, sorted.
    pub fn prefixes_of(&self, id: u64) -> Vec<&Bytes> {
        self.prefixes
            .iter()
            .filter(|(_, p)| p.clients.contains(&id))
            .map(|(k, _)| k)
            .collect()
    }

    /// A command run by a script read keys.
    pub fn script_read(&mut self) {
        if self.run.cur.mode.remembers() {
            self.script_read = true;
        }
    }

    /// Whether a script run by the command that just ended read keys.
    pub fn take_script_read(&mut self) -> bool {
        std::mem::take(&mut self.script_read)
    }

    /// Notes a changed key for the BCAST prefixes it falls under.
    fn note_bcast(&mut self, key: &[u8], writer: u64) {
        for &len in &self.prefix_lens {
            if len > key.len() {
                break;
            }
            if let Some(p) = self.prefixes.get_mut(&key[..len]) {
                p.keys.insert(Bytes::copy_from_slice(key), writer);
                self.bcast_pending = true;
            }
        }
    }
}

/// The push (RESP3) or `__redis__:invalidate` message (RESP2) carrying `p`.
fn frame(resp3: bool, p: &Payload) -> BytesMut {
    let mut b = BytesMut::with_capacity(64);
    if resp3 {
        b.put_slice(b">2\r\n$10\r\ninvalidate\r\n");
    } else {
        b.put_slice(b"*3\r\n$7\r\nmessage\r\n$20\r\n__redis__:invalidate\r\n");
    }
    match p {
        Payload::Keys(keys) => {
            b.put_u8(b'*');
            b.put_slice(itoa::Buffer::new().format(keys.len()).as_bytes());
            b.put_slice(b"\r\n");
            for k in *keys {
                b.put_u8(b'$');
                b.put_slice(itoa::Buffer::new().format(k.len()).as_bytes());
                b.put_slice(b"\r\n");
                b.put_slice(k);
                b.put_slice(b"\r\n");
            }
        }
        Payload::Flush if resp3 => b.put_slice(b"_\r\n"),
        Payload::Flush => b.put_slice(b"$-1\r\n"),
    }
    b
}

/// Told to a RESP3 client whose redirect client is gone.
fn broken_frame(redirect: u64) -> BytesMut {
    let mut b = BytesMut::with_capacity(48);
    b.put_slice(b">2\r\n$21\r\ntracking-redir-broken\r\n:");
    b.put_slice(itoa::Buffer::new().format(redirect).as_bytes());
    b.put_slice(b"\r\n");
    b
}

/// True if one of `a` and `b` starts with the other.
fn overlap(a: &[u8], b: &[u8]) -> bool {
    let n = a.len().min(b.len());
    a[..n] == b[..n]
}

/// Why CLIENT TRACKING ON BCAST refuses `new` prefixes for client `id`:
/// the text of Redis's error, and whether Redis goes on to enable tracking
/// anyway (it does when the overlap is between two given prefixes other
/// than the first, answering the error and then OK).
pub fn prefix_collision(t: &Tracking, id: u64, new: &[Bytes]) -> Option<(String, bool)> {
    let s = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    let mine = t.prefixes_of(id);
    for (i, p) in new.iter().enumerate() {
        if let Some(old) = mine.iter().find(|old| overlap(old, p)) {
            return Some((
                format!(
                    "ERR Prefix '{}' overlaps with an existing prefix '{}'. Prefixes for a single client must not overlap.",
                    s(p),
                    s(old)
                ),
                false,
            ));
        }
        if let Some(q) = new[i + 1..].iter().find(|q| overlap(p, q)) {
            return Some((
                format!(
                    "ERR Prefix '{}' overlaps with another provided prefix '{}'. Prefixes for a single client must not overlap.",
                    s(p),
                    s(q)
                ),
                i > 0,
            ));
        }
    }
    None
}

impl State {
    /// CLIENT TRACKING ON (options already checked): redirect and flags are
    /// replaced, BCAST prefixes added (the empty prefix if none is given).
    pub fn tracking_on(&mut self, cl: &mut Client, mut mode: Mode, prefixes: &[Bytes]) {
        let t = &mut self.tracking;
        if !cl.tracking.on {
            t.clients += 1;
        }
        // CLIENT CACHING given before still holds for the next command.
        mode.on = true;
        mode.caching = cl.tracking.caching;
        mode.prefixes = cl.tracking.prefixes;
        cl.tracking = mode;
        if mode.bcast {
            let empty = [Bytes::new()];
            let prefixes = if prefixes.is_empty() {
                &empty
            } else {
                prefixes
            };
            for p in prefixes {
                let ids = &mut t.prefixes.entry(p.clone()).or_default().clients;
                if !ids.contains(&cl.id) {
                    ids.push(cl.id);
                    cl.tracking.prefixes += 1;
                }
            }
            t.relens();
            t.rearm(&self.shard.tracked);
        }
        // Turned on by the running command (or in its transaction): the
        // client is current from now on, as if it had tracked all along.
        if t.run.cur.id == cl.id || (t.run.cur.id == 0 && t.executing == cl.id) {
            t.run.cur = Src::of(cl);
        }
    }

    /// CLIENT TRACKING OFF, RESET, a disconnect. The keys the client read
    /// stay in the table until they change.
    pub fn tracking_off(&mut self, cl: &mut Client) {
        let t = &mut self.tracking;
        if cl.tracking.bcast {
            t.prefixes.retain(|_, p| {
                p.clients.retain(|&i| i != cl.id);
                !p.clients.is_empty()
            });
            t.relens();
            t.rearm(&self.shard.tracked);
        }
        if cl.tracking.on {
            t.clients -= 1;
        }
        cl.tracking = Mode::default();
        if t.run.cur.id == cl.id {
            t.run.cur = Src::of(cl);
        }
    }

    /// Remembers that `cl` read `keys` (after a read command), unless its
    /// mode says otherwise.
    pub fn tracking_remember<'a>(&mut self, cl: &Client, keys: impl Iterator<Item = &'a Bytes>) {
        if !cl.tracking.remembers() {
            return;
        }
        for k in keys {
            self.shard.tracked.remember(k, cl.id);
        }
        self.tracking.armed = true;
    }

    /// A key changed: its trackers are told and forget it; it is noted for
    /// the BCAST prefixes it falls under. `writer` is the client that
    /// changed it (0: none).
    pub fn invalidate_key(&mut self, key: &[u8], writer: u64) {
        if !self.tracking.prefixes.is_empty() {
            self.tracking.note_bcast(key, writer);
        }
        self.invalidate_tracked(key);
    }

    /// Tells the trackers of `key` (not the BCAST clients) and forgets it.
    fn invalidate_tracked(&mut self, key: &[u8]) {
        let Some(ids) = self.shard.tracked.take(key) else {
            return;
        };
        self.tracking.rearm(&self.shard.tracked);
        let key = [Bytes::copy_from_slice(key)];
        for id in ids {
            if id == self.tracking.run.cur.id {
                let m = self.tracking.run.cur.mode;
                // A NOLOOP client is not told about its own changes.
                if m.on && !m.bcast && !m.noloop {
                    self.tracking.run.deferred.push(Some(key[0].clone()));
                }
                continue;
            }
            let src = match self.clients.get(&id) {
                Some(c) if c.tracking.on && !c.tracking.bcast => Src::of(c),
                _ => continue,
            };
            self.send_tracking(src, &Payload::Keys(&key), None);
        }
    }

    /// FLUSHDB, FLUSHALL: every tracking client is told everything changed,
    /// and the table is emptied.
    pub fn invalidate_all(&mut self) {
        if self.tracking.clients > 0 {
            if self.tracking.run.cur.mode.on {
                self.tracking.run.deferred.push(None);
            }
            let cur = self.tracking.run.cur.id;
            let srcs: Vec<Src> = self
                .clients
                .values()
                .filter(|c| c.tracking.on && c.id != cur)
                .map(|c| Src::of(c))
                .collect();
            for src in srcs {
                self.send_tracking(src, &Payload::Flush, None);
            }
        }
        self.shard.tracked.clear();
        self.tracking.rearm(&self.shard.tracked);
    }

    /// Sends `p` on behalf of tracking client `src`: to itself, to its
    /// redirect client, or nowhere. `out` is the current client's output
    /// when it is at hand. True when the redirect client is gone: `src` is
    /// then broken (marked here unless it is the current client).
    fn send_tracking(&mut self, src: Src, p: &Payload, mut out: Option<&mut BytesMut>) -> bool {
        let m = src.mode;
        let to = if m.redirect == 0 { src.id } else { m.redirect };
        let cur = self.tracking.run.cur;
        let target = if to == src.id {
            Some((src.resp3, src.subscribed))
        } else if to == cur.id {
            Some((cur.resp3, cur.subscribed))
        } else {
            self.clients.get(&to).map(|c| (c.resp3, c.subs.any()))
        };
        match target {
            None => {
                if let Some(c) = self.clients.get_mut(&src.id) {
                    c.tracking.broken = true;
                }
                if src.resp3 {
                    self.tracking_emit(src.id, &broken_frame(m.redirect), out.as_deref_mut());
                }
                true
            }
            // Without RESP3 a message needs a subscribed redirect client.
            Some((resp3, subscribed)) => {
                if resp3 || (m.redirect != 0 && subscribed) {
                    self.tracking_emit(to, &frame(resp3, p), out);
                }
                false
            }
        }
    }

    /// Queues a frame for client `to`.
    fn tracking_emit(&mut self, to: u64, f: &[u8], out: Option<&mut BytesMut>) {
        if to != self.tracking.run.cur.id {
            self.deliver(to, f);
        } else if let Some(out) = out {
            out.extend_from_slice(f);
        } else if self.pubsub.running == to {
            // Its command is writing its reply: Redis would write the
            // message there, before the reply.
            self.deliver(to, f);
        } else {
            self.tracking.run.direct.extend_from_slice(f);
        }
    }

    /// Before a command of `cl`; `top` when no other command runs it (not
    /// a script's, not one EXEC runs). While some client tracks, a top
    /// command makes `cl` the current client (true is returned) after the
    /// table limit is enforced, as Redis does before each command.
    pub fn tracking_enter(&mut self, cl: &Client, top: bool) -> bool {
        let t = &mut self.tracking;
        if t.clients == 0 {
            return false;
        }
        if !top {
            if t.run.cur.id == cl.id {
                // A command EXEC runs: the client's mode may have changed.
                t.run.cur = Src::of(cl);
            }
            return false;
        }
        t.run.cur = Src::of(cl);
        self.tracking_limit();
        true
    }

    /// Writes what is waiting for the current client `cl` into `out`.
    pub fn tracking_flush(&mut self, cl: &mut Client, out: &mut BytesMut) {
        let run = &mut self.tracking.run;
        if !run.direct.is_empty() {
            out.extend_from_slice(&run.direct);
            run.direct.clear();
        }
        if run.deferred.is_empty() {
            return;
        }
        for item in std::mem::take(&mut run.deferred) {
            let one;
            let p = match item {
                Some(k) => {
                    one = [k];
                    Payload::Keys(&one)
                }
                None => Payload::Flush,
            };
            if self.send_tracking(Src::of(cl), &p, Some(out)) {
                cl.tracking.broken = true;
            }
        }
    }

    /// After a top-level command of `cl` (`cmd`: its name, if it was
    /// found): what is waiting for it is written after its reply, the
    /// BCAST announcements go out, CLIENT CACHING's one command is over,
    /// and no client is current any more.
    pub fn tracking_leave(&mut self, cl: &mut Client, out: &mut BytesMut, cmd: Option<&str>) {
        self.tracking_flush(cl, out);
        if self.tracking.bcast_pending {
            self.announce_bcast(Some(cl), out);
        }
        // Redis keeps the flag through CLIENT commands and a transaction.
        if cl.tracking.caching
            && cl.multi.is_none()
            && !cmd.is_some_and(|n| n.starts_with("client"))
        {
            cl.tracking.caching = false;
        }
        self.tracking.run.cur = Src::default();
    }

    /// Before the command of a blocked client being served: it is the
    /// current client meanwhile. Returns what `tracking_served` restores.
    pub fn tracking_serve(&mut self, cl: &Client) -> Served {
        let t = &mut self.tracking;
        let run = Running {
            cur: Src::of(cl),
            ..Default::default()
        };
        Served(
            std::mem::replace(&mut t.run, run),
            std::mem::replace(&mut t.executing, cl.id),
        )
    }

    /// After it: what waits for the served client goes to its pending
    /// output, after its reply.
    pub fn tracking_served(&mut self, cl: &mut Client, saved: Served) {
        let mut out = std::mem::take(&mut cl.pending);
        let had = out.len();
        self.tracking_flush(cl, &mut out);
        if out.len() > had {
            cl.wake.notify_one();
        }
        cl.pending = out;
        self.tracking.run = saved.0;
        self.tracking.executing = saved.1;
    }

    /// Sends each BCAST prefix's changed keys to its clients, one message
    /// per prefix and client, NOLOOP clients without their own changes.
    /// `cl` is the current client, if any, `out` its output.
    fn announce_bcast(&mut self, mut cl: Option<&mut Client>, out: &mut BytesMut) {
        self.tracking.bcast_pending = false;
        let mut batches = Vec::new();
        for p in self.tracking.prefixes.values_mut() {
            if !p.keys.is_empty() {
                batches.push((std::mem::take(&mut p.keys), p.clients.clone()));
            }
        }
        for (keys, ids) in batches {
            for id in ids {
                let mine = cl.as_deref_mut().filter(|c| c.id == id);
                let src = match &mine {
                    Some(c) => Src::of(c),
                    None => match self.clients.get(&id) {
                        Some(c) => Src::of(c),
                        None => continue,
                    },
                };
                let list: Vec<Bytes> = keys
                    .iter()
                    .filter(|(_, &w)| !(src.mode.noloop && w == id))
                    .map(|(k, _)| k.clone())
                    .collect();
                if list.is_empty() {
                    continue;
                }
                let here = mine.is_some().then_some(&mut *out);
                if self.send_tracking(src, &Payload::Keys(&list), here) {
                    if let Some(c) = mine {
                        c.tracking.broken = true;
                    }
                }
            }
        }
    }

    /// `tracking-table-max-keys`: over the limit, keys are invalidated
    /// (their trackers told) until it is met, up to 100 keys per round more
    /// for every round that ended still over it.
    fn tracking_limit(&mut self) {
        let max = self.cfg.tracking_table_max_keys as usize;
        if max == 0 || self.shard.tracked.table.len() <= max {
            self.tracking.limit_rounds = 0;
            return;
        }
        let effort = 100 * (self.tracking.limit_rounds as usize + 1);
        let table = &self.shard.tracked.table;
        let victims: Vec<Bytes> = table.keys().take(effort).cloned().collect();
        for k in victims {
            self.invalidate_tracked(&k);
            if self.shard.tracked.table.len() <= max {
                self.tracking.limit_rounds = 0;
                return;
            }
        }
        self.tracking.limit_rounds += 1;
    }

    /// The cron's part: the table limit, and announcing what expiry
    /// changed.
    pub fn tracking_cron(&mut self) {
        if self.tracking.clients > 0 {
            self.tracking_limit();
        }
        if self.tracking.bcast_pending {
            self.announce_bcast(None, &mut BytesMut::new());
        }
    }
}
