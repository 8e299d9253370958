//! Tests of the slotted layout (and of what both layouts must agree on).

use super::tests::{snapshot_contents, take_output, Image};
use super::*;
use crate::rdb::SaveOpts;
use crate::snapshot;
use crate::StrValue;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::{BTreeMap, HashSet};

fn visits() -> usize {
    SLOT_WALK_VISITS.with(|v| v.get())
}

fn slots_of(d: &Db) -> &Slots {
    match &d.layout {
        Layout::Slotted(s) => s,
        Layout::Single(_) => panic!("not slotted"),
    }
}

/// A hash tag whose slot `pick` accepts, and that slot.
fn tag_where(pick: impl Fn(usize) -> bool) -> (String, usize) {
    (0..)
        .map(|i| format!("t{i}"))
        .map(|t| {
            let s = key_hash_slot(t.as_bytes()) as usize;
            (t, s)
        })
        .find(|(_, s)| pick(*s))
        .unwrap()
}

fn tagged(tag: &str, i: usize) -> Vec<u8> {
    format!("{{{tag}}}{i}").into_bytes()
}

fn str_of(v: &Value) -> Vec<u8> {
    match v {
        Value::Str(s) => s.as_bytes(&mut itoa::Buffer::new()).to_vec(),
        _ => b"other".to_vec(),
    }
}

fn chi_square(observed: &[u64], expected: &[f64]) -> f64 {
    observed
        .iter()
        .zip(expected)
        .map(|(&o, &e)| (o as f64 - e).powi(2) / e)
        .sum()
}

#[test]
fn an_empty_slotted_db_is_small_and_slots_come_and_go_with_keys() {
    assert_eq!(std::mem::size_of::<Option<Box<Slot>>>(), 8);
    let mut d = Db::slotted();
    let s = slots_of(&d);
    assert_eq!(s.tables.len(), SLOTS);
    assert!(s.tables.iter().all(|t| t.is_none()));
    // The directory and the two count trees.
    let bytes = SLOTS * 8 + 2 * (SLOTS + 1) * 8 + std::mem::size_of::<Slots>();
    assert!(bytes < 1 << 20, "{bytes}");
    d.add(b"foo", Value::str(b"1"));
    d.set_expire(b"foo", 5);
    assert!(slots_of(&d).tables[12182].is_some());
    assert_eq!((d.slot_len(12182), d.len(), d.expires_len()), (1, 1, 1));
    d.remove(b"foo");
    assert!(slots_of(&d).tables.iter().all(|t| t.is_none()));
    assert_eq!((d.len(), d.expires_len()), (0, 0));
    // FLUSHDB keeps the layout.
    d.add(b"bar", Value::str(b"1"));
    let old = d.take();
    assert!(d.is_slotted() && old.is_slotted());
    assert_eq!((old.len(), d.len()), (1, 0));
    d.restore(old);
    assert!(d.is_slotted());
    assert_eq!(d.slot_len(5061), 1);
}

/// 1,000,000 keys: counting a slot reads its stored count, and listing it
/// walks that slot's entries and nothing else.
#[test]
fn a_slot_is_counted_and_listed_at_the_cost_of_that_slot() {
    const N: usize = 1_000_000;
    let mut d = Db::slotted();
    let mut counts = vec![0usize; SLOTS];
    for i in 0..N {
        let key = format!("key:{i}");
        counts[key_hash_slot(key.as_bytes()) as usize] += 1;
        d.add(key.as_bytes(), Value::Str(StrValue::Int(i as i64)));
    }
    assert_eq!(d.len(), N);
    let start = visits();
    for (slot, &n) in counts.iter().enumerate() {
        assert_eq!(d.slot_len(slot), n, "slot {slot}");
    }
    assert_eq!(visits(), start, "slot_len walked");
    for slot in [0, 1, 3680, 12182, SLOTS - 1] {
        let n = counts[slot];
        assert!(n > 30, "{n} keys in slot {slot}");
        let before = visits();
        let keys = d.slot_keys(slot, usize::MAX);
        assert_eq!(visits() - before, n, "slot {slot}");
        assert_eq!(keys.len(), n);
        assert!(keys.iter().all(|k| key_hash_slot(k) as usize == slot));
        assert_eq!(keys.iter().collect::<HashSet<_>>().len(), n);
        // A bounded listing stops early.
        let before = visits();
        assert_eq!(d.slot_keys(slot, 3).len(), 3);
        assert_eq!(visits() - before, 3);
    }
    let slot = 12182;
    let one = d.slot_keys(slot, 1).pop().unwrap();
    assert_eq!(d.clear_slot(slot), counts[slot]);
    assert_eq!(d.slot_len(slot), 0);
    assert_eq!(d.len(), N - counts[slot]);
    assert!(!d.contains(&one));
    assert_eq!(d.clear_slot(slot), 0);
}

