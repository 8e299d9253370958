//! The addresses a cluster node announces (`cluster-announce-*`): what
//! CLUSTER NODES, SLOTS and SHARDS show of the node itself, what its bus
//! messages tell the other nodes, and what `nodes.conf` keeps. Holds for
//! redis-server 7.0.15 too (`CINNABAR_BIN`).

use cinnabar_tests::*;
use protocol::Frame;
use std::time::{Duration, Instant};

fn cluster_node(extra: &[(&str, &str)]) -> (Server, String) {
    let cport = free_port().to_string();
    let mut opts = vec![
        ("cluster-enabled", "yes"),
        ("cluster-node-timeout", "2000"),
        ("cluster-port", &cport),
        ("save", ""),
    ];
    opts.extend_from_slice(extra);
    (Server::start(&opts), cport)
}

fn until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !done() {
        assert!(Instant::now() < deadline, "{what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The line of node `id` in CLUSTER NODES.
fn nodes_line(s: &Server, id: &str) -> String {
    let all = text(&s.raw().cmd(&["CLUSTER", "NODES"]));
    all.lines()
        .find(|l| l.starts_with(id))
        .unwrap_or_default()
        .to_string()
}

/// `cluster-announce-ip`, `-port` and `-bus-port` replace the address
/// the node shows of itself, and the one its PINGs give the other nodes,
/// which take it over the address they met it at (and then fail to reach
/// it there: the announced ports are nobody's).
#[test]
fn announced_addresses_are_what_nodes_and_clients_see() {
    let (a, _) = cluster_node(&[
        ("cluster-announce-ip", "127.0.0.2"),
        ("cluster-announce-port", "7001"),
        ("cluster-announce-bus-port", "17001"),
    ]);
    let mut c = a.raw();
    assert_eq!(c.cmd(&["CLUSTER", "ADDSLOTSRANGE", "0", "16383"]), ok());
    let id = text(&c.cmd(&["CLUSTER", "MYID"]));
    let me = nodes_line(&a, &id);
    assert!(
        me.starts_with(&format!("{id} 127.0.0.2:7001@17001 myself,master")),
        "{me}"
    );
    let Frame::Array(slots) = c.cmd(&["CLUSTER", "SLOTS"]) else {
        panic!("CLUSTER SLOTS")
    };
    let Frame::Array(range) = &slots[0] else {
        panic!("{slots:?}")
    };
    assert_eq!(
        range[2],
        Frame::Array(vec![
            bulk("127.0.0.2"),
            int(7001),
            bulk(&id),
            Frame::Array(vec![])
        ])
    );
    let shards = format!("{:?}", c.cmd(&["CLUSTER", "SHARDS"]));
    for field in [
        r#"Bulk(b"ip"), Bulk(b"127.0.0.2")"#,
        r#"Bulk(b"endpoint"), Bulk(b"127.0.0.2")"#,
        r#"Bulk(b"port"), Integer(7001)"#,
    ] {
        assert!(shards.contains(field), "{field} in {shards}");
    }

    // A peer that meets it at its real address learns the announced one.
    let (b, _) = cluster_node(&[]);
    let a_cport = match c.cmd(&["CONFIG", "GET", "cluster-port"]) {
        Frame::Array(v) => text(&v[1]),
        f => panic!("{f:?}"),
    };
    assert_eq!(
        b.raw().cmd(&[
            "CLUSTER",
            "MEET",
            "127.0.0.1",
            &a.port.to_string(),
            &a_cport
        ]),
        ok()
    );
    until("the peer to take the announced address", || {
        nodes_line(&b, &id).starts_with(&format!("{id} 127.0.0.2:7001@17001 master"))
    });
}
