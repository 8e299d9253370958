//! Server state shared by all connections, behind one mutex.
//!
//! Every command runs with the [`State`] lock held, which makes each command
//! (and later each MULTI/EXEC block and script) atomic across all keys. The
//! lock is taken once per batch of pipelined commands from one client;
//! socket I/O and RESP decoding happen outside it.
//!
//! Clients live in `State::clients` so that any command can see or act on
//! any client (CLIENT LIST/KILL, PUBLISH, unblocking). The connection task
//! that is executing takes its own `Client` out of the map for the batch and
//! puts it back afterwards.

pub mod acl;
pub mod aof;
pub mod apply;
pub mod blocked;
pub mod evict;
pub mod failover;
pub mod keyspace;
pub mod lazyfree;
pub mod master_link;
pub mod persist;
pub mod pubsub;
pub mod repl;
pub mod repl_cron;
pub mod role;
pub mod script_flags;
pub mod shutdown;
pub mod tracking;
pub mod watch;

use crate::core::clock::{now_ms, now_us, random_hex40};
use crate::core::config::Config;
use crate::core::propagate::{Consumer, Mark};
use ahash::AHashMap as HashMap;
use bytes::{Bytes, BytesMut};
use parking_lot::Mutex;
use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;
use std::time::Instant;
use storage::Db;
use tokio::sync::Notify;

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
            killed: false,
            monitor: false,
            pending: BytesMut::new(),
            wake: Arc::new(crate::core::wake::Wake::new()),
            qbuf: 0,
            qbuf_alloc: 0,
            argv_pending: 0,
            rbuf: crate::core::replybuf::ReplyBufSize::new(now),
            blocked: None,
            deny_blocking: false,
            unix: false,
            paused: false,
            multi: None,
            multi_error: false,
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

#[derive(Default, Clone)]
pub struct CmdStat {
    pub calls: u64,
    pub usec: u64,
    pub rejected: u64,
    pub failed: u64,
    /// Durations in ns (`latency-tracking`), as Redis's per-command
    /// histogram: 1 ns to 1 s, two significant digits.
    pub latency: Option<Box<hdrhistogram::Histogram<u64>>>,
}

impl Stats {
    /// The statistics of the command in `slot` (`Command::slot`).
    pub fn cmd_mut(&mut self, slot: usize) -> &mut CmdStat {
        if slot >= self.cmd.len() {
            self.cmd.resize_with(slot + 1, CmdStat::default);
        }
        &mut self.cmd[slot]
    }
}

/// Adds a call of `dur` microseconds to the command's latency histogram.
pub fn record_latency(stat: &mut CmdStat, dur: u64) {
    // Auto-resizing: the buckets (8 bytes each, written when made) reach
    // only as high as the command's slowest call, as they are made (not a
    // fixed 24 KB a command up to the 1 s cap).
    let h = stat
        .latency
        .get_or_insert_with(|| Box::new(hdrhistogram::Histogram::new(2).expect("sigfig")));
    // `record` grows the buckets; `saturating_record` would clamp to them.
    let ns = (dur * 1000).clamp(1, 1_000_000_000);
    if h.record(ns).is_err() {
        h.saturating_record(ns);
    }
}

#[derive(Default)]
pub struct Stats {
    pub total_connections: u64,
    /// Snapshot jobs started (BGSAVE, AOF rewrites, full syncs): what
    /// Redis counts as its forks.
    pub total_forks: u64,
    pub rejected_connections: u64,
    pub total_commands: u64,
    pub net_input_bytes: u64,
    pub net_output_bytes: u64,
    /// The replication stream (not the RDB, as Redis 7.0): read from the
    /// master, written to replicas. Left out of the two above.
    pub net_repl_input_bytes: u64,
    pub net_repl_output_bytes: u64,
    pub expired_keys: u64,
    pub expired_stale_perc: f64,
    pub expire_cycle_cpu_ms: u64,
    /// Active expiry cycles that stopped at their time budget.
    pub expired_time_cap_reached: u64,
    pub evicted_keys: u64,
    pub evicted_clients: u64,
    pub keyspace_hits: u64,
    pub keyspace_misses: u64,
    pub total_error_replies: u64,
    pub unexpected_error_replies: u64,
    /// By `Command::slot`, grown as commands are first counted.
    pub cmd: Vec<CmdStat>,
    pub errors: BTreeMap<String, u64>,
    /// Samples of the counters for the instantaneous_* fields, taken by
    /// the cron.
    pub samples: VecDeque<Sample>,
}

/// The counters behind the instantaneous_* fields at one moment.
pub struct Sample {
    pub ms: i64,
    pub commands: u64,
    pub input: u64,
    pub output: u64,
    pub repl_input: u64,
    pub repl_output: u64,
}

