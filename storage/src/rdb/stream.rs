//! The stream value in RDB files and DUMP payloads: types 15 (Redis 5),
//! 19 (what Redis 7.0 writes: first ID, max deleted ID, entries added and
//! the groups' entries-read) and 21 (Redis 7.2: consumers' active time).
//!
//! ```text
//! nodes: len, then per node: master ID (16-byte string), listpack string
//! length, last-id ms, seq, [first-id ms, seq, max-deleted ms, seq,
//!   entries-added]                                      (19, 21)
//! groups: len, then per group: name, last-id ms, seq, [entries-read]
//!   PEL: len, then per entry: 16-byte ID, delivery time (8 bytes LE), count
//!   consumers: len, then per consumer: name, seen time (8 bytes LE),
//!     [active time (8 bytes LE)] (21), PEL: len, then 16-byte IDs
//! ```

use super::blob::lp_each;
use super::wire::{at, blob_err, in_blob, put_len, put_string, Reader, R};
use super::{TYPE_STREAM_LISTPACKS, TYPE_STREAM_LISTPACKS_3};
use crate::listpack::Listpack;
use crate::stream::{Group, Stream, StreamId};

/// Writes a stream as type 19.
pub fn write(out: &mut Vec<u8>, s: &Stream, cz: bool) {
    put_len(out, s.node_count() as u64);
    for (master, lp) in s.nodes() {
        put_string(out, &master.to_be(), cz);
        let data = lp.as_bytes();
        let mut blob = Vec::with_capacity(data.len() + 7);
        blob.extend_from_slice(&(data.len() as u32 + 7).to_le_bytes());
        blob.extend_from_slice(&(lp.len().min(65535) as u16).to_le_bytes());
        blob.extend_from_slice(data);
        blob.push(0xff);
        put_string(out, &blob, cz);
    }
    put_len(out, s.len());
    put_id(out, s.last_id);
    put_id(out, s.first_id);
    put_id(out, s.max_deleted_id);
    put_len(out, s.entries_added);
    put_len(out, s.groups.len() as u64);
    for (name, g) in &s.groups {
        put_string(out, name, cz);
        put_id(out, g.last_id);
        put_len(out, g.entries_read as u64);
        put_len(out, g.pel.len() as u64);
        for (id, n) in &g.pel {
            out.extend_from_slice(&id.to_be());
            out.extend_from_slice(&n.delivery_time.to_le_bytes());
            put_len(out, n.delivery_count);
        }
        put_len(out, g.consumers.len() as u64);
        for (cname, c) in &g.consumers {
            put_string(out, cname, cz);
            out.extend_from_slice(&c.seen_time.to_le_bytes());
            put_len(out, c.pel.len() as u64);
            for id in &c.pel {
                out.extend_from_slice(&id.to_be());
            }
        }
    }
}

fn put_id(out: &mut Vec<u8>, id: StreamId) {
    put_len(out, id.ms);
    put_len(out, id.seq);
}

fn read_id(r: &mut Reader) -> R<StreamId> {
    Ok(StreamId::new(r.len()?, r.len()?))
}

fn raw_id(r: &mut Reader) -> R<StreamId> {
    let b = r.take(16)?;
    let mut a = [0; 16];
    a.copy_from_slice(b);
    Ok(StreamId::from_be(&a))
}

fn ms_time(r: &mut Reader) -> R<i64> {
    let b = r.take(8)?;
    let mut a = [0; 8];
    a.copy_from_slice(b);
    Ok(i64::from_le_bytes(a))
}

