//! What a cluster node knows of its cluster (Redis's `clusterState`): the
//! nodes with their addresses, flags, masters and epochs, which node serves
//! each of the 16,384 slots, the slots being migrated or imported, the
//! epochs, and the links to other nodes. Plain data with no `State`: the
//! bus's messages (`receive`), the cron (`cron`), the commands and the
//! config file (`conf`) all go through it, and what they need done beyond
//! it (become a replica, drop a slot's keys, publish) is left in `Outbox`
//! for the state floor.

pub mod conf;
pub mod cron;
pub mod failover;
pub mod health;
pub mod ping;
pub mod receive;

use parking_lot::Mutex;
use protocol::bus::{flag, Name, NAME_LEN};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use tokio::sync::Notify;

pub const SLOTS: usize = 16384;
/// A failure report counts for this many node timeouts.
pub const FAIL_REPORT_VALIDITY_MULT: i64 = 2;
/// A master with slots stays FAIL this many node timeouts unless someone
/// took its slots.
pub const FAIL_UNDO_TIME_MULT: i64 = 2;
/// How long a forgotten node may not be learnt again from gossip (s).
pub const BLACKLIST_TTL: i64 = 60;

/// One node as this node knows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Node {
    pub name: Name,
    /// Empty until known.
    pub ip: String,
    pub port: u16,
    pub cport: u16,
    /// The plain-text client port beside a TLS `port` (`tls-cluster`), as
    /// the node announces it; 0 when `port` is the plain one.
    pub pport: u16,
    /// `cluster-announce-hostname`, empty if none.
    pub hostname: String,
    pub flags: u16,
    pub master: Option<Name>,
    /// Unix ms of the PING in flight (0: none) and of the last PONG.
    pub ping_sent: i64,
    pub pong_received: i64,
    /// Unix ms of anything received from it, of its creation, and of when
    /// it was flagged FAIL.
    pub data_received: i64,
    pub ctime: i64,
    pub fail_time: i64,
    /// When this node last voted for one of its replicas (ms).
    pub voted_time: i64,
    pub config_epoch: u64,
    /// The replication offset it last told, and when.
    pub repl_offset: u64,
    pub repl_offset_time: i64,
    /// Masters that report it unreachable, with when they last did (ms).
    pub fail_reports: Vec<(Name, i64)>,
    /// The link this node opened to it, and the one it opened to us.
    pub link: Option<u64>,
    pub inbound: Option<u64>,
    /// As `nodes.conf` says; for this node's view, [`Node::link`] decides.
    pub connected: bool,
    /// How many slots it serves, kept by [`Cluster::assign`] (Redis's
    /// `numslots`: failover, gossip and health ask it often).
    pub slot_count: usize,
}

impl Node {
    pub fn new(name: Name, flags: u16) -> Node {
        Node {
            name,
            ip: String::new(),
            port: 0,
            cport: 0,
            pport: 0,
            hostname: String::new(),
            flags,
            master: None,
            ping_sent: 0,
            pong_received: 0,
            data_received: 0,
            ctime: crate::core::clock::now_ms(),
            fail_time: 0,
            voted_time: 0,
            config_epoch: 0,
            repl_offset: 0,
            repl_offset_time: 0,
            fail_reports: Vec::new(),
            link: None,
            inbound: None,
            connected: true,
            slot_count: 0,
        }
    }

    pub fn is(&self, f: u16) -> bool {
        self.flags & f != 0
    }

    pub fn name_str(&self) -> &str {
        name_str(&self.name)
    }

    pub fn is_master(&self) -> bool {
        self.is(flag::MASTER)
    }

    /// The host clients are told first, as `cluster-preferred-endpoint-
    /// type` says: "?" for a hostname not set, None for `unknown-endpoint`.
    pub fn preferred_host(&self, pref: &str) -> Option<&str> {
        match pref {
            "ip" => Some(&self.ip),
            "hostname" if !self.hostname.is_empty() => Some(&self.hostname),
            "hostname" => Some("?"),
            _ => None,
        }
    }

    /// The port a client is told: `port` is the one the bus announces (the
    /// TLS one under `tls-cluster`), `pport` the plain-text one beside it,
    /// which a plain-text client gets when there is one (see
    /// `state::cluster::use_pport`).
    pub fn client_port(&self, use_pport: bool) -> u16 {
        match use_pport && self.pport != 0 {
            true => self.pport,
            false => self.port,
        }
    }

    pub fn has_addr(&self) -> bool {
        !self.is(flag::NOADDR)
    }

    pub fn failed(&self) -> bool {
        self.is(flag::FAIL)
    }
}

