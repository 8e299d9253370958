//! Replication commands, the master's side: SYNC, PSYNC, REPLCONF, WAIT,
//! and the replication cron (full syncs waiting for the snapshot engine,
//! keep-alives, PINGs in the stream). The stream and the replicas' state
//! are in `crate::state::repl`.

use super::{int_arg, is, Ctx, Handler};
use crate::core::clock::now_ms;
use crate::core::error::{CmdResult, Error};
use crate::state::persist;
use crate::state::repl::{FailoverState, Link, Master, MasterState, Replica, Waiter};
use crate::state::{BlockKind, State};
use bytes::Bytes;
use protocol::ReplyBuf;
use std::sync::atomic::Ordering::Relaxed;

pub static HANDLERS: &[(&str, Handler)] = &[
    ("sync", sync),
    ("psync", psync),
    ("replconf", replconf),
    ("wait", wait),
    ("replicaof", replicaof),
    ("failover", failover),
    ("slaveof", replicaof),
];

/// SYNC
fn sync(c: &mut Ctx, _: &[Bytes]) -> CmdResult {
    if !linked(c.st) {
        return Err(Error::other(
            "NOMASTERLINK Can't SYNC while not connected with my master",
        ));
    }
    full_sync(c, false);
    Ok(())
}

/// A master, or a replica whose link is up: it can feed replicas.
fn linked(st: &State) -> bool {
    st.repl
        .master
        .as_ref()
        .is_none_or(|m| m.state == MasterState::Connected)
}

/// PSYNC replicationid offset [FAILOVER]
fn psync(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    if c.cl.peer.replica || c.cl.monitor {
        return Ok(());
    }
    // Its master hands over: this server promotes itself, and the old
    // master continues from its own offset.
    if a.len() > 3 && is(&a[3], "failover") {
        if a[1].as_ref() != c.st.replid.as_bytes() {
            return Err(Error::other(
                "ERR PSYNC FAILOVER replid must match my replid.",
            ));
        }
        unset_master(c.st, "failover request");
        tracing::info!(
            "Failover request received for replid {}.",
            String::from_utf8_lossy(&a[1])
        );
    }
    if c.st.repl.failover.state != FailoverState::None {
        return Err(Error::other("NOMASTERLINK Can't SYNC while failing over"));
    }
    if !linked(c.st) {
        return Err(Error::other(
            "NOMASTERLINK Can't SYNC while not connected with my master",
        ));
    }
    let offset = int_arg(&a[2]).inspect_err(|_| {
        let r = new_replica(c, true);
        tracing::warn!(
            "Replica {}:{} asks for synchronization but with a wrong offset",
            r.ip,
            r.port
        );
    })?;
    if a[1].as_ref() != b"?" {
        let ours = c.st.repl.knows(&c.st.replid, &a[1], offset);
        let held = u64::try_from(offset)
            .ok()
            .filter(|&o| ours && c.st.repl.holds(o));
        if let Some(offset) = held {
            partial_sync(c, offset);
            return Ok(());
        }
        c.st.repl.sync_partial_err += 1;
    }
    full_sync(c, true);
    Ok(())
}

/// `+CONTINUE`, then the stream from `offset`, where the replica stopped
/// (its connection takes it from the buffer): it is online at once.
fn partial_sync(c: &mut Ctx, offset: u64) {
    let mut r = new_replica(c, true);
    r.link = Link::Online;
    r.cursor = Some(offset - 1);
    c.cl.peer.replica = true;
    c.st.repl.sync_partial_ok += 1;
    c.st.repl.replicas.push(r);
    let line = if c.cl.peer.psync2 {
        format!("+CONTINUE {}\r\n", c.st.replid)
    } else {
        "+CONTINUE\r\n".to_string()
    };
    c.out.raw(line.as_bytes());
}

