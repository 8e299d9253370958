//! Any input to the RDB loader and the RESTORE payload reader is an error
//! or a value, never a panic, a hang or a huge allocation. The first byte
//! picks the mode; file inputs get a valid header prepended half the time
//! so the fuzzer reaches the opcodes quickly, and payloads get a valid
//! footer (version + CRC) so the value reader is exercised, not the CRC.
//! A file read in small windows (`rdb::Input::reading`) loads the same
//! keys, or fails with the same error, as the whole file.
#![no_main]

use cinnabar_storage::rdb::{self, crc64::crc64, Input, Limits, Loaded};
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

type Keys = Vec<(usize, Vec<u8>, (&'static str, Vec<Vec<u8>>), Option<i64>)>;

fn load_keys(input: Input, verify: bool) -> Result<(usize, Keys), rdb::LoadError> {
    let mut got = Vec::new();
    let sum = rdb::load_input(input, &Limits::default(), 0, verify, |k: Loaded| {
        got.push((k.db, k.key, canon(&k.value), k.expire_ms));
        Ok(())
    })?;
    Ok((sum.end, got))
}

/// The whole file and the file read `piece` bytes at a time load alike.
fn both(f: &[u8], piece: usize, verify: bool) {
    let whole = load_keys(Input::whole(f), verify);
    let mut src = f;
    let streamed = load_keys(Input::stream(&mut src, None).reading(piece), verify);
    assert_eq!(whole, streamed);
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let lim = Limits::default();
    match mode % 3 {
        0 => both(rest, (mode as usize / 3) % 16 + 1, true),
        1 => {
            let mut f = b"REDIS0010".to_vec();
            f.extend_from_slice(rest);
            both(&f, (mode as usize / 3) % 16 + 1, false);
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
