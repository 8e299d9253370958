//! MIGRATE: moves keys to another server as RESTORE commands over a plain
//! connection, waiting for its replies. Like Redis it blocks the server
//! for the exchange (up to `timeout` ms per step) and keeps the connection
//! for the next MIGRATE to the same target (see `crate::core::migrate`).

use super::{int_arg, is, Ctx, Handler};
use crate::core::config::class;
use crate::core::error::{CmdResult, Error};
use crate::core::migrate::Link;
use bytes::Bytes;
use std::io::{BufRead, BufReader, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;
use storage::rdb;

pub static HANDLERS: &[(&str, Handler)] = &[("migrate", migrate)];

const CONNECT_ERR: &str = "IOERR error or timeout connecting to the client";
const WRITE_ERR: &str = "IOERR error or timeout writing to target instance";
const READ_ERR: &str = "IOERR error or timeout reading to target instance";

struct Opts<'a> {
    copy: bool,
    replace: bool,
    /// AUTH password or AUTH2 username password, as sent.
    auth: Vec<&'a Bytes>,
    keys: &'a [Bytes],
}

/// MIGRATE host port key|"" destination-db timeout [COPY] [REPLACE]
/// [AUTH password | AUTH2 username password] [KEYS key [key ...]]
fn migrate(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let o = parse(a)?;
    let db = int_arg(&a[4])?;
    let timeout = match int_arg(&a[5])? {
        t if t <= 0 => 1000,
        t => t,
    };
    let timeout = Duration::from_millis(timeout as u64);
    // The keys that exist, with their payloads and TTLs, taken now: the
    // exchange below cannot change them (the lock is held).
    let opts = crate::state::persist::save_opts(c.st, false);
    let mut moving = Vec::new();
    for k in o.keys {
        let Some(v) = c.st.lookup_read(c.cl.db, k, c.now) else {
            continue;
        };
        let payload = rdb::dump_payload(v, &opts);
        let ttl = c.st.shard.dbs[c.cl.db]
            .expire_at(k)
            .map_or(0, |t| (t - c.now).max(1));
        moving.push((k.clone(), ttl, payload));
    }
    if moving.is_empty() {
        c.out.simple("NOKEY");
        return Ok(());
    }
    let target = format!(
        "{}:{}",
        String::from_utf8_lossy(&a[1]),
        String::from_utf8_lossy(&a[2])
    );
    let mut request = Vec::new();
    if !o.auth.is_empty() {
        let mut args: Vec<&[u8]> = vec![b"AUTH"];
        args.extend(o.auth.iter().map(|b| &b[..]));
        protocol::write_command(&mut request, &args);
    }
    let select = request.len();
    for (k, ttl, payload) in &moving {
        let ttl = ttl.to_string();
        // A cluster node asks the target to take the key in a slot it imports.
        let restore: &[u8] = if c.st.cluster.is_some() {
            b"RESTORE-ASKING"
        } else {
            b"RESTORE"
        };
        let mut args: Vec<&[u8]> = vec![restore, k, ttl.as_bytes(), payload];
        if o.replace {
            args.push(b"REPLACE");
        }
        protocol::write_command(&mut request, &args);
    }
    // A connection that went stale while cached fails at once: one retry
    // with a new one, as long as the target cannot have run anything.
    let mut retried = false;
    let replies = loop {
        let (mut link, cached) = match c.st.migrate.take(&target) {
            Some(l) => (l, true),
            None => (connect(&target, timeout).map_err(Error::other)?, false),
        };
        let mut req = request.clone();
        if link.db != Some(db) {
            let mut sel = Vec::new();
            protocol::write_command(&mut sel, &[&b"SELECT"[..], db.to_string().as_bytes()]);
            req.splice(select..select, sel);
        }
        let expected = usize::from(!o.auth.is_empty()) + usize::from(link.db != Some(db));
        match exchange(&mut link, &req, expected + moving.len(), timeout) {
            Ok(replies) => {
                let (head, restores) = replies.split_at(expected);
                if let Some(e) = head.iter().find_map(|r| r.strip_prefix('-')) {
                    // The RESTOREs ran with the wrong credentials or
                    // database: the connection is not kept.
                    return Err(target_error(e));
                }
                link.db = Some(db);
                link.last_use_ms = c.now;
                c.st.migrate.put(target, link);
                break restores.to_vec();
            }
            Err((_, timed_out)) if cached && !timed_out && !retried => retried = true,
            Err((msg, _)) => return Err(Error::other(msg)),
        }
    };
    let mut moved = Vec::new();
    let mut error = None;
    for ((k, _, _), r) in moving.iter().zip(&replies) {
        match r.strip_prefix('-') {
            Some(e) => error = Some(e.to_string()),
            None if !o.copy => moved.push(k.clone()),
            None => {}
        }
    }
    let db = c.cl.db;
    for k in &moved {
        c.st.shard.dbs[db].remove(k);
        c.st.changed(class::GENERIC, "del", db, k);
    }
    if moved.is_empty() {
        c.no_propagate();
    } else {
        c.propagate_as(std::iter::once(Bytes::from_static(b"DEL")).chain(moved));
    }
    match error {
        Some(e) => Err(target_error(&e)),
        None => {
            c.out.ok();
            Ok(())
        }
    }
}