/// The replica entry for the running client, before its sync.
fn new_replica(c: &Ctx, psync: bool) -> Replica {
    let peer_ip =
        c.cl.addr
            .rsplit_once(':')
            .map_or(&c.cl.addr[..], |(ip, _)| ip)
            .trim_matches(|ch| ch == '[' || ch == ']');
    Replica {
        id: c.cl.id,
        link: Link::WaitBgsaveStart,
        ip: c.cl.peer.ip.clone().unwrap_or_else(|| peer_ip.to_string()),
        port: c.cl.peer.port,
        rdb_only: c.cl.peer.rdb_only,
        eof: c.cl.peer.eof,
        since_s: now_ms() / 1000,
        psync,
        sync_offset: 0,
        ack_offset: 0,
        ack_time_s: now_ms() / 1000,
        held: Vec::new(),
        cursor: None,
        woken: false,
    }
}

/// Makes the client a replica and gets it an RDB: it joins a disk-based
/// BGSAVE started for replicas if one runs (from where another replica's
/// stream starts), else starts one, else waits
/// for the snapshot engine, or for others to join a diskless sync within
/// `repl-diskless-sync-delay` (the cron starts them).
fn full_sync(c: &mut Ctx, psync: bool) {
    if c.cl.peer.replica || c.cl.monitor {
        return;
    }
    if c.cl.peer.rdb_only && c.cl.peer.functions_only {
        return send_functions(c, psync);
    }
    let mut r = new_replica(c, psync);
    let st = &mut *c.st;
    if st.repl.ensure_backlog(st.cfg.repl_backlog_size) {
        st.replid = crate::core::random::random_hex40();
    }
    c.cl.peer.replica = true;
    st.repl.sync_full += 1;
    let running = st.repl.bgsave_for_replicas && persist::bgsave_in_progress(st);
    if running {
        let other = st.repl.replicas.iter().find_map(|o| match &o.link {
            Link::WaitBgsaveEnd if !st.repl.bgsave_diskless => Some(o.sync_offset),
            _ => None,
        });
        if let Some(offset) = other {
            r.link = Link::WaitBgsaveEnd;
            r.sync_offset = offset;
            r.cursor = (!r.rdb_only).then_some(offset);
            if psync {
                c.out.raw(fullresync(st, offset).as_bytes());
            }
        }
        st.repl.replicas.push(r);
    } else {
        let delayed = st.cfg.repl_diskless_sync && r.eof && st.cfg.repl_diskless_sync_delay > 0;
        st.repl.replicas.push(r);
        if !persist::child_active(st) && !delayed {
            start_bgsave(st, Some((c.cl.id, &mut *c.out)));
        }
    }
}

/// After a replica left: a disk-based BGSAVE that only replicas wanted
/// and none waits for any more is abandoned, as Redis kills its child, so
/// the next sync can start a fresh one at once. Not with save points set:
/// then the file is worth finishing.
pub fn end_unwanted_bgsave(st: &mut State) {
    let waited = st
        .repl
        .replicas
        .iter()
        .any(|r| matches!(r.link, Link::WaitBgsaveStart | Link::WaitBgsaveEnd));
    if waited
        || !st.cfg.save.is_empty()
        || !st.repl.bgsave_for_replicas
        || st.repl.bgsave_diskless
        || !persist::bgsave_in_progress(st)
    {
        return;
    }
    tracing::warn!("Background saving terminated: no replica waits for it any more");
    persist::abort_bgsave(st);
    st.repl_bgsave_done(false, None);
}

/// The RDB of the functions alone, for a client that wants nothing else
/// (`redis-cli --functions-rdb`): a few bytes, written at once rather
/// than from a snapshot of the keyspace; then the connection closes.
fn send_functions(c: &mut Ctx, psync: bool) {
    let st = &mut *c.st;
    let rdb = match persist::write_functions(st, Vec::new()) {
        Ok(rdb) => rdb,
        Err(e) => {
            tracing::warn!("Can't write the functions RDB: {e}");
            c.cl.close_after_reply = true;
            return;
        }
    };
    st.repl.sync_full += 1;
    if psync {
        c.out.raw(fullresync(st, st.repl.offset).as_bytes());
    }
    if c.cl.peer.eof {
        let mark = crate::core::random::random_hex40();
        c.out.raw(format!("$EOF:{mark}\r\n").as_bytes());
        c.out.raw(&rdb);
        c.out.raw(mark.as_bytes());
    } else {
        c.out.raw(format!("${}\r\n", rdb.len()).as_bytes());
        c.out.raw(&rdb);
    }
    c.cl.close_after_reply = true;
}

