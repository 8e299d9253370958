//! RDB snapshots in Redis 7.0's format (version 10), byte-compatible with
//! the files and DUMP payloads Redis writes and loads.
//!
//! - [`encode`]: [`Writer`] streams a snapshot to any `io::Write`, one key at
//!   a time (so a fork-less background save can feed it from a cursor walk);
//!   [`dump_payload`] builds a DUMP payload.
//! - [`decode`]: [`load`] reads a whole file, [`restore_payload`] a DUMP
//!   payload. Every length and offset read from the input is checked, so a
//!   corrupt or truncated input is an error naming the problem and its byte
//!   offset, never a panic or a huge allocation.
//! - [`blob`]: the listpack, ziplist, zipmap and intset layouts of the
//!   aggregate blobs, independent of the in-memory types (their internal
//!   layout is free to change).
//!
//! Values are written in the encoding Redis 7.0 uses for the same object
//! (lists as quicklist-2 listpack nodes, small hashes and zsets as listpack
//! blobs, integer sets as intset blobs) and loaded into the encoding our
//! thresholds pick, as Redis converts on load.

pub mod blob;
pub mod crc64;
pub mod decode;
pub mod encode;
pub mod lzf;

pub use decode::{load, restore_payload, Limits, LoadError, LoadSummary, Loaded, RestoreError};
pub use encode::{dump_payload, SaveOpts, Writer};

/// The format version we write (Redis 7.0).
pub const RDB_VERSION: u16 = 10;

pub const TYPE_STRING: u8 = 0;
pub const TYPE_LIST: u8 = 1;
pub const TYPE_SET: u8 = 2;
pub const TYPE_ZSET: u8 = 3;
pub const TYPE_HASH: u8 = 4;
pub const TYPE_ZSET_2: u8 = 5;
pub const TYPE_MODULE: u8 = 6;
pub const TYPE_MODULE_2: u8 = 7;
pub const TYPE_HASH_ZIPMAP: u8 = 9;
pub const TYPE_LIST_ZIPLIST: u8 = 10;
pub const TYPE_SET_INTSET: u8 = 11;
pub const TYPE_ZSET_ZIPLIST: u8 = 12;
pub const TYPE_HASH_ZIPLIST: u8 = 13;
pub const TYPE_LIST_QUICKLIST: u8 = 14;
pub const TYPE_STREAM_LISTPACKS: u8 = 15;
pub const TYPE_HASH_LISTPACK: u8 = 16;
pub const TYPE_ZSET_LISTPACK: u8 = 17;
pub const TYPE_LIST_QUICKLIST_2: u8 = 18;
pub const TYPE_STREAM_LISTPACKS_2: u8 = 19;

pub const OP_FUNCTION2: u8 = 245;
pub const OP_FUNCTION: u8 = 246;
pub const OP_MODULE_AUX: u8 = 247;
pub const OP_IDLE: u8 = 248;
pub const OP_FREQ: u8 = 249;
pub const OP_AUX: u8 = 250;
pub const OP_RESIZEDB: u8 = 251;
pub const OP_EXPIRETIME_MS: u8 = 252;
pub const OP_EXPIRETIME: u8 = 253;
pub const OP_SELECTDB: u8 = 254;
pub const OP_EOF: u8 = 255;

/// Quicklist-2 node containers.
pub const QL_PLAIN: u64 = 1;
pub const QL_PACKED: u64 = 2;

/// C's `%.17g`, as Redis formats scores it stores as text.
pub fn fmt_g17(v: f64) -> String {
    if v.is_nan() {
        return "nan".into();
    }
    if v.is_infinite() {
        return if v > 0.0 { "inf".into() } else { "-inf".into() };
    }
    if v == 0.0 {
        return if v.is_sign_negative() {
            "-0".into()
        } else {
            "0".into()
        };
    }
    let sci = format!("{:.16e}", v);
    let (mant, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let x: i32 = exp.parse().unwrap_or(0);
    let trim = |s: &str| -> String {
        if s.contains('.') {
            s.trim_end_matches('0').trim_end_matches('.').to_string()
        } else {
            s.to_string()
        }
    };
    if !(-4..17).contains(&x) {
        format!(
            "{}e{}{:02}",
            trim(mant),
            if x < 0 { '-' } else { '+' },
            x.abs()
        )
    } else {
        trim(&format!("{:.*}", (16 - x) as usize, v))
    }
}

/// Redis's `d2string`: integral values within ±2^52 print as integers,
/// everything else as `%.17g`.
pub fn d2string(v: f64) -> String {
    if v.is_finite()
        && v != 0.0
        && v > -4503599627370495.0
        && v < 4503599627370496.0
        && v == (v as i64) as f64
    {
        return (v as i64).to_string();
    }
    fmt_g17(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn g17_as_c() {
        assert_eq!(fmt_g17(0.1), "0.10000000000000001");
        assert_eq!(fmt_g17(1.5), "1.5");
        assert_eq!(fmt_g17(1e300), "1.0000000000000001e+300");
        assert_eq!(fmt_g17(1e-5), "1.0000000000000001e-05");
        assert_eq!(fmt_g17(123456.0), "123456");
        assert_eq!(d2string(3.0), "3");
        assert_eq!(d2string(-0.0), "-0");
        assert_eq!(d2string(f64::INFINITY), "inf");
    }
}
