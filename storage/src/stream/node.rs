//! Walking a stream node's listpack (layout in the module above): its
//! master entry, and its entries forwards and backwards.
//!
//! Nodes are built here or checked by [`validate`] when loaded, so the
//! walk trusts the layout.

use super::{Entry, StreamId, FLAG_DELETED, FLAG_SAMEFIELDS};
use crate::listpack::{Listpack, LpVal};

/// The master entry of a node.
pub struct Master {
    pub count: i64,
    pub deleted: i64,
    pub nfields: usize,
    /// Offset of the first master field.
    pub fields_at: usize,
    /// Offset of the first entry (just past the master's terminator).
    pub entries_at: usize,
}

fn int(lp: &Listpack, off: usize) -> i64 {
    match lp.get_at(off) {
        LpVal::Int(n) => n,
        LpVal::Str(_) => 0,
    }
}

/// The offset after the entry at `off` (the end offset after the last).
fn adv(lp: &Listpack, off: usize) -> usize {
    lp.next(off).unwrap_or(lp.as_bytes().len())
}

impl Master {
    pub fn read(lp: &Listpack) -> Master {
        let count = int(lp, 0);
        let p = adv(lp, 0);
        let deleted = int(lp, p);
        let p = adv(lp, p);
        let nfields = int(lp, p) as usize;
        let fields_at = adv(lp, p);
        let mut p = fields_at;
        for _ in 0..nfields {
            p = adv(lp, p);
        }
        Master {
            count,
            deleted,
            nfields,
            fields_at,
            entries_at: adv(lp, p),
        }
    }

    /// The live and deleted counters alone.
    pub fn counts(lp: &Listpack) -> (i64, i64) {
        (int(lp, 0), int(lp, adv(lp, 0)))
    }

    /// Rewrites the live and deleted counters.
    pub fn set_counts(lp: &mut Listpack, count: i64, deleted: i64) {
        lp.replace_at(0, LpVal::Int(count));
        let p = adv(lp, 0);
        lp.replace_at(p, LpVal::Int(deleted));
    }
}

/// An entry found by a walk (live or deleted).
pub struct RawEntry {
    pub id: StreamId,
    pub flags: i64,
    pub flags_at: usize,
    pub deleted: bool,
    at: usize,
    nfields: usize,
    same: bool,
}

impl RawEntry {
    pub fn view<'a>(&self, lp: &'a Listpack, m: &'a Master) -> Entry<'a> {
        Entry {
            id: self.id,
            lp,
            master: m,
            at: self.at,
            nfields: self.nfields,
            same: self.same,
        }
    }
}

/// Reads the entry whose flags are at `off`; returns it and the offset
/// after its lp-count.
fn read_entry(lp: &Listpack, m: &Master, master: StreamId, off: usize) -> (RawEntry, usize) {
    let flags = int(lp, off);
    let p = adv(lp, off);
    let ms = master.ms.wrapping_add(int(lp, p) as u64);
    let p = adv(lp, p);
    let seq = master.seq.wrapping_add(int(lp, p) as u64);
    let mut p = adv(lp, p);
    let same = flags & FLAG_SAMEFIELDS != 0;
    let nfields = if same {
        m.nfields
    } else {
        let n = int(lp, p) as usize;
        p = adv(lp, p);
        n
    };
    let at = p;
    let skip = if same { nfields } else { nfields * 2 };
    for _ in 0..skip {
        p = adv(lp, p);
    }
    let end = adv(lp, p);
    let e = RawEntry {
        id: StreamId { ms, seq },
        flags,
        flags_at: off,
        deleted: flags & FLAG_DELETED != 0,
        at,
        nfields,
        same,
    };
    (e, end)
}

/// A position between entries of one node.
pub struct Cursor(usize);

impl Cursor {
    pub fn first(_lp: &Listpack, m: &Master) -> Cursor {
        Cursor(m.entries_at)
    }

    pub fn last(lp: &Listpack, _m: &Master) -> Cursor {
        Cursor(lp.as_bytes().len())
    }

    pub fn next(&mut self, lp: &Listpack, m: &Master, master: StreamId) -> Option<RawEntry> {
        if self.0 >= lp.as_bytes().len() {
            return None;
        }
        let (e, end) = read_entry(lp, m, master, self.0);
        self.0 = end;
        Some(e)
    }

    pub fn prev(&mut self, lp: &Listpack, m: &Master, master: StreamId) -> Option<RawEntry> {
        if self.0 <= m.entries_at {
            return None;
        }
        let mut p = lp.prev(self.0)?;
        for _ in 0..int(lp, p) {
            p = lp.prev(p)?;
        }
        self.0 = p;
        Some(read_entry(lp, m, master, p).0)
    }
}

/// Checks a loaded node's layout so the walks above can trust it: the
/// master entry, each entry's integers, flags and lp-count, IDs ascending
/// from the master ID, and the counters. Returns the live entry count.
pub fn validate(lp: &Listpack, master: StreamId) -> Result<u64, &'static str> {
    let vals: Vec<LpVal> = lp.iter().collect();
    let get_int = |i: usize| match vals.get(i) {
        Some(LpVal::Int(n)) => Ok(*n),
        Some(_) => Err("stream node: integer expected"),
        None => Err("stream node: truncated"),
    };
    let count = get_int(0)?;
    let deleted = get_int(1)?;
    let nfields = get_int(2)?;
    if count < 0 || deleted < 0 || nfields < 0 || nfields as usize > vals.len() {
        return Err("stream node: bad master entry");
    }
    let mut i = 3 + nfields as usize;
    if get_int(i)? != 0 {
        return Err("stream node: bad master entry terminator");
    }
    i += 1;
    let (mut live, mut dead) = (0i64, 0i64);
    let mut prev: Option<StreamId> = None;
    while i < vals.len() {
        let start = i;
        let flags = get_int(i)?;
        if !(0..=3).contains(&flags) {
            return Err("stream node: bad entry flags");
        }
        let id = StreamId {
            ms: master.ms.wrapping_add(get_int(i + 1)? as u64),
            seq: master.seq.wrapping_add(get_int(i + 2)? as u64),
        };
        if id < master || prev.is_some_and(|p| id <= p) {
            return Err("stream node: entry IDs out of order");
        }
        prev = Some(id);
        i += 3;
        let n = if flags & FLAG_SAMEFIELDS != 0 {
            nfields as usize
        } else {
            let n = get_int(i)?;
            if n < 0 || n as usize > vals.len() {
                return Err("stream node: bad field count");
            }
            i += 1;
            n as usize * 2
        };
        i += n;
        if i >= vals.len() || get_int(i)? != (i - start) as i64 {
            return Err("stream node: bad entry lp-count");
        }
        i += 1;
        if flags & FLAG_DELETED != 0 {
            dead += 1;
        } else {
            live += 1;
        }
    }
    if live != count || dead != deleted {
        return Err("stream node: counters do not match its entries");
    }
    if live + dead == 0 {
        return Err("stream node: empty");
    }
    Ok(live as u64)
}
