//! CLUSTER and READONLY, READWRITE, ASKING. Without `cluster-enabled` they
//! are refused as Redis 7.0 refuses them (CLUSTER INFO is how clients tell
//! a cluster from a single server). With it, they read and change the
//! node's view (`core::cluster`); what a change asks of the rest of the
//! server (follow a master, save `nodes.conf`) is done by
//! `state::cluster::finish`.

use super::help::help_reply;
use super::{int_arg, is, Ctx, Handler};
use crate::core::clock::now_ms;
use crate::core::cluster::{name_str, Cluster, Health, Node, Outbox, SLOTS};
use crate::core::error::{CmdResult, Error};
use crate::state::cluster::finish;
use bytes::Bytes;
use protocol::bus::{flag, Name};

pub static HANDLERS: &[(&str, Handler)] = &[
    ("cluster|addslots", addslots),
    ("cluster|addslotsrange", addslots),
    ("cluster|bumpepoch", bumpepoch),
    ("cluster|count-failure-reports", count_failure_reports),
    ("cluster|countkeysinslot", countkeysinslot),
    ("cluster|delslots", addslots),
    ("cluster|delslotsrange", addslots),
    ("cluster|failover", failover),
    ("cluster|flushslots", flushslots),
    ("cluster|forget", forget),
    ("cluster|getkeysinslot", getkeysinslot),
    ("cluster|help", help),
    ("cluster|info", info),
    ("cluster|keyslot", keyslot),
    ("cluster|links", links),
    ("cluster|meet", meet),
    ("cluster|myid", myid),
    ("cluster|nodes", nodes),
    ("cluster|replicas", replicas),
    ("cluster|replicate", replicate),
    ("cluster|reset", reset),
    ("cluster|saveconfig", saveconfig),
    ("cluster|set-config-epoch", set_config_epoch),
    ("cluster|setslot", setslot),
    ("cluster|shards", shards),
    ("cluster|slaves", replicas),
    ("cluster|slots", slots),
    ("readonly", readonly),
    ("readwrite", readonly),
    ("asking", asking),
];

fn disabled() -> Error {
    Error::other("ERR This instance has cluster support disabled")
}

fn cl<'a>(c: &'a mut Ctx) -> Result<&'a mut Cluster, Error> {
    crate::state::cluster::refresh(c.st, c.now);
    c.st.cluster
        .as_mut()
        .map(|m| &mut m.cl)
        .ok_or_else(disabled)
}

/// Runs a change, then what it asks for; replies OK.
fn change(c: &mut Ctx, f: impl FnOnce(&mut Cluster, &mut Outbox) -> CmdResult) -> CmdResult {
    let mut out = Outbox {
        save: true,
        update_state: true,
        ..Outbox::default()
    };
    let r = f(cl(c)?, &mut out);
    finish(c.st, out);
    r?;
    c.out.ok();
    Ok(())
}

fn unknown_node(a: &[u8]) -> Error {
    Error::other(format!("ERR Unknown node {}", String::from_utf8_lossy(a)))
}

fn node_arg(cl: &Cluster, a: &[u8]) -> Result<usize, Error> {
    (std::str::from_utf8(a)
        .ok()
        .and_then(|s| s.as_bytes().try_into().ok()))
    .and_then(|n: Name| cl.index_of(&n))
    .ok_or_else(|| unknown_node(a))
}

fn slot_arg(a: &[u8]) -> Result<u16, Error> {
    storage::num::parse_i64(a)
        .filter(|&s| (0..SLOTS as i64).contains(&s))
        .map(|s| s as u16)
        .ok_or_else(|| Error::other("ERR Invalid or out of range slot"))
}

fn keyslot(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    cl(c)?;
    c.out.int(storage::slot::key_hash_slot(&a[2]) as i64);
    Ok(())
}

fn myid(c: &mut Ctx, _: &[Bytes]) -> CmdResult {
    let id = cl(c)?.myself;
    c.out.bulk(&id);
    Ok(())
}

