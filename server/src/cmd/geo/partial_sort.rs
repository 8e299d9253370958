//! The partial sort behind a search's COUNT: only the first `count`
//! results need their final places. Redis sorts them with Bentley and
//! McIlroy's quicksort (median of three, ninther above 40 elements,
//! three-way partition, insertion sort below 7), skipping the partitions
//! that hold none of the wanted places. Results at equal distances come
//! out in that algorithm's order, so it is reproduced step for step; a
//! full sort (no COUNT, or COUNT beyond the results) is a stable sort.

use std::cmp::Ordering::{self, Greater, Less};

/// Sorts `v` so that `v[..k]` holds, in order, what a full sort puts there.
pub fn sort_first<T>(v: &mut [T], k: usize, cmp: impl Fn(&T, &T) -> Ordering + Copy) {
    if k > 0 {
        quick(v, 0, v.len(), k - 1, cmp);
    }
}

/// Sorts `v[base..base + n]`, as far as it holds places up to `last`.
fn quick<T>(
    v: &mut [T],
    mut base: usize,
    mut n: usize,
    last: usize,
    cmp: impl Fn(&T, &T) -> Ordering + Copy,
) {
    let c = |v: &[T], i: usize, j: usize| cmp(&v[i], &v[j]);
    loop {
        if n < 7 {
            for m in base + 1..base + n {
                let mut l = m;
                while l > base && c(v, l - 1, l) == Greater {
                    v.swap(l, l - 1);
                    l -= 1;
                }
            }
            return;
        }
        let med3 = |v: &[T], a: usize, b: usize, d: usize| {
            if c(v, a, b) == Less {
                if c(v, b, d) == Less {
                    b
                } else if c(v, a, d) == Less {
                    d
                } else {
                    a
                }
            } else if c(v, b, d) == Greater {
                b
            } else if c(v, a, d) == Less {
                a
            } else {
                d
            }
        };
        let mut pm = base + n / 2;
        if n > 7 {
            let mut pl = base;
            let mut pn = base + n - 1;
            if n > 40 {
                let d = n / 8;
                pl = med3(v, pl, pl + d, pl + 2 * d);
                pm = med3(v, pm - d, pm, pm + d);
                pn = med3(v, pn - 2 * d, pn - d, pn);
            }
            pm = med3(v, pl, pm, pn);
        }
        v.swap(base, pm);
        // Pivot-equal elements gather at both ends, then move to the
        // middle.
        let (mut pa, mut pb) = (base + 1, base + 1);
        let (mut pc, mut pd) = (base + n - 1, base + n - 1);
        loop {
            while pb <= pc {
                let r = c(v, pb, base);
                if r == Greater {
                    break;
                }
                if r.is_eq() {
                    v.swap(pa, pb);
                    pa += 1;
                }
                pb += 1;
            }
            while pb <= pc {
                let r = c(v, pc, base);
                if r == Less {
                    break;
                }
                if r.is_eq() {
                    v.swap(pc, pd);
                    pd -= 1;
                }
                pc -= 1;
            }
            if pb > pc {
                break;
            }
            v.swap(pb, pc);
            pb += 1;
            pc -= 1;
        }
        let end = base + n;
        let r = (pa - base).min(pb - pa);
        swap_blocks(v, base, pb - r, r);
        let r = (pd - pc).min(end - pd - 1);
        swap_blocks(v, pb, end - r, r);
        let wanted = |start: usize| start <= last;
        let r = pb - pa;
        if r > 1 && wanted(base) {
            quick(v, base, r, last, cmp);
        }
        let r = pd - pc;
        if r <= 1 || !wanted(end - r) {
            return;
        }
        base = end - r;
        n = r;
    }
}

fn swap_blocks<T>(v: &mut [T], a: usize, b: usize, n: usize) {
    for i in 0..n {
        v.swap(a + i, b + i);
    }
}

#[cfg(test)]
mod tests {
    use super::sort_first;

    #[test]
    fn the_first_k_are_those_of_a_full_sort() {
        let mut seed = 7u64;
        for len in [0usize, 1, 5, 7, 8, 40, 41, 100, 1000] {
            for k in [1usize, 3, 10, 50, 999] {
                let k = k.min(len);
                let mut v: Vec<u32> = (0..len)
                    .map(|_| {
                        seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1);
                        (seed >> 33) as u32 % 50
                    })
                    .collect();
                let mut full = v.clone();
                full.sort();
                sort_first(&mut v, k, |a, b| a.cmp(b));
                assert_eq!(v[..k], full[..k], "len {len} k {k}");
            }
        }
    }
}
