//! Cluster mode's part of the gate (Redis's `getNodeByQuery`): which node
//! serves a request's keys — every key in one slot, that slot served here
//! (or being imported, after ASKING; or readable on this replica, after
//! READONLY), the cluster up — and otherwise the redirection or refusal a
//! client is sent, in Redis's words.

use super::table::{flags, resolve, Command};
use crate::core::cluster::{Cluster, Health};
use crate::core::error::Error;
use crate::state::{Client, State};
use bytes::Bytes;
use storage::slot::key_hash_slot;

/// Shard channels count as keys here (SSUBSCRIBE's channels hash to
/// slots), though their key specs are not keys to COMMAND GETKEYS.
fn is_shard_pubsub(name: &str) -> bool {
    matches!(name, "spublish" | "ssubscribe" | "sunsubscribe")
}

/// The keys (or shard channels) of a request.
fn keys_of<'a>(cmd: &Command, args: &'a [Bytes]) -> Vec<&'a [u8]> {
    if is_shard_pubsub(cmd.name) {
        let end = if cmd.name == "spublish" {
            2.min(args.len())
        } else {
            args.len()
        };
        return args[1..end].iter().map(|a| &a[..]).collect();
    }
    crate::core::command::keys::keys_for(cmd.meta, args)
        .map(|ks| ks.into_iter().map(|(i, _)| &args[i][..]).collect())
        .unwrap_or_default()
}

/// Whether the cluster check applies: not to a request from this node's
/// master or the AOF, nor to a command without keys (but EXEC).
pub fn applies(st: &State, cl: &Client, cmd: &Command) -> bool {
    st.cluster.is_some()
        && !cl.peer.master
        && cl.fd >= 0
        && (cmd.name == "exec" || !cmd.meta.specs.is_empty() || cmd.has(flags::MOVABLE_KEYS))
}

/// The address a client is redirected to for node `i`.
fn endpoint(st: &State, cl: &Client, c: &Cluster, i: usize) -> String {
    let use_pport = crate::state::cluster::use_pport(st, cl);
    c.endpoint(i, &st.cfg.cluster_preferred_endpoint_type, use_pport)
}