/// A name as text: node names are 40 hex digits.
pub fn name_str(n: &Name) -> &str {
    std::str::from_utf8(n).unwrap_or("")
}

/// Whether `s` is a node name: 40 hex digits (lowercase, as Redis makes them).
pub fn parse_name(s: &str) -> Option<Name> {
    let b = s.as_bytes();
    (b.len() == NAME_LEN
        && b.iter()
            .all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(c)))
    .then(|| b.try_into().expect("40 bytes"))
}

pub fn random_name() -> Name {
    let s = crate::core::random::random_hex40();
    s.as_bytes().try_into().expect("40 hex digits")
}

/// What the `cluster-*` options say, as the logic reads them; the state
/// floor fills it from the config before each call.
#[derive(Clone, Debug, Default)]
pub struct Settings {
    pub node_timeout: i64,
    pub announce_ip: String,
    pub announce_hostname: String,
    /// The ports this node announces: client (plain or TLS, as the bus
    /// is), the other one, and the bus.
    pub port: u16,
    pub pport: u16,
    pub cport: u16,
    pub require_full_coverage: bool,
    pub migration_barrier: i64,
    pub allow_replica_migration: bool,
    pub replica_no_failover: bool,
    pub replica_validity_factor: i64,
    pub link_sendbuf_limit: u64,
    /// This node's replication offset: a master's, or what a replica
    /// processed of its master's stream.
    pub repl_offset: u64,
    /// Seconds since this replica last talked with its master (0 for a
    /// master or a connected replica), for the failover's validity check.
    pub master_link_down_s: i64,
}

/// What leaves this node through a link: frames queued by the logic,
/// written by the link's task in the network floor.
#[derive(Default)]
pub struct LinkOut {
    pub queue: Mutex<VecDeque<Vec<u8>>>,
    pub wake: Notify,
    pub closed: AtomicBool,
    /// The link task's read buffer, as it last was (bytes held).
    pub rcvbuf: std::sync::atomic::AtomicUsize,
}

impl LinkOut {
    pub fn queued_bytes(&self) -> usize {
        self.queue.lock().iter().map(Vec::len).sum()
    }

    pub fn close(&self) {
        self.closed.store(true, Ordering::Release);
        self.wake.notify_one();
    }

    pub fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }
}

/// A link on the bus: opened by this node to a node (`inbound`: false), or
/// by another node to this one, whose node is known from its first
/// message.
pub struct Link {
    pub node: Option<Name>,
    pub inbound: bool,
    pub ctime: i64,
    pub out: Arc<LinkOut>,
}

/// Messages sent and received, by type (CLUSTER INFO).
#[derive(Clone, Debug, Default)]
pub struct MsgStats {
    pub sent: [u64; 11],
    pub received: [u64; 11],
    pub links_buffer_limit_exceeded: u64,
}

/// What the logic needs the state floor to do.
#[derive(Debug, PartialEq, Eq)]
pub enum Action {
    /// Follow this master (its client address).
    Replicate(String, u16),
    /// Stop following a master: this node became one.
    BecomeMaster,
    /// Delete the keys of these slots: another node owns them now.
    DropSlots(Vec<u16>),
    /// A message published elsewhere on the cluster, for local subscribers.
    Publish {
        shard: bool,
        channel: Vec<u8>,
        message: Vec<u8>,
    },
    /// A manual failover started by a replica: pause writers until then (ms).
    PauseWrites(i64),
    /// The pause of a manual failover ends.
    Unpause,
}

/// What a call left for the state floor, and whether the config must be
/// saved (with fsync) or the cluster's state computed again.
#[derive(Debug, Default)]
pub struct Outbox {
    pub actions: Vec<Action>,
    pub save: bool,
    pub fsync: bool,
    pub update_state: bool,
}

/// CLUSTER_OK / CLUSTER_FAIL.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Health {
    Ok,
    Fail,
}

/// Why this replica is not failing over now (logged when it changes, and
/// every so often).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum CantFailover {
    #[default]
    None,
    DataAge,
    WaitingDelay,
    Expired,
    WaitingVotes,
}

/// This replica's election.
#[derive(Clone, Debug, Default)]
pub struct Election {
    /// When the election may start, or started (ms).
    pub auth_time: i64,
    pub auth_count: usize,
    pub auth_sent: bool,
    pub auth_rank: usize,
    pub auth_epoch: u64,
    pub cant_reason: CantFailover,
    pub cant_logged: i64,
}

