//! The hash type with Redis 7.0's two encodings.
//!
//! - `Listpack`: field, value, field, value, … in insertion order (new
//!   fields are appended, updates rewrite the value in place). Lookups walk
//!   the fields: O(n), with n ≤ `hash-max-listpack-entries` (128 default).
//! - `Table`: a [`Dict`] field → value (`CBytes`, inline up to 22 bytes):
//!   O(1) lookups, incremental rehashing, reverse-binary HSCAN cursor.
//!
//! Invariants: fields are unique; a listpack hash has at most
//! `max_listpack_entries` fields and no field or value longer than
//! `max_listpack_value` bytes. Conversion is one way, listpack → table,
//! before a write that would break either limit; nothing converts back.
//!
//! Measured (test `bytes_per_element`): 10 fields "fieldN" → "valueN" take
//! 160 bytes of listpack, 16 bytes per field/value pair (8 per string:
//! 6 bytes + header + backlen); 167 with the 7 header bytes, exactly Redis
//! 7.0.15's DEBUG LISTPACK total for the same hash. Stored as one exact
//! allocation of 164 bytes (entries + 4-byte count), held unboxed in the
//! `Value`.

use crate::listpack::{Listpack, LpVal};
use crate::{CBytes, Dict};

/// `hash-max-listpack-entries` / `hash-max-listpack-value`.
#[derive(Clone, Copy, Debug)]
pub struct HashLimits {
    pub max_listpack_entries: usize,
    pub max_listpack_value: usize,
}

impl Default for HashLimits {
    fn default() -> Self {
        HashLimits {
            max_listpack_entries: 128,
            max_listpack_value: 64,
        }
    }
}

#[derive(Clone)]
pub enum Hash {
    Listpack(Listpack),
    Table(Box<Dict<CBytes>>),
}

impl Default for Hash {
    fn default() -> Self {
        Hash::Listpack(Listpack::new())
    }
}

impl Hash {
    pub fn new() -> Self {
        Hash::default()
    }