#[test]
fn standalone_slot_queries_answer_alike_by_hashing_every_key() {
    let mut d = Db::default();
    let (tag, slot) = tag_where(|_| true);
    for i in 0..50 {
        d.add(&tagged(&tag, i), Value::str(b"v"));
        d.add(format!("other{i}").as_bytes(), Value::str(b"v"));
    }
    let others_in_slot = (0..50)
        .filter(|i| key_hash_slot(format!("other{i}").as_bytes()) as usize == slot)
        .count();
    assert_eq!(d.slot_len(slot), 50 + others_in_slot);
    assert_eq!(d.slot_keys(slot, 10).len(), 10);
    assert_eq!(d.clear_slot(slot), 50 + others_in_slot);
    assert_eq!(d.len(), 100 - 50 - others_in_slot);
    assert!(!d.is_slotted());
}

/// Standalone, the cursor is exactly the one table's.
#[test]
fn standalone_scan_cursor_is_the_tables_own() {
    let mut d = Db::default();
    for i in 0..700 {
        d.add(format!("k{i}").as_bytes(), Value::str(b"v"));
    }
    let mut cursor = 0;
    let mut n = 0;
    loop {
        let mut a = Vec::new();
        let mut b = Vec::new();
        let next = d.keys().scan(cursor, |k, _| a.push(k.to_vec()));
        let Layout::Single(t) = &d.layout else {
            unreachable!()
        };
        assert_eq!(t.keys.scan(cursor, |k, _| b.push(k.to_vec())), next);
        assert_eq!(a, b);
        n += a.len();
        cursor = next;
        if cursor == 0 {
            break;
        }
    }
    assert_eq!(n, 700);
}

