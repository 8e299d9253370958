//! ACL commands (the users and rules themselves are `crate::core::acl`'s,
//! the ACL's view of the commands `crate::core::acl::catalog`'s, reading the
//! users from the config or the aclfile `crate::state::acl`'s; the
//! permission check the gatekeeper and scripts run is `super::perm`'s).

use super::help::help_reply;
use super::perm::check_user;
use super::{int_arg, is, Ctx, Handler};
use crate::core::acl::catalog::catalog;
use crate::core::acl::{Denied, CATEGORIES};
use crate::core::error::{CmdResult, Error};
use crate::state::acl::{install, pubsub_all, read_aclfile};
use crate::state::Client;
use bytes::Bytes;

pub static HANDLERS: &[(&str, Handler)] = &[
    ("acl|setuser", setuser),
    ("acl|getuser", getuser),
    ("acl|deluser", deluser),
    ("acl|list", list),
    ("acl|users", users),
    ("acl|whoami", whoami),
    ("acl|cat", cat),
    ("acl|genpass", genpass),
    ("acl|dryrun", dryrun),
    ("acl|log", log),
    ("acl|help", help),
    ("acl|load", load),
    ("acl|save", save),
];

/// Closes every client logged in as one of `slots` (the running one after
/// its reply).
fn kill_users(c: &mut Ctx, slots: &[usize]) {
    let victims: Vec<u64> =
        c.st.clients
            .values()
            .filter(|cl| slots.contains(&cl.user.slot))
            .map(|cl| cl.id)
            .collect();
    for v in victims {
        c.st.kill_client(v);
    }
    if slots.contains(&c.cl.user.slot) {
        c.cl.close_after_reply = true;
    }
}

/// Closes the user's clients subscribed to a channel or pattern the user
/// may no longer use (Redis 7.0).
fn kill_revoked_subscribers(c: &mut Ctx, name: &[u8]) {
    let Some(slot) = c.st.acl.slot(name) else {
        return;
    };
    let Some(u) = c.st.acl.user(slot) else { return };
    let revoked = |cl: &Client| {
        cl.user.slot == slot
            && (cl.subs.channels.iter().any(|ch| !u.channel_ok(ch, false))
                || cl.subs.shard.iter().any(|ch| !u.channel_ok(ch, false))
                || cl.subs.patterns.iter().any(|p| !u.channel_ok(p, true)))
    };
    let victims: Vec<u64> = (c.st.clients.values())
        .filter(|cl| revoked(cl))
        .map(|cl| cl.id)
        .collect();
    let me = revoked(c.cl);
    for v in victims {
        c.st.kill_client(v);
    }
    if me {
        c.cl.close_after_reply = true;
    }
}

/// ACL SETUSER username [rule ...]
fn setuser(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    if a[2].iter().any(|&b| b == b' ' || b == 0) {
        return Err(Error::other(
            "ERR Usernames can't contain spaces or null characters",
        ));
    }
    let rules: Vec<&[u8]> = a[3..].iter().map(|r| &r[..]).collect();
    let all = pubsub_all(c.st);
    c.st.acl
        .set_user(catalog(), &a[2], &rules, all)
        .map_err(|e| Error::other(format!("ERR {e}")))?;
    kill_revoked_subscribers(c, &a[2]);
    c.out.ok();
    Ok(())
}

/// ACL GETUSER username
fn getuser(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let Some(u) = c.st.acl.get(&a[2]) else {
        c.out.null();
        return Ok(());
    };
    let o = &mut *c.out;
    o.map(6);
    o.bulk(b"flags");
    let flags = u.flags();
    o.set(flags.len());
    for f in flags {
        o.bulk(f.as_bytes());
    }
    o.bulk(b"passwords");
    o.array(u.passwords().len());
    for p in u.passwords() {
        o.bulk(p.as_bytes());
    }
    let sets = u.permission_sets(catalog());
    let fields = [&b"commands"[..], b"keys", b"channels"];
    for (f, v) in fields.iter().zip(&sets[0]) {
        o.bulk(f);
        o.bulk(v.as_bytes());
    }
    o.bulk(b"selectors");
    o.array(sets.len() - 1);
    for s in &sets[1..] {
        o.map(3);
        for (f, v) in fields.iter().zip(s) {
            o.bulk(f);
            o.bulk(v.as_bytes());
        }
    }
    Ok(())
}

