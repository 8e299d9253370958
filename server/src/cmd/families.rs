//! The one list of the command families: each binds its names to its
//! handlers (`HANDLERS`), and [`install`] hands them to the command table
//! at start-up. Nothing else names a family.

use super::*;

/// Installs every family's handlers in the command table. Called once, by
/// `main` and by the in-process harness, before the first lookup.
pub fn install() {
    table::install(FAMILIES);
}

const FAMILIES: &[&[(&str, Handler)]] = &[
    string::HANDLERS,
    bitmap::HANDLERS,
    keys::HANDLERS,
    connection::HANDLERS,
    server::HANDLERS,
    lolwut::HANDLERS,
    info::HANDLERS,
    debug::HANDLERS,
    client::HANDLERS,
    cluster::HANDLERS,
    config::HANDLERS,
    module::HANDLERS,
    command::HANDLERS,
    list::HANDLERS,
    hash::HANDLERS,
    set::HANDLERS,
    zset::HANDLERS,
    zset::combine::HANDLERS,
    zset::geo::HANDLERS,
    hll::HANDLERS,
    sort::HANDLERS,
    transaction::HANDLERS,
    scripting::HANDLERS,
    pubsub::HANDLERS,
    replication::HANDLERS,
    persist::HANDLERS,
    migrate::HANDLERS,
    aof::HANDLERS,
    acl::HANDLERS,
    memory::HANDLERS,
    stream::HANDLERS,
    stream::read::HANDLERS,
    stream::group::HANDLERS,
    stream::info::HANDLERS,
];