/// SCAN's guarantee across slots: keys present for the whole scan are all
/// returned, while other keys come and go between calls, a slot's table
/// grows (and is scanned mid-rehash) and shrinks under the cursor, and
/// slots empty and fill again.
#[test]
fn slotted_scan_returns_every_key_present_throughout() {
    let mut rng = StdRng::seed_from_u64(11);
    let (warm, warm_slot) = tag_where(|_| true);
    let (cold, cold_slot) = tag_where(|s| s != warm_slot);
    let (mut calls, mut grown, mut shrunk) = (0, 0, 0);
    for round in 0..10 {
        let mut d = Db::slotted();
        let mut stable = Vec::new();
        for i in 0..300 {
            stable.push(format!("s{round}_{i}").into_bytes());
        }
        for i in 0..40 {
            stable.push(tagged(&warm, i));
        }
        for k in &stable {
            d.add(k, Value::str(b"v"));
        }
        // Without churn every key comes back exactly once.
        if round == 0 {
            let mut all = Vec::new();
            let mut c = 0;
            loop {
                c = d.keys().scan(c, |k, _| all.push(k.to_vec()));
                if c == 0 {
                    break;
                }
            }
            assert_eq!(all.len(), d.len());
            assert_eq!(all.iter().collect::<HashSet<_>>().len(), d.len());
        }
        let warm_buckets = |d: &Db| {
            slots_of(d).tables[warm_slot]
                .as_ref()
                .map_or(0, |s| s.t.keys.buckets())
        };
        let mut temp: Vec<Vec<u8>> = Vec::new();
        let mut seen = HashSet::new();
        let mut cursor = 0;
        loop {
            cursor = d.keys().scan(cursor, |k, _| {
                seen.insert(k.to_vec());
            });
            calls += 1;
            assert!(calls < 100_000);
            let before = warm_buckets(&d);
            match rng.gen_range(0..10) {
                // Grow the warm slot's table, leaving it rehashing, and add
                // keys anywhere.
                0..=2 => {
                    for _ in 0..rng.gen_range(20..200) {
                        let k = tagged(&warm, rng.gen_range(1000..1_000_000));
                        if !d.contains(&k) {
                            d.add(&k, Value::str(b"t"));
                            temp.push(k);
                        }
                    }
                    for _ in 0..rng.gen_range(0..20) {
                        let k = format!("tmp{}", rng.gen::<u32>()).into_bytes();
                        if !d.contains(&k) {
                            d.add(&k, Value::str(b"t"));
                            temp.push(k);
                        }
                    }
                }
                // Drop the churn and shrink the warm slot's table now (the
                // cron would come to it within a few calls).
                3 | 4 => {
                    for k in temp.drain(..) {
                        d.remove(&k);
                    }
                    let Layout::Slotted(s) = &mut d.layout else {
                        unreachable!()
                    };
                    s.shrink(warm_slot);
                    d.cron(true);
                }
                // Fill and empty a slot of only temporary keys.
                5 => {
                    for i in 0..rng.gen_range(1..100) {
                        d.add(&tagged(&cold, i), Value::str(b"c"));
                    }
                }
                6 => {
                    d.clear_slot(cold_slot);
                }
                _ => {}
            }
            let after = warm_buckets(&d);
            grown += (after > before) as u32;
            shrunk += (after < before) as u32;
            if cursor == 0 {
                break;
            }
        }
        for k in &stable {
            assert!(seen.contains(k), "round {round}: {k:?} missed");
        }
    }
    assert!(
        grown > 50 && shrunk > 50,
        "{calls} calls, {grown} grown, {shrunk} shrunk"
    );
}

/// The slot a random draw lands in is picked with probability proportional
/// to its size; checked where it is decided, with a seeded RNG.
#[test]
fn weighted_slot_pick_is_proportional_to_size() {
    let mut d = Db::slotted();
    let sizes = [1, 10, 1000];
    let mut slots = Vec::new();
    for (j, &n) in sizes.iter().enumerate() {
        let (tag, slot) = tag_where(|s| !slots.contains(&s));
        slots.push(slot);
        for i in 0..n {
            d.add(&tagged(&tag, i), Value::str(b"v"));
            if j != 1 {
                d.set_expire(&tagged(&tag, i), 1);
            }
        }
    }
    let s = slots_of(&d);
    let mut rng = StdRng::seed_from_u64(3);
    const DRAWS: u64 = 100_000;
    let mut got = [0u64; 3];
    for _ in 0..DRAWS {
        let (slot, _) = s.weighted(Which::Keys, &mut rng).unwrap();
        got[slots.iter().position(|&x| x == slot).unwrap()] += 1;
    }
    let expect: Vec<f64> = sizes
        .iter()
        .map(|&n| DRAWS as f64 * n as f64 / 1011.0)
        .collect();
    // Two degrees of freedom: 13.8 is the 0.1% tail.
    let chi = chi_square(&got, &expect);
    assert!(chi < 13.8, "{got:?} vs {expect:?}: chi-square {chi}");
    // The TTL tree: slots 0 and 2 only.
    let mut got = [0u64; 3];
    for _ in 0..DRAWS {
        let (slot, _) = s.weighted(Which::Expires, &mut rng).unwrap();
        got[slots.iter().position(|&x| x == slot).unwrap()] += 1;
    }
    assert_eq!(got[1], 0);
    let chi = chi_square(
        &[got[0], got[2]],
        &[DRAWS as f64 / 1001.0, DRAWS as f64 * 1000.0 / 1001.0],
    );
    assert!(chi < 10.8, "{got:?}: chi-square {chi}");
}

