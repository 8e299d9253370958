//! A client as the state knows it: its connection's settings, what it
//! waits for, its output held for it, and how it is described to people.

use crate::core::clock::now_ms;
use bytes::{Bytes, BytesMut};
use std::sync::Arc;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReplyMode {
    On,
    Off,
    /// Skip the reply of the next command only.
    Skip,
    SkipNext,
}

/// What SCRIPT DEBUG set for the client's next EVAL.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LuaDebug {
    Off,
    Sync,
    /// SCRIPT DEBUG YES, which this server refuses: the next EVAL is
    /// refused too, not run for real (`redis-cli --ldb` ignores the
    /// refusal and expects its changes discarded).
    Refused,
}

pub struct Client {
    pub id: u64,
    pub addr: String,
    pub laddr: String,
    pub fd: i32,
    pub name: Option<Bytes>,
    pub lib_name: Option<Bytes>,
    pub lib_ver: Option<Bytes>,
    pub db: usize,
    pub resp3: bool,
    pub authenticated: bool,
    /// The ACL user the client acts as.
    pub user: crate::core::acl::Login,
    pub created_ms: i64,
    pub last_interaction_ms: i64,
    pub last_cmd: &'static str,
    pub reply_mode: ReplyMode,
    pub no_evict: bool,
    /// Close once the current replies are written (QUIT, KILL of self).
    pub close_after_reply: bool,
    /// SCRIPT DEBUG SYNC: the next EVAL runs under the Lua debugger.
    pub lua_debug: LuaDebug,
    /// Connected through TLS.
    pub tls: bool,
    /// Cluster mode: READONLY (reads served on this replica), and ASKING
    /// (the next command may use a slot being imported).
    pub readonly: bool,
    pub asking: bool,
    /// Set by CLIENT KILL from another client; the connection closes on wake.
    pub killed: bool,
    pub monitor: bool,
    /// Output produced for this client by other clients (MONITOR, later
    /// pub/sub and unblocking), flushed by its connection task on wake.
    pub pending: BytesMut,
    pub wake: Arc<crate::core::wake::Wake>,
    /// Input buffer size, for CLIENT LIST's qbuf.
    pub qbuf: usize,
    /// Room reserved for a large argument arriving, and the arguments of a
    /// request not complete yet: client memory (`clientmem`).
    pub qbuf_alloc: usize,
    pub argv_pending: usize,
    /// The most input held at once since the cron last sampled it.
    pub input_peak: usize,
    /// CLIENT LIST's rbs and rbp.
    pub rbuf: crate::core::replybuf::ReplyBufSize,
    /// Set while the client waits in a blocking command.
    pub blocked: Option<Blocked>,
    /// Set while CLIENT PAUSE holds back the client's next request (counted
    /// in `blocked_clients`, as Redis does).
    pub paused: bool,
    /// Commands queued since MULTI; `None` outside a transaction.
    pub multi: Option<Vec<Vec<Bytes>>>,
    /// A command was rejected while queuing: EXEC must abort.
    pub multi_error: bool,
    /// What the queued commands may do (`cmd::gate::traits`), accumulated
    /// as they are queued, as Redis's `mstate.cmd_flags`: EXEC is judged
    /// by it once, not by re-reading its queue.
    pub multi_traits: u8,
    pub watched: Vec<(usize, Bytes)>,
    /// A watched key changed: EXEC must fail.
    pub dirty_cas: bool,
    /// Blocking commands must not block (inside MULTI/EXEC and scripts):
    /// they answer as if their timeout had passed.
    pub deny_blocking: bool,
    /// Connected through the Unix socket (flag `U`).
    pub unix: bool,
    /// Pub/Sub subscriptions.
    pub subs: crate::state::pubsub::Subs,
    /// Output the connection task holds but the socket has not taken yet,
    /// counted with `pending` against `client-output-buffer-limit`.
    pub out_unsent: Arc<std::sync::atomic::AtomicUsize>,
    /// Large output the connection holds beyond that (`spill`).
    pub spill: Arc<crate::core::spill::Spill>,
    /// A replica's stream bytes the shared replication buffer holds for
    /// it (`repl`), counted as its output too.
    pub repl_unsent: usize,
    /// When the output first exceeded the soft limit (ms), if it still does.
    pub obuf_soft_since: Option<i64>,
    /// CLIENT TRACKING (see `tracking`).
    pub tracking: crate::state::tracking::Mode,
    /// What it announced with REPLCONF; whether it is a replica.
    pub peer: crate::state::repl::Peer,
    /// The master replication offset after its last command (what its
    /// WAIT waits for).
    pub woff: u64,
}