pub struct SlowEntry {
    pub id: u64,
    pub time: i64,
    pub duration_us: i64,
    pub args: Vec<Bytes>,
    pub addr: String,
    pub name: Bytes,
}

#[derive(Clone, Copy)]
pub struct Pause {
    pub until_ms: i64,
    /// Only write commands wait (CLIENT PAUSE … WRITE).
    pub writes_only: bool,
}

/// Values read on hot paths in the form their readers want, refreshed from
/// `cfg` by the options' `Hook::Tune` (config/apply.rs).
#[derive(Default)]
pub struct Tuning {
    pub requirepass: Option<Bytes>,
    pub max_bulk: i64,
    pub notify_flags: u32,
    pub maxclients: usize,
    pub timeout_s: i64,
    pub slowlog_slower_than: i64,
    pub slowlog_max_len: usize,
    pub protected_mode: bool,
    pub hash_limits: storage::HashLimits,
    pub zset_limits: storage::ZsetLimits,
    /// `list-max-listpack-size`: entries per node if positive, a byte limit
    /// class if negative.
    pub list_fill: i32,
    pub set_max_intset: usize,
    pub obuf_limits: crate::state::pubsub::ObufLimits,
    pub latency_tracking: bool,
}

/// `State::relisten`: (state, the TCP listeners, the TLS ones).
pub type Relisten = fn(&mut State, bool, bool) -> std::io::Result<()>;

pub struct State {
    pub dbs: Vec<Db>,
    pub cfg: Config,
    pub tun: Tuning,
    pub stats: Stats,
    /// A connection takes its client out for each batch and puts it back:
    /// boxed, that moves a pointer instead of the whole struct; hashed, not
    /// a B-tree, it costs ~60 instructions instead of ~430 per request.
    /// What lists clients in id order sorts them (CLIENT LIST).
    pub clients: HashMap<u64, Box<Client>>,
    pub next_client_id: u64,
    /// Changes since the last save (`rdb_changes_since_last_save`).
    pub dirty: u64,
    pub lastsave: i64,
    pub started: Instant,
    pub start_ms: i64,
    /// A monotonic moment (µs since `started`) and the wall-clock µs then:
    /// commands derive their wall time from the tick they read anyway,
    /// saving a clock read per command. The cron re-reads the wall clock.
    /// In µs, as two floored ms parts ran 1 ms behind the clock (PTTL after
    /// GETEX PXAT now+10000 answered 10001).
    pub clock_base: (u64, i64),
    /// When the last command ended (or the running batch started); set
    /// with [`State::tick`].
    pub last_tick: Instant,
    /// `last_tick` in µs since `started`: a command's duration and wall
    /// time are differences of these, one clock conversion per tick.
    pub tick_us: u64,
    /// The accept loops, replaced when CONFIG SET changes port or bind.
    /// Each with whether it serves `tls-port`.
    pub accept_tasks: Vec<(tokio::task::AbortHandle, bool, std::os::fd::RawFd)>,
    /// Set by the server once it listens: replaces the listeners with ones
    /// on the configured `port` and `bind` (CONFIG SET): the TCP ones, the
    /// TLS ones (`tls-port`), or both.
    pub relisten: Option<Relisten>,
    /// The state's owner, for commands that start tasks (rebinding).
    pub shared: std::sync::Weak<Shared>,
    /// The TLS context the `tls-port` listeners hand new connections.
    pub tls: Arc<crate::core::tls::Current>,
    pub run_id: String,
    pub slowlog: VecDeque<SlowEntry>,
    pub slowlog_next_id: u64,
    pub pause: Option<Pause>,
    /// Active expiry can be switched off by DEBUG SET-ACTIVE-EXPIRE.
    pub active_expire: bool,
    /// DEBUG REPLYBUFFER: how long a reply buffer's peak counts (-1:
    /// always), and whether the cron resizes buffers at all.
    pub rbuf_peak_reset_ms: i64,
    pub rbuf_resizing: bool,
    /// DEBUG PAUSE-CRON: the cron does nothing.
    pub cron_paused: bool,
    /// Set once a shutdown has done its checks and final save: the
    /// server exits.
    pub shutdown: Option<ShutdownRequest>,
    /// A shutdown waiting for lagging replicas (see `shutdown`).
    pub shutdown_wait: Option<ShutdownWait>,
    pub tcp_port: u16,
    pub executable: String,
    /// Clients in MONITOR mode, so the common case skips the feed at once.
    pub monitors: usize,
    /// Blocked client ids per (db, key), first come first served.
    pub blocking: HashMap<(usize, Bytes), VecDeque<u64>>,
    /// Keys with blocked clients that a command may have made servable.
    pub ready_keys: Vec<(usize, Bytes)>,
    /// WATCHed keys and the clients watching them.
    pub watched: HashMap<(usize, Bytes), Vec<u64>>,
    /// A key watched by the running client changed (see `touch_watched`).
    pub dirty_cas_running: bool,
    /// The running command wrote an error reply while succeeding (a
    /// script's reply holding errors): it counts as failed.
    pub failed_reply: bool,
    /// Connections woken with output others' commands produced for them
    /// (pub/sub messages, MONITOR lines, served blocked clients).
    pub woken: u64,
    /// Woken by SHUTDOWN; the main task waits on it and exits.
    pub shutdown_notify: Arc<Notify>,
    /// The replication ID INFO shows (DEBUG CHANGE-REPL-ID renews it).
    pub replid: String,
    /// Highest memory use INFO has seen, and the use at start-up.
    pub peak_memory: u64,
    pub startup_memory: u64,
    /// The Lua interpreter, created on first use; taken out while a
    /// script runs.
    pub engine: Option<scripting::Engine>,
    /// MIGRATE's cached connections.
    pub migrate: crate::core::migrate::Links,
    pub oom: crate::core::oom::OomScore,
    /// DEBUG SET-SKIP-CHECKSUM-VALIDATION: DUMP payloads and RDB files
    /// load without their CRC checked.
    pub skip_checksum_validation: bool,
    /// The running script's state, shared with connection tasks (`Shared::script`).
    pub script_run: Arc<scripting::RunFlags>,
    /// What connections hand to a running script's thread (`Shared::busy`).
    pub busy: Arc<parking_lot::Mutex<BusyQueue>>,
    /// DEBUG SET-DISABLE-DENY-SCRIPTS: scripts may call NOSCRIPT commands.
    pub scripts_may_call_any: bool,
    /// Pub/Sub subscriptions of all clients (see `pubsub`).
    pub pubsub: crate::state::pubsub::PubSub,
    /// The append-only file (see `aof`).
    pub aof: crate::state::aof::Aof,
    /// What commands propagate, on its way to the AOF (see `propagate`).
    pub prop: crate::core::propagate::Stream,
    /// maxmemory eviction settings and pool, latency monitor (see `evict`).
    pub memory: crate::state::evict::Memory,
    /// RDB status and the running BGSAVE (see `persist`).
    pub rdb: crate::state::persist::RdbState,
    /// The dataset is being loaded at start-up: commands without the
    /// `loading` flag are refused.
    pub loading: Option<crate::state::persist::Loading>,
    /// Client-side caching (see `tracking`).
    pub tracking: crate::state::tracking::Tracking,
    /// The replication stream and the replicas (see `repl`).
    pub repl: crate::state::repl::Repl,
    /// A writable replica's own keys with a TTL (see `replica`).
    pub replica_keys_with_expire: storage::Dict<u64>,
    /// ACL users and log (see `acl`).
    pub acl: crate::core::acl::Acl,
}

