//! Pub/Sub commands: SUBSCRIBE UNSUBSCRIBE PSUBSCRIBE PUNSUBSCRIBE PUBLISH
//! SSUBSCRIBE SUNSUBSCRIBE SPUBLISH PUBSUB. Delivery lives in
//! `crate::state::pubsub`; sharded channels have standalone semantics (one shard).

use super::help::help_reply;
use super::{Ctx, Handler};
use crate::core::error::{CmdResult, Error};
use crate::state::pubsub::Kind;
use bytes::Bytes;

pub static HANDLERS: &[(&str, Handler)] = &[
    ("subscribe", subscribe),
    ("unsubscribe", unsubscribe),
    ("psubscribe", psubscribe),
    ("punsubscribe", punsubscribe),
    ("ssubscribe", ssubscribe),
    ("sunsubscribe", sunsubscribe),
    ("publish", publish),
    ("spublish", spublish),
    ("pubsub|channels", pubsub_channels),
    ("pubsub|numsub", pubsub_numsub),
    ("pubsub|numpat", pubsub_numpat),
    ("pubsub|shardchannels", pubsub_shardchannels),
    ("pubsub|shardnumsub", pubsub_shardnumsub),
    ("pubsub|help", pubsub_help),
];

fn sub(c: &mut Ctx, a: &[Bytes], kind: Kind) -> CmdResult {
    c.st.subscribe(c.cl, c.out, kind, &a[1..]);
    Ok(())
}

fn unsub(c: &mut Ctx, a: &[Bytes], kind: Kind) -> CmdResult {
    c.st.unsubscribe(c.cl, Some(c.out), kind, &a[1..]);
    Ok(())
}

/// SUBSCRIBE channel [channel ...]
fn subscribe(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    sub(c, a, Kind::Channel)
}

/// UNSUBSCRIBE [channel [channel ...]]
fn unsubscribe(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    unsub(c, a, Kind::Channel)
}

/// PSUBSCRIBE pattern [pattern ...]
fn psubscribe(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    sub(c, a, Kind::Pattern)
}

/// PUNSUBSCRIBE [pattern [pattern ...]]
fn punsubscribe(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    unsub(c, a, Kind::Pattern)
}

/// SSUBSCRIBE shardchannel [shardchannel ...]
fn ssubscribe(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    sub(c, a, Kind::Shard)
}

/// SUNSUBSCRIBE [shardchannel [shardchannel ...]]
fn sunsubscribe(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    unsub(c, a, Kind::Shard)
}

/// PUBLISH channel message
fn publish(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    publish_generic(c, a, false)
}

/// SPUBLISH shardchannel message
fn spublish(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    publish_generic(c, a, true)
}

/// Delivers here; a cluster node sends it on the bus (every node, or the
/// nodes of its shard) instead of to its replicas.
fn publish_generic(c: &mut Ctx, a: &[Bytes], shard: bool) -> CmdResult {
    let n = c.st.publish(shard, &a[1], &a[2]);
    match c.st.cluster.as_mut() {
        Some(m) => m.cl.propagate_publish(shard, &a[1], &a[2]),
        None => c.st.force_propagate_repl(),
    }
    c.out.int(n as i64);
    Ok(())
}

fn bad_sub(a: &[Bytes]) -> Error {
    Error::other(format!(
        "ERR unknown subcommand or wrong number of arguments for '{}'. Try PUBSUB HELP.",
        String::from_utf8_lossy(&a[1])
    ))
}

/// Active channels of a map matching the optional pattern in `a[2]`.
fn list_channels(
    c: &mut Ctx,
    a: &[Bytes],
    map: fn(&crate::state::pubsub::PubSub) -> &std::collections::HashMap<Bytes, Vec<u64>>,
) -> CmdResult {
    if a.len() > 3 {
        return Err(bad_sub(a));
    }
    let pat = a.get(2);
    let names: Vec<&Bytes> = map(&c.st.pubsub)
        .keys()
        .filter(|ch| pat.is_none_or(|p| storage::glob::matches(p, ch, false)))
        .collect();
    c.out.array(names.len());
    for n in names {
        c.out.bulk(n);
    }
    Ok(())
}

fn num_subs(
    c: &mut Ctx,
    a: &[Bytes],
    map: fn(&crate::state::pubsub::PubSub) -> &std::collections::HashMap<Bytes, Vec<u64>>,
) -> CmdResult {
    c.out.array((a.len() - 2) * 2);
    for ch in &a[2..] {
        let n = map(&c.st.pubsub).get(ch).map_or(0, Vec::len);
        c.out.bulk(ch);
        c.out.int(n as i64);
    }
    Ok(())
}

/// PUBSUB CHANNELS [pattern]
fn pubsub_channels(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    list_channels(c, a, |p| &p.channels)
}

/// PUBSUB SHARDCHANNELS [pattern]
fn pubsub_shardchannels(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    list_channels(c, a, |p| &p.shard)
}

/// PUBSUB NUMSUB [channel [channel ...]]
fn pubsub_numsub(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    num_subs(c, a, |p| &p.channels)
}

/// PUBSUB SHARDNUMSUB [shardchannel [shardchannel ...]]
fn pubsub_shardnumsub(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    num_subs(c, a, |p| &p.shard)
}

/// PUBSUB NUMPAT
fn pubsub_numpat(c: &mut Ctx, _: &[Bytes]) -> CmdResult {
    c.out.int(c.st.pubsub.patterns.len() as i64);
    Ok(())
}

/// PUBSUB HELP
fn pubsub_help(c: &mut Ctx, _: &[Bytes]) -> CmdResult {
    help_reply(
        c,
        "PUBSUB",
        &[
            "CHANNELS [<pattern>]",
            "    Return the currently active channels matching a <pattern> (default: '*').",
            "NUMPAT",
            "    Return number of subscriptions to patterns.",
            "NUMSUB [<channel> ...]",
            "    Return the number of subscribers for the specified channels, excluding",
            "    pattern subscriptions(default: no channels).",
            "SHARDCHANNELS [<pattern>]",
            "    Return the currently active shard level channels matching a <pattern> (default: '*').",
            "SHARDNUMSUB [<shardchannel> ...]",
            "    Return the number of subscribers for the specified shard level channel(s)",
        ],
    );
    Ok(())
}
