//! Reading RDB files and DUMP payloads.
//!
//! The parser reads a byte slice: every read is bounds-checked, and lengths
//! from the input only size allocations after the bytes they promise are
//! known to exist. A file or a socket is read through a window of that
//! slice ([`Input`]): a record that runs past the window's end is parsed
//! again once the window holds more, so a load holds one record's bytes,
//! not the whole image.

use super::blob::{intset_values, lp_each, zipmap_each, zl_each};
use super::crc64::crc64;
use super::wire::{at, blob_err, in_blob, parse_f64_text, LoadError, Reader, R};
use super::*;
use crate::listpack::LpVal;
use crate::{Hash, HashLimits, Quicklist, Set, SortedSet, Value, ZaddFlags, ZsetLimits};
use std::borrow::Cow;
use std::io::Read;

/// The thresholds that pick the encodings of loaded values.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    pub hash: HashLimits,
    pub zset: ZsetLimits,
    pub list_fill: i32,
    pub set_max_intset: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            hash: HashLimits::default(),
            zset: ZsetLimits::default(),
            list_fill: -2,
            set_max_intset: 512,
        }
    }
}

/// Why RESTORE refused a payload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RestoreError {
    /// Bad footer version or CRC (`DUMP payload version or checksum are wrong`).
    Checksum,
    /// The value does not parse (`Bad data format`).
    BadFormat(LoadError),
}

/// One key read from a file.
pub struct Loaded {
    pub db: usize,
    pub key: Vec<u8>,
    pub value: Value,
    pub expire_ms: Option<i64>,
    pub idle_s: Option<u64>,
    pub freq: Option<u8>,
}

/// Where a load puts what it reads. Any `FnMut(Loaded) -> Result<(),
/// String>` is one that ignores size hints.
pub trait Sink {
    /// One key; an error stops the load.
    fn key(&mut self, k: Loaded) -> Result<(), String>;
    /// RESIZEDB: database `db` is about to get `keys` keys, `expires` of
    /// them with a TTL (sizing the tables up front saves rehashing).
    fn resize(&mut self, _db: usize, _keys: u64, _expires: u64) {}
    /// A function library's code; an error stops the load. Sinks that
    /// only want keys skip it.
    fn function(&mut self, _code: Vec<u8>) -> Result<(), String> {
        Ok(())
    }
    /// The load has read `offset` bytes of the file (before each record).
    fn progress(&mut self, _offset: usize) {}
    /// An AUX field of the header (`redis-ver`, `used-mem`, …).
    fn aux(&mut self, _key: &[u8], _value: &[u8]) {}
    /// A key whose aggregate value is empty, which is not loaded.
    fn empty_key(&mut self, _key: &[u8]) {}
    /// A key's value, loaded or refused, held `blobs` listpacks and
    /// intsets (see `restore_payload_counted`). Not called for a record
    /// parsed again because the window ended in it.
    fn blobs(&mut self, _blobs: u64) {}
}

impl<F: FnMut(Loaded) -> Result<(), String>> Sink for F {
    fn key(&mut self, k: Loaded) -> Result<(), String> {
        self(k)
    }
}

/// What a whole load found besides the keys.
#[derive(Debug, Default)]
pub struct LoadSummary {
    pub version: u16,
    pub aux: Vec<(Vec<u8>, Vec<u8>)>,
    pub keys: usize,
    /// Keys skipped because their time had passed.
    pub expired: usize,
    /// Those keys, with their databases (a master restarting with a
    /// backlog tells its replicas to delete them).
    pub expired_keys: Vec<(usize, Vec<u8>)>,
    /// Empty aggregates skipped (Redis does the same).
    pub empty: usize,
    /// Where the image ends: an AOF written with the RDB preamble before
    /// Redis 7.0 goes on with commands from there.
    pub end: usize,
}

/// Builds values through the types' public APIs so the encodings follow
/// the configured thresholds.
struct Build<'l> {
    lim: &'l Limits,
}

