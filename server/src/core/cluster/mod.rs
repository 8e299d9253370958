//! What a cluster node knows of its cluster (Redis's `clusterState`): the
//! nodes with their addresses, flags, masters and epochs, which node serves
//! each of the 16,384 slots, the slots being migrated or imported, and the
//! epochs. Plain data with no `State`: the bus task, the commands and the
//! config file (`conf`, the `nodes.conf` format) all go through it.
//!
//! Not wired in yet: `cluster-enabled yes` stays refused until the bus,
//! failure detection and failover stand on this.

pub mod conf;

use protocol::bus::{flag, Name, NAME_LEN};

pub const SLOTS: usize = 16384;

/// One node as this node knows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Node {
    pub name: Name,
    /// Empty until known.
    pub ip: String,
    pub port: u16,
    pub cport: u16,
    /// `cluster-announce-hostname`, empty if none.
    pub hostname: String,
    pub flags: u16,
    pub master: Option<Name>,
    /// Unix ms of the PING in flight (0: none) and of the last PONG.
    pub ping_sent: i64,
    pub pong_received: i64,
    pub config_epoch: u64,
    /// Whether the link to it is up (always, for this node itself).
    pub connected: bool,
}

impl Node {
    pub fn new(name: Name, flags: u16) -> Node {
        Node {
            name,
            ip: String::new(),
            port: 0,
            cport: 0,
            hostname: String::new(),
            flags,
            master: None,
            ping_sent: 0,
            pong_received: 0,
            config_epoch: 0,
            connected: true,
        }
    }

    pub fn is(&self, f: u16) -> bool {
        self.flags & f != 0
    }

    pub fn name_str(&self) -> &str {
        name_str(&self.name)
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

/// The cluster as this node sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
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
        }
    }

    pub fn index_of(&self, name: &Name) -> Option<usize> {
        self.nodes.iter().position(|n| &n.name == name)
    }

    pub fn node(&self, name: &Name) -> Option<&Node> {
        self.nodes.iter().find(|n| &n.name == name)
    }

    pub fn me(&self) -> &Node {
        self.node(&self.myself).expect("myself is a node")
    }

    /// The slots node `i` serves, in ascending order.
    pub fn slots_of(&self, i: usize) -> impl Iterator<Item = u16> + '_ {
        (0..SLOTS as u16).filter(move |&s| self.slots[s as usize] == Some(i))
    }
}
