//! CONFIG GET SET RESETSTAT REWRITE HELP.

use super::help::help_reply;
use super::{Ctx, Handler};
use crate::config;
use crate::error::{CmdResult, Error};
use bytes::Bytes;

pub static HANDLERS: &[(&str, Handler)] = &[
    ("config|get", get),
    ("config|set", set),
    ("config|resetstat", resetstat),
    ("config|rewrite", rewrite),
    ("config|help", help),
];

/// CONFIG GET parameter [parameter ...]
fn get(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    // Each name once, compared case-insensitively, shown as first asked
    // for (an exact name) or as the table spells it (a glob match).
    let mut out: Vec<(String, String)> = Vec::new();
    let mut add = |name: &str, v: String| {
        if !out.iter().any(|(n, _)| n.eq_ignore_ascii_case(name)) {
            out.push((name.to_string(), v));
        }
    };
    for p in &a[2..] {
        if p.iter().any(|b| matches!(b, b'*' | b'?' | b'[')) {
            for (n, v) in c.st.cfg.matching(p) {
                add(n, v);
            }
        } else if let Ok(name) = std::str::from_utf8(p) {
            if let Some(v) = c.st.cfg.get(&name.to_ascii_lowercase()) {
                add(name, v.to_string());
            }
        }
    }
    c.out.map(out.len());
    for (n, v) in &out {
        c.out.bulk(n.as_bytes());
        c.out.bulk(crate::config::display_value(n, v).as_bytes());
    }
    Ok(())
}

fn set_failed(name: &[u8], why: &str) -> Error {
    Error::other(format!(
        "ERR CONFIG SET failed (possibly related to argument '{}') - {why}",
        String::from_utf8_lossy(name)
    ))
}

/// CONFIG SET parameter value [parameter value ...]
///
/// All or nothing: every name is checked first, then every value; on any
/// failure the values already set are restored.
fn set(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    if !a.len().is_multiple_of(2) {
        return Err(Error::Syntax);
    }
    let mut opts: Vec<(&'static config::Opt, &Bytes, String)> = Vec::new();
    for pair in a[2..].chunks(2) {
        let name = &pair[0];
        let opt = std::str::from_utf8(name)
            .ok()
            .and_then(|n| config::find(&n.to_ascii_lowercase()))
            .ok_or_else(|| {
                Error::other(format!(
                    "ERR Unknown option or number of arguments for CONFIG SET - '{}'",
                    String::from_utf8_lossy(name)
                ))
            })?;
        c.st.cfg.settable(opt).map_err(|e| set_failed(name, &e))?;
        if opts
            .iter()
            .any(|(_, n, _)| n.eq_ignore_ascii_case(name.as_ref()))
        {
            return Err(set_failed(name, "duplicate parameter"));
        }
        let value = String::from_utf8_lossy(&pair[1]).into_owned();
        opts.push((opt, name, value));
    }
    let backup = c.st.cfg.clone();
    for (opt, name, value) in &opts {
        let res =
            c.st.cfg
                .set(opt.name, value)
                .and_then(|_| apply_one(c, opt.name));
        if let Err(e) = res {
            c.st.cfg = backup;
            c.st.apply_config();
            return Err(set_failed(name, &e));
        }
    }
    if let Some((opt, name, _)) = opts
        .iter()
        .find(|(o, _, _)| matches!(o.name, "port" | "bind"))
    {
        if let Err(e) = rebind(c) {
            tracing::warn!("CONFIG SET {}: {e}", opt.name);
            c.st.cfg = backup;
            c.st.apply_config();
            let why = if opt.name == "port" {
                "Unable to listen on this port. Check server logs."
            } else {
                "Failed to bind to specified addresses."
            };
            return Err(set_failed(name, why));
        }
    }
    c.st.apply_config();
    // A lower limit evicts at once, as in Redis.
    if opts.iter().any(|(o, _, _)| o.name == "maxmemory") {
        c.st.perform_evictions();
    }
    c.out.ok();
    Ok(())
}

/// Listens on the new port/bind, then stops the old accept loops. The new
/// sockets are bound while the old ones still are, so a new address that
/// overlaps an old one on the same port fails (Redis closes first).
fn rebind(c: &mut Ctx) -> std::io::Result<()> {
    let listeners = crate::server::listen(&c.st.cfg)?;
    let shared =
        c.st.shared
            .upgrade()
            .ok_or(std::io::ErrorKind::NotConnected)?;
    let tasks = crate::server::spawn_accept(&shared, listeners);
    for t in std::mem::replace(&mut c.st.accept_tasks, tasks) {
        t.abort();
    }
    c.st.tcp_port = c.st.cfg.int("port") as u16;
    Ok(())
}

/// Side effects of one option that can fail (and then roll back).
fn apply_one(c: &mut Ctx, name: &str) -> Result<(), String> {
    match name {
        "maxclients" => {
            let want = c.st.cfg.int("maxclients");
            raise_fd_limit(want)
        }
        "dir" => {
            let dir = c.st.cfg.str("dir").to_string();
            std::env::set_current_dir(&dir).map_err(|e| e.to_string())?;
            let abs = std::env::current_dir()
                .map(|p| p.display().to_string())
                .unwrap_or(dir);
            c.st.cfg.set("dir", &abs)
        }
        _ => Ok(()),
    }
}

/// Redis keeps 32 descriptors beyond `maxclients` for itself and refuses
/// a `maxclients` the process cannot be given descriptors for.
fn raise_fd_limit(maxclients: i64) -> Result<(), String> {
    const RESERVED: i64 = 32;
    let need = maxclients.saturating_add(RESERVED);
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit only read or write the struct we pass.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) != 0 {
            return Ok(());
        }
        if (lim.rlim_cur as i64) >= need || lim.rlim_cur == libc::RLIM_INFINITY {
            return Ok(());
        }
        let mut want = lim;
        want.rlim_cur = need as libc::rlim_t;
        if lim.rlim_max != libc::RLIM_INFINITY && want.rlim_cur > lim.rlim_max {
            want.rlim_cur = lim.rlim_max;
        }
        if libc::setrlimit(libc::RLIMIT_NOFILE, &want) == 0 {
            lim = want;
        }
    }
    if (lim.rlim_cur as i64) < need {
        return Err(format!(
            "The operating system is not able to handle the specified number of clients, try with {}",
            (lim.rlim_cur as i64) - RESERVED
        ));
    }
    Ok(())
}

/// CONFIG RESETSTAT
fn resetstat(c: &mut Ctx, _: &[Bytes]) -> CmdResult {
    c.st.reset_stats();
    c.out.ok();
    Ok(())
}

/// CONFIG REWRITE
fn rewrite(c: &mut Ctx, _: &[Bytes]) -> CmdResult {
    c.st.cfg.rewrite().map_err(Error::other)?;
    c.out.ok();
    Ok(())
}

/// CONFIG HELP
fn help(c: &mut Ctx, _: &[Bytes]) -> CmdResult {
    help_reply(
        c,
        "CONFIG",
        &[
            "GET <pattern>",
            "    Return parameters matching the glob-like <pattern> and their values.",
            "SET <directive> <value>",
            "    Set the configuration <directive> to <value>.",
            "RESETSTAT",
            "    Reset statistics reported by the INFO command.",
            "REWRITE",
            "    Rewrite the configuration file.",
        ],
    );
    Ok(())
}
