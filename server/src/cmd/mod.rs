//! The third floor: the dispatcher and the command families.
//!
//! A request goes through three steps, as in Redis ([`exec`]): [`gate`]
//! (the gatekeeper: lookup, arity, authentication, OOM, MISCONF,
//! subscribed mode, in Redis's order), then MULTI queuing, then [`call`]
//! (the handler and its bookkeeping: MONITOR, clock, propagation,
//! statistics, CLIENT REPLY, blocked clients, [`slowlog`]). What a command
//! is comes from [`table`]: Redis 7.0.15's own metadata joined with the
//! handlers the families bind by name, installed by [`families`].
//!
//! Shared by the families: [`ctx`] (`Ctx`, the argument rules), [`blocking`]
//! (serving waiting clients), [`scan`] (the SCAN family's cursor and
//! options), [`help`] (HELP replies). [`perm`]: the ACL checks the gate,
//! scripts and AUTH run. [`batch`]: a connection's pipelined batch.
//! [`pause`]: CLIENT PAUSE's check. [`busy`]: what the connections run
//! while a script is busy. [`replay`]: an AOF's commands through the
//! dispatcher, at start-up and for DEBUG LOADAOF. Every other module is a
//! family, which imports only these, `state` and `core`.

pub mod acl;
pub mod aof;
pub mod batch;
pub mod bitmap;
pub mod blocking;
pub mod busy;
mod call;
pub mod client;
pub mod cluster;
pub mod command;
pub mod config;
pub mod connection;
pub mod ctx;
pub mod debug;
pub mod exec;
pub mod families;
mod gate;
pub use gate::LOADING;
pub mod hash;
pub mod help;
pub mod hll;
pub mod info;
pub mod keys;
pub mod list;
pub mod lolwut;
pub mod memory;
pub mod migrate;
pub mod module;
pub mod pause;
mod perm;
pub mod persist;
pub mod pubsub;
pub mod redirect;
pub mod replay;
pub mod replication;
pub mod scan;
pub mod scripting;
pub mod server;
pub mod set;
pub mod slowlog;
pub mod sort;
pub mod stream;
pub mod string;
mod table;
pub mod transaction;
pub mod zset;

pub use ctx::{clamp_range, int_arg, norm_range, rand_count, timeout_arg, Ctx};
pub use exec::{check_source_reply, execute, execute_owned, execute_resolved};
pub use table::*;
// The families test their keywords with it; core's key rules need it too.
pub use crate::core::command::is;
