//! What changing an option does beyond storing it: the hook an option
//! names in the table of typed values, and the follow-up a hook leaves to
//! its caller. The hooks themselves run in `state::apply`.

/// What changing an option does beyond storing it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hook {
    /// A value cached in `State::tun`.
    Tune,
    /// `port`, `bind`, `tls-port`: new listeners.
    Listen,
    /// `maxclients`: enough file descriptors, or the value is refused.
    FdLimit,
    /// `dir`: the working directory, kept absolute.
    Dir,
    /// An eviction setting (`evict::Memory`).
    Memory,
    /// `maxmemory-policy`: eviction, and whether keys keep LFU counters.
    Eviction,
    /// The LFU counter's parameters.
    Lfu,
    /// `slowlog-max-len`: the log is trimmed at once.
    Slowlog,
    /// The AOF's fsync policy.
    AofFsync,
    /// `appendonly`: the AOF starts (with a rewrite) or stops.
    Appendonly,
    /// `oom-score-adj`: the process's OOM score.
    Oom,
    /// `use-exit-on-panic`, `watchdog-period`.
    Crash,
    /// `repl-backlog-size`: the backlog is trimmed at once.
    ReplBacklog,
    /// A `tls-*` option: a new TLS context, built once all are stored.
    Tls,
    /// `aof-disable-auto-gc`: turned off, the AOF's history files go.
    AofGc,
    /// `loglevel`: the lines written from now on.
    Loglevel,
}

/// Work a hook leaves to the caller of [`State::apply`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Followup {
    /// Listen anew (`State::relisten`).
    Listen,
    /// Start or stop the AOF (`aof::follow_appendonly`).
    Appendonly,
    /// Build the TLS context anew (`tls::context`).
    Tls,
}
