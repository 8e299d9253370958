//! The stream against a model: a `BTreeMap` of ID → fields, driven by
//! random appends, deletions, trims and range reads, with small nodes so
//! every path (new nodes, partial and whole-node trims, node removal)
//! runs often.

use super::*;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

type Model = BTreeMap<StreamId, Vec<(Vec<u8>, Vec<u8>)>>;

fn check(s: &Stream, m: &Model) {
    assert_eq!(s.len() as usize, m.len());
    let mut got = Vec::new();
    s.range(StreamId::MIN, StreamId::MAX, false, |e| {
        got.push((e.id, e.to_pairs()));
        true
    });
    let want: Vec<_> = m.iter().map(|(k, v)| (*k, v.clone())).collect();
    assert_eq!(got, want);
    let mut rev = Vec::new();
    s.range(StreamId::MIN, StreamId::MAX, true, |e| {
        rev.push(e.id);
        true
    });
    let mut wrev: Vec<_> = m.keys().copied().collect();
    wrev.reverse();
    assert_eq!(rev, wrev);
    if let Some(f) = m.keys().next() {
        assert_eq!(s.first_id, *f);
    }
    for (mid, lp) in s.nodes() {
        node::validate(lp, mid).unwrap();
    }
}

#[test]
fn model() {
    let mut rng = StdRng::seed_from_u64(7);
    for round in 0..20 {
        let lim = NodeLimits {
            max_bytes: if round % 2 == 0 { 0 } else { 120 + round * 20 },
            max_entries: 1 + round % 7,
        };
        let mut s = Stream::new();
        let mut m = Model::new();
        let mut next = StreamId::new(1, 0);
        for _ in 0..600 {
            match rng.gen_range(0..10) {
                0..=5 => {
                    next = if rng.gen_bool(0.5) {
                        StreamId::new(next.ms, next.seq + 1)
                    } else {
                        StreamId::new(next.ms + rng.gen_range(1..100), rng.gen_range(0..5))
                    };
                    let n = rng.gen_range(1..4);
                    let same = rng.gen_bool(0.6);
                    let mut fv = Vec::new();
                    let mut pairs = Vec::new();
                    for i in 0..n {
                        let f = if same {
                            format!("f{i}").into_bytes()
                        } else {
                            format!("g{}", rng.gen_range(0..9)).into_bytes()
                        };
                        let v = if rng.gen_bool(0.5) {
                            rng.gen_range(-5000i64..100000).to_string().into_bytes()
                        } else {
                            vec![b'v'; rng.gen_range(0..30)]
                        };
                        fv.push(f.clone());
                        fv.push(v.clone());
                        pairs.push((f, v));
                    }
                    s.append(next, &fv, lim);
                    m.insert(next, pairs);
                    assert_eq!(s.last_id, next);
                }
                6 | 7 => {
                    let keys: Vec<_> = m.keys().copied().collect();
                    if let Some(&k) = keys.get(rng.gen_range(0..keys.len().max(1))) {
                        assert!(s.delete_ids(&[k]) == 1);
                        m.remove(&k);
                        assert_eq!(s.delete_ids(&[k]), 0);
                    }
                }
                8 => {
                    let max = rng.gen_range(0..m.len() as u64 + 3);
                    let approx = rng.gen_bool(0.3);
                    let before = m.len() as u64;
                    let n = s.trim(Trim::MaxLen(max), approx, 0);
                    assert_eq!(s.len(), before - n);
                    assert!(approx || s.len() <= max);
                    while m.len() as u64 > s.len() {
                        m.pop_first();
                    }
                }
                _ => {
                    let keys: Vec<_> = m.keys().copied().collect();
                    let min = keys
                        .get(rng.gen_range(0..keys.len() + 1))
                        .copied()
                        .unwrap_or(StreamId::new(next.ms + 1, 0));
                    let approx = rng.gen_bool(0.3);
                    s.trim(Trim::MinId(min), approx, 0);
                    if !approx {
                        m.retain(|k, _| *k >= min);
                    } else {
                        while m.len() as u64 > s.len() {
                            m.pop_first();
                        }
                    }
                }
            }
            check(&s, &m);
        }
        // Ranges with arbitrary bounds.
        for _ in 0..50 {
            let a = StreamId::new(rng.gen_range(0..next.ms + 2), rng.gen_range(0..3));
            let b = StreamId::new(rng.gen_range(0..next.ms + 2), rng.gen_range(0..3));
            let want: Vec<_> = m.range(a..=b.max(a)).map(|(k, _)| *k).collect();
            let mut got = Vec::new();
            s.range(a, b.max(a), false, |e| {
                got.push(e.id);
                true
            });
            assert_eq!(got, want);
        }
    }
}

#[test]
fn node_layout_matches_redis() {
    // XADD s 1-1 a 1 b 2; XADD s 1-2 a 3 b 4; XADD s 1-3 c 5 (Redis
    // 7.0.15's DEBUG LISTPACK shows these elements).
    let mut s = Stream::new();
    let lim = NodeLimits::default();
    s.append(StreamId::new(1, 1), &["a", "1", "b", "2"], lim);
    s.append(StreamId::new(1, 2), &["a", "3", "b", "4"], lim);
    s.append(StreamId::new(1, 3), &["c", "5"], lim);
    let (_, lp) = s.nodes().next().unwrap();
    let got: Vec<Vec<u8>> = lp.iter().map(|v| v.to_vec()).collect();
    let want: Vec<&str> = vec![
        "3", "0", "2", "a", "b", "0", // master
        "2", "0", "0", "1", "2", "5", // same fields
        "2", "0", "1", "3", "4", "5", //
        "0", "0", "2", "1", "c", "5", "6", // own fields
    ];
    let want: Vec<Vec<u8>> = want.iter().map(|s| s.as_bytes().to_vec()).collect();
    assert_eq!(got, want);
}