fn countkeysinslot(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    cl(c)?;
    let s = int_arg(&a[2])?;
    if !(0..SLOTS as i64).contains(&s) {
        return Err(Error::other("ERR Invalid slot"));
    }
    let n = c.st.shard.dbs[0].slot_len(s as usize);
    c.out.int(n as i64);
    Ok(())
}

fn getkeysinslot(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    cl(c)?;
    let (s, n) = (int_arg(&a[2])?, int_arg(&a[3])?);
    if !(0..SLOTS as i64).contains(&s) || n < 0 {
        return Err(Error::other("ERR Invalid slot or number of keys"));
    }
    let keys = c.st.shard.dbs[0].slot_keys(s as usize, n as usize);
    c.out.array(keys.len());
    for k in keys {
        c.out.bulk(&k);
    }
    Ok(())
}

/// ADDSLOTS, ADDSLOTSRANGE, DELSLOTS, DELSLOTSRANGE.
fn addslots(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let sub = String::from_utf8_lossy(&a[1]).to_ascii_lowercase();
    let (add, range) = (sub.starts_with("add"), sub.ends_with("range"));
    if range && a.len() % 2 == 1 {
        return Err(Error::Arity(format!("cluster|{sub}")));
    }
    cl(c)?;
    let mut wanted = Vec::new();
    if range {
        for p in a[2..].chunks(2) {
            let (s, e) = (slot_arg(&p[0])?, slot_arg(&p[1])?);
            if s > e {
                return Err(Error::other(format!(
                    "ERR start slot number {s} is greater than end slot number {e}"
                )));
            }
            wanted.extend(s..=e);
        }
    } else {
        for x in &a[2..] {
            wanted.push(slot_arg(x)?);
        }
    }
    let cluster = cl(c)?;
    let mut seen = vec![false; SLOTS];
    for &s in &wanted {
        match (add, cluster.slots[s as usize]) {
            (true, Some(_)) => return Err(Error::other(format!("ERR Slot {s} is already busy"))),
            (false, None) => {
                return Err(Error::other(format!("ERR Slot {s} is already unassigned")))
            }
            _ => {}
        }
        if std::mem::replace(&mut seen[s as usize], true) {
            return Err(Error::other(format!(
                "ERR Slot {s} specified multiple times"
            )));
        }
    }
    change(c, |cl, _| {
        let me = cl.my_index();
        for s in wanted {
            cl.importing.retain(|m| m.0 != s);
            cl.assign(s, add.then_some(me));
        }
        Ok(())
    })
}

fn flushslots(c: &mut Ctx, _: &[Bytes]) -> CmdResult {
    cl(c)?;
    if !c.st.shard.dbs[0].is_empty() {
        return Err(Error::other(
            "ERR DB must be empty to perform CLUSTER FLUSHSLOTS.",
        ));
    }
    change(c, |cl, _| {
        let me = cl.my_index();
        for s in 0..SLOTS as u16 {
            if cl.slots[s as usize] == Some(me) {
                cl.assign(s, None);
            }
        }
        Ok(())
    })
}

