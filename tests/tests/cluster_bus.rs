//! The cluster bus codec (`protocol::bus`) against a live Redis 7.0.15
//! node: this test plays a node of its own on a bus port, has Redis MEET
//! it, decodes what Redis sends and answers with what `encode` writes.
//! Redis then knows the node by the name it gave and drops the handshake,
//! which it does only for a PONG it parsed; it takes the slots our node
//! claims (which proves the slot bitmap's bit order) and pings us back.

use cinnabar_tests::*;
use protocol::bus::{self, flag, kind, Body, Ext, Header, Message};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::{Duration, Instant};

const OUR_NAME: &[u8; 40] = b"0123456789abcdef0123456789abcdef01234567";

fn read_message(s: &mut TcpStream) -> Message {
    let mut buf = vec![0u8; bus::LEN_PREFIX];
    s.read_exact(&mut buf).expect("a message's first bytes");
    let len = bus::frame_len(&buf).expect("signature").expect("length");
    buf.resize(len, 0);
    s.read_exact(&mut buf[bus::LEN_PREFIX..]).expect("the rest");
    bus::decode(&buf).unwrap_or_else(|e| panic!("Redis's message does not decode: {e}"))
}

/// Our node's PONG: a master with slots 0 and 16383, at `port`/`cport`.
fn our_pong(port: u16, cport: u16, epoch: u64) -> Message {
    let mut h = Header::new(kind::PONG, *OUR_NAME);
    h.port = port;
    h.cport = cport;
    h.flags = flag::MASTER;
    h.current_epoch = epoch;
    h.config_epoch = epoch;
    bus::set_slot(&mut h.slots, 0);
    bus::set_slot(&mut h.slots, 16383);
    Message {
        header: h,
        body: Body::Gossip {
            nodes: vec![],
            exts: vec![],
        },
    }
}

fn nodes_line(c: &mut RawClient, name: &str) -> Option<String> {
    let nodes = text(&c.cmd(&["CLUSTER", "NODES"]));
    nodes
        .lines()
        .find(|l| l.starts_with(name))
        .map(str::to_string)
}

#[test]
fn redis_7_0_meets_a_node_speaking_our_bus_codec() {
    let Some(redis) = tool("redis-server") else {
        return;
    };
    let r = Server::start_bin(
        &redis,
        &[
            ("cluster-enabled", "yes"),
            ("cluster-node-timeout", "5000"),
            ("cluster-announce-hostname", "redis-node-a"),
            ("save", ""),
        ],
    );
    let mut rc = r.raw();
    let redis_name = text(&rc.cmd(&["CLUSTER", "MYID"]));

    // Our node: a client port nobody uses and a bus port we listen on.
    let bus_listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let cport = bus_listener.local_addr().unwrap().port();
    let port = free_port();
    assert_eq!(
        rc.cmd(&[
            "CLUSTER",
            "MEET",
            "127.0.0.1",
            &port.to_string(),
            &cport.to_string()
        ]),
        ok()
    );
    let (mut link, _) = bus_listener
        .accept()
        .expect("Redis connects to our bus port");
    link.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();

    let meet = read_message(&mut link);
    let h = &meet.header;
    assert_eq!(h.kind, kind::MEET);
    assert_eq!(std::str::from_utf8(&h.sender).unwrap(), redis_name);
    assert_eq!(h.port, r.port);
    assert_eq!(h.cport, r.port + 10000);
    assert_eq!(h.flags & flag::MASTER, flag::MASTER);
    // Its hostname travels as an extension.
    let Body::Gossip { exts, .. } = &meet.body else {
        panic!("{meet:?}");
    };
    assert_eq!(exts, &[Ext::Hostname(b"redis-node-a".to_vec())]);
    // Its own encoding, re-read, is the same message.
    assert_eq!(bus::decode(&bus::encode(&meet)), Ok(meet.clone()));

    link.write_all(&bus::encode(&our_pong(port, cport, 1)))
        .unwrap();

    // Redis names the node as we call ourselves once it parsed our PONG.
    let ours = std::str::from_utf8(OUR_NAME).unwrap();
    let until = |what: &str, rc: &mut RawClient, done: &dyn Fn(&str) -> bool| -> String {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(l) = nodes_line(rc, ours).filter(|l| done(l)) {
                return l;
            }
            let all = text(&rc.cmd(&["CLUSTER", "NODES"]));
            assert!(Instant::now() < deadline, "{what}:\n{all}");
            std::thread::sleep(Duration::from_millis(50));
        }
    };
    let line = until("Redis never took our PONG", &mut rc, &|l| {
        !l.contains("handshake")
    });
    assert!(
        line.contains(&format!("127.0.0.1:{port}@{cport}")),
        "{line}"
    );
    assert!(line.contains(" master "), "{line}");

    // A known node's PONG updates what Redis knows of it: our slots.
    link.write_all(&bus::encode(&our_pong(port, cport, 1)))
        .unwrap();
    until("Redis never gave us our slots", &mut rc, &|l| {
        l.ends_with(" connected 0 16383")
    });
    let ping = read_message(&mut link);
    assert!(
        matches!(ping.header.kind, kind::PING | kind::PONG),
        "{ping:?}"
    );
}