/// RANDOMKEY, volatile-random and eviction sampling over a slot with 1 key,
/// one with 10 and one with 1000: each key about as likely as any other.
#[test]
fn random_key_and_eviction_samples_are_fair_over_keys_not_slots() {
    let mut d = Db::slotted();
    let sizes = [1usize, 10, 1000];
    let mut slots = Vec::new();
    for &n in &sizes {
        let (tag, slot) = tag_where(|s| !slots.contains(&s));
        slots.push(slot);
        for i in 0..n {
            d.add(&tagged(&tag, i), Value::str(b"v"));
            d.set_expire(&tagged(&tag, i), 1);
        }
    }
    // Keys without a TTL, which volatile draws must never return.
    let (plain, plain_slot) = tag_where(|s| !slots.contains(&s));
    for i in 0..500 {
        d.add(&tagged(&plain, i), Value::str(b"p"));
    }
    let which = |k: &[u8]| {
        let s = key_hash_slot(k) as usize;
        slots.iter().position(|&x| x == s)
    };
    let mut rng = StdRng::seed_from_u64(42);
    const DRAWS: u64 = 100_000;

    let mut got = [0u64; 4];
    for _ in 0..DRAWS {
        let k = d.random_key(&mut rng).unwrap();
        got[which(&k).unwrap_or(3)] += 1;
    }
    let total = 1511.0;
    let expect: Vec<f64> = [1.0, 10.0, 1000.0, 500.0]
        .iter()
        .map(|n| DRAWS as f64 * n / total)
        .collect();
    // Three degrees of freedom: 16.3 is the 0.1% tail.
    let chi = chi_square(&got, &expect);
    assert!(chi < 16.3, "random_key {got:?}: chi-square {chi}");

    let mut got = [0u64; 3];
    for _ in 0..DRAWS {
        let k = d.random_volatile_key(&mut rng).unwrap();
        assert_ne!(key_hash_slot(&k) as usize, plain_slot);
        got[which(&k).unwrap()] += 1;
    }
    let expect: Vec<f64> = sizes
        .iter()
        .map(|&n| DRAWS as f64 * n as f64 / 1011.0)
        .collect();
    let chi = chi_square(&got, &expect);
    assert!(chi < 13.8, "random_volatile_key {got:?}: chi-square {chi}");

    // Eviction: each key's expected share of the samples is its share of
    // the keys, whatever the size of its slot.
    for volatile in [false, true] {
        let mut got = [0u64; 4];
        let mut sampled = 0u64;
        const ROUNDS: u64 = 40_000;
        for _ in 0..ROUNDS {
            let mut n = 0;
            d.sample_for_eviction(5, volatile, &mut rng, |k, s| {
                assert_eq!(s.expire.is_some(), which(k).is_some());
                got[which(k).unwrap_or(3)] += 1;
                n += 1;
            });
            assert!(n <= 5);
            sampled += n;
        }
        assert!(sampled > ROUNDS * 49 / 10, "{sampled}");
        let (counts, weights): (Vec<u64>, Vec<f64>) = if volatile {
            assert_eq!(got[3], 0);
            (got[..3].to_vec(), vec![1.0, 10.0, 1000.0])
        } else {
            (got.to_vec(), vec![1.0, 10.0, 1000.0, 500.0])
        };
        let sum: f64 = weights.iter().sum();
        let expect: Vec<f64> = weights.iter().map(|w| sampled as f64 * w / sum).collect();
        let chi = chi_square(&counts, &expect);
        assert!(
            chi < 16.3,
            "eviction (volatile {volatile}) {counts:?} vs {expect:?}: chi-square {chi}"
        );
    }
}