impl Build<'_> {
    fn set_from<'x>(
        &self,
        n_hint: usize,
        items: impl Iterator<Item = Cow<'x, [u8]>>,
        start: usize,
    ) -> R<Set> {
        let _ = n_hint;
        let mut set: Option<Set> = None;
        for m in items {
            let s = set.get_or_insert_with(|| Set::new_for(&m));
            if !s.add(&m, self.lim.set_max_intset) {
                return at("Duplicate set members detected", start);
            }
        }
        Ok(set.unwrap_or_else(Set::new_table))
    }

    fn zset_from(&self, items: Vec<(Vec<u8>, f64)>, start: usize) -> R<SortedSet> {
        let maxlen = items.iter().map(|(m, _)| m.len()).max().unwrap_or(0);
        let mut z = SortedSet::with_hint(items.len(), maxlen, &self.lim.zset);
        for (m, s) in items {
            if s.is_nan() {
                return at("Zset with NAN score detected", start);
            }
            if z.contains(&m) {
                return at("Duplicate zset fields detected", start);
            }
            z.add(&m, s, ZaddFlags::default(), &self.lim.zset);
        }
        Ok(z)
    }

    /// `dup` names a repeated field the way Redis logs it for this encoding.
    fn hash_from(&self, pairs: Vec<(Vec<u8>, Vec<u8>)>, dup: &str, start: usize) -> R<Hash> {
        let mut h = Hash::new();
        if pairs.len() > self.lim.hash.max_listpack_entries {
            h.convert_to_table();
        }
        for (f, v) in pairs {
            if !h.set(&f, &v, &self.lim.hash) {
                return at(dup, start);
            }
        }
        Ok(h)
    }
}

fn lp_vec(blob: &[u8], start: usize, zl: bool) -> R<Vec<Vec<u8>>> {
    let mut v = Vec::new();
    let f = |x: LpVal| {
        v.push(x.to_vec());
        Ok(())
    };
    if zl {
        zl_each(blob, f)
    } else {
        lp_each(blob, f)
    }
    .map_err(|e| blob_err(e, start))?;
    Ok(v)
}

fn pairs(items: Vec<Vec<u8>>, start: usize) -> R<Vec<(Vec<u8>, Vec<u8>)>> {
    if !items.len().is_multiple_of(2) {
        return at("odd number of elements in a pair blob", start);
    }
    let mut out = Vec::with_capacity(items.len() / 2);
    let mut it = items.into_iter();
    while let (Some(a), Some(b)) = (it.next(), it.next()) {
        out.push((a, b));
    }
    Ok(out)
}

fn zpairs(items: Vec<Vec<u8>>, start: usize) -> R<Vec<(Vec<u8>, f64)>> {
    pairs(items, start)?
        .into_iter()
        .map(|(m, s)| match parse_f64_text(&s) {
            Some(v) => Ok((m, v)),
            None => at("invalid score in a sorted set blob", start),
        })
        .collect()
}