fn setslot(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let cluster = cl(c)?;
    if !cluster.me().is_master() {
        return Err(Error::other("ERR Please use SETSLOT only with masters."));
    }
    let slot = slot_arg(&a[2])?;
    let bad = || {
        Error::other("ERR Invalid CLUSTER SETSLOT action or number of arguments. Try CLUSTER HELP")
    };
    let action = String::from_utf8_lossy(a.get(3).ok_or_else(bad)?).to_ascii_lowercase();
    let me = cluster.my_index();
    let owner = cluster.slots[slot as usize];
    let target = |cl: &Cluster, not_known: bool| -> Result<usize, Error> {
        let arg = a.get(4).ok_or_else(bad)?;
        let n = node_arg(cl, arg).map_err(|e| match not_known {
            true => Error::other(format!(
                "ERR I don't know about node {}",
                String::from_utf8_lossy(arg)
            )),
            false => e,
        })?;
        if !cl.nodes[n].is_master() {
            return Err(Error::other("ERR Target node is not a master"));
        }
        Ok(n)
    };
    match action.as_str() {
        "migrating" | "importing" if a.len() == 5 => {
            let migrating = action == "migrating";
            if migrating && owner != Some(me) {
                return Err(Error::other(format!(
                    "ERR I'm not the owner of hash slot {slot}"
                )));
            }
            if !migrating && owner == Some(me) {
                return Err(Error::other(format!(
                    "ERR I'm already the owner of hash slot {slot}"
                )));
            }
            let n = target(cluster, true)?;
            let name = cluster.nodes[n].name;
            change(c, |cl, _| {
                let open = if migrating {
                    &mut cl.migrating
                } else {
                    &mut cl.importing
                };
                open.retain(|m| m.0 != slot);
                open.push((slot, name));
                Ok(())
            })
        }
        "stable" if a.len() == 4 => change(c, |cl, _| {
            cl.migrating.retain(|m| m.0 != slot);
            cl.importing.retain(|m| m.0 != slot);
            Ok(())
        }),
        "node" if a.len() == 5 => {
            let n = target(cluster, false)?;
            let keys = c.st.shard.dbs[0].slot_len(slot as usize);
            if owner == Some(me) && n != me && keys > 0 {
                return Err(Error::other(format!("ERR Can't assign hashslot {slot} to a different node while I still hold keys for this hash slot.")));
            }
            change(c, |cl, out| {
                if keys == 0 && cl.migrating_to(slot).is_some() && n != me {
                    cl.migrating.retain(|m| m.0 != slot);
                }
                if n == me && cl.importing_from(slot).is_some() {
                    if cl.bump_epoch_without_consensus(out) {
                        tracing::warn!("configEpoch updated after importing slot {slot}");
                    }
                    cl.importing.retain(|m| m.0 != slot);
                }
                cl.assign(slot, Some(n));
                // A master left without slots follows the node that took
                // its last one.
                if owner == Some(me)
                    && n != me
                    && cl.count_slots(me) == 0
                    && cl.set.allow_replica_migration
                {
                    tracing::warn!(
                        "Configuration change detected. Reconfiguring myself as a replica of {}",
                        cl.nodes[n].name_str()
                    );
                    cl.set_my_master(n, out);
                }
                Ok(())
            })
        }
        _ => Err(bad()),
    }
}

fn meet(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    cl(c)?;
    let text = |b: &Bytes| String::from_utf8_lossy(b).into_owned();
    let port = int_arg(&a[3]).map_err(|_| {
        Error::other(format!(
            "ERR Invalid TCP base port specified: {}",
            text(&a[3])
        ))
    })?;
    let cport = match a.get(4) {
        Some(b) => int_arg(b).map_err(|_| {
            Error::other(format!("ERR Invalid TCP bus port specified: {}", text(b)))
        })?,
        None => port + 10000,
    };
    let invalid = || {
        Error::other(format!(
            "ERR Invalid node address specified: {}:{}",
            text(&a[2]),
            text(&a[3])
        ))
    };
    let ip: std::net::IpAddr = text(&a[2]).parse().map_err(|_| invalid())?;
    if !(1..=65535).contains(&port) || !(1..=65535).contains(&cport) {
        return Err(invalid());
    }
    let ip = ip.to_string();
    change(c, |cl, _| {
        let busy = cl.nodes.iter().any(|n| {
            n.is(flag::HANDSHAKE) && n.ip == ip && n.port as i64 == port && n.cport as i64 == cport
        });
        if !busy {
            let mut n = Node::new(
                crate::core::cluster::random_name(),
                flag::HANDSHAKE | flag::MEET,
            );
            n.ip = ip;
            (n.port, n.cport) = (port as u16, cport as u16);
            n.connected = false;
            cl.add_node(n);
        }
        Ok(())
    })
}

