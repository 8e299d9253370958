//! The partial sort behind SORT's LIMIT and GEOSEARCH's COUNT: only the
//! places wanted need their final order. Redis sorts them with its
//! `pqsort`, Bentley and McIlroy's quicksort (median of three, ninther
//! above 40 elements, three-way partition, insertion sort below 7 or when
//! a partition needed no swap) that skips the partitions holding none of
//! the wanted places. Elements that compare equal come out in that
//! algorithm's order, so it is reproduced step for step.

use std::cmp::Ordering;

/// Bentley and McIlroy's quicksort ("Engineering a Sort Function", 1993),
/// the BSD `qsort` Redis's `pqsort` is built on, which skips partitions
/// outside `[lrange, rrange]`. Reproduced step for step because it decides
/// where equal elements land.
pub fn pqsort<T>(
    v: &mut [T],
    lrange: usize,
    rrange: usize,
    cmp: &mut impl FnMut(&T, &T) -> Ordering,
) {
    pqsort_at(v, 0, v.len(), lrange, rrange, cmp, 0);
}

/// Nesting beyond this (only adversarial inputs get there) falls back to a
/// plain sort of the partition rather than risking the stack.
const PQSORT_MAX_DEPTH: usize = 256;

fn pqsort_at<T>(
    v: &mut [T],
    mut a: usize,
    mut n: usize,
    lrange: usize,
    rrange: usize,
    cmp: &mut impl FnMut(&T, &T) -> Ordering,
    depth: usize,
) {
    use Ordering::*;
    let overlaps = |p: usize, cnt: usize| {
        !(lrange < p && rrange < p || lrange >= p + cnt && rrange >= p + cnt)
    };
    loop {
        if n < 7 {
            insertion_sort(&mut v[a..a + n], cmp);
            return;
        }
        if depth > PQSORT_MAX_DEPTH {
            v[a..a + n].sort_by(|x, y| cmp(x, y));
            return;
        }
        let mut pm = a + n / 2;
        if n > 7 {
            let mut pl = a;
            let mut pn = a + n - 1;
            if n > 40 {
                let d = n / 8;
                pl = med3(v, pl, pl + d, pl + 2 * d, cmp);
                pm = med3(v, pm - d, pm, pm + d, cmp);
                pn = med3(v, pn - 2 * d, pn - d, pn, cmp);
            }
            pm = med3(v, pl, pm, pn, cmp);
        }
        v.swap(a, pm);
        let (mut pa, mut pb) = (a + 1, a + 1);
        let (mut pc, mut pd) = (a + n - 1, a + n - 1);
        let mut swapped = false;
        loop {
            while pb <= pc {
                let r = cmp(&v[pb], &v[a]);
                if r == Greater {
                    break;
                }
                if r == Equal {
                    swapped = true;
                    v.swap(pa, pb);
                    pa += 1;
                }
                pb += 1;
            }
            while pb <= pc {
                let r = cmp(&v[pc], &v[a]);
                if r == Less {
                    break;
                }
                if r == Equal {
                    swapped = true;
                    v.swap(pc, pd);
                    pd -= 1;
                }
                pc -= 1;
            }
            if pb > pc {
                break;
            }
            v.swap(pb, pc);
            swapped = true;
            pb += 1;
            pc -= 1;
        }
        if !swapped {
            insertion_sort(&mut v[a..a + n], cmp);
            return;
        }
        let pn = a + n;
        let r = (pa - a).min(pb - pa);
        vecswap(v, a, pb - r, r);
        let r = (pd - pc).min(pn - pd - 1);
        vecswap(v, pb, pn - r, r);
        let r = pb - pa;
        if r > 1 && overlaps(a, r) {
            pqsort_at(v, a, r, lrange, rrange, cmp, depth + 1);
        }
        let r = pd - pc;
        if r > 1 && overlaps(pn - r, r) {
            a = pn - r;
            n = r;
            continue;
        }
        return;
    }
}

fn insertion_sort<T>(v: &mut [T], cmp: &mut impl FnMut(&T, &T) -> Ordering) {
    for m in 1..v.len() {
        let mut l = m;
        while l > 0 && cmp(&v[l - 1], &v[l]) == Ordering::Greater {
            v.swap(l, l - 1);
            l -= 1;
        }
    }
}

fn med3<T>(
    v: &[T],
    a: usize,
    b: usize,
    c: usize,
    cmp: &mut impl FnMut(&T, &T) -> Ordering,
) -> usize {
    if cmp(&v[a], &v[b]) == Ordering::Less {
        if cmp(&v[b], &v[c]) == Ordering::Less {
            b
        } else if cmp(&v[a], &v[c]) == Ordering::Less {
            c
        } else {
            a
        }
    } else if cmp(&v[b], &v[c]) == Ordering::Greater {
        b
    } else if cmp(&v[a], &v[c]) == Ordering::Less {
        a
    } else {
        c
    }
}

fn vecswap<T>(v: &mut [T], a: usize, b: usize, n: usize) {
    for i in 0..n {
        v.swap(a + i, b + i);
    }
}

#[cfg(test)]
mod tests {
    use super::pqsort;

    #[test]
    fn the_first_k_are_those_of_a_full_sort() {
        let mut seed = 7u64;
        for len in [0usize, 1, 5, 7, 8, 40, 41, 100, 1000] {
            for k in [1usize, 3, 10, 50, 999] {
                let k = k.min(len);
                if k == 0 {
                    continue;
                }
                let mut v: Vec<u32> = (0..len)
                    .map(|_| {
                        seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1);
                        (seed >> 33) as u32 % 50
                    })
                    .collect();
                let mut full = v.clone();
                full.sort();
                pqsort(&mut v, 0, k - 1, &mut |a, b| a.cmp(b));
                assert_eq!(v[..k], full[..k], "len {len} k {k}");
            }
        }
    }
}
