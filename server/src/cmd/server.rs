//! Server commands: TIME LASTSAVE ROLE LOLWUT MONITOR SHUTDOWN SLOWLOG,
//! and the table rows of INFO, DEBUG and CLIENT (their handlers live in
//! `info`, `debug` and `client`).

use super::client::*;
use super::debug::debug;
use super::flags::*;
use super::help::{bad_sub, help_reply};
use super::info::info;
use super::{int_arg, is, Command, Ctx};
use crate::error::{CmdResult, Error};
use crate::state::ShutdownRequest;
use bytes::Bytes;

const G: &str = "server";
const CG: &str = "connection";

pub static COMMANDS: &[Command] = &[
    Command::new(
        "info",
        -1,
        LOADING | STALE | SKIP_SLOWLOG,
        G,
        (0, 0, 0),
        info,
    ),
    Command::new("time", 1, LOADING | STALE | FAST, G, (0, 0, 0), time),
    Command::new(
        "role",
        1,
        NOSCRIPT | LOADING | STALE | FAST,
        "admin",
        (0, 0, 0),
        role,
    ),
    Command::new("lolwut", -1, READONLY | FAST, G, (0, 0, 0), lolwut),
    Command::new(
        "lastsave",
        1,
        LOADING | STALE | FAST,
        G,
        (0, 0, 0),
        lastsave,
    ),
    Command::parent("slowlog", -2, 0, G, SLOWLOG),
    Command::new(
        "monitor",
        1,
        ADMIN | NOSCRIPT | LOADING | STALE,
        G,
        (0, 0, 0),
        monitor,
    ),
    Command::new(
        "shutdown",
        -1,
        ADMIN | NOSCRIPT | LOADING | STALE | NO_MULTI | ALLOW_BUSY,
        G,
        (0, 0, 0),
        shutdown,
    ),
    Command::new(
        "debug",
        -2,
        ADMIN | NOSCRIPT | LOADING | STALE,
        G,
        (0, 0, 0),
        debug,
    ),
    Command::parent("client", -2, 0, CG, CLIENT),
];

static SLOWLOG: &[Command] = &[
    Command::new(
        "slowlog|get",
        -2,
        ADMIN | LOADING | STALE,
        G,
        (0, 0, 0),
        slowlog_get,
    ),
    Command::new(
        "slowlog|len",
        2,
        ADMIN | LOADING | STALE,
        G,
        (0, 0, 0),
        slowlog_len,
    ),
    Command::new(
        "slowlog|reset",
        2,
        ADMIN | LOADING | STALE,
        G,
        (0, 0, 0),
        slowlog_reset,
    ),
    Command::new(
        "slowlog|help",
        2,
        LOADING | STALE,
        G,
        (0, 0, 0),
        slowlog_help,
    ),
];

const CADMIN: u32 = ADMIN | NOSCRIPT | LOADING | STALE;
const CPLAIN: u32 = NOSCRIPT | LOADING | STALE;

static CLIENT: &[Command] = &[
    Command::new("client|id", 2, CPLAIN, CG, (0, 0, 0), client_id),
    Command::new("client|setname", 3, CPLAIN, CG, (0, 0, 0), client_setname),
    Command::new("client|getname", 2, CPLAIN, CG, (0, 0, 0), client_getname),
    Command::new("client|list", -2, CADMIN, CG, (0, 0, 0), client_list),
    Command::new("client|info", 2, CPLAIN, CG, (0, 0, 0), client_info),
    Command::new("client|kill", -3, CADMIN, CG, (0, 0, 0), client_kill),
    Command::new("client|reply", 3, CPLAIN, CG, (0, 0, 0), client_reply),
    Command::new("client|no-evict", 3, CADMIN, CG, (0, 0, 0), client_no_evict),
    Command::new("client|pause", -3, CADMIN, CG, (0, 0, 0), client_pause),
    Command::new("client|unpause", 2, CADMIN, CG, (0, 0, 0), client_unpause),
    Command::new("client|getredir", 2, CPLAIN, CG, (0, 0, 0), client_getredir),
    Command::new(
        "client|trackinginfo",
        2,
        CPLAIN,
        CG,
        (0, 0, 0),
        client_trackinginfo,
    ),
    Command::new("client|unblock", -3, CADMIN, CG, (0, 0, 0), client_unblock),
    Command::new(
        "client|help",
        2,
        LOADING | STALE,
        CG,
        (0, 0, 0),
        client_help,
    ),
];

// ---------------------------------------------------------------- misc

/// TIME
fn time(c: &mut Ctx, _: &[Bytes]) -> CmdResult {
    let us = crate::state::now_us();
    c.out.array(2);
    c.out.bulk_int(us / 1_000_000);
    c.out.bulk_int(us % 1_000_000);
    Ok(())
}

