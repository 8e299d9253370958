//! CLIENT and its subcommands (the CLIENT PAUSE check connections make
//! is `super::pause`'s).

use super::help::help_reply;
use super::{int_arg, is, Ctx, Handler};
use crate::core::error::{CmdResult, Error};
use crate::state::tracking::{prefix_collision, Mode};
use crate::state::{validate_client_name, Client, Pause, ReplyMode};
use bytes::Bytes;
// Named from here by the gatekeeper and by scripts.

pub static HANDLERS: &[(&str, Handler)] = &[
    ("client|id", client_id),
    ("client|setname", client_setname),
    ("client|getname", client_getname),
    ("client|list", client_list),
    ("client|info", client_info),
    ("client|kill", client_kill),
    ("client|reply", client_reply),
    ("client|no-evict", client_no_evict),
    ("client|pause", client_pause),
    ("client|unpause", client_unpause),
    ("client|tracking", client_tracking),
    ("client|caching", client_caching),
    ("client|getredir", client_getredir),
    ("client|trackinginfo", client_trackinginfo),
    ("client|unblock", client_unblock),
    ("client|help", client_help),
];

/// The current command's full name as CLIENT LIST shows it.
fn current_cmd_name(a: &[Bytes]) -> String {
    super::resolve(a)
        .map(|c| c.name.to_string())
        .unwrap_or_else(|_| "NULL".into())
}

fn client_type_ok(t: &[u8]) -> Result<&'static str, Error> {
    let l = String::from_utf8_lossy(t).to_ascii_lowercase();
    match l.as_str() {
        "normal" => Ok("normal"),
        "master" => Ok("master"),
        "replica" | "slave" => Ok("replica"),
        "pubsub" => Ok("pubsub"),
        _ => Err(Error::other(format!(
            "ERR Unknown client type '{}'",
            String::from_utf8_lossy(t)
        ))),
    }
}

/// CLIENT ID
fn client_id(c: &mut Ctx, _: &[Bytes]) -> CmdResult {
    c.out.int(c.cl.id as i64);
    Ok(())
}

/// CLIENT SETNAME connection-name
fn client_setname(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    validate_client_name(&a[2])?;
    c.cl.name = (!a[2].is_empty()).then(|| a[2].clone());
    c.out.ok();
    Ok(())
}

/// CLIENT GETNAME
fn client_getname(c: &mut Ctx, _: &[Bytes]) -> CmdResult {
    match &c.cl.name {
        Some(n) => c.out.bulk(n),
        None => c.out.null(),
    }
    Ok(())
}

/// CLIENT LIST [TYPE <NORMAL | MASTER | REPLICA | PUBSUB>] [ID client-id [client-id ...]]
fn client_list(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let mut ty: Option<&str> = None;
    let mut ids: Option<Vec<u64>> = None;
    let mut i = 2;
    while i < a.len() {
        if is(&a[i], "type") && i + 1 < a.len() {
            ty = Some(client_type_ok(&a[i + 1])?);
            i += 2;
        } else if is(&a[i], "id") && i + 1 < a.len() {
            let mut v = Vec::new();
            for x in &a[i + 1..] {
                let id = int_arg(x)
                    .ok()
                    .filter(|&n| n > 0)
                    .ok_or_else(|| Error::other("ERR Invalid client ID"))?;
                v.push(id as u64);
            }
            ids = Some(v);
            i = a.len();
        } else {
            return Err(Error::Syntax);
        }
    }
    let now = c.now;
    let me = c.cl.id;
    let cmd = current_cmd_name(a);
    let mut out = String::new();
    let mut mine_done = false;
    let keep = |cl: &Client| {
        // A killed client is gone for Redis at once.
        !cl.killed
            && ty.is_none_or(|t| cl.kind() == t)
            && ids.as_ref().is_none_or(|v| v.contains(&cl.id))
    };
    let push_me = |out: &mut String, cl: &Client| {
        let line = cl
            .line(now, Some(a))
            .replace("cmd=NULL", &format!("cmd={cmd}"));
        out.push_str(&line);
        out.push('\n');
    };
    let mut listed: Vec<&Client> = c.st.clients.values().map(|b| &**b).collect();
    listed.sort_unstable_by_key(|cl| cl.id);
    for cl in listed {
        if cl.id > me && !mine_done {
            mine_done = true;
            if keep(c.cl) {
                push_me(&mut out, c.cl);
            }
        }
        if keep(cl) {
            out.push_str(&cl.line(now, None));
            out.push('\n');
        }
    }
    if !mine_done && keep(c.cl) {
        push_me(&mut out, c.cl);
    }
    c.out.verbatim(out.as_bytes());
    Ok(())
}

