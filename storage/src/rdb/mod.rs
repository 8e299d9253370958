//! RDB snapshots in Redis 7.0's format (version 10), byte-compatible with
//! the files and DUMP payloads Redis writes and loads.
//!
//! - [`encode`]: [`Writer`] streams a snapshot to any `io::Write`, one key at
//!   a time (so a fork-less background save can feed it from a cursor walk);
//!   [`dump_payload`] builds a DUMP payload.
//! - [`decode`]: [`load`] reads a file held in memory, [`load_input`] one
//!   read as it goes, [`restore_payload`] a DUMP payload. Every length and offset read from the input is checked, so a
//!   corrupt or truncated input is an error naming the problem and its byte
//!   offset, never a panic or a huge allocation.
//! - [`wire`]: lengths, strings and the bounds-checked reader, which both
//!   directions and the stream codec build on.
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
pub use crate::lzf;
mod stream;
pub(crate) mod wire;

pub use decode::{
    function_payload, load, load_input, load_into, restore_payload, restore_payload_counted, Input,
    Limits, LoadSummary, Loaded, RestoreError, Sink,
};
pub use encode::{dump_payload, function_dump_payload, ReplAux, SaveOpts, Writer};
pub use wire::LoadError;

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
/// Redis 7.2's (consumers gain an active time); 7.0 writes type 19.
pub const TYPE_STREAM_LISTPACKS_3: u8 = 21;

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
            (b"h", Value::Hash(h), None),
            (b"ht", Value::Hash(ht), None),
            (b"si", Value::Set(si), None),
            (b"st", Value::Set(st), None),
            (b"z", Value::ZSet(z), None),
            (b"zs", Value::ZSet(zs), Some(4_102_444_800_000)),
        ]
    }

    fn sample_file(keys: &[(&[u8], Value, Option<i64>)]) -> Vec<u8> {
        let mut w = Writer::new(Vec::new(), SaveOpts::default());
        w.header("7.0.15", 0, 0).unwrap();
        w.select_db(3, keys.len(), 2).unwrap();
        for (k, v, e) in keys {
            w.key(k, v, *e, None, None).unwrap();
        }
        w.finish().unwrap()
    }

    #[test]
    fn file_round_trip_and_corruption() {
        let keys = sample();
        let file = sample_file(&keys);
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

    type Keys = Vec<Vec<Vec<u8>>>;

    /// Loads `file` whole, or read `piece` bytes at a time at the least.
    fn streamed(file: &[u8], piece: Option<usize>) -> Result<(LoadSummary, Keys), LoadError> {
        let mut src = file;
        let mut dumps = Vec::new();
        let input = match piece {
            Some(n) => Input::stream(&mut src, None).reading(n),
            None => Input::whole(file),
        };
        let sum = load_input(input, &Limits::default(), 0, true, |k: Loaded| {
            // Hash tables' order is their own: compare their contents.
            let mut items: Vec<Vec<u8>> = match &k.value {
                Value::Hash(h) => h
                    .iter()
                    .map(|(f, v)| [f.to_vec(), v.to_vec()].concat())
                    .collect(),
                Value::Set(s) => s.iter().map(|m| m.to_vec()).collect(),
                v => vec![dump_payload(v, &SaveOpts::default())],
            };
            items.sort();
            dumps.push([vec![k.key], items].concat());
            Ok(())
        })?;
        Ok((sum, dumps))
    }

    /// A load read as it goes (in windows that start `piece` bytes long,
    /// cutting records anywhere) finds what a load of the whole file finds:
    /// the same keys, or the same error at the same offset.
    #[test]
    fn streamed_loads_match_whole_ones() {
        let mut keys = sample();
        let big: Vec<u8> = (0..700_000u64).map(|i| (i * 7919 % 251) as u8).collect();
        keys.push((b"big", Value::str(&big), None));
        let file = sample_file(&keys);
        let whole = streamed(&file, None).unwrap();
        assert_eq!(whole.1.len(), keys.len());
        for piece in [1, 3, 7, 4096, 300_000, 1 << 20] {
            let (sum, dumps) = streamed(&file, Some(piece)).unwrap();
            let differ = dumps.iter().zip(&whole.1).position(|(a, b)| a != b);
            assert_eq!(
                (dumps.len(), differ),
                (whole.1.len(), None),
                "pieces of {piece}"
            );
            assert_eq!((sum.end, sum.keys), (file.len(), keys.len()));
        }
        let small = sample_file(&sample());
        let step = (small.len() / 200).max(1);
        let same = |f: &[u8]| {
            let whole = streamed(f, None).map(|(sum, keys)| (sum.end, keys));
            for piece in [1, 5, 64] {
                let got = streamed(f, Some(piece)).map(|(sum, keys)| (sum.end, keys));
                assert!(
                    got == whole,
                    "pieces of {piece}: {:?} {:?}",
                    got.err(),
                    whole.as_ref().err()
                );
            }
        };
        for cut in (0..small.len()).step_by(step) {
            same(&small[..cut]);
        }
        for pos in (0..small.len()).step_by(step + 2) {
            let mut bad = small.clone();
            bad[pos] ^= 0xa5;
            same(&bad);
        }
        // Random damage: bytes set, a span dropped or doubled.
        let mut x: u64 = 0x2545_f491_4f6c_dd1d;
        let mut next = |n: usize| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x % n as u64) as usize
        };
        for _ in 0..300 {
            let mut bad = small.clone();
            for _ in 0..1 + next(3) {
                let at = next(bad.len());
                bad[at] = next(256) as u8;
            }
            let (a, n) = (next(bad.len()), next(40));
            let span = bad[a..(a + n).min(bad.len())].to_vec();
            match next(3) {
                0 => drop(bad.drain(a..a + span.len())),
                1 => bad.splice(a..a, span).for_each(drop),
                _ => {}
            }
            same(&bad);
        }
    }

    /// Counts a load's blobs, as the server's sanitization stat does.
    struct Blobs(u64);

    impl Sink for &mut Blobs {
        fn key(&mut self, _: Loaded) -> Result<(), String> {
            Ok(())
        }
        fn blobs(&mut self, n: u64) {
            self.0 += n;
        }
    }

    /// A load read in small windows parses records again: each blob still
    /// counts once, as in a load of the whole file.
    #[test]
    fn a_load_counts_each_blob_once() {
        let file = sample_file(&sample());
        let count = |piece: Option<usize>| {
            let mut src = &file[..];
            let input = match piece {
                Some(n) => Input::stream(&mut src, None).reading(n),
                None => Input::whole(&file),
            };
            let mut b = Blobs(0);
            load_input(input, &Limits::default(), 0, true, &mut b).unwrap();
            b.0
        };
        // The list's nodes, the small hash, the intset, the small zset.
        let whole = count(None);
        assert!(whole >= 4, "{whole}");
        for piece in [1, 3, 64, 4096] {
            assert_eq!(count(Some(piece)), whole, "pieces of {piece}");
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
            let v = restore_payload(p, &lim, true).unwrap();
            assert_eq!(&dump_payload(&v, &SaveOpts::default())[..], *p);
        }
        let mut bad = cases[0].to_vec();
        bad[3] ^= 1;
        assert_eq!(
            restore_payload(&bad, &lim, true).err(),
            Some(RestoreError::Checksum)
        );
    }
}

