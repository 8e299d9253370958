//! CLUSTER, READONLY, READWRITE and ASKING on a server without cluster
//! support: refused as Redis 7.0 refuses them when `cluster-enabled` is
//! `no` (an unknown CLUSTER subcommand still gets the usual error, and
//! the metadata's `noscript` keeps them out of scripts). Clients probe
//! CLUSTER INFO to tell a cluster from a single server.

use super::{Ctx, Handler};
use crate::core::error::{CmdResult, Error};
use bytes::Bytes;

pub static HANDLERS: &[(&str, Handler)] = &[
    ("cluster|addslots", disabled),
    ("cluster|addslotsrange", disabled),
    ("cluster|bumpepoch", disabled),
    ("cluster|count-failure-reports", disabled),
    ("cluster|countkeysinslot", disabled),
    ("cluster|delslots", disabled),
    ("cluster|delslotsrange", disabled),
    ("cluster|failover", disabled),
    ("cluster|flushslots", disabled),
    ("cluster|forget", disabled),
    ("cluster|getkeysinslot", disabled),
    ("cluster|help", disabled),
    ("cluster|info", disabled),
    ("cluster|keyslot", disabled),
    ("cluster|links", disabled),
    ("cluster|meet", disabled),
    ("cluster|myid", disabled),
    ("cluster|nodes", disabled),
    ("cluster|replicas", disabled),
    ("cluster|replicate", disabled),
    ("cluster|reset", disabled),
    ("cluster|saveconfig", disabled),
    ("cluster|set-config-epoch", disabled),
    ("cluster|setslot", disabled),
    ("cluster|shards", disabled),
    ("cluster|slaves", disabled),
    ("cluster|slots", disabled),
    ("readonly", disabled),
    ("readwrite", disabled),
    ("asking", disabled),
];

fn disabled(_: &mut Ctx, _: &[Bytes]) -> CmdResult {
    Err(Error::other(
        "ERR This instance has cluster support disabled",
    ))
}
