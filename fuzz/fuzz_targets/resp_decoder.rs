//! The request decoder on arbitrary input, fed in arbitrary chunks: it must
//! never panic, and decoding a stream in pieces must give the same requests
//! as decoding it whole.
#![no_main]

use bytes::BytesMut;
use cinnabar_protocol::Decoder;
use libfuzzer_sys::fuzz_target;

fn run(chunks: &[&[u8]]) -> (Vec<Vec<bytes::Bytes>>, bool) {
    let mut d = Decoder::new(1 << 20);
    let mut buf = BytesMut::new();
    let mut out = Vec::new();
    for c in chunks {
        buf.extend_from_slice(c);
        loop {
            match d.decode(&mut buf) {
                Ok(Some(a)) => out.push(a),
                Ok(None) => break,
                Err(_) => return (out, true),
            }
        }
    }
    (out, false)
}

fuzz_target!(|data: &[u8]| {
    if data.is_empty() {
        return;
    }
    let split = data[0] as usize % data.len();
    let rest = &data[1..];
    let split = split.min(rest.len());
    let whole = run(&[rest]);
    let pieces = run(&[&rest[..split], &rest[split..]]);
    // Past 64 KiB a partial line is refused while the whole one may not be
    // (as in Redis), so only shorter streams must agree exactly.
    if rest.len() < cinnabar_protocol::MAX_INLINE {
        assert_eq!(whole, pieces);
    }
});