fn clear_slot_keeps_the_snapshot_image(mut d: Db) {
    d.set_clock(1_000);
    let (low, low_slot) = tag_where(|s| s < 500);
    let (high, high_slot) = tag_where(|s| s > 16_000);
    let mut expect = Image::new();
    let mut put = |d: &mut Db, k: Vec<u8>, ttl: bool| {
        d.add(&k, Value::str(&k));
        let exp = ttl.then_some(50_000);
        if let Some(t) = exp {
            d.set_expire(&k, t);
        }
        expect.insert((2, k.clone()), (k, exp));
    };
    for i in 0..200 {
        put(&mut d, tagged(&low, i), i % 3 == 0);
        put(&mut d, tagged(&high, i), i % 4 == 0);
    }
    for i in 0..2000 {
        put(&mut d, format!("k{i}").into_bytes(), i % 5 == 0);
    }
    let expires = d.expires_len();
    d.snapshot_begin(2, 1, SaveOpts::default(), snapshot::KeyMeta::None);
    let mut parts = Vec::new();
    // Walk past the low slot (the walk goes in slot order when slotted).
    for _ in 0..30 {
        d.snapshot_step(20, usize::MAX);
        parts.extend(take_output(&mut d));
    }
    let high_ttls = (0..200).filter(|i| i % 4 == 0).count();
    assert_eq!(d.clear_slot(high_slot), 200);
    assert_eq!(d.clear_slot(low_slot), 200);
    assert_eq!(d.slot_len(high_slot) + d.slot_len(low_slot), 0);
    assert_eq!(d.len(), 2000);
    assert_eq!(
        d.expires_len(),
        expires - high_ttls - (0..200).filter(|i| i % 3 == 0).count()
    );
    // Keys added to the emptied slots after the start are not in the image.
    for i in 0..50 {
        d.add(&tagged(&high, 1000 + i), Value::str(b"new"));
    }
    while !d.snapshot_step(50, usize::MAX) {
        parts.extend(take_output(&mut d));
    }
    parts.extend(take_output(&mut d));
    assert_eq!(snapshot_contents(&parts), expect);
    let cap = d.snapshot_end().unwrap();
    assert_eq!(cap.keys_saved, 2400);
}

#[test]
fn clear_slot_during_a_snapshot_saves_the_slot_first() {
    clear_slot_keeps_the_snapshot_image(Db::slotted());
    clear_slot_keeps_the_snapshot_image(Db::default());
}

/// The active expire cycle walks every slot holding TTLs, a bounded step at
/// a time, resuming where it stopped.
#[test]
fn slotted_expire_cycle_walks_every_slot_and_resumes() {
    let now = 100_000;
    let mut d = Db::slotted();
    let mut live_ttls = 0;
    for i in 0..3000 {
        let k = format!("k{i}");
        d.add(k.as_bytes(), Value::str(b"v"));
        match i % 3 {
            0 => d.set_expire(k.as_bytes(), now - 1),
            1 => {
                d.set_expire(k.as_bytes(), now + 10_000);
                live_ttls += 1;
            }
            _ => {}
        }
    }
    let mut calls = 0;
    let mut dead = 0;
    loop {
        let (seen, gone) = d.expire_sample(now, 20);
        assert!(seen <= 20 + 10, "{seen}");
        dead += gone.len();
        calls += 1;
        if d.expire_cursor == 0 {
            break;
        }
    }
    assert!(calls > 50, "{calls}");
    assert_eq!(dead, 1000);
    assert_eq!(d.len(), 2000);
    assert_eq!(d.expires_len(), live_ttls);
    assert!(d.avg_ttl > 0);
    assert!(d.keys().iter().all(|(k, _)| !d.is_expired(k, now)));
}