#[derive(Debug, Clone, Copy)]
pub struct ShutdownRequest;

/// How a shutdown was asked for: SHUTDOWN's options, or
/// `shutdown-on-sigterm`/`shutdown-on-sigint` for a signal.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ShutdownFlags {
    /// SAVE (`Some(true)`) or NOSAVE (`Some(false)`); else saves when
    /// save points are configured.
    pub save: Option<bool>,
    /// NOW: does not wait for lagging replicas.
    pub now: bool,
    /// FORCE: exits even when the checks or the final save fail.
    pub force: bool,
}

/// A shutdown waiting, with writes paused, until every replica has
/// acknowledged the whole stream or `shutdown-timeout` has passed.
pub struct ShutdownWait {
    pub flags: ShutdownFlags,
    pub deadline_ms: i64,
    /// The CLIENT PAUSE the wait replaced, restored if it is cancelled.
    pub paused_before: Option<Pause>,
}

impl State {
    pub fn new(cfg: Config) -> Self {
        let n = cfg.databases.max(1) as usize;
        let run_id = random_hex40();
        let mut st = State {
            dbs: (0..n).map(|_| Db::default()).collect(),
            cfg,
            tun: Tuning::default(),
            stats: Stats::default(),
            clients: HashMap::default(),
            next_client_id: 1,
            dirty: 0,
            lastsave: now_ms() / 1000,
            started: Instant::now(),
            start_ms: now_ms(),
            clock_base: (0, now_us()),
            last_tick: Instant::now(),
            tick_us: 0,
            accept_tasks: Vec::new(),
            relisten: None,
            shared: std::sync::Weak::new(),
            tls: Arc::default(),
            run_id,
            slowlog: VecDeque::new(),
            slowlog_next_id: 0,
            pause: None,
            active_expire: true,
            rbuf_peak_reset_ms: crate::core::replybuf::DEFAULT_PEAK_RESET_MS,
            rbuf_resizing: true,
            cron_paused: false,
            shutdown: None,
            shutdown_wait: None,
            tcp_port: 0,
            monitors: 0,
            blocking: HashMap::new(),
            ready_keys: Vec::new(),
            watched: HashMap::new(),
            dirty_cas_running: false,
            failed_reply: false,
            woken: 0,
            executable: std::env::current_exe()
                .map(|p| p.display().to_string())
                .unwrap_or_default(),
            shutdown_notify: Arc::new(Notify::new()),
            replid: random_hex40(),
            peak_memory: 0,
            startup_memory: crate::state::evict::used_memory(),
            engine: None,
            migrate: Default::default(),
            oom: Default::default(),
            skip_checksum_validation: false,
            script_run: Arc::default(),
            busy: Arc::default(),
            scripts_may_call_any: false,
            pubsub: Default::default(),
            aof: Default::default(),
            prop: Default::default(),
            memory: Default::default(),
            rdb: Default::default(),
            loading: None,
            tracking: Default::default(),
            repl: Default::default(),
            replica_keys_with_expire: storage::Dict::new(),
            acl: Default::default(),
        };
        let _ = st.script_run.nudge.set(hand_off_worker);
        st.apply_all();
        st
    }