fn fullresync(st: &State, offset: u64) -> String {
    format!("+FULLRESYNC {} {offset}\r\n", st.replid)
}

/// Starts a BGSAVE for the replicas waiting for one: streamed to their
/// sockets when `repl-diskless-sync` is on and all of them read an RDB
/// ended by a mark, else to disk. They buffer the stream from now on, and
/// PSYNC replicas are told where it starts. The replica running the
/// command (`current`) gets that in its reply.
fn start_bgsave(st: &mut State, mut current: Option<(u64, &mut ReplyBuf)>) {
    let waiting = |r: &Replica| matches!(r.link, Link::WaitBgsaveStart);
    let ids: Vec<u64> = st
        .repl
        .replicas
        .iter()
        .filter(|r| waiting(r))
        .map(|r| r.id)
        .collect();
    let diskless = st.cfg.repl_diskless_sync
        && st
            .repl
            .replicas
            .iter()
            .filter(|r| waiting(r))
            .all(|r| r.eof);
    let started = if diskless {
        tracing::info!("Starting BGSAVE for SYNC with target: replicas sockets");
        persist::bgsave_start_replicas(st, ids.clone())
    } else {
        tracing::info!("Starting BGSAVE for SYNC with target: disk");
        persist::bgsave_start(st);
        persist::bgsave_in_progress(st)
    };
    if !started {
        tracing::warn!("BGSAVE for replication failed");
        for id in ids {
            let msg = b"-ERR BGSAVE failed, replication can't continue\r\n";
            match current.as_mut().filter(|(cur, _)| *cur == id) {
                Some((_, out)) => out.raw(msg),
                None => st.repl_send(id, msg),
            }
            st.kill_client(id);
        }
        return;
    }
    st.repl.bgsave_for_replicas = true;
    st.repl.bgsave_diskless = diskless;
    st.repl.spill = true;
    // The stream after the snapshot starts with a SELECT.
    st.repl.sel_db = None;
    let offset = st.repl.offset;
    let line = fullresync(st, offset);
    let mut told = Vec::new();
    for r in st.repl.replicas.iter_mut().filter(|r| waiting(r)) {
        r.link = Link::WaitBgsaveEnd;
        r.sync_offset = offset;
        r.cursor = (!r.rdb_only).then_some(offset);
        if r.psync {
            told.push(r.id);
        }
    }
    for id in told {
        match current.as_mut().filter(|(cur, _)| *cur == id) {
            Some((_, out)) => out.raw(line.as_bytes()),
            None => st.repl_send(id, line.as_bytes()),
        }
    }
}

/// Starts the sync replicas wait for once the snapshot engine is free:
/// a diskless one after `repl-diskless-sync-delay` seconds (the oldest
/// replica's wait), or as soon as `repl-diskless-sync-max-replicas` wait.
fn start_pending_sync(st: &mut State, now_s: i64) {
    let waiting: Vec<i64> = st
        .repl
        .replicas
        .iter()
        .filter(|r| matches!(r.link, Link::WaitBgsaveStart))
        .map(|r| r.since_s)
        .collect();
    if waiting.is_empty() || persist::child_active(st) {
        return;
    }
    let oldest = waiting.iter().min().copied().unwrap_or(now_s);
    let max = st.cfg.repl_diskless_sync_max_replicas;
    if !st.cfg.repl_diskless_sync
        || now_s - oldest >= st.cfg.repl_diskless_sync_delay
        || (max > 0 && waiting.len() as i64 >= max)
    {
        start_bgsave(st, None);
    }
}

