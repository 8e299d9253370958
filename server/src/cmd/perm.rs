//! The permission checks (Redis's `ACLCheckAllPerm`, called from
//! `processCommand`): a command, its keys and channels against the
//! client's user, the refusal texts and the ACL log entry of a denial,
//! the checks of a script's calls, and AUTH's login. The users and rules
//! themselves are `crate::core::acl`'s; the ACL's view of the commands —
//! ids, categories — is built here from Redis's metadata.

use super::flags::NO_AUTH;
use super::key_flags as K;
use super::{Command, Ctx};
use crate::core::acl::catalog::catalog;
use crate::core::acl::{Denied, LogEntry, Request, READ, WRITE};
use crate::core::error::{CmdResult, Error};
use crate::state::{Client, State};
use ahash::AHashMap as HashMap;
use bytes::Bytes;
use std::sync::OnceLock;

/// A command's id in the catalog.
fn id_of(name: &str) -> usize {
    static IDS: OnceLock<HashMap<&'static str, usize>> = OnceLock::new();
    IDS.get_or_init(|| {
        (catalog().cmds.iter().enumerate())
            .map(|(i, c)| (c.name, i))
            .collect()
    })[name]
}

/// Keys a request touches, with what each needs, as Redis reads its key
/// specs' flags.
fn keys_of(cmd: &Command, args: &[Bytes]) -> Vec<(usize, u8)> {
    let keys = crate::core::command::keys::keys_for(cmd.meta, args).unwrap_or_default();
    keys.into_iter()
        .map(|(i, f)| {
            let mut need = 0;
            if f & K::ACCESS != 0 {
                need |= READ;
            }
            if f & (K::INSERT | K::DELETE | K::UPDATE) != 0 {
                need |= WRITE;
            }
            (i, need)
        })
        .collect()
}

/// Channels a request publishes or subscribes to (and whether each is a
/// pattern).
fn channels_of(name: &str, args: &[Bytes]) -> Vec<(usize, bool)> {
    match name {
        "publish" | "spublish" => vec![(1, false)],
        "subscribe" | "ssubscribe" => (1..args.len()).map(|i| (i, false)).collect(),
        "psubscribe" => (1..args.len()).map(|i| (i, true)).collect(),
        _ => Vec::new(),
    }
}

/// Checks `args` (command `cmd`) against the client's user. A deleted
/// user (its client about to be closed) may run nothing.
pub(super) fn check(st: &State, cl: &Client, cmd: &Command, args: &[Bytes]) -> Result<(), Denied> {
    let Some(u) = st.acl.user(cl.user.slot) else {
        return Err(Denied::Command);
    };
    if u.unrestricted {
        return Ok(());
    }
    check_user(u, cmd, args)
}

/// Whether the client's user may read any key (SORT's BY and GET).
pub(super) fn reads_all_keys(st: &State, cl: &Client) -> bool {
    st.acl
        .user(cl.user.slot)
        .is_some_and(|u| u.unrestricted || u.key_ok(b"*", READ))
}

pub(super) fn check_user(
    u: &crate::core::acl::User,
    cmd: &Command,
    args: &[Bytes],
) -> Result<(), Denied> {
    let keys = keys_of(cmd, args);
    let channels = channels_of(cmd.name, args);
    u.check(&Request {
        id: id_of(cmd.name),
        args,
        no_auth: cmd.has(NO_AUTH),
        keys: &keys,
        channels: &channels,
    })
}

/// The error a client gets, with the ACL log entry written.
pub(super) fn refusal(
    st: &mut State,
    cl: &mut Client,
    cmd: &Command,
    args: &[Bytes],
    d: Denied,
    in_exec: bool,
) -> Error {
    let context = if in_exec || cl.multi.is_some() {
        "multi"
    } else {
        "toplevel"
    };
    let info = info_line(st, cl, cmd);
    log_denied(st, cl.user.name.to_string(), cmd, args, d, context, info);
    if in_exec {
        let why = match d {
            Denied::Command => "no permission to execute the command or subcommand",
            Denied::Key(_) => "no permission to touch the specified keys",
            Denied::Channel(_) => "no permission to access one of the channels used as arguments",
        };
        return Error::other(format!("NOPERM ACLs rules changed between the moment the transaction was accumulated and the EXEC call. This command is no longer allowed for the following reason: {why}"));
    }
    Error::other(match d {
        Denied::Command => format!(
            "NOPERM this user has no permissions to run the '{}' command",
            cmd.name
        ),
        Denied::Key(_) => {
            "NOPERM this user has no permissions to access one of the keys used as arguments".into()
        }
        Denied::Channel(_) => {
            "NOPERM this user has no permissions to access one of the channels used as arguments"
                .into()
        }
    })
}

