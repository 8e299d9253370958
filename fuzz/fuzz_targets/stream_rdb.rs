//! Any stream value body (types 15, 19 and 21) is refused or loads into a
//! stream that every operation can then walk and change without a panic:
//! the loader's checks are what the node walks rely on. A loaded stream
//! reads the same both ways, dumps and loads back to the same entries,
//! and takes appends, deletions and trims.
#![no_main]

use cinnabar_storage::rdb::{self, crc64::crc64, Limits, SaveOpts};
use cinnabar_storage::stream::{NodeLimits, Trim};
use cinnabar_storage::{Stream, StreamId, Value};
use libfuzzer_sys::fuzz_target;

fn entries(s: &Stream, rev: bool) -> Vec<(StreamId, Vec<(Vec<u8>, Vec<u8>)>)> {
    let mut v = Vec::new();
    s.range(StreamId::MIN, StreamId::MAX, rev, |e| {
        v.push((e.id, e.to_pairs()));
        true
    });
    v
}

fuzz_target!(|data: &[u8]| {
    let Some((&t, rest)) = data.split_first() else {
        return;
    };
    let mut p = vec![[15u8, 19, 21][t as usize % 3]];
    p.extend_from_slice(rest);
    p.extend_from_slice(&10u16.to_le_bytes());
    let c = crc64(0, &p);
    p.extend_from_slice(&c.to_le_bytes());
    let lim = Limits::default();
    let Ok(Value::Stream(mut s)) = rdb::restore_payload(&p, &lim, true) else {
        return;
    };
    let fwd = entries(&s, false);
    let mut rev = entries(&s, true);
    rev.reverse();
    assert_eq!(fwd, rev);
    assert_eq!(fwd.len() as u64, s.len());
    let d = rdb::dump_payload(&Value::Stream(s.clone()), &SaveOpts::default());
    match rdb::restore_payload(&d, &lim, true) {
        Ok(Value::Stream(s2)) => assert_eq!(entries(&s2, false), fwd),
        _ => panic!("own payload loads"),
    }
    for (id, _) in fwd.iter().step_by(3) {
        s.delete_ids(&[*id]);
    }
    if let Some(next) = s.last_id.incr() {
        s.append(next, &[&b"f"[..], b"v"], NodeLimits::default());
    }
    s.trim(Trim::MaxLen(s.len() / 2), t & 1 == 0, 0);
    s.trim(Trim::MinId(s.last_id), false, 0);
    assert!(s.len() <= 1);
});