    /// OBJECT ENCODING name.
    pub fn encoding(&self) -> &'static str {
        match self {
            Hash::Listpack(_) => "listpack",
            Hash::Table(_) => "hashtable",
        }
    }

    pub fn len(&self) -> usize {
        match self {
            Hash::Listpack(lp) => lp.len() / 2,
            Hash::Table(d) => d.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Approximate heap bytes owned.
    pub fn heap_size(&self) -> usize {
        match self {
            Hash::Listpack(lp) => lp.heap_size(),
            Hash::Table(d) => d.table_bytes() + d.iter().map(|(_, v)| v.heap_size()).sum::<usize>(),
        }
    }

    /// Offset of the value of `field` in a listpack hash.
    fn lp_find(lp: &Listpack, field: &[u8]) -> Option<usize> {
        let mut it = lp.iter_offsets();
        while let Some((_, f)) = it.next() {
            let (voff, _) = it.next().expect("pairs");
            if f.eq_bytes(field) {
                return Some(voff);
            }
        }
        None
    }

    /// Calls `f` with the value of `field`.
    pub fn get_with<R>(&self, field: &[u8], f: impl FnOnce(&[u8]) -> R) -> Option<R> {
        match self {
            Hash::Listpack(lp) => {
                let off = Self::lp_find(lp, field)?;
                Some(f(lp.get_at(off).bytes(&mut itoa::Buffer::new())))
            }
            Hash::Table(d) => d.get(field).map(|v| f(v)),
        }
    }

    pub fn get(&self, field: &[u8]) -> Option<Vec<u8>> {
        self.get_with(field, |v| v.to_vec())
    }

    pub fn contains(&self, field: &[u8]) -> bool {
        match self {
            Hash::Listpack(lp) => Self::lp_find(lp, field).is_some(),
            Hash::Table(d) => d.contains_key(field),
        }
    }

    /// HSTRLEN.
    pub fn value_len(&self, field: &[u8]) -> Option<usize> {
        self.get_with(field, |v| v.len())
    }

    pub fn convert_to_table(&mut self) {
        let Hash::Listpack(lp) = self else {
            return;
        };
        let mut d = Dict::new();
        let mut it = lp.iter();
        let mut buf = itoa::Buffer::new();
        while let Some(f) = it.next() {
            let v = it.next().expect("pairs");
            let f = CBytes::new(f.bytes(&mut buf));
            d.insert_new(f, CBytes::new(v.bytes(&mut buf)));
        }
        *self = Hash::Table(Box::new(d));
    }

    /// Converts before a write of these lengths if they exceed the value
    /// limit (Redis checks every argument of HSET/HMSET/HSETNX first).
    pub fn prepare_write(&mut self, field_len: usize, value_len: usize, lim: &HashLimits) {
        if matches!(self, Hash::Listpack(_))
            && (field_len > lim.max_listpack_value || value_len > lim.max_listpack_value)
        {
            self.convert_to_table();
        }
    }

    /// Sets `field`; true if it is new.
    pub fn set(&mut self, field: &[u8], value: &[u8], lim: &HashLimits) -> bool {
        self.prepare_write(field.len(), value.len(), lim);
        let added = match self {
            Hash::Listpack(lp) => match Self::lp_find(lp, field) {
                Some(off) => {
                    lp.replace_at(off, LpVal::from_bytes(value));
                    false
                }
                None => {
                    lp.push_back(field);
                    lp.push_back(value);
                    true
                }
            },
            Hash::Table(d) => d.insert(field, CBytes::new(value)).is_none(),
        };
        if let Hash::Listpack(lp) = self {
            if lp.len() / 2 > lim.max_listpack_entries {
                self.convert_to_table();
            }
        }
        added
    }

    /// Every (field, value), borrowed: the base for random picks by index.
    pub fn entries(&self) -> Vec<(LpVal<'_>, LpVal<'_>)> {
        self.iter().collect()
    }

    /// HDEL of one field.
    pub fn remove(&mut self, field: &[u8]) -> bool {
        match self {
            Hash::Listpack(lp) => match Self::lp_find(lp, field) {
                Some(voff) => {
                    let foff = lp.prev(voff).expect("field precedes value");
                    lp.delete_run_at(foff, 2);
                    true
                }
                None => false,
            },
            Hash::Table(d) => {
                let r = d.remove(field).is_some();
                if r {
                    d.shrink_if_needed();
                }
                r
            }
        }
    }

    /// All (field, value) pairs: insertion order for a listpack, table
    /// order otherwise.
    pub fn iter(&self) -> Box<dyn Iterator<Item = (LpVal<'_>, LpVal<'_>)> + '_> {
        match self {
            Hash::Listpack(lp) => {
                let mut it = lp.iter();
                Box::new(std::iter::from_fn(move || {
                    let f = it.next()?;
                    Some((f, it.next().expect("pairs")))
                }))
            }
            Hash::Table(d) => Box::new(d.iter().map(|(k, v)| (LpVal::Str(k), LpVal::Str(v)))),
        }
    }

    /// A uniformly random (field, value) (HRANDFIELD's building block).
    pub fn random<R: rand::Rng>(&self, rng: &mut R) -> Option<(Vec<u8>, Vec<u8>)> {
        match self {
            Hash::Listpack(lp) => {
                let n = lp.len() / 2;
                if n == 0 {
                    return None;
                }
                let i = rng.gen_range(0..n);
                let off = lp.seek(2 * i as isize)?;
                let f = lp.get_at(off).to_vec();
                let v = lp.get_at(lp.next(off)?).to_vec();
                Some((f, v))
            }
            Hash::Table(d) => d.fair_random(rng).map(|(k, v)| (k.to_vec(), v.to_vec())),
        }
    }

    pub fn as_listpack(&self) -> Option<&Listpack> {
        match self {
            Hash::Listpack(lp) => Some(lp),
            _ => None,
        }
    }

    /// The table, for HSCAN's cursor walk.
    pub fn as_table(&self) -> Option<&Dict<CBytes>> {
        match self {
            Hash::Table(d) => Some(d),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};
    use std::collections::BTreeMap;

    #[test]
    fn bytes_per_element() {
        let mut h = Hash::new();
        let lim = HashLimits::default();
        for i in 0..10 {
            h.set(
                format!("field{i}").as_bytes(),
                format!("value{i}").as_bytes(),
                &lim,
            );
        }
        let lp = h.as_listpack().unwrap();
        assert_eq!(lp.as_bytes().len(), 160);
        // One allocation: the entries and the 4-byte count.
        assert_eq!(lp.heap_size(), 164);
        assert_eq!(lp.lp_bytes(), 167);
    }

    #[test]
    fn conversion_thresholds() {
        let lim = HashLimits {
            max_listpack_entries: 2,
            max_listpack_value: 4,
        };
        let mut h = Hash::new();
        h.set(b"a", b"1234", &lim);
        h.set(b"b", b"1", &lim);
        assert_eq!(h.encoding(), "listpack");
        h.set(b"b", b"2", &lim);
        assert_eq!(h.encoding(), "listpack");
        h.set(b"c", b"1", &lim);
        assert_eq!(h.encoding(), "hashtable");
        let mut h = Hash::new();
        h.set(b"a", b"12345", &lim);
        assert_eq!(h.encoding(), "hashtable");
        assert_eq!(h.get(b"a"), Some(b"12345".to_vec()));
    }

    #[test]
    fn matches_a_btreemap_under_random_operations() {
        let mut rng = StdRng::seed_from_u64(9);
        for round in 0..40 {
            let lim = HashLimits {
                max_listpack_entries: [4, 30, 1000][round % 3],
                max_listpack_value: [8, 64][round % 2],
            };
            let mut h = Hash::new();
            let mut m: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
            for _ in 0..300 {
                let f = format!("f{}", rng.gen_range(0..40)).into_bytes();
                match rng.gen_range(0..6) {
                    0 | 1 => {
                        let v = match rng.gen_range(0..3) {
                            0 => rng.gen_range(-1000..1000).to_string().into_bytes(),
                            1 => vec![b'v'; rng.gen_range(0..12)],
                            _ => vec![b'w'; rng.gen_range(0..100)],
                        };
                        assert_eq!(h.set(&f, &v, &lim), m.insert(f, v).is_none());
                    }
                    2 => assert_eq!(h.remove(&f), m.remove(&f).is_some()),
                    3 => assert_eq!(h.get(&f), m.get(&f).cloned()),
                    4 => {
                        if let Some((k, v)) = h.random(&mut rng) {
                            assert_eq!(m.get(&k), Some(&v));
                        }
                    }
                    _ => {
                        let mut all: Vec<(Vec<u8>, Vec<u8>)> =
                            h.iter().map(|(k, v)| (k.to_vec(), v.to_vec())).collect();
                        all.sort();
                        let want: Vec<_> = m.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
                        assert_eq!(all, want);
                    }
                }
                assert_eq!(h.len(), m.len());
                if h.encoding() == "listpack" {
                    assert!(m.len() <= lim.max_listpack_entries);
                }
            }
        }
    }
}
