//! The top floor: sockets, tasks and the process.
pub mod conn;
pub mod load;
pub mod replica;
pub mod server;
pub mod service;
