//! The second floor: the server state shared by all connections, behind
//! one mutex, and everything that takes it.
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
pub mod bgsave;
pub mod blocked;
mod client;
pub mod cluster;
pub mod evict;
pub mod failover;
pub mod info;
pub mod keyspace;
pub mod lazyfree;
pub mod master_link;
pub mod persist;
pub mod pubsub;
pub mod repl;
pub mod repl_cron;
mod repl_out;
pub mod role;
pub mod script_flags;
pub mod shard;
pub mod shutdown;
mod stats;
pub mod tracking;
pub mod watch;

pub use client::{validate_client_name, BlockKind, Blocked, Client, LuaDebug, ReplyMode};
pub use repl_out::{RdbPush, RDB_WINDOW};
pub use shard::Shard;
pub use stats::{record_latency, CmdStat, Sample, SlowEntry, Stats};

use crate::core::clock::{now_ms, now_us};
use crate::core::config::Config;
use crate::core::propagate::{Consumer, Mark};
use crate::core::random::random_hex40;
use ahash::AHashMap as HashMap;
use bytes::Bytes;
use parking_lot::Mutex;
use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Instant;
use tokio::sync::Notify;

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
    /// `client-query-buffer-limit`.
    pub qbuf_limit: usize,
    /// `tcp-keepalive` (seconds; 0: off).
    pub tcp_keepalive: i64,
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
    /// The data: what a command's keys live in (see `shard`).
    pub shard: Shard,
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
    /// The client scripts' commands run as, and the buffer their replies
    /// go to: kept between runs, as Redis keeps its one Lua client (a new
    /// client per run, with its wake and spill handles, was ~1,000
    /// instructions of every EVAL); taken out while a script runs.
    pub script_client: Option<(Box<Client>, protocol::ReplyBuf)>,
    /// MIGRATE's cached connections.
    pub migrate: crate::core::migrate::Links,
    /// This node in its cluster (`cluster-enabled yes`).
    pub cluster: Option<Box<cluster::Mode>>,
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
            shard: Shard::new(n),
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
            script_client: None,
            migrate: Default::default(),
            cluster: None,
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

    /// The bookkeeping of a key that expired, once deleted.
    pub fn expired(&mut self, db: usize, key: &[u8]) {
        self.stats.expired_keys += 1;
        self.server_deleted(db, key, crate::core::config::class::EXPIRED, "expired");
    }

    /// What follows a key the server deleted by itself (expired, evicted):
    /// its watchers dirty, its keyspace event, a DEL in the stream, and its
    /// tracking invalidation: one path for both causes, as Redis's
    /// `deleteExpiredKeyAndPropagate` and eviction share theirs.
    pub fn server_deleted(&mut self, db: usize, key: &[u8], class: u32, event: &str) {
        if !self.shard.watched.is_empty() {
            self.touch_watched(db, key);
        }
        self.notify(class, event, db, key);
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
        // A load running meanwhile goes on counting into the same one.
        let sanitizations = std::mem::take(&mut self.stats.sanitizations);
        sanitizations.store(0, std::sync::atomic::Ordering::Relaxed);
        self.stats = Stats {
            samples,
            cmd,
            sanitizations,
            ..Stats::default()
        };
        self.peak_memory = 0;
        crate::core::netstat::reset();
        (self.shard.hits, self.shard.misses) = (0, 0);
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
            // The link to the master is down from now, though its task
            // notices only when it next runs (after a DEBUG SLEEP, say).
            let link = self.repl.master.as_mut();
            if let Some(m) =
                link.filter(|m| c.peer.master && m.state == repl::MasterState::Connected)
            {
                m.state = repl::MasterState::Connect;
                m.down_since_s = crate::core::clock::now_ms() / 1000;
            }
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