/// Checks a request (for EXEC, everything it queued) against the cluster;
/// `Ok` with the slot its keys hash to, if any. `writes`: the request may
/// write (a write command, a script declared without `no-writes`, an EXEC
/// that queued either), which a replica never serves.
pub fn check(
    st: &State,
    cl: &Client,
    cmd: &Command,
    args: &[Bytes],
    writes: bool,
) -> Result<Option<u16>, Error> {
    let Some(m) = st.cluster.as_ref() else {
        return Ok(None);
    };
    let c = &m.cl;
    let me = c.my_index();
    let requests: Vec<(&Command, &[Bytes])> = if cmd.name == "exec" {
        let Some(q) = &cl.multi else { return Ok(None) };
        q.iter()
            .filter_map(|a| resolve(a).ok().map(|c| (c, &a[..])))
            .collect()
    } else {
        vec![(cmd, args)]
    };
    let db = &st.shard.dbs[0];
    let now = crate::core::clock::now_ms();
    let (mut first, mut slot, mut owner) = (None::<&[u8]>, 0u16, None);
    let (mut migrating, mut importing, mut multiple) = (false, false, false);
    let (mut existing, mut missing) = (0, 0);
    let mut shard_pubsub = false;
    for (rc, ra) in requests {
        shard_pubsub |= is_shard_pubsub(rc.name);
        for key in keys_of(rc, ra) {
            let this = key_hash_slot(key);
            match first {
                None => {
                    first = Some(key);
                    slot = this;
                    let Some(o) = c.slots[this as usize] else {
                        return Err(Error::Cluster("CLUSTERDOWN Hash slot not served".into()));
                    };
                    owner = Some(o);
                    if o == me && c.migrating_to(this).is_some() {
                        migrating = true;
                    } else if c.importing_from(this).is_some() {
                        importing = true;
                    }
                }
                Some(f) if f != key => {
                    if this != slot {
                        return Err(Error::Cluster(
                            "CROSSSLOT Keys in request don't hash to the same slot".into(),
                        ));
                    }
                    multiple = true;
                }
                _ => {}
            }
            if (migrating || importing) && !shard_pubsub {
                if db.contains(key) && !db.is_expired(key, now) {
                    existing += 1;
                } else {
                    missing += 1;
                }
            }
        }
    }
    let Some(owner) = owner else {
        return Ok(None);
    };
    if c.health != Health::Ok {
        if shard_pubsub {
            if !st.cfg.cluster_allow_pubsubshard_when_down {
                return Err(Error::Cluster("CLUSTERDOWN The cluster is down".into()));
            }
        } else if !st.cfg.cluster_allow_reads_when_down {
            return Err(Error::Cluster("CLUSTERDOWN The cluster is down".into()));
        } else if writes {
            return Err(Error::Cluster(
                "CLUSTERDOWN The cluster is down and only accepts read commands".into(),
            ));
        }
    }
    // MIGRATE works on an open slot's keys wherever they are.
    if (migrating || importing) && cmd.name == "migrate" {
        return Ok(Some(slot));
    }
    if migrating && missing > 0 {
        if existing > 0 {
            return Err(Error::Cluster(
                "TRYAGAIN Multiple keys request during rehashing of slot".into(),
            ));
        }
        let to = c.migrating_to(slot).and_then(|n| c.index_of(n));
        if let Some(to) = to {
            return Err(Error::Cluster(format!(
                "ASK {slot} {}",
                endpoint(st, cl, c, to)
            )));
        }
    }
    if importing && (cl.asking || cmd.has(flags::ASKING)) {
        if multiple && missing > 0 {
            return Err(Error::Cluster(
                "TRYAGAIN Multiple keys request during rehashing of slot".into(),
            ));
        }
        return Ok(Some(slot));
    }
    let mine = &c.nodes[me];
    if (cl.readonly || shard_pubsub) && !writes && !mine.is_master() && c.my_master() == Some(owner)
    {
        return Ok(Some(slot));
    }
    if owner != me {
        return Err(Error::Cluster(format!(
            "MOVED {slot} {}",
            endpoint(st, cl, c, owner)
        )));
    }
    Ok(Some(slot))
}

/// A script's calls in cluster mode: the slot they must stay in (that of
/// its declared keys, or of its first call's), unless it may cross slots.
pub struct ScriptSlot {
    pub slot: Option<u16>,
    pub cross_slot: bool,
}

/// Why a script's call may not run in cluster mode (Redis 7.0's
/// `scriptVerifyClusterState`): its keys are on another node, the cluster
/// is down, or they leave the script's slot.
pub fn script_refusal(
    st: &State,
    cl: &Client,
    cmd: &Command,
    args: &[Bytes],
    rule: &mut ScriptSlot,
) -> Option<&'static str> {
    let slot = match check(st, cl, cmd, args, cmd.has(flags::WRITE)) {
        Ok(s) => s,
        Err(e) => {
            let e = e.to_string();
            return Some(
                if e.starts_with("CLUSTERDOWN The cluster is down and only") {
                    "ERR Script attempted to execute a write command while the cluster is down and readonly"
                } else if e.starts_with("CLUSTERDOWN The cluster is down") {
                    "ERR Script attempted to execute a command while the cluster is down"
                } else {
                    "ERR Script attempted to access a non local key in a cluster node"
                },
            );
        }
    };
    match (slot, rule.slot) {
        (Some(s), None) if !rule.cross_slot => rule.slot = Some(s),
        (Some(s), Some(first)) if !rule.cross_slot && s != first => {
            return Some("ERR Script attempted to access keys that do not hash to the same slot")
        }
        _ => {}
    }
    None
}
