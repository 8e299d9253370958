//! Server commands: TIME LASTSAVE ROLE MONITOR SHUTDOWN SLOWLOG.

use super::help::{bad_sub, help_reply};
use super::{int_arg, is, Ctx, Handler};
use crate::core::error::{CmdResult, Error};
use crate::state::shutdown::Outcome;
use crate::state::{BlockKind, ShutdownFlags};
use bytes::Bytes;

pub static HANDLERS: &[(&str, Handler)] = &[
    ("time", time),
    ("role", role),
    ("lastsave", lastsave),
    ("slowlog|get", slowlog_get),
    ("slowlog|len", slowlog_len),
    ("slowlog|reset", slowlog_reset),
    ("slowlog|help", slowlog_help),
    ("monitor", monitor),
    ("shutdown", shutdown),
];

// ---------------------------------------------------------------- misc

/// TIME
fn time(c: &mut Ctx, _: &[Bytes]) -> CmdResult {
    let us = crate::core::clock::now_us();
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

/// ROLE
fn role(c: &mut Ctx, _: &[Bytes]) -> CmdResult {
    crate::state::role::role(c.st, c.out);
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
    let (mut others, mut now, mut force) = (false, false, false);
    for o in &a[1..] {
        if is(o, "nosave") {
            nosave = true;
        } else if is(o, "save") {
            save = true;
        } else if is(o, "now") || is(o, "force") {
            others = true;
            now |= is(o, "now");
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
        if !crate::state::shutdown::abort(c.st) {
            return Err(Error::other("ERR No shutdown in progress."));
        }
        c.out.ok();
        return Ok(());
    }
    let flags = ShutdownFlags {
        save: (save || nosave).then_some(save),
        now,
        force,
    };
    match crate::state::shutdown::prepare(c.st, flags) {
        // Redis closes the connection without a reply when it exits.
        Outcome::Exit => c.cl.close_after_reply = true,
        // Until the replicas catch up: the process exits then, or this
        // client gets the error when the shutdown fails or is aborted.
        Outcome::Waiting => c.block(BlockKind::Shutdown, &[], None, a),
        Outcome::Failed => return Err(Error::other(crate::state::shutdown::FAILED)),
    }
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
