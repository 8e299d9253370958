//! DEBUG and its subcommands (OBJECT, PROTOCOL, POPULATE, SLEEP, RELOAD,
//! DIGEST, LOADAOF, HTSTATS, …).

use super::help::{bad_sub, help_reply};
use super::{int_arg, is, Ctx, Handler};
use crate::core::error::{CmdResult, Error};
use crate::state::persist;
use bytes::Bytes;
use storage::listpack::LpVal;
use storage::rdb;
use storage::{StreamId, Value};

pub static HANDLERS: &[(&str, Handler)] = &[("debug", debug)];

const DEBUG_DENIED: &str = "ERR DEBUG command not allowed. If the enable-debug-command option is set to \"local\", you can run it from a local connection, otherwise you need to set this option in the configuration file, and then restart the server.";

/// DEBUG subcommand [argument ...]
fn debug(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    if !c.st.cfg.enable_debug_command.permits(c.cl.is_local()) {
        return Err(Error::other(DEBUG_DENIED));
    }
    let sub = String::from_utf8_lossy(&a[1]).to_ascii_lowercase();
    let n = a.len();
    match (sub.as_str(), n) {
        ("help", 2) => debug_help(c),
        // The process ends here (crash.rs): abort, or exit(1) under
        // `use-exit-on-panic`.
        ("panic", 2) => panic!("DEBUG PANIC called at Unix time {}", c.now / 1000),
        ("segfault", 2) => crate::core::crash::segfault(),
        ("set-skip-checksum-validation", 3) => {
            // atoi, as Redis.
            let on = std::str::from_utf8(&a[2])
                .ok()
                .and_then(|s| s.parse::<i64>().ok());
            c.st.skip_checksum_validation = on.unwrap_or(0) != 0;
            c.out.ok();
        }
        ("aof-flush-sleep", 3) => {
            // atoi, as Redis: anything else is 0 (no sleep).
            let us = std::str::from_utf8(&a[2])
                .ok()
                .and_then(|s| s.parse::<i64>().ok());
            c.st.aof.flush_sleep_us = us.unwrap_or(0).max(0) as u64;
            c.out.ok();
        }
        ("sleep", 3) => {
            let secs = std::str::from_utf8(&a[2])
                .ok()
                .and_then(|s| s.trim().parse::<f64>().ok())
                .filter(|s| s.is_finite() && *s > 0.0)
                .unwrap_or(0.0)
                .min(3600.0);
            // Redis blocks the whole server here; so does holding the lock.
            std::thread::sleep(std::time::Duration::from_secs_f64(secs));
            c.out.ok();
        }
        ("config-rewrite-force-all", 2) => {
            let users = super::perm::config_lines(c.st);
            c.st.cfg.rewrite(users.as_deref(), true).map_err(|e| {
                // Redis reports errno: without a file, a NULL path's EFAULT.
                let why = e.strip_prefix("ERR Rewriting config file: ");
                let why = why.unwrap_or("Bad address");
                Error::other(format!("ERR CONFIG-REWRITE-FORCE-ALL failed: {why}"))
            })?;
            c.out.ok();
        }
        ("replicate", n) if n >= 3 => {
            // To replicas only, not run here: a way to make them diverge.
            c.propagate_as(a[2..].iter().cloned());
            c.st.force_propagate_repl();
            c.out.ok();
        }
        ("clusterlink", 5) if is(&a[2], "kill") => cluster_link_kill(c, &a[3], &a[4])?,
        ("drop-cluster-packet-filter", 3) => {
            let t = int_arg(&a[2])?;
            if let Some(m) = c.st.cluster.as_mut() {
                m.cl.drop_filter = t;
            }
            c.out.ok();
        }
        ("set-active-expire", 3) => {
            c.st.active_expire = storage::num::atoi(&a[2]) != 0;
            c.out.ok();
        }
        ("set-disable-deny-scripts", 3) => {
            c.st.scripts_may_call_any = storage::num::atoi(&a[2]) != 0;
            c.out.ok();
        }
        ("pause-cron", 3) => {
            c.st.cron_paused = storage::num::atoi(&a[2]) != 0;
            c.out.ok();
        }
        ("change-repl-id", 2) => {
            c.st.replid = crate::core::random::random_hex40();
            c.out.ok();
        }
        ("quicklist-packed-threshold", 3) => {
            let t = std::str::from_utf8(&a[2])
                .ok()
                .and_then(crate::core::config::parse_memory_u64)
                .filter(|&t| t < 1 << 32)
                .ok_or_else(|| {
                    Error::other(
                        "ERR argument must be a memory value bigger than 1 and smaller than 4gb",
                    )
                })?;
            storage::quicklist::set_packed_threshold(t as usize);
            c.out.ok();
        }
        ("loadaof", 2) => {
            super::replay::reload_aof(c.st).map_err(|e| Error::other(format!("ERR {e}")))?;
            c.out.ok();
        }
        ("replybuffer", 4) if is(&a[2], "peak-reset-time") => {
            c.st.rbuf_peak_reset_ms = if is(&a[3], "never") {
                -1
            } else if is(&a[3], "reset") {
                crate::core::replybuf::DEFAULT_PEAK_RESET_MS
            } else {
                int_arg(&a[3])?
            };
            c.out.ok();
        }
        ("replybuffer", 4) if is(&a[2], "resizing") => {
            c.st.rbuf_resizing = storage::num::atoi(&a[3]) != 0;
            c.out.ok();
        }
        ("object", 3) => debug_object(c, &a[2])?,
        ("htstats", 3) => {
            let db = int_arg(&a[2])?;
            let db = usize::try_from(db)
                .ok()
                .filter(|&d| d < c.st.shard.dbs.len())
                .ok_or_else(|| Error::other("ERR Out of range database"))?;
            let mut text = String::from("[Dictionary HT]\n");
            ht_stats(&mut text, &c.st.shard.dbs[db].keys().stats());
            text += "[Expires HT]\n";
            ht_stats(&mut text, &c.st.shard.dbs[db].expires_stats());
            c.out.verbatim(text.as_bytes());
        }
        ("htstats-key", 3) => debug_htstats_key(c, &a[2])?,
        ("protocol", 3) => debug_protocol(c, &a[2])?,
        ("populate", 3..=5) => debug_populate(c, a)?,
        ("reload", _) => debug_reload(c, a)?,
        ("digest", 2) => debug_digest(c)?,
        ("digest-value", _) => debug_digest_value(c, a)?,
        ("log", 3) => {
            tracing::warn!("DEBUG LOG: {}", String::from_utf8_lossy(&a[2]));
            c.out.ok();
        }
        ("error", 3) => {
            return Err(Error::other(String::from_utf8_lossy(&a[2]).into_owned()));
        }
        _ => return Err(bad_sub(&a[1], "DEBUG")),
    }
    Ok(())
}