/// Makes this server a replica of `host:port`; the link task starts at
/// the next cron. Its own replicas stay, as in Redis 7.0: they are dropped
/// (to resync) only once the history changes, when the new master's RDB
/// has arrived or a partial resync brings a new replication ID.
pub fn set_master(st: &mut State, host: &str, port: u16) {
    st.repl.gens += 1;
    let now_s = now_ms() / 1000;
    // A replica keeps its place in the stream, database included, to
    // resume it with the next master (Redis's cached master).
    let db = st.repl.master.as_ref().map_or(0, |m| m.db);
    st.repl.master = Some(Master {
        host: host.to_string(),
        port,
        gen: st.repl.gens,
        started: false,
        state: MasterState::Connect,
        last_io_s: now_s,
        down_since_s: 0,
        db,
        unapplied: 0,
        transfer: None,
        ended: tokio::sync::watch::Sender::new(()),
    });
    // Its blocked clients would be served by writes it no longer makes
    // (Redis closes them too).
    let blocked: Vec<u64> = st
        .clients
        .values()
        .filter(|cl| cl.blocked.is_some() && !cl.killed)
        .map(|cl| cl.id)
        .collect();
    for id in blocked {
        let Some(mut cl) = st.clients.remove(&id) else {
            continue;
        };
        if let Some(b) = cl.blocked.take() {
            st.unregister_blocked(id, &b);
            st.repl.waiters.retain(|w| w.id != id);
        }
        let mut out = ReplyBuf::new(cl.resp3);
        out.error("UNBLOCKED force unblock from blocking operation, instance state changed (master -> replica?)");
        cl.pending.extend_from_slice(&out.buf);
        cl.close_after_reply = true;
        cl.wake.notify_one();
        st.clients.insert(id, cl);
    }
    tracing::info!("Connecting to MASTER {host}:{port}");
    // CONFIG GET and CONFIG REWRITE show the live master, as Redis's do.
    st.cfg.set("replicaof", &format!("{host} {port}")).ok();
    apply_oom(st);
}

/// `oom-score-adj` follows the role.
fn apply_oom(st: &mut State) {
    if let Err(e) = st.apply_oom() {
        tracing::warn!("{e}");
    }
}

/// CLIENT KILL TYPE master: the link to the master is dropped and made
/// again (PSYNC, partial if the master still holds the offset). False
/// when this server has no master.
pub fn drop_master_link(st: &mut State) -> bool {
    let Some(m) = st.repl.master.as_mut() else {
        return false;
    };
    st.repl.gens += 1;
    m.gen = st.repl.gens;
    m.started = false;
    m.state = MasterState::Connect;
    true
}

/// This server stops following its master (`why` is logged): its data
/// stays; its history is its own from here, and the master's so far stays
/// valid for PSYNC.
fn unset_master(st: &mut State, why: &str) {
    if st.repl.master.take().is_some() {
        let old = std::mem::replace(&mut st.replid, crate::core::random::random_hex40());
        st.repl.shift_id(old);
        st.repl.sel_db = None;
        st.cfg.set("replicaof", "").ok();
        tracing::info!("MASTER MODE enabled ({why})");
        apply_oom(st);
    }
}

/// REPLICAOF host port | NO ONE (and SLAVEOF)
fn replicaof(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    if is(&a[1], "no") && is(&a[2], "one") {
        unset_master(c.st, &format!("user request from '{}'", c.cl.addr));
        c.out.ok();
        return Ok(());
    }
    let port = int_arg(&a[2])?;
    let port = u16::try_from(port).map_err(|_| Error::other("ERR Invalid master port"))?;
    let host = String::from_utf8_lossy(&a[1]).into_owned();
    if c.st
        .repl
        .master
        .as_ref()
        .is_some_and(|m| m.host.eq_ignore_ascii_case(&host) && m.port == port)
    {
        c.out.simple("OK Already connected to specified master");
        return Ok(());
    }
    set_master(c.st, &host, port);
    c.out.ok();
    Ok(())
}

