//! The typed values the server reads: one field per option, derived from
//! the option's canonical text each time it is stored (see `Config::store`),
//! and the hook its change runs (see `apply`).

use super::events::notify_flags;
use super::hooks::Hook;

/// Parses an option's canonical text (already validated by `Config::check`).
trait FromCanon {
    fn from_canon(s: &str) -> Self;
}

impl FromCanon for String {
    fn from_canon(s: &str) -> Self {
        s.to_string()
    }
}

impl FromCanon for bool {
    fn from_canon(s: &str) -> Self {
        s == "yes"
    }
}

impl FromCanon for i64 {
    fn from_canon(s: &str) -> Self {
        s.parse().unwrap_or(0)
    }
}

impl FromCanon for u64 {
    fn from_canon(s: &str) -> Self {
        s.parse().unwrap_or(0)
    }
}

/// `maxmemory-clients`.
impl FromCanon for crate::core::clientmem::Limit {
    fn from_canon(s: &str) -> Self {
        Self::parse(s)
    }
}

/// A list of words (`bind`).
impl FromCanon for Vec<String> {
    fn from_canon(s: &str) -> Self {
        s.split_whitespace().map(String::from).collect()
    }
}

/// Integers (`oom-score-adj-values`).
impl FromCanon for Vec<i64> {
    fn from_canon(s: &str) -> Self {
        s.split_whitespace()
            .filter_map(|p| p.parse().ok())
            .collect()
    }
}

/// Numbers (`latency-tracking-info-percentiles`).
impl FromCanon for Vec<f64> {
    fn from_canon(s: &str) -> Self {
        s.split_whitespace()
            .filter_map(|p| p.parse().ok())
            .collect()
    }
}

/// `save`: (seconds, changes) points.
impl FromCanon for Vec<(i64, u64)> {
    fn from_canon(s: &str) -> Self {
        let w: Vec<&str> = s.split_whitespace().collect();
        w.chunks_exact(2)
            .filter_map(|p| Some((p[0].parse().ok()?, p[1].parse().ok()?)))
            .collect()
    }
}

/// `notify-keyspace-events` as its class bits.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Events(pub u32);

impl FromCanon for Events {
    fn from_canon(s: &str) -> Self {
        Events(notify_flags(s).unwrap_or(0))
    }
}