/// CLIENT INFO
fn client_info(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let cmd = current_cmd_name(a);
    let mut line =
        c.cl.line(c.now, Some(a))
            .replace("cmd=NULL", &format!("cmd={cmd}"));
    line.push('\n');
    c.out.verbatim(line.as_bytes());
    Ok(())
}

/// CLIENT KILL ip:port | CLIENT KILL [ID id] [TYPE type] [USER name]
///   [ADDR ip:port] [LADDR ip:port] [SKIPME yes|no] ...
fn client_kill(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    if a.len() == 3 {
        let addr = &a[2][..];
        if c.cl.addr.as_bytes() == addr {
            c.cl.close_after_reply = true;
        } else {
            let Some(id) =
                c.st.clients
                    .values()
                    .find(|cl| cl.addr.as_bytes() == addr)
                    .map(|cl| cl.id)
            else {
                return Err(Error::other("ERR No such client"));
            };
            c.st.kill_client(id);
        }
        c.out.ok();
        return Ok(());
    }
    if !a.len().is_multiple_of(2) {
        return Err(Error::Syntax);
    }
    let mut id: Option<u64> = None;
    let mut ty: Option<&str> = None;
    let mut addr: Option<&[u8]> = None;
    let mut laddr: Option<&[u8]> = None;
    let mut skipme = true;
    let mut user: Option<usize> = None;
    for p in a[2..].chunks(2) {
        let (k, v) = (&p[0], &p[1]);
        if is(k, "id") {
            let n = int_arg(v)
                .ok()
                .filter(|&n| n > 0)
                .ok_or_else(|| Error::other("ERR client-id should be greater than 0"))?;
            id = Some(n as u64);
        } else if is(k, "type") {
            ty = Some(client_type_ok(v)?);
        } else if is(k, "addr") {
            addr = Some(v);
        } else if is(k, "laddr") {
            laddr = Some(v);
        } else if is(k, "user") {
            user = Some(c.st.acl.slot(v).ok_or_else(|| {
                Error::other(format!("ERR No such user '{}'", String::from_utf8_lossy(v)))
            })?);
        } else if is(k, "skipme") {
            if is(v, "yes") {
                skipme = true;
            } else if is(v, "no") {
                skipme = false;
            } else {
                return Err(Error::Syntax);
            }
        } else {
            return Err(Error::Syntax);
        }
    }
    let matches = |cl: &Client| {
        id.is_none_or(|i| cl.id == i)
            && ty.is_none_or(|t| cl.kind() == t)
            && addr.is_none_or(|x| cl.addr.as_bytes() == x)
            && laddr.is_none_or(|x| cl.laddr.as_bytes() == x)
            && user.is_none_or(|u| cl.user.slot == u)
    };
    let victims: Vec<u64> =
        c.st.clients
            .values()
            .filter(|cl| matches(cl))
            .map(|cl| cl.id)
            .collect();
    let mut n = victims.len() as i64;
    for v in victims {
        c.st.kill_client(v);
    }
    // A link still in its handshake has no client yet.
    if ty == Some("master") && n == 0 && id.is_none() && addr.is_none() && laddr.is_none() {
        n += crate::state::master_link::drop_master_link(c.st) as i64;
    }
    if !skipme && matches(c.cl) {
        c.cl.close_after_reply = true;
        n += 1;
    }
    c.out.int(n);
    Ok(())
}

/// CLIENT REPLY ON|OFF|SKIP
fn client_reply(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    if is(&a[2], "on") {
        c.cl.reply_mode = ReplyMode::On;
        c.out.ok();
    } else if is(&a[2], "off") {
        c.cl.reply_mode = ReplyMode::Off;
    } else if is(&a[2], "skip") {
        if c.cl.reply_mode == ReplyMode::On {
            c.cl.reply_mode = ReplyMode::SkipNext;
        }
    } else {
        return Err(Error::Syntax);
    }
    Ok(())
}

/// CLIENT NO-EVICT ON|OFF
fn client_no_evict(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    if is(&a[2], "on") {
        c.cl.no_evict = true;
    } else if is(&a[2], "off") {
        c.cl.no_evict = false;
    } else {
        return Err(Error::Syntax);
    }
    c.out.ok();
    Ok(())
}