/// DEBUG HTSTATS-KEY key: the hash table of a hash, set or sorted set
/// that has one (a sorted set's is its skiplist's member index).
fn debug_htstats_key(c: &mut Ctx, key: &[u8]) -> CmdResult {
    let db = c.cl.db;
    c.st.expire_if_needed(db, key, c.now);
    let tables =
        match c.st.shard.dbs[db].get(key) {
            None => return Err(Error::NoSuchKey),
            Some(storage::Value::Hash(storage::Hash::Table(d))) => d.stats(),
            Some(storage::Value::Set(storage::Set::Table(d))) => d.stats(),
            Some(storage::Value::ZSet(storage::SortedSet::Skiplist(z))) => vec![z.index_stats()],
            Some(_) => return Err(Error::other(
                "ERR The value stored at the specified key is not represented using an hash table",
            )),
        };
    let mut text = String::new();
    ht_stats(&mut text, &tables);
    c.out.verbatim(text.as_bytes());
    Ok(())
}

/// A dict's tables as Redis's `dictGetStats` shows them: the main one,
/// then the rehashing target if a rehash runs.
fn ht_stats(text: &mut String, tables: &[storage::TableStats]) {
    use std::fmt::Write;
    for (i, t) in tables.iter().enumerate() {
        let role = if i == 0 {
            "main hash table"
        } else {
            "rehashing target"
        };
        let _ = writeln!(text, "Hash table {i} stats ({role}):");
        if t.used == 0 {
            text.push_str("No stats available for empty dictionaries\n");
            continue;
        }
        let _ = write!(
            text,
            " table size: {}\n number of elements: {}\n different slots: {}\n max chain length: {}\n avg chain length (counted): {:.2}\n avg chain length (computed): {:.2}\n Chain length distribution:\n",
            t.size,
            t.used,
            t.slots,
            t.max_chain,
            t.chained as f32 / t.slots as f32,
            t.used as f32 / t.slots as f32,
        );
        for (len, &n) in t.chains[..49].iter().enumerate().filter(|(_, &n)| n > 0) {
            let _ = writeln!(
                text,
                "   {len}: {n} ({:.2}%)",
                n as f32 / t.size as f32 * 100.0
            );
        }
    }
}