/// Reads a stream of type `t` (15, 19 or 21), checking every node and
/// every cross-reference so the value is safe to use. `blobs` counts the
/// nodes' listpacks reached.
pub fn read(r: &mut Reader, t: u8, blobs: &mut u64) -> R<Stream> {
    let mut s = Stream::new();
    let nodes = r.count(2)?;
    let mut live = 0u64;
    let mut prev_master: Option<StreamId> = None;
    for _ in 0..nodes {
        let start = r.p;
        let key = r.string()?;
        let Ok(key) = <[u8; 16]>::try_from(&key[..]) else {
            return at("stream node key is not a 128-bit ID", start);
        };
        let master = StreamId::from_be(&key);
        if prev_master.is_some_and(|p| master <= p) {
            return at("stream nodes out of order", start);
        }
        prev_master = Some(master);
        let bstart = r.p;
        let blob = r.string()?;
        *blobs += 1;
        let mut vals = Vec::new();
        let checked = lp_each(&blob, |v| {
            vals.push(v);
            Ok(())
        });
        in_blob("Stream listpack", checked.map_err(|e| blob_err(e, bstart)))?;
        if vals.is_empty() {
            return at("Empty listpack inside stream", bstart);
        }
        let mut lp = Listpack::new();
        lp.extend_vals(&vals);
        drop(vals);
        let pushed = s.push_node(master, lp).or_else(|e| at(e, bstart));
        live += in_blob("Stream listpack", pushed)?;
    }
    let start = r.p;
    let length = r.len()?;
    if length != live {
        return at("stream length does not match its nodes", start);
    }
    s.set_len(length);
    s.last_id = read_id(r)?;
    if s.edge_id(true).is_some_and(|l| l > s.last_id) {
        return at("stream last ID below its last entry", start);
    }
    if t == TYPE_STREAM_LISTPACKS {
        s.first_id = s.edge_id(false).unwrap_or(StreamId::MIN);
        s.entries_added = length;
    } else {
        s.first_id = read_id(r)?;
        s.max_deleted_id = read_id(r)?;
        s.entries_added = r.len()?;
    }
    let ngroups = r.count(3)?;
    for _ in 0..ngroups {
        let gstart = r.p;
        let name = r.string()?.into_owned();
        let last_id = read_id(r)?;
        let entries_read = if t == TYPE_STREAM_LISTPACKS {
            s.estimate_entries_read(last_id)
        } else {
            r.len()? as i64
        };
        let mut g = Group::new(last_id, entries_read);
        let npel = r.count(17)?;
        let mut pel = Vec::with_capacity(npel);
        for _ in 0..npel {
            let id = raw_id(r)?;
            let time = ms_time(r)?;
            let count = r.len()?;
            pel.push((id, time, count));
        }
        let nconsumers = r.count(10)?;
        let mut owned = std::collections::BTreeMap::new();
        for _ in 0..nconsumers {
            let cstart = r.p;
            let cname = r.string()?.into_owned();
            let seen = ms_time(r)?;
            if t == TYPE_STREAM_LISTPACKS_3 {
                ms_time(r)?;
            }
            let n = r.count(16)?;
            let (c, created) = g.consumer(&cname, seen);
            if !created {
                return at("Duplicate stream consumer detected.", cstart);
            }
            for _ in 0..n {
                let id = raw_id(r)?;
                if !c.pel.insert(id) || owned.insert(id, cname.clone()).is_some() {
                    return at("stream consumer PEL entry owned twice", cstart);
                }
            }
        }
        for (id, time, count) in pel {
            let Some(owner) = owned.remove(&id) else {
                return at("Stream CG PEL entry without consumer", gstart);
            };
            g.pel.insert(
                id,
                crate::stream::Nack {
                    delivery_time: time,
                    delivery_count: count,
                    consumer: owner,
                },
            );
        }
        if !owned.is_empty() {
            return at("stream consumer PEL entry not in the group PEL", gstart);
        }
        if s.groups.insert(name, g).is_some() {
            return at("duplicate stream consumer group", gstart);
        }
    }
    Ok(s)
}

#[cfg(test)]
mod tests {
    use crate::rdb::{dump_payload, restore_payload, Limits, SaveOpts};
    use crate::Value;

