//! The replication cron, the master's side: the syncs replicas wait for
//! (started once the snapshot engine is free), keep-alives, PINGs in the
//! stream, the backlog's time to live; and the BGSAVE for replicas, which
//! SYNC and PSYNC start too.

use crate::core::clock::now_ms;
use crate::state::failover::failover_cron;
use crate::state::persist;
use crate::state::repl::{Link, Replica};
use crate::state::State;
use bytes::Bytes;
use protocol::ReplyBuf;

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
    remove_sync_rdb(st);
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

/// Starts a BGSAVE for the replicas waiting for one: streamed to their
/// sockets when `repl-diskless-sync` is on and all of them read an RDB
/// ended by a mark, else to disk. They buffer the stream from now on, and
/// PSYNC replicas are told where it starts. The replica running the
/// command (`current`) gets that in its reply.
pub fn start_bgsave(st: &mut State, mut current: Option<(u64, &mut ReplyBuf)>) {
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
        st.repl.rdb_for_replicas = persist::bgsave_in_progress(st);
        st.repl.rdb_for_replicas
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

pub fn fullresync(st: &State, offset: u64) -> String {
    format!("+FULLRESYNC {} {offset}\r\n", st.replid)
}

/// `rdb-del-sync-files`: an instance that keeps no files of its own removes
/// the RDB it wrote to feed its replicas once none of them needs it.
fn remove_sync_rdb(st: &mut State) {
    // The flag first: every second, nothing else is looked at until a
    // disk-based sync wrote a file.
    if !st.repl.rdb_for_replicas
        || !st.cfg.rdb_del_sync_files
        || !st.cfg.save.is_empty()
        || st.cfg.appendonly
        || persist::bgsave_in_progress(st)
    {
        return;
    }
    let busy = st.repl.replicas.iter().any(|r| {
        matches!(
            r.link,
            Link::WaitBgsaveStart | Link::WaitBgsaveEnd | Link::SendBulk(_)
        )
    });
    if busy {
        return;
    }
    tracing::info!("Removing the RDB file used to feed replicas in a persistence-less instance");
    let _ = std::fs::remove_file(persist::rdb_path(st));
    st.repl.rdb_for_replicas = false;
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

fn b(s: &'static str) -> Bytes {
    Bytes::from_static(s.as_bytes())
}