/// A manual failover in progress: on a master, the replica it is for;
/// on that replica, the offset the paused master reached and whether it
/// processed it.
#[derive(Clone, Debug)]
pub struct Manual {
    /// When it times out (ms); 0: none in progress.
    pub end: i64,
    pub replica: Option<Name>,
    pub master_offset: i64,
    pub can_start: bool,
}

impl Default for Manual {
    fn default() -> Manual {
        Manual {
            end: 0,
            replica: None,
            master_offset: -1,
            can_start: false,
        }
    }
}

/// The cluster as this node sees it.
pub struct Cluster {
    pub myself: Name,
    /// In the order they were learnt (the order `nodes.conf` keeps).
    pub nodes: Vec<Node>,
    /// The index in `nodes` of each slot's master.
    pub slots: Vec<Option<usize>>,
    /// Slot → the node it is being migrated to, or imported from.
    pub migrating: Vec<(u16, Name)>,
    pub importing: Vec<(u16, Name)>,
    pub current_epoch: u64,
    pub last_vote_epoch: u64,
    pub links: std::collections::HashMap<u64, Link>,
    pub next_link: u64,
    pub health: Health,
    /// Masters serving at least one slot.
    pub size: usize,
    pub stats: MsgStats,
    /// Forgotten nodes, with when they may be learnt again (unix s).
    pub blacklist: Vec<(Name, i64)>,
    pub set: Settings,
    pub fo: Election,
    pub mf: Manual,
    /// `clusterUpdateState`'s clocks: its first call, and when this node
    /// last found itself in a minority.
    pub first_state_call: i64,
    pub among_minority_time: i64,
    /// Cron ticks, every tenth pings a random node.
    pub iteration: u64,
    /// When this master last had no working replica while others did.
    pub orphaned_time: i64,
    /// DEBUG DROP-CLUSTER-PACKET-FILTER: messages of this type are
    /// dropped as they arrive (-1: none).
    pub drop_filter: i64,
    /// Slots that left this node's shard since the state floor last looked.
    pub lost: Vec<u16>,
}

impl Cluster {
    /// A cluster of one: this node, a master with no slots.
    pub fn new(myself: Name) -> Cluster {
        Cluster {
            myself,
            nodes: vec![Node::new(myself, flag::MYSELF | flag::MASTER)],
            slots: vec![None; SLOTS],
            migrating: Vec::new(),
            importing: Vec::new(),
            current_epoch: 0,
            last_vote_epoch: 0,
            links: Default::default(),
            next_link: 1,
            health: Health::Fail,
            size: 0,
            stats: MsgStats::default(),
            blacklist: Vec::new(),
            set: Settings::default(),
            fo: Default::default(),
            mf: Default::default(),
            first_state_call: 0,
            among_minority_time: 0,
            iteration: 0,
            orphaned_time: 0,
            drop_filter: -1,
            lost: Vec::new(),
        }
    }

    pub fn index_of(&self, name: &Name) -> Option<usize> {
        self.nodes.iter().position(|n| &n.name == name)
    }

    pub fn node(&self, name: &Name) -> Option<&Node> {
        self.nodes.iter().find(|n| &n.name == name)
    }

    pub fn my_index(&self) -> usize {
        self.index_of(&self.myself).expect("myself is a node")
    }

    pub fn me(&self) -> &Node {
        &self.nodes[self.my_index()]
    }

    pub fn me_mut(&mut self) -> &mut Node {
        let i = self.my_index();
        &mut self.nodes[i]
    }

    /// This node's master, if it is a replica of a known node.
    pub fn my_master(&self) -> Option<usize> {
        let me = self.me();
        if me.is_master() {
            return None;
        }
        me.master.as_ref().and_then(|m| self.index_of(m))
    }

