//! String commands.

use super::flags::*;
use super::{int_arg, is, Command, Ctx};
use crate::config::NOTIFY_CLASSES;
use crate::error::{CmdResult, Error, WRONGTYPE};
use bytes::Bytes;
use storage::{StrValue, Value};

const G: &str = "string";
/// The `$` (string) keyspace event class.
pub const CLASS: u32 = NOTIFY_CLASSES[1].1;
/// The `g` (generic) keyspace event class.
pub const GENERIC: u32 = NOTIFY_CLASSES[0].1;

pub static COMMANDS: &[Command] = &[
    Command::new("get", 2, READONLY | FAST, G, (1, 1, 1), get),
    Command::new("set", -3, WRITE | DENYOOM, G, (1, 1, 1), set),
];

/// Writes a string value as a bulk reply.
pub fn reply_str(c: &mut Ctx, s: &StrValue) {
    c.out.bulk(s.as_bytes(&mut itoa::Buffer::new()));
}

/// GET key
fn get(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    match c.st.read_str(c.cl.db, &a[1], c.now)? {
        Some(s) => c.out.bulk(s.as_bytes(&mut itoa::Buffer::new())),
        None => c.out.null(),
    }
    Ok(())
}

/// Expiry options shared by SET and GETEX.
#[derive(Clone, Copy, PartialEq)]
pub enum Ttl {
    None,
    Keep,
    Persist,
    /// Absolute unix time in ms.
    At(i64),
}

/// Converts EX/PX/EXAT/PXAT's argument to an absolute ms time, refusing
/// non-positive values and overflow with `invalid expire time in '<cmd>'`.
pub fn ttl_arg(kind: &[u8], arg: &[u8], now: i64, cmd: &'static str) -> Result<i64, Error> {
    let n = int_arg(arg)?;
    if n <= 0 {
        return Err(Error::InvalidExpire(cmd));
    }
    let ms = if is(kind, "ex") || is(kind, "exat") {
        n.checked_mul(1000).ok_or(Error::InvalidExpire(cmd))?
    } else {
        n
    };
    if is(kind, "ex") || is(kind, "px") {
        ms.checked_add(now).ok_or(Error::InvalidExpire(cmd))
    } else {
        Ok(ms)
    }
}

/// SET key value [NX | XX] [GET] [EX seconds | PX milliseconds |
///   EXAT unix-time-seconds | PXAT unix-time-milliseconds | KEEPTTL]
fn set(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let (mut nx, mut xx, mut get) = (false, false, false);
    let mut ttl = Ttl::None;
    let mut i = 3;
    while i < a.len() {
        let o = &a[i];
        let has_next = i + 1 < a.len();
        if is(o, "nx") && !xx {
            nx = true;
        } else if is(o, "xx") && !nx {
            xx = true;
        } else if is(o, "get") {
            get = true;
        } else if is(o, "keepttl") && ttl == Ttl::None {
            ttl = Ttl::Keep;
        } else if (is(o, "ex") || is(o, "px") || is(o, "exat") || is(o, "pxat"))
            && ttl == Ttl::None
            && has_next
        {
            i += 1;
            ttl = Ttl::At(0);
            // Parsed after the loop so a syntax error wins over a bad time, as in Redis.
        } else {
            return Err(Error::Syntax);
        }
        i += 1;
    }
    if let Ttl::At(_) = ttl {
        let p = a
            .iter()
            .skip(3)
            .position(|o| is(o, "ex") || is(o, "px") || is(o, "exat") || is(o, "pxat"))
            .unwrap()
            + 3;
        ttl = Ttl::At(ttl_arg(&a[p], &a[p + 1], c.now, "set")?);
    }
    let db = c.cl.db;
    let old = match c.st.lookup_write(db, &a[1], c.now) {
        None => None,
        Some(Value::Str(s)) => Some(s.to_vec()),
        #[allow(unreachable_patterns)]
        Some(_) if get => return Err(WRONGTYPE),
        #[allow(unreachable_patterns)]
        Some(_) => None,
    };
    let exists = c.st.dbs[db].contains(&a[1]);
    if (nx && exists) || (xx && !exists) {
        match (get, old) {
            (true, Some(v)) => c.out.bulk(&v),
            _ => c.out.null(),
        }
        return Ok(());
    }
    c.st.dbs[db].set(&a[1], Value::str(&a[2]), ttl == Ttl::Keep);
    if let Ttl::At(t) = ttl {
        c.st.dbs[db].set_expire(&a[1], t);
    }
    c.st.changed(CLASS, "set", db, &a[1]);
    if let Ttl::At(_) = ttl {
        c.st.notify(GENERIC, "expire", db, &a[1]);
    }
    match (get, old) {
        (true, Some(v)) => c.out.bulk(&v),
        (true, None) => c.out.null(),
        _ => c.out.ok(),
    }
    Ok(())
}
