//! A quicklist node: a listpack, or the LZF of its Redis listpack bytes
//! when Redis would keep it compressed.

use super::Quicklist;
use crate::listpack::{Listpack, LpVal};
use crate::lzf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;

/// Smallest node (Redis listpack bytes) worth compressing.
const MIN_COMPRESS_BYTES: usize = 48;
/// Compression must save more than this many bytes.
const MIN_COMPRESS_IMPROVE: usize = 8;

/// A node: its listpack, or the LZF of its Redis listpack bytes.
#[derive(Clone)]
pub(super) enum Node {
    Raw(Listpack),
    Lzf(Box<Packed>),
}

#[derive(Clone)]
pub(super) struct Packed {
    pub(super) lzf: Box<[u8]>,
    /// The listpack's size as Redis counts it.
    pub(super) sz: u32,
    pub(super) count: u32,
    /// The listpack, decoded by a read through a shared borrow.
    pub(super) cache: OnceLock<Listpack>,
}

/// The LZF form of a node's Redis listpack bytes `lp`, if Redis would
/// keep that node compressed.
fn compress_node(lp: &[u8]) -> Option<Vec<u8>> {
    let sz = lp.len();
    if sz < MIN_COMPRESS_BYTES {
        return None;
    }
    lzf::compress(lp, sz - MIN_COMPRESS_IMPROVE - 1)
}

/// Redis's listpack bytes for `lp`: total size, count, entries, end mark.
pub(super) fn redis_bytes(lp: &Listpack) -> Vec<u8> {
    let mut b = Vec::with_capacity(lp.lp_bytes());
    b.extend_from_slice(&(lp.lp_bytes() as u32).to_le_bytes());
    b.extend_from_slice(&(lp.len().min(65535) as u16).to_le_bytes());
    b.extend_from_slice(lp.as_bytes());
    b.push(0xff);
    b
}

impl Node {
    pub(super) fn len(&self) -> usize {
        match self {
            Node::Raw(lp) => lp.len(),
            Node::Lzf(p) => p.count as usize,
        }
    }

    pub(super) fn lp_bytes(&self) -> usize {
        match self {
            Node::Raw(lp) => lp.lp_bytes(),
            Node::Lzf(p) => p.sz as usize,
        }
    }

    pub(super) fn unpack(p: &Packed) -> Listpack {
        let b = lzf::decompress(&p.lzf, p.sz as usize).expect("node LZF is ours");
        Listpack::from_entries(p.count as usize, &b[6..b.len() - 1])
    }

    /// The listpack; `cached` records that a compressed node was decoded.
    pub(super) fn lp(&self, cached: &AtomicBool) -> &Listpack {
        match self {
            Node::Raw(lp) => lp,
            Node::Lzf(p) => p.cache.get_or_init(|| {
                cached.store(true, Ordering::Relaxed);
                Node::unpack(p)
            }),
        }
    }

    pub(super) fn raw_mut(&mut self) -> &mut Listpack {
        if let Node::Lzf(p) = self {
            let lp = p.cache.take().unwrap_or_else(|| Node::unpack(p));
            *self = Node::Raw(lp);
        }
        match self {
            Node::Raw(lp) => lp,
            Node::Lzf(_) => unreachable!(),
        }
    }

    /// Compresses a raw packed node if that is worth it (as Redis decides).
    pub(super) fn compress(&mut self) {
        let Node::Raw(lp) = self else { return };
        let sz = lp.lp_bytes();
        if sz < MIN_COMPRESS_BYTES || Quicklist::is_plain(lp) {
            return;
        }
        if let Some(c) = compress_node(&redis_bytes(lp)) {
            *self = Node::Lzf(Box::new(Packed {
                lzf: c.into_boxed_slice(),
                sz: sz as u32,
                count: lp.len() as u32,
                cache: OnceLock::new(),
            }));
        }
    }

    pub(super) fn heap_size(&self) -> usize {
        match self {
            Node::Raw(lp) => lp.heap_size(),
            Node::Lzf(p) => {
                std::mem::size_of::<Packed>()
                    + p.lzf.len()
                    + p.cache.get().map_or(0, |l| l.heap_size())
            }
        }
    }
}

/// A node as an RDB holds it (see [`Quicklist::saved_nodes`]).
pub enum SavedNode<'a> {
    /// A plain node's one element.
    Plain(LpVal<'a>),
    /// A compressed node: its LZF and its listpack's size.
    Lzf(&'a [u8], usize),
    /// A packed node's Redis listpack bytes.
    Packed(Vec<u8>),
}