    /// The slots node `i` serves, in ascending order.
    pub fn slots_of(&self, i: usize) -> impl Iterator<Item = u16> + '_ {
        (0..SLOTS as u16).filter(move |&s| self.slots[s as usize] == Some(i))
    }

    pub fn count_slots(&self, i: usize) -> usize {
        self.nodes[i].slot_count
    }

    /// The replicas of node `i`, by name (so every node lists them in one
    /// order, as CLUSTER SLOTS and SHARDS must).
    pub fn replicas_of(&self, i: usize) -> impl Iterator<Item = usize> + '_ {
        let name = self.nodes[i].name;
        let mut r: Vec<usize> = (0..self.nodes.len())
            .filter(|&j| !self.nodes[j].is_master() && self.nodes[j].master == Some(name))
            .collect();
        r.sort_by_key(|&j| self.nodes[j].name);
        r.into_iter()
    }

    pub fn migrating_to(&self, slot: u16) -> Option<&Name> {
        self.migrating.iter().find(|m| m.0 == slot).map(|m| &m.1)
    }

    pub fn importing_from(&self, slot: u16) -> Option<&Name> {
        self.importing.iter().find(|m| m.0 == slot).map(|m| &m.1)
    }

    pub fn add_node(&mut self, n: Node) -> usize {
        self.nodes.push(n);
        self.nodes.len() - 1
    }

    /// Forgets node `i`: its slots, its links, what others reported of it
    /// and what it reported of others.
    pub fn del_node(&mut self, i: usize) {
        let name = self.nodes[i].name;
        for s in 0..SLOTS as u16 {
            match self.slots[s as usize] {
                Some(o) if o == i => self.assign(s, None),
                Some(o) if o > i => self.slots[s as usize] = Some(o - 1),
                _ => {}
            }
        }
        self.migrating.retain(|m| m.1 != name);
        self.importing.retain(|m| m.1 != name);
        for n in self.nodes.iter_mut() {
            n.fail_reports.retain(|r| r.0 != name);
        }
        let links: Vec<u64> = [self.nodes[i].link, self.nodes[i].inbound]
            .into_iter()
            .flatten()
            .collect();
        for l in links {
            self.free_link(l);
        }
        let master = self.nodes.remove(i).master;
        self.replica_left(master);
    }

    /// A replica left master `old` (it follows another, was promoted or
    /// forgotten): a master left with none is no longer one a replica may
    /// migrate to, as Redis drops the flag with a master's last replica
    /// (a replica that fails stays listed, so its master stays a target).
    pub fn replica_left(&mut self, old: Option<Name>) {
        if let Some(m) = old.and_then(|o| self.index_of(&o)) {
            if self.replicas_of(m).next().is_none() {
                self.nodes[m].flags &= !flag::MIGRATE_TO;
            }
        }
    }

    /// Closes a link; its node will get a new one from the cron.
    pub fn free_link(&mut self, id: u64) {
        let Some(l) = self.links.remove(&id) else {
            return;
        };
        l.out.close();
        if let Some(i) = l.node.and_then(|n| self.index_of(&n)) {
            let n = &mut self.nodes[i];
            if n.link == Some(id) {
                n.link = None;
                n.connected = false;
            }
            if n.inbound == Some(id) {
                n.inbound = None;
            }
        }
    }

    /// A new link, to node `to` (outbound) or from a node not known yet.
    pub fn new_link(&mut self, to: Option<Name>, now: i64) -> (u64, Arc<LinkOut>) {
        let id = self.next_link;
        self.next_link += 1;
        let out = Arc::new(LinkOut::default());
        self.links.insert(
            id,
            Link {
                node: to,
                inbound: to.is_none(),
                ctime: now,
                out: out.clone(),
            },
        );
        if let Some(i) = to.and_then(|n| self.index_of(&n)) {
            self.nodes[i].link = Some(id);
            self.nodes[i].connected = true;
        }
        (id, out)
    }

    /// Queues a message on a link, counting it; a link over
    /// `cluster-link-sendbuf-limit` is closed instead, as Redis frees it.
    pub fn send(&mut self, link: u64, kind: u16, frame: Vec<u8>) {
        let Some(l) = self.links.get(&link) else {
            return;
        };
        let limit = self.set.link_sendbuf_limit as usize;
        if limit > 0 && l.out.queued_bytes() + frame.len() > limit {
            self.stats.links_buffer_limit_exceeded += 1;
            tracing::warn!(
                "Freeing cluster link({}), used memory: {} exceeds limit",
                l.node.as_ref().map_or("from unknown node", name_str),
                l.out.queued_bytes()
            );
            self.free_link(link);
            return;
        }
        l.out.queue.lock().push_back(frame);
        l.out.wake.notify_one();
        if let Some(c) = self.stats.sent.get_mut(kind as usize) {
            *c += 1;
        }
    }

    /// Sends to every node this node has a link to but itself and nodes in
    /// handshake.
    pub fn broadcast(&mut self, kind: u16, frame: &[u8]) {
        let links: Vec<u64> = (self.nodes.iter())
            .filter(|n| !n.is(flag::MYSELF | flag::HANDSHAKE))
            .filter_map(|n| n.link)
            .collect();
        for l in links {
            self.send(l, kind, frame.to_vec());
        }
    }

    /// Makes node `i` a master (it was a replica, or is new).
    pub fn set_node_as_master(&mut self, i: usize, out: &mut Outbox) {
        let n = &mut self.nodes[i];
        if n.is_master() && n.master.is_none() {
            return;
        }
        // A replica promoted elsewhere may have replicas migrate to it.
        if n.master.is_some() && n.name != self.myself {
            n.flags |= flag::MIGRATE_TO;
        }
        n.flags &= !flag::REPLICA;
        n.flags |= flag::MASTER;
        let old = n.master.take();
        self.replica_left(old);
        out.save = true;
        out.update_state = true;
    }

    /// Notes that master `by` reports node `i` unreachable; true if it is
    /// a new report.
    pub fn add_failure_report(&mut self, i: usize, by: Name, now: i64) -> bool {
        let r = &mut self.nodes[i].fail_reports;
        match r.iter_mut().find(|r| r.0 == by) {
            Some(r) => {
                r.1 = now;
                false
            }
            None => {
                r.push((by, now));
                true
            }
        }
    }

    pub fn del_failure_report(&mut self, i: usize, by: &Name, now: i64) -> bool {
        self.expire_failure_reports(i, now);
        let r = &mut self.nodes[i].fail_reports;
        let before = r.len();
        r.retain(|r| &r.0 != by);
        r.len() != before
    }

    fn expire_failure_reports(&mut self, i: usize, now: i64) {
        let max = self.set.node_timeout * FAIL_REPORT_VALIDITY_MULT;
        self.nodes[i].fail_reports.retain(|r| now - r.1 <= max);
    }

    pub fn count_failure_reports(&mut self, i: usize, now: i64) -> usize {
        self.expire_failure_reports(i, now);
        self.nodes[i].fail_reports.len()
    }

    /// Majority of the masters serving slots.
    pub fn quorum(&self) -> usize {
        self.size / 2 + 1
    }

    /// Whether a node may not be learnt from gossip now (CLUSTER FORGET).
    pub fn blacklisted(&mut self, name: &Name, now_s: i64) -> bool {
        self.blacklist.retain(|b| b.1 > now_s);
        self.blacklist.iter().any(|b| &b.0 == name)
    }

    pub fn blacklist_add(&mut self, name: Name, now_s: i64) {
        self.blacklist.retain(|b| b.0 != name);
        self.blacklist.push((name, now_s + BLACKLIST_TTL));
    }

    /// Gives slot `s` to node `i` (None: to nobody). A slot that leaves
    /// this node's shard (its master's, for a replica) is noted in `lost`:
    /// its shard channels' subscribers are told (`sunsubscribe`).
    pub fn assign(&mut self, s: u16, i: Option<usize>) {
        let old = self.slots[s as usize];
        if old == i {
            return;
        }
        if let Some(o) = old {
            if self.in_my_shard(o) {
                self.lost.push(s);
            }
            self.nodes[o].slot_count -= 1;
        }
        if let Some(n) = i {
            self.nodes[n].slot_count += 1;
        }
        self.slots[s as usize] = i;
    }

    /// Whether node `o` is this node or its master.
    fn in_my_shard(&self, o: usize) -> bool {
        self.nodes[o].name == self.myself || self.my_master() == Some(o)
    }
}

