//! The messages this node sends (Redis's `clusterBuildMessageHdr`,
//! `clusterSendPing` and the others): every one starts with a header that
//! says who this node is, what it serves and its epochs; PING, PONG and
//! MEET carry gossip about a few other nodes and this node's extensions.

use super::{Cluster, Health, Node};
use protocol::bus::{self, flag, kind, mflag0, Body, Ext, Gossip, Header, Message, Name, IP_LEN};
use rand::seq::SliceRandom;

/// An address as the bus carries it: NUL-padded.
fn ip_field(ip: &str) -> [u8; IP_LEN] {
    let mut f = [0; IP_LEN];
    let b = ip.as_bytes();
    let n = b.len().min(IP_LEN - 1);
    f[..n].copy_from_slice(&b[..n]);
    f
}

/// The address a bus field holds.
pub fn ip_text(f: &[u8; IP_LEN]) -> String {
    let end = f.iter().position(|&b| b == 0).unwrap_or(IP_LEN);
    String::from_utf8_lossy(&f[..end]).into_owned()
}

fn gossip_of(n: &Node) -> Gossip {
    Gossip {
        name: n.name,
        ping_sent: (n.ping_sent / 1000) as u32,
        pong_received: (n.pong_received / 1000) as u32,
        ip: ip_field(&n.ip),
        port: n.port,
        cport: n.cport,
        flags: n.flags,
        pport: n.pport,
    }
}

impl Cluster {
    /// The header of a message of `kind` from this node. A replica
    /// announces its master's slots and config epoch.
    pub fn header(&self, kind: u16) -> Header {
        let me = self.me();
        let master = self.my_master().map_or(self.my_index(), |m| m);
        let mut h = Header::new(kind, self.myself);
        h.ip = ip_field(&self.set.announce_ip);
        h.port = self.set.port;
        h.pport = self.set.pport;
        h.cport = self.set.cport;
        h.flags = me.flags;
        h.state = match self.health {
            Health::Ok => 0,
            Health::Fail => 1,
        };
        h.current_epoch = self.current_epoch;
        h.config_epoch = self.nodes[master].config_epoch;
        for s in self.slots_of(master) {
            bus::set_slot(&mut h.slots, s);
        }
        if let Some(m) = me.master.filter(|_| !me.is_master()) {
            h.replica_of = m;
        }
        h.offset = self.set.repl_offset;
        if me.is_master() && self.mf.end != 0 {
            h.mflags[0] |= mflag0::PAUSED;
        }
        h
    }

    /// Sends a PING, PONG or MEET on `link`, with gossip about about a
    /// tenth of the nodes (at least 3) chosen at random, then every node
    /// this node thinks may be failing, then this node's extensions.
    pub fn send_ping(&mut self, link: u64, kind: u16, now: i64) {
        let Some(l) = self.links.get(&link) else {
            return;
        };
        let to = l.node;
        if kind == kind::PING {
            if let Some(i) = to.and_then(|n| self.index_of(&n)) {
                self.nodes[i].ping_sent = now;
            }
        }
        let total = self.nodes.len();
        let mut fresh = total.saturating_sub(2);
        let wanted = (total / 10).max(3).min(fresh);
        let mut picked: Vec<usize> = Vec::new();
        let mut order: Vec<usize> = (0..total).collect();
        order.shuffle(&mut rand::thread_rng());
        for &i in order.iter().cycle().take(wanted * 3) {
            if fresh == 0 || picked.len() >= wanted {
                break;
            }
            let n = &self.nodes[i];
            if n.name == self.myself || n.is(flag::PFAIL) || picked.contains(&i) {
                continue;
            }
            if n.is(flag::HANDSHAKE | flag::NOADDR)
                || (n.link.is_none() && self.count_slots(i) == 0)
            {
                fresh -= 1;
                continue;
            }
            picked.push(i);
            fresh -= 1;
        }
        picked.extend((0..total).filter(|&i| {
            let n = &self.nodes[i];
            n.is(flag::PFAIL) && !n.is(flag::HANDSHAKE | flag::NOADDR)
        }));
        let mut h = self.header(kind);
        // Redis 7.0's one extension; it gossips no forgotten nodes (7.2
        // does), so a CLUSTER FORGET stays on the node it was sent to.
        let mut exts = Vec::new();
        if !self.set.announce_hostname.is_empty() {
            exts.push(Ext::Hostname(
                self.set.announce_hostname.as_bytes().to_vec(),
            ));
            h.mflags[0] |= mflag0::EXT_DATA;
        }
        let nodes = picked.iter().map(|&i| gossip_of(&self.nodes[i])).collect();
        let frame = bus::encode(&Message {
            header: h,
            body: Body::Gossip { nodes, exts },
        });
        self.send(link, kind, frame);
    }

    /// PONG to every node (this node's config changed: a failover won).
    pub fn broadcast_pong(&mut self, now: i64) {
        let links: Vec<u64> = (self.nodes.iter())
            .filter(|n| !n.is(flag::MYSELF | flag::HANDSHAKE))
            .filter_map(|n| n.link)
            .collect();
        for l in links {
            self.send_ping(l, kind::PONG, now);
        }
    }

    fn message(&self, kind: u16, body: Body) -> Vec<u8> {
        bus::encode(&Message {
            header: self.header(kind),
            body,
        })
    }

    pub fn fail_message(&self, name: &Name) -> Vec<u8> {
        self.message(kind::FAIL, Body::Fail { name: *name })
    }

    /// UPDATE: node `i` serves these slots at this config epoch.
    pub fn update_message(&self, i: usize) -> Vec<u8> {
        let mut slots = Box::new([0; bus::SLOT_BYTES]);
        for s in self.slots_of(i) {
            bus::set_slot(&mut slots, s);
        }
        let n = &self.nodes[i];
        self.message(
            kind::UPDATE,
            Body::Update {
                config_epoch: n.config_epoch,
                name: n.name,
                slots,
            },
        )
    }

    pub fn publish_message(&self, shard: bool, channel: &[u8], message: &[u8]) -> Vec<u8> {
        let k = if shard {
            kind::PUBLISHSHARD
        } else {
            kind::PUBLISH
        };
        self.message(
            k,
            Body::Publish {
                channel: channel.to_vec(),
                message: message.to_vec(),
            },
        )
    }

    /// FAILOVER_AUTH_REQUEST, FAILOVER_AUTH_ACK, MFSTART: a header alone
    /// (an AUTH_REQUEST forced by a manual failover says so in its flags).
    pub fn bare_message(&self, kind: u16, mflags0: u8) -> Vec<u8> {
        let mut h = self.header(kind);
        h.mflags[0] |= mflags0;
        bus::encode(&Message {
            header: h,
            body: Body::Empty,
        })
    }

    /// PUBLISH to every node; PUBLISHSHARD to the nodes of this shard.
    pub fn propagate_publish(&mut self, shard: bool, channel: &[u8], message: &[u8]) {
        let frame = self.publish_message(shard, channel, message);
        if !shard {
            self.broadcast(kind::PUBLISH, &frame);
            return;
        }
        let master = self.my_master().unwrap_or(self.my_index());
        let mut targets: Vec<usize> = self.replicas_of(master).collect();
        targets.push(master);
        let links: Vec<u64> = (targets.into_iter())
            .filter(|&i| self.nodes[i].name != self.myself)
            .filter_map(|i| self.nodes[i].link)
            .collect();
        for l in links {
            self.send(l, kind::PUBLISHSHARD, frame.clone());
        }
    }
}