fn parse(a: &[Bytes]) -> Result<Opts<'_>, Error> {
    let mut o = Opts {
        copy: false,
        replace: false,
        auth: Vec::new(),
        keys: &a[3..4],
    };
    let mut i = 6;
    while i < a.len() {
        let more = a.len() - i - 1;
        if is(&a[i], "copy") {
            o.copy = true;
        } else if is(&a[i], "replace") {
            o.replace = true;
        } else if is(&a[i], "auth") && more >= 1 {
            o.auth = vec![&a[i + 1]];
            i += 1;
        } else if is(&a[i], "auth2") && more >= 2 {
            o.auth = vec![&a[i + 1], &a[i + 2]];
            i += 2;
        } else if is(&a[i], "keys") {
            if !a[3].is_empty() {
                return Err(Error::other(
                    "ERR When using MIGRATE KEYS option, the key argument must be set to the empty string",
                ));
            }
            o.keys = &a[i + 1..];
            break;
        } else {
            return Err(Error::Syntax);
        }
        i += 1;
    }
    Ok(o)
}

fn target_error(e: &str) -> Error {
    Error::other(format!("ERR Target instance replied with error: {e}"))
}

fn connect(target: &str, timeout: Duration) -> Result<Link, &'static str> {
    let addr = target
        .to_socket_addrs()
        .ok()
        .and_then(|mut a| a.next())
        .ok_or(CONNECT_ERR)?;
    let sock = TcpStream::connect_timeout(&addr, timeout).map_err(|e| {
        // A refused connection shows when Redis first writes to it.
        if e.kind() == std::io::ErrorKind::TimedOut {
            CONNECT_ERR
        } else {
            WRITE_ERR
        }
    })?;
    let _ = sock.set_nodelay(true);
    Ok(Link {
        sock,
        db: None,
        last_use_ms: 0,
    })
}

/// Sends `req` and reads `n` one-line replies; on failure, the error and
/// whether it was a timeout.
fn exchange(
    link: &mut Link,
    req: &[u8],
    n: usize,
    timeout: Duration,
) -> Result<Vec<String>, (&'static str, bool)> {
    let timed_out = |e: &std::io::Error| {
        matches!(
            e.kind(),
            std::io::ErrorKind::TimedOut | std::io::ErrorKind::WouldBlock
        )
    };
    let s = &link.sock;
    let _ = s.set_write_timeout(Some(timeout));
    let _ = s.set_read_timeout(Some(timeout));
    (&link.sock)
        .write_all(req)
        .map_err(|e| (WRITE_ERR, timed_out(&e)))?;
    let mut r = BufReader::new(&link.sock);
    let mut replies = Vec::with_capacity(n);
    for _ in 0..n {
        let mut line = String::new();
        match r.read_line(&mut line) {
            Ok(0) => return Err((READ_ERR, false)),
            Ok(_) => replies.push(line.trim_end_matches(['\r', '\n']).to_string()),
            Err(e) => return Err((READ_ERR, timed_out(&e))),
        }
    }
    Ok(replies)
}
