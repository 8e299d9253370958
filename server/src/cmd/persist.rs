//! Persistence commands: SAVE BGSAVE DUMP RESTORE.

use super::{int_arg, is, Ctx, Handler};
use crate::core::config::class;
use crate::core::error::{CmdResult, Error};
use crate::core::propagate::int;
use crate::state::persist;
use bytes::Bytes;
use std::sync::atomic::Ordering::Relaxed;
use storage::rdb::{self, RestoreError};

pub static HANDLERS: &[(&str, Handler)] = &[
    ("save", save),
    ("bgsave", bgsave),
    ("dump", dump),
    ("restore", restore),
    ("restore-asking", restore),
];

const IN_PROGRESS: &str = "ERR Background save already in progress";

/// SAVE
fn save(c: &mut Ctx, _: &[Bytes]) -> CmdResult {
    if persist::bgsave_in_progress(c.st) {
        return Err(Error::other(IN_PROGRESS));
    }
    persist::save(c.st).map_err(|_| Error::other("ERR"))?;
    c.out.ok();
    Ok(())
}

/// BGSAVE [SCHEDULE]
///
/// While an AOF rewrite uses the snapshot engine the save is refused, or
/// with SCHEDULE started by the cron afterwards; a BGSAVE already running
/// is an error either way. Inside MULTI/EXEC the save is scheduled for
/// the cron, as Redis does.
fn bgsave(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let schedule = a.len() == 2 && is(&a[1], "schedule");
    if a.len() > 2 || (a.len() == 2 && !schedule) {
        return Err(Error::Syntax);
    }
    if persist::bgsave_in_progress(c.st) {
        return Err(Error::other(IN_PROGRESS));
    }
    if persist::child_active(c.st) || c.cl.deny_blocking {
        if !schedule && !c.cl.deny_blocking {
            return Err(Error::other(
                "ERR Another child process is active (AOF?): can't BGSAVE right now. Use BGSAVE SCHEDULE in order to schedule a BGSAVE whenever possible.",
            ));
        }
        c.st.rdb.scheduled = true;
        c.out.simple("Background saving scheduled");
        return Ok(());
    }
    persist::bgsave_start(c.st);
    c.out.simple("Background saving started");
    Ok(())
}

/// DUMP key
fn dump(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let opts = persist::save_opts(c.st, false);
    match c.st.lookup_read(c.cl.db, &a[1], c.now) {
        Some(v) => {
            let p = rdb::dump_payload(v, &opts);
            c.out.bulk(&p);
        }
        None => c.out.null(),
    }
    Ok(())
}

/// RESTORE key ttl serialized-value [REPLACE] [ABSTTL] [IDLETIME seconds] [FREQ frequency]
fn restore(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let (mut replace, mut absttl) = (false, false);
    let (mut idle, mut freq): (Option<i64>, Option<i64>) = (None, None);
    let mut j = 4;
    while j < a.len() {
        let more = j + 1 < a.len();
        if is(&a[j], "replace") {
            replace = true;
        } else if is(&a[j], "absttl") {
            absttl = true;
        } else if is(&a[j], "idletime") && more && freq.is_none() {
            let v = int_arg(&a[j + 1])?;
            if v < 0 {
                return Err(Error::other("ERR Invalid IDLETIME value, must be >= 0"));
            }
            idle = Some(v);
            j += 1;
        } else if is(&a[j], "freq") && more && idle.is_none() {
            let v = int_arg(&a[j + 1])?;
            if !(0..=255).contains(&v) {
                return Err(Error::other(
                    "ERR Invalid FREQ value, must be >= 0 and <= 255",
                ));
            }
            freq = Some(v);
            j += 1;
        } else {
            return Err(Error::Syntax);
        }
        j += 1;
    }
    let db = c.cl.db;
    let key = &a[1];
    if !replace && c.st.lookup_write(db, key, c.now).is_some() {
        return Err(Error::other("BUSYKEY Target key name already exists."));
    }
    let mut ttl = int_arg(&a[2])?;
    if ttl < 0 {
        return Err(Error::other("ERR Invalid TTL value, must be >= 0"));
    }
    let lim = persist::limits(c.st);
    let verify = !c.st.skip_checksum_validation;
    let mut blobs = 0;
    let value = rdb::restore_payload_counted(&a[3], &lim, verify, &mut blobs);
    if persist::restore_sanitizes(c.st, c.cl) {
        c.st.stats.sanitizations.fetch_add(blobs, Relaxed);
    }
    let value = value.map_err(|e| match e {
        RestoreError::Checksum => Error::other("ERR DUMP payload version or checksum are wrong"),
        RestoreError::BadFormat(e) => {
            tracing::debug!(
                "Internal error in RDB reading offset 0, function at RESTORE -> {}",
                e.msg
            );
            Error::other("ERR Bad data format")
        }
    })?;
    let deleted = replace && c.st.shard.dbs[db].remove(key).is_some();
    if ttl > 0 && !absttl {
        ttl = ttl.saturating_add(c.now);
    }
    if ttl > 0 && c.st.already_expired(ttl, c.now) {
        // Already expired: the key is gone (a replaced one deleted).
        if deleted {
            c.st.changed(class::GENERIC, "del", db, key);
            c.propagate_as([Bytes::from_static(b"DEL"), key.clone()]);
        }
        c.out.ok();
        return Ok(());
    }
    c.st.shard.dbs[db].set_clock(c.now);
    c.st.shard.dbs[db].add(key, value);
    if ttl > 0 {
        c.st.shard.dbs[db].set_expire(key, ttl);
    }
    // As Redis: FREQ counts under an LFU policy, IDLETIME under the others.
    let lfu = persist::access_meta(c.st).is_lfu();
    let (idle, freq) = if lfu {
        (None, freq.map(|f| f as u8))
    } else {
        (idle.map(|i| i as u64), None)
    };
    c.st.shard.dbs[db].set_access(key, idle, freq);
    c.st.changed(class::GENERIC, "restore", db, key);
    if ttl > 0 && !absttl {
        // The absolute time, so a replay expires the key at the same moment.
        let args = a.iter().enumerate();
        let op = args.map(|(i, o)| if i == 2 { int(ttl) } else { o.clone() });
        c.propagate_as(op.chain([Bytes::from_static(b"ABSTTL")]));
    }
    c.out.ok();
    Ok(())
}
