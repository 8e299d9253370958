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

#[cfg(test)]
mod roundtrip_tests {
    use super::*;
    use crate::{Hash, Quicklist, Set, SortedSet, Value, ZaddFlags};

    fn sample() -> Vec<(&'static [u8], Value, Option<i64>)> {
        let lim = Limits::default();
        let mut q = Quicklist::new(-2);
        for i in 0..1200 {
            q.push_back(format!("e{i}").as_bytes());
        }
        let mut h = Hash::new();
        for i in 0..5 {
            h.set(format!("f{i}").as_bytes(), b"v", &lim.hash);
        }
        let mut ht = Hash::new();
        for i in 0..300 {
            ht.set(format!("f{i}").as_bytes(), b"v", &lim.hash);
        }
        let mut si = Set::new_for(b"1");
        for i in [-5i64, 1, 70000, 5_000_000_000] {
            si.add(i.to_string().as_bytes(), 512);
        }
        let mut st = Set::new_for(b"a");
        st.add(b"a", 512);
        st.add(b"b", 512);
        let mut z = SortedSet::new_listpack();
        let mut zs = SortedSet::new_skiplist();
        for i in 0..200 {
            let m = format!("m{i}");
            if i < 10 {
                z.add(
                    m.as_bytes(),
                    i as f64 / 7.0,
                    ZaddFlags::default(),
                    &lim.zset,
                );
            }
            zs.add(
                m.as_bytes(),
                -(i as f64) * 1.5,
                ZaddFlags::default(),
                &lim.zset,
            );
        }
        vec![
            (b"s", Value::str(b"hello"), None),
            (b"i", Value::str(b"-123456"), Some(4_102_444_800_000)),
            (b"c", Value::str(&b"ab".repeat(50)), None),
            (b"l", Value::List(Box::new(q)), None),
            (b"h", Value::Hash(Box::new(h)), None),
            (b"ht", Value::Hash(Box::new(ht)), None),
            (b"si", Value::Set(Box::new(si)), None),
            (b"st", Value::Set(Box::new(st)), None),
            (b"z", Value::ZSet(Box::new(z)), None),
            (b"zs", Value::ZSet(Box::new(zs)), Some(4_102_444_800_000)),
        ]
    }

    #[test]
    fn file_round_trip_and_corruption() {
        let keys = sample();
        let mut w = Writer::new(Vec::new(), SaveOpts::default());
        w.header("7.0.15", 0, 0).unwrap();
        w.select_db(3, keys.len(), 2).unwrap();
        for (k, v, e) in &keys {
            w.key(k, v, *e, None, None).unwrap();
        }
        let file = w.finish().unwrap();
        let mut got = Vec::new();
        let sum = load(&file, &Limits::default(), 0, true, |k| {
            got.push(k);
            Ok(())
        })
        .unwrap();
        assert_eq!(sum.keys, keys.len());
        for ((k, v, e), l) in keys.iter().zip(&got) {
            assert_eq!(&l.key[..], *k);
            assert_eq!(l.db, 3);
            assert_eq!(l.expire_ms, *e);
            assert_eq!(
                l.value.encoding(),
                v.encoding(),
                "{}",
                String::from_utf8_lossy(k)
            );
            assert_eq!(
                dump_payload(&l.value, &SaveOpts::default()).len(),
                dump_payload(v, &SaveOpts::default()).len()
            );
        }
        // Every truncation and many single-byte flips are errors (or, for
        // flips the format cannot see, a checksum error), never panics.
        let step = (file.len() / 400).max(1);
        for cut in (0..file.len()).step_by(step) {
            assert!(load(&file[..cut], &Limits::default(), 0, true, |_| Ok(())).is_err());
        }
        for pos in (0..file.len()).step_by(step + 2) {
            let mut bad = file.clone();
            bad[pos] ^= 0xa5;
            assert!(
                load(&bad, &Limits::default(), 0, true, |_| Ok(())).is_err(),
                "{pos}"
            );
        }
    }

    #[test]
    fn payloads_match_redis() {
        // DUMP outputs of Redis 7.0.15.
        let lim = Limits::default();
        let cases: &[&[u8]] = &[
            b"\x00\x05hello\n\x00cr\xdfve4 \n",
            b"\x10\x16\x16\x00\x00\x00\x04\x00\x81a\x02\x01\x01\x81b\x02\x85hello\x06\xff\n\x00\xe8\xc5\xfe\x99\xee\x07\x95]",
            b"\x12\x01\x02\x0e\x0e\x00\x00\x00\x03\x00\x81a\x02\x01\x01\x02\x01\xff\n\x00\xb0\xe3\xd3\xd1\xe5\xdag\xec",
            b"\x0b\x0e\x02\x00\x00\x00\x03\x00\x00\x00\x01\x00\x02\x00\x03\x00\n\x00\xa5\x02\\\xe2mnM\x1b",
            b"\x00\x0c123456789012\n\x00\x91\x10\x01\xb1\xd1\x16\xe7\xac",
        ];
        for p in cases {
            let v = restore_payload(p, &lim).unwrap();
            assert_eq!(&dump_payload(&v, &SaveOpts::default())[..], *p);
        }
        let mut bad = cases[0].to_vec();
        bad[3] ^= 1;
        assert_eq!(
            restore_payload(&bad, &lim).err(),
            Some(RestoreError::Checksum)
        );
    }
}