/// CLIENT PAUSE timeout [WRITE | ALL]
fn client_pause(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let ms = int_arg(&a[2])
        .map_err(|_| Error::other("ERR timeout is not an integer or out of range"))?;
    if ms < 0 {
        return Err(Error::other("ERR timeout is negative"));
    }
    let writes_only = match a.len() {
        3 => false,
        4 if is(&a[3], "write") => true,
        4 if is(&a[3], "all") => false,
        4 => return Err(Error::other("ERR CLIENT PAUSE mode must be WRITE or ALL")),
        _ => return Err(Error::Syntax),
    };
    let until = c.now.saturating_add(ms);
    // An overlapping pause keeps the later end and the stricter mode.
    let p = match c.st.pause.take() {
        Some(old) if old.until_ms > c.now => Pause {
            until_ms: old.until_ms.max(until),
            writes_only: old.writes_only && writes_only,
        },
        _ => Pause {
            until_ms: until,
            writes_only,
        },
    };
    c.st.pause = Some(p);
    c.out.ok();
    Ok(())
}

/// CLIENT UNPAUSE
fn client_unpause(c: &mut Ctx, _: &[Bytes]) -> CmdResult {
    c.st.pause = None;
    c.out.ok();
    Ok(())
}

/// CLIENT TRACKING <ON | OFF> [REDIRECT client-id] [PREFIX prefix
///   [PREFIX prefix ...]] [BCAST] [OPTIN] [OPTOUT] [NOLOOP]
fn client_tracking(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let mut mode = Mode::default();
    let mut prefixes = Vec::new();
    let mut i = 3;
    while i < a.len() {
        let more = i + 1 < a.len();
        if is(&a[i], "redirect") && more {
            i += 1;
            if mode.redirect != 0 {
                return Err(Error::other(
                    "ERR A client can only redirect to a single other client",
                ));
            }
            let id = int_arg(&a[i])?;
            // It may go away later; it must exist now.
            let exists =
                id > 0 && (id as u64 == c.cl.id || c.st.clients.contains_key(&(id as u64)));
            if !exists {
                return Err(Error::other(
                    "ERR The client ID you want redirect to does not exist",
                ));
            }
            mode.redirect = id as u64;
        } else if is(&a[i], "bcast") {
            mode.bcast = true;
        } else if is(&a[i], "optin") {
            mode.optin = true;
        } else if is(&a[i], "optout") {
            mode.optout = true;
        } else if is(&a[i], "noloop") {
            mode.noloop = true;
        } else if is(&a[i], "prefix") && more {
            i += 1;
            prefixes.push(a[i].clone());
        } else {
            return Err(Error::Syntax);
        }
        i += 1;
    }
    if is(&a[2], "off") {
        c.st.tracking_off(c.cl);
        c.out.ok();
        return Ok(());
    }
    if !is(&a[2], "on") {
        return Err(Error::Syntax);
    }
    let now = c.cl.tracking;
    let refuse = if !mode.bcast && !prefixes.is_empty() {
        Some("ERR PREFIX option requires BCAST mode to be enabled")
    } else if now.on && now.bcast != mode.bcast {
        Some("ERR You can't switch BCAST mode on/off before disabling tracking for this client, and then re-enabling it with a different mode.")
    } else if mode.bcast && (mode.optin || mode.optout) {
        Some("ERR OPTIN and OPTOUT are not compatible with BCAST")
    } else if mode.optin && mode.optout {
        Some("ERR You can't specify both OPTIN mode and OPTOUT mode")
    } else if (mode.optin && now.optout) || (mode.optout && now.optin) {
        Some("ERR You can't switch OPTIN/OPTOUT mode before disabling tracking for this client, and then re-enabling it with a different mode.")
    } else {
        None
    };
    if let Some(e) = refuse {
        return Err(Error::other(e));
    }
    if mode.bcast {
        if let Some((e, goes_on)) = prefix_collision(&c.st.tracking, c.cl.id, &prefixes) {
            if !goes_on {
                return Err(Error::other(e));
            }
            // Redis 7.0.15 answers this overlap with the error and then
            // enables tracking and answers OK as well.
            c.out.error(&e);
            c.st.count_error(&e);
            c.st.failed_reply = true;
        }
    }
    c.st.tracking_on(c.cl, mode, &prefixes);
    c.out.ok();
    Ok(())
}

/// CLIENT CACHING <YES | NO>
fn client_caching(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let m = &mut c.cl.tracking;
    if !m.on {
        return Err(Error::other("ERR CLIENT CACHING can be called only when the client is in tracking mode with OPTIN or OPTOUT mode enabled"));
    }
    if is(&a[2], "yes") {
        if !m.optin {
            return Err(Error::other(
                "ERR CLIENT CACHING YES is only valid when tracking is enabled in OPTIN mode.",
            ));
        }
    } else if is(&a[2], "no") {
        if !m.optout {
            return Err(Error::other(
                "ERR CLIENT CACHING NO is only valid when tracking is enabled in OPTOUT mode.",
            ));
        }
    } else {
        return Err(Error::Syntax);
    }
    m.caching = true;
    c.out.ok();
    Ok(())
}

