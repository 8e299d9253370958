//! An intset: a sorted array of distinct integers packed at the narrowest
//! width (2, 4 or 8 bytes) that holds all of them, as Redis's small sets of
//! integers.
//!
//! Layout: one exact-size `Box<[u8]>` (16-byte handle, no allocation when
//! empty): `len * width` bytes of elements, little-endian, ascending, and
//! for widths 4 and 8 one trailing byte holding the width. The length's
//! parity tells which: even means width 2 and no marker (the common case
//! pays nothing), odd means the last byte is the width. So a small set of
//! integers is one allocation of exactly its elements' bytes.
//! Invariants: strictly ascending; `width` is the smallest of 2/4/8 that
//! fits every element (it only grows: like Redis, removing the one wide
//! value does not narrow the set back — an emptied set keeps its width).
//!
//! Complexity: contains O(log n) (binary search); add/remove O(n) (a
//! memmove; upgrading the width rewrites the array once, and the new value,
//! being out of the old range, goes to one end). Only used up to
//! `set-max-intset-entries` (512 by default).
//!
//! Measured (test `bytes_per_element`): an intset of 20 small ints is 40
//! bytes of data, 2 bytes per element (Redis: 8-byte header + 40 = 48).

#[derive(Clone, Default, PartialEq, Eq)]
pub struct Intset {
    buf: Box<[u8]>,
}

/// Reads one element; the slice's length is the width.
fn read(b: &[u8]) -> i64 {
    match b.len() {
        2 => i16::from_le_bytes([b[0], b[1]]) as i64,
        4 => i32::from_le_bytes([b[0], b[1], b[2], b[3]]) as i64,
        _ => i64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]),
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
        Intset::default()
    }

    fn width_u8(&self) -> u8 {
        if self.buf.len() % 2 == 1 {
            self.buf[self.buf.len() - 1]
        } else {
            2
        }
    }

    /// The element bytes (without the width marker).
    fn data(&self) -> &[u8] {
        &self.buf[..self.buf.len() & !1]
    }

    pub fn len(&self) -> usize {
        self.data().len() / self.width()
    }

    pub fn is_empty(&self) -> bool {
        self.data().is_empty()
    }

    /// Element width in bytes (2, 4 or 8).
    pub fn width(&self) -> usize {
        self.width_u8() as usize
    }

    /// Bytes as Redis counts an intset (8-byte header + data).
    pub fn blob_len(&self) -> usize {
        8 + self.data().len()
    }

    pub fn heap_size(&self) -> usize {
        self.buf.len()
    }

    /// Rebuilds the buffer at its exact size: `n` elements of width `w`,
    /// `fill` writing the element bytes into the vector it gets.
    fn rebuild(&mut self, w: u8, n: usize, fill: impl FnOnce(&[u8], &mut Vec<u8>)) {
        let old = std::mem::take(&mut self.buf);
        let old_data = &old[..old.len() & !1];
        let mut v = Vec::with_capacity(n * w as usize + usize::from(w != 2));
        fill(old_data, &mut v);
        debug_assert_eq!(v.len(), n * w as usize);
        if w != 2 {
            v.push(w);
        }
        self.buf = v.into_boxed_slice();
    }

    /// Replaces element bytes `a..b` by `with` at the current width,
    /// resizing the buffer exactly (a `realloc`, in place while the block's
    /// size class allows: fewer allocations than building a copy).
    fn splice(&mut self, a: usize, b: usize, with: &[u8]) {
        let mut v = std::mem::take(&mut self.buf).into_vec();
        let marker = (v.len() % 2 == 1).then(|| v.pop());
        if with.len() > b - a {
            v.reserve_exact(with.len() - (b - a));
        }
        v.splice(a..b, with.iter().copied());
        if let Some(Some(w)) = marker {
            v.push(w);
        }
        self.buf = v.into_boxed_slice();
    }

    /// The element at sorted position `i`.
    pub fn get(&self, i: usize) -> Option<i64> {
        (i < self.len()).then(|| self.at(i))
    }

    fn at(&self, i: usize) -> i64 {
        let w = self.width();
        read(&self.data()[i * w..i * w + w])
    }
}

/// Appends `v` at width `w`.
fn put(out: &mut Vec<u8>, w: u8, v: i64) {
    match w {
        2 => out.extend_from_slice(&(v as i16).to_le_bytes()),
        4 => out.extend_from_slice(&(v as i32).to_le_bytes()),
        _ => out.extend_from_slice(&v.to_le_bytes()),
    }
}

impl Intset {
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
        width_for(v) <= self.width_u8() && self.search(v).is_ok()
    }

    /// Adds `v`; false if it was already present.
    pub fn add(&mut self, v: i64) -> bool {
        let w = self.width_u8();
        let nw = width_for(v);
        let n = self.len();
        if nw > w {
            // Wider than every element: it goes below all or above all.
            self.rebuild(nw, n + 1, |old, out| {
                if v < 0 {
                    put(out, nw, v);
                }
                for c in old.chunks_exact(w as usize) {
                    put(out, nw, read(c));
                }
                if v >= 0 {
                    put(out, nw, v);
                }
            });
            return true;
        }
        match self.search(v) {
            Ok(_) => false,
            Err(pos) => {
                let at = pos * w as usize;
                // Little-endian: the low `w` bytes are the narrow form.
                self.splice(at, at, &v.to_le_bytes()[..w as usize]);
                true
            }
        }
    }

    /// Removes `v`; false if absent.
    pub fn remove(&mut self, v: i64) -> bool {
        let w = self.width_u8();
        if width_for(v) > w {
            return false;
        }
        match self.search(v) {
            Ok(pos) => {
                let w = w as usize;
                self.splice(pos * w, (pos + 1) * w, &[]);
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
