//! The Redis Cluster bus: the binary messages cluster nodes exchange on
//! their bus port, laid out as Redis 7.0 lays them out, every integer in
//! network byte order. A message is a fixed header of [`HEADER_LEN`] bytes
//! (who sends, its epochs, offset, slots, master, address and flags) and a
//! body whose shape its type fixes. [`decode`] checks the length a type
//! requires exactly, as a node must before trusting a byte of it, and never
//! panics on what a peer sends; [`encode`] writes the same layout back.

use std::fmt;

pub const SIGNATURE: &[u8; 4] = b"RCmb";
/// The only version of the protocol (Redis 7.0's `CLUSTER_PROTO_VER`).
pub const VERSION: u16 = 1;
pub const NAME_LEN: usize = 40;
pub const IP_LEN: usize = 46;
pub const SLOT_BYTES: usize = 16384 / 8;
/// The header, up to where the body starts.
pub const HEADER_LEN: usize = 2256;
/// One gossip section of PING, PONG and MEET.
pub const GOSSIP_LEN: usize = 104;
/// What must have arrived before a message's length is known.
pub const LEN_PREFIX: usize = 8;

/// Message types.
pub mod kind {
    pub const PING: u16 = 0;
    pub const PONG: u16 = 1;
    pub const MEET: u16 = 2;
    pub const FAIL: u16 = 3;
    pub const PUBLISH: u16 = 4;
    pub const FAILOVER_AUTH_REQUEST: u16 = 5;
    pub const FAILOVER_AUTH_ACK: u16 = 6;
    pub const UPDATE: u16 = 7;
    pub const MFSTART: u16 = 8;
    pub const MODULE: u16 = 9;
    pub const PUBLISHSHARD: u16 = 10;
}

/// Node flags, in the header and in gossip sections.
pub mod flag {
    pub const MASTER: u16 = 1;
    pub const REPLICA: u16 = 2;
    pub const PFAIL: u16 = 4;
    pub const FAIL: u16 = 8;
    pub const MYSELF: u16 = 16;
    pub const HANDSHAKE: u16 = 32;
    pub const NOADDR: u16 = 64;
    pub const MEET: u16 = 128;
    pub const MIGRATE_TO: u16 = 256;
    pub const NOFAILOVER: u16 = 512;
}

/// Bits of the header's first message-flag byte.
pub mod mflag0 {
    /// The master is paused for a manual failover.
    pub const PAUSED: u8 = 1;
    /// Give an ACK to AUTH_REQUEST even if the master is up.
    pub const FORCEACK: u8 = 2;
    /// The message carries extensions (and the sender understands them).
    pub const EXT_DATA: u8 = 4;
}

/// Extension types of PING, PONG and MEET.
pub mod ext {
    pub const HOSTNAME: u16 = 0;
    pub const FORGOTTEN_NODE: u16 = 1;
}

/// Whether a slot bitmap has slot `n`: bit `n % 8` (least significant
/// first) of byte `n / 8`.
pub fn has_slot(slots: &[u8; SLOT_BYTES], n: u16) -> bool {
    slots[n as usize / 8] & (1 << (n % 8)) != 0
}

pub fn set_slot(slots: &mut [u8; SLOT_BYTES], n: u16) {
    slots[n as usize / 8] |= 1 << (n % 8);
}

/// A node's 40-character name (hex), as it travels: zeros for none.
pub type Name = [u8; NAME_LEN];

#[derive(Clone, PartialEq, Eq)]
pub struct Header {
    pub ver: u16,
    /// The sender's client port (its TLS port when the bus is TLS).
    pub port: u16,
    pub kind: u16,
    /// Gossip sections (PING, PONG, MEET).
    pub count: u16,
    pub current_epoch: u64,
    pub config_epoch: u64,
    /// Replication offset: the master's, or what a replica processed.
    pub offset: u64,
    pub sender: Name,
    /// The slots the sender (or, for a replica, its master) serves.
    pub slots: Box<[u8; SLOT_BYTES]>,
    pub replica_of: Name,
    /// The address the sender announces, NUL-padded; empty: the one the
    /// receiver sees.
    pub ip: [u8; IP_LEN],
    /// Extensions after the gossip sections.
    pub extensions: u16,
    /// The other client port (plain when `port` is TLS, and the reverse).
    pub pport: u16,
    pub cport: u16,
    pub flags: u16,
    /// The cluster's state as the sender sees it (0 ok, 1 fail).
    pub state: u8,
    pub mflags: [u8; 3],
}