    /// The tick: when the running command started, for its clock.
    pub fn tick(&mut self, at: Instant) {
        self.last_tick = at;
        self.tick_us = self.since_start_us(at);
    }

    /// µs from `started` to `at`.
    pub fn since_start_us(&self, at: Instant) -> u64 {
        micros_since(self.started, at)
    }

    /// Wall-clock ms at the last tick.
    pub fn wall_ms(&self) -> i64 {
        let (base, us) = self.clock_base;
        (us + self.tick_us.saturating_sub(base) as i64).div_euclid(1000)
    }

    /// Pins the wall clock: the next command runs at unix time `ms`, and
    /// later ones at `ms` plus the real time since, until the cron
    /// re-reads the clock. For tests (see `testkit`), and for a script's
    /// commands, which all see the run's start: only `clock_base` moves,
    /// so commands pay nothing for it.
    pub fn set_clock(&mut self, ms: i64) {
        self.clock_base = (self.tick_us, ms * 1000);
    }

    /// Deletes a key found expired, with the bookkeeping every deletion by
    /// expiry needs.
    pub fn expired(&mut self, db: usize, key: &[u8]) {
        self.stats.expired_keys += 1;
        if !self.watched.is_empty() {
            self.touch_watched(db, key);
        }
        self.notify(crate::core::config::NOTIFY_CLASSES[6].1, "expired", db, key);
        self.propagate_del(db, key);
        if self.tracking.armed {
            self.invalidate_key(key, 0);
        }
    }

    /// Forgets a disconnected client and every wait it had registered.
    pub fn remove_client(&mut self, id: u64) {
        if let Some(mut c) = self.clients.remove(&id) {
            // Its unsent output goes now (an evicted client's memory is
            // what eviction was for), not when its connection next runs.
            c.spill.close();
            if c.monitor {
                self.monitors -= 1;
            }
            if let Some(b) = c.blocked.take() {
                self.unregister_blocked(id, &b);
            }
            self.unwatch_all(&mut c);
            self.unsubscribe_all(&mut c);
            self.tracking_off(&mut c);
            if c.peer.replica {
                self.repl.forget(id);
                repl_cron::end_unwanted_bgsave(self);
            }
        }
        self.repl.waiters.retain(|w| w.id != id);
    }

    /// CONFIG RESETSTAT: zeroes the counters INFO reports.
    pub fn reset_stats(&mut self) {
        let samples = std::mem::take(&mut self.stats.samples);
        let mut cmd = std::mem::take(&mut self.stats.cmd);
        cmd.fill_with(CmdStat::default);
        self.stats = Stats {
            samples,
            cmd,
            ..Stats::default()
        };
        self.peak_memory = 0;
        self.repl.sync_full = 0;
        self.repl.sync_partial_ok = 0;
        self.repl.sync_partial_err = 0;
    }

    /// An error reply, in INFO errorstats (by its first word) and
    /// `total_error_replies`.
    pub fn count_error(&mut self, msg: &str) {
        let code = msg.split(' ').next().unwrap_or("ERR");
        match self.stats.errors.get_mut(code) {
            Some(n) => *n += 1,
            None => {
                self.stats.errors.insert(code.to_string(), 1);
            }
        }
        self.stats.total_error_replies += 1;
    }

