//! A message from the bus (Redis's `clusterProcessPacket`): who sent it,
//! what it says of the sender (epochs, role, slots, address) and, in its
//! gossip, of other nodes (failure reports, nodes to learn), then what its
//! type asks for.

use super::ping::ip_text;
use super::{Action, Cluster, Node, Outbox, SLOTS};
use protocol::bus::{self, flag, kind, mflag0, Body, Ext, Gossip, Header, Message, Name};

/// Where a message arrived: the link, and its two ends' addresses.
pub struct Arrival<'a> {
    pub link: u64,
    pub peer_ip: &'a str,
    pub local_ip: &'a str,
    pub now: i64,
}

fn is_zero(n: &Name) -> bool {
    n.iter().all(|&b| b == 0)
}

impl Cluster {
    /// Handles one message; `keys(slot)` counts this node's keys in a slot.
    pub fn receive(
        &mut self,
        at: &Arrival,
        m: Message,
        keys: &dyn Fn(u16) -> usize,
        out: &mut Outbox,
    ) {
        let h = &m.header;
        if let Some(c) = self.stats.received.get_mut(h.kind as usize) {
            *c += 1;
        }
        if h.kind as i64 == self.drop_filter {
            tracing::warn!("Dropping packet that matches debug drop filter");
            return;
        }
        let Some(link) = self.links.get(&at.link) else {
            return;
        };
        let (link_node, inbound) = (link.node, link.inbound);
        let mut sender = self
            .index_of(&h.sender)
            .filter(|&i| !self.nodes[i].is(flag::HANDSHAKE));
        if let (Some(s), true, None) = (sender, inbound, link_node) {
            self.attach_inbound(s, at.link);
        }
        if let Some(s) = sender {
            let n = &mut self.nodes[s];
            n.data_received = at.now;
            if h.current_epoch > self.current_epoch {
                self.current_epoch = h.current_epoch;
                out.save = true;
            }
            let n = &mut self.nodes[s];
            if h.config_epoch > n.config_epoch {
                n.config_epoch = h.config_epoch;
                out.save = true;
            }
            n.repl_offset = h.offset;
            n.repl_offset_time = at.now;
            if self.my_master() == Some(s)
                && h.mflags[0] & mflag0::PAUSED != 0
                && self.mf.end != 0
                && self.mf.master_offset == -1
            {
                self.mf.master_offset = h.offset as i64;
                tracing::info!(
                    "Received replication offset for paused master manual failover: {}",
                    h.offset
                );
            }
        }
        match h.kind {
            kind::PING | kind::PONG | kind::MEET => {
                if h.kind != kind::PONG {
                    self.hello(at, h, sender, out);
                }
                let Some(s) = self.handshake(at, h, link_node, inbound, &mut sender, out) else {
                    return;
                };
                if let Some(s) = s {
                    self.about_sender(h, s, keys, out);
                }
                let Body::Gossip { nodes, exts } = &m.body else {
                    return;
                };
                if sender.is_some() || (h.kind == kind::MEET && link_node.is_none()) {
                    self.gossip(at, sender, nodes, out);
                }
                if let Some(s) = sender {
                    self.extensions(s, exts, out);
                }
            }
            kind::FAIL => {
                let (Some(s), Body::Fail { name }) = (sender, &m.body) else {
                    return;
                };
                let Some(f) = self.index_of(name) else {
                    return;
                };
                if self.nodes[f].is(flag::FAIL | flag::MYSELF) {
                    return;
                }
                tracing::info!(
                    "FAIL message received from {} about {}",
                    self.nodes[s].name_str(),
                    self.nodes[f].name_str()
                );
                let n = &mut self.nodes[f];
                n.flags = (n.flags & !flag::PFAIL) | flag::FAIL;
                n.fail_time = at.now;
                out.save = true;
                out.update_state = true;
            }
            kind::PUBLISH | kind::PUBLISHSHARD => {
                if let (Some(_), Body::Publish { channel, message }) = (sender, m.body) {
                    out.actions.push(Action::Publish {
                        shard: h.kind == kind::PUBLISHSHARD,
                        channel,
                        message,
                    });
                }
            }
            kind::FAILOVER_AUTH_REQUEST => {
                if let Some(s) = sender {
                    self.vote(s, h, at.now, out);
                }
            }
            kind::FAILOVER_AUTH_ACK => {
                let Some(s) = sender else { return };
                // Only the votes of masters serving slots count, and only
                // for this election's epoch.
                if self.nodes[s].is_master()
                    && self.count_slots(s) > 0
                    && h.current_epoch >= self.fo.auth_epoch
                {
                    self.fo.auth_count += 1;
                }
            }
            kind::MFSTART => {
                let Some(s) = sender else { return };
                if self.nodes[s].master != Some(self.myself) || !self.me().is_master() {
                    return;
                }
                self.manual_failover_requested(s, at.link, at.now, out);
            }
            kind::UPDATE => {
                let (
                    Some(_),
                    Body::Update {
                        config_epoch,
                        name,
                        slots,
                    },
                ) = (sender, &m.body)
                else {
                    return;
                };
                let Some(n) = self.index_of(name) else { return };
                if self.nodes[n].config_epoch >= *config_epoch {
                    return;
                }
                if !self.nodes[n].is_master() {
                    self.set_node_as_master(n, out);
                }
                self.nodes[n].config_epoch = *config_epoch;
                self.update_slots_config_with(n, *config_epoch, slots, keys, out);
            }
            _ => {}
        }
    }