/// LASTSAVE
fn lastsave(c: &mut Ctx, _: &[Bytes]) -> CmdResult {
    c.out.int(c.st.lastsave);
    Ok(())
}

/// ROLE: always a master with no replicas.
fn role(c: &mut Ctx, _: &[Bytes]) -> CmdResult {
    c.out.array(3);
    c.out.bulk(b"master");
    c.out.int(0);
    c.out.array(0);
    Ok(())
}

/// LOLWUT [VERSION version]: Redis draws art for its own versions; for any
/// other it prints only the version line, which is what cinnabar does.
fn lolwut(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    if a.len() == 3 && super::is(&a[1], "version") {
        super::int_arg(&a[2])?;
    } else if a.len() != 1 {
        return Err(Error::Syntax);
    }
    c.out.verbatim(b"Redis ver. 7.0.15\n");
    Ok(())
}

/// MONITOR
fn monitor(c: &mut Ctx, _: &[Bytes]) -> CmdResult {
    if !c.cl.monitor {
        c.cl.monitor = true;
        c.st.monitors += 1;
        c.out.ok();
    }
    Ok(())
}

/// SHUTDOWN [NOSAVE | SAVE] [NOW] [FORCE] [ABORT]
fn shutdown(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let (mut save, mut nosave, mut abort) = (false, false, false);
    let (mut others, mut force) = (false, false);
    for o in &a[1..] {
        if is(o, "nosave") {
            nosave = true;
        } else if is(o, "save") {
            save = true;
        } else if is(o, "now") || is(o, "force") {
            others = true;
            force |= is(o, "force");
        } else if is(o, "abort") {
            abort = true;
        } else {
            return Err(Error::Syntax);
        }
    }
    if (save && nosave) || (abort && (save || nosave || others)) {
        return Err(Error::Syntax);
    }
    if abort {
        // Shutdown is immediate here: there is never one in progress.
        return Err(Error::other("ERR No shutdown in progress."));
    }
    let save = if save {
        Some(true)
    } else if nosave {
        Some(false)
    } else {
        None
    };
    tracing::warn!("User requested shutdown...");
    if !crate::persist::prepare_shutdown(c.st, save, force) {
        return Err(Error::other("ERR Errors trying to SHUTDOWN. Check logs."));
    }
    c.st.shutdown = Some(ShutdownRequest { prepared: true });
    c.st.shutdown_notify.notify_one();
    // Redis closes the connection without a reply when it exits.
    c.cl.close_after_reply = true;
    Ok(())
}

// ---------------------------------------------------------------- SLOWLOG

/// SLOWLOG GET [count]
fn slowlog_get(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    if a.len() > 3 {
        return Err(bad_sub(&a[1], "SLOWLOG"));
    }
    let mut n = 10usize;
    if let Some(arg) = a.get(2) {
        let v = int_arg(arg)
            .ok()
            .filter(|&v| v >= -1)
            .ok_or_else(|| Error::other("ERR count should be greater than or equal to -1"))?;
        n = if v == -1 { usize::MAX } else { v as usize };
    }
    let n = n.min(c.st.slowlog.len());
    c.out.array(n);
    for e in c.st.slowlog.iter().take(n) {
        c.out.array(6);
        c.out.int(e.id as i64);
        c.out.int(e.time);
        c.out.int(e.duration_us);
        c.out.array(e.args.len());
        for x in &e.args {
            c.out.bulk(x);
        }
        c.out.bulk(e.addr.as_bytes());
        c.out.bulk(&e.name);
    }
    Ok(())
}

/// SLOWLOG LEN
fn slowlog_len(c: &mut Ctx, _: &[Bytes]) -> CmdResult {
    c.out.int(c.st.slowlog.len() as i64);
    Ok(())
}

/// SLOWLOG RESET
fn slowlog_reset(c: &mut Ctx, _: &[Bytes]) -> CmdResult {
    c.st.slowlog.clear();
    c.out.ok();
    Ok(())
}

/// SLOWLOG HELP
fn slowlog_help(c: &mut Ctx, _: &[Bytes]) -> CmdResult {
    help_reply(
        c,
        "SLOWLOG",
        &[
            "GET [<count>]",
            "    Return top <count> entries from the slowlog (default: 10, -1 mean all).",
            "    Entries are made of:",
            "    id, timestamp, time in microseconds, arguments array, client IP and port,",
            "    client name",
            "LEN",
            "    Return the length of the slowlog.",
            "RESET",
            "    Reset the slowlog.",
        ],
    );
    Ok(())
}