/// Reads one value of RDB type `t`. `None` for an empty aggregate.
/// `blobs` counts the listpacks and intsets reached, refused ones too.
fn read_value(r: &mut Reader, t: u8, lim: &Limits, blobs: &mut u64) -> R<Option<Value>> {
    let b = Build { lim };
    let start = r.p;
    let v = match t {
        TYPE_STRING => Value::str(&r.string()?),
        TYPE_LIST => {
            let n = r.count(1)?;
            let mut q = Quicklist::new(lim.list_fill);
            for _ in 0..n {
                q.push_back(&r.string()?);
            }
            Value::List(Box::new(q))
        }
        TYPE_LIST_ZIPLIST => {
            let blob = r.string()?;
            let mut q = Quicklist::new(lim.list_fill);
            for e in in_blob("List ziplist", lp_vec(&blob, start, true))? {
                q.push_back(&e);
            }
            Value::List(Box::new(q))
        }
        TYPE_LIST_QUICKLIST | TYPE_LIST_QUICKLIST_2 => {
            let n = r.count(1)?;
            let mut q = Quicklist::new(lim.list_fill);
            for _ in 0..n {
                let node_start = r.p;
                let container = if t == TYPE_LIST_QUICKLIST_2 {
                    r.len()?
                } else {
                    QL_PACKED
                };
                let blob = r.string()?;
                match container {
                    // Only elements too big for a packed node get a plain
                    // one, so an empty one is corrupt (Redis refuses it).
                    QL_PLAIN if blob.is_empty() => {
                        return at("empty plain quicklist node", node_start)
                    }
                    // Each node stays as saved, as Redis keeps it.
                    QL_PLAIN => q.push_node([blob]),
                    QL_PACKED => {
                        // An empty node is dropped, as Redis does; a list
                        // left with none is then skipped as an empty key.
                        let zl = t == TYPE_LIST_QUICKLIST;
                        *blobs += u64::from(!zl);
                        let what = if zl { "Ziplist" } else { "Listpack" };
                        q.push_node(in_blob(what, lp_vec(&blob, node_start, zl))?);
                    }
                    c => return at(format!("unknown quicklist container {c}"), node_start),
                }
            }
            Value::List(Box::new(q))
        }
        TYPE_SET => {
            let n = r.count(1)?;
            let mut items = Vec::with_capacity(n);
            for _ in 0..n {
                items.push(r.string()?);
            }
            Value::Set(b.set_from(n, items.into_iter(), start)?)
        }
        TYPE_SET_INTSET => {
            let blob = r.string()?;
            *blobs += 1;
            let vals = in_blob(
                "Intset",
                intset_values(&blob).map_err(|e| blob_err(e, start)),
            )?;
            let items = vals.iter().map(|v| Cow::Owned(v.to_string().into_bytes()));
            Value::Set(b.set_from(vals.len(), items, start)?)
        }
        TYPE_ZSET | TYPE_ZSET_2 => {
            let n = r.count(if t == TYPE_ZSET_2 { 9 } else { 2 })?;
            let mut items = Vec::with_capacity(n);
            for _ in 0..n {
                let m = r.string()?.into_owned();
                let s = if t == TYPE_ZSET_2 {
                    r.f64_bin()?
                } else {
                    r.f64_text()?
                };
                items.push((m, s));
            }
            Value::ZSet(b.zset_from(items, start)?)
        }
        TYPE_ZSET_ZIPLIST | TYPE_ZSET_LISTPACK => {
            let blob = r.string()?;
            let zl = t == TYPE_ZSET_ZIPLIST;
            *blobs += u64::from(!zl);
            let z = lp_vec(&blob, start, zl)
                .and_then(|items| zpairs(items, start))
                .and_then(|items| b.zset_from(items, start));
            Value::ZSet(in_blob(
                if zl { "Zset ziplist" } else { "Zset listpack" },
                z,
            )?)
        }
        TYPE_HASH => {
            let n = r.count(2)?;
            let mut items = Vec::with_capacity(n);
            for _ in 0..n {
                let f = r.string()?.into_owned();
                let v = r.string()?.into_owned();
                items.push((f, v));
            }
            Value::Hash(b.hash_from(items, "Hash with dup elements", start)?)
        }
        TYPE_HASH_ZIPLIST | TYPE_HASH_LISTPACK => {
            let blob = r.string()?;
            let zl = t == TYPE_HASH_ZIPLIST;
            *blobs += u64::from(!zl);
            let (what, dup) = if zl {
                ("Hash ziplist", "ziplist with dup elements")
            } else {
                ("Hash listpack", "listpack with dup elements")
            };
            let h = lp_vec(&blob, start, zl)
                .and_then(|items| pairs(items, start))
                .and_then(|p| b.hash_from(p, dup, start));
            Value::Hash(in_blob(what, h)?)
        }
        TYPE_HASH_ZIPMAP => {
            let blob = r.string()?;
            let mut items = Vec::new();
            let h = zipmap_each(&blob, |k, v| {
                items.push((k.to_vec(), v.to_vec()));
                Ok(())
            })
            .map_err(|e| blob_err(e, start))
            .and_then(|_| match items.is_empty() {
                // Redis refuses an empty zipmap rather than skip the key.
                true => at("empty zipmap", start),
                false => b.hash_from(items, "zipmap with dup elements", start),
            });
            Value::Hash(in_blob("Zipmap", h)?)
        }
        TYPE_MODULE | TYPE_MODULE_2 => {
            return at("module values are not supported", start.saturating_sub(1))
        }
        TYPE_STREAM_LISTPACKS | TYPE_STREAM_LISTPACKS_2 | TYPE_STREAM_LISTPACKS_3 => {
            Value::Stream(Box::new(super::stream::read(r, t, blobs)?))
        }
        _ => return at(format!("unknown value type {t}"), start.saturating_sub(1)),
    };
    Ok((!v.is_empty_aggregate()).then_some(v))
}