fn forget(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let cluster = cl(c)?;
    let n = node_arg(cluster, &a[2])?;
    if n == cluster.my_index() {
        return Err(Error::other(
            "ERR I tried hard but I can't forget myself...",
        ));
    }
    if cluster.my_master() == Some(n) {
        return Err(Error::other("ERR Can't forget my master!"));
    }
    let now = now_ms();
    change(c, |cl, _| {
        let name = cl.nodes[n].name;
        cl.blacklist_add(name, now / 1000);
        cl.del_node(n);
        Ok(())
    })
}

fn replicate(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let cluster = cl(c)?;
    let n = node_arg(cluster, &a[2])?;
    if n == cluster.my_index() {
        return Err(Error::other("ERR Can't replicate myself"));
    }
    if !cluster.nodes[n].is_master() {
        return Err(Error::other(
            "ERR I can only replicate a master, not a replica.",
        ));
    }
    let me = cluster.my_index();
    let has_slots = cluster.count_slots(me) > 0;
    if cluster.me().is_master() && (has_slots || !c.st.shard.dbs[0].is_empty()) {
        return Err(Error::other(
            "ERR To set a master the node must be empty and without assigned slots.",
        ));
    }
    change(c, |cl, out| {
        cl.set_my_master(n, out);
        Ok(())
    })
}

fn replicas(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let use_pport = crate::state::cluster::use_pport(c.st, c.cl);
    let cluster = cl(c)?;
    let n = node_arg(cluster, &a[2])?;
    if !cluster.nodes[n].is_master() {
        return Err(Error::other("ERR The specified node is not a master"));
    }
    let text = cluster.describe(false, use_pport);
    let names: Vec<Name> = cluster
        .replicas_of(n)
        .map(|r| cluster.nodes[r].name)
        .collect();
    let lines: Vec<&str> = text
        .lines()
        .filter(|l| names.iter().any(|r| l.starts_with(name_str(r))))
        .collect();
    c.out.array(lines.len());
    for l in lines {
        c.out.bulk(l.as_bytes());
    }
    Ok(())
}

fn count_failure_reports(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let cluster = cl(c)?;
    let n = node_arg(cluster, &a[2])?;
    let count = cluster.count_failure_reports(n, now_ms());
    c.out.int(count as i64);
    Ok(())
}

fn failover(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    cl(c)?;
    if a.len() > 3 {
        return Err(super::help::bad_sub(&a[1], "CLUSTER"));
    }
    let (force, takeover) = match a.get(2) {
        None => (false, false),
        Some(x) if a.len() == 3 && is(x, "force") => (true, false),
        Some(x) if a.len() == 3 && is(x, "takeover") => (false, true),
        _ => return Err(Error::Syntax),
    };
    let cluster = cl(c)?;
    if cluster.me().is_master() {
        return Err(Error::other(
            "ERR You should send CLUSTER FAILOVER to a replica",
        ));
    }
    let Some(m) = cluster.my_master() else {
        return Err(Error::other(
            "ERR I'm a replica but my master is unknown to me",
        ));
    };
    let link_down =
        c.st.repl
            .master
            .as_ref()
            .is_none_or(|m| m.state != crate::state::repl::MasterState::Connected);
    let cluster = cl(c)?;
    if !force && !takeover && (cluster.nodes[m].failed() || link_down) {
        return Err(Error::other(
            "ERR Master is down or failed, please use CLUSTER FAILOVER FORCE",
        ));
    }
    let now = now_ms();
    change(c, |cl, out| {
        cl.reset_manual_failover(out);
        cl.mf.end = now + crate::core::cluster::failover::MF_TIMEOUT;
        if takeover {
            tracing::warn!("Taking over the master (user request).");
            cl.bump_epoch_without_consensus(out);
            cl.replace_my_master(now, out);
        } else if force {
            tracing::warn!("Forced failover user request accepted.");
            cl.mf.can_start = true;
        } else {
            tracing::warn!("Manual failover user request accepted.");
            let msg = cl.bare_message(protocol::bus::kind::MFSTART, 0);
            if let Some(l) = cl.nodes[m].link {
                cl.send(l, protocol::bus::kind::MFSTART, msg);
            }
        }
        Ok(())
    })
}

