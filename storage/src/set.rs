//! The set type with Redis 7.0's two encodings (7.0 has no set listpack).
//!
//! - `Intset`: every member is a canonical decimal i64 (the strict
//!   `string2ll` rules of [`crate::num::parse_i64`]) and there are at most
//!   `set-max-intset-entries`: a sorted packed [`Intset`], O(log n)
//!   membership, 2-8 bytes per member.
//! - `Table`: a [`Dict<()>`] of members, O(1) operations.
//!
//! Invariants: members are unique; an intset set holds only integers and
//! no more than the limit. Conversion is one way, intset → table, when a
//! non-integer member arrives or the count would pass the limit.
//! A new set starts as an intset iff its first member is an integer
//! ([`Set::new_for`], Redis's `setTypeCreate`).
//!
//! Measured: an intset of 20 small ints is 40 bytes of data (2 per member,
//! 48 with Redis's header, as its serializedlength 49 shows); see
//! [`crate::intset`].

use crate::intset::Intset;
use crate::listpack::LpVal;
use crate::num::parse_i64;
use crate::Dict;

#[derive(Clone)]
pub enum Set {
    Intset(Intset),
    Table(Box<Dict<()>>),
}

fn as_int(b: &[u8]) -> Option<i64> {
    if b.len() <= 20 {
        parse_i64(b)
    } else {
        None
    }
}

impl Set {
    /// An empty set in the encoding Redis picks for `first` member.
    pub fn new_for(first: &[u8]) -> Self {
        if as_int(first).is_some() {
            Set::Intset(Intset::new())
        } else {
            Set::Table(Box::default())
        }
    }

    pub fn new_table() -> Self {
        Set::Table(Box::default())
    }

