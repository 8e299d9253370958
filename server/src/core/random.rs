//! The random choices the server makes: IDs in Redis's form, samples of a
//! collection's elements.

use rand::Rng;
use std::collections::HashSet;

/// 40 random hex digits, the form of Redis's run and replication IDs.
pub fn random_hex40() -> String {
    let mut r = rand::thread_rng();
    (0..40)
        .map(|_| char::from_digit(r.gen_range(0..16), 16).unwrap_or('0'))
        .collect()
}

/// Distinct indices below `n`, `k` of them (k < n), uniformly chosen.
pub fn distinct_indices<R: Rng>(rng: &mut R, n: usize, k: usize) -> Vec<usize> {
    if k * 3 > n {
        // Many of them: a partial shuffle of all indices.
        let mut all: Vec<usize> = (0..n).collect();
        for i in 0..k {
            let j = rng.gen_range(i..n);
            all.swap(i, j);
        }
        all.truncate(k);
        all
    } else {
        // Few of them: draw until enough are distinct.
        let mut seen = HashSet::with_capacity(k);
        let mut out = Vec::with_capacity(k);
        while out.len() < k {
            let i = rng.gen_range(0..n);
            if seen.insert(i) {
                out.push(i);
            }
        }
        out
    }
}