fn reset(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    cl(c)?;
    if a.len() > 3 {
        return Err(super::help::bad_sub(&a[1], "CLUSTER"));
    }
    let hard = match a.get(2) {
        None => false,
        Some(x) if a.len() == 3 && is(x, "hard") => true,
        Some(x) if a.len() == 3 && is(x, "soft") => false,
        _ => return Err(Error::Syntax),
    };
    let cluster = cl(c)?;
    if cluster.me().is_master() && !c.st.shard.dbs[0].is_empty() {
        return Err(Error::other(
            "ERR CLUSTER RESET can't be called with master nodes containing keys",
        ));
    }
    let was_replica = !cl(c)?.me().is_master();
    if was_replica {
        crate::state::master_link::unset_master(c.st, "cluster reset");
        for db in c.st.shard.dbs.iter_mut() {
            drop(db.take());
        }
    }
    change(c, |cl, out| {
        let me = cl.my_index();
        cl.set_node_as_master(me, out);
        cl.migrating.clear();
        cl.importing.clear();
        for s in 0..SLOTS as u16 {
            cl.assign(s, None);
        }
        while let Some(i) = (0..cl.nodes.len()).find(|&i| cl.nodes[i].name != cl.myself) {
            cl.del_node(i);
        }
        cl.reset_manual_failover(out);
        if hard {
            cl.current_epoch = 0;
            cl.last_vote_epoch = 0;
            let me = cl.me_mut();
            me.config_epoch = 0;
            let name = crate::core::cluster::random_name();
            me.name = name;
            cl.myself = name;
            tracing::info!("Node hard reset, now I'm {}", name_str(&name));
        }
        out.fsync = true;
        Ok(())
    })
}

fn saveconfig(c: &mut Ctx, _: &[Bytes]) -> CmdResult {
    cl(c)?;
    if !crate::state::cluster::save(c.st, true) {
        return Err(Error::other(
            "ERR error saving the cluster node config: could not write the file",
        ));
    }
    c.out.ok();
    Ok(())
}

fn bumpepoch(c: &mut Ctx, _: &[Bytes]) -> CmdResult {
    let mut out = Outbox::default();
    let cluster = cl(c)?;
    let bumped = cluster.bump_epoch_without_consensus(&mut out);
    let epoch = cluster.me().config_epoch;
    finish(c.st, out);
    c.out.simple(&format!(
        "{} {epoch}",
        if bumped { "BUMPED" } else { "STILL" }
    ));
    Ok(())
}

fn set_config_epoch(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let cluster = cl(c)?;
    let e = int_arg(&a[2])?;
    if e < 0 {
        return Err(Error::other(format!(
            "ERR Invalid config epoch specified: {e}"
        )));
    }
    if cluster.nodes.len() > 1 {
        return Err(Error::other("ERR The user can assign a config epoch only when the node does not know any other node."));
    }
    if cluster.me().config_epoch != 0 {
        return Err(Error::other("ERR Node config epoch is already non-zero"));
    }
    change(c, |cl, out| {
        cl.me_mut().config_epoch = e as u64;
        tracing::warn!("configEpoch set to {e} via CLUSTER SET-CONFIG-EPOCH");
        cl.current_epoch = cl.current_epoch.max(e as u64);
        out.fsync = true;
        Ok(())
    })
}

fn info(c: &mut Ctx, _: &[Bytes]) -> CmdResult {
    let cluster = cl(c)?;
    let text = info_text(cluster);
    c.out.verbatim(text.as_bytes());
    Ok(())
}