/// An enum option's choices, each with its text.
macro_rules! choices {
    ($(#[$m:meta])* $name:ident { $($(#[$vm:meta])* $var:ident = $text:literal,)* }) => {
        $(#[$m])*
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
        pub enum $name {
            $($(#[$vm])* $var,)*
        }

        impl $name {
            pub fn name(self) -> &'static str {
                match self {
                    $($name::$var => $text,)*
                }
            }
        }

        impl FromCanon for $name {
            fn from_canon(s: &str) -> Self {
                match s {
                    $($text => $name::$var,)*
                    _ => $name::default(),
                }
            }
        }
    };
}

choices! {
    /// `appendfsync`.
    Fsync {
        Always = "always",
        #[default]
        Everysec = "everysec",
        No = "no",
    }
}

choices! {
    /// `maxmemory-policy`.
    Policy {
        #[default]
        NoEviction = "noeviction",
        AllkeysLru = "allkeys-lru",
        VolatileLru = "volatile-lru",
        AllkeysLfu = "allkeys-lfu",
        VolatileLfu = "volatile-lfu",
        AllkeysRandom = "allkeys-random",
        VolatileRandom = "volatile-random",
        VolatileTtl = "volatile-ttl",
    }
}

impl Policy {
    pub fn lfu(self) -> bool {
        matches!(self, Policy::AllkeysLfu | Policy::VolatileLfu)
    }
    pub fn lru(self) -> bool {
        matches!(self, Policy::AllkeysLru | Policy::VolatileLru)
    }
}

choices! {
    /// `oom-score-adj` (`yes` is `relative`).
    OomMode {
        #[default]
        No = "no",
        Yes = "yes",
        Relative = "relative",
        Absolute = "absolute",
    }
}

choices! {
    /// `loglevel`.
    Loglevel {
        Debug = "debug",
        Verbose = "verbose",
        #[default]
        Notice = "notice",
        Warning = "warning",
    }
}

choices! {
    /// `enable-debug-command`, `enable-protected-configs`: Redis also takes
    /// `local` (connections from loopback only).
    Allow {
        #[default]
        No = "no",
        Yes = "yes",
        Local = "local",
    }
}

impl Allow {
    /// Whether a client (from loopback or a Unix socket: `local`) may.
    pub fn permits(self, local: bool) -> bool {
        self == Allow::Yes || (self == Allow::Local && local)
    }
}

choices! {
    /// `sanitize-dump-payload`: which payloads Redis deep-checks (and
    /// counts in `dump_payload_sanitizations`).
    Sanitize {
        #[default]
        No = "no",
        Yes = "yes",
        Clients = "clients",
    }
}

choices! {
    /// `tls-auth-clients`.
    TlsAuth {
        No = "no",
        #[default]
        Yes = "yes",
        Optional = "optional",
    }
}

/// Declares [`Values`] and the one mapping from option names to its fields
/// and hooks.
macro_rules! values {
    ($($(#[$m:meta])* $field:ident: $ty:ty = $name:literal $(=> $hook:ident)?,)*) => {
        /// The options the server reads, typed.
        #[derive(Clone, Debug, Default)]
        pub struct Values {
            $($(#[$m])* pub $field: $ty,)*
        }

        impl Values {
            /// Every option that has a field (checked against the table by a test).
            #[cfg(test)]
            pub(super) const NAMES: &[&str] = &[$($name),*];

            /// Takes the new canonical value of option `name`; returns the
            /// hook its change needs.
            pub(super) fn assign(&mut self, name: &str, canon: &str) -> Option<Hook> {
                match name {
                    $($name => {
                        self.$field = FromCanon::from_canon(canon);
                        None$(.or(Some(Hook::$hook)))?
                    })*
                    _ => None,
                }
            }
        }
    };
}

// `field: type = "option-name" => Hook`: the hook (config/apply.rs) is
// what changing the option does beyond storing it.
values! {
    // Networking and clients.
    port: i64 = "port" => Listen,
    bind: Vec<String> = "bind" => Listen,
    tcp_backlog: i64 = "tcp-backlog",
    tcp_keepalive: i64 = "tcp-keepalive" => Tune,
    unixsocket: String = "unixsocket",
    /// Octal, as written.
    unixsocketperm: String = "unixsocketperm",
    protected_mode: bool = "protected-mode" => Tune,
    requirepass: String = "requirepass" => Tune,
    acllog_max_len: i64 = "acllog-max-len",
    acl_pubsub_default: String = "acl-pubsub-default",
    aclfile: String = "aclfile",
    maxclients: i64 = "maxclients" => FdLimit,
    timeout: i64 = "timeout" => Tune,
    proto_max_bulk_len: i64 = "proto-max-bulk-len" => Tune,
    client_query_buffer_limit: u64 = "client-query-buffer-limit" => Tune,
    client_output_buffer_limit: String = "client-output-buffer-limit" => Tune,
    io_threads: i64 = "io-threads",
    io_threads_do_reads: bool = "io-threads-do-reads",
    socket_mark_id: i64 = "socket-mark-id",
    hz: i64 = "hz",
    activerehashing: bool = "activerehashing",
    active_expire_effort: i64 = "active-expire-effort",
    dynamic_hz: bool = "dynamic-hz",
    tracking_table_max_keys: u64 = "tracking-table-max-keys",
    replica_ignore_maxmemory: bool = "replica-ignore-maxmemory",
    replica_ignore_disk_write_errors: bool = "replica-ignore-disk-write-errors",
    // Process.
    pidfile: String = "pidfile",
    daemonize: bool = "daemonize",
    supervised: String = "supervised",
    enable_module_command: Allow = "enable-module-command",
    loglevel: Loglevel = "loglevel" => Loglevel,
    logfile: String = "logfile",
    disable_thp: bool = "disable-thp",
    server_cpulist: String = "server_cpulist",
    bio_cpulist: String = "bio_cpulist",
    bgsave_cpulist: String = "bgsave_cpulist",
    aof_rewrite_cpulist: String = "aof_rewrite_cpulist",
    always_show_logo: bool = "always-show-logo",
    use_exit_on_panic: bool = "use-exit-on-panic" => Crash,
    watchdog_period: i64 = "watchdog-period" => Crash,
    crash_log_enabled: bool = "crash-log-enabled" => Crash,
    shutdown_timeout: i64 = "shutdown-timeout",
    shutdown_on_sigint: String = "shutdown-on-sigint",
    shutdown_on_sigterm: String = "shutdown-on-sigterm",
    enable_debug_command: Allow = "enable-debug-command",
    enable_protected_configs: Allow = "enable-protected-configs",
    databases: i64 = "databases",
    busy_reply_threshold: i64 = "busy-reply-threshold",
    repl_backlog_size: i64 = "repl-backlog-size" => ReplBacklog,
    repl_ping_replica_period: i64 = "repl-ping-replica-period",
    repl_backlog_ttl: i64 = "repl-backlog-ttl",
    repl_timeout: i64 = "repl-timeout",
    repl_disable_tcp_nodelay: bool = "repl-disable-tcp-nodelay",
    repl_diskless_sync: bool = "repl-diskless-sync",
    repl_diskless_sync_delay: i64 = "repl-diskless-sync-delay",
    repl_diskless_sync_max_replicas: i64 = "repl-diskless-sync-max-replicas",
    repl_diskless_load: String = "repl-diskless-load",
    replica_read_only: bool = "replica-read-only",
    /// ignore, panic or panic-on-replicas: what an error from a command of
    /// the master (or of the AOF being loaded) does.
    propagation_error_behavior: String = "propagation-error-behavior",
    replica_priority: i64 = "replica-priority",
    replica_announce_ip: String = "replica-announce-ip",
    replica_announce_port: i64 = "replica-announce-port",
    replica_announced: bool = "replica-announced",
    replica_serve_stale_data: bool = "replica-serve-stale-data",
    masterauth: String = "masterauth",
    masteruser: String = "masteruser",
    /// The source address of the link to the master (best effort).
    bind_source_addr: String = "bind-source-addr",
    replicaof: String = "replicaof",
    min_replicas_to_write: i64 = "min-replicas-to-write",
    min_replicas_max_lag: i64 = "min-replicas-max-lag",
    // Encodings.
    hash_max_listpack_entries: i64 = "hash-max-listpack-entries" => Tune,
    hash_max_listpack_value: i64 = "hash-max-listpack-value" => Tune,
    zset_max_listpack_entries: i64 = "zset-max-listpack-entries" => Tune,
    zset_max_listpack_value: i64 = "zset-max-listpack-value" => Tune,
    list_max_listpack_size: i64 = "list-max-listpack-size" => Tune,
    list_compress_depth: i64 = "list-compress-depth" => Tune,
    set_max_intset_entries: i64 = "set-max-intset-entries" => Tune,
    stream_node_max_bytes: i64 = "stream-node-max-bytes",
    stream_node_max_entries: i64 = "stream-node-max-entries",
    hll_sparse_max_bytes: u64 = "hll-sparse-max-bytes",
    // Memory and eviction.
    maxmemory: u64 = "maxmemory" => Memory,
    maxmemory_policy: Policy = "maxmemory-policy" => Eviction,
    maxmemory_samples: i64 = "maxmemory-samples" => Memory,
    maxmemory_eviction_tenacity: i64 = "maxmemory-eviction-tenacity" => Memory,
    maxmemory_clients: crate::core::clientmem::Limit = "maxmemory-clients",
    lfu_log_factor: i64 = "lfu-log-factor" => Lfu,
    lfu_decay_time: i64 = "lfu-decay-time" => Lfu,
    lazyfree_lazy_user_del: bool = "lazyfree-lazy-user-del",
    lazyfree_lazy_server_del: bool = "lazyfree-lazy-server-del",
    lazyfree_lazy_expire: bool = "lazyfree-lazy-expire",
    lazyfree_lazy_user_flush: bool = "lazyfree-lazy-user-flush",
    lazyfree_lazy_eviction: bool = "lazyfree-lazy-eviction",
    replica_lazy_flush: bool = "replica-lazy-flush",
    rdb_del_sync_files: bool = "rdb-del-sync-files",
    // Monitoring.
    notify_keyspace_events: Events = "notify-keyspace-events" => Tune,
    slowlog_log_slower_than: i64 = "slowlog-log-slower-than" => Tune,
    slowlog_max_len: i64 = "slowlog-max-len" => Slowlog,
    latency_monitor_threshold: i64 = "latency-monitor-threshold" => Memory,
    latency_tracking: bool = "latency-tracking" => Tune,
    latency_tracking_info_percentiles: Vec<f64> = "latency-tracking-info-percentiles",
    // Persistence.
    dir: String = "dir" => Dir,
    dbfilename: String = "dbfilename",
    save: Vec<(i64, u64)> = "save",
    rdbcompression: bool = "rdbcompression",
    rdb_save_incremental_fsync: bool = "rdb-save-incremental-fsync",
    aof_rewrite_incremental_fsync: bool = "aof-rewrite-incremental-fsync",
    rdbchecksum: bool = "rdbchecksum",
    sanitize_dump_payload: Sanitize = "sanitize-dump-payload",
    stop_writes_on_bgsave_error: bool = "stop-writes-on-bgsave-error",
    appendonly: bool = "appendonly" => Appendonly,
    appendfilename: String = "appendfilename",
    appenddirname: String = "appenddirname",
    appendfsync: Fsync = "appendfsync" => AofFsync,
    no_appendfsync_on_rewrite: bool = "no-appendfsync-on-rewrite" => AofFsync,
    auto_aof_rewrite_percentage: i64 = "auto-aof-rewrite-percentage",
    auto_aof_rewrite_min_size: i64 = "auto-aof-rewrite-min-size",
    aof_load_truncated: bool = "aof-load-truncated",
    aof_timestamp_enabled: bool = "aof-timestamp-enabled" => AofFsync,
    aof_use_rdb_preamble: bool = "aof-use-rdb-preamble",
    aof_disable_auto_gc: bool = "aof-disable-auto-gc" => AofGc,
    oom_score_adj: OomMode = "oom-score-adj" => Oom,
    oom_score_adj_values: Vec<i64> = "oom-score-adj-values" => Oom,
    // Test-only delays (microseconds; a negative value sleeps 1 µs once per
    // that many keys) and how often loading lets clients in.
    rdb_key_save_delay: i64 = "rdb-key-save-delay",
    key_load_delay: i64 = "key-load-delay",
    loading_process_events_interval_bytes: i64 = "loading-process-events-interval-bytes",
    // TLS (see `tls`): the context is built anew once a CONFIG SET stored them all.
    tls_port: i64 = "tls-port" => Listen,
    tls_cert_file: String = "tls-cert-file" => Tls,
    tls_key_file: String = "tls-key-file" => Tls,
    tls_key_file_pass: String = "tls-key-file-pass" => Tls,
    tls_client_cert_file: String = "tls-client-cert-file" => Tls,
    tls_client_key_file: String = "tls-client-key-file" => Tls,
    tls_client_key_file_pass: String = "tls-client-key-file-pass" => Tls,
    tls_dh_params_file: String = "tls-dh-params-file" => Tls,
    tls_ca_cert_file: String = "tls-ca-cert-file" => Tls,
    tls_ca_cert_dir: String = "tls-ca-cert-dir" => Tls,
    tls_auth_clients: TlsAuth = "tls-auth-clients" => Tls,
    tls_protocols: String = "tls-protocols" => Tls,
    tls_ciphers: String = "tls-ciphers" => Tls,
    tls_ciphersuites: String = "tls-ciphersuites" => Tls,
    tls_prefer_server_ciphers: bool = "tls-prefer-server-ciphers" => Tls,
    tls_session_caching: bool = "tls-session-caching" => Tls,
    tls_session_cache_size: i64 = "tls-session-cache-size" => Tls,
    tls_session_cache_timeout: i64 = "tls-session-cache-timeout" => Tls,
    tls_replication: bool = "tls-replication" => Tls,
    tls_cluster: bool = "tls-cluster" => Tls,
    // Cluster mode (`core::cluster`, `state::cluster`).
    cluster_enabled: bool = "cluster-enabled",
    cluster_config_file: String = "cluster-config-file",
    cluster_node_timeout: i64 = "cluster-node-timeout",
    cluster_port: i64 = "cluster-port",
    cluster_announce_ip: String = "cluster-announce-ip",
    cluster_announce_port: i64 = "cluster-announce-port",
    cluster_announce_tls_port: i64 = "cluster-announce-tls-port",
    cluster_announce_bus_port: i64 = "cluster-announce-bus-port",
    cluster_announce_hostname: String = "cluster-announce-hostname",
    cluster_preferred_endpoint_type: String = "cluster-preferred-endpoint-type",
    cluster_require_full_coverage: bool = "cluster-require-full-coverage",
    cluster_allow_reads_when_down: bool = "cluster-allow-reads-when-down",
    cluster_allow_pubsubshard_when_down: bool = "cluster-allow-pubsubshard-when-down",
    cluster_replica_validity_factor: i64 = "cluster-replica-validity-factor",
    cluster_migration_barrier: i64 = "cluster-migration-barrier",
    cluster_allow_replica_migration: bool = "cluster-allow-replica-migration",
    cluster_replica_no_failover: bool = "cluster-replica-no-failover",
    cluster_link_sendbuf_limit: u64 = "cluster-link-sendbuf-limit",
}
