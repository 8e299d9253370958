//! Replication commands: SYNC, PSYNC, REPLCONF, WAIT, REPLICAOF (and
//! SLAVEOF), FAILOVER. What they set going is the state floor's: following
//! a master (`crate::state::master_link`), the failover
//! (`crate::state::failover`), the BGSAVE for replicas and the cron that
//! starts the syncs waiting for it (`crate::state::repl_cron`); the stream
//! and the replicas' state are in `crate::state::repl`.

use super::{int_arg, is, Ctx, Handler};
use crate::core::clock::now_ms;
use crate::core::error::{CmdResult, Error};
use crate::state::failover::abort_failover;
use crate::state::master_link::{set_master, unset_master};
use crate::state::persist;
use crate::state::repl::{FailoverState, Link, MasterState, Replica, Waiter};
use crate::state::repl_cron::{fullresync, start_bgsave};
use crate::state::{BlockKind, State};
use bytes::Bytes;

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
    // `repl-disable-tcp-nodelay`: fewer, fuller packets to a replica, from
    // its full sync on. Redis leaves a replica that continues (PSYNC) as
    // it was.
    if st.cfg.repl_disable_tcp_nodelay {
        crate::core::os::nodelay(c.cl.fd, false);
    }
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

/// REPLICAOF host port | NO ONE (and SLAVEOF)
fn replicaof(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    if c.st.cluster.is_some() {
        return Err(Error::other("ERR REPLICAOF not allowed in cluster mode."));
    }
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