    /// Client eviction: while the evictable clients' memory is past
    /// `maxmemory-clients`, the largest is closed at once (its connection
    /// finds itself gone). Masters, replicas (MONITOR) and CLIENT NO-EVICT
    /// clients are neither evicted nor counted. Runs after each batch and
    /// as a large request arrives; true if it evicted anyone.
    pub fn evict_clients(&mut self) -> bool {
        self.evict_clients_with(None)
    }

    /// Client eviction while `running` (out of `clients` during its batch)
    /// builds its output, as Redis checks before each command, so clients
    /// go before keys are evicted for their memory. True if `running` is
    /// evicted too: its connection removes it.
    pub fn evict_clients_with(&mut self, running: Option<&Client>) -> bool {
        let limit = self.cfg.maxmemory_clients.bytes(self.cfg.maxmemory);
        if limit == 0 {
            return false;
        }
        let evictable = self
            .clients
            .values()
            .map(|c| &**c)
            .chain(running)
            .filter(|c| !c.no_evict && !c.monitor && !c.killed && !c.peer.master)
            .map(|c| (c.usage().total(), c.id))
            .collect();
        let victims = crate::core::clientmem::victims(evictable, limit);
        let now = now_ms();
        let mut hit = false;
        for &id in &victims {
            if let Some(r) = running.filter(|r| r.id == id) {
                tracing::info!("Evicting client: {}", r.line(now, None));
                hit = true;
            } else if let Some(c) = self.clients.get(&id) {
                tracing::info!("Evicting client: {}", c.line(now, None));
                c.wake.notify_one();
            }
            self.stats.evicted_clients += 1;
            self.remove_client(id);
        }
        if running.is_some() {
            hit
        } else {
            !victims.is_empty()
        }
    }

    /// Marks a client killed and wakes its connection so it closes.
    pub fn kill_client(&mut self, id: u64) {
        if let Some(c) = self.clients.get_mut(&id) {
            c.killed = true;
            c.wake.notify_one();
        }
    }
}

/// Called from a script that runs long. The script keeps this thread (and
/// the state lock); the tokio worker role moves to a new thread, which
/// serves the other connections (-BUSY, SCRIPT KILL) meanwhile. With the
/// default single worker nothing else would run until the script ends.
fn hand_off_worker() {
    let Ok(rt) = tokio::runtime::Handle::try_current() else {
        return;
    };
    if rt.runtime_flavor() != tokio::runtime::RuntimeFlavor::MultiThread {
        return;
    }
    tokio::task::block_in_place(move || {
        // Return only once another thread runs tasks: tokio would otherwise
        // hand the worker back to this thread when this closure returns.
        let (tx, rx) = std::sync::mpsc::channel();
        rt.spawn(async move {
            let _ = tx.send(());
        });
        let _ = rx.recv();
    });
}