/// A client's CLIENT LIST line as the log shows it: running `cmd`.
fn info_line(st: &State, cl: &mut Client, cmd: &Command) -> String {
    let last = std::mem::replace(&mut cl.last_cmd, cmd.name);
    let line = cl.line(st.wall_ms(), None);
    cl.last_cmd = last;
    line
}

/// The refusal of a script's `redis.call` (None: allowed), logged with the
/// script's caller (`caller`: its user and CLIENT LIST line).
pub(super) fn script_refusal(
    st: &mut State,
    cl: &Client,
    cmd: &Command,
    args: &[Bytes],
    caller: &str,
) -> Option<&'static str> {
    let d = check(st, cl, cmd, args).err()?;
    log_denied(
        st,
        cl.user.name.to_string(),
        cmd,
        args,
        d,
        "lua",
        caller.to_string(),
    );
    Some(match d {
        Denied::Command => "ERR The user executing the script can't run this command or subcommand",
        Denied::Key(_) => "ERR The user executing the script can't access at least one of the keys mentioned in the command arguments",
        Denied::Channel(_) => "ERR The user executing the script can't publish to the channel mentioned in the command",
    })
}

/// `redis.acl_check_cmd`: whether the script's user may run `args`.
pub(super) fn script_may_run(st: &State, cl: &Client, args: &[Bytes]) -> Result<bool, Error> {
    let invalid = || Error::other("ERR Invalid command passed to redis.acl_check_cmd()");
    let cmd = super::resolve(args).map_err(|_| invalid())?;
    if !cmd.arity_ok(args.len()) {
        return Err(invalid());
    }
    Ok(check(st, cl, cmd, args).is_ok())
}

fn log_denied(
    st: &mut State,
    username: String,
    cmd: &Command,
    args: &[Bytes],
    d: Denied,
    context: &'static str,
    client_info: String,
) {
    let (reason, object) = match d {
        Denied::Command => ("command", cmd.name.to_string()),
        Denied::Key(i) => ("key", String::from_utf8_lossy(&args[i]).into_owned()),
        Denied::Channel(i) => ("channel", String::from_utf8_lossy(&args[i]).into_owned()),
    };
    let e = LogEntry {
        count: 1,
        reason,
        context,
        object,
        username,
        ctime_ms: crate::core::clock::now_ms(),
        client_info,
    };
    let max = st.cfg.acllog_max_len as usize;
    st.acl.log_event(e, max);
}

/// A failed AUTH, in the ACL log.
pub fn log_auth_failure(st: &mut State, cl: &mut Client, cmd: &[u8], user: &[u8]) {
    let last = std::mem::replace(&mut cl.last_cmd, "auth");
    let info = cl.line(st.wall_ms(), None);
    cl.last_cmd = last;
    let e = LogEntry {
        count: 1,
        reason: "auth",
        context: "toplevel",
        object: String::from_utf8_lossy(cmd).into_owned(),
        username: String::from_utf8_lossy(user).into_owned(),
        ctime_ms: crate::core::clock::now_ms(),
        client_info: info,
    };
    let max = st.cfg.acllog_max_len as usize;
    st.acl.log_event(e, max);
}

/// Authenticates the client as `user`, or answers WRONGPASS (logged, the
/// command `cmd` as typed).
pub fn authenticate(c: &mut Ctx, cmd: &[u8], user: &[u8], pass: &[u8]) -> CmdResult {
    let slot = c.st.acl.slot(user);
    let ok = slot
        .and_then(|s| c.st.acl.user(s))
        .is_some_and(|u| u.password_ok(pass));
    match slot {
        Some(slot) if ok => {
            let name = c.st.acl.user(slot).expect("found").name.clone();
            c.cl.user = crate::core::acl::Login { slot, name };
            c.cl.authenticated = true;
            Ok(())
        }
        _ => {
            log_auth_failure(c.st, c.cl, cmd, user);
            Err(Error::WrongPass)
        }
    }
}

/// The `user` lines CONFIG REWRITE writes, or None with an aclfile.
pub fn config_lines(st: &State) -> Option<Vec<String>> {
    if !st.cfg.aclfile.is_empty() {
        return None;
    }
    Some(st.acl.users().map(|u| u.describe(catalog())).collect())
}