/// FAILOVER [TO host port [FORCE]] [ABORT] [TIMEOUT milliseconds]
fn failover(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let (mut to, mut timeout, mut force, mut abort) = (None, 0, false, false);
    let mut j = 1;
    while j < a.len() {
        if is(&a[j], "to") && j + 2 < a.len() && to.is_none() {
            let port = int_arg(&a[j + 2])?;
            to = Some((String::from_utf8_lossy(&a[j + 1]).into_owned(), port));
            j += 3;
        } else if is(&a[j], "timeout") && j + 1 < a.len() && timeout == 0 {
            timeout = int_arg(&a[j + 1])?;
            if timeout <= 0 {
                return Err(Error::other("ERR FAILOVER timeout must be greater than 0"));
            }
            j += 2;
        } else if is(&a[j], "force") && !force {
            force = true;
            j += 1;
        } else if is(&a[j], "abort") && !abort {
            abort = true;
            j += 1;
        } else {
            return Err(Error::Syntax);
        }
    }
    let st = &mut *c.st;
    if abort {
        if force || timeout > 0 || to.is_some() {
            return Err(Error::Syntax);
        }
        if st.repl.failover.state == FailoverState::None {
            return Err(Error::other("ERR No failover in progress."));
        }
        abort_failover(st, "Failover manually aborted");
        c.out.ok();
        return Ok(());
    }
    if force && (timeout == 0 || to.is_none()) {
        return Err(Error::other(
            "ERR FAILOVER with force option requires both a timeout and target HOST and IP.",
        ));
    }
    if st.repl.master.is_some() {
        return Err(Error::other(
            "ERR FAILOVER is not valid when server is a replica.",
        ));
    }
    if st.repl.replicas.is_empty() {
        return Err(Error::other("ERR FAILOVER requires connected replicas."));
    }
    if st.repl.failover.state != FailoverState::None {
        return Err(Error::other("ERR FAILOVER already in progress."));
    }
    let target = match to {
        Some((host, port)) => {
            let r = st
                .repl
                .replicas
                .iter()
                .find(|r| r.ip.eq_ignore_ascii_case(&host) && r.port == port)
                .ok_or_else(|| {
                    Error::other("ERR FAILOVER target HOST and PORT is not a replica.")
                })?;
            if !matches!(r.link, Link::Online) {
                return Err(Error::other("ERR FAILOVER target replica is not online."));
            }
            tracing::info!("FAILOVER requested to {host}:{port}.");
            Some((host, port as u16))
        }
        None => {
            tracing::info!("FAILOVER requested to any replica.");
            None
        }
    };
    st.repl.failover = crate::state::repl::Failover {
        state: FailoverState::WaitForSync,
        target,
        end_ms: if timeout > 0 { now_ms() + timeout } else { 0 },
        force,
    };
    // Writes wait while the replicas catch up, and until the target leads.
    st.pause = Some(crate::state::Pause {
        until_ms: i64::MAX,
        writes_only: true,
    });
    c.out.ok();
    Ok(())
}

/// The FAILOVER ends: writes go on.
pub fn clear_failover(st: &mut State) {
    st.repl.failover = Default::default();
    st.pause = None;
}

/// The FAILOVER ends without a new master: this server stays (or is
/// again) the master, and its replicas resync to learn its new ID.
pub fn abort_failover(st: &mut State, why: &str) {
    tracing::info!("FAILOVER aborted: {why}");
    if st.repl.failover.state == FailoverState::InProgress {
        unset_master(st, "failover aborted");
        let ids: Vec<u64> = st.repl.replicas.iter().map(|r| r.id).collect();
        for id in ids {
            st.kill_client(id);
        }
    }
    clear_failover(st);
}