const MSG_NAMES: [&str; 11] = [
    "ping",
    "pong",
    "meet",
    "fail",
    "publish",
    "auth-req",
    "auth-ack",
    "update",
    "mfstart",
    "module",
    "publishshard",
];

/// CLUSTER INFO's text.
pub fn info_text(cl: &Cluster) -> String {
    let (mut assigned, mut pfail, mut fail) = (0, 0, 0);
    for o in cl.slots.iter().flatten() {
        assigned += 1;
        let n = &cl.nodes[*o];
        if n.failed() {
            fail += 1;
        } else if n.is(flag::PFAIL) {
            pfail += 1;
        }
    }
    let my_epoch = cl
        .my_master()
        .map_or(cl.me().config_epoch, |m| cl.nodes[m].config_epoch);
    let mut s = format!(
        "cluster_state:{}\r\ncluster_slots_assigned:{assigned}\r\ncluster_slots_ok:{}\r\ncluster_slots_pfail:{pfail}\r\ncluster_slots_fail:{fail}\r\ncluster_known_nodes:{}\r\ncluster_size:{}\r\ncluster_current_epoch:{}\r\ncluster_my_epoch:{my_epoch}\r\n",
        if cl.health == Health::Ok { "ok" } else { "fail" },
        assigned - pfail - fail,
        cl.nodes.len(),
        cl.size,
        cl.current_epoch,
    );
    for (what, counts) in [("sent", &cl.stats.sent), ("received", &cl.stats.received)] {
        for (name, n) in MSG_NAMES.iter().zip(counts.iter()) {
            if *n > 0 {
                s += &format!("cluster_stats_messages_{name}_{what}:{n}\r\n");
            }
        }
        s += &format!(
            "cluster_stats_messages_{what}:{}\r\n",
            counts.iter().sum::<u64>()
        );
    }
    s += &format!(
        "total_cluster_links_buffer_limit_exceeded:{}\r\n",
        cl.stats.links_buffer_limit_exceeded
    );
    s
}

fn nodes(c: &mut Ctx, _: &[Bytes]) -> CmdResult {
    let use_pport = crate::state::cluster::use_pport(c.st, c.cl);
    let text = cl(c)?.describe(false, use_pport);
    c.out.verbatim(text.as_bytes());
    Ok(())
}

/// The host a client is told for node `n` first, and the other names it
/// has, as `cluster-preferred-endpoint-type` says.
/// (None for `unknown-endpoint`: CLUSTER SLOTS says null there.)
fn endpoints<'a>(pref: &str, n: &'a Node) -> (Option<&'a str>, Vec<(&'static str, &'a str)>) {
    let mut meta = Vec::new();
    let first = n.preferred_host(pref);
    if pref != "ip" {
        meta.push(("ip", n.ip.as_str()));
    }
    if pref != "hostname" && !n.hostname.is_empty() {
        meta.push(("hostname", n.hostname.as_str()));
    }
    (first, meta)
}

fn slots(c: &mut Ctx, _: &[Bytes]) -> CmdResult {
    let pref = c.st.cfg.cluster_preferred_endpoint_type.clone();
    let use_pport = crate::state::cluster::use_pport(c.st, c.cl);
    let my_offset = c.st.repl.offset;
    cl(c)?;
    let cluster = c.st.cluster.as_ref().map(|m| &m.cl).ok_or_else(disabled)?;
    let mut ranges: Vec<(u16, u16, usize)> = Vec::new();
    for s in 0..SLOTS as u16 {
        let Some(o) = cluster.slots[s as usize] else {
            continue;
        };
        match ranges.last_mut() {
            Some((_, e, n)) if *n == o && *e + 1 == s => *e = s,
            _ => ranges.push((s, s, o)),
        }
    }
    c.out.array(ranges.len());
    for (start, end, o) in ranges {
        // Failed replicas, and those still loading their first sync
        // (offset 0), are not offered to clients.
        let replicas: Vec<usize> = cluster
            .replicas_of(o)
            .filter(|&r| {
                let n = &cluster.nodes[r];
                let offset = if n.name == cluster.myself {
                    my_offset
                } else {
                    n.repl_offset
                };
                !n.failed() && offset != 0
            })
            .collect();
        c.out.array(2 + 1 + replicas.len());
        c.out.int(start as i64);
        c.out.int(end as i64);
        for i in std::iter::once(o).chain(replicas) {
            let n = &cluster.nodes[i];
            let (host, meta) = endpoints(&pref, n);
            c.out.array(4);
            match host {
                Some(h) => c.out.bulk(h.as_bytes()),
                None => c.out.null(),
            }
            c.out.int(n.client_port(use_pport) as i64);
            c.out.bulk(&n.name);
            c.out.map(meta.len());
            for (k, v) in meta {
                c.out.bulk(k.as_bytes());
                c.out.bulk(v.as_bytes());
            }
        }
    }
    Ok(())
}

