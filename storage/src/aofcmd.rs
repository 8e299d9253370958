//! The dataset as commands: the AOF base file Redis writes when
//! `aof-use-rdb-preamble` is off. Redis 7.0 writes each function library
//! as FUNCTION LOAD, then per database a SELECT and per key the command
//! that rebuilds it (SET, RPUSH, SADD, HMSET, ZADD, at most 64 items per
//! command) and PEXPIREAT for a TTL. The input is an RDB image, so the
//! snapshot engine's one serializer serves both forms.

use crate::rdb::{self, LoadError, Loaded};
use crate::value::Value;
use crate::LpVal;
use std::io::Write;

/// Redis's `AOF_REWRITE_ITEMS_PER_CMD`.
const ITEMS_PER_CMD: usize = 64;

/// Rewrites the RDB image `data` as commands into `out`, after a `#TS:`
/// annotation if `timestamp` (`aof-timestamp-enabled`); keys whose time
/// has passed at `now_ms` are left out, as Redis's rewrite leaves them.
pub fn from_rdb<W: Write>(
    data: &[u8],
    now_ms: i64,
    timestamp: bool,
    mut out: W,
) -> Result<W, LoadError> {
    let io = |e: std::io::Error| LoadError {
        msg: e.to_string(),
        offset: 0,
    };
    if timestamp {
        write!(out, "#TS:{}\r\n", now_ms / 1000).map_err(io)?;
    }
    let mut sink = Commands {
        out,
        db: None,
        err: None,
    };
    let res = rdb::load_into(data, &rdb::Limits::default(), now_ms, false, &mut sink);
    if let Some(e) = sink.err {
        return Err(io(e));
    }
    res.map(|_| sink.out)
}

struct Commands<W> {
    out: W,
    db: Option<usize>,
    err: Option<std::io::Error>,
}

impl<W: Write> Commands<W> {
    fn command(&mut self, args: &[&[u8]]) -> std::io::Result<()> {
        let mut b = Vec::with_capacity(16 + args.iter().map(|a| a.len() + 16).sum::<usize>());
        b.extend_from_slice(format!("*{}\r\n", args.len()).as_bytes());
        for a in args {
            b.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
            b.extend_from_slice(a);
            b.extend_from_slice(b"\r\n");
        }
        self.out.write_all(&b)
    }

    /// `name key` and then the items, at most [`ITEMS_PER_CMD`] per
    /// command (an item is one argument, or a pair for HMSET and ZADD).
    fn batched(
        &mut self,
        name: &[u8],
        key: &[u8],
        items: Vec<Vec<u8>>,
        per: usize,
    ) -> std::io::Result<()> {
        for chunk in items.chunks(ITEMS_PER_CMD * per) {
            let mut args: Vec<&[u8]> = vec![name, key];
            args.extend(chunk.iter().map(|a| &a[..]));
            self.command(&args)?;
        }
        Ok(())
    }

    fn write_key(&mut self, k: Loaded) -> std::io::Result<()> {
        if self.db != Some(k.db) {
            self.command(&[b"SELECT", k.db.to_string().as_bytes()])?;
            self.db = Some(k.db);
        }
        let mut buf = itoa::Buffer::new();
        let mut own = |v: LpVal| v.bytes(&mut buf).to_vec();
        let key = &k.key[..];
        match &k.value {
            Value::Str(s) => self.command(&[b"SET", key, &s.to_vec()])?,
            Value::List(l) => self.batched(b"RPUSH", key, l.iter().map(&mut own).collect(), 1)?,
            Value::Set(s) => self.batched(b"SADD", key, s.iter().map(&mut own).collect(), 1)?,
            Value::Hash(h) => {
                let items = h.iter().flat_map(|(f, v)| [own(f), own(v)]).collect();
                self.batched(b"HMSET", key, items, 2)?
            }
            Value::ZSet(z) => {
                let items = z
                    .entries(0, z.len(), false)
                    .into_iter()
                    .flat_map(|(m, s)| [crate::num::fmt_g17(s).into_bytes(), m.to_vec()])
                    .collect();
                self.batched(b"ZADD", key, items, 2)?
            }
        }
        if let Some(t) = k.expire_ms {
            self.command(&[b"PEXPIREAT", key, t.to_string().as_bytes()])?;
        }
        Ok(())
    }
}

impl<W: Write> rdb::Sink for &mut Commands<W> {
    fn key(&mut self, k: Loaded) -> Result<(), String> {
        self.write_key(k).map_err(|e| {
            let msg = e.to_string();
            self.err = Some(e);
            msg
        })
    }

    fn function(&mut self, code: Vec<u8>) -> Result<(), String> {
        self.command(&[b"FUNCTION", b"LOAD", &code]).map_err(|e| {
            let msg = e.to_string();
            self.err = Some(e);
            msg
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rdb::{SaveOpts, Writer};

    #[test]
    fn keys_become_the_commands_redis_writes() {
        let mut w = Writer::new(Vec::new(), SaveOpts::default());
        w.header("7.0.15", 0, 0).unwrap();
        w.function(b"#!lua name=l\nredis.register_function('f', function() end)")
            .unwrap();
        w.select_db(2, 2, 1).unwrap();
        let mut list = crate::Quicklist::default();
        for i in 1..=130 {
            list.push_back(i.to_string().as_bytes());
        }
        w.key(
            b"l",
            &Value::List(Box::new(list)),
            Some(1795743138721),
            None,
            None,
        )
        .unwrap();
        w.key(b"s", &Value::str(b"123"), None, None, None).unwrap();
        let rdb = w.finish().unwrap();
        let text = String::from_utf8(from_rdb(&rdb, 0, false, Vec::new()).unwrap()).unwrap();
        let stamped = from_rdb(&rdb, 1_795_000_000_123, true, Vec::new()).unwrap();
        assert_eq!(
            stamped,
            [&b"#TS:1795000000\r\n"[..], text.as_bytes()].concat()
        );
        let cmds: Vec<&str> = text
            .split("\r\n")
            .filter(|l| l.starts_with('$') || l.starts_with('*'))
            .collect();
        assert!(
            text.starts_with("*3\r\n$8\r\nFUNCTION\r\n$4\r\nLOAD\r\n"),
            "{text}"
        );
        assert!(text.contains("*2\r\n$6\r\nSELECT\r\n$1\r\n2\r\n"));
        assert_eq!(
            cmds.iter().filter(|c| **c == "*66").count(),
            2,
            "64 items a command"
        );
        assert!(text.contains("*4\r\n$5\r\nRPUSH\r\n$1\r\nl\r\n$3\r\n129\r\n$3\r\n130\r\n"));
        assert!(text.contains("*3\r\n$9\r\nPEXPIREAT\r\n$1\r\nl\r\n$13\r\n1795743138721\r\n"));
        assert!(text.ends_with("*3\r\n$3\r\nSET\r\n$1\r\ns\r\n$3\r\n123\r\n"));
    }
}