    fn attach_inbound(&mut self, s: usize, link: u64) {
        if let Some(old) = self.nodes[s].inbound.filter(|&l| l != link) {
            self.free_link(old);
        }
        self.nodes[s].inbound = Some(link);
        if let Some(l) = self.links.get_mut(&link) {
            l.node = Some(self.nodes[s].name);
        }
    }

    /// PING and MEET: learn this node's own address from the link, learn a
    /// node that MEETs this one, and answer with a PONG.
    fn hello(&mut self, at: &Arrival, h: &Header, sender: Option<usize>, out: &mut Outbox) {
        if (h.kind == kind::MEET || self.me().ip.is_empty())
            && self.set.announce_ip.is_empty()
            && self.me().ip != at.local_ip
        {
            self.me_mut().ip = at.local_ip.to_string();
            tracing::info!("IP address for this node updated to {}", at.local_ip);
            out.save = true;
        }
        if sender.is_none() && h.kind == kind::MEET {
            let mut n = Node::new(super::random_name(), flag::HANDSHAKE);
            n.ip = self.address_in(h, at);
            n.port = h.port;
            n.pport = h.pport;
            n.cport = h.cport;
            self.add_node(n);
            out.save = true;
        }
        self.send_ping(at.link, kind::PONG, at.now);
    }

    /// The sender's address: the one it announces, or the one it comes from.
    fn address_in(&self, h: &Header, at: &Arrival) -> String {
        let ip = ip_text(&h.ip);
        if ip.is_empty() {
            at.peer_ip.to_string()
        } else {
            ip
        }
    }

    /// On a link this node opened: completes a handshake (the node's random
    /// name becomes the one it gives), or drops a node that answers with
    /// another name. `None`: the message is done with; otherwise the
    /// sender, if known.
    fn handshake(
        &mut self,
        at: &Arrival,
        h: &Header,
        link_node: Option<Name>,
        inbound: bool,
        sender: &mut Option<usize>,
        out: &mut Outbox,
    ) -> Option<Option<usize>> {
        if !inbound {
            let ln = self.index_of(&link_node?)?;
            if self.nodes[ln].is(flag::HANDSHAKE) {
                if let Some(s) = *sender {
                    if self.update_address(s, at, h, out) {
                        out.save = true;
                        out.update_state = true;
                    }
                    self.del_node(ln);
                    return None;
                }
                let n = &mut self.nodes[ln];
                n.name = h.sender;
                n.flags &= !flag::HANDSHAKE;
                n.flags |= h.flags & (flag::MASTER | flag::REPLICA);
                if let Some(l) = self.links.get_mut(&at.link) {
                    l.node = Some(h.sender);
                }
                tracing::debug!("Handshake with node {} completed.", n.name_str());
                out.save = true;
            } else if self.nodes[ln].name != h.sender {
                let n = &mut self.nodes[ln];
                tracing::debug!(
                    "PONG contains mismatching sender ID. About node {} having flags {}",
                    n.name_str(),
                    n.flags
                );
                n.flags |= flag::NOADDR;
                n.ip.clear();
                (n.port, n.pport, n.cport) = (0, 0, 0);
                self.free_link(at.link);
                out.save = true;
                return None;
            }
        }
        if let Some(s) = *sender {
            let n = &mut self.nodes[s];
            n.flags = (n.flags & !flag::NOFAILOVER) | (h.flags & flag::NOFAILOVER);
            if h.kind == kind::PING && self.update_address(s, at, h, out) {
                out.save = true;
                out.update_state = true;
            }
        }
        if !inbound && h.kind == kind::PONG {
            if let Some(ln) = self.links.get(&at.link).and_then(|l| l.node) {
                if let Some(i) = self.index_of(&ln) {
                    let n = &mut self.nodes[i];
                    n.pong_received = at.now;
                    n.ping_sent = 0;
                    if n.is(flag::PFAIL) {
                        n.flags &= !flag::PFAIL;
                        out.update_state = true;
                    } else if n.failed() {
                        self.clear_failure_if_needed(i, at.now, out);
                    }
                }
            }
        }
        *sender = self
            .index_of(&h.sender)
            .filter(|&i| !self.nodes[i].is(flag::HANDSHAKE));
        Some(*sender)
    }