/// Checks a DUMP payload's footer and reads its value (RESTORE).
/// With `verify_checksum` false (DEBUG SET-SKIP-CHECKSUM-VALIDATION) the
/// CRC is not checked; the version still is.
pub fn restore_payload(
    p: &[u8],
    lim: &Limits,
    verify_checksum: bool,
) -> Result<Value, RestoreError> {
    restore_payload_counted(p, lim, verify_checksum, &mut 0)
}

/// As `restore_payload`, adding to `blobs` the listpacks and intsets the
/// value held, up to and including one that was refused: the blobs Redis
/// 7.0 deep-checks one by one (quicklist nodes, stream nodes), and counts
/// in `dump_payload_sanitizations` when it does. Its ziplists and zipmaps
/// it converts uncounted; a payload whose footer is wrong holds none.
pub fn restore_payload_counted(
    p: &[u8],
    lim: &Limits,
    verify_checksum: bool,
    blobs: &mut u64,
) -> Result<Value, RestoreError> {
    if p.len() < 10 {
        return Err(RestoreError::Checksum);
    }
    let body = p.len() - 10;
    let ver = u16::from_le_bytes([p[body], p[body + 1]]);
    if ver > RDB_VERSION {
        return Err(RestoreError::Checksum);
    }
    let mut c = [0u8; 8];
    c.copy_from_slice(&p[body + 2..]);
    if verify_checksum && crc64(0, &p[..body + 2]) != u64::from_le_bytes(c) {
        return Err(RestoreError::Checksum);
    }
    // The reader sees the footer too, as Redis's does: a string whose
    // length runs into it is read, not refused.
    let mut r = Reader::new(p);
    let bad = RestoreError::BadFormat;
    let t = r.byte().map_err(bad)?;
    match read_value(&mut r, t, lim, blobs).map_err(bad)? {
        Some(v) => Ok(v),
        None => Err(RestoreError::BadFormat(LoadError {
            msg: "empty value".into(),
            offset: 0,
        })),
    }
}

/// Checks a FUNCTION DUMP payload's footer and returns each library's code
/// (FUNCTION RESTORE): one function-library opcode and string per library.
pub fn function_payload(p: &[u8]) -> Option<Vec<Vec<u8>>> {
    if p.len() < 10 {
        return None;
    }
    let body = p.len() - 10;
    let ver = u16::from_le_bytes([p[body], p[body + 1]]);
    let mut c = [0u8; 8];
    c.copy_from_slice(&p[body + 2..]);
    if ver > RDB_VERSION || crc64(0, &p[..body + 2]) != u64::from_le_bytes(c) {
        return None;
    }
    let mut r = Reader::new(&p[..body]);
    let mut libs = Vec::new();
    while r.p < body {
        if r.byte().ok()? != OP_FUNCTION2 {
            return None;
        }
        libs.push(r.string().ok()?.into_owned());
    }
    Some(libs)
}

/// Reads an RDB image held in memory, handing each live key to `sink` (keys whose
/// expiry is before `now_ms` are skipped, as a master does).
/// `verify_checksum` follows `rdbchecksum`; a stored checksum of 0 means
/// the writer had it disabled.
pub fn load(
    data: &[u8],
    lim: &Limits,
    now_ms: i64,
    verify_checksum: bool,
    sink: impl FnMut(Loaded) -> Result<(), String>,
) -> R<LoadSummary> {
    load_into(data, lim, now_ms, verify_checksum, sink)
}

/// As `load`, with a sink that also takes the file's size hints.
pub fn load_into(
    data: &[u8],
    lim: &Limits,
    now_ms: i64,
    verify_checksum: bool,
    sink: impl Sink,
) -> R<LoadSummary> {
    load_input(Input::whole(data), lim, now_ms, verify_checksum, sink)
}