    /// DUMP payloads of redis-server 7.0.15: XADD s 1-1 a 1 b 2, 1-2 a 3
    /// b 4, 1-3 c 5; then XGROUP CREATE s g 0, XREADGROUP … COUNT 1 by
    /// alice, XDEL s 1-2 (its listpack is LZF-compressed).
    const PLAIN: &[u8] = b"\x13\x01\x10\x00\x00\x00\x00\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00\x01<<\x00\x00\x00\x19\x00\x03\x01\x00\x01\x02\x01\x81a\x02\x81b\x02\x00\x01\x02\x01\x00\x01\x00\x01\x01\x01\x02\x01\x05\x01\x02\x01\x00\x01\x01\x01\x03\x01\x04\x01\x05\x01\x00\x01\x00\x01\x02\x01\x01\x01\x81c\x02\x05\x01\x06\x01\xff\x03\x01\x03\x01\x01\x00\x00\x03\x00\n\x00\xa6\x12\x91\x1a\x12G\xd7w";
    const GROUPS: &[u8] = b"\x13\x01\x10\x00\x00\x00\x00\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00\x01\xc35<\x12<\x00\x00\x00\x19\x00\x02\x01\x01\x01\x02\x01\x81a\x02\x81b\x02\x00 \t\x00\x00 \x01@\x11\x02\x05\x01\x03`\t\x02\x03\x01\x04 \x0b@\x15@)\x07\x81c\x02\x05\x01\x06\x01\xff\x02\x01\x03\x01\x01\x01\x02\x03\x01\x01g\x01\x01\x01\x01\x00\x00\x00\x00\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00\x01\xee\xf6\xaa\x14\xa2\x01\x00\x00\x01\x01\x05alice\xee\xf6\xaa\x14\xa2\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00\x01\n\x00-\x85s$h\xff\xbd\x9d";

    /// What a loaded stream must take without a panic: walks both ways,
    /// deletions, an append, trims.
    fn exercise(s: &mut crate::Stream) {
        use crate::stream::{NodeLimits, Trim};
        use crate::StreamId;
        let mut fwd = Vec::new();
        s.range(StreamId::MIN, StreamId::MAX, false, |e| {
            fwd.push((e.id, e.to_pairs()));
            true
        });
        let mut rev = Vec::new();
        s.range(StreamId::MIN, StreamId::MAX, true, |e| {
            rev.push((e.id, e.to_pairs()));
            true
        });
        rev.reverse();
        assert_eq!(fwd, rev);
        assert_eq!(fwd.len() as u64, s.len());
        for (id, _) in fwd.iter().step_by(2) {
            s.delete_ids(&[*id]);
        }
        if let Some(next) = s.last_id.incr() {
            s.append(next, &["f", "v"], NodeLimits::default());
        }
        s.trim(Trim::MaxLen(1), false, 0);
        s.trim(Trim::MinId(s.last_id), true, 0);
    }

    #[test]
    fn payloads_match_redis() {
        let lim = Limits::default();
        let v = restore_payload(PLAIN, &lim, true).unwrap();
        assert_eq!(dump_payload(&v, &SaveOpts::default()), PLAIN);
        let v = restore_payload(GROUPS, &lim, true).unwrap();
        let Value::Stream(s) = &v else { panic!() };
        assert_eq!((s.len(), s.entries_added), (2, 3));
        assert_eq!(s.max_deleted_id, crate::StreamId::new(1, 2));
        let g = &s.groups[&b"g"[..]];
        assert_eq!(g.entries_read, 1);
        assert_eq!(g.pel.len(), 1);
        assert_eq!(g.consumers[&b"alice"[..]].pel.len(), 1);
        let plain = SaveOpts {
            compression: false,
            ..SaveOpts::default()
        };
        let again = dump_payload(&v, &plain);
        let w = restore_payload(&again, &lim, true).unwrap();
        assert_eq!(dump_payload(&w, &plain), again);
        assert_eq!(
            dump_payload(&w, &SaveOpts::default()),
            dump_payload(&v, &SaveOpts::default())
        );
        // Corruptions are errors, never panics.
        for i in 1..again.len() - 10 {
            for x in [1u8, 0x80, 0xff] {
                let mut bad = again.clone();
                bad[i] ^= x;
                let n = bad.len() - 8;
                let crc = crate::rdb::crc64::crc64(0, &bad[..n]);
                bad[n..].copy_from_slice(&crc.to_le_bytes());
                if let Ok(Value::Stream(mut s)) = restore_payload(&bad, &lim, true) {
                    exercise(&mut s);
                }
            }
        }
    }
}