impl fmt::Debug for Header {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Header")
            .field("kind", &self.kind)
            .field("sender", &String::from_utf8_lossy(&self.sender))
            .field("port", &self.port)
            .field("cport", &self.cport)
            .field("flags", &self.flags)
            .field("current_epoch", &self.current_epoch)
            .field("config_epoch", &self.config_epoch)
            .finish_non_exhaustive()
    }
}

impl Header {
    /// A header of `kind` from `sender`, every other field zero.
    pub fn new(kind: u16, sender: Name) -> Header {
        Header {
            ver: VERSION,
            port: 0,
            kind,
            count: 0,
            current_epoch: 0,
            config_epoch: 0,
            offset: 0,
            sender,
            slots: Box::new([0; SLOT_BYTES]),
            replica_of: [0; NAME_LEN],
            ip: [0; IP_LEN],
            extensions: 0,
            pport: 0,
            cport: 0,
            flags: 0,
            state: 0,
            mflags: [0; 3],
        }
    }
}

/// What a PING, PONG or MEET says of one other node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Gossip {
    pub name: Name,
    /// Seconds (unix) of the last PING the sender sent it, and of the last
    /// PONG it got.
    pub ping_sent: u32,
    pub pong_received: u32,
    pub ip: [u8; IP_LEN],
    pub port: u16,
    pub cport: u16,
    pub flags: u16,
    pub pport: u16,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Ext {
    Hostname(Vec<u8>),
    /// A node the cluster forgets, and for how many more seconds.
    ForgottenNode {
        name: Name,
        ttl: u64,
    },
    /// A type this node does not know: kept, so nothing is lost in transit.
    Other {
        kind: u16,
        data: Vec<u8>,
    },
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Body {
    /// PING, PONG, MEET.
    Gossip {
        nodes: Vec<Gossip>,
        exts: Vec<Ext>,
    },
    Fail {
        name: Name,
    },
    /// PUBLISH, PUBLISHSHARD.
    Publish {
        channel: Vec<u8>,
        message: Vec<u8>,
    },
    Update {
        config_epoch: u64,
        name: Name,
        slots: Box<[u8; SLOT_BYTES]>,
    },
    Module {
        id: u64,
        kind: u8,
        payload: Vec<u8>,
    },
    /// FAILOVER_AUTH_REQUEST, FAILOVER_AUTH_ACK, MFSTART: the header says all.
    Empty,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Message {
    pub header: Header,
    pub body: Body,
}

/// Why a message was refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BusError {
    /// Fewer bytes than the header or than its length says.
    Short,
    Signature,
    /// The declared length is not the one the type and its counts imply.
    Length {
        declared: usize,
        expected: usize,
    },
    /// A version this node does not speak (Redis ignores such messages).
    Version(u16),
    UnknownType(u16),
    /// An extension whose length is too small or runs past the message.
    Extension,
}

impl fmt::Display for BusError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BusError::Short => f.write_str("message shorter than its header"),
            BusError::Signature => f.write_str("bad signature"),
            BusError::Length { declared, expected } => {
                write!(f, "length {declared}, expected {expected}")
            }
            BusError::Version(v) => write!(f, "unknown protocol version {v}"),
            BusError::UnknownType(t) => write!(f, "unknown message type {t}"),
            BusError::Extension => f.write_str("malformed extension"),
        }
    }
}

/// The length of the message at the start of `buf`, once its first
/// [`LEN_PREFIX`] bytes are there; an error for a wrong signature or a
/// length below the smallest message, which ends the link.
pub fn frame_len(buf: &[u8]) -> Result<Option<usize>, BusError> {
    if buf.len() < LEN_PREFIX {
        return Ok(None);
    }
    if &buf[..4] != SIGNATURE {
        return Err(BusError::Signature);
    }
    let len = u32::from_be_bytes([buf[4], buf[5], buf[6], buf[7]]) as usize;
    if len < HEADER_LEN {
        return Err(BusError::Length {
            declared: len,
            expected: HEADER_LEN,
        });
    }
    Ok(Some(len))
}

