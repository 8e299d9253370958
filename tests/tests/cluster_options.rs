//! Cluster options seen from outside: the addresses a node announces
//! (`cluster-announce-*`: what CLUSTER NODES, SLOTS and SHARDS show of the
//! node itself, what its bus messages tell the other nodes) and replica
//! migration (`cluster-migration-barrier`). Holds for redis-server 7.0.15
//! too (`CINNABAR_BIN`).

use cinnabar_tests::*;
use protocol::Frame;
use std::time::{Duration, Instant};

fn node(extra: &[(&str, &str)]) -> (Server, String) {
    cluster_node(&server_bin(), extra)
}

fn until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
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
    let (a, _) = node(&[
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
    let (b, _) = node(&[]);
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

fn myid(s: &Server) -> String {
    text(&s.raw().cmd(&["CLUSTER", "MYID"]))
}

/// The replicas of master `id` in `s`'s view, by ID.
fn replicas_of(s: &Server, id: &str) -> Vec<String> {
    let all = text(&s.raw().cmd(&["CLUSTER", "NODES"]));
    let mut ids: Vec<String> = all
        .lines()
        .filter(|l| l.split(' ').nth(3) == Some(id))
        .map(|l| l.split(' ').next().unwrap().to_string())
        .collect();
    ids.sort();
    ids
}

/// `cluster-migration-barrier`: a master whose replicas all failed gets
/// one from the master with the most working replicas, but only if that
/// master keeps more than the barrier. Masters A and B (all slots), A with
/// one replica, B with two; A's replica dies: with the barrier at 1 one of
/// B's (the smallest ID) moves to A after Redis's 5 s delay, at 2 none.
/// A master whose replica went to follow another is no orphan: none moves.
#[test]
fn migration_barrier_decides_whether_a_replica_moves_to_an_orphan() {
    for (barrier, dies, moves) in [("1", true, true), ("2", true, false), ("1", false, false)] {
        let mut nodes: Vec<(Server, String)> = (0..5)
            .map(|_| node(&[("cluster-migration-barrier", barrier)]))
            .collect();
        let ids: Vec<String> = nodes.iter().map(|(s, _)| myid(s)).collect();
        let cmd = |s: &Server, args: &[&str]| assert_eq!(s.raw().cmd(args), ok(), "{args:?}");
        cmd(&nodes[0].0, &["CLUSTER", "ADDSLOTSRANGE", "0", "8191"]);
        cmd(&nodes[1].0, &["CLUSTER", "ADDSLOTSRANGE", "8192", "16383"]);
        let a_port = nodes[0].0.port.to_string();
        for (s, _) in &nodes[1..] {
            cmd(s, &["CLUSTER", "MEET", "127.0.0.1", &a_port, &nodes[0].1]);
        }
        for (s, _) in &nodes {
            until("every node knows the others", || {
                let t = text(&s.raw().cmd(&["CLUSTER", "NODES"]));
                ids.iter().all(|id| t.contains(id.as_str())) && !t.contains("handshake")
            });
        }
        for (r, m) in [(2, 0), (3, 1), (4, 1)] {
            cmd(&nodes[r].0, &["CLUSTER", "REPLICATE", &ids[m]]);
        }
        let mut bs = vec![ids[3].clone(), ids[4].clone()];
        bs.sort();
        // Only a replica that saw A with a replica counts A as orphaned.
        for (s, _) in &nodes {
            until("every node to see the replicas, the cluster ok", || {
                replicas_of(s, &ids[0]) == [ids[2].clone()]
                    && replicas_of(s, &ids[1]) == bs
                    && text(&s.raw().cmd(&["CLUSTER", "INFO"])).contains("cluster_state:ok")
            });
        }
        if dies {
            drop(nodes.remove(2));
            until("A's replica to be failed", || {
                nodes_line(&nodes[0].0, &ids[2]).contains(",fail ")
            });
        } else {
            cmd(&nodes[2].0, &["CLUSTER", "REPLICATE", &ids[1]]);
            bs.push(ids[2].clone());
            bs.sort();
            until("B to have three replicas", || {
                replicas_of(&nodes[0].0, &ids[1]) == bs
            });
        }
        let a = &nodes[0].0;
        if moves {
            let mut want = vec![ids[2].clone(), bs[0].clone()];
            want.sort();
            until("a replica of B to migrate to A", || {
                replicas_of(a, &ids[0]) == want
            });
            let migrated = if bs[0] == ids[3] { 2 } else { 3 };
            assert!(nodes[migrated]
                .0
                .log()
                .contains(&format!("Migrating to orphaned master {}", ids[0])));
        } else {
            // Well past the delay and the cron ticks that would act on it.
            std::thread::sleep(Duration::from_secs(8));
            assert_eq!(replicas_of(a, &ids[1]), bs);
            let left: &[String] = if dies { &ids[2..3] } else { &[] };
            assert_eq!(replicas_of(a, &ids[0]), left);
        }
    }
}

/// `cluster-announce-tls-port` under `tls-cluster yes`: the TLS port the
/// node announces, which `nodes.conf` keeps (and TLS clients are told),
/// beside `cluster-announce-port`, the plain one plain-text clients see.
#[test]
fn announced_tls_port_is_kept_beside_the_plain_one() {
    let certs = TempDir::new("announce-tls");
    make_ca(certs.path(), "ca");
    let f = |n: &str| certs.path().join(n).to_string_lossy().into_owned();
    let tls_port = free_port().to_string();
    let (s, _) = node(&[
        ("tls-port", &tls_port),
        ("tls-cert-file", &f("ca-server.crt")),
        ("tls-key-file", &f("ca-server.key")),
        ("tls-client-cert-file", &f("ca-client.crt")),
        ("tls-client-key-file", &f("ca-client.key")),
        ("tls-ca-cert-file", &f("ca.crt")),
        ("tls-cluster", "yes"),
        ("cluster-announce-tls-port", "7443"),
        ("cluster-announce-port", "7001"),
        ("cluster-announce-bus-port", "17001"),
    ]);
    let mut c = s.raw();
    assert_eq!(c.cmd(&["CLUSTER", "ADDSLOTSRANGE", "0", "100"]), ok());
    let id = text(&c.cmd(&["CLUSTER", "MYID"]));
    let me = format!("{id} :7001@17001 myself,master");
    assert!(
        nodes_line(&s, &id).starts_with(&me),
        "{}",
        nodes_line(&s, &id)
    );
    let Frame::Array(slots) = c.cmd(&["CLUSTER", "SLOTS"]) else {
        panic!("CLUSTER SLOTS")
    };
    assert_eq!(
        slots[0],
        Frame::Array(vec![
            int(0),
            int(100),
            Frame::Array(vec![bulk(""), int(7001), bulk(&id), Frame::Array(vec![])])
        ])
    );
    let tls_me = format!("{id} :7443@17001 myself,master");
    let conf = s.dir.join("nodes.conf");
    until("nodes.conf to keep the TLS port", || {
        std::fs::read_to_string(&conf).is_ok_and(|t| t.contains(&tls_me))
    });
    let tls_cli = s.cli_out(&[
        "--tls",
        "--cacert",
        &f("ca.crt"),
        "--cert",
        &f("ca-client.crt"),
        "--key",
        &f("ca-client.key"),
        "-p",
        &tls_port,
        "CLUSTER",
        "NODES",
    ]);
    assert!(tls_cli.starts_with(&tls_me), "{tls_cli}");
}
