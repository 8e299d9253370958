//! Any input to the RDB loader and the RESTORE payload reader is an error
//! or a value, never a panic, a hang or a huge allocation. The first byte
//! picks the mode; file inputs get a valid header prepended half the time
//! so the fuzzer reaches the opcodes quickly, and payloads get a valid
//! footer (version + CRC) so the value reader is exercised, not the CRC.
#![no_main]

use cinnabar_storage::rdb::{self, crc64::crc64, Limits};
use cinnabar_storage::{StreamId, Value};
use libfuzzer_sys::fuzz_target;

/// Contents in a canonical order (hash tables iterate in per-process
/// random order) plus the encoding.
fn canon(v: &Value) -> (&'static str, Vec<Vec<u8>>) {
    let mut out: Vec<Vec<u8>> = Vec::new();
    let mut sorted = true;
    match v {
        Value::Str(s) => out.push(s.to_vec()),
        Value::List(l) => {
            sorted = false;
            out.extend(l.iter().map(|e| e.to_vec()));
        }
        Value::Set(s) => out.extend(s.iter().map(|e| e.to_vec())),
        Value::Hash(h) => out.extend(h.iter().map(|(f, v)| {
            let mut x = f.to_vec();
            x.push(0);
            x.extend(v.to_vec());
            x
        })),
        Value::ZSet(z) => z.for_each(|m, s| {
            let mut x = m.to_vec();
            x.extend(s.to_bits().to_le_bytes());
            out.push(x);
        }),
        Value::Stream(s) => {
            sorted = false;
            let all = (StreamId::MIN, StreamId::MAX);
            s.range(all.0, all.1, false, |e| {
                out.push(format!("{} {:?}", e.id, e.to_pairs()).into_bytes());
                true
            });
            out.push(format!("{:?}", s.groups).into_bytes());
        }
    }
    if sorted {
        out.sort();
    }
    (v.encoding(), out)
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let lim = Limits::default();
    match mode % 3 {
        0 => {
            let _ = rdb::load(rest, &lim, 0, true, |_| Ok(()));
        }
        1 => {
            let mut f = b"REDIS0010".to_vec();
            f.extend_from_slice(rest);
            let _ = rdb::load(&f, &lim, 0, false, |_| Ok(()));
        }
        _ => {
            let mut p = rest.to_vec();
            p.extend_from_slice(&10u16.to_le_bytes());
            let c = crc64(0, &p);
            p.extend_from_slice(&c.to_le_bytes());
            if let Ok(v) = rdb::restore_payload(&p, &lim, true) {
                // What loads must dump and load back to the same payload.
                let d = rdb::dump_payload(&v, &rdb::SaveOpts::default());
                let v2 = rdb::restore_payload(&d, &lim, true).expect("own payload loads");
                assert_eq!(canon(&v), canon(&v2));
            }
        }
    }
});
