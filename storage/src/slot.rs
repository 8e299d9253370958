//! Redis Cluster's hash slots: which of the 16,384 slots a key belongs to,
//! and the per-slot counts the slotted [`crate::Db`] keeps.
//!
//! A key's slot is CRC16 (XMODEM: polynomial 0x1021, initial value 0, no
//! reflection) of the key modulo 16,384, except that a hash tag — the bytes
//! between the first `{` and the first `}` after it, if there is at least
//! one — is hashed instead of the whole key, so that related keys
//! (`{user1000}.following`, `{user1000}.followers`) share a slot and can be
//! used together in one command.

/// Number of hash slots in a cluster.
pub const SLOTS: usize = 16384;

/// Bits of a slot number (`SLOTS` is `1 << SLOT_BITS`).
pub const SLOT_BITS: u32 = 14;

/// CRC16 of every byte value, for a byte-at-a-time loop.
static CRC16_TABLE: [u16; 256] = crc16_table();

const fn crc16_table() -> [u16; 256] {
    let mut table = [0u16; 256];
    let mut i = 0;
    while i < 256 {
        let mut crc = (i as u16) << 8;
        let mut bit = 0;
        while bit < 8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
            bit += 1;
        }
        table[i] = crc;
        i += 1;
    }
    table
}

/// CRC16/XMODEM of `data`.
pub fn crc16(data: &[u8]) -> u16 {
    data.iter().fold(0u16, |crc, &b| {
        (crc << 8) ^ CRC16_TABLE[((crc >> 8) as u8 ^ b) as usize]
    })
}

/// The hash slot of `key`, honouring hash tags.
pub fn key_hash_slot(key: &[u8]) -> u16 {
    let hashed = match key.iter().position(|&b| b == b'{') {
        Some(open) => match key[open + 1..].iter().position(|&b| b == b'}') {
            // `{}`: an empty tag does not count; the whole key is hashed.
            Some(0) | None => key,
            Some(len) => &key[open + 1..open + 1 + len],
        },
        None => key,
    };
    crc16(hashed) & (SLOTS as u16 - 1)
}

/// Per-slot counts as a Fenwick (binary indexed) tree: O(log SLOTS) to
/// change one slot's count, to sum the slots below one, or to find the slot
/// holding the n-th key in slot order. The last is what makes random
/// sampling fair over keys rather than slots (pick a key index uniformly,
/// find its slot) and what skips empty slots in a walk.
pub(crate) struct Fenwick {
    /// 1-based: `tree[i]` sums the `i & i.wrapping_neg()` slots ending at
    /// slot `i - 1`. Index 0 is unused.
    tree: Box<[u64]>,
}

impl Fenwick {
    pub(crate) fn new() -> Self {
        Fenwick {
            tree: vec![0; SLOTS + 1].into_boxed_slice(),
        }
    }

    /// Adds `delta` to `slot`'s count.
    pub(crate) fn add(&mut self, slot: usize, delta: i64) {
        let mut i = slot + 1;
        while i <= SLOTS {
            self.tree[i] = self.tree[i].wrapping_add(delta as u64);
            i += i & i.wrapping_neg();
        }
    }

    /// Sum of the counts of the slots below `slot`.
    pub(crate) fn below(&self, slot: usize) -> u64 {
        let mut i = slot.min(SLOTS);
        let mut sum = 0u64;
        while i > 0 {
            sum = sum.wrapping_add(self.tree[i]);
            i &= i - 1;
        }
        sum
    }

    /// The slot holding the `n`-th unit (0-based) when the counts are laid
    /// out in slot order, or `None` if the total is `n` or less.
    pub(crate) fn find(&self, mut n: u64) -> Option<usize> {
        // Binary lifting: the largest prefix whose sum is at most `n`
        // ends just before the wanted slot.
        let mut pos = 0;
        let mut step = SLOTS;
        while step > 0 {
            let next = pos + step;
            if next <= SLOTS && self.tree[next] <= n {
                pos = next;
                n -= self.tree[next];
            }
            step >>= 1;
        }
        (pos < SLOTS).then_some(pos)
    }