/// Whole µs from `base` to `at`.
pub fn micros_since(base: Instant, at: Instant) -> u64 {
    at.saturating_duration_since(base).as_micros() as u64
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

/// The propagation stream (`crate::core::propagate`) wired to the server: the
/// dirty counter says whether a command changed data, and the AOF reads
/// the stream, and so does the replication stream (`repl`).
impl State {
    fn consumers(&mut self) -> (&mut crate::core::propagate::Stream, [&mut dyn Consumer; 2]) {
        (&mut self.prop, [&mut self.aof, &mut self.repl])
    }

    /// Whether the stream is read: a handler builds a rewrite only then.
    pub fn propagating(&mut self) -> bool {
        self.aof.wants() || self.repl.wants()
    }

    /// Before a command's handler runs in database `db`.
    pub fn command_start(&mut self, db: usize) -> Mark {
        self.prop.start(self.dirty, db)
    }

    /// After the handler: see `Stream::end`.
    pub fn command_end(&mut self, m: Mark, args: &[Bytes]) {
        let dirty = self.dirty;
        let (prop, mut cs) = self.consumers();
        prop.end(m, dirty, args, &mut cs);
        if self.repl.undelivered() {
            self.repl_deliver();
        }
    }

    /// The running command propagates `op` instead of its arguments.
    pub fn propagate_as(&mut self, op: impl IntoIterator<Item = Bytes>) {
        let wanted = self.propagating();
        self.prop.rewrite(op, wanted);
    }

    /// The running command propagates nothing of its own.
    pub fn no_propagate(&mut self) {
        self.prop.decline();
    }

    /// The running command propagates even if it changed nothing.
    pub fn force_propagate(&mut self) {
        self.prop.force();
    }

    /// The running command propagates to replicas even if it changed
    /// nothing (PUBLISH).
    pub fn force_propagate_repl(&mut self) {
        self.prop.force_repl();
    }

    /// A key the server deleted by itself (expired, evicted), as `DEL`.
    pub fn propagate_del(&mut self, db: usize, key: &[u8]) {
        if self.propagating() {
            let op = vec![Bytes::from_static(b"DEL"), Bytes::copy_from_slice(key)];
            let (prop, mut cs) = self.consumers();
            prop.add(db, op, &mut cs);
            if self.repl.undelivered() {
                self.repl_deliver();
            }
        }
    }
}

/// What connection tasks and the cron share.
pub struct Shared {
    pub state: Mutex<State>,
    /// Notified when SIGTERM or SIGINT asked for a shutdown.
    pub shutdown: Notify,
    /// The same flags as `State::script_run`, read without the lock: while
    /// a script runs past `busy-reply-threshold` the lock stays held and
    /// connections answer -BUSY instead of waiting.
    pub script: Arc<scripting::RunFlags>,
    /// The same queue as `State::busy`: the commands Redis allows while a
    /// script is busy run on the script's thread, which holds the lock.
    pub busy: Arc<parking_lot::Mutex<BusyQueue>>,
}

/// A command a connection hands to the running script's thread, which
/// runs it with the state between two steps of the script.
pub type BusyWork = Box<dyn FnOnce(&mut State) + Send>;

/// Work for the running script's thread; open while a script runs (it
/// takes what is left before it returns the lock).
#[derive(Default)]
pub struct BusyQueue {
    pub open: bool,
    pub work: Vec<BusyWork>,
}

impl Shared {
    pub fn new(st: State) -> Shared {
        Shared {
            script: st.script_run.clone(),
            busy: st.busy.clone(),
            state: Mutex::new(st),
            shutdown: Notify::new(),
        }
    }

    /// The state lock, or `None` once a script has been running past
    /// `busy-reply-threshold` (the script holds the lock meanwhile). Waits
    /// in short blocking slices so a busy script is noticed.
    pub async fn lock_or_busy(&self) -> Option<parking_lot::MutexGuard<'_, State>> {
        use std::sync::atomic::Ordering::Relaxed;
        loop {
            if let Some(g) = self.state.try_lock_for(std::time::Duration::from_millis(2)) {
                return Some(g);
            }
            if self.script.busy.load(Relaxed) {
                return None;
            }
            tokio::time::sleep(std::time::Duration::from_millis(1)).await;
        }
    }

    /// Runs `work` with the state: between two steps of a running script,
    /// on the script's thread (which holds the lock), or with the lock. A
    /// client that leaves or asks what Redis allows while a script is busy
    /// is served meanwhile, as Redis serves events while blocked.
    pub async fn with_state(&self, work: impl FnOnce(&mut State) + Send + 'static) {
        let work = {
            let mut q = self.busy.lock();
            if q.open {
                q.work.push(Box::new(work));
                return;
            }
            work
        };
        work(&mut *self.lock_eventually().await);
    }

    /// The lock, however long a busy script holds it, without blocking the
    /// worker meanwhile (it serves the -BUSY replies).
    pub async fn lock_eventually(&self) -> parking_lot::MutexGuard<'_, State> {
        loop {
            if let Some(g) = self.lock_or_busy().await {
                return g;
            }
            tokio::time::sleep(std::time::Duration::from_millis(1)).await;
        }
    }
}

/// The replication stream (`crate::state::repl`) wired to the clients: what the
/// replicas' connections send.
impl State {
    /// Tells the replicas of the stream's new bytes: each one that holds
    /// the buffer counts them as its output, an online one's connection is
    /// woken to take them (once until it does). A replica whose output
    /// goes past its `client-output-buffer-limit` is closed (see
    /// `repl::replica_limit_floor`).
    pub fn repl_deliver(&mut self) {
        let end = self.repl.offset;
        self.repl.delivered = end;
        let limits = self.tun.obuf_limits;
        for r in self.repl.replicas.iter_mut() {
            let Some(cursor) = r.cursor else {
                continue;
            };
            let Some(cl) = self.clients.get_mut(&r.id) else {
                continue;
            };
            cl.repl_unsent = (end - cursor) as usize;
            if matches!(r.link, crate::state::repl::Link::Online) && !r.woken {
                r.woken = true;
                cl.wake.notify_one();
            }
            if crate::state::pubsub::close_if_over_limit(cl, &limits, 0) {
                cl.wake.notify_one();
            }
        }
    }

    /// The replicas' output, which Redis leaves out of what eviction
    /// weighs (`mem_not_counted_for_evict`): the replication buffer beyond
    /// the backlog's size, and what their connections hold (`pending`'s
    /// room, and what the socket has not taken).
    pub fn not_counted_memory(&self) -> u64 {
        let conns: usize = self
            .repl
            .replicas
            .iter()
            .filter_map(|r| self.clients.get(&r.id))
            .map(|c| c.pending.capacity() + c.unsent())
            .sum();
        (self.repl.replicas_memory() + conns) as u64
    }

