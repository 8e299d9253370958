//! An intset: a sorted array of distinct integers packed at the narrowest
//! width (2, 4 or 8 bytes) that holds all of them, as Redis's small sets of
//! integers.
//!
//! Layout: `data` holds `len * width` bytes, little-endian, ascending.
//! Invariants: strictly ascending; `width` is the smallest of 2/4/8 that
//! fits every element (it only grows: like Redis, removing the one wide
//! value does not narrow the set back).
//!
//! Complexity: contains O(log n) (binary search); add/remove O(n) (a
//! memmove; upgrading the width rewrites the array once, and the new value,
//! being out of the old range, goes to one end). Only used up to
//! `set-max-intset-entries` (512 by default).
//!
//! Measured (test `bytes_per_element`): an intset of 20 small ints is 40
//! bytes of data, 2 bytes per element (Redis: 8-byte header + 40 = 48).

#[derive(Clone, PartialEq, Eq)]
pub struct Intset {
    width: u8,
    data: Vec<u8>,
}

impl Default for Intset {
    fn default() -> Self {
        Intset::new()
    }
}

fn width_for(v: i64) -> u8 {
    if i16::try_from(v).is_ok() {
        2
    } else if i32::try_from(v).is_ok() {
        4
    } else {
        8
    }
}

impl Intset {
    pub fn new() -> Self {
        Intset {
            width: 2,
            data: Vec::new(),
        }
    }

    pub fn len(&self) -> usize {
        self.data.len() / self.width as usize
    }

    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }

    /// Element width in bytes (2, 4 or 8).
    pub fn width(&self) -> usize {
        self.width as usize
    }

    /// Bytes as Redis counts an intset (8-byte header + data).
    pub fn blob_len(&self) -> usize {
        8 + self.data.len()
    }

    pub fn heap_size(&self) -> usize {
        self.data.capacity()
    }

    /// The element at sorted position `i`.
    pub fn get(&self, i: usize) -> Option<i64> {
        (i < self.len()).then(|| self.at(i))
    }

    fn at(&self, i: usize) -> i64 {
        let w = self.width as usize;
        let b = &self.data[i * w..i * w + w];
        match w {
            2 => i16::from_le_bytes([b[0], b[1]]) as i64,
            4 => i32::from_le_bytes([b[0], b[1], b[2], b[3]]) as i64,
            _ => i64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]),
        }
    }

    fn put(&mut self, i: usize, v: i64) {
        let w = self.width as usize;
        let b = &mut self.data[i * w..i * w + w];
        match w {
            2 => b.copy_from_slice(&(v as i16).to_le_bytes()),
            4 => b.copy_from_slice(&(v as i32).to_le_bytes()),
            _ => b.copy_from_slice(&v.to_le_bytes()),
        }
    }

    /// `Ok(pos)` if present, else `Err(insertion point)`.
    fn search(&self, v: i64) -> Result<usize, usize> {
        let n = self.len();
        if n == 0 {
            return Err(0);
        }
        // Values wider than the set's width cannot be in it, and the ends
        // are the common append/prepend cases.
        if v > self.at(n - 1) {
            return Err(n);
        }
        if v < self.at(0) {
            return Err(0);
        }
        let (mut lo, mut hi) = (0usize, n);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            let m = self.at(mid);
            if m == v {
                return Ok(mid);
            }
            if m < v {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        Err(lo)
    }

    pub fn contains(&self, v: i64) -> bool {
        width_for(v) <= self.width && self.search(v).is_ok()
    }

    /// Adds `v`; false if it was already present.
    pub fn add(&mut self, v: i64) -> bool {
        let w = width_for(v);
        if w > self.width {
            self.upgrade_and_add(v, w);
            return true;
        }
        match self.search(v) {
            Ok(_) => false,
            Err(pos) => {
                let ww = self.width as usize;
                let at = pos * ww;
                // Exact growth: a small intset is the whole value, and
                // doubling would leave up to half of it unused.
                self.data.reserve_exact(ww);
                self.data.splice(at..at, std::iter::repeat_n(0, ww));
                self.put(pos, v);
                true
            }
        }
    }

    fn upgrade_and_add(&mut self, v: i64, w: u8) {
        let n = self.len();
        let old: Vec<i64> = (0..n).map(|i| self.at(i)).collect();
        self.width = w;
        self.data = vec![0; (n + 1) * w as usize];
        // Wider than every element: either below all or above all.
        let off = usize::from(v < 0);
        for (i, x) in old.into_iter().enumerate() {
            self.put(i + off, x);
        }
        self.put(if v < 0 { 0 } else { n }, v);
    }

    /// Removes `v`; false if absent.
    pub fn remove(&mut self, v: i64) -> bool {
        if width_for(v) > self.width {
            return false;
        }
        match self.search(v) {
            Ok(pos) => {
                let w = self.width as usize;
                self.data.drain(pos * w..pos * w + w);
                self.data.shrink_to_fit();
                true
            }
            Err(_) => false,
        }
    }

    /// A uniformly random element.
    pub fn random<R: rand::Rng>(&self, rng: &mut R) -> Option<i64> {
        let n = self.len();
        (n > 0).then(|| self.at(rng.gen_range(0..n)))
    }

    /// Removes and returns a uniformly random element (SPOP).
    pub fn pop_random<R: rand::Rng>(&mut self, rng: &mut R) -> Option<i64> {
        let v = self.random(rng)?;
        self.remove(v);
        Some(v)
    }

    pub fn max(&self) -> Option<i64> {
        self.len().checked_sub(1).map(|i| self.at(i))
    }

    /// Ascending iteration.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = i64> + ExactSizeIterator + '_ {
        (0..self.len()).map(|i| self.at(i))
    }
}