    /// The first slot at or after `slot` with a nonzero count.
    pub(crate) fn next_nonempty(&self, slot: usize) -> Option<usize> {
        if slot >= SLOTS {
            return None;
        }
        self.find(self.below(slot))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc16_check_value() {
        // The CRC16/XMODEM catalogue check value.
        assert_eq!(crc16(b"123456789"), 0x31C3);
        assert_eq!(key_hash_slot(b"123456789"), 12739);
        assert_eq!(crc16(b""), 0);
    }

    /// Values `CLUSTER KEYSLOT` gives on a real Redis.
    #[test]
    fn key_hash_slot_values() {
        assert_eq!(key_hash_slot(b"foo"), 12182);
        assert_eq!(key_hash_slot(b"bar"), 5061);
        assert_eq!(key_hash_slot(b""), 0);
        assert_eq!(key_hash_slot(b"key:000000000000"), 13053);
        assert_eq!(key_hash_slot(b"user1000"), 3443);
        assert_eq!(key_hash_slot(b"{user1000}.following"), 3443);
        assert_eq!(key_hash_slot(b"{user1000}.followers"), 3443);
        assert_eq!(key_hash_slot(b"x{user1000}"), 3443);
        assert_eq!(key_hash_slot(b"foo{}{bar}"), 8363);
        assert_eq!(key_hash_slot(b"foo{{bar}}zap"), 4015);
        assert_eq!(key_hash_slot(b"foo{bar}{zap}"), 5061);
        assert_eq!(key_hash_slot(b"foo{bar"), 15278);
        assert_eq!(key_hash_slot(b"}foo{"), 8453);
        assert_eq!(key_hash_slot(b"{}"), 15257);
        assert_eq!(key_hash_slot(b"a{b}"), 3300);
    }

    #[test]
    fn hash_tags() {
        // An empty tag hashes the whole key, even with a tag after it.
        assert_eq!(key_hash_slot(b"foo{}{bar}"), crc16(b"foo{}{bar}") % 16384);
        assert_ne!(key_hash_slot(b"foo{}{bar}"), key_hash_slot(b"bar"));
        // The tag runs from the first `{` to the first `}` after it.
        assert_eq!(key_hash_slot(b"foo{{bar}}zap"), key_hash_slot(b"{bar"));
        assert_eq!(key_hash_slot(b"foo{{bar}}zap"), crc16(b"{bar") % 16384);
        assert_eq!(key_hash_slot(b"foo{bar}{zap}"), key_hash_slot(b"bar"));
        // No closing brace: the whole key.
        assert_eq!(key_hash_slot(b"foo{bar"), crc16(b"foo{bar") % 16384);
        assert_eq!(key_hash_slot(b"}foo{"), crc16(b"}foo{") % 16384);
        assert_eq!(key_hash_slot(b"{}"), crc16(b"{}") % 16384);
        assert_eq!(key_hash_slot(b"a{b}"), key_hash_slot(b"b"));
    }

    #[test]
    fn fenwick_sums_and_finds() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(1);
        let mut f = Fenwick::new();
        let mut counts = vec![0u64; SLOTS];
        assert_eq!(f.find(0), None);
        assert_eq!(f.next_nonempty(0), None);
        for _ in 0..3000 {
            let s = rng.gen_range(0..SLOTS);
            if counts[s] > 0 && rng.gen_bool(0.3) {
                counts[s] -= 1;
                f.add(s, -1);
            } else {
                counts[s] += 1;
                f.add(s, 1);
            }
        }
        let total: u64 = counts.iter().sum();
        assert_eq!(f.below(SLOTS), total);
        for _ in 0..2000 {
            let s = rng.gen_range(0..SLOTS);
            assert_eq!(f.below(s), counts[..s].iter().sum::<u64>());
            let n = rng.gen_range(0..total);
            let got = f.find(n).unwrap();
            let below: u64 = counts[..got].iter().sum();
            assert!(below <= n && n < below + counts[got], "{n} -> {got}");
            let want = (s..SLOTS).find(|&i| counts[i] > 0);
            assert_eq!(f.next_nonempty(s), want);
        }
        assert_eq!(f.find(total), None);
        // The last slot is found too.
        let mut g = Fenwick::new();
        g.add(SLOTS - 1, 3);
        assert_eq!(g.find(2), Some(SLOTS - 1));
        assert_eq!(g.next_nonempty(0), Some(SLOTS - 1));
        assert_eq!(g.next_nonempty(SLOTS), None);
    }
}
