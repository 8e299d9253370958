//! The top floor: sockets, tasks and the process.
pub mod bus;
pub mod conn;
pub mod duplex;
pub mod full_sync;
pub mod handshake;
pub mod link_state;
pub mod link_wire;
pub mod load;
pub mod replica;
pub mod server;
pub mod service;