impl std::fmt::Debug for Intset {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_set().entries(self.iter()).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};
    use std::collections::BTreeSet;

    #[test]
    fn width_upgrades() {
        let mut s = Intset::new();
        assert!(s.add(5));
        assert!(!s.add(5));
        assert_eq!(s.width(), 2);
        assert!(s.add(70000));
        assert_eq!(s.width(), 4);
        assert!(s.add(i64::MIN));
        assert_eq!(s.width(), 8);
        assert_eq!(s.iter().collect::<Vec<_>>(), vec![i64::MIN, 5, 70000]);
        assert!(s.remove(i64::MIN));
        assert_eq!(s.width(), 8);
        assert!(!s.contains(i64::MAX));
        assert!(!s.remove(i64::MAX));
    }

    #[test]
    fn bytes_per_element() {
        let mut s = Intset::new();
        for i in 0..20 {
            s.add(i * 3);
        }
        assert_eq!(s.blob_len() - 8, 40);
        assert_eq!(s.heap_size(), 40);
    }

    #[test]
    fn matches_a_btreeset_under_random_operations() {
        let mut rng = StdRng::seed_from_u64(11);
        for _ in 0..30 {
            let mut s = Intset::new();
            let mut m = BTreeSet::new();
            for _ in 0..400 {
                let v: i64 = match rng.gen_range(0..10) {
                    0 => rng.gen(),
                    1 => rng.gen_range(-100_000..100_000),
                    2 => rng.gen::<i32>() as i64,
                    _ => rng.gen_range(-50..50),
                };
                match rng.gen_range(0..5) {
                    0 | 1 => assert_eq!(s.add(v), m.insert(v)),
                    2 => assert_eq!(s.remove(v), m.remove(&v)),
                    3 => assert_eq!(s.contains(v), m.contains(&v)),
                    _ => {
                        if let Some(r) = s.random(&mut rng) {
                            assert!(m.contains(&r));
                        } else {
                            assert!(m.is_empty());
                        }
                    }
                }
                assert_eq!(s.len(), m.len());
            }
            assert_eq!(
                s.iter().collect::<Vec<_>>(),
                m.iter().copied().collect::<Vec<_>>()
            );
            assert_eq!(s.max(), m.last().copied());
        }
    }
}
