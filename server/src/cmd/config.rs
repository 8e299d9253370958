//! CONFIG GET SET RESETSTAT REWRITE HELP.

use super::help::help_reply;
use super::{Ctx, Handler};
use crate::core::config::{self, Followup};
use crate::core::error::{CmdResult, Error};
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
        c.out
            .bulk(crate::core::config::display_value(n, v).as_bytes());
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
        c.st.cfg
            .settable(opt, c.cl.is_local())
            .map_err(|e| set_failed(name, &e))?;
        // Changing directory under a load in progress is refused, and
        // turning the AOF on or off under any load, as Redis's
        // deny-loading settings.
        let denied = match &c.st.loading {
            Some(l) => opt.name == "appendonly" || (opt.name == "dir" && !l.is_async),
            None => false,
        };
        if denied {
            return Err(Error::other(
                "LOADING Redis is loading the dataset in memory",
            ));
        }
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
    let mut followups = Vec::new();
    for (opt, name, value) in &opts {
        let res =
            c.st.cfg
                .set(opt.name, value)
                .and_then(|hook| c.st.apply(hook));
        match res {
            Ok(f) => followups.extend(f),
            Err(e) => {
                c.st.cfg = backup;
                c.st.apply_all();
                return Err(set_failed(name, &e));
            }
        }
    }
    // The TLS context is built once every value is in place (a new
    // certificate and its key arrive in one CONFIG SET), and only when TLS
    // is on, as in Redis: `tls-*` files set while it is off are only
    // stored, and turning it on again keeps a context built before.
    let old_tls = c.st.tls.get();
    let rebuild = followups.contains(&Followup::Tls) || old_tls.is_none();
    if rebuild && crate::core::tls::wanted(&c.st.cfg) {
        if let Err(e) = c.st.build_tls() {
            let (opt, name, _) = opts
                .iter()
                .find(|(o, _, _)| o.name.starts_with("tls-"))
                .expect("a tls option");
            tracing::warn!("{e}");
            tracing::warn!("Failed applying new configuration. Possibly related to new {} setting. Restoring previous settings.", opt.name);
            c.st.cfg = backup;
            c.st.apply_all();
            return Err(set_failed(
                name,
                "Unable to update TLS configuration. Check server logs.",
            ));
        }
    }
    // Same ports and addresses: the listeners stay (Redis applies no
    // unchanged value).
    let bind = c.st.cfg.bind != backup.bind;
    let tcp = bind || c.st.cfg.port != backup.port;
    let tls = bind || c.st.cfg.tls_port != backup.tls_port;
    if followups.contains(&Followup::Listen) && (tcp || tls) {
        if let Err(e) =
            c.st.relisten
                .map_or(Ok(()), |relisten| relisten(c.st, tcp, tls))
        {
            let (opt, name, _) = opts
                .iter()
                .find(|(o, _, _)| matches!(o.name, "port" | "bind" | "tls-port"))
                .expect("a port or bind change");
            tracing::warn!("CONFIG SET {}: {e}", opt.name);
            c.st.cfg = backup;
            c.st.apply_all();
            c.st.tls.set(old_tls);
            let why = if opt.name != "bind" {
                "Unable to listen on this port. Check server logs."
            } else {
                "Failed to bind to specified addresses."
            };
            return Err(set_failed(name, why));
        }
    }
    if followups.contains(&Followup::Appendonly) {
        crate::state::aof::follow_appendonly(c.st, c.cl.deny_blocking);
    }
    // A lower limit starts the eviction timer, as in Redis 7.0: the keys go
    // between commands (a DEL propagated inside CONFIG SET, EXEC or a
    // script would break their unit). Without the backup, which is not the
    // dataset's memory.
    drop(backup);
    if opts.iter().any(|(o, _, _)| o.name == "maxmemory") {
        let (max, used) = (c.st.cfg.maxmemory, crate::state::evict::used_memory());
        if max > 0 && max < used {
            tracing::warn!("WARNING: the new maxmemory value set via CONFIG SET ({max}) is smaller than the current memory usage ({used}). This will result in key eviction and/or the inability to accept new write commands depending on the maxmemory-policy.");
        }
        c.st.start_eviction_proc();
    }
    crate::core::proctitle::set(&c.st.cfg);
    c.out.ok();
    Ok(())
}

/// CONFIG RESETSTAT
fn resetstat(c: &mut Ctx, _: &[Bytes]) -> CmdResult {
    c.st.reset_stats();
    crate::state::lazyfree::LAZYFREED.store(0, std::sync::atomic::Ordering::Relaxed);
    c.out.ok();
    Ok(())
}

/// CONFIG REWRITE
fn rewrite(c: &mut Ctx, _: &[Bytes]) -> CmdResult {
    let users = super::perm::config_lines(c.st);
    c.st.cfg
        .rewrite(users.as_deref(), false)
        .map_err(Error::other)?;
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