    /// The sender's role, its slots (and ours, if it won them at a newer
    /// epoch), and config epoch collisions.
    fn about_sender(
        &mut self,
        h: &Header,
        s: usize,
        keys: &dyn Fn(u16) -> usize,
        out: &mut Outbox,
    ) {
        if is_zero(&h.replica_of) {
            self.set_node_as_master(s, out);
        } else {
            if self.nodes[s].is_master() {
                // A master turned replica: its slots are someone else's.
                for j in 0..SLOTS as u16 {
                    if self.slots[j as usize] == Some(s) {
                        self.assign(j, None);
                    }
                }
                let n = &mut self.nodes[s];
                n.flags &= !(flag::MASTER | flag::MIGRATE_TO);
                n.flags |= flag::REPLICA;
                out.save = true;
                out.update_state = true;
            }
            if let Some(m) = self
                .index_of(&h.replica_of)
                .filter(|_| self.nodes[s].master != Some(h.replica_of))
            {
                let old = self.nodes[s].master.replace(h.replica_of);
                // A master that has had a replica may have one migrate to it.
                self.nodes[m].flags |= flag::MIGRATE_TO;
                self.replica_left(old);
                out.save = true;
            }
        }
        let sender_master = if self.nodes[s].is_master() {
            Some(s)
        } else {
            self.nodes[s].master.and_then(|m| self.index_of(&m))
        };
        let dirty = sender_master.is_some_and(|m| {
            (0..SLOTS as u16)
                .any(|j| (self.slots[j as usize] == Some(m)) != bus::has_slot(&h.slots, j))
        });
        if dirty && self.nodes[s].is_master() {
            self.update_slots_config_with(s, h.config_epoch, &h.slots, keys, out);
        }
        if dirty {
            for j in 0..SLOTS as u16 {
                if !bus::has_slot(&h.slots, j) {
                    continue;
                }
                let Some(o) = self.slots[j as usize].filter(|&o| o != s) else {
                    continue;
                };
                if self.nodes[o].config_epoch > h.config_epoch {
                    tracing::debug!(
                        "Node {} has old slots configuration, sending an UPDATE message about {}",
                        self.nodes[s].name_str(),
                        self.nodes[o].name_str()
                    );
                    let frame = self.update_message(o);
                    if let Some(l) = self.nodes[s].link {
                        self.send(l, kind::UPDATE, frame);
                    }
                    break;
                }
            }
        }
        let me = self.my_index();
        if self.nodes[s].is_master()
            && self.nodes[me].is_master()
            && h.config_epoch == self.nodes[me].config_epoch
        {
            self.handle_epoch_collision(s, out);
        }
    }

    /// Two masters with one config epoch: the one with the greater name
    /// takes a new epoch, so that every node ends with a unique one.
    fn handle_epoch_collision(&mut self, s: usize, out: &mut Outbox) {
        if self.nodes[s].name <= self.myself {
            return;
        }
        self.current_epoch += 1;
        let epoch = self.current_epoch;
        self.me_mut().config_epoch = epoch;
        out.save = true;
        out.fsync = true;
        tracing::debug!(
            "WARNING: configEpoch collision with node {}. configEpoch set to {epoch}",
            self.nodes[s].name_str()
        );
    }

    /// A node's address changed (it told us another one, on a link it
    /// opened): reconnect to the new one.
    fn update_address(&mut self, s: usize, at: &Arrival, h: &Header, out: &mut Outbox) -> bool {
        if self.nodes[s].link == Some(at.link) {
            return false;
        }
        let ip = self.address_in(h, at);
        let n = &self.nodes[s];
        if n.port == h.port && n.cport == h.cport && n.pport == h.pport && n.ip == ip {
            return false;
        }
        let n = &mut self.nodes[s];
        n.ip = ip;
        (n.port, n.cport, n.pport) = (h.port, h.cport, h.pport);
        n.flags &= !flag::NOADDR;
        tracing::info!(
            "Address updated for node {}, now {}:{}",
            n.name_str(),
            n.ip,
            n.port
        );
        let (ip, port) = (n.ip.clone(), n.port);
        if let Some(l) = n.link {
            self.free_link(l);
        }
        if self.my_master() == Some(s) {
            out.actions.push(Action::Replicate(ip, port));
        }
        true
    }