/// What a load reads: a slice held whole, or a reader (a file, a socket)
/// read as the parser needs it.
pub struct Input<'d> {
    held: Cow<'d, [u8]>,
    /// The offset of `held[0]` in the input.
    base: usize,
    /// None once the input has ended.
    src: Option<&'d mut dyn Read>,
    /// The CRC64 of the bytes before `base`.
    crc: u64,
    size: Option<usize>,
    /// The least a read asks for.
    chunk: usize,
}

/// How much a streamed load reads at a time, at the least.
const CHUNK: usize = 256 << 10;

impl<'d> Input<'d> {
    pub fn whole(data: &'d [u8]) -> Self {
        Input {
            held: Cow::Borrowed(data),
            base: 0,
            src: None,
            crc: 0,
            size: Some(data.len()),
            chunk: CHUNK,
        }
    }

    /// `src`, whose length is `size` where known.
    pub fn stream(src: &'d mut dyn Read, size: Option<usize>) -> Self {
        Input {
            held: Cow::Owned(Vec::new()),
            base: 0,
            src: Some(src),
            crc: 0,
            size,
            chunk: CHUNK,
        }
    }

    /// Reads `n` bytes at a time at the least: tests cut records anywhere
    /// with small windows.
    pub fn reading(self, n: usize) -> Self {
        Input {
            chunk: n.max(1),
            ..self
        }
    }

    /// A file just opened (the image's size is the file's).
    pub fn file(f: &'d mut std::fs::File) -> Self {
        let size = f.metadata().ok().map(|m| m.len() as usize);
        Self::stream(f, size)
    }

    /// Forgets the bytes before offset `keep` and reads at least as many
    /// as are still held; false if the input has ended.
    fn more(&mut self, keep: usize) -> R<bool> {
        let Some(src) = self.src.as_mut() else {
            return Ok(false);
        };
        let buf = self.held.to_mut();
        let gone = keep - self.base;
        self.crc = crc64(self.crc, &buf[..gone]);
        buf.drain(..gone);
        self.base = keep;
        let (old, want) = (buf.len(), buf.len().max(self.chunk));
        buf.resize(old + want, 0);
        let mut got = 0;
        while got < want {
            match src.read(&mut buf[old + got..]) {
                Ok(0) => break,
                Ok(n) => got += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return at(format!("read error: {e}"), keep + old + got),
            }
        }
        buf.truncate(old + got);
        if got < want {
            self.src = None;
        }
        Ok(got > 0)
    }
}

/// The state a load carries from one record to the next.
#[derive(Default)]
struct Pos {
    db: usize,
    expire: Option<i64>,
    idle: Option<u64>,
    freq: Option<u8>,
}

/// As `load_into`, from `input`.
pub fn load_input(
    mut input: Input,
    lim: &Limits,
    now_ms: i64,
    verify_checksum: bool,
    mut sink: impl Sink,
) -> R<LoadSummary> {
    while input.held.len() < 9 && input.more(0)? {}
    let mut r = Reader::new(&input.held);
    let magic = r
        .take(9)
        .or_else(|_| at("file too short for an RDB header", 0))?;
    if &magic[..5] != b"REDIS" {
        return at("wrong signature (not an RDB file)", 0);
    }
    let ver: u16 = std::str::from_utf8(&magic[5..])
        .ok()
        .filter(|s| s.bytes().all(|b| b.is_ascii_digit()))
        .and_then(|s| s.parse().ok())
        .map_or_else(|| at("bad RDB version number", 5), Ok)?;
    if ver == 0 || ver > RDB_VERSION {
        return at(format!("can't handle RDB format version {ver}"), 5);
    }
    let mut sum = LoadSummary {
        version: ver,
        ..LoadSummary::default()
    };
    // A size hint may not promise more keys than the input has room for
    // (a key record takes at least 3 bytes); one of unknown size, a
    // table of at most 8 MB.
    let most = input.size.map_or(1 << 20, |n| n as u64 / 3);
    let mut pos = Pos::default();
    let mut from = 9;
    loop {
        let base = input.base;
        let mut r = Reader::window(&input.held, input.src.is_some());
        r.p = from - base;
        let mut op_at = r.p;
        let done = records(
            &mut r, &mut op_at, base, lim, now_ms, most, &mut pos, &mut sink, &mut sum,
        );
        match done {
            Ok(crc_at) => {
                if verify_checksum && crc_at > 0 {
                    let stored =
                        u64::from_le_bytes(input.held[crc_at..crc_at + 8].try_into().unwrap());
                    let actual = crc64(input.crc, &input.held[..crc_at]);
                    if stored != 0 && actual != stored {
                        return at(
                            format!("RDB CRC error: wrong checksum (expected {actual:016x}, file has {stored:016x})"),
                            base + crc_at,
                        );
                    }
                }
                sum.end = base + r.p;
                return Ok(sum);
            }
            Err(_) if r.short() => {
                from = base + op_at;
                input.more(from)?;
            }
            Err(e) => {
                return Err(LoadError {
                    offset: base + e.offset,
                    ..e
                })
            }
        }
    }
}

