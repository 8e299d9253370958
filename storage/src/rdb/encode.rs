//! Writing RDB files and DUMP payloads.

use super::blob::{intset_blob, LpBuilder};
use super::crc64::crc64;
use super::wire::{put_int_special, put_len, put_lzf, put_string};
use super::*;
use crate::listpack::LpVal;
use crate::num::d2string;
use crate::quicklist::SavedNode;
use crate::{StrValue, Value};
use std::io::{self, Write};

/// The options that change the bytes written.
#[derive(Clone, Copy, Debug)]
pub struct SaveOpts {
    /// `rdbcompression`: LZF for strings (and blobs) over 20 bytes.
    pub compression: bool,
    /// `rdbchecksum`: a CRC-64 trailer, else 0.
    pub checksum: bool,
    /// The file is an AOF base (its `aof-base` aux field says 1).
    pub aof_base: bool,
    /// The replication position the snapshot is at, for a master with a
    /// backlog or a replica with a master: a restart then resyncs
    /// partially.
    pub repl: Option<ReplAux>,
}

/// The `repl-stream-db`, `repl-id` and `repl-offset` aux fields.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReplAux {
    pub db: usize,
    pub id: [u8; 40],
    pub offset: u64,
}

impl Default for SaveOpts {
    fn default() -> Self {
        SaveOpts {
            compression: true,
            checksum: true,
            aof_base: false,
            repl: None,
        }
    }
}

fn put_lpval(out: &mut Vec<u8>, v: LpVal, compress: bool) {
    match v {
        LpVal::Str(s) => put_string(out, s, compress),
        LpVal::Int(n) => {
            if !put_int_special(out, n) {
                put_string(out, itoa::Buffer::new().format(n).as_bytes(), compress);
            }
        }
    }
}

/// The RDB type byte for a value, as Redis 7.0 picks it.
pub fn value_type(v: &Value) -> u8 {
    match v {
        Value::Str(_) => TYPE_STRING,
        Value::List(_) => TYPE_LIST_QUICKLIST_2,
        Value::Hash(h) => {
            if h.as_listpack().is_some() {
                TYPE_HASH_LISTPACK
            } else {
                TYPE_HASH
            }
        }
        Value::Set(s) => {
            if s.as_intset().is_some() {
                TYPE_SET_INTSET
            } else {
                TYPE_SET
            }
        }
        Value::ZSet(z) => {
            if z.as_listpack().is_some() {
                TYPE_ZSET_LISTPACK
            } else {
                TYPE_ZSET_2
            }
        }
        Value::Stream(_) => TYPE_STREAM_LISTPACKS_2,
    }
}

/// The value's serialization (without its type byte).
pub fn put_value(out: &mut Vec<u8>, v: &Value, opts: &SaveOpts) {
    let cz = opts.compression;
    match v {
        Value::Str(s) => match s {
            StrValue::Int(n) => put_lpval(out, LpVal::Int(*n), cz),
            _ => put_string(out, s.as_bytes(&mut itoa::Buffer::new()), cz),
        },
        Value::List(l) => {
            // Redis writes the nodes it holds: their bounds, and the LZF of
            // those it keeps compressed.
            put_len(out, l.node_count() as u64);
            for n in l.saved_nodes() {
                match n {
                    SavedNode::Plain(e) => {
                        put_len(out, QL_PLAIN);
                        put_string(out, e.bytes(&mut itoa::Buffer::new()), cz);
                    }
                    SavedNode::Lzf(c, sz) => {
                        put_len(out, QL_PACKED);
                        put_lzf(out, c, sz);
                    }
                    SavedNode::Packed(lp) => {
                        put_len(out, QL_PACKED);
                        put_string(out, &lp, cz);
                    }
                }
            }
        }
        Value::Hash(h) => {
            if h.as_listpack().is_some() {
                let mut b = LpBuilder::new();
                for (f, v) in h.iter() {
                    b.push(f);
                    b.push(v);
                }
                put_string(out, &b.finish(), cz);
            } else {
                put_len(out, h.len() as u64);
                for (f, v) in h.iter() {
                    put_lpval(out, f, cz);
                    put_lpval(out, v, cz);
                }
            }
        }
        Value::Set(s) => {
            if let Some(is) = s.as_intset() {
                put_string(out, &intset_blob(is.width(), is.iter()), cz);
            } else {
                put_len(out, s.len() as u64);
                for m in s.iter() {
                    put_lpval(out, m, cz);
                }
            }
        }
        Value::ZSet(z) => {
            if z.as_listpack().is_some() {
                let mut b = LpBuilder::new();
                z.for_each(|m, s| {
                    b.push_bytes(m);
                    b.push_bytes(d2string(s).as_bytes());
                });
                put_string(out, &b.finish(), cz);
            } else {
                // Greatest first, as Redis walks its skiplist from the tail
                // (loading then inserts each element at the head).
                put_len(out, z.len() as u64);
                let mut items = Vec::new();
                let mut ends = Vec::with_capacity(z.len());
                z.for_each(|m, s| {
                    put_string(&mut items, m, cz);
                    items.extend_from_slice(&s.to_le_bytes());
                    ends.push(items.len());
                });
                for i in (0..ends.len()).rev() {
                    let start = if i == 0 { 0 } else { ends[i - 1] };
                    out.extend_from_slice(&items[start..ends[i]]);
                }
            }
        }
        Value::Stream(s) => super::stream::write(out, s, cz),
    }
}

