//! What changing an option does to the server state, in one place: each
//! option with side effects names its [`Hook`] in the table of typed values
//! (values.rs); CONFIG SET runs it with [`State::apply`] after storing the
//! value, and [`State::apply_all`] runs every hook that cannot fail at
//! start-up and after a failed CONFIG SET restored the old values.
//!
//! Effects that belong to the layers above the state (listening sockets,
//! starting the AOF with a rewrite) are returned as a [`Followup`] that
//! CONFIG SET carries out once every value is in place.

use crate::state::{State, Tuning};
use bytes::Bytes;

use crate::core::config::{Followup, Hook};

impl State {
    /// Runs the hook of an option whose new value was just stored. An error
    /// refuses the value (CONFIG SET then restores all).
    pub fn apply(&mut self, hook: Option<Hook>) -> Result<Option<Followup>, String> {
        let Some(hook) = hook else {
            return Ok(None);
        };
        match hook {
            Hook::Tune => self.retune(),
            Hook::Listen => return Ok(Some(Followup::Listen)),
            Hook::FdLimit => {
                raise_fd_limit(self.cfg.maxclients)?;
                self.retune();
            }
            Hook::Dir => {
                let dir = self.cfg.dir.clone();
                std::env::set_current_dir(&dir).map_err(|e| e.to_string())?;
                let abs = std::env::current_dir()
                    .map(|p| p.display().to_string())
                    .unwrap_or(dir);
                self.cfg.set("dir", &abs)?;
            }
            Hook::Memory => self.memory.configure(&self.cfg),
            Hook::Eviction => {
                self.apply_lfu();
                self.memory.configure(&self.cfg);
            }
            Hook::Lfu => self.apply_lfu(),
            Hook::Slowlog => {
                self.retune();
                self.slowlog.truncate(self.tun.slowlog_max_len);
            }
            Hook::AofFsync => self.apply_fsync(),
            Hook::Appendonly => return Ok(Some(Followup::Appendonly)),
            Hook::Oom => self.apply_oom()?,
            Hook::Crash => self.apply_crash(),
            Hook::ReplBacklog => {
                self.retune();
                self.repl.resize_backlog(self.cfg.repl_backlog_size);
            }
            Hook::Tls => return Ok(Some(Followup::Tls)),
            Hook::AofGc if !self.cfg.aof_disable_auto_gc => {
                crate::state::aof::collect_history(self)
            }
            Hook::AofGc => {}
            Hook::Loglevel => crate::core::log::set_level(self.cfg.loglevel),
        }
        Ok(None)
    }

    /// Builds the TLS contexts from the options: the clients' and, under
    /// `tls-cluster`, the bus's; on an error (the line Redis logs) nothing
    /// changes.
    pub fn build_tls(&mut self) -> Result<(), String> {
        let ctx = crate::core::tls::contexts(&self.cfg)?;
        crate::state::cluster::set_tls(self, &ctx)?;
        self.tls.set(Some(ctx));
        Ok(())
    }

    /// The cron's rate: `hz`, doubled with `dynamic-hz` while there are more
    /// than 200 clients per tick, up to 500 (INFO's `hz`), as Redis.
    pub fn hz(&self) -> i64 {
        let mut hz = self.cfg.hz.max(1);
        while self.cfg.dynamic_hz && self.clients.len() as i64 / hz > 200 && hz < 500 {
            hz = (hz * 2).min(500);
        }
        hz
    }

    /// Every hook that cannot fail, from the current values.
    pub fn apply_all(&mut self) {
        self.retune();
        self.apply_lfu();
        self.memory.configure(&self.cfg);
        self.slowlog.truncate(self.tun.slowlog_max_len);
        self.apply_fsync();
        if let Err(e) = self.apply_oom() {
            tracing::warn!("{e}");
        }
        self.apply_crash();
        crate::core::log::set_level(self.cfg.loglevel);
    }

    fn apply_crash(&self) {
        let c = &self.cfg;
        crate::core::crash::configure(c.use_exit_on_panic, c.watchdog_period, c.crash_log_enabled);
    }

    fn retune(&mut self) {
        let c = &self.cfg;
        let pass = (!c.requirepass.is_empty()).then(|| c.requirepass.as_bytes());
        if pass != self.tun.requirepass.as_deref() {
            self.acl.set_requirepass(pass);
        }
        storage::quicklist::set_compress_depth(c.list_compress_depth as usize);
        self.tun = Tuning {
            requirepass: (!c.requirepass.is_empty())
                .then(|| Bytes::copy_from_slice(c.requirepass.as_bytes())),
            max_bulk: c.proto_max_bulk_len,
            notify_flags: c.notify_keyspace_events.0,
            maxclients: c.maxclients as usize,
            timeout_s: c.timeout,
            qbuf_limit: c.client_query_buffer_limit as usize,
            tcp_keepalive: c.tcp_keepalive,
            slowlog_slower_than: c.slowlog_log_slower_than,
            slowlog_max_len: c.slowlog_max_len as usize,
            protected_mode: c.protected_mode,
            hash_limits: storage::HashLimits {
                max_listpack_entries: c.hash_max_listpack_entries as usize,
                max_listpack_value: c.hash_max_listpack_value as usize,
            },
            zset_limits: storage::ZsetLimits {
                max_listpack_entries: c.zset_max_listpack_entries as usize,
                max_listpack_value: c.zset_max_listpack_value as usize,
            },
            list_fill: c.list_max_listpack_size as i32,
            set_max_intset: c.set_max_intset_entries as usize,
            obuf_limits: crate::state::repl::replica_limit_floor(
                crate::state::pubsub::parse_limits(&c.client_output_buffer_limit),
                c.repl_backlog_size,
            ),
            latency_tracking: c.latency_tracking,
        };
    }

    /// Accesses keep the LFU counter only under an LFU policy (OBJECT FREQ).
    fn apply_lfu(&mut self) {
        let lfu = self.cfg.maxmemory_policy.lfu();
        let log_factor = self.cfg.lfu_log_factor.clamp(0, u32::MAX as i64) as u32;
        let decay_time = self.cfg.lfu_decay_time.clamp(0, u32::MAX as i64) as u32;
        for db in &mut self.shard.dbs {
            db.lfu.enabled = lfu;
            db.lfu.log_factor = log_factor;
            db.lfu.decay_time = decay_time;
        }
    }

    /// Sets the OOM score for the current settings and role.
    pub fn apply_oom(&mut self) -> Result<(), String> {
        let (mode, values) = (self.cfg.oom_score_adj, &self.cfg.oom_score_adj_values);
        self.oom.apply(mode, values, self.repl.master.is_some())
    }

    fn apply_fsync(&mut self) {
        self.aof.policy = self.cfg.appendfsync;
        self.aof.timestamps = self.cfg.aof_timestamp_enabled;
        crate::state::aof::sync_policy(self);
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