/// DEBUG OBJECT key: found even when expired (as Redis, it does not expire
/// the key), and not counted as an access.
fn debug_object(c: &mut Ctx, key: &[u8]) -> CmdResult {
    let db = c.cl.db;
    let d = &mut c.st.shard.dbs[db];
    d.set_clock(c.now);
    let (Some(v), Some(lru), Some(idle)) = (d.peek(key), d.access_word(key), d.idle_ms(key)) else {
        return Err(Error::NoSuchKey);
    };
    let enc = v.encoding();
    // The value's RDB bytes, as Redis measures it (`rdbcompression`).
    let opts = storage::rdb::SaveOpts {
        compression: c.st.cfg.rdbcompression,
        ..Default::default()
    };
    let mut b = Vec::new();
    storage::rdb::encode::put_value(&mut b, v, &opts);
    let ser = b.len();
    let addr = v as *const _ as usize;
    let refcount = crate::state::evict::refcount(&c.st.cfg, v);
    let mut line = format!(
        "Value at:{addr:#x} refcount:{refcount} encoding:{enc} serializedlength:{ser} lru:{lru} lru_seconds_idle:{}",
        idle / 1000
    );
    if let storage::Value::List(q) = v {
        let nodes = q.node_count();
        line += &format!(
            " ql_nodes:{nodes} ql_avg_node:{:.2} ql_listpack_max:{} ql_compressed:{} ql_uncompressed_size:{}",
            q.len() as f64 / nodes.max(1) as f64,
            q.fill(),
            u8::from(q.compress_depth() != 0),
            q.nodes_size()
        );
    }
    c.out.simple(&line);
    Ok(())
}

fn debug_protocol(c: &mut Ctx, t: &[u8]) -> CmdResult {
    let t = String::from_utf8_lossy(t).to_ascii_lowercase();
    let o = &mut *c.out;
    match t.as_str() {
        "string" => o.bulk(b"Hello World"),
        "integer" => o.int(12345),
        #[allow(clippy::approx_constant)]
        "double" => o.double(3.141),
        "bignum" => o.big_number("1234567999999999999999999999999999999"),
        "null" => o.null(),
        "array" | "set" | "map" => {
            match t.as_str() {
                "array" => o.array(3),
                "set" => o.set(3),
                _ => o.map(3),
            }
            for i in 0..3 {
                o.int(i);
                if t == "map" {
                    o.boolean(i == 1);
                }
            }
        }
        "attrib" => {
            if o.resp3 {
                o.raw(b"|1\r\n");
                o.bulk(b"key-popularity");
                o.array(2);
                o.bulk(b"key:123");
                o.int(90);
            }
            o.bulk(b"Some real reply following the attribute");
        }
        "push" => {
            if !o.resp3 {
                return Err(Error::other("ERR RESP2 is not supported by this command"));
            }
            o.push(2);
            o.bulk(b"server-cpu-usage");
            o.int(42);
            o.bulk(b"Some real reply following the push reply");
        }
        "verbatim" => o.verbatim(b"This is a verbatim\nstring"),
        "true" => o.boolean(true),
        "false" => o.boolean(false),
        _ => return Err(Error::other(
            "ERR Wrong protocol type name. Please use one of the following: string|integer|double|bignum|null|array|set|map|attrib|push|verbatim|true|false",
        )),
    }
    Ok(())
}

/// DEBUG POPULATE count [prefix] [size]
fn debug_populate(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let count = int_arg(&a[2])?;
    if count < 0 {
        return Err(Error::other("ERR count must be positive"));
    }
    let prefix: &[u8] = a.get(3).map_or(b"key", |p| &p[..]);
    let size = match a.get(4) {
        Some(s) => {
            let v = int_arg(s)?;
            if v < 0 {
                return Err(Error::other("ERR size must be positive"));
            }
            Some(v.min(512 * 1024 * 1024) as usize)
        }
        None => None,
    };
    let db = c.cl.db;
    for i in 0..count {
        let mut key = prefix.to_vec();
        key.push(b':');
        key.extend_from_slice(i.to_string().as_bytes());
        if c.st.shard.dbs[db].contains(&key) {
            continue;
        }
        let mut val = format!("value:{i}").into_bytes();
        if let Some(sz) = size {
            val.resize(sz, 0);
        }
        c.st.shard.dbs[db].add(&key, storage::Value::str(&val));
    }
    c.out.ok();
    Ok(())
}