/// A FAILOVER waiting for a replica: the target (or any replica) that
/// acknowledged the whole stream becomes this server's master; past the
/// timeout, FORCE fails over anyway, else the failover is abandoned.
fn failover_cron(st: &mut State) {
    if st.repl.failover.state != FailoverState::WaitForSync {
        return;
    }
    let f = &st.repl.failover;
    if f.end_ms > 0 && f.end_ms <= now_ms() {
        match f.target.clone().filter(|_| f.force) {
            Some((host, port)) => {
                tracing::info!("FAILOVER to {host}:{port} time out exceeded, failing over.");
                fail_over(st, &host, port);
            }
            None => abort_failover(st, "Replica never caught up before timeout"),
        }
        return;
    }
    let offset = st.repl.offset;
    let synced = st.repl.replicas.iter().find(|r| {
        matches!(r.link, Link::Online)
            && r.ack_offset == offset
            && f.target
                .as_ref()
                .is_none_or(|(h, p)| r.ip.eq_ignore_ascii_case(h) && r.port == *p as i64)
    });
    if let Some(r) = synced {
        let (host, port) = (r.ip.clone(), r.port as u16);
        tracing::info!("Failover target {host}:{port} is synced, failing over.");
        fail_over(st, &host, port);
    }
}

fn fail_over(st: &mut State, host: &str, port: u16) {
    st.repl.failover.state = FailoverState::InProgress;
    set_master(st, host, port);
}

/// REPLCONF option value [option value ...]
fn replconf(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    if a.len().is_multiple_of(2) {
        return Err(Error::Syntax);
    }
    for pair in a[1..].chunks(2) {
        let (opt, val) = (&pair[0], &pair[1]);
        if is(opt, "listening-port") {
            c.cl.peer.port = int_arg(val)?;
        } else if is(opt, "ip-address") {
            if val.len() >= 256 {
                return Err(Error::other(format!(
                    "ERR REPLCONF ip-address provided by replica instance is too long: {} bytes",
                    val.len()
                )));
            }
            c.cl.peer.ip = Some(String::from_utf8_lossy(val).into_owned());
        } else if is(opt, "capa") {
            if is(val, "psync2") {
                c.cl.peer.psync2 = true;
            } else if is(val, "eof") {
                c.cl.peer.eof = true;
            }
        } else if is(opt, "ack") {
            // Answered with nothing, as the replica reads no reply.
            if let (true, Some(off)) = (c.cl.peer.replica, storage::num::parse_i64(val)) {
                ack(c.st, c.cl.id, off.max(0) as u64);
            }
            return Ok(());
        } else if is(opt, "getack") {
            // Only a replica answers (with an ACK to its master).
            return Ok(());
        } else if is(opt, "rdb-filter-only") {
            // `redis-cli --rdb` sends it empty, `--functions-rdb` with
            // `functions`.
            let mut functions = false;
            for w in val.split(|ch| *ch == b' ').filter(|w| !w.is_empty()) {
                if !is(w, "functions") {
                    return Err(Error::other(format!(
                        "ERR Unsupported rdb-filter-only option: {}",
                        String::from_utf8_lossy(w)
                    )));
                }
                functions = true;
            }
            c.cl.peer.functions_only = functions;
        } else if is(opt, "rdb-only") {
            let v = int_arg(val)?;
            if !(0..=1).contains(&v) {
                return Err(Error::other(
                    "ERR value is out of range, value must between 0 and 1",
                ));
            }
            c.cl.peer.rdb_only = v == 1;
        } else {
            return Err(Error::other(format!(
                "ERR Unrecognized REPLCONF option: {}",
                String::from_utf8_lossy(opt)
            )));
        }
    }
    c.out.ok();
    Ok(())
}

/// REPLCONF ACK from replica `id`: records it and answers the WAITs it
/// satisfies.
fn ack(st: &mut State, id: u64, offset: u64) {
    let Some(r) = st.repl.replica_mut(id) else {
        return;
    };
    r.ack_offset = r.ack_offset.max(offset);
    r.ack_time_s = now_ms() / 1000;
    if matches!(r.link, Link::WaitAck) {
        st.repl_online(id);
    }
    let ready: Vec<(u64, i64)> = st
        .repl
        .waiters
        .iter()
        .map(|w| (w.id, st.repl.acked(w.offset), w.replicas))
        .filter(|&(_, n, want)| n >= want)
        .map(|(id, n, _)| (id, n))
        .collect();
    for (id, n) in ready {
        st.repl.waiters.retain(|w| w.id != id);
        let Some(cl) = st.clients.get_mut(&id) else {
            continue;
        };
        if cl.blocked.take().is_some() {
            cl.pending.extend_from_slice(format!(":{n}\r\n").as_bytes());
            cl.wake.notify_one();
            st.woken += 1;
        }
    }
}

