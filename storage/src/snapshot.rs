//! Point-in-time snapshots of a live keyspace without fork and without a
//! copy: "serialize before overwrite".
//!
//! A snapshot has an epoch `E`. Every keyspace entry records (in its dict
//! node, next to the access clock) the epoch at
//! which it was last written to a snapshot. Starting a snapshot raises the
//! database's epoch to `E` (O(1)); from then on:
//!
//! - the background walk ([`crate::Db::snapshot_step`]) follows
//!   `Dict::scan`'s cursor, which survives rehashing, and serializes every
//!   entry whose epoch is below `E`, marking it `E` (a key the cursor returns
//!   twice is skipped the second time);
//! - every mutation path of [`crate::Db`] (`get_mut`, `set`, `remove`,
//!   `take_entry`, `set_expire`, `persist`, …) first serializes an entry
//!   still below `E` — its value as of the snapshot start — and marks it;
//! - keys created meanwhile get epoch `E` at creation and are not saved.
//!
//! Each key is therefore written exactly once, with its value at the
//! snapshot's start. The records of a database accumulate in its
//! [`Capture::out`] until the saver takes them; record order within the file
//! does not matter to a loader.
//!
//! LZF compression, most of a record's cost, is left to the saver, which
//! runs it without the lock ([`compress_marked`]): a string that may
//! compress (a key or string value over 20 bytes) is recorded plain, which
//! a loader reads as well, and its place noted in [`Capture::plain`].

use crate::rdb::encode::{put_value, value_type};
use crate::rdb::wire::{put_len, put_string, MIN_COMPRESS};
use crate::rdb::{SaveOpts, OP_EXPIRETIME_MS, OP_FREQ, OP_IDLE, OP_RESIZEDB, OP_SELECTDB};
use crate::value::StrValue;
use crate::Value;

/// Which access metadata each record carries (as the eviction policy
/// wants: LRU idle seconds, the LFU counter, or neither).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyMeta {
    None,
    Lru,
    Lfu,
}

/// Room made for a database's records when its snapshot starts: an idle
/// walk's slice (the saver takes them at 4 KB) and what one key adds.
const OUT_START: usize = 8 << 10;

/// A running snapshot of one database.
pub struct Capture {
    /// The database's number in the snapshot (it travels with the data
    /// through SWAPDB, which swaps whole `Db`s).
    pub index: usize,
    pub(crate) epoch: u32,
    pub(crate) cursor: u64,
    pub(crate) walk_done: bool,
    /// Serialized key records not yet taken by the saver.
    pub out: Vec<u8>,
    /// The strings of `out` recorded plain for the saver to compress.
    pub plain: Vec<Plain>,
    pub(crate) opts: SaveOpts,
    pub(crate) meta: KeyMeta,
    /// Keys and keys with a TTL at the start (RESIZEDB, INFO's
    /// current_save_keys_total).
    pub keys_total: usize,
    pub expires_total: usize,
    /// Keys serialized so far (walk and pre-write captures).
    pub keys_saved: u64,
    /// Of those, saved by a write before the walk reached them.
    pub keys_captured: u64,
}

impl Capture {
    pub(crate) fn new(
        index: usize,
        epoch: u32,
        opts: SaveOpts,
        meta: KeyMeta,
        keys: usize,
        expires: usize,
    ) -> Capture {
        Capture {
            index,
            epoch,
            cursor: 0,
            walk_done: keys == 0,
            // Made here, by the thread that starts the snapshot, so that
            // its saver allocates nothing for the first slices.
            out: Vec::with_capacity(if keys > 0 { OUT_START } else { 0 }),
            plain: Vec::with_capacity(if keys > 0 { OUT_START / 32 } else { 0 }),
            opts,
            meta,
            keys_total: keys,
            expires_total: expires,
            keys_saved: 0,
            keys_captured: 0,
        }
    }

    pub fn walk_done(&self) -> bool {
        self.walk_done
    }

    /// Appends one key's record.
    pub(crate) fn record(
        &mut self,
        key: &[u8],
        v: &Value,
        expire_ms: Option<i64>,
        idle_s: u64,
        freq: u8,
    ) {
        let out = &mut self.out;
        if let Some(t) = expire_ms {
            out.push(OP_EXPIRETIME_MS);
            out.extend_from_slice(&t.to_le_bytes());
        }
        match self.meta {
            KeyMeta::None => {}
            KeyMeta::Lru => {
                out.push(OP_IDLE);
                put_len(out, idle_s);
            }
            KeyMeta::Lfu => {
                out.push(OP_FREQ);
                out.push(freq);
            }
        }
        out.push(value_type(v));
        self.put_str(key);
        match v {
            Value::Str(s) if !matches!(s, StrValue::Int(_)) => {
                self.put_str(s.as_bytes(&mut itoa::Buffer::new()))
            }
            _ => put_value(&mut self.out, v, &self.opts),
        }
        self.keys_saved += 1;
    }

    /// A string, plain and noted in `plain` if it may compress.
    fn put_str(&mut self, s: &[u8]) {
        if !self.opts.compression || s.len() <= MIN_COMPRESS {
            put_string(&mut self.out, s, self.opts.compression);
            return;
        }
        let at = self.out.len();
        put_len(&mut self.out, s.len() as u64);
        let start = self.out.len();
        self.out.extend_from_slice(s);
        self.plain.push(Plain {
            at,
            start,
            end: self.out.len(),
        });
    }
}

/// A string recorded plain: its length prefix at `at`, its bytes at
/// `start..end`.
#[derive(Clone, Copy, Debug)]
pub struct Plain {
    pub at: usize,
    pub start: usize,
    pub end: usize,
}

impl Plain {
    /// The same string `by` bytes further on.
    pub fn shifted(self, by: usize) -> Plain {
        Plain {
            at: self.at + by,
            start: self.start + by,
            end: self.end + by,
        }
    }
}

/// `records` with the strings `plain` notes compressed as the eager
/// encoding would have, into `out`: the same bytes as a save that
/// compressed while recording.
pub fn compress_marked(records: &[u8], plain: &[Plain], out: &mut Vec<u8>) {
    out.clear();
    let mut from = 0;
    for p in plain {
        out.extend_from_slice(&records[from..p.at]);
        put_string(out, &records[p.start..p.end], true);
        from = p.end;
    }
    out.extend_from_slice(&records[from..]);
}

/// The SELECTDB opcode (and, the first time, RESIZEDB) that must precede a
/// database's records in the stream.
pub fn select_db(out: &mut Vec<u8>, index: usize, resize: Option<(usize, usize)>) {
    out.push(OP_SELECTDB);
    put_len(out, index as u64);
    if let Some((keys, expires)) = resize {
        out.push(OP_RESIZEDB);
        put_len(out, keys as u64);
        put_len(out, expires as u64);
    }
}