/// Reads big-endian fields off a slice whose length was checked.
struct Cursor<'a> {
    buf: &'a [u8],
    at: usize,
}

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], BusError> {
        let end = self.at.checked_add(n).ok_or(BusError::Short)?;
        let s = self.buf.get(self.at..end).ok_or(BusError::Short)?;
        self.at = end;
        Ok(s)
    }
    fn array<const N: usize>(&mut self) -> Result<[u8; N], BusError> {
        Ok(self.take(N)?.try_into().expect("N bytes"))
    }
    fn u8(&mut self) -> Result<u8, BusError> {
        Ok(self.take(1)?[0])
    }
    fn u16(&mut self) -> Result<u16, BusError> {
        Ok(u16::from_be_bytes(self.array()?))
    }
    fn u32(&mut self) -> Result<u32, BusError> {
        Ok(u32::from_be_bytes(self.array()?))
    }
    fn u64(&mut self) -> Result<u64, BusError> {
        Ok(u64::from_be_bytes(self.array()?))
    }
    fn slots(&mut self) -> Result<Box<[u8; SLOT_BYTES]>, BusError> {
        let mut s = Box::new([0u8; SLOT_BYTES]);
        s.copy_from_slice(self.take(SLOT_BYTES)?);
        Ok(s)
    }
}

fn header(c: &mut Cursor) -> Result<Header, BusError> {
    let sig = c.take(4)?;
    if sig != SIGNATURE {
        return Err(BusError::Signature);
    }
    let _totlen = c.u32()?;
    let h = Header {
        ver: c.u16()?,
        port: c.u16()?,
        kind: c.u16()?,
        count: c.u16()?,
        current_epoch: c.u64()?,
        config_epoch: c.u64()?,
        offset: c.u64()?,
        sender: c.array()?,
        slots: c.slots()?,
        replica_of: c.array()?,
        ip: c.array()?,
        extensions: c.u16()?,
        pport: {
            c.take(30)?;
            c.u16()?
        },
        cport: c.u16()?,
        flags: c.u16()?,
        state: c.u8()?,
        mflags: c.array()?,
    };
    Ok(h)
}

fn gossip(c: &mut Cursor) -> Result<Gossip, BusError> {
    let g = Gossip {
        name: c.array()?,
        ping_sent: c.u32()?,
        pong_received: c.u32()?,
        ip: c.array()?,
        port: c.u16()?,
        cport: c.u16()?,
        flags: c.u16()?,
        pport: c.u16()?,
    };
    c.take(2)?;
    Ok(g)
}

/// An extension: its length (header included, a multiple of 8), type,
/// two unused bytes, then its data.
fn extension(c: &mut Cursor) -> Result<Ext, BusError> {
    let len = c.u32()? as usize;
    let kind = c.u16()?;
    c.take(2)?;
    let data = c.take(len.checked_sub(8).ok_or(BusError::Extension)?)?;
    Ok(match kind {
        ext::HOSTNAME => {
            let end = data.iter().position(|&b| b == 0).unwrap_or(data.len());
            Ext::Hostname(data[..end].to_vec())
        }
        ext::FORGOTTEN_NODE if data.len() >= NAME_LEN + 8 => {
            let mut d = Cursor { buf: data, at: 0 };
            Ext::ForgottenNode {
                name: d.array()?,
                ttl: d.u64()?,
            }
        }
        _ => Ext::Other {
            kind,
            data: data.to_vec(),
        },
    })
}

