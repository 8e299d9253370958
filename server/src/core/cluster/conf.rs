//! The `nodes.conf` format, as Redis 7.0 reads and writes it, and CLUSTER
//! NODES, which is the same text without the `vars` line: one line per node
//! (`<name> <ip>:<port>@<cport>[,<hostname>] <flags> <master|-> <ping-sent>
//! <pong-received> <config-epoch> <connected|disconnected> <slots>...`),
//! slots as single numbers or ranges and, on this node's own line, slots
//! in migration as `[slot->-name]` or `[slot-<-name]`; then
//! `vars currentEpoch <n> lastVoteEpoch <n>`. A file written by either
//! server is read by the other.

use super::{name_str, parse_name, Cluster, Node, SLOTS};
use protocol::bus::flag;
use std::fmt::Write;

/// Flags in the order Redis writes them.
const FLAG_NAMES: &[(u16, &str)] = &[
    (flag::MYSELF, "myself"),
    (flag::MASTER, "master"),
    (flag::REPLICA, "slave"),
    (flag::PFAIL, "fail?"),
    (flag::FAIL, "fail"),
    (flag::HANDSHAKE, "handshake"),
    (flag::NOADDR, "noaddr"),
    (flag::NOFAILOVER, "nofailover"),
];

/// Why a config file was refused (the line, 1-based, and what is wrong).
#[derive(Debug, PartialEq, Eq)]
pub struct ConfError {
    pub line: usize,
    pub what: &'static str,
}

fn flags_text(flags: u16) -> String {
    let names: Vec<&str> = (FLAG_NAMES.iter())
        .filter(|(f, _)| flags & f != 0)
        .map(|(_, n)| *n)
        .collect();
    if names.is_empty() {
        "noflags".into()
    } else {
        names.join(",")
    }
}

impl Cluster {
    /// CLUSTER NODES (`conf`: false; ports as `Node::client_port`) or the
    /// body of `nodes.conf`: nodes in handshake are left out of the file,
    /// as Redis leaves them.
    pub fn describe(&self, conf: bool, use_pport: bool) -> String {
        let mut out = String::new();
        let ranges = self.slot_ranges();
        for (i, n) in self.nodes.iter().enumerate() {
            if conf && n.is(flag::HANDSHAKE) {
                continue;
            }
            let port = n.client_port(use_pport && !conf);
            let _ = write!(out, "{} {}:{}@{}", n.name_str(), n.ip, port, n.cport);
            if !n.hostname.is_empty() {
                let _ = write!(out, ",{}", n.hostname);
            }
            let master = n.master.as_ref().map_or("-", name_str);
            let link = if n.connected || n.is(flag::MYSELF) {
                "connected"
            } else {
                "disconnected"
            };
            // A replica shows its master's epoch, as Redis's `nodeEpoch`.
            let epoch = (n.master.filter(|_| !n.is(flag::MASTER)))
                .and_then(|m| self.node(&m))
                .map_or(n.config_epoch, |m| m.config_epoch);
            let _ = write!(
                out,
                " {} {master} {} {} {epoch} {link}",
                flags_text(n.flags),
                n.ping_sent,
                n.pong_received,
            );
            for &(a, b) in &ranges[i] {
                if a == b {
                    let _ = write!(out, " {a}");
                } else {
                    let _ = write!(out, " {a}-{b}");
                }
            }
            if n.name == self.myself {
                for (s, to) in &self.migrating {
                    let _ = write!(out, " [{s}->-{}]", name_str(to));
                }
                for (s, from) in &self.importing {
                    let _ = write!(out, " [{s}-<-{}]", name_str(from));
                }
            }
            out.push('\n');
        }
        out
    }

    /// The whole `nodes.conf`.
    pub fn to_conf(&self) -> String {
        let mut out = self.describe(true, false);
        let _ = writeln!(
            out,
            "vars currentEpoch {} lastVoteEpoch {}",
            self.current_epoch, self.last_vote_epoch
        );
        out
    }