/// What a blocked client waits for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BlockKind {
    List,
    ZSet,
    /// XREAD, XREADGROUP.
    Stream,
    /// WAIT: only its timeout ends it.
    Wait,
    /// SHUTDOWN waiting for replicas: the process exits, or the shutdown
    /// fails or is aborted and it gets an error.
    Shutdown,
}

pub struct Blocked {
    pub kind: BlockKind,
    pub db: usize,
    pub keys: Vec<Bytes>,
    /// Absolute unix ms; `None` waits forever.
    pub deadline: Option<i64>,
    /// The command to run again when a key is ready.
    pub args: Vec<Bytes>,
}

impl Client {
    /// Connected from loopback (or not over TCP): what `local` in
    /// `enable-debug-command` and `enable-protected-configs` allows.
    pub fn is_local(&self) -> bool {
        self.addr
            .parse::<std::net::SocketAddr>()
            .map_or(true, |a| a.ip().is_loopback())
    }

    /// Output produced for this client and not yet taken by its socket:
    /// what `client-output-buffer-limit` and CLIENT LIST's `omem` count.
    /// Gives back the room of a large `pending` once flushed: a burst
    /// of messages (invalidations, pub/sub) must not stay counted in
    /// `used_memory`, where it would evict keys.
    #[inline]
    pub fn pending_trim(&mut self) {
        if self.pending.capacity() > 16 * 1024 {
            self.pending = BytesMut::new();
        }
    }

    pub fn output_bytes(&self) -> usize {
        self.pending.len() + self.unsent() + self.repl_unsent
    }

    /// What the connection holds that the socket has not taken.
    pub fn unsent(&self) -> usize {
        self.out_unsent.load(std::sync::atomic::Ordering::Relaxed) + self.spill.len()
    }

    /// Whether bytes written straight to its socket now follow all the
    /// output queued for it: a plain socket (a TLS stream seals what it
    /// sends: only its task writes) with nothing pending or unsent (the
    /// connection keeps `out_unsent` current under the lock).
    pub fn socket_is_next(&self) -> bool {
        !self.tls && self.pending.is_empty() && self.unsent() == 0
    }

    pub fn new(id: u64, addr: String, laddr: String, fd: i32, authenticated: bool) -> Self {
        let now = now_ms();
        Client {
            id,
            addr,
            laddr,
            fd,
            name: None,
            lib_name: None,
            lib_ver: None,
            db: 0,
            resp3: false,
            authenticated,
            user: Default::default(),
            created_ms: now,
            last_interaction_ms: now,
            last_cmd: "NULL",
            reply_mode: ReplyMode::On,
            no_evict: false,
            close_after_reply: false,
            lua_debug: LuaDebug::Off,
            tls: false,
            readonly: false,
            asking: false,
            killed: false,
            monitor: false,
            pending: BytesMut::new(),
            wake: Arc::new(crate::core::wake::Wake::new()),
            qbuf: 0,
            qbuf_alloc: 0,
            argv_pending: 0,
            input_peak: 0,
            rbuf: Default::default(),
            blocked: None,
            deny_blocking: false,
            unix: false,
            paused: false,
            multi: None,
            multi_error: false,
            multi_traits: 0,
            watched: Vec::new(),
            dirty_cas: false,
            subs: Default::default(),
            out_unsent: Default::default(),
            spill: Default::default(),
            repl_unsent: 0,
            obuf_soft_since: None,
            tracking: Default::default(),
            peer: Default::default(),
            woff: 0,
        }
    }
}