/// One whole message (as long as [`frame_len`] said).
pub fn decode(buf: &[u8]) -> Result<Message, BusError> {
    if buf.len() < HEADER_LEN {
        return Err(BusError::Short);
    }
    let declared = frame_len(buf)?.ok_or(BusError::Short)?;
    if declared != buf.len() {
        return Err(BusError::Length {
            declared,
            expected: buf.len(),
        });
    }
    let mut c = Cursor { buf, at: 0 };
    let h = header(&mut c)?;
    if h.ver != VERSION {
        return Err(BusError::Version(h.ver));
    }
    let fixed = |n: usize| -> Result<(), BusError> {
        match HEADER_LEN + n {
            e if e == declared => Ok(()),
            expected => Err(BusError::Length { declared, expected }),
        }
    };
    let body = match h.kind {
        kind::PING | kind::PONG | kind::MEET => {
            let n = h.count as usize;
            let at_exts = HEADER_LEN + n * GOSSIP_LEN;
            if at_exts > declared {
                return Err(BusError::Length {
                    declared,
                    expected: at_exts,
                });
            }
            let nodes = (0..n).map(|_| gossip(&mut c)).collect::<Result<_, _>>()?;
            let mut exts = Vec::new();
            if h.mflags[0] & mflag0::EXT_DATA != 0 {
                for _ in 0..h.extensions {
                    exts.push(extension(&mut c)?);
                }
            }
            if c.at != declared {
                return Err(BusError::Length {
                    declared,
                    expected: c.at,
                });
            }
            Body::Gossip { nodes, exts }
        }
        kind::FAIL => {
            fixed(NAME_LEN)?;
            Body::Fail { name: c.array()? }
        }
        kind::PUBLISH | kind::PUBLISHSHARD => {
            let channel_len = c.u32()? as usize;
            let message_len = c.u32()? as usize;
            fixed(8 + channel_len + message_len)?;
            Body::Publish {
                channel: c.take(channel_len)?.to_vec(),
                message: c.take(message_len)?.to_vec(),
            }
        }
        kind::UPDATE => {
            fixed(8 + NAME_LEN + SLOT_BYTES)?;
            Body::Update {
                config_epoch: c.u64()?,
                name: c.array()?,
                slots: c.slots()?,
            }
        }
        kind::MODULE => {
            let id = c.u64()?;
            let len = c.u32()? as usize;
            let kind = c.u8()?;
            fixed(13 + len)?;
            Body::Module {
                id,
                kind,
                payload: c.take(len)?.to_vec(),
            }
        }
        kind::FAILOVER_AUTH_REQUEST | kind::FAILOVER_AUTH_ACK | kind::MFSTART => {
            fixed(0)?;
            Body::Empty
        }
        t => return Err(BusError::UnknownType(t)),
    };
    Ok(Message { header: h, body })
}

fn put_ext(out: &mut Vec<u8>, kind: u16, data: &[u8]) {
    // Padded with NULs to a multiple of 8 (a hostname keeps one at least).
    let pad = if kind == ext::HOSTNAME {
        8 - data.len() % 8
    } else {
        (8 - data.len() % 8) % 8
    };
    out.extend_from_slice(&((8 + data.len() + pad) as u32).to_be_bytes());
    out.extend_from_slice(&kind.to_be_bytes());
    out.extend_from_slice(&[0, 0]);
    out.extend_from_slice(data);
    out.resize(out.len() + pad, 0);
}