/// ACL DELUSER username [username ...]
fn deluser(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    if a[2..].iter().any(|n| &n[..] == b"default") {
        return Err(Error::other("ERR The 'default' user cannot be removed"));
    }
    let mut slots = Vec::new();
    for n in &a[2..] {
        if let Some(s) = c.st.acl.delete(n) {
            slots.push(s);
        }
    }
    kill_users(c, &slots);
    c.out.int(slots.len() as i64);
    Ok(())
}

/// ACL LIST
fn list(c: &mut Ctx, _: &[Bytes]) -> CmdResult {
    let lines: Vec<String> = c.st.acl.users().map(|u| u.describe(catalog())).collect();
    c.out.array(lines.len());
    for l in lines {
        c.out.bulk(l.as_bytes());
    }
    Ok(())
}

/// ACL USERS
fn users(c: &mut Ctx, _: &[Bytes]) -> CmdResult {
    let names: Vec<_> = c.st.acl.users().map(|u| u.name.clone()).collect();
    c.out.array(names.len());
    for n in names {
        c.out.bulk(n.as_bytes());
    }
    Ok(())
}

/// ACL WHOAMI
fn whoami(c: &mut Ctx, _: &[Bytes]) -> CmdResult {
    c.out.bulk(c.cl.user.name.as_bytes());
    Ok(())
}

/// ACL CAT [category]
fn cat(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    if a.len() > 3 {
        return Err(super::help::bad_sub(&a[1], "ACL"));
    }
    let Some(name) = a.get(2) else {
        c.out.array(CATEGORIES.len());
        for n in CATEGORIES {
            c.out.bulk(n.as_bytes());
        }
        return Ok(());
    };
    let Some(i) = crate::core::acl::category(name) else {
        return Err(Error::other(format!(
            "ERR Unknown category '{}'",
            String::from_utf8_lossy(name)
        )));
    };
    let names: Vec<&str> = (catalog().cmds.iter())
        .filter(|d| d.cats & (1 << i) != 0)
        .map(|d| d.name)
        .collect();
    c.out.array(names.len());
    for n in names {
        c.out.bulk(n.as_bytes());
    }
    Ok(())
}

/// ACL GENPASS [bits]
fn genpass(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let bits = match a.get(2) {
        Some(b) => int_arg(b)?,
        None => 256,
    };
    if a.len() > 3 || !(1..=4096).contains(&bits) {
        return Err(Error::other("ERR ACL GENPASS argument must be the number of bits for the output password, a positive number up to 4096"));
    }
    c.out
        .bulk(crate::core::acl::genpass(bits as usize).as_bytes());
    Ok(())
}

/// ACL DRYRUN username command [arg ...]
fn dryrun(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let Some(u) = c.st.acl.get(&a[2]) else {
        return Err(Error::other(format!(
            "ERR User '{}' not found",
            String::from_utf8_lossy(&a[2])
        )));
    };
    let args = &a[3..];
    let cmd = match super::resolve(args) {
        Ok(cmd) => cmd,
        Err(Error::UnknownCommand(_)) | Err(Error::UnknownSubcommand { .. }) => {
            return Err(Error::other(format!(
                "ERR Command '{}' not found",
                String::from_utf8_lossy(&args[0])
            )))
        }
        Err(e) => return Err(e),
    };
    if !cmd.arity_ok(args.len()) {
        return Err(Error::Arity(cmd.name.into()));
    }
    match check_user(u, cmd, args) {
        Ok(()) => c.out.ok(),
        Err(Denied::Command) => c.out.bulk(
            format!(
                "This user has no permissions to run the '{}' command",
                cmd.name
            )
            .as_bytes(),
        ),
        Err(Denied::Key(i)) => c.out.bulk(
            format!(
                "This user has no permissions to access the '{}' key",
                String::from_utf8_lossy(&args[i])
            )
            .as_bytes(),
        ),
        Err(Denied::Channel(i)) => c.out.bulk(
            format!(
                "This user has no permissions to access the '{}' channel",
                String::from_utf8_lossy(&args[i])
            )
            .as_bytes(),
        ),
    }
    Ok(())
}