/// How a client is described to people: the CLIENT LIST / CLIENT INFO
/// line (logs use it too) and the type CLIENT LIST/KILL filter on.
impl Client {
    /// One CLIENT LIST line (without the newline). `current` carries the
    /// request being executed, for the fields describing it.
    pub fn line(&self, now: i64, current: Option<&[Bytes]>) -> String {
        let cl = self;
        let (qbuf, argv_mem) = match current {
            Some(args) => {
                let mut q = 1 + args.len().to_string().len() + 2;
                for a in args {
                    q += 1 + a.len().to_string().len() + 2 + a.len() + 2;
                }
                (q, args.iter().map(|a| a.len()).sum::<usize>())
            }
            None => (cl.qbuf, cl.argv_pending),
        };
        // Redis's letters, in its order.
        let mut flags: String = [
            (cl.peer.replica, 'S'),
            (cl.monitor, 'O'),
            (cl.peer.master, 'M'),
            (cl.subs.any(), 'P'),
            (cl.multi.is_some(), 'x'),
            (cl.blocked.is_some() || cl.paused, 'b'),
        ]
        .iter()
        .filter_map(|&(on, f)| on.then_some(f))
        .chain(cl.tracking.letters())
        .chain(
            [
                (cl.dirty_cas, 'd'),
                (cl.close_after_reply, 'c'),
                (cl.unix, 'U'),
                (cl.readonly, 'r'),
                (cl.no_evict, 'e'),
            ]
            .iter()
            .filter_map(|&(on, f)| on.then_some(f)),
        )
        .collect();
        if flags.is_empty() {
            flags.push('N');
        }
        let omem = cl.output_bytes();
        let multi = cl.multi.as_ref().map_or(-1, |q| q.len() as i64);
        let usage = crate::core::clientmem::Usage {
            qbuf,
            argv: argv_mem,
            ..cl.usage()
        };
        let multi_mem = usage.multi;
        let name = cl
            .name
            .as_ref()
            .map(|n| String::from_utf8_lossy(n).into_owned())
            .unwrap_or_default();
        format!(
            "id={} addr={} laddr={} fd={} name={} age={} idle={} flags={} db={} sub={} psub={} ssub={} multi={} qbuf={} qbuf-free={} argv-mem={} multi-mem={} rbs={} rbp={} obl=0 oll={} omem={} tot-mem={} events={} cmd={} user={} redir={} resp={}",
            cl.id,
            cl.addr,
            cl.laddr,
            cl.fd,
            name,
            (now - cl.created_ms).max(0) / 1000,
            // The client running the command has just been heard from.
            if current.is_some() {
                0
            } else {
                (now - cl.last_interaction_ms).max(0) / 1000
            },
            flags,
            cl.db,
            cl.subs.channels.len(),
            cl.subs.patterns.len(),
            cl.subs.shard.len(),
            multi,
            qbuf,
            20474usize.saturating_sub(qbuf),
            argv_mem,
            multi_mem,
            cl.rbuf.size,
            cl.rbuf.peak,
            // Unwritten output as Redis's reply list: 16 KB blocks.
            omem.div_ceil(16 * 1024),
            omem,
            usage.total(),
            if omem > 0 { "rw" } else { "r" },
            if current.is_some() { "NULL" } else { &cl.last_cmd },
            cl.user.name,
            if cl.tracking.on {
                cl.tracking.redirect as i64
            } else {
                -1
            },
            if cl.resp3 { 3 } else { 2 },
        )
    }

    /// What the client holds between commands (`clientmem`).
    pub fn usage(&self) -> crate::core::clientmem::Usage {
        crate::core::clientmem::Usage {
            qbuf: self.qbuf,
            qbuf_alloc: self.qbuf_alloc,
            argv: self.argv_pending,
            // Queued commands, and their arguments' bytes plus a pointer
            // each, as Redis 7.0 counts `multi-mem`.
            multi: self.multi.as_ref().map_or(0, |q| {
                q.iter().flatten().map(|a| a.len() + 8).sum::<usize>()
            }),
            omem: self.output_bytes(),
            watched: self.watched.len(),
            channels: self.subs.channels.len() + self.subs.shard.len(),
            patterns: self.subs.patterns.len(),
            prefixes: self.tracking.prefixes,
        }
    }

    /// The type CLIENT LIST/KILL TYPE filters on.
    pub fn kind(&self) -> &'static str {
        let cl = self;
        if cl.monitor || cl.peer.replica {
            "replica"
        } else if cl.peer.master {
            "master"
        } else if cl.subs.any() {
            "pubsub"
        } else {
            "normal"
        }
    }
}

/// Client names may not contain spaces or newlines.
pub fn validate_client_name(n: &[u8]) -> crate::core::error::CmdResult {
    if n.iter().any(|&b| !(b'!'..=b'~').contains(&b)) {
        return Err(crate::core::error::Error::other(
            "ERR Client names cannot contain spaces, newlines or special characters.",
        ));
    }
    Ok(())
}
