//! In-process test harness: runs commands through the dispatcher
//! ([`cmd::execute`]) on a [`State`] of its own, without a socket, with a
//! wall clock that only moves when the test says so.
//!
//! `Harness::new()`, then `h.run(&["SET", "k", "v", "EX", "10"])` gives the
//! reply as a [`Frame`] (`h.raw(..)` its bytes), `h.advance_ms(10_000)`
//! moves the clock, `h.resp3()` switches to RESP3, `h.connect()` adds a
//! client for `h.run_on(id, ..)`.
//!
//! Clients live in `State::clients` between commands and are taken out
//! while one runs, as a connection does. Commands that block or close the
//! connection need the real server (tests/ in the workspace).

use crate::cmd;
use crate::core::config::Config;
use crate::state::{Client, State};
use bytes::Bytes;
use protocol::{parse_reply, ReplyBuf};

pub use protocol::Frame;

/// 2026-01-01T00:00:00Z: a fixed start, so TTLs and OBJECT IDLETIME are
/// exact and runs repeat.
pub const START_MS: i64 = 1_767_225_600_000;

pub struct Harness {
    pub st: State,
    /// The client `run` uses; others come from [`Harness::connect`].
    pub client: u64,
    now: i64,
}

impl Default for Harness {
    fn default() -> Self {
        Harness::new()
    }
}

impl Harness {
    /// A server with the default configuration and one RESP2 client.
    pub fn new() -> Harness {
        Harness::with_config(&[])
    }

    /// As `new`, with options set first (`&[("hash-max-listpack-entries", "4")]`).
    pub fn with_config(opts: &[(&str, &str)]) -> Harness {
        crate::cmd::families::install();
        let mut cfg = Config::default();
        for (k, v) in opts {
            cfg.set(k, v)
                .unwrap_or_else(|e| panic!("config {k} {v}: {e}"));
        }
        let mut h = Harness {
            st: State::new(cfg),
            client: 0,
            now: START_MS,
        };
        h.client = h.connect();
        h
    }

    /// Adds a client (authenticated unless `requirepass` is set) and
    /// returns its id, for [`Harness::run_on`].
    pub fn connect(&mut self) -> u64 {
        let st = &mut self.st;
        let id = st.next_client_id;
        st.next_client_id += 1;
        let authed = !st.acl.auth_required();
        let c = Client::new(
            id,
            format!("127.0.0.1:{}", 40000 + id),
            "127.0.0.1:6379".into(),
            -1,
            authed,
        );
        st.clients.insert(id, Box::new(c));
        id
    }

    /// Switches the main client to RESP3 (through HELLO 3).
    pub fn resp3(&mut self) -> &mut Self {
        self.run(&["HELLO", "3"]);
        self
    }

    /// The wall clock commands see, unix ms.
    pub fn now_ms(&self) -> i64 {
        self.now
    }

    pub fn advance_ms(&mut self, ms: i64) {
        self.now += ms;
    }

    /// Runs a command on the main client; its one reply.
    pub fn run<A: AsRef<[u8]>>(&mut self, args: &[A]) -> Frame {
        self.run_on(self.client, args)
    }

    /// Runs a command on client `id`; its one reply.
    pub fn run_on<A: AsRef<[u8]>>(&mut self, id: u64, args: &[A]) -> Frame {
        let mut frames = self.frames_on(id, args);
        assert_eq!(frames.len(), 1, "{:?}: one reply expected", show(args));
        frames.remove(0)
    }

    /// Every reply frame a command wrote (SUBSCRIBE a b writes two).
    pub fn frames_on<A: AsRef<[u8]>>(&mut self, id: u64, args: &[A]) -> Vec<Frame> {
        let raw = self.raw_on(id, args);
        let mut rest = &raw[..];
        let mut frames = Vec::new();
        while !rest.is_empty() {
            let (f, used) = parse_reply(rest).unwrap_or_else(|| {
                panic!(
                    "{:?}: malformed reply {:?}",
                    show(args),
                    String::from_utf8_lossy(rest)
                )
            });
            frames.push(f);
            rest = &rest[used..];
        }
        frames
    }

    /// The reply bytes exactly as a connection would send them.
    pub fn raw<A: AsRef<[u8]>>(&mut self, args: &[A]) -> Vec<u8> {
        self.raw_on(self.client, args)
    }

    pub fn raw_on<A: AsRef<[u8]>>(&mut self, id: u64, args: &[A]) -> Vec<u8> {
        let args: Vec<Bytes> = args
            .iter()
            .map(|a| Bytes::copy_from_slice(a.as_ref()))
            .collect();
        let st = &mut self.st;
        let mut cl = st
            .clients
            .remove(&id)
            .unwrap_or_else(|| panic!("no client {id}"));
        // Output other clients' commands produced for this one comes first,
        // as a woken connection flushes it.
        let mut out = ReplyBuf::new(cl.resp3);
        out.buf.extend_from_slice(&cl.pending);
        cl.pending.clear();
        st.tick(std::time::Instant::now());
        st.set_clock(self.now);
        cmd::execute(st, &mut cl, &mut out, &args);
        let blocked = cl.blocked.is_some();
        st.clients.insert(id, cl);
        assert!(!blocked, "{:?} blocked: use the real server", show(&args));
        out.buf.to_vec()
    }
}

fn show<A: AsRef<[u8]>>(args: &[A]) -> Vec<String> {
    args.iter()
        .map(|a| String::from_utf8_lossy(a.as_ref()).into_owned())
        .collect()
}

/// Shorthands for expected frames.
pub fn ok() -> Frame {
    Frame::Simple("OK".into())
}
pub fn simple(s: &str) -> Frame {
    Frame::Simple(Bytes::copy_from_slice(s.as_bytes()))
}
pub fn err(s: &str) -> Frame {
    Frame::Error(Bytes::copy_from_slice(s.as_bytes()))
}
pub fn bulk<B: AsRef<[u8]>>(b: B) -> Frame {
    Frame::Bulk(Bytes::copy_from_slice(b.as_ref()))
}
pub fn int(i: i64) -> Frame {
    Frame::Integer(i)
}
pub fn nil() -> Frame {
    Frame::Null
}

/// The wrong-type error every family shares.
pub const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clock_is_frozen_until_advanced() {
        let mut h = Harness::new();
        assert_eq!(h.run(&["SET", "k", "v", "PX", "1500"]), ok());
        assert_eq!(h.run(&["PTTL", "k"]), int(1500));
        h.advance_ms(1499);
        assert_eq!(h.run(&["PTTL", "k"]), int(1));
        h.advance_ms(2);
        assert_eq!(h.run(&["GET", "k"]), nil());
        let t = h.run(&["TIME"]);
        let Frame::Array(v) = t else { panic!("{t:?}") };
        // TIME reads the real clock, not the test's.
        assert_ne!(v[0], bulk((START_MS / 1000).to_string()));
    }
}
