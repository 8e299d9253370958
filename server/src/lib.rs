//! The cinnabar server: Tokio networking, client state, the command table
//! and the command families, configuration, and housekeeping (cron).
//!
//! # Layout
//! - [`server`]: listeners, the cron task, start-up and shutdown.
//! - [`conn`]: one task per connection: read, decode, execute a batch of
//!   commands under the state lock, write all replies at once.
//! - [`state`]: everything commands can touch, behind one mutex: databases,
//!   clients, config, statistics.
//! - [`cmd`]: the command table ([`cmd::Command`]) and one module per
//!   command family; handlers are plain synchronous functions.
//! - [`config`]: redis.conf parsing and CONFIG's option table.

pub mod acl;
pub mod aof;
pub mod clientmem;
pub mod cmd;
pub mod config;
pub mod conn;
pub mod crash;
pub mod error;
pub mod evict;
pub mod load;
pub mod log;
pub mod migrate;
pub mod oom;
pub mod os;
pub mod persist;
pub mod proctitle;
pub mod propagate;
pub mod pubsub;
pub mod repl;
pub mod replica;
pub mod replybuf;
pub mod round;
pub mod server;
pub mod service;
pub mod shutdown;
pub mod spill;
pub mod state;
pub mod testkit;
pub mod tls;
pub mod tracking;
pub mod wake;

pub use error::{CmdResult, Error};