    /// Reads a `nodes.conf`; `None` for an empty file (a new node).
    pub fn from_conf(text: &str) -> Result<Option<Cluster>, ConfError> {
        let mut nodes: Vec<Node> = Vec::new();
        let mut myself = None;
        // Each node's index, its line, and its slot fields.
        let mut slot_lists: Vec<(usize, usize, Vec<&str>)> = Vec::new();
        let (mut current, mut last_vote) = (0, 0);
        for (ln, line) in text.lines().enumerate() {
            let err = |what| ConfError { line: ln + 1, what };
            let f: Vec<&str> = line.split(' ').filter(|s| !s.is_empty()).collect();
            if f.is_empty() {
                continue;
            }
            if f[0] == "vars" {
                let mut it = f[1..].chunks_exact(2);
                for kv in &mut it {
                    let v = kv[1].parse().map_err(|_| err("bad vars value"))?;
                    match kv[0] {
                        "currentEpoch" => current = v,
                        "lastVoteEpoch" => last_vote = v,
                        _ => {}
                    }
                }
                if !it.remainder().is_empty() {
                    return Err(err("vars without a value"));
                }
                continue;
            }
            if f.len() < 8 {
                return Err(err("too few fields"));
            }
            let name = parse_name(f[0]).ok_or(err("bad node name"))?;
            let mut n = Node::new(name, 0);
            let (addr, hostname) = f[1].split_once(',').unwrap_or((f[1], ""));
            n.hostname = hostname.to_string();
            let (hostport, cport) = match addr.split_once('@') {
                Some((hp, cp)) => (hp, Some(cp)),
                None => (addr, None),
            };
            let (ip, port) = hostport.rsplit_once(':').ok_or(err("bad address"))?;
            n.ip = ip.to_string();
            n.port = port.parse().map_err(|_| err("bad port"))?;
            // A file older than the bus port in the address: port + 10000.
            n.cport = match cport {
                Some(cp) => cp.parse().map_err(|_| err("bad bus port"))?,
                None => n.port.wrapping_add(10000),
            };
            for fl in f[2].split(',') {
                match FLAG_NAMES.iter().find(|(_, s)| *s == fl) {
                    Some((b, _)) => n.flags |= b,
                    None if fl == "noflags" => {}
                    None => return Err(err("unknown flag")),
                }
            }
            if n.is(flag::MYSELF) {
                if myself.is_some() {
                    return Err(err("two nodes are myself"));
                }
                myself = Some(name);
            }
            n.master = match f[3] {
                "-" => None,
                m => Some(parse_name(m).ok_or(err("bad master name"))?),
            };
            n.ping_sent = f[4].parse().map_err(|_| err("bad ping time"))?;
            n.pong_received = f[5].parse().map_err(|_| err("bad pong time"))?;
            n.config_epoch = f[6].parse().map_err(|_| err("bad config epoch"))?;
            n.connected = f[7] == "connected";
            if nodes.iter().any(|o| o.name == name) {
                return Err(err("a node twice"));
            }
            slot_lists.push((nodes.len(), ln + 1, f[8..].to_vec()));
            nodes.push(n);
        }
        let Some(me) = myself else {
            return if nodes.is_empty() {
                Ok(None)
            } else {
                Err(ConfError {
                    line: 0,
                    what: "no node is myself",
                })
            };
        };
        let mut cl = Cluster::new(me);
        cl.nodes = nodes;
        cl.current_epoch = current;
        cl.last_vote_epoch = last_vote;
        for (i, line, list) in slot_lists {
            let err = |what| ConfError { line, what };
            for s in list {
                if let Some(inner) = s.strip_prefix('[').and_then(|s| s.strip_suffix(']')) {
                    let (slot, dir, other) =
                        match (inner.split_once("->-"), inner.split_once("-<-")) {
                            (Some((s, o)), _) => (s, true, o),
                            (_, Some((s, o))) => (s, false, o),
                            _ => return Err(err("bad migration")),
                        };
                    let slot: u16 = slot
                        .parse()
                        .ok()
                        .filter(|&s| (s as usize) < SLOTS)
                        .ok_or(err("bad slot"))?;
                    let other = parse_name(other).ok_or(err("bad node name"))?;
                    if dir {
                        cl.migrating.push((slot, other));
                    } else {
                        cl.importing.push((slot, other));
                    }
                    continue;
                }
                let (a, b) = s.split_once('-').unwrap_or((s, s));
                let slot = |t: &str| t.parse::<u16>().ok().filter(|&s| (s as usize) < SLOTS);
                let (Some(a), Some(b)) = (slot(a), slot(b)) else {
                    return Err(err("bad slot"));
                };
                if a > b {
                    return Err(err("bad slot range"));
                }
                for s in a..=b {
                    cl.assign(s, Some(i));
                }
            }
        }
        Ok(Some(cl))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Written by Redis 7.0.15 (a master with a hostname, slots and a slot
    /// migrating to its replica; the replica's file; a node just created).
    const MASTER: &str = "\
1df1a3c63b98877119a8e5669a01868a4084aadc 127.0.0.1:27102@37102 slave 83b1c426f3b1f249628b463f86d3c4922ec4d069 0 1796176581310 0 connected
83b1c426f3b1f249628b463f86d3c4922ec4d069 127.0.0.1:27101@37101,host-a myself,master - 0 0 0 connected 0-100 200-300 5000 [5000->-1df1a3c63b98877119a8e5669a01868a4084aadc]
vars currentEpoch 1 lastVoteEpoch 0
";
    const REPLICA: &str = "\
83b1c426f3b1f249628b463f86d3c4922ec4d069 127.0.0.1:27101@37101,host-a master - 0 1796176580318 0 connected 0-100 200-300 5000
1df1a3c63b98877119a8e5669a01868a4084aadc 127.0.0.1:27102@37102 myself,slave 83b1c426f3b1f249628b463f86d3c4922ec4d069 0 0 0 connected
vars currentEpoch 1 lastVoteEpoch 0
";
    const NEW: &str = "\
8d5e7d6df142076e4187917976e9eba6fc23cb83 :0@0 myself,master - 0 0 0 connected
vars currentEpoch 0 lastVoteEpoch 0
";

    #[test]
    fn redis_files_read_and_write_back_byte_for_byte() {
        for text in [MASTER, REPLICA, NEW] {
            let c = Cluster::from_conf(text).unwrap().unwrap();
            assert_eq!(c.to_conf(), text);
        }
    }

    #[test]
    fn what_a_file_says_is_what_is_read() {
        let c = Cluster::from_conf(MASTER).unwrap().unwrap();
        let me = c.me();
        assert_eq!(me.hostname, "host-a");
        assert_eq!((me.port, me.cport), (27101, 37101));
        let mine = c.index_of(&c.myself).unwrap();
        assert_eq!(c.slots_of(mine).count(), 101 + 101 + 1);
        assert_eq!(c.slots[5000], Some(mine));
        assert_eq!(c.slots[150], None);
        assert_eq!(c.migrating.len(), 1);
        let replica = &c.nodes[0];
        assert!(replica.is(flag::REPLICA));
        assert_eq!(replica.master, Some(c.myself));
        assert_eq!(c.current_epoch, 1);
        // CLUSTER NODES is the file without its vars line.
        assert_eq!(
            c.describe(false, false),
            MASTER.rsplit_once("vars").unwrap().0
        );
    }

    #[test]
    fn an_empty_file_is_a_new_node_and_a_bad_one_is_refused() {
        assert!(matches!(Cluster::from_conf(""), Ok(None)));
        assert!(matches!(Cluster::from_conf("\n\n"), Ok(None)));
        let bad = [
            ("xyz :0@0 myself,master - 0 0 0 connected", "bad node name"),
            (&NEW.replace("myself,master", "myself,boss"), "unknown flag"),
            (&NEW.replace(" connected", ""), "too few fields"),
            (
                &format!("{}{}", NEW, NEW.lines().next().unwrap()),
                "two nodes are myself",
            ),
            (&MASTER.replace("0-100", "0-16384"), "bad slot"),
            (&MASTER.replace("0-100", "100-0"), "bad slot range"),
            (&MASTER.replace("->-", "-?-"), "bad migration"),
            (&REPLICA.replace("myself,", ""), "no node is myself"),
            (
                &NEW.replace("lastVoteEpoch 0", "lastVoteEpoch"),
                "vars without a value",
            ),
        ];
        for (text, what) in bad {
            assert_eq!(
                Cluster::from_conf(text).err().map(|e| e.what),
                Some(what),
                "{text}"
            );
        }
    }

    #[test]
    fn an_address_without_a_bus_port_gets_port_plus_10000() {
        let old = NEW.replace(":0@0", "10.0.0.1:7000");
        let c = Cluster::from_conf(&old).unwrap().unwrap();
        assert_eq!((c.me().port, c.me().cport), (7000, 17000));
        assert_eq!(c.me().ip, "10.0.0.1");
    }
}