/// WAIT numreplicas timeout
fn wait(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let want = int_arg(&a[1])?;
    let ms = storage::num::parse_i64(&a[2])
        .ok_or_else(|| Error::other("ERR timeout is not an integer or out of range"))?;
    if ms < 0 {
        return Err(Error::other("ERR timeout is negative"));
    }
    let offset = c.cl.woff;
    let acked = c.st.repl.acked(offset);
    if acked >= want || !c.may_block() {
        c.out.int(acked);
        return Ok(());
    }
    let deadline = (ms > 0).then(|| c.now.saturating_add(ms));
    c.block(BlockKind::Wait, &[], deadline, a);
    c.st.repl.waiters.push(Waiter {
        id: c.cl.id,
        offset,
        replicas: want,
    });
    // Ask the replicas where they are.
    c.st.repl.feed_plain(&[b("REPLCONF"), b("GETACK"), b("*")]);
    c.st.repl_deliver();
    Ok(())
}

fn b(s: &'static str) -> Bytes {
    Bytes::from_static(s.as_bytes())
}

/// The replication cron: a sync for replicas that wait for one (each
/// call); once a second, newlines to replicas waiting for their RDB
/// (they read them as keep-alives), a PING in the stream every
/// `repl-ping-replica-period` seconds.
pub fn cron(st: &mut State) {
    let now_s = now_ms() / 1000;
    start_pending_sync(st, now_s);
    failover_cron(st);
    if now_s == st.repl.cron_second {
        return;
    }
    st.repl.cron_second = now_s;
    let period = st.cfg.repl_ping_replica_period.max(1) as u64;
    // Not while writes are paused: the offset stays for a FAILOVER to
    // reach.
    if st.repl.cron_loops.is_multiple_of(period)
        && !st.repl.replicas.is_empty()
        && !st.pause.as_ref().is_some_and(|p| p.writes_only)
    {
        st.repl.feed_plain(&[b("PING")]);
        st.repl_deliver();
    }
    st.repl.cron_loops += 1;
    if !st.repl.replicas.is_empty() {
        st.repl.no_replicas_since_s = 0;
    } else if st.repl.no_replicas_since_s == 0 {
        st.repl.no_replicas_since_s = now_s;
    } else if st.cfg.repl_backlog_ttl > 0
        && st.repl.master.is_none()
        && st.repl.backlog_active()
        && now_s - st.repl.no_replicas_since_s > st.cfg.repl_backlog_ttl
    {
        // As Redis: a new ID, so no replica resumes from a stream it
        // can no longer get.
        tracing::info!(
            "Replication backlog freed after {} seconds without connected replicas.",
            st.cfg.repl_backlog_ttl
        );
        st.repl.free_backlog();
        st.replid = crate::core::random::random_hex40();
    }
    let diskless = st.repl.bgsave_diskless;
    let ids: Vec<(u64, bool)> = st
        .repl
        .replicas
        .iter()
        .map(|r| {
            let pre_sync = match r.link {
                Link::WaitBgsaveStart => true,
                Link::WaitBgsaveEnd => !diskless,
                _ => false,
            };
            (r.id, pre_sync)
        })
        .collect();
    for (id, pre_sync) in ids {
        // A newline before the RDB; else any bytes held back.
        st.repl_send(id, if pre_sync { b"\n" } else { b"" });
    }
}

