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

pub mod cmd;
pub mod core;
pub mod net;
pub mod state;
pub mod testkit;

pub use crate::core::error::{CmdResult, Error};