#[cfg(test)]
mod legacy_tests {
    use super::crc64::crc64;
    use super::wire::put_string;
    use super::*;
    use crate::Value;

    /// A ziplist of `items` (strings, or integers in the given encodings),
    /// laid out as Redis < 7 wrote them.
    fn ziplist(items: &[(&[u8], u8)]) -> Vec<u8> {
        let mut body = Vec::new();
        let mut prev = 0usize;
        let mut tail = 10;
        for (s, enc) in items {
            let start = body.len();
            tail = 10 + start;
            body.push(prev as u8);
            match enc {
                0 => {
                    body.push(s.len() as u8);
                    body.extend_from_slice(s);
                }
                0xf1..=0xfd => body.push(*enc),
                0xc0 => {
                    body.push(0xc0);
                    let v: i16 = std::str::from_utf8(s).unwrap().parse().unwrap();
                    body.extend_from_slice(&v.to_le_bytes());
                }
                _ => unreachable!(),
            }
            prev = body.len() - start;
        }
        let mut zl = Vec::new();
        zl.extend_from_slice(&((body.len() + 11) as u32).to_le_bytes());
        zl.extend_from_slice(&(tail as u32).to_le_bytes());
        zl.extend_from_slice(&(items.len() as u16).to_le_bytes());
        zl.extend_from_slice(&body);
        zl.push(0xff);
        zl
    }

    fn payload(t: u8, body: &[u8], ver: u16) -> Vec<u8> {
        let mut p = vec![t];
        p.extend_from_slice(body);
        p.extend_from_slice(&ver.to_le_bytes());
        let c = crc64(0, &p);
        p.extend_from_slice(&c.to_le_bytes());
        p
    }

    fn blob(b: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        put_string(&mut out, b, false);
        out
    }