/// DEBUG RELOAD [MERGE] [NOFLUSH] [NOSAVE]: save, empty the keyspace and
/// load the file back.
fn debug_reload(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let (mut merge, mut flush, mut save) = (false, true, true);
    for o in &a[2..] {
        if is(o, "merge") {
            merge = true;
        } else if is(o, "noflush") {
            flush = false;
        } else if is(o, "nosave") {
            save = false;
        } else {
            return Err(Error::other(
                "ERR DEBUG RELOAD only supports the MERGE, NOFLUSH and NOSAVE options.",
            ));
        }
    }
    if save {
        persist::save(c.st).map_err(|_| Error::other("ERR"))?;
    }
    let path = persist::rdb_path(c.st);
    let mut file = std::fs::File::open(&path)
        .map_err(|_| Error::other("ERR Error trying to load the RDB dump, check server logs."))?;
    if flush {
        for db in 0..c.st.shard.dbs.len() {
            c.st.touch_all_watched(db, None);
            drop(c.st.shard.dbs[db].take());
        }
        c.st.invalidate_all();
        if let Some(e) = c.st.engine.as_mut() {
            e.flush_functions();
        }
    }
    if let Err(e) = persist::load_here(c.st, rdb::Input::file(&mut file), merge) {
        tracing::warn!("Error loading the RDB dump: {e}");
        return Err(Error::other(
            "ERR Error trying to load the RDB dump, check server logs.",
        ));
    }
    tracing::info!("DB reloaded by DEBUG RELOAD");
    c.out.ok();
    Ok(())
}

type Digest = [u8; 20];

/// Redis's `mixDigest`: digest = SHA1(digest ^ SHA1(data)), so the
/// result depends on the order of the mixed items.
fn mix(d: &mut Digest, data: &[u8]) {
    xor(d, data);
    *d = sha1_smol::Sha1::from(&d[..]).digest().bytes();
}

/// Redis's `xorDigest`: digest ^= SHA1(data).
fn xor(d: &mut Digest, data: &[u8]) {
    let h = sha1_smol::Sha1::from(data).digest().bytes();
    for (a, b) in d.iter_mut().zip(h) {
        *a ^= b;
    }
}

fn lp_bytes<'a>(v: &'a LpVal, buf: &'a mut itoa::Buffer) -> &'a [u8] {
    v.bytes(buf)
}

/// Redis's `xorObjectDigest`: the value's type, contents (order-sensitive
/// for strings and lists, order-free for sets, hashes and zsets) and
/// whether it has a TTL.
fn object_digest(d: &mut Digest, v: &Value, has_ttl: bool) {
    let t: u32 = match v {
        Value::Str(_) => 0,
        Value::List(_) => 1,
        Value::Set(_) => 2,
        Value::ZSet(_) => 3,
        Value::Hash(_) => 4,
        Value::Stream(_) => 6,
    };
    mix(d, &t.to_be_bytes());
    let mut buf = itoa::Buffer::new();
    match v {
        Value::Str(s) => mix(d, s.as_bytes(&mut buf)),
        Value::List(l) => {
            for e in l.iter() {
                mix(d, lp_bytes(&e, &mut buf));
            }
        }
        Value::Set(s) => {
            for e in s.iter() {
                xor(d, lp_bytes(&e, &mut buf));
            }
        }
        Value::ZSet(z) => z.for_each(|m, s| {
            let mut e = [0u8; 20];
            mix(&mut e, m);
            mix(&mut e, storage::num::fmt_g17(s).as_bytes());
            xor(d, &e);
        }),
        Value::Hash(h) => {
            let mut b2 = itoa::Buffer::new();
            for (f, v) in h.iter() {
                let mut e = [0u8; 20];
                mix(&mut e, lp_bytes(&f, &mut buf));
                mix(&mut e, lp_bytes(&v, &mut b2));
                xor(d, &e);
            }
        }
        Value::Stream(s) => s.range(StreamId::MIN, StreamId::MAX, false, |e| {
            mix(d, format!("{}.{}", e.id.ms, e.id.seq).as_bytes());
            let mut b2 = itoa::Buffer::new();
            e.for_each(|f, v| {
                mix(d, lp_bytes(&f, &mut buf));
                mix(d, lp_bytes(&v, &mut b2));
            });
            true
        }),
    }
    if has_ttl {
        xor(d, b"!!expire!!");
    }
}

fn hex(d: &Digest) -> String {
    d.iter().map(|b| format!("{b:02x}")).collect()
}