    /// OBJECT ENCODING name.
    pub fn encoding(&self) -> &'static str {
        match self {
            Set::Intset(_) => "intset",
            Set::Table(_) => "hashtable",
        }
    }

    pub fn len(&self) -> usize {
        match self {
            Set::Intset(s) => s.len(),
            Set::Table(d) => d.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Approximate heap bytes owned.
    pub fn heap_size(&self) -> usize {
        match self {
            Set::Intset(s) => s.heap_size(),
            Set::Table(d) => d.table_bytes(),
        }
    }

    pub fn convert_to_table(&mut self) {
        let Set::Intset(s) = self else {
            return;
        };
        let mut d = Dict::new();
        let mut buf = itoa::Buffer::new();
        for v in s.iter() {
            d.insert_new(buf.format(v).as_bytes(), ());
        }
        *self = Set::Table(Box::new(d));
    }

    /// SADD of one member; true if it was new.
    pub fn add(&mut self, member: &[u8], max_intset_entries: usize) -> bool {
        if let Set::Intset(s) = self {
            match as_int(member) {
                Some(v) => {
                    if !s.add(v) {
                        return false;
                    }
                    if s.len() > max_intset_entries {
                        self.convert_to_table();
                    }
                    return true;
                }
                None => self.convert_to_table(),
            }
        }
        match self {
            Set::Table(d) => {
                if d.contains_key(member) {
                    false
                } else {
                    d.insert_new(member, ());
                    true
                }
            }
            Set::Intset(_) => unreachable!("converted above"),
        }
    }

    /// SREM of one member.
    pub fn remove(&mut self, member: &[u8]) -> bool {
        match self {
            Set::Intset(s) => as_int(member).is_some_and(|v| s.remove(v)),
            Set::Table(d) => {
                let r = d.remove(member).is_some();
                if r {
                    d.shrink_if_needed();
                }
                r
            }
        }
    }

    pub fn contains(&self, member: &[u8]) -> bool {
        match self {
            Set::Intset(s) => as_int(member).is_some_and(|v| s.contains(v)),
            Set::Table(d) => d.contains_key(member),
        }
    }

    /// Membership of an element read from another set (no formatting when
    /// both sides are integers).
    pub fn contains_val(&self, v: LpVal) -> bool {
        match (self, v) {
            (Set::Intset(s), LpVal::Int(n)) => s.contains(n),
            (_, v) => self.contains(v.bytes(&mut itoa::Buffer::new())),
        }
    }

    /// SADD of an element read from another set.
    pub fn add_val(&mut self, v: LpVal, max_intset_entries: usize) -> bool {
        match v {
            LpVal::Int(n) if matches!(self, Set::Intset(_)) => {
                let Set::Intset(s) = self else { unreachable!() };
                if !s.add(n) {
                    return false;
                }
                if s.len() > max_intset_entries {
                    self.convert_to_table();
                }
                true
            }
            v => self.add(v.bytes(&mut itoa::Buffer::new()), max_intset_entries),
        }
    }

    /// SREM of an element read from another set.
    pub fn remove_val(&mut self, v: LpVal) -> bool {
        match (&mut *self, v) {
            (Set::Intset(s), LpVal::Int(n)) => s.remove(n),
            (_, v) => self.remove(v.bytes(&mut itoa::Buffer::new())),
        }
    }

    /// Members: ascending for an intset, table order otherwise.
    pub fn iter(&self) -> Box<dyn Iterator<Item = LpVal<'_>> + '_> {
        match self {
            Set::Intset(s) => Box::new(s.iter().map(LpVal::Int)),
            Set::Table(d) => Box::new(d.iter().map(|(k, _)| LpVal::Str(k))),
        }
    }

    /// A random member (SRANDMEMBER's building block).
    pub fn random<R: rand::Rng>(&self, rng: &mut R) -> Option<Vec<u8>> {
        match self {
            Set::Intset(s) => s
                .random(rng)
                .map(|v| itoa::Buffer::new().format(v).as_bytes().to_vec()),
            Set::Table(d) => d.fair_random(rng).map(|(k, _)| k.to_vec()),
        }
    }

    /// Removes and returns a random member (SPOP).
    pub fn pop_random<R: rand::Rng>(&mut self, rng: &mut R) -> Option<Vec<u8>> {
        let m = self.random(rng)?;
        self.remove(&m);
        Some(m)
    }

    pub fn as_intset(&self) -> Option<&Intset> {
        match self {
            Set::Intset(s) => Some(s),
            _ => None,
        }
    }

    /// The table, for SSCAN's cursor walk.
    pub fn as_table(&self) -> Option<&Dict<()>> {
        match self {
            Set::Table(d) => Some(d),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};
    use std::collections::BTreeSet;

    #[test]
    fn encodings_as_redis() {
        assert_eq!(Set::new_for(b"12").encoding(), "intset");
        assert_eq!(Set::new_for(b"012").encoding(), "hashtable");
        assert_eq!(Set::new_for(b"-0").encoding(), "hashtable");
        let mut s = Set::new_for(b"1");
        for i in 0..3 {
            assert!(s.add(i.to_string().as_bytes(), 3));
        }
        assert_eq!(s.encoding(), "intset");
        assert!(!s.add(b"2", 3));
        assert!(s.add(b"3", 3));
        assert_eq!(s.encoding(), "hashtable");
        let mut s = Set::new_for(b"1");
        s.add(b"1", 512);
        s.add(b"x", 512);
        assert_eq!(s.encoding(), "hashtable");
        assert!(s.contains(b"1") && s.contains(b"x"));
    }

    #[test]
    fn matches_a_btreeset_under_random_operations() {
        let mut rng = StdRng::seed_from_u64(13);
        for round in 0..40 {
            let max = [5, 50, 512][round % 3];
            let mut s = Set::new_for(b"1");
            let mut m: BTreeSet<Vec<u8>> = BTreeSet::new();
            let nonint = round % 2 == 0;
            for _ in 0..300 {
                let e = if nonint && rng.gen_range(0..30) == 0 {
                    format!("x{}", rng.gen_range(0..5)).into_bytes()
                } else {
                    rng.gen_range(-40..40).to_string().into_bytes()
                };
                match rng.gen_range(0..5) {
                    0 | 1 => assert_eq!(s.add(&e, max), m.insert(e)),
                    2 => assert_eq!(s.remove(&e), m.remove(&e)),
                    3 => assert_eq!(s.contains(&e), m.contains(&e)),
                    _ => {
                        if let Some(p) = s.pop_random(&mut rng) {
                            assert!(m.remove(&p));
                        } else {
                            assert!(m.is_empty());
                        }
                    }
                }
                assert_eq!(s.len(), m.len());
                if s.encoding() == "intset" {
                    assert!(m.len() <= max);
                }
            }
            let all: BTreeSet<Vec<u8>> = s.iter().map(|v| v.to_vec()).collect();
            assert_eq!(all, m);
            let mut copy = Set::new_for(b"1");
            for v in s.iter() {
                assert!(copy.add_val(v, max));
                assert!(copy.contains_val(v) && s.contains_val(v));
            }
            assert_eq!(copy.len(), s.len());
            for v in s.iter() {
                assert!(copy.remove_val(v));
            }
            assert!(copy.is_empty());
        }
    }
}