    fn contents(v: &Value) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        match v {
            Value::List(l) => out.extend(l.iter().map(|e| e.to_vec())),
            Value::Hash(h) => {
                for (f, v) in h.iter() {
                    out.push(f.to_vec());
                    out.push(v.to_vec());
                }
            }
            Value::ZSet(z) => z.for_each(|m, s| {
                out.push(m.to_vec());
                out.push(crate::num::d2string(s).into_bytes());
            }),
            Value::Set(s) => {
                out.extend(s.iter().map(|e| e.to_vec()));
                out.sort();
            }
            Value::Str(s) => out.push(s.to_vec()),
            Value::Stream(s) => out.push(s.len().to_string().into_bytes()),
        }
        out
    }

    fn strs(v: &[&str]) -> Vec<Vec<u8>> {
        v.iter().map(|s| s.as_bytes().to_vec()).collect()
    }

    #[test]
    fn older_encodings_load() {
        let lim = Limits::default();
        let zl = ziplist(&[(b"a", 0), (b"1", 0xf2), (b"300", 0xc0), (b"hello", 0)]);
        // LIST_ZIPLIST, LIST_QUICKLIST (v1: ziplist nodes), HASH_ZIPLIST.
        let v = restore_payload(&payload(TYPE_LIST_ZIPLIST, &blob(&zl), 9), &lim, true).unwrap();
        assert_eq!(contents(&v), strs(&["a", "1", "300", "hello"]));
        let mut ql = vec![2u8];
        ql.extend(blob(&zl));
        ql.extend(blob(&zl));
        let v = restore_payload(&payload(TYPE_LIST_QUICKLIST, &ql, 9), &lim, true).unwrap();
        assert_eq!(contents(&v).len(), 8);
        let v = restore_payload(&payload(TYPE_HASH_ZIPLIST, &blob(&zl), 9), &lim, true).unwrap();
        assert_eq!(v.encoding(), "listpack");
        assert_eq!(contents(&v), strs(&["a", "1", "300", "hello"]));
        // ZSET_ZIPLIST: member, score pairs.
        let zz = ziplist(&[(b"m", 0), (b"2", 0xf3), (b"n", 0), (b"1.5", 0)]);
        let v = restore_payload(&payload(TYPE_ZSET_ZIPLIST, &blob(&zz), 9), &lim, true).unwrap();
        assert_eq!(contents(&v), strs(&["n", "1.5", "m", "2"]));
        // ZSET with text doubles, including the inf markers.
        let mut z = vec![3u8];
        z.extend(blob(b"a"));
        z.extend([3, b'2', b'.', b'5']);
        z.extend(blob(b"b"));
        z.push(255);
        z.extend(blob(b"c"));
        z.push(254);
        let v = restore_payload(&payload(TYPE_ZSET, &z, 6), &lim, true).unwrap();
        assert_eq!(contents(&v), strs(&["b", "-inf", "a", "2.5", "c", "inf"]));
        // Zipmap hash: zmlen, (len key len free value)*, end.
        let zm = b"\x02\x01f\x01\x00v\x02ab\x03\x01xyz\x00\xff";
        let v = restore_payload(&payload(TYPE_HASH_ZIPMAP, &blob(zm), 3), &lim, true).unwrap();
        assert_eq!(contents(&v), strs(&["f", "v", "ab", "xyz"]));
        // Plain linked list and plain set.
        let mut l = vec![2u8];
        l.extend(blob(b"x"));
        l.extend(blob(b"12"));
        let v = restore_payload(&payload(TYPE_LIST, &l, 6), &lim, true).unwrap();
        assert_eq!(contents(&v), strs(&["x", "12"]));
        let v = restore_payload(&payload(TYPE_SET, &l, 6), &lim, true).unwrap();
        assert_eq!(v.encoding(), "hashtable");
        // A truncated stream is refused; modules name themselves.
        let e = restore_payload(&payload(TYPE_STREAM_LISTPACKS, b"\x00", 10), &lim, true);
        assert!(matches!(e, Err(RestoreError::BadFormat(_))));
        let e = restore_payload(&payload(TYPE_MODULE_2, b"\x00", 10), &lim, true);
        assert!(matches!(e, Err(RestoreError::BadFormat(ref e)) if e.msg.contains("module")));
    }

    /// Empty aggregates (and empty quicklist nodes) are skipped, as Redis
    /// skips them, instead of failing the load.
    #[test]
    fn empty_keys_are_skipped() {
        let mut f = b"REDIS0009".to_vec();
        f.extend([OP_SELECTDB, 0, TYPE_SET, 3, b's', b'e', b't', 0]);
        let empty = ziplist(&[]);
        let full = ziplist(&[(b"x", 0)]);
        f.extend([TYPE_LIST_QUICKLIST, 1, b'e', 1]);
        f.extend(blob(&empty));
        f.extend([TYPE_LIST_QUICKLIST, 1, b'l', 2]);
        f.extend(blob(&empty));
        f.extend(blob(&full));
        f.extend([OP_EOF, 0, 0, 0, 0, 0, 0, 0, 0]);
        let mut keys = Vec::new();
        let sum = load(&f, &Limits::default(), 0, true, |k: Loaded| {
            keys.push((k.key, contents(&k.value)));
            Ok(())
        })
        .unwrap();
        assert_eq!((sum.keys, sum.empty), (1, 2));
        assert_eq!(keys, vec![(b"l".to_vec(), strs(&["x"]))]);
    }

    #[test]
    fn function_payload_round_trip() {
        let long =
            b"#!lua name=lib\nredis.register_function('f', function() return 1 end)".to_vec();
        for compress in [false, true] {
            let p =
                super::function_dump_payload([&b"#!lua name=a"[..], &long].into_iter(), compress);
            assert_eq!(
                super::function_payload(&p),
                Some(vec![b"#!lua name=a".to_vec(), long.clone()])
            );
            let mut bad = p.clone();
            bad[3] ^= 1;
            assert_eq!(super::function_payload(&bad), None);
        }
    }

    /// Redis 7.0.15 counts a sanitization per listpack and intset of a
    /// payload (a quicklist's or stream's nodes each), none for the older
    /// ziplists and zipmaps it converts, and a blob that fails its check.
    #[test]
    fn payload_blobs_are_the_ones_redis_counts() {
        let lim = Limits::default();
        let count = |p: &[u8]| {
            let mut n = 0;
            let res = restore_payload_counted(p, &lim, true, &mut n);
            (res.is_ok(), n)
        };
        // DUMP outputs of Redis 7.0.15: a string, a hash listpack, a list
        // of one node, an intset.
        assert_eq!(count(b"\x00\x05hello\n\x00cr\xdfve4 \n"), (true, 0));
        assert_eq!(count(b"\x10\x16\x16\x00\x00\x00\x04\x00\x81a\x02\x01\x01\x81b\x02\x85hello\x06\xff\n\x00\xe8\xc5\xfe\x99\xee\x07\x95]"), (true, 1));
        assert_eq!(count(b"\x12\x01\x02\x0e\x0e\x00\x00\x00\x03\x00\x81a\x02\x01\x01\x02\x01\xff\n\x00\xb0\xe3\xd3\xd1\xe5\xdag\xec"), (true, 1));
        assert_eq!(count(b"\x0b\x0e\x02\x00\x00\x00\x03\x00\x00\x00\x01\x00\x02\x00\x03\x00\n\x00\xa5\x02\\\xe2mnM\x1b"), (true, 1));
        let zl = ziplist(&[(b"a", 0), (b"1", 0xf2)]);
        for t in [TYPE_LIST_ZIPLIST, TYPE_HASH_ZIPLIST, TYPE_ZSET_ZIPLIST] {
            assert_eq!(count(&payload(t, &blob(&zl), 9)), (true, 0), "type {t}");
        }
        let mut ql = vec![2u8];
        ql.extend(blob(&zl));
        ql.extend(blob(&zl));
        assert_eq!(count(&payload(TYPE_LIST_QUICKLIST, &ql, 9)), (true, 0));
        // Three nodes, the middle one plain; then one whose second node is
        // not a listpack: the nodes up to it count.
        let lp = b"\x0e\x00\x00\x00\x03\x00\x81a\x02\x01\x01\x02\x01\xff";
        let mut q2 = vec![3u8];
        q2.extend([2].iter().chain(&blob(lp)));
        q2.extend([1].iter().chain(&blob(b"plain")));
        q2.extend([2].iter().chain(&blob(lp)));
        assert_eq!(count(&payload(TYPE_LIST_QUICKLIST_2, &q2, 10)), (true, 2));
        let mut q2 = vec![3u8];
        q2.extend([2].iter().chain(&blob(lp)));
        q2.extend([2].iter().chain(&blob(b"junk")));
        q2.extend([2].iter().chain(&blob(lp)));
        assert_eq!(count(&payload(TYPE_LIST_QUICKLIST_2, &q2, 10)), (false, 2));
        // A wrong checksum is refused before the value is read.
        let mut bad = payload(TYPE_LIST_QUICKLIST_2, &q2, 10);
        *bad.last_mut().unwrap() ^= 1;
        assert_eq!(count(&bad), (false, 0));
    }
}
