//! The stream's node index: the nodes in master-ID order, for seeks by ID,
//! appends at the end and removals (trims at the front, XDEL anywhere).
//!
//! Nodes are only ever added after the last one (XADD, RDB load), so a
//! B-tree's balancing buys nothing, and sequential inserts leave its
//! leaves about half full: ~65 bytes per node against 32 here (with
//! 10,000 nodes for a 1,000,000-entry stream, a third of a megabyte).
//! The nodes sit in chunks of up to [`CHUNK`], themselves in a deque:
//! a seek is two binary searches, a removal moves at most one chunk's
//! entries (and, when the chunk empties, the chunk handles), so a long
//! stream whose entries are large (one per node) still deletes in time
//! independent of its length, to a constant factor.

use super::StreamId;
use crate::listpack::Listpack;
use std::collections::VecDeque;

/// Nodes per chunk: 64 x 32 bytes fill a 2 KB block exactly.
const CHUNK: usize = 64;

/// Where a node is: chunk and index in it.
#[derive(Clone, Copy)]
pub struct Pos(usize, usize);

#[derive(Clone, Default)]
pub struct Nodes {
    /// Never holds an empty chunk; all but the last hold [`CHUNK`] nodes
    /// unless removals took some.
    chunks: VecDeque<Vec<(StreamId, Listpack)>>,
    len: usize,
}

impl Nodes {
    pub fn len(&self) -> usize {
        self.len
    }

    /// Adds a node after the last one; `id` is above every key.
    pub fn push(&mut self, id: StreamId, lp: Listpack) {
        debug_assert!(self.last_key().is_none_or(|k| k < id));
        match self.chunks.back_mut() {
            Some(c) if c.len() < CHUNK => {
                if c.len() == c.capacity() {
                    // Doubling, capped at a full chunk (a thinned chunk
                    // regrows from any size).
                    c.reserve_exact(c.len().min(CHUNK - c.len()));
                }
                c.push((id, lp));
            }
            _ => {
                // A stream's first chunk grows as it does (a short stream
                // keeps a small block); later ones hold CHUNK nodes soon.
                let mut c = Vec::with_capacity(if self.chunks.is_empty() { 1 } else { CHUNK });
                c.push((id, lp));
                self.chunks.push_back(c);
            }
        }
        self.len += 1;
    }

    pub fn last_key(&self) -> Option<StreamId> {
        self.chunks.back().and_then(|c| c.last()).map(|n| n.0)
    }

    pub fn last_mut(&mut self) -> Option<(StreamId, &mut Listpack)> {
        let n = self.chunks.back_mut()?.last_mut()?;
        Some((n.0, &mut n.1))
    }

    pub fn first(&self) -> Option<(StreamId, &Listpack)> {
        let n = self.chunks.front()?.first()?;
        Some((n.0, &n.1))
    }

    /// The node with the greatest key not above `id`.
    pub fn floor(&self, id: StreamId) -> Option<Pos> {
        let c = self
            .chunks
            .partition_point(|c| c[0].0 <= id)
            .checked_sub(1)?;
        let i = self.chunks[c].partition_point(|n| n.0 <= id) - 1;
        Some(Pos(c, i))
    }

    pub fn first_pos(&self) -> Option<Pos> {
        (self.len > 0).then_some(Pos(0, 0))
    }

    pub fn get_mut(&mut self, p: Pos) -> (StreamId, &mut Listpack) {
        let n = &mut self.chunks[p.0][p.1];
        (n.0, &mut n.1)
    }

    pub fn remove(&mut self, p: Pos) {
        let c = &mut self.chunks[p.0];
        c.remove(p.1);
        if c.is_empty() {
            self.chunks.remove(p.0);
        } else if c.len() * 4 <= c.capacity() {
            // Removals thinned it: a few nodes keep no 2 KB block.
            c.shrink_to(c.len() * 2);
        }
        self.len -= 1;
    }

    /// All nodes in key order (reversible).
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = (StreamId, &Listpack)> {
        self.chunks.iter().flatten().map(|n| (n.0, &n.1))
    }

    /// The nodes from `p` on, ascending.
    pub fn iter_from(&self, p: Pos) -> impl Iterator<Item = (StreamId, &Listpack)> {
        // Sliced, not skipped to: a seek costs no walk through the chunk.
        self.chunks[p.0][p.1..]
            .iter()
            .chain(self.chunks.range(p.0 + 1..).flatten())
            .map(|n| (n.0, &n.1))
    }

    /// The nodes up to `p`, descending from it.
    pub fn iter_back_from(&self, p: Pos) -> impl Iterator<Item = (StreamId, &Listpack)> {
        self.chunks[p.0][..=p.1]
            .iter()
            .rev()
            .chain(self.chunks.range(..p.0).rev().flat_map(|c| c.iter().rev()))
            .map(|n| (n.0, &n.1))
    }

    /// Bytes of the index itself (MEMORY USAGE), the nodes' listpacks not
    /// included.
    pub fn heap_size(&self) -> usize {
        let node = std::mem::size_of::<(StreamId, Listpack)>();
        let chunks: usize = self.chunks.iter().map(|c| c.capacity() * node).sum();
        chunks + self.chunks.capacity() * std::mem::size_of::<Vec<(StreamId, Listpack)>>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys<'a>(it: impl Iterator<Item = (StreamId, &'a Listpack)>) -> Vec<u64> {
        it.map(|(k, _)| k.ms).collect()
    }

    /// Seeks, walks and removals against a sorted Vec, across many chunks.
    #[test]
    fn against_a_vec() {
        let mut nodes = Nodes::default();
        let mut model: Vec<u64> = Vec::new();
        for k in 0..500u64 {
            nodes.push(StreamId::new(k * 10, 0), Listpack::new());
            model.push(k * 10);
        }
        // Thin out the middle, empty whole chunks, take from the front.
        let mut state = 1u64;
        for round in 0..450 {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let at = if round % 5 == 0 {
                0
            } else {
                (state >> 33) as usize % model.len()
            };
            let id = StreamId::new(model[at], 0);
            let p = nodes.floor(id).unwrap();
            assert_eq!(nodes.get_mut(p).0, id);
            nodes.remove(p);
            model.remove(at);
            assert_eq!(nodes.len(), model.len());
        }
        let all = &nodes;
        assert_eq!(keys(all.iter()), model);
        assert!(all
            .floor(StreamId::new(model[0], 0).decr().unwrap())
            .is_none());
        for probe in 0..5000u64 {
            let id = StreamId::new(probe, 0);
            let Some(p) = all.floor(id) else {
                assert!(probe < model[0]);
                continue;
            };
            let fi = model.partition_point(|&k| k <= probe) - 1;
            assert_eq!(keys(all.iter_from(p)), model[fi..]);
            let back: Vec<u64> = model[..=fi].iter().rev().copied().collect();
            assert_eq!(keys(all.iter_back_from(p)), back);
        }
    }
}