/// Reads records up to and including the end (and the checksum after it,
/// from version 5), returning where the checksum is (0: none).
/// `op_at` is left at the start of the record that failed.
#[allow(clippy::too_many_arguments)]
fn records(
    r: &mut Reader,
    op_at: &mut usize,
    base: usize,
    lim: &Limits,
    now_ms: i64,
    most: u64,
    pos: &mut Pos,
    sink: &mut impl Sink,
    sum: &mut LoadSummary,
) -> R<usize> {
    loop {
        *op_at = r.p;
        sink.progress(base + r.p);
        let op = r.byte()?;
        match op {
            OP_EOF => {
                if sum.version < 5 {
                    return Ok(0);
                }
                r.take(8)?;
                return Ok(r.p - 8);
            }
            OP_SELECTDB => {
                let n = r.len()?;
                pos.db = usize::try_from(n)
                    .ok()
                    .filter(|&d| d < 1 << 20)
                    .map_or_else(|| at(format!("bad database number {n}"), *op_at), Ok)?;
            }
            OP_RESIZEDB => {
                let (keys, expires) = (r.len()?.min(most), r.len()?.min(most));
                sink.resize(pos.db, keys, expires);
            }
            OP_EXPIRETIME_MS => {
                let s = r.take(8)?;
                pos.expire = Some(i64::from_le_bytes(s.try_into().unwrap()));
            }
            OP_EXPIRETIME => {
                let s = r.take(4)?;
                pos.expire = Some(i32::from_le_bytes(s.try_into().unwrap()) as i64 * 1000);
            }
            OP_IDLE => pos.idle = Some(r.len()?),
            OP_FREQ => pos.freq = Some(r.byte()?),
            OP_AUX => {
                let k = r.string()?.into_owned();
                let v = r.string()?.into_owned();
                sink.aux(&k, &v);
                sum.aux.push((k, v));
            }
            OP_MODULE_AUX => return at("module aux data is not supported", *op_at),
            OP_FUNCTION => return at("pre-release function format not supported", *op_at),
            OP_FUNCTION2 => {
                let code = r.string()?.into_owned();
                sink.function(code).or_else(|e| at(e, *op_at))?;
            }
            t => {
                let key = r.string()?.into_owned();
                let mut blobs = 0;
                let value = read_value(r, t, lim, &mut blobs);
                // A record cut by the window is read again, and counted then.
                if value.is_ok() || !r.short() {
                    sink.blobs(blobs);
                }
                let value = value?;
                let exp = pos.expire.take();
                let (idle_s, fr) = (pos.idle.take(), pos.freq.take());
                let Some(value) = value else {
                    sink.empty_key(&key);
                    sum.empty += 1;
                    continue;
                };
                if exp.is_some_and(|t| t < now_ms) {
                    sum.expired += 1;
                    sum.expired_keys.push((pos.db, key));
                    continue;
                }
                sink.key(Loaded {
                    db: pos.db,
                    key,
                    value,
                    expire_ms: exp,
                    idle_s,
                    freq: fr,
                })
                .or_else(|e| at(e, *op_at))?;
                sum.keys += 1;
            }
        }
    }
}
