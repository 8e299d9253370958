//! The cinnabar server, in four floors whose arrows point down only
//! (`tools/shape` checks it; docs/ARCHITECTURE.md says what each owns):
//!
//! - [`core`]: what every floor uses and that takes no `State`: clock,
//!   configuration, command metadata, ACL rules, TLS, the propagation
//!   stream, logs, errors.
//! - [`state`]: `State` (behind one mutex) and everything that takes it:
//!   clients, the data ([`state::Shard`]), WATCH, expiry, eviction,
//!   persistence, the AOF, pub/sub, tracking, replication's master side.
//! - [`cmd`]: dispatch (the gate, the call, the command table, ACL checks,
//!   blocking, a connection's batch) and one module per command family;
//!   [`cmd::families`] installs the families' handlers at start-up.
//! - [`net`]: connections, listeners and cron, start-up loading, the link
//!   to a master, service notifications.
//!
//! [`testkit`] runs commands in-process for the families' tests.

pub mod cmd;
pub mod core;
pub mod net;
pub mod state;
pub mod testkit;

pub use crate::core::error::{CmdResult, Error};