/// DEBUG DIGEST: Redis's dataset digest (40 zeros when empty).
fn debug_digest(c: &mut Ctx) -> CmdResult {
    let mut fin = [0u8; 20];
    for (i, db) in c.st.shard.dbs.iter().enumerate() {
        if db.is_empty() {
            continue;
        }
        mix(&mut fin, &(i as u32).to_be_bytes());
        for (k, v) in db.keys().iter() {
            let mut d = [0u8; 20];
            mix(&mut d, k);
            object_digest(&mut d, v, db.expire_at(k).is_some());
            xor(&mut fin, &d);
        }
    }
    c.out.simple(&hex(&fin));
    Ok(())
}

/// DEBUG DIGEST-VALUE key [key ...]
fn debug_digest_value(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let db = c.cl.db;
    c.out.array(a.len() - 2);
    for k in &a[2..] {
        let mut d = [0u8; 20];
        let d0 = &c.st.shard.dbs[db];
        if let Some(v) = d0.peek(k) {
            object_digest(&mut d, v, d0.expire_at(k).is_some());
        }
        c.out.simple(&hex(&d));
    }
    Ok(())
}

fn debug_help(c: &mut Ctx) {
    help_reply(
        c,
        "DEBUG",
        &[
            "AOF-FLUSH-SLEEP <microsec>",
            "    Server will sleep before flushing the AOF, this is used for testing.",
            "CHANGE-REPL-ID",
            "    Change the replication IDs of the instance.",
            "    Dangerous: should be used only for testing the replication subsystem.",
            "ERROR <string>",
            "    Return a Redis protocol error with <string> as message. Useful for clients",
            "    unit tests to simulate Redis errors.",
            "LOADAOF",
            "    Flush the AOF buffers on disk and reload the AOF in memory.",
            "LOG <message>",
            "    Write <message> to the server log.",
            "HTSTATS <dbid>",
            "    Return hash table statistics of the specified Redis database.",
            "HTSTATS-KEY <key>",
            "    Like HTSTATS but for the hash table stored at <key>'s value.",
            "OBJECT <key>",
            "    Show low level info about `key` and associated value.",
            "POPULATE <count> [<prefix>] [<size>]",
            "    Create <count> string keys named key:<num>. If <prefix> is specified then",
            "    it is used instead of the 'key' prefix. These are not propagated to",
            "    replicas. Cluster slots are not respected so keys not belonging to the",
            "    current node can be created in cluster mode.",
            "PROTOCOL <type>",
            "    Reply with a test value of the specified type. <type> can be: string,",
            "    integer, double, bignum, null, array, set, map, attrib, push, verbatim,",
            "    true, false.",
            "SET-ACTIVE-EXPIRE <0|1>",
            "    Setting it to 0 disables expiring keys in background when they are not",
            "    accessed (otherwise the Redis behavior). Setting it to 1 reenables back the",
            "    default.",
            "QUICKLIST-PACKED-THRESHOLD <size>",
            "    Sets the threshold for elements to be inserted as plain vs packed nodes",
            "    Default value is 1GB, allows values up to 4GB. Setting to 0 restores to default.",
            "SET-SKIP-CHECKSUM-VALIDATION <0|1>",
            "    Enables or disables checksum checks for RDB files and RESTORE's payload.",
            "REPLICATE <string>",
            "    Replicates the provided string to replicas, allowing data divergence.",
            "SLEEP <seconds>",
            "    Stop the server for <seconds>. Decimals allowed.",
            "PAUSE-CRON <0|1>",
            "    Stop periodic cron job processing.",
        ],
    );
}

/// DEBUG CLUSTERLINK KILL TO|FROM|ALL <node-id>: drops links to a node
/// (the cron makes them again).
fn cluster_link_kill(c: &mut Ctx, dir: &[u8], node: &[u8]) -> CmdResult {
    let Some(m) = c.st.cluster.as_mut() else {
        return Err(Error::other(
            "ERR Debug option only available for cluster mode enabled setup!",
        ));
    };
    let cl = &mut m.cl;
    let name: Option<protocol::bus::Name> = node.try_into().ok();
    let Some(i) = name.and_then(|n| cl.index_of(&n)) else {
        return Err(Error::other(format!(
            "ERR Unknown node {}",
            String::from_utf8_lossy(node)
        )));
    };
    let (to, from) = (cl.nodes[i].link, cl.nodes[i].inbound);
    let links = if is(dir, "to") {
        vec![to]
    } else if is(dir, "from") {
        vec![from]
    } else if is(dir, "all") {
        vec![to, from]
    } else {
        return Err(Error::other(format!(
            "ERR Unknown direction {}",
            String::from_utf8_lossy(dir)
        )));
    };
    for l in links.into_iter().flatten() {
        cl.free_link(l);
    }
    c.out.ok();
    Ok(())
}
