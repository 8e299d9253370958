//! One dict entry in one allocation: its link, value and metadata, then
//! the key's length and bytes. A `CBytes` key took 24 bytes of every node
//! whatever the key's length (and a second allocation past 22 bytes); most
//! keys are far shorter, so a keyspace node with a key of up to 7 bytes
//! now fits 48 bytes instead of 64, and every key, however long, lives in
//! its node.
//!
//! The key sits after the struct's last byte (never in its padding, which
//! a write of the struct may clobber): a length byte, or `LONG` and a
//! 4-byte length, then the bytes.

use std::alloc::{alloc, dealloc, handle_alloc_error, Layout};
use std::marker::PhantomData;
use std::ops::{Deref, DerefMut};
use std::ptr::NonNull;

pub(super) type Link<V, M> = Option<NodeBox<V, M>>;

#[repr(C)]
pub(super) struct Node<V, M> {
    pub next: Link<V, M>,
    pub val: V,
    pub meta: M,
}

/// A length byte of `LONG` means the length follows in 4 bytes.
const LONG: u8 = u8::MAX;

/// An owned node: a `Box<Node>` whose allocation also holds the key.
pub(super) struct NodeBox<V, M> {
    ptr: NonNull<Node<V, M>>,
    _owns: PhantomData<Node<V, M>>,
}

// SAFETY: a NodeBox owns its node as a Box would; the key bytes are plain
// data.
unsafe impl<V: Send, M: Send> Send for NodeBox<V, M> {}
// SAFETY: as above; `&NodeBox` only gives out `&V`, `&M` and `&[u8]`.
unsafe impl<V: Sync, M: Sync> Sync for NodeBox<V, M> {}

impl<V, M> NodeBox<V, M> {
    const KEY_AT: usize = std::mem::size_of::<Node<V, M>>();

    pub fn layout(klen: usize) -> Layout {
        let prefix = if klen < LONG as usize { 1 } else { 5 };
        let size = (Self::KEY_AT + prefix + klen).max(1);
        Layout::from_size_align(size, std::mem::align_of::<Node<V, M>>()).expect("key too long")
    }

    pub fn new(key: &[u8], val: V, meta: M, next: Link<V, M>) -> Self {
        assert!(key.len() <= u32::MAX as usize, "key too long");
        let layout = Self::layout(key.len());
        // SAFETY: the layout is never zero-sized; the node is written at
        // the start of the allocation (aligned for it), the length and key
        // in the bytes after it, all within the layout's size.
        unsafe {
            let p = alloc(layout);
            let Some(ptr) = NonNull::new(p as *mut Node<V, M>) else {
                handle_alloc_error(layout)
            };
            ptr.as_ptr().write(Node { next, val, meta });
            let at = p.add(Self::KEY_AT);
            let start = if key.len() < LONG as usize {
                at.write(key.len() as u8);
                at.add(1)
            } else {
                at.write(LONG);
                (at.add(1) as *mut [u8; 4]).write_unaligned((key.len() as u32).to_le_bytes());
                at.add(5)
            };
            std::ptr::copy_nonoverlapping(key.as_ptr(), start, key.len());
            NodeBox {
                ptr,
                _owns: PhantomData,
            }
        }
    }

    pub fn key(&self) -> &[u8] {
        // SAFETY: `new` wrote the length and the key after the node; they
        // never change while the NodeBox lives.
        unsafe {
            let at = (self.ptr.as_ptr() as *const u8).add(Self::KEY_AT);
            let (len, start) = match *at {
                LONG => (
                    u32::from_le_bytes((at.add(1) as *const [u8; 4]).read_unaligned()) as usize,
                    at.add(5),
                ),
                n => (n as usize, at.add(1)),
            };
            std::slice::from_raw_parts(start, len)
        }
    }

    /// The key with the value and metadata, the last two writable, and the
    /// link to the next node (an iterator's borrows, split).
    pub fn parts_mut(&mut self) -> (&[u8], &mut V, &mut M, &mut Link<V, M>) {
        // SAFETY: the key bytes lie past the node, so the shared borrow of
        // them and the mutable borrows of the node's fields never overlap.
        let key = unsafe { &*(self.key() as *const [u8]) };
        let n = &mut **self;
        (key, &mut n.val, &mut n.meta, &mut n.next)
    }

    /// Frees the node, returning its value and metadata (its link must
    /// have been taken).
    pub fn into_parts(self) -> (V, M) {
        let layout = Self::layout(self.key().len());
        let p = std::mem::ManuallyDrop::new(self).ptr.as_ptr();
        // SAFETY: the node is read out once and the allocation freed with
        // the layout it was made with; `ManuallyDrop` keeps Drop from
        // running on it again.
        unsafe {
            let Node { next, val, meta } = p.read();
            dealloc(p as *mut u8, layout);
            debug_assert!(next.is_none());
            drop(next);
            (val, meta)
        }
    }
}

impl<V, M> Drop for NodeBox<V, M> {
    fn drop(&mut self) {
        let layout = Self::layout(self.key().len());
        // SAFETY: the node is dropped once, then its allocation freed with
        // the layout it was made with.
        unsafe {
            std::ptr::drop_in_place(self.ptr.as_ptr());
            dealloc(self.ptr.as_ptr() as *mut u8, layout);
        }
    }
}

impl<V, M> Deref for NodeBox<V, M> {
    type Target = Node<V, M>;
    fn deref(&self) -> &Node<V, M> {
        // SAFETY: the node is initialized and owned by self.
        unsafe { self.ptr.as_ref() }
    }
}

impl<V, M> DerefMut for NodeBox<V, M> {
    fn deref_mut(&mut self) -> &mut Node<V, M> {
        // SAFETY: as for Deref, and self is borrowed mutably.
        unsafe { self.ptr.as_mut() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_of_every_length_round_trip() {
        for len in [0, 1, 7, 8, 22, 254, 255, 256, 70_000] {
            let key: Vec<u8> = (0..len).map(|i| i as u8).collect();
            let n: NodeBox<String, u32> = NodeBox::new(&key, "v".repeat(len % 50), 7, None);
            assert_eq!(n.key(), &key[..]);
            assert_eq!(n.meta, 7);
            let (v, m) = n.into_parts();
            assert_eq!((v.len(), m), (len % 50, 7));
        }
    }

    #[test]
    fn a_keyspace_node_with_a_short_key_fits_48_bytes() {
        assert_eq!(NodeBox::<crate::Value, crate::db::Access>::KEY_AT, 40);
        assert_eq!(
            NodeBox::<crate::Value, crate::db::Access>::layout(7).size(),
            48
        );
        assert_eq!(
            std::mem::size_of::<Link<crate::Value, crate::db::Access>>(),
            8
        );
    }
}