/// A DUMP payload: type, value, RDB version (2 bytes LE), CRC-64 (LE).
pub fn dump_payload(v: &Value, opts: &SaveOpts) -> Vec<u8> {
    let mut out = vec![value_type(v)];
    put_value(&mut out, v, opts);
    out.extend_from_slice(&RDB_VERSION.to_le_bytes());
    let crc = crc64(0, &out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

/// A FUNCTION DUMP payload: each library's code after the function-library
/// opcode, then the RDB version and CRC-64, as Redis 7.0 writes it.
pub fn function_dump_payload<'a>(libs: impl Iterator<Item = &'a [u8]>, compress: bool) -> Vec<u8> {
    let mut out = Vec::new();
    for code in libs {
        out.push(OP_FUNCTION2);
        put_string(&mut out, code, compress);
    }
    out.extend_from_slice(&RDB_VERSION.to_le_bytes());
    let crc = crc64(0, &out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

/// Streams a snapshot to `w`: [`Writer::header`], then per database
/// [`Writer::select_db`] and its keys ([`Writer::key`]), then
/// [`Writer::finish`]. Output is buffered; the CRC runs over what is
/// written.
pub struct Writer<W: Write> {
    w: W,
    buf: Vec<u8>,
    crc: u64,
    opts: SaveOpts,
    written: u64,
}

const FLUSH_AT: usize = 64 * 1024;

impl<W: Write> Writer<W> {
    pub fn new(w: W, opts: SaveOpts) -> Self {
        Writer {
            w,
            // Grown as written: a header alone (a full sync's) stays small.
            buf: Vec::new(),
            crc: 0,
            opts,
            written: 0,
        }
    }

    fn maybe_flush(&mut self) -> io::Result<()> {
        if self.buf.len() >= FLUSH_AT {
            self.flush_buf()?;
        }
        Ok(())
    }

    fn flush_buf(&mut self) -> io::Result<()> {
        if self.opts.checksum {
            self.crc = crc64(self.crc, &self.buf);
        }
        self.w.write_all(&self.buf)?;
        self.written += self.buf.len() as u64;
        self.buf.clear();
        Ok(())
    }

    /// Bytes produced so far.
    pub fn bytes_written(&self) -> u64 {
        self.written + self.buf.len() as u64
    }

    fn aux(&mut self, k: &str, v: &[u8]) {
        self.buf.push(OP_AUX);
        put_string(&mut self.buf, k.as_bytes(), self.opts.compression);
        put_string(&mut self.buf, v, self.opts.compression);
    }

    /// Magic, version and the aux fields Redis 7.0 writes, in its order.
    pub fn header(&mut self, redis_ver: &str, ctime_s: i64, used_mem: u64) -> io::Result<()> {
        self.buf
            .extend_from_slice(format!("REDIS{:04}", RDB_VERSION).as_bytes());
        self.aux("redis-ver", redis_ver.as_bytes());
        self.aux("redis-bits", b"64");
        self.aux("ctime", ctime_s.to_string().as_bytes());
        self.aux("used-mem", used_mem.to_string().as_bytes());
        if let Some(r) = self.opts.repl {
            self.aux("repl-stream-db", r.db.to_string().as_bytes());
            self.aux("repl-id", &r.id);
            self.aux("repl-offset", r.offset.to_string().as_bytes());
        }
        let base: &[u8] = if self.opts.aof_base { b"1" } else { b"0" };
        self.aux("aof-base", base);
        self.maybe_flush()
    }

    /// One function library's code, as Redis 7.0 saves it after the aux
    /// fields.
    pub fn function(&mut self, code: &[u8]) -> io::Result<()> {
        self.buf.push(OP_FUNCTION2);
        put_string(&mut self.buf, code, self.opts.compression);
        self.maybe_flush()
    }

    /// Starts database `db` with its key and expire counts (RESIZEDB).
    pub fn select_db(&mut self, db: usize, keys: usize, expires: usize) -> io::Result<()> {
        self.buf.push(OP_SELECTDB);
        put_len(&mut self.buf, db as u64);
        self.buf.push(OP_RESIZEDB);
        put_len(&mut self.buf, keys as u64);
        put_len(&mut self.buf, expires as u64);
        self.maybe_flush()
    }

    /// One key: its expiry (absolute unix ms), LRU idle seconds or LFU
    /// counter if the eviction policy keeps them, type, name and value.
    pub fn key(
        &mut self,
        key: &[u8],
        v: &Value,
        expire_ms: Option<i64>,
        idle_s: Option<u64>,
        freq: Option<u8>,
    ) -> io::Result<()> {
        if let Some(t) = expire_ms {
            self.buf.push(OP_EXPIRETIME_MS);
            self.buf.extend_from_slice(&t.to_le_bytes());
        }
        if let Some(i) = idle_s {
            self.buf.push(OP_IDLE);
            put_len(&mut self.buf, i);
        }
        if let Some(f) = freq {
            self.buf.push(OP_FREQ);
            self.buf.push(f);
        }
        self.buf.push(value_type(v));
        put_string(&mut self.buf, key, self.opts.compression);
        put_value(&mut self.buf, v, &self.opts);
        self.maybe_flush()
    }

    /// EOF and the checksum (0 with `rdbchecksum no`); returns the writer.
    pub fn finish(mut self) -> io::Result<W> {
        self.buf.push(OP_EOF);
        self.flush_buf()?;
        let crc = if self.opts.checksum { self.crc } else { 0 };
        self.w.write_all(&crc.to_le_bytes())?;
        self.w.flush()?;
        Ok(self.w)
    }
}