#[test]
fn slotted_cron_finishes_rehashes_and_shrinks_slots() {
    let mut d = Db::slotted();
    let (hot, slot) = tag_where(|_| true);
    for i in 0..5000 {
        d.add(&tagged(&hot, i), Value::str(b"v"));
        d.set_expire(&tagged(&hot, i), 9);
    }
    let rehashing = |d: &Db| {
        slots_of(d)
            .tables
            .iter()
            .flatten()
            .any(|s| s.t.keys.is_rehashing() || s.t.expires.is_rehashing())
    };
    for _ in 0..10 {
        d.cron(true);
    }
    assert!(!rehashing(&d));
    assert!(slots_of(&d).rehashing.is_empty());
    let big = d.keys().buckets();
    assert!(big >= 4096, "{big}");
    for i in 10..5000 {
        d.remove(&tagged(&hot, i));
    }
    for _ in 0..10 {
        d.cron(true);
    }
    assert!(!rehashing(&d));
    assert!(d.keys().buckets() <= 16, "{}", d.keys().buckets());
    assert!(d.expires_buckets() <= 16);
    assert_eq!(d.slot_len(slot), 10);
    let stats = d.keys().stats();
    assert_eq!(stats.len(), 1);
    assert_eq!((stats[0].used, stats[0].chained), (10, 10));
    assert_eq!(d.expires_stats()[0].used, 10);
}

/// A key's value and TTL as the model holds them.
type Model = BTreeMap<Vec<u8>, (Vec<u8>, Option<i64>)>;

struct Case {
    d: Db,
    m: Model,
}

impl Case {
    fn check(&self, full: bool) {
        let (d, m) = (&self.d, &self.m);
        assert_eq!(d.len(), m.len());
        assert_eq!(
            d.expires_len(),
            m.values().filter(|v| v.1.is_some()).count()
        );
        if !full {
            return;
        }
        let got: Model = d
            .keys()
            .iter()
            .map(|(k, v)| (k.to_vec(), (str_of(v), d.expire_at(k))))
            .collect();
        assert_eq!(&got, m);
        let mut scanned = HashSet::new();
        let mut c = 0;
        loop {
            c = d.keys().scan(c, |k, _| {
                scanned.insert(k.to_vec());
            });
            if c == 0 {
                break;
            }
        }
        assert_eq!(scanned.len(), m.len());
        let mut per_slot = BTreeMap::new();
        for k in m.keys() {
            *per_slot.entry(key_hash_slot(k) as usize).or_insert(0) += 1;
        }
        for (&s, &n) in &per_slot {
            assert_eq!(d.slot_len(s), n);
        }
        assert_eq!(
            d.keys().stats()[0].used,
            d.len() - d.keys().stats().get(1).map_or(0, |s| s.used)
        );
    }
}