    /// What replica `cl`'s connection sends next, into `out`: bytes held
    /// for it, then the next piece of its RDB file (disk-based sync, which
    /// ends online) or, online, the stream after its cursor, up to a write's
    /// worth in `out` (the rest stays in the shared buffer, counted as its
    /// output, and it is woken again for it).
    pub fn repl_pull(&mut self, cl: &mut Client, out: &mut BytesMut) {
        const WRITE: usize = 64 * 1024;
        let Some(r) = self.repl.replicas.iter_mut().find(|r| r.id == cl.id) else {
            return;
        };
        out.extend_from_slice(&std::mem::take(&mut r.held));
        r.woken = false;
        if let crate::state::repl::Link::SendBulk(bulk) = &mut r.link {
            let direct = out.is_empty() && cl.socket_is_next();
            match bulk.next(out, direct.then_some(cl.fd), cl.tls) {
                Ok(true) => {
                    // Woken again for the next piece once this one is
                    // written, which is at once, not at the round's end
                    // (the round's replies do not make it any larger).
                    r.woken = true;
                    cl.wake.notify_one();
                    self.woken += 1;
                }
                Ok(false) => {
                    self.repl_online(cl.id);
                    if cl.peer.rdb_only {
                        cl.close_after_reply = true;
                    }
                    cl.wake.notify_one();
                }
                Err(e) => {
                    tracing::warn!("Read error sending DB to replica: {e}");
                    cl.killed = true;
                    cl.wake.notify_one();
                }
            }
            return;
        }
        // What carried its RDB is not kept (it counts as its memory).
        if cl.pending.is_empty() && cl.pending.capacity() > 16 * 1024 {
            cl.pending = BytesMut::new();
        }
        let (Some(cursor), crate::state::repl::Link::Online) = (r.cursor, &r.link) else {
            return;
        };
        let room = WRITE.saturating_sub(out.len());
        let n = self.repl.copy_stream(cursor, room, out);
        if n == 0 && room > 0 && cursor < self.repl.offset {
            // Only a failed read of the buffer's part on disk copies
            // nothing: the replica cannot be given its stream.
            tracing::warn!("Replication buffer unreadable: dropping the replica");
            cl.killed = true;
            cl.wake.notify_one();
            return;
        }
        self.stats.net_repl_output_bytes += n as u64;
        let end = self.repl.offset;
        let r = self.repl.replica_mut(cl.id).expect("found above");
        r.cursor = Some(cursor + n as u64);
        cl.repl_unsent = (end - cursor) as usize - n;
        if cl.repl_unsent > 0 {
            r.woken = true;
            cl.wake.notify_one();
        }
        if n > 0 {
            self.repl.trim();
        }
    }

    /// Queues `bytes` on replica `id`'s connection.
    pub fn repl_send(&mut self, id: u64, bytes: &[u8]) {
        if let Some(r) = self.repl.replica_mut(id) {
            send_to(&mut self.clients, r, bytes);
        }
    }

    /// Queues a piece of an RDB on the connections of replicas `ids`
    /// (those gone are dropped from the list), unless one of them has more
    /// than `window` bytes unsent: the sender then waits, as the slowest
    /// replica paces a transfer.
    pub fn repl_rdb_push(&mut self, ids: &mut Vec<u64>, piece: &[u8], window: usize) -> RdbPush {
        if !self.rdb_replicas_left(ids) {
            return RdbPush::Gone;
        }
        let unsent = |st: &State, id: u64| {
            let held = st.repl.replicas.iter().find(|r| r.id == id);
            held.map_or(0, |r| r.held.len())
                + st.clients
                    .get(&id)
                    .map_or(0, |c| c.pending.len() + c.unsent())
        };
        if ids.iter().any(|&id| unsent(self, id) > window) {
            return RdbPush::Full;
        }
        for &id in ids.iter() {
            if let Some(r) = self.repl.replica_mut(id) {
                send_piece(&mut self.clients, r, piece);
            }
        }
        RdbPush::Sent
    }

    /// Keeps in `ids` the replicas still connected; false if none is.
    pub fn rdb_replicas_left(&self, ids: &mut Vec<u64>) -> bool {
        ids.retain(|id| {
            self.repl.replicas.iter().any(|r| r.id == *id)
                && self.clients.get(id).is_none_or(|c| !c.killed)
        });
        !ids.is_empty()
    }