/// CLIENT GETREDIR
fn client_getredir(c: &mut Ctx, _: &[Bytes]) -> CmdResult {
    let m = c.cl.tracking;
    c.out.int(if m.on { m.redirect as i64 } else { -1 });
    Ok(())
}

/// CLIENT TRACKINGINFO
fn client_trackinginfo(c: &mut Ctx, _: &[Bytes]) -> CmdResult {
    let m = c.cl.tracking;
    let flags: Vec<&str> = [
        (true, if m.on { "on" } else { "off" }),
        (m.bcast, "bcast"),
        (m.optin, "optin"),
        (m.optin && m.caching, "caching-yes"),
        (m.optout, "optout"),
        (m.optout && m.caching, "caching-no"),
        (m.noloop, "noloop"),
        (m.broken, "broken_redirect"),
    ]
    .into_iter()
    .filter_map(|(set, f)| set.then_some(f))
    .collect();
    c.out.map(3);
    c.out.bulk(b"flags");
    c.out.set(flags.len());
    for f in flags {
        c.out.bulk(f.as_bytes());
    }
    c.out.bulk(b"redirect");
    c.out.int(if m.on { m.redirect as i64 } else { -1 });
    c.out.bulk(b"prefixes");
    let prefixes = c.st.tracking.prefixes_of(c.cl.id);
    c.out.array(prefixes.len());
    for p in prefixes {
        c.out.bulk(p);
    }
    Ok(())
}

/// CLIENT UNBLOCK client-id [TIMEOUT | ERROR]
fn client_unblock(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let id = int_arg(&a[2])?;
    let error = match a.len() {
        3 => false,
        4 if is(&a[3], "timeout") => false,
        4 if is(&a[3], "error") => true,
        _ => {
            return Err(Error::other(
                "ERR CLIENT UNBLOCK reason should be TIMEOUT or ERROR",
            ))
        }
    };
    let done = u64::try_from(id).is_ok_and(|id| super::blocking::unblock_client(c.st, id, error));
    c.out.int(done as i64);
    Ok(())
}

/// CLIENT HELP
fn client_help(c: &mut Ctx, _: &[Bytes]) -> CmdResult {
    help_reply(
        c,
        "CLIENT",
        &[
            "CACHING (YES|NO)",
            "    Enable/disable tracking of the keys for next command in OPTIN/OPTOUT modes.",
            "GETREDIR",
            "    Return the client ID we are redirecting to when tracking is enabled.",
            "GETNAME",
            "    Return the name of the current connection.",
            "ID",
            "    Return the ID of the current connection.",
            "INFO",
            "    Return information about the current client connection.",
            "KILL <ip:port>",
            "    Kill connection made from <ip:port>.",
            "KILL <option> <value> [<option> <value> [...]]",
            "    Kill connections. Options are:",
            "    * ADDR (<ip:port>|<unixsocket>:0)",
            "      Kill connections made from the specified address",
            "    * LADDR (<ip:port>|<unixsocket>:0)",
            "      Kill connections made to specified local address",
            "    * TYPE (NORMAL|MASTER|REPLICA|PUBSUB)",
            "      Kill connections by type.",
            "    * USER <username>",
            "      Kill connections authenticated by <username>.",
            "    * SKIPME (YES|NO)",
            "      Skip killing current connection (default: yes).",
            "LIST [options ...]",
            "    Return information about client connections. Options:",
            "    * TYPE (NORMAL|MASTER|REPLICA|PUBSUB)",
            "      Return clients of specified type.",
            "UNPAUSE",
            "    Stop the current client pause, resuming traffic.",
            "PAUSE <timeout> [WRITE|ALL]",
            "    Suspend all, or just write, clients for <timeout> milliseconds.",
            "REPLY (ON|OFF|SKIP)",
            "    Control the replies sent to the current connection.",
            "SETNAME <name>",
            "    Assign the name <name> to the current connection.",
            "UNBLOCK <clientid> [TIMEOUT|ERROR]",
            "    Unblock the specified blocked client.",
            "TRACKING (ON|OFF) [REDIRECT <id>] [BCAST] [PREFIX <prefix> [...]]",
            "         [OPTIN] [OPTOUT] [NOLOOP]",
            "    Control server assisted client side caching.",
            "TRACKINGINFO",
            "    Report tracking status for the current connection.",
            "NO-EVICT (ON|OFF)",
            "    Protect current client connection from eviction.",
        ],
    );
    Ok(())
}