/// ACL LOG [count | RESET]
fn log(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    if a.len() > 3 {
        return Err(Error::Syntax);
    }
    let mut count = usize::MAX;
    if let Some(x) = a.get(2) {
        if is(x, "reset") {
            c.st.acl.log.clear();
            c.out.ok();
            return Ok(());
        }
        count = int_arg(x)?.max(0) as usize;
    }
    let now = crate::core::clock::now_ms();
    let n = c.st.acl.log.len().min(count);
    c.out.array(n);
    for e in c.st.acl.log.iter().take(n) {
        let o = &mut *c.out;
        o.map(7);
        o.bulk(b"count");
        o.int(e.count as i64);
        o.bulk(b"reason");
        o.bulk(e.reason.as_bytes());
        o.bulk(b"context");
        o.bulk(e.context.as_bytes());
        o.bulk(b"object");
        o.bulk(e.object.as_bytes());
        o.bulk(b"username");
        o.bulk(e.username.as_bytes());
        o.bulk(b"age-seconds");
        o.double((now - e.ctime_ms) as f64 / 1000.0);
        o.bulk(b"client-info");
        o.bulk(e.client_info.as_bytes());
    }
    Ok(())
}

/// ACL HELP
fn help(c: &mut Ctx, _: &[Bytes]) -> CmdResult {
    help_reply(
        c,
        "ACL",
        &[
            "CAT [<category>]",
            "    List all commands that belong to <category>, or all command categories",
            "    when no category is specified.",
            "DELUSER <username> [<username> ...]",
            "    Delete a list of users.",
            "DRYRUN <username> <command> [<arg> ...]",
            "    Returns whether the user can execute the given command without executing the command.",
            "GETUSER <username>",
            "    Get the user's details.",
            "GENPASS [<bits>]",
            "    Generate a secure 256-bit user password. The optional `bits` argument can",
            "    be used to specify a different size.",
            "LIST",
            "    Show users details in config file format.",
            "LOAD",
            "    Reload users from the ACL file.",
            "LOG [<count> | RESET]",
            "    Show the ACL log entries.",
            "SAVE",
            "    Save the current config to the ACL file.",
            "SETUSER <username> <attribute> [<attribute> ...]",
            "    Create or modify a user with the specified attributes.",
            "USERS",
            "    List all the registered usernames.",
            "WHOAMI",
            "    Return the current connection username.",
        ],
    );
    Ok(())
}

const NO_ACLFILE: &str = "ERR This Redis instance is not configured to use an ACL file. You may want to specify users via the ACL SETUSER command and then issue a CONFIG REWRITE (assuming you have a Redis configuration file set) in order to store users in the Redis configuration.";

/// ACL LOAD
fn load(c: &mut Ctx, _: &[Bytes]) -> CmdResult {
    let file = c.st.cfg.aclfile.clone();
    if file.is_empty() {
        return Err(Error::other(NO_ACLFILE));
    }
    let users = read_aclfile(c.st, &file).map_err(|e| {
        // Only errors in the rules carry the warning.
        if e.starts_with("Error loading ACLs") {
            return Error::other(format!("ERR {e}"));
        }
        Error::other(format!(
            "ERR {e}WARNING: ACL errors detected, no change to the previously active ACL rules was performed"
        ))
    })?;
    let dropped = install(c.st, users);
    kill_users(c, &dropped);
    c.out.ok();
    Ok(())
}

/// ACL SAVE
fn save(c: &mut Ctx, _: &[Bytes]) -> CmdResult {
    let file = c.st.cfg.aclfile.clone();
    if file.is_empty() {
        return Err(Error::other(NO_ACLFILE));
    }
    let mut text = String::new();
    for u in c.st.acl.users() {
        text.push_str(&u.describe(catalog()));
        text.push('\n');
    }
    let tmp = format!("{file}.tmp-{}", std::process::id());
    std::fs::write(&tmp, text)
        .and_then(|_| std::fs::rename(&tmp, &file))
        .map_err(|_| Error::other("ERR There was an error trying to save the ACLs. Please check the server logs for more information"))?;
    c.out.ok();
    Ok(())
}