fn shards(c: &mut Ctx, _: &[Bytes]) -> CmdResult {
    let tls_cluster = c.st.cfg.tls_cluster;
    let pref = c.st.cfg.cluster_preferred_endpoint_type.clone();
    let my_offset = c.st.repl.offset;
    cl(c)?;
    let cluster = c.st.cluster.as_ref().map(|m| &m.cl).ok_or_else(disabled)?;
    let masters: Vec<usize> = (0..cluster.nodes.len())
        .filter(|&i| cluster.nodes[i].is_master())
        .collect();
    c.out.array(masters.len());
    let all = cluster.slot_ranges();
    for m in masters {
        c.out.map(2);
        c.out.bulk(b"slots");
        let ranges = &all[m];
        c.out.array(ranges.len() * 2);
        for &(s, e) in ranges {
            c.out.int(s as i64);
            c.out.int(e as i64);
        }
        c.out.bulk(b"nodes");
        let members: Vec<usize> = std::iter::once(m).chain(cluster.replicas_of(m)).collect();
        c.out.array(members.len());
        for i in members {
            let n = &cluster.nodes[i];
            let endpoint = endpoints(&pref, n).0.unwrap_or("");
            let offset = if n.name == cluster.myself {
                my_offset
            } else {
                n.repl_offset
            };
            let health = if n.is(flag::FAIL | flag::PFAIL) {
                "fail"
            } else if !n.is_master() && offset == 0 {
                "loading"
            } else {
                "online"
            };
            // Under `tls-cluster` the announced port is the TLS one.
            let mut fields: Vec<(&str, Result<i64, &str>)> = vec![("id", Err(n.name_str()))];
            match tls_cluster {
                true if n.pport > 0 => fields.push(("port", Ok(n.pport as i64))),
                true => {}
                false => fields.push(("port", Ok(n.port as i64))),
            }
            if tls_cluster {
                fields.push(("tls-port", Ok(n.port as i64)));
            }
            fields.push(("ip", Err(&n.ip)));
            fields.push(("endpoint", Err(endpoint)));
            if !n.hostname.is_empty() {
                fields.push(("hostname", Err(&n.hostname)));
            }
            fields.push((
                "role",
                Err(if n.is_master() { "master" } else { "replica" }),
            ));
            fields.push(("replication-offset", Ok(offset as i64)));
            fields.push(("health", Err(health)));
            c.out.map(fields.len());
            for (k, v) in fields {
                c.out.bulk(k.as_bytes());
                match v {
                    Ok(i) => c.out.int(i),
                    Err(s) => c.out.bulk(s.as_bytes()),
                }
            }
        }
    }
    Ok(())
}

