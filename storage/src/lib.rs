//! The keyspace and data types of cinnabar.
//!
//! This crate owns what is stored: [`CBytes`] (binary-safe bytes kept inline
//! when short), [`Dict`] (the incrementally rehashed hash table every
//! database and hash type builds on, with Redis's reverse-binary SCAN
//! cursor), [`Value`] with its encodings, and [`Db`] (one numbered database:
//! keys, values and expiry times, in one table or one per hash slot: see
//! [`slot`]). It knows nothing of RESP or sockets, and
//! time comes in as an argument (`now_ms`) so tests can drive the clock.

pub mod aofcmd;
mod cbytes;
mod db;
mod dict;
pub mod glob;
pub mod hash;
pub mod hll;
pub mod intset;
pub mod listpack;
pub mod lzf;
pub mod num;
pub mod quicklist;
pub mod rdb;
pub mod set;
pub mod skiplist;
pub mod slot;
pub mod snapshot;
pub mod stream;
mod value;
pub mod zset;

pub use cbytes::CBytes;
pub use db::{Db, Keys};
pub use dict::{set_grow_guard, Dict, TableStats};
pub use hash::{Hash, HashLimits};
pub use intset::Intset;
pub use listpack::{Listpack, LpVal};
pub use quicklist::Quicklist;
pub use set::Set;
pub use skiplist::{LexRange, ScoreRange};
pub use stream::{Stream, StreamId};
pub use value::{StrValue, Typed, Value};
pub use zset::{SortedSet, ZaddFlags, ZaddOutcome, ZsetLimits};

/// Errors of the data layer. `Display` is Redis's exact reply text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Error {
    WrongType,
    NotInteger,
    NotFloat,
    Overflow,
    NanOrInfinity,
    StringTooLong,
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Error::WrongType => "WRONGTYPE Operation against a key holding the wrong kind of value",
            Error::NotInteger => "ERR value is not an integer or out of range",
            Error::NotFloat => "ERR value is not a valid float",
            Error::Overflow => "ERR increment or decrement would overflow",
            Error::NanOrInfinity => "ERR increment would produce NaN or Infinity",
            Error::StringTooLong => "ERR string exceeds maximum allowed size (proto-max-bulk-len)",
        })
    }
}

#[cfg(test)]
mod size_tests {
    /// Handle sizes: the compact encodings are single exact-size buffers
    /// behind a 16-byte handle, so the types holding them fit `Value`'s
    /// 24 bytes unboxed (see `value.rs`).
    #[test]
    fn handle_sizes() {
        use std::mem::size_of;
        assert_eq!(size_of::<crate::Listpack>(), 16);
        assert_eq!(size_of::<crate::Intset>(), 16);
        assert_eq!(size_of::<crate::SortedSet>(), 16);
        assert_eq!(size_of::<crate::Hash>(), 16);
        assert_eq!(size_of::<crate::Set>(), 16);
        assert_eq!(size_of::<crate::Quicklist>(), 48);
    }
}
