//! Any bytes behind a HyperLogLog header are counted, merged, converted,
//! decoded or added to without a panic; a value that counts converts to
//! dense with the same count, as Redis's checks agree with each other.
#![no_main]

use cinnabar_storage::hll::{self, REGISTERS};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    // Most inputs get a valid sparse or dense header, so the registers
    // are what the fuzzer explores.
    let mut v = match mode % 4 {
        0 => rest.to_vec(),
        m => {
            let mut v = b"HYLL".to_vec();
            v.push((m == 1) as u8);
            v.extend_from_slice(&[0; 11]);
            v.extend_from_slice(rest);
            if m == 3 {
                v.resize(hll::DENSE_LEN, 0);
            }
            v
        }
    };
    if !hll::is_hll(&v) {
        return;
    }
    let _ = hll::decode(&v);
    let mut max = [0u8; REGISTERS];
    let merged = hll::merge_into(&mut max, &v);
    if let Ok(n) = hll::count(&v) {
        assert!(merged.is_ok());
        assert_eq!(hll::count_registers(&max), n);
        let mut d = v.clone();
        hll::to_dense(&mut d).expect("a value that counts converts");
        assert_eq!(hll::count(&d), Ok(n));
        assert_eq!(hll::registers(&d).unwrap(), max.to_vec());
    }
    for e in rest.chunks(7).take(64) {
        if hll::add(&mut v, e, 3000).is_err() {
            break;
        }
    }
    let _ = hll::count(&v);
});
