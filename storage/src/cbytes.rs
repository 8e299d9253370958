//! Binary-safe byte strings that keep up to 22 bytes inline.
//!
//! Most keys and many values are short; storing them inside the 24-byte
//! handle saves a heap allocation (and its allocator overhead) per key.
//! Longer strings live in one exact-size boxed slice.

use std::borrow::Borrow;
use std::hash::{Hash, Hasher};
use std::ops::Deref;

const INLINE: usize = 22;

#[derive(Clone)]
pub enum CBytes {
    Inline { len: u8, buf: [u8; INLINE] },
    Heap(Box<[u8]>),
}

impl CBytes {
    pub fn new(b: &[u8]) -> Self {
        if b.len() <= INLINE {
            let mut buf = [0u8; INLINE];
            buf[..b.len()].copy_from_slice(b);
            CBytes::Inline {
                len: b.len() as u8,
                buf,
            }
        } else {
            CBytes::Heap(b.into())
        }
    }

    pub fn as_slice(&self) -> &[u8] {
        match self {
            CBytes::Inline { len, buf } => &buf[..*len as usize],
            CBytes::Heap(b) => b,
        }
    }

    /// Heap bytes owned beyond the handle itself.
    pub fn heap_size(&self) -> usize {
        match self {
            CBytes::Inline { .. } => 0,
            CBytes::Heap(b) => b.len(),
        }
    }
}

impl Deref for CBytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        self.as_slice()
    }
}

impl AsRef<[u8]> for CBytes {
    fn as_ref(&self) -> &[u8] {
        self.as_slice()
    }
}

impl Borrow<[u8]> for CBytes {
    fn borrow(&self) -> &[u8] {
        self.as_slice()
    }
}

impl PartialEq for CBytes {
    fn eq(&self, o: &Self) -> bool {
        self.as_slice() == o.as_slice()
    }
}
impl Eq for CBytes {}

impl Hash for CBytes {
    fn hash<H: Hasher>(&self, h: &mut H) {
        self.as_slice().hash(h)
    }
}

impl PartialOrd for CBytes {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for CBytes {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        self.as_slice().cmp(o.as_slice())
    }
}

impl std::fmt::Debug for CBytes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}", String::from_utf8_lossy(self))
    }
}

impl From<&[u8]> for CBytes {
    fn from(b: &[u8]) -> Self {
        CBytes::new(b)
    }
}

impl From<&str> for CBytes {
    fn from(s: &str) -> Self {
        CBytes::new(s.as_bytes())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inline_and_heap() {
        assert_eq!(std::mem::size_of::<CBytes>(), 24);
        let a = CBytes::new(b"short\0key");
        assert!(matches!(a, CBytes::Inline { .. }));
        assert_eq!(&*a, b"short\0key");
        let b = CBytes::new(&[7u8; 23]);
        assert!(matches!(b, CBytes::Heap(_)));
        assert_eq!(b.len(), 23);
    }
}
