//! RESP2/RESP3 wire protocol for cinnabar.
//!
//! This crate owns the bytes on the wire and nothing else: [`Decoder`] turns a
//! client's input buffer into command argument vectors (multibulk or inline
//! form, resumable across reads), and [`ReplyBuf`] writes every RESP2/RESP3
//! reply type into one output buffer per batch of replies. [`parse_reply`]
//! reads replies back, which scripting uses to turn a command's reply into Lua
//! values. [`bus`] is the other wire a server speaks: the Redis Cluster bus
//! between nodes. It has no knowledge of commands, storage or sockets.

pub mod bus;
mod decode;
mod reply;

pub use decode::{
    repr, split_args, write_command, Decoder, ProtocolError, DEFAULT_MAX_BULK, MAX_INLINE,
    MAX_MULTIBULK,
};
pub use reply::{format_double, parse_reply, Frame, ReplyBuf};