impl Cluster {
    /// What the links hold: each link, its queued output and its read
    /// buffer (INFO's `mem_cluster_links`).
    pub fn links_memory(&self) -> usize {
        (self.links.values())
            .map(|l| {
                std::mem::size_of::<Link>()
                    + l.out.queued_bytes()
                    + l.out.rcvbuf.load(Ordering::Relaxed)
            })
            .sum()
    }

    /// Where a client is sent for node `i` (-MOVED, -ASK): its endpoint as
    /// `cluster-preferred-endpoint-type` says, and the port of the client's
    /// kind (TLS or not).
    pub fn endpoint(&self, i: usize, pref: &str, use_pport: bool) -> String {
        let n = &self.nodes[i];
        // unknown-endpoint: no host; the client keeps the address it used.
        let host = n.preferred_host(pref).unwrap_or("");
        format!("{host}:{}", n.client_port(use_pport))
    }

    /// Runs of consecutive slots of every node, as Redis lists them, in
    /// one pass over the slots (CLUSTER NODES and `nodes.conf` name them
    /// all, after every slot change).
    pub fn slot_ranges(&self) -> Vec<Vec<(u16, u16)>> {
        let mut out: Vec<Vec<(u16, u16)>> = vec![Vec::new(); self.nodes.len()];
        for (s, o) in self.slots.iter().enumerate() {
            let (Some(i), s) = (*o, s as u16) else {
                continue;
            };
            match out[i].last_mut() {
                Some((_, end)) if *end + 1 == s => *end = s,
                _ => out[i].push((s, s)),
            }
        }
        out
    }
}