    /// A BGSAVE for replicas ended (`file`: the image of a disk-based
    /// sync, opened). Disk-based, the replicas waiting for it get the file
    /// through their connections, then the stream since it started;
    /// diskless, the replicas it streamed to get the stream after their
    /// first ACK. They are dropped if it failed.
    pub fn repl_bgsave_done(&mut self, ok: bool, file: Option<std::fs::File>) {
        if !std::mem::take(&mut self.repl.bgsave_for_replicas) {
            return;
        }
        let diskless = std::mem::take(&mut self.repl.bgsave_diskless);
        let file = file.filter(|_| ok);
        let len = file
            .as_ref()
            .and_then(|f| f.metadata().ok())
            .map(|m| m.len());
        let file = file.map(Arc::new);
        let mut failed = Vec::new();
        for r in self.repl.replicas.iter_mut() {
            if !matches!(r.link, crate::state::repl::Link::WaitBgsaveEnd) {
                continue;
            }
            if diskless && ok {
                tracing::info!(
                    "Streamed RDB transfer with replica {}:{} succeeded (socket). Waiting for REPLCONF ACK from slave to enable streaming",
                    r.ip,
                    r.port
                );
                r.link = crate::state::repl::Link::WaitAck;
                if r.rdb_only {
                    if let Some(cl) = self.clients.get_mut(&r.id) {
                        cl.close_after_reply = true;
                        cl.wake.notify_one();
                    }
                }
                continue;
            }
            let (Some(len), Some(file)) = (len.filter(|_| !diskless), &file) else {
                failed.push(r.id);
                continue;
            };
            r.link = crate::state::repl::Link::SendBulk(crate::state::repl::Bulk {
                file: file.clone(),
                sent: 0,
                len,
            });
            // Its connection sends the file from its next pass.
            send_to(&mut self.clients, r, format!("${len}\r\n").as_bytes());
        }
        for id in failed {
            tracing::warn!("SYNC failed. BGSAVE child returned an error");
            self.kill_client(id);
        }
    }

    /// A replica has its whole RDB: it is online, and gets the stream
    /// since its RDB (`redis-cli --rdb` is closed instead).
    pub fn repl_online(&mut self, id: u64) {
        let now_s = now_ms() / 1000;
        let Some(r) = self.repl.replica_mut(id) else {
            return;
        };
        r.link = crate::state::repl::Link::Online;
        r.ack_time_s = now_s;
        if r.rdb_only {
            if let Some(cl) = self.clients.get_mut(&id) {
                cl.close_after_reply = true;
                cl.wake.notify_one();
            }
            return;
        }
        tracing::info!("Synchronization with replica {}:{} succeeded", r.ip, r.port);
        r.woken = true;
        if let Some(cl) = self.clients.get_mut(&id) {
            cl.wake.notify_one();
        }
    }
}

/// What [`State::repl_rdb_push`] did.
pub enum RdbPush {
    Sent,
    /// A replica has not taken enough of the last pieces yet.
    Full,
    /// No replica is left to send to.
    Gone,
}

/// Bytes of RDB a replica's connection may have unsent before the
/// transfer waits for it: the socket's own buffer keeps the replica busy
/// meanwhile, and what waits here is the sync's memory.
pub const RDB_WINDOW: usize = 16 * 1024;

/// Queues a piece of an RDB transfer on replica `r`'s connection. When
/// nothing waits in its buffers, the piece goes to its socket at once, as
/// a forked child writes it (if the socket is next), and what the socket
/// does not take onto the connection's list; else it queues as other
/// output.
fn send_piece(
    clients: &mut HashMap<u64, Box<Client>>,
    r: &mut crate::state::repl::Replica,
    piece: &[u8],
) {
    match clients.get_mut(&r.id) {
        Some(cl)
            if r.held.is_empty()
                && cl.pending.is_empty()
                && cl.out_unsent.load(std::sync::atomic::Ordering::Relaxed) == 0 =>
        {
            let sent = match cl.socket_is_next() {
                true => crate::core::os::send_nowait(cl.fd, piece),
                false => 0,
            };
            if sent < piece.len() {
                cl.spill.push(bytes::Bytes::copy_from_slice(&piece[sent..]));
                cl.wake.notify_one();
            }
        }
        _ => send_to(clients, r, piece),
    }
}

/// Queues `bytes` on replica `r`'s connection, or holds them while the
/// connection runs (its client is out of the map).
fn send_to(
    clients: &mut HashMap<u64, Box<Client>>,
    r: &mut crate::state::repl::Replica,
    bytes: &[u8],
) {
    match clients.get_mut(&r.id) {
        Some(cl) => {
            if !r.held.is_empty() {
                cl.pending.extend_from_slice(&std::mem::take(&mut r.held));
            }
            cl.pending.extend_from_slice(bytes);
            cl.wake.notify_one();
        }
        None => r.held.extend_from_slice(bytes),
    }
}
