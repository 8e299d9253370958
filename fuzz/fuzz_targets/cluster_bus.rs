//! The cluster bus decoder on messages near valid ones: a valid message of
//! the kind the first byte picks, with the rest of the input XORed over it
//! from an offset the next two bytes pick (lengths, counts and extensions
//! included), else nothing past the header would be read. Decoding must
//! never panic, and a message it accepts must encode to bytes that decode
//! to the same message.
#![no_main]

use cinnabar_protocol::bus::{self, kind, Body, Ext, Gossip, Header, Message};
use libfuzzer_sys::fuzz_target;

fn valid(pick: u8) -> Vec<u8> {
    let body = match pick % 5 {
        0 => Body::Gossip {
            nodes: vec![Gossip {
                name: [b'b'; 40],
                ping_sent: 1,
                pong_received: 2,
                ip: [0; bus::IP_LEN],
                port: 7001,
                cport: 17001,
                flags: 1,
                pport: 0,
            }],
            exts: vec![Ext::Hostname(b"h".to_vec()), Ext::ForgottenNode { name: [b'c'; 40], ttl: 9 }],
        },
        1 => Body::Fail { name: [b'd'; 40] },
        2 => Body::Publish { channel: b"ch".to_vec(), message: b"msg".to_vec() },
        3 => Body::Module { id: 1, kind: 2, payload: b"p".to_vec() },
        _ => Body::Empty,
    };
    let k = [kind::MEET, kind::FAIL, kind::PUBLISH, kind::MODULE, kind::MFSTART][pick as usize % 5];
    let mut h = Header::new(k, [b'a'; 40]);
    h.mflags[0] = bus::mflag0::EXT_DATA;
    bus::encode(&Message { header: h, body })
}

fuzz_target!(|data: &[u8]| {
    let [pick, hi, lo, rest @ ..] = data else {
        return;
    };
    let mut buf = valid(*pick);
    let at = (u16::from_be_bytes([*hi, *lo]) as usize) % buf.len();
    for (i, b) in rest.iter().enumerate() {
        if let Some(x) = buf.get_mut(at + i) {
            *x ^= b;
        } else {
            buf.push(*b);
        }
    }
    if let Ok(m) = bus::decode(&buf) {
        assert_eq!(bus::decode(&bus::encode(&m)), Ok(m));
    }
});