/// The message's bytes; the header's length, and for PING, PONG and MEET
/// its `count` and (under EXT_DATA) `extensions`, are taken from the body.
pub fn encode(m: &Message) -> Vec<u8> {
    let h = &m.header;
    let mut out = Vec::with_capacity(HEADER_LEN + 256);
    out.extend_from_slice(SIGNATURE);
    out.extend_from_slice(&[0; 4]);
    // Extensions are read only under EXT_DATA: without it the field is
    // carried as it came.
    let (count, extensions) = match &m.body {
        Body::Gossip { nodes, exts } if h.mflags[0] & mflag0::EXT_DATA != 0 => {
            (nodes.len() as u16, exts.len() as u16)
        }
        Body::Gossip { nodes, .. } => (nodes.len() as u16, h.extensions),
        _ => (h.count, h.extensions),
    };
    for v in [h.ver, h.port, h.kind, count] {
        out.extend_from_slice(&v.to_be_bytes());
    }
    for v in [h.current_epoch, h.config_epoch, h.offset] {
        out.extend_from_slice(&v.to_be_bytes());
    }
    out.extend_from_slice(&h.sender);
    out.extend_from_slice(&h.slots[..]);
    out.extend_from_slice(&h.replica_of);
    out.extend_from_slice(&h.ip);
    out.extend_from_slice(&extensions.to_be_bytes());
    out.extend_from_slice(&[0; 30]);
    for v in [h.pport, h.cport, h.flags] {
        out.extend_from_slice(&v.to_be_bytes());
    }
    out.push(h.state);
    out.extend_from_slice(&h.mflags);
    debug_assert_eq!(out.len(), HEADER_LEN);
    match &m.body {
        Body::Gossip { nodes, exts } => {
            for g in nodes {
                out.extend_from_slice(&g.name);
                out.extend_from_slice(&g.ping_sent.to_be_bytes());
                out.extend_from_slice(&g.pong_received.to_be_bytes());
                out.extend_from_slice(&g.ip);
                for v in [g.port, g.cport, g.flags, g.pport, 0] {
                    out.extend_from_slice(&v.to_be_bytes());
                }
            }
            for e in exts {
                match e {
                    Ext::Hostname(name) => put_ext(&mut out, ext::HOSTNAME, name),
                    Ext::ForgottenNode { name, ttl } => {
                        let mut d = name.to_vec();
                        d.extend_from_slice(&ttl.to_be_bytes());
                        put_ext(&mut out, ext::FORGOTTEN_NODE, &d);
                    }
                    Ext::Other { kind, data } => put_ext(&mut out, *kind, data),
                }
            }
        }
        Body::Fail { name } => out.extend_from_slice(name),
        Body::Publish { channel, message } => {
            out.extend_from_slice(&(channel.len() as u32).to_be_bytes());
            out.extend_from_slice(&(message.len() as u32).to_be_bytes());
            out.extend_from_slice(channel);
            out.extend_from_slice(message);
        }
        Body::Update {
            config_epoch,
            name,
            slots,
        } => {
            out.extend_from_slice(&config_epoch.to_be_bytes());
            out.extend_from_slice(name);
            out.extend_from_slice(&slots[..]);
        }
        Body::Module { id, kind, payload } => {
            out.extend_from_slice(&id.to_be_bytes());
            out.extend_from_slice(&(payload.len() as u32).to_be_bytes());
            out.push(*kind);
            out.extend_from_slice(payload);
        }
        Body::Empty => {}
    }
    let len = (out.len() as u32).to_be_bytes();
    out[4..8].copy_from_slice(&len);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name(c: u8) -> Name {
        [c; NAME_LEN]
    }

    fn sample(kind: u16, body: Body) -> Message {
        let mut h = Header::new(kind, name(b'a'));
        h.port = 7000;
        h.cport = 17000;
        h.current_epoch = 5;
        h.config_epoch = 3;
        h.offset = 1 << 40;
        h.flags = flag::MASTER;
        set_slot(&mut h.slots, 7);
        h.ip[..9].copy_from_slice(b"127.0.0.1");
        if matches!(body, Body::Gossip { ref exts, .. } if !exts.is_empty()) {
            h.mflags[0] = mflag0::EXT_DATA;
        }
        let mut m = Message { header: h, body };
        // What encoding fills in from the body.
        if let Body::Gossip { nodes, exts } = &m.body {
            m.header.count = nodes.len() as u16;
            m.header.extensions = exts.len() as u16;
        }
        m
    }

    fn every_kind() -> Vec<Message> {
        let g = Gossip {
            name: name(b'b'),
            ping_sent: 1,
            pong_received: 2,
            ip: [0; IP_LEN],
            port: 7001,
            cport: 17001,
            flags: flag::REPLICA | flag::PFAIL,
            pport: 0,
        };
        vec![
            sample(
                kind::PING,
                Body::Gossip {
                    nodes: vec![],
                    exts: vec![],
                },
            ),
            sample(
                kind::MEET,
                Body::Gossip {
                    nodes: vec![g.clone(), g],
                    exts: vec![
                        Ext::Hostname(b"node-1.example".to_vec()),
                        Ext::ForgottenNode {
                            name: name(b'c'),
                            ttl: 60,
                        },
                        Ext::Other {
                            kind: 9,
                            data: vec![1; 16],
                        },
                    ],
                },
            ),
            sample(kind::FAIL, Body::Fail { name: name(b'd') }),
            sample(
                kind::PUBLISHSHARD,
                Body::Publish {
                    channel: b"ch".to_vec(),
                    message: b"hello".to_vec(),
                },
            ),
            sample(
                kind::UPDATE,
                Body::Update {
                    config_epoch: 9,
                    name: name(b'e'),
                    slots: Box::new([0xff; SLOT_BYTES]),
                },
            ),
            sample(
                kind::MODULE,
                Body::Module {
                    id: 7,
                    kind: 1,
                    payload: b"xyz".to_vec(),
                },
            ),
            sample(kind::FAILOVER_AUTH_ACK, Body::Empty),
        ]
    }

    #[test]
    fn every_kind_survives_a_round_trip() {
        for m in every_kind() {
            let bytes = encode(&m);
            assert_eq!(frame_len(&bytes), Ok(Some(bytes.len())));
            assert_eq!(decode(&bytes), Ok(m));
        }
    }

    #[test]
    fn the_header_fields_sit_where_redis_puts_them() {
        let bytes = encode(&every_kind()[0]);
        assert_eq!(bytes.len(), HEADER_LEN);
        assert_eq!(&bytes[..4], b"RCmb");
        assert_eq!(&bytes[4..8], &(HEADER_LEN as u32).to_be_bytes());
        assert_eq!(&bytes[10..12], &7000u16.to_be_bytes());
        assert_eq!(&bytes[16..24], &5u64.to_be_bytes());
        assert_eq!(&bytes[40..80], &name(b'a'));
        assert_eq!(bytes[80], 0x80);
        assert!(has_slot(&every_kind()[0].header.slots, 7));
        assert_eq!(&bytes[2168..2177], b"127.0.0.1");
        assert_eq!(&bytes[2248..2250], &17000u16.to_be_bytes());
        assert_eq!(&bytes[2250..2252], &flag::MASTER.to_be_bytes());
    }

    #[test]
    fn extensions_are_read_only_under_ext_data() {
        let mut m = sample(
            kind::PING,
            Body::Gossip {
                nodes: vec![],
                exts: vec![],
            },
        );
        m.header.extensions = 3;
        let bytes = encode(&m);
        assert_eq!(bytes.len(), HEADER_LEN);
        assert_eq!(decode(&bytes), Ok(m));
    }

    #[test]
    fn a_hostname_extension_is_nul_terminated_and_padded() {
        let m = sample(
            kind::PING,
            Body::Gossip {
                nodes: vec![],
                exts: vec![Ext::Hostname(b"12345678".to_vec())],
            },
        );
        let bytes = encode(&m);
        // 8 of header, 8 of name, 8 of padding that holds the NUL.
        assert_eq!(bytes.len(), HEADER_LEN + 24);
        assert_eq!(&bytes[HEADER_LEN..HEADER_LEN + 4], &24u32.to_be_bytes());
    }

    /// Whatever a peer sends, decoding answers: cut short, grown, a byte
    /// changed anywhere in the lengths, a wrong signature, version or type.
    #[test]
    fn bad_input_is_refused_never_a_panic() {
        for m in every_kind() {
            let bytes = encode(&m);
            for cut in [0, 1, 7, 8, HEADER_LEN - 1, HEADER_LEN, bytes.len() - 1] {
                if cut < bytes.len() {
                    assert!(decode(&bytes[..cut]).is_err(), "cut at {cut}");
                }
            }
            let mut grown = bytes.clone();
            grown.extend_from_slice(&[0; 8]);
            let len = (grown.len() as u32).to_be_bytes();
            grown[4..8].copy_from_slice(&len);
            assert!(decode(&grown).is_err());
            for at in (0..bytes.len()).step_by(7) {
                let mut b = bytes.clone();
                b[at] ^= 0xff;
                let _ = decode(&b);
            }
        }
        let mut b = encode(&every_kind()[0]);
        b[0] = b'X';
        assert_eq!(decode(&b), Err(BusError::Signature));
        assert_eq!(frame_len(&b), Err(BusError::Signature));
        let mut b = encode(&every_kind()[0]);
        b[9] = 2;
        assert_eq!(decode(&b), Err(BusError::Version(2)));
        let mut b = encode(&every_kind()[0]);
        b[13] = 99;
        assert_eq!(decode(&b), Err(BusError::UnknownType(99)));
        assert_eq!(
            frame_len(b"RCmb\0\0\0\x10"),
            Err(BusError::Length {
                declared: 16,
                expected: HEADER_LEN
            })
        );
        assert_eq!(frame_len(b"RCmb"), Ok(None));
    }
}