    /// Takes the slots `sender` claims at `epoch` where this node knew an
    /// older owner (or none), skipping slots it imports; this node follows
    /// the sender if it (or its master) lost its last slot to it, and
    /// otherwise drops the keys of slots it lost.
    pub fn update_slots_config_with(
        &mut self,
        sender: usize,
        epoch: u64,
        slots: &[u8; bus::SLOT_BYTES],
        keys: &dyn Fn(u16) -> usize,
        out: &mut Outbox,
    ) {
        if self.nodes[sender].name == self.myself {
            tracing::info!("Discarding UPDATE message about myself.");
            return;
        }
        let me = self.my_index();
        let cur_master = self.my_master().unwrap_or(me);
        let (mut new_master, mut migrated, mut sender_slots) = (None, 0, 0);
        let mut dirty = Vec::new();
        for j in 0..SLOTS as u16 {
            if !bus::has_slot(slots, j) {
                continue;
            }
            sender_slots += 1;
            let owner = self.slots[j as usize];
            if owner == Some(sender) || self.importing_from(j).is_some() {
                continue;
            }
            if owner.is_none_or(|o| self.nodes[o].config_epoch < epoch) {
                if owner == Some(me) && keys(j) > 0 {
                    dirty.push(j);
                }
                if owner == Some(cur_master) {
                    new_master = Some(sender);
                    migrated += 1;
                }
                self.assign(j, Some(sender));
                out.update_state = true;
                out.save = true;
                out.fsync = true;
            }
        }
        if let Some(nm) = new_master.filter(|_| {
            self.count_slots(cur_master) == 0
                && (self.set.allow_replica_migration || sender_slots == migrated)
        }) {
            tracing::info!(
                "Configuration change detected. Reconfiguring myself as a replica of {}",
                self.nodes[nm].name_str()
            );
            self.set_my_master(nm, out);
        } else if !dirty.is_empty() {
            for j in &dirty {
                tracing::info!(
                    "Deleting keys in dirty slot {j} on node {}",
                    self.me().name_str()
                );
            }
            out.actions.push(Action::DropSlots(dirty));
        }
    }

    /// What the gossip says of other nodes: failure reports from masters,
    /// fresher PONG times, a failed node's new address, nodes to learn.
    fn gossip(&mut self, at: &Arrival, sender: Option<usize>, nodes: &[Gossip], out: &mut Outbox) {
        let reporter = sender
            .filter(|&s| self.nodes[s].is_master())
            .map(|s| self.nodes[s].name);
        for g in nodes {
            let Some(i) = self.index_of(&g.name) else {
                if sender.is_some()
                    && g.flags & flag::NOADDR == 0
                    && !self.blacklisted(&g.name, at.now / 1000)
                {
                    let mut n = Node::new(g.name, g.flags);
                    n.ip = ip_text(&g.ip);
                    (n.port, n.pport, n.cport) = (g.port, g.pport, g.cport);
                    n.connected = false;
                    self.add_node(n);
                    out.save = true;
                }
                continue;
            };
            if let Some(by) = reporter.filter(|_| g.name != self.myself) {
                if g.flags & (flag::FAIL | flag::PFAIL) != 0 {
                    if self.add_failure_report(i, by, at.now) {
                        tracing::debug!(
                            "Node {} reported node {} as not reachable.",
                            super::name_str(&by),
                            self.nodes[i].name_str()
                        );
                    }
                    self.mark_failing_if_needed(i, at.now, out);
                } else if self.del_failure_report(i, &by, at.now) {
                    tracing::debug!(
                        "Node {} reported node {} is back online.",
                        super::name_str(&by),
                        self.nodes[i].name_str()
                    );
                }
            }
            let n = &mut self.nodes[i];
            if g.flags & (flag::FAIL | flag::PFAIL) == 0
                && n.ping_sent == 0
                && n.fail_reports.is_empty()
            {
                let pong = g.pong_received as i64 * 1000;
                if pong <= at.now + 500 && pong > n.pong_received {
                    n.pong_received = pong;
                }
            }
            let ip = ip_text(&g.ip);
            if n.is(flag::FAIL | flag::PFAIL)
                && g.flags & flag::NOADDR == 0
                && (n.ip != ip || n.port != g.port || n.cport != g.cport)
            {
                n.ip = ip;
                (n.port, n.pport, n.cport) = (g.port, g.pport, g.cport);
                n.flags &= !flag::NOADDR;
                if let Some(l) = n.link {
                    self.free_link(l);
                }
            }
        }
    }

    /// The sender's hostname (none sent: none). Other extensions (7.2's
    /// forgotten nodes among them) are not 7.0's and are ignored.
    fn extensions(&mut self, s: usize, exts: &[Ext], out: &mut Outbox) {
        let mut hostname = String::new();
        for e in exts {
            if let Ext::Hostname(h) = e {
                hostname = String::from_utf8_lossy(h).into_owned();
            }
        }
        if self.nodes[s].hostname != hostname {
            self.nodes[s].hostname = hostname;
            out.save = true;
        }
    }
}
