//! Family-level tests run in-process through `testkit::Harness`: the
//! dispatcher without a socket, with a clock that moves only when a test
//! advances it (expiry without sleeping). Cases that need a real connection
//! (blocking, pub/sub delivery, concurrency, the wire protocol) stay in
//! the workspace's tests/ crate.

mod commands;
mod errors;
mod keys;
mod resp3;
mod strings;
mod transactions;
