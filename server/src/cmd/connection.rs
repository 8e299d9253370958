//! Connection commands: PING ECHO QUIT RESET SELECT AUTH HELLO.

use super::{int_arg, is, Ctx, Handler};
use crate::core::error::{CmdResult, Error};
use crate::state::ReplyMode;
use bytes::Bytes;

pub static HANDLERS: &[(&str, Handler)] = &[
    ("ping", ping),
    ("echo", echo),
    ("quit", quit),
    ("reset", reset),
    ("select", select),
    ("auth", auth),
    ("hello", hello),
];

/// PING [message]
fn ping(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    if a.len() > 2 {
        return Err(Error::Arity("ping".into()));
    }
    match a.get(1) {
        Some(m) => c.out.bulk(m),
        None => c.out.simple("PONG"),
    }
    Ok(())
}

/// ECHO message
fn echo(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    c.out.bulk(&a[1]);
    Ok(())
}

/// QUIT
fn quit(c: &mut Ctx, _: &[Bytes]) -> CmdResult {
    c.out.ok();
    c.cl.close_after_reply = true;
    Ok(())
}

/// RESET: back to a fresh connection's state.
fn reset(c: &mut Ctx, _: &[Bytes]) -> CmdResult {
    let cl = &mut *c.cl;
    cl.db = 0;
    cl.resp3 = false;
    cl.name = None;
    cl.reply_mode = ReplyMode::On;
    if std::mem::take(&mut cl.monitor) {
        c.st.monitors -= 1;
    }
    cl.no_evict = false;
    cl.authenticated = !c.st.acl.auth_required();
    cl.user = Default::default();
    cl.user.slot = c.st.acl.default_slot();
    cl.multi = None;
    cl.multi_error = false;
    c.st.unwatch_all(c.cl);
    c.st.unsubscribe_all(c.cl);
    c.st.tracking_off(c.cl);
    c.out.resp3 = false;
    c.out.simple("RESET");
    Ok(())
}

/// SELECT index
fn select(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let i = int_arg(&a[1]).map_err(|_| Error::InvalidDbIndex)?;
    if c.st.cluster.is_some() && i != 0 {
        return Err(Error::other("ERR SELECT is not allowed in cluster mode"));
    }
    if i < 0 || i as usize >= c.st.shard.dbs.len() {
        return Err(Error::DbIndexOutOfRange);
    }
    c.cl.db = i as usize;
    c.out.ok();
    Ok(())
}

/// AUTH [username] password
fn auth(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    if a.len() > 3 {
        return Err(Error::Syntax);
    }
    let default_nopass = c.st.acl.get(b"default").is_some_and(|u| u.nopass);
    if a.len() == 2 && default_nopass {
        return Err(Error::other(
            "ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?",
        ));
    }
    let (user, pass) = if a.len() == 3 {
        (&a[1][..], &a[2][..])
    } else {
        (&b"default"[..], &a[1][..])
    };
    super::perm::authenticate(c, &a[0], user, pass)?;
    c.out.ok();
    Ok(())
}

/// HELLO [protover [AUTH username password] [SETNAME clientname]]
fn hello(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let mut ver = None;
    let mut i = 1;
    if a.len() > 1 {
        let v = int_arg(&a[1])
            .map_err(|_| Error::other("ERR Protocol version is not an integer or out of range"))?;
        if !(2..=3).contains(&v) {
            return Err(Error::other("NOPROTO unsupported protocol version"));
        }
        ver = Some(v);
        i = 2;
    }
    let mut name = None;
    while i < a.len() {
        let more = a.len() - i - 1;
        if is(&a[i], "auth") && more >= 2 {
            super::perm::authenticate(c, &a[0], &a[i + 1], &a[i + 2])?;
            i += 3;
        } else if is(&a[i], "setname") && more >= 1 {
            crate::state::validate_client_name(&a[i + 1])?;
            name = Some(a[i + 1].clone());
            i += 2;
        } else {
            return Err(Error::other(format!(
                "ERR Syntax error in HELLO option '{}'",
                String::from_utf8_lossy(&a[i])
            )));
        }
    }
    if !c.cl.authenticated {
        return Err(Error::other("NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time"));
    }
    if let Some(n) = name {
        c.cl.name = (!n.is_empty()).then_some(n);
    }
    if let Some(v) = ver {
        c.cl.resp3 = v == 3;
        c.out.resp3 = c.cl.resp3;
    }
    let o = &mut *c.out;
    o.map(7);
    o.bulk(b"server");
    o.bulk(b"redis");
    o.bulk(b"version");
    o.bulk(b"7.0.15");
    o.bulk(b"proto");
    o.int(if c.cl.resp3 { 3 } else { 2 });
    o.bulk(b"id");
    o.int(c.cl.id as i64);
    o.bulk(b"mode");
    o.bulk(b"standalone");
    o.bulk(b"role");
    o.bulk(b"master");
    o.bulk(b"modules");
    o.array(0);
    Ok(())
}