fn links(c: &mut Ctx, _: &[Bytes]) -> CmdResult {
    cl(c)?;
    let cluster = c.st.cluster.as_ref().map(|m| &m.cl).ok_or_else(disabled)?;
    let mut rows = Vec::new();
    for n in &cluster.nodes {
        for (id, dir) in [(n.link, "to"), (n.inbound, "from")] {
            if let Some(l) = id.and_then(|id| cluster.links.get(&id)) {
                rows.push((dir, n.name, l.ctime, l.out.queued_bytes()));
            }
        }
    }
    c.out.array(rows.len());
    for (dir, name, ctime, queued) in rows {
        c.out.map(6);
        c.out.bulk(b"direction");
        c.out.bulk(dir.as_bytes());
        c.out.bulk(b"node");
        c.out.bulk(&name);
        c.out.bulk(b"create-time");
        c.out.int(ctime);
        c.out.bulk(b"events");
        c.out.bulk(if queued > 0 { b"rw" } else { b"r" });
        c.out.bulk(b"send-buffer-allocated");
        c.out.int(queued as i64);
        c.out.bulk(b"send-buffer-used");
        c.out.int(queued as i64);
    }
    Ok(())
}

fn readonly(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    cl(c)?;
    c.cl.readonly = is(&a[0], "readonly");
    c.out.ok();
    Ok(())
}

fn asking(c: &mut Ctx, _: &[Bytes]) -> CmdResult {
    cl(c)?;
    c.cl.asking = true;
    c.out.ok();
    Ok(())
}

fn help(c: &mut Ctx, _: &[Bytes]) -> CmdResult {
    cl(c)?;
    help_reply(c, "CLUSTER", HELP);
    Ok(())
}

const HELP: &[&str] = &[
    "ADDSLOTS <slot> [<slot> ...]",
    "    Assign slots to current node.",
    "ADDSLOTSRANGE <start slot> <end slot> [<start slot> <end slot> ...]",
    "    Assign slots which are between <start-slot> and <end-slot> to current node.",
    "BUMPEPOCH",
    "    Advance the cluster config epoch.",
    "COUNT-FAILURE-REPORTS <node-id>",
    "    Return number of failure reports for <node-id>.",
    "COUNTKEYSINSLOT <slot>",
    "    Return the number of keys in <slot>.",
    "DELSLOTS <slot> [<slot> ...]",
    "    Delete slots information from current node.",
    "DELSLOTSRANGE <start slot> <end slot> [<start slot> <end slot> ...]",
    "    Delete slots information which are between <start-slot> and <end-slot> from current node.",
    "FAILOVER [FORCE|TAKEOVER]",
    "    Promote current replica node to being a master.",
    "FORGET <node-id>",
    "    Remove a node from the cluster.",
    "GETKEYSINSLOT <slot> <count>",
    "    Return key names stored by current node in a slot.",
    "FLUSHSLOTS",
    "    Delete current node own slots information.",
    "INFO",
    "    Return information about the cluster.",
    "KEYSLOT <key>",
    "    Return the hash slot for <key>.",
    "MEET <ip> <port> [<bus-port>]",
    "    Connect nodes into a working cluster.",
    "MYID",
    "    Return the node id.",
    "NODES",
    "    Return cluster configuration seen by node. Output format:",
    "    <id> <ip:port> <flags> <master> <pings> <pongs> <epoch> <link> <slot> ...",
    "REPLICATE <node-id>",
    "    Configure current node as replica to <node-id>.",
    "RESET [HARD|SOFT]",
    "    Reset current node (default: soft).",
    "SET-CONFIG-EPOCH <epoch>",
    "    Set config epoch of current node.",
    "SETSLOT <slot> (IMPORTING <node-id>|MIGRATING <node-id>|STABLE|NODE <node-id>)",
    "    Set slot state.",
    "REPLICAS <node-id>",
    "    Return <node-id> replicas.",
    "SAVECONFIG",
    "    Force saving cluster configuration on disk.",
    "SLOTS",
    "    Return information about slots range mappings. Each range is made of:",
    "    start, end, master and replicas IP addresses, ports and ids",
    "SHARDS",
    "    Return information about slot range mappings and the nodes associated with them.",
    "LINKS",
    "    Return information about all network links between this node and its peers.",
    "    Output format is an array where each array element is a map containing attributes of a link",
];