/// Random operations on a slotted and a standalone database, each against
/// a map: every method must mean the same in both layouts.
#[test]
fn both_layouts_match_a_model_under_random_operations() {
    let now = 1_000_000;
    let tags: Vec<String> = (0..6).map(|i| format!("g{i}")).collect();
    let pool: Vec<Vec<u8>> = (0..500)
        .map(|i| {
            if i % 10 < 7 {
                tagged(&tags[i % 6], i)
            } else {
                format!("plain{i}").into_bytes()
            }
        })
        .collect();
    let mut cases = [
        Case {
            d: Db::slotted(),
            m: Model::new(),
        },
        Case {
            d: Db::default(),
            m: Model::new(),
        },
    ];
    for c in cases.iter_mut() {
        c.d.set_clock(now);
    }
    let mut rng = StdRng::seed_from_u64(5);
    for step in 0..20_000 {
        let op = rng.gen_range(0..100);
        let k = pool[rng.gen_range(0..pool.len())].clone();
        let k2 = pool[rng.gen_range(0..pool.len())].clone();
        let v = format!("v{step}").into_bytes();
        let t = now + rng.gen_range(-1000..1000);
        let max = rng.gen_range(1..20);
        let seed = rng.gen::<u64>();
        for Case { d, m } in cases.iter_mut() {
            let mut r = StdRng::seed_from_u64(seed);
            match op {
                0..=24 => {
                    let keep = r.gen_bool(0.3);
                    d.set(&k, Value::str(&v), keep);
                    let ttl = m.get(&k).and_then(|e| e.1).filter(|_| keep);
                    m.insert(k.clone(), (v.clone(), ttl));
                }
                25..=34 => {
                    if !m.contains_key(&k) {
                        d.add(&k, Value::str(&v));
                        m.insert(k.clone(), (v.clone(), None));
                    }
                }
                35..=49 => {
                    assert_eq!(d.remove(&k).map(|v| str_of(&v)), m.remove(&k).map(|e| e.0));
                }
                50..=59 => {
                    if let Some(e) = m.get_mut(&k) {
                        d.set_expire(&k, t);
                        e.1 = Some(t);
                    }
                }
                60..=64 => {
                    let had = m.get_mut(&k).and_then(|e| e.1.take()).is_some();
                    assert_eq!(d.persist(&k), had);
                }
                65..=69 => {
                    // RENAME-like move.
                    if k != k2 && !m.contains_key(&k2) {
                        let got = d.take_entry(&k);
                        assert_eq!(got.is_some(), m.contains_key(&k));
                        if let Some((_, val, acc, exp)) = got {
                            d.put_entry(CBytes::new(&k2), val, acc, exp);
                            let e = m.remove(&k).unwrap();
                            assert_eq!(e.1, exp);
                            m.insert(k2.clone(), e);
                        }
                    }
                }
                70..=71 => {
                    let slot = key_hash_slot(&k) as usize;
                    let before = m.len();
                    m.retain(|k, _| key_hash_slot(k) as usize != slot);
                    assert_eq!(d.clear_slot(slot), before - m.len());
                }
                72..=75 => {
                    let (_, dead) = d.expire_sample(now, 20);
                    for (k, _) in dead {
                        let e = m.remove(&*k).expect("dead key was present");
                        assert!(e.1.unwrap() < now);
                    }
                }
                76..=80 => {
                    if let Some(Value::Str(s)) = d.get_mut(&k) {
                        *s = StrValue::new(&v);
                        m.get_mut(&k).unwrap().0 = v.clone();
                    } else {
                        assert!(!m.contains_key(&k));
                    }
                }
                81..=84 => d.cron(true),
                85..=89 => {
                    match d.random_key(&mut r) {
                        Some(k) => assert!(m.contains_key(&*k)),
                        None => assert!(m.is_empty()),
                    }
                    match d.random_volatile_key(&mut r) {
                        Some(k) => assert!(m[&*k].1.is_some()),
                        None => assert!(m.values().all(|e| e.1.is_none())),
                    }
                    let volatile = r.gen_bool(0.5);
                    d.sample_for_eviction(5, volatile, &mut r, |k, s| {
                        let e = &m[k];
                        assert_eq!(s.expire, e.1);
                        assert!(!volatile || e.1.is_some());
                    });
                }
                _ => {
                    let slot = key_hash_slot(&k) as usize;
                    let mut want: Vec<&Vec<u8>> = m
                        .keys()
                        .filter(|k| key_hash_slot(k) as usize == slot)
                        .collect();
                    assert_eq!(d.slot_len(slot), want.len());
                    let got = d.slot_keys(slot, max);
                    assert_eq!(got.len(), want.len().min(max));
                    assert!(got.iter().all(|g| m.contains_key(&**g)));
                    let mut all: Vec<Vec<u8>> = d
                        .slot_keys(slot, usize::MAX)
                        .iter()
                        .map(|k| k.to_vec())
                        .collect();
                    all.sort();
                    want.sort();
                    assert_eq!(all.iter().collect::<Vec<_>>(), want);
                }
            }
            assert_eq!(d.get(&k).map(str_of), m.get(&k).map(|e| e.0.clone()));
            assert_eq!(d.expire_at(&k), m.get(&k).and_then(|e| e.1));
        }
        for c in &cases {
            c.check(step % 500 == 0);
        }
    }
    for c in &cases {
        c.check(true);
    }
}