/// INFO replication.
pub fn info(st: &State, now_ms: i64) -> String {
    let r = &st.repl;
    let mut s = String::new();
    match &r.master {
        None => s += "role:master\r\n",
        Some(m) => {
            let up = m.state == MasterState::Connected;
            s += "role:slave\r\n";
            s += &format!("master_host:{}\r\n", m.host);
            s += &format!("master_port:{}\r\n", m.port);
            s += &format!("master_link_status:{}\r\n", if up { "up" } else { "down" });
            s += &format!(
                "master_last_io_seconds_ago:{}\r\n",
                if up { now_ms / 1000 - m.last_io_s } else { -1 }
            );
            s += &format!(
                "master_sync_in_progress:{}\r\n",
                (m.state == MasterState::Sync) as u8
            );
            s += &format!("slave_read_repl_offset:{}\r\n", r.offset + m.unapplied);
            s += &format!("slave_repl_offset:{}\r\n", r.offset);
            if let Some(t) = &m.transfer {
                let read = t.received.bytes.load(Relaxed) as i64;
                let perc = if t.total == 0 {
                    0.0
                } else {
                    read as f64 / t.total as f64 * 100.0
                };
                s += &format!("master_sync_total_bytes:{}\r\n", t.total);
                s += &format!("master_sync_read_bytes:{read}\r\n");
                s += &format!("master_sync_left_bytes:{}\r\n", t.total - read);
                s += &format!("master_sync_perc:{perc:.2}\r\n");
                s += &format!(
                    "master_sync_last_io_seconds_ago:{}\r\n",
                    now_ms / 1000 - t.received.last_io_s.load(Relaxed)
                );
            }
            if !up {
                let since = match m.down_since_s {
                    0 => -1,
                    t => now_ms / 1000 - t,
                };
                s += &format!("master_link_down_since_seconds:{since}\r\n");
            }
            s += &format!("slave_priority:{}\r\n", st.cfg.replica_priority);
            s += &format!("slave_read_only:{}\r\n", st.cfg.replica_read_only as u8);
            s += &format!("replica_announced:{}\r\n", st.cfg.replica_announced as u8);
        }
    }
    s += &format!("connected_slaves:{}\r\n", r.replicas.len());
    if st.cfg.min_replicas_to_write > 0 && st.cfg.min_replicas_max_lag > 0 {
        s += &format!(
            "min_slaves_good_slaves:{}\r\n",
            r.good_replicas(now_ms / 1000, st.cfg.min_replicas_max_lag)
        );
    }
    for (i, x) in r.replicas.iter().enumerate() {
        s += &format!(
            "slave{i}:ip={},port={},state={},offset={},lag={}\r\n",
            x.ip,
            x.port,
            x.state_name(),
            x.ack_offset,
            now_ms / 1000 - x.ack_time_s
        );
    }
    let (first, histlen) = r.backlog_span();
    s += &format!("master_failover_state:{}\r\n", r.failover.state.name());
    s += &format!("master_replid:{}\r\n", st.replid);
    let none = "0000000000000000000000000000000000000000";
    s += &format!(
        "master_replid2:{}\r\n",
        r.replid2.as_deref().unwrap_or(none)
    );
    s += &format!("master_repl_offset:{}\r\n", r.offset);
    s += &format!("second_repl_offset:{}\r\n", r.second_offset);
    s += &format!("repl_backlog_active:{}\r\n", r.backlog_active() as u8);
    s += &format!("repl_backlog_size:{}\r\n", st.cfg.repl_backlog_size);
    s += &format!("repl_backlog_first_byte_offset:{first}\r\n");
    s += &format!("repl_backlog_histlen:{histlen}\r\n");
    s
}

/// ROLE: a replica's master and link; a master's offset and its online
/// replicas.
pub fn role(st: &State, out: &mut ReplyBuf) {
    if let Some(m) = &st.repl.master {
        out.array(5);
        out.bulk(b"slave");
        out.bulk(m.host.as_bytes());
        out.int(m.port as i64);
        out.bulk(m.state.role_name().as_bytes());
        out.int(st.repl.offset as i64);
        return;
    }
    let online: Vec<&Replica> = st
        .repl
        .replicas
        .iter()
        .filter(|r| matches!(r.link, Link::Online))
        .collect();
    out.array(3);
    out.bulk(b"master");
    out.int(st.repl.offset as i64);
    out.array(online.len());
    for r in online {
        out.array(3);
        out.bulk(r.ip.as_bytes());
        out.bulk(r.port.to_string().as_bytes());
        out.bulk(r.ack_offset.to_string().as_bytes());
    }
}
