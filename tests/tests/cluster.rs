//! Cluster mode end to end: nodes that `redis-cli --cluster` builds, the
//! redirections clients follow, resharding with keys in flight, and a
//! mixed cluster of cinnabar and Redis 7.0.15 nodes whose masters of
//! either kind fail over to replicas of the other kind with every
//! acknowledged write.

use cinnabar_tests::*;
use std::path::Path;
use std::time::{Duration, Instant};

/// A cluster node: the client and bus ports chosen free, nothing saved.
fn node(bin: &Path) -> Server {
    node_with(bin, &[])
}

fn node_with(bin: &Path, extra: &[(&str, &str)]) -> Server {
    cluster_node(bin, extra).0
}

fn cluster_port(s: &Server) -> String {
    match s.raw().cmd(&["CONFIG", "GET", "cluster-port"]) {
        protocol::Frame::Array(v) => text(&v[1]),
        f => panic!("{f:?}"),
    }
}

/// Every node of `nodes` meets the first and waits until all know all.
fn meet_all(nodes: &[Server]) {
    let (first, cport0) = (nodes[0].port.to_string(), cluster_port(&nodes[0]));
    for s in &nodes[1..] {
        assert_eq!(
            s.raw()
                .cmd(&["CLUSTER", "MEET", "127.0.0.1", &first, &cport0]),
            ok()
        );
    }
    for s in nodes {
        until("every node knows the others", 20, || {
            let t = text(&s.raw().cmd(&["CLUSTER", "NODES"]));
            t.lines().count() == nodes.len() && !t.contains("handshake")
        });
    }
}

fn until(what: &str, secs: u64, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(secs);
    while !done() {
        assert!(Instant::now() < deadline, "{what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn cluster_ok(s: &Server) -> bool {
    text(&s.raw().cmd(&["CLUSTER", "INFO"])).contains("cluster_state:ok")
}

fn myid(s: &Server) -> String {
    text(&s.raw().cmd(&["CLUSTER", "MYID"]))
}

/// Follows -MOVED (and -ASK) as a cluster client does.
fn run(nodes: &[Server], args: &[&str]) -> protocol::Frame {
    let mut port = nodes[0].port;
    let mut asking = false;
    for _ in 0..5 {
        let mut c = RawClient::connect(port);
        if asking {
            assert_eq!(c.cmd(&["ASKING"]), ok());
        }
        let r = c.cmd(args);
        let e = text(&r);
        let redirect = e.strip_prefix("MOVED ").map(|r| (r, false));
        let redirect = redirect.or(e.strip_prefix("ASK ").map(|r| (r, true)));
        let Some((to, ask)) = redirect else {
            return r;
        };
        port = to.rsplit(':').next().unwrap().parse().unwrap();
        asking = ask;
    }
    panic!("redirected in a loop: {args:?}");
}

fn create(nodes: &[Server], replicas: &str) {
    let cli = tool("redis-cli").expect("redis-cli");
    let mut args: Vec<String> = vec!["--cluster".into(), "create".into()];
    args.extend(nodes.iter().map(|s| format!("127.0.0.1:{}", s.port)));
    args.extend([
        "--cluster-replicas".into(),
        replicas.into(),
        "--cluster-yes".into(),
    ]);
    let out = std::process::Command::new(cli)
        .args(&args)
        .output()
        .unwrap();
    let so = String::from_utf8_lossy(&out.stdout);
    assert!(so.contains("[OK] All 16384 slots covered."), "{so}");
    for s in nodes {
        until("cluster_state:ok everywhere", 20, || cluster_ok(s));
    }
}

#[test]
fn redis_cli_builds_a_cluster_that_redirects_as_redis_does() {
    let bin = server_bin();
    let nodes: Vec<Server> = (0..3).map(|_| node(&bin)).collect();
    create(&nodes, "0");
    let mut c0 = nodes[0].raw();
    let info = text(&c0.cmd(&["CLUSTER", "INFO"]));
    for want in [
        "cluster_slots_assigned:16384",
        "cluster_known_nodes:3",
        "cluster_size:3",
    ] {
        assert!(info.contains(want), "{info}");
    }
    // foo hashes to 12182, in the third node's range.
    assert_eq!(c0.cmd(&["CLUSTER", "KEYSLOT", "foo"]), int(12182));
    assert_eq!(
        c0.cmd(&["SET", "foo", "1"]),
        err(&format!("MOVED 12182 127.0.0.1:{}", nodes[2].port))
    );
    assert_eq!(
        c0.cmd(&["MSET", "a", "1", "b", "2"]),
        err("CROSSSLOT Keys in request don't hash to the same slot")
    );
    assert_eq!(
        c0.cmd(&["SELECT", "1"]),
        err("ERR SELECT is not allowed in cluster mode")
    );
    // A queued command for another node: -MOVED, then EXEC aborts.
    assert_eq!(c0.cmd(&["MULTI"]), ok());
    assert!(text(&c0.cmd(&["SET", "foo", "1"])).starts_with("MOVED "));
    assert_eq!(
        c0.cmd(&["EXEC"]),
        err("EXECABORT Transaction discarded because of previous errors.")
    );
    for i in 0..300 {
        assert_eq!(
            run(&nodes, &["SET", &format!("k{i}"), &i.to_string()]),
            ok()
        );
    }
    let keys: i64 = nodes
        .iter()
        .map(|s| match s.raw().cmd(&["DBSIZE"]) {
            protocol::Frame::Integer(n) => n,
            f => panic!("{f:?}"),
        })
        .sum();
    assert_eq!(keys, 300);

    // A slot in migration: -ASK for a key already moved, ASKING once.
    let (from, to) = (&nodes[2], &nodes[0]);
    assert_eq!(from.raw().cmd(&["SET", "{foo}1", "y"]), ok());
    let slot = "12182";
    let (from_id, to_id) = (myid(from), myid(to));
    assert_eq!(
        to.raw()
            .cmd(&["CLUSTER", "SETSLOT", slot, "IMPORTING", &from_id]),
        ok()
    );
    assert_eq!(
        from.raw()
            .cmd(&["CLUSTER", "SETSLOT", slot, "MIGRATING", &to_id]),
        ok()
    );
    let mut f = from.raw();
    assert_eq!(
        f.cmd(&["GET", "foo"]),
        err(&format!("ASK 12182 127.0.0.1:{}", to.port))
    );
    let mut t = to.raw();
    assert!(text(&t.cmd(&["SET", "foo", "x"])).starts_with("MOVED 12182"));
    assert_eq!(t.cmd(&["ASKING"]), ok());
    assert_eq!(t.cmd(&["SET", "foo", "x"]), ok());
    assert!(text(&t.cmd(&["GET", "foo"])).starts_with("MOVED 12182"));
    // One key here, one there: neither node can serve both.
    assert_eq!(
        f.cmd(&["MGET", "{foo}1", "foo"]),
        err("TRYAGAIN Multiple keys request during rehashing of slot")
    );
    for s in [from, to] {
        assert_eq!(s.raw().cmd(&["CLUSTER", "SETSLOT", slot, "STABLE"]), ok());
    }
}

/// Six nodes (three masters, a replica each) built by redis-cli; a
/// reshard of 3000 slots while a client keeps writing through the cluster
/// (following -MOVED and -ASK): every write answered OK, no key lost.
#[test]
fn reshard_under_load_moves_every_key_and_loses_none() {
    let bin = server_bin();
    let nodes: Vec<Server> = (0..6).map(|_| node(&bin)).collect();
    create(&nodes, "1");
    let masters: Vec<&Server> = nodes
        .iter()
        .filter(|s| info_field(&mut s.raw(), "replication", "role") == "master")
        .collect();
    assert_eq!(masters.len(), 3);
    for i in 0..2000 {
        assert_eq!(
            run(&nodes, &["SET", &format!("key:{i}"), &i.to_string()]),
            ok()
        );
    }
    let cli = tool("redis-cli").expect("redis-cli");
    let stop = std::sync::atomic::AtomicBool::new(false);
    let written = std::thread::scope(|scope| {
        let writer = scope.spawn(|| {
            let mut n = 0;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let r = run(&nodes, &["SET", &format!("w:{n}"), &n.to_string()]);
                assert_eq!(r, ok(), "write {n} during the reshard");
                n += 1;
            }
            n
        });
        let out = std::process::Command::new(&cli)
            .args([
                "--cluster",
                "reshard",
                &format!("127.0.0.1:{}", masters[0].port),
            ])
            .args([
                "--cluster-from",
                &myid(masters[1]),
                "--cluster-to",
                &myid(masters[0]),
            ])
            .args(["--cluster-slots", "3000", "--cluster-yes"])
            .output()
            .unwrap();
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stdout)
        );
        writer.join().unwrap()
    });
    assert!(written > 0);
    until("the reshard settles", 20, || {
        let o = std::process::Command::new(&cli)
            .args([
                "--cluster",
                "check",
                &format!("127.0.0.1:{}", masters[0].port),
            ])
            .output()
            .unwrap();
        String::from_utf8_lossy(&o.stdout)
            .contains("[OK] All nodes agree about slots configuration.")
    });
    for i in 0..2000 {
        assert_eq!(
            run(&nodes, &["GET", &format!("key:{i}")]),
            bulk(i.to_string())
        );
    }
    for n in 0..written {
        assert_eq!(
            run(&nodes, &["GET", &format!("w:{n}")]),
            bulk(n.to_string()),
            "w:{n} of {written}"
        );
    }
}

/// redis-cli's other cluster tools: `add-node` a fourth master,
/// `rebalance --cluster-use-empty-masters` onto it, `import` a standalone
/// server's keys, `rebalance --cluster-weight` the node to zero and
/// `del-node` it, with every key still there and `check` content.
#[test]
fn redis_cli_adds_rebalances_imports_and_removes_nodes() {
    let bin = server_bin();
    let nodes: Vec<Server> = (0..4).map(|_| node(&bin)).collect();
    create(&nodes[..3], "0");
    let cli = tool("redis-cli").expect("redis-cli");
    let addr = |s: &Server| format!("127.0.0.1:{}", s.port);
    let try_cluster = |args: &[&str]| {
        let out = std::process::Command::new(&cli)
            .arg("--cluster")
            .args(args)
            .output()
            .unwrap();
        let so = String::from_utf8_lossy(&out.stdout).into_owned();
        (out.status.success(), so)
    };
    let cluster = |args: &[&str]| {
        let (ok, so) = try_cluster(args);
        assert!(ok, "{args:?}: {so}");
        so
    };
    let agreed = || {
        try_cluster(&["check", &addr(&nodes[0])])
            .1
            .contains("[OK] All nodes agree about slots configuration.")
    };
    for i in 0..1000 {
        assert_eq!(
            run(&nodes, &["SET", &format!("k{i}"), &i.to_string()]),
            ok()
        );
    }
    cluster(&["add-node", &addr(&nodes[3]), &addr(&nodes[0])]);
    until(
        "the new node is known everywhere, the cluster ok",
        20,
        || {
            nodes.iter().all(|s| {
                let t = text(&s.raw().cmd(&["CLUSTER", "NODES"]));
                t.lines().count() == 4 && !t.contains("handshake") && cluster_ok(s)
            })
        },
    );
    until("the new node agrees", 20, agreed);
    let rebalanced = cluster(&["rebalance", &addr(&nodes[0]), "--cluster-use-empty-masters"]);
    assert!(rebalanced.contains("Moving"), "{rebalanced}");
    let owned = |s: &Server| text(&s.raw().cmd(&["CLUSTER", "NODES"]));
    assert!(
        owned(&nodes[3])
            .lines()
            .any(|l| l.contains("myself") && l.split(' ').count() > 8),
        "{}",
        owned(&nodes[3])
    );
    // A standalone server's keys imported into the cluster.
    let single = Server::start(&[]);
    for i in 0..200 {
        assert_eq!(single.raw().cmd(&["SET", &format!("i{i}"), "x"]), ok());
    }
    cluster(&[
        "import",
        &addr(&nodes[0]),
        "--cluster-from",
        &addr(&single),
        "--cluster-copy",
    ]);
    // The fourth node emptied, then removed.
    let id3 = myid(&nodes[3]);
    cluster(&[
        "rebalance",
        &addr(&nodes[0]),
        "--cluster-weight",
        &format!("{id3}=0"),
    ]);
    until("the emptied node agrees", 20, agreed);
    assert_eq!(nodes[3].raw().cmd(&["DBSIZE"]), int(0));
    cluster(&["del-node", &addr(&nodes[0]), &id3]);
    until("the node is forgotten", 20, || {
        nodes[..3].iter().all(|s| !owned(s).contains(&id3))
    });
    for i in 0..1000 {
        assert_eq!(
            run(&nodes[..3], &["GET", &format!("k{i}")]),
            bulk(i.to_string())
        );
    }
    for i in 0..200 {
        assert_eq!(run(&nodes[..3], &["GET", &format!("i{i}")]), bulk("x"));
    }
}

/// Masters of both kinds, each with a replica of the other kind: killing
/// a master (kill -9) after WAIT-acknowledged writes promotes its replica,
/// which holds every one of them.
#[test]
fn a_mixed_cluster_fails_over_both_ways() {
    let Some(redis) = tool("redis-server") else {
        return;
    };
    let cin = server_bin();
    let bins = [&cin, &redis, &cin, &redis, &cin, &redis];
    let nodes: Vec<Server> = bins.iter().map(|b| node(b)).collect();
    let ranges = [("0", "5460"), ("5461", "10922"), ("10923", "16383")];
    for (s, (a, b)) in nodes.iter().zip(ranges) {
        assert_eq!(s.raw().cmd(&["CLUSTER", "ADDSLOTSRANGE", a, b]), ok());
    }
    meet_all(&nodes);
    // Replicas: a Redis one of the first cinnabar master, a cinnabar one
    // of the Redis master, a Redis one of the second cinnabar master.
    for (r, m) in [(3, 0), (4, 1), (5, 2)] {
        let id = myid(&nodes[m]);
        until("the master is known to its replica", 10, || {
            nodes[r].raw().cmd(&["CLUSTER", "REPLICATE", &id]) == ok()
        });
    }
    for s in &nodes {
        until("cluster_state:ok", 20, || cluster_ok(s));
    }
    for (r, _) in [(3, 0), (4, 1), (5, 2)] {
        until("the replica is in sync", 20, || {
            info_field(&mut nodes[r].raw(), "replication", "master_link_status") == "up"
        });
    }
    // A manual failover each way: the Redis replica takes over from the
    // cinnabar master (which pauses its writers and tells its offset),
    // then hands back.
    let is_master = |i: usize| {
        let id = myid(&nodes[i]);
        text(&nodes[i].raw().cmd(&["CLUSTER", "NODES"]))
            .lines()
            .any(|l| l.starts_with(&id) && l.contains("myself,master"))
    };
    for (r, m) in [(3, 0), (0, 3)] {
        assert_eq!(nodes[r].raw().cmd(&["CLUSTER", "FAILOVER"]), ok());
        let views = || {
            let n = |i: usize| text(&nodes[i].raw().cmd(&["CLUSTER", "NODES"]));
            format!(
                "node {r} takes over from node {m} by CLUSTER FAILOVER:\n{}\n{}",
                n(r),
                n(m)
            )
        };
        // A manual failover has 5 s (Redis's too): with the other tests'
        // clusters on the same two cores it may run out, which the replica
        // logs; it is asked again then, as a user would.
        let timeouts = || nodes[r].log().matches("Manual failover timed out").count();
        let (mut asked, deadline) = (1, Instant::now() + Duration::from_secs(40));
        while !is_master(r) || is_master(m) {
            assert!(
                Instant::now() < deadline,
                "{}\nreplica's log:\n{}",
                views(),
                nodes[r].log()
            );
            if timeouts() == asked && asked < 4 {
                assert_eq!(nodes[r].raw().cmd(&["CLUSTER", "FAILOVER"]), ok());
                asked += 1;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        // ...and the new master knows it for its replica (an MFSTART from
        // a node it does not know as one is ignored, by Redis too).
        let (rid, mid) = (myid(&nodes[r]), myid(&nodes[m]));
        until("the old master follows the new one", 20, || {
            info_field(&mut nodes[m].raw(), "replication", "master_link_status") == "up"
                && text(&nodes[r].raw().cmd(&["CLUSTER", "REPLICAS", &rid])).contains(&mid)
        });
    }
    for s in &nodes {
        until("cluster_state:ok after the manual failovers", 20, || {
            cluster_ok(s)
        });
    }
    // Writes acknowledged by the replica of their master.
    let mut written = Vec::new();
    for i in 0..300 {
        let k = format!("w{i}");
        assert_eq!(run(&nodes, &["SET", &k, &i.to_string()]), ok());
        written.push(k);
    }
    for m in [0, 1] {
        assert_eq!(nodes[m].raw().cmd(&["WAIT", "1", "5000"]), int(1));
    }
    // kill -9 the cinnabar master, then the Redis master.
    for (m, r) in [(0usize, 3usize), (1, 4)] {
        let id = myid(&nodes[r]);
        kill9(nodes[m].pid());
        until("the replica takes over", 30, || {
            text(&nodes[r].raw().cmd(&["CLUSTER", "NODES"]))
                .lines()
                .any(|l| l.starts_with(&id) && l.contains("myself,master"))
        });
        until("cluster_state:ok again", 30, || cluster_ok(&nodes[r]));
    }
    let alive: Vec<&Server> = [2, 3, 4, 5].iter().map(|&i| &nodes[i]).collect();
    for s in &alive {
        until("cluster_state:ok on every node left", 30, || cluster_ok(s));
    }
    for k in &written {
        let mut port = alive[0].port;
        let v = loop {
            let r = RawClient::connect(port).cmd(&["GET", k]);
            match text(&r).strip_prefix("MOVED ") {
                Some(to) => port = to.rsplit(':').next().unwrap().parse().unwrap(),
                None => break r,
            }
        };
        assert_eq!(v, bulk(&k[1..]), "{k}");
    }
}

/// `tls-cluster yes`: cinnabar and Redis 7.0.15 nodes form a cluster over a
/// TLS bus (each side verifying the other's certificate), a replica of
/// each kind follows a master of the other over TLS, redirections name
/// the TLS port, a plain-text peer gets no answer on the bus, and a
/// cinnabar master killed with kill -9 is replaced by its Redis replica
/// with every acknowledged write.
#[test]
fn a_mixed_cluster_speaks_tls_on_the_bus() {
    let Some(redis) = tool("redis-server") else {
        return;
    };
    let certs = TempDir::new("cluster-tls");
    make_ca(certs.path(), "ca");
    let f = |n: &str| certs.path().join(n).to_string_lossy().into_owned();
    let (ca, cert, key) = (f("ca.crt"), f("ca-server.crt"), f("ca-server.key"));
    let (ccert, ckey) = (f("ca-client.crt"), f("ca-client.key"));
    let cin = server_bin();
    let bins = [&cin, &redis, &cin, &redis, &cin];
    let tls_ports: Vec<String> = bins.iter().map(|_| free_port().to_string()).collect();
    let nodes: Vec<Server> = bins
        .iter()
        .zip(&tls_ports)
        .map(|(b, tp)| {
            node_with(
                b,
                &[
                    ("tls-port", tp),
                    ("tls-cert-file", &cert),
                    ("tls-key-file", &key),
                    ("tls-client-cert-file", &ccert),
                    ("tls-client-key-file", &ckey),
                    ("tls-ca-cert-file", &ca),
                    ("tls-cluster", "yes"),
                    ("tls-replication", "yes"),
                ],
            )
        })
        .collect();
    let ranges = [("0", "5460"), ("5461", "10922"), ("10923", "16383")];
    for (s, (a, b)) in nodes.iter().zip(ranges) {
        assert_eq!(s.raw().cmd(&["CLUSTER", "ADDSLOTSRANGE", a, b]), ok());
    }
    meet_all(&nodes);
    // Nodes announce their TLS port (what `nodes.conf` keeps) and the
    // plain one beside it, which plain-text clients are told.
    // The file is written a moment after the view changes (Redis saves it
    // before its next sleep), so it is waited for.
    for s in &nodes[..2] {
        until("nodes.conf lists every TLS port", 10, || {
            let conf = std::fs::read_to_string(s.dir.join("nodes.conf")).unwrap_or_default();
            tls_ports.iter().all(|tp| conf.contains(&format!(":{tp}@")))
        });
        let listed = text(&s.raw().cmd(&["CLUSTER", "NODES"]));
        for n in &nodes {
            assert!(listed.contains(&format!(":{}@", n.port)), "{listed}");
        }
    }
    // A Redis replica of cinnabar's first master, a cinnabar replica of
    // the Redis master.
    for (r, m) in [(3, 0), (4, 1)] {
        let id = myid(&nodes[m]);
        until("the master is known to its replica", 10, || {
            nodes[r].raw().cmd(&["CLUSTER", "REPLICATE", &id]) == ok()
        });
    }
    for s in &nodes {
        until("cluster_state:ok over TLS", 20, || cluster_ok(s));
    }
    for r in [3, 4] {
        until("the replica is in sync over TLS", 20, || {
            info_field(&mut nodes[r].raw(), "replication", "master_link_status") == "up"
        });
    }
    // A plain-text PING on the TLS bus: no reply, the link is closed.
    let mut plain =
        std::net::TcpStream::connect(("127.0.0.1", cluster_port(&nodes[0]).parse().unwrap()))
            .unwrap();
    plain
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    use std::io::{Read, Write};
    let mut h = protocol::bus::Header::new(protocol::bus::kind::PING, [b'a'; 40]);
    h.flags = protocol::bus::flag::MASTER;
    let body = protocol::bus::Body::Gossip {
        nodes: vec![],
        exts: vec![],
    };
    let ping = protocol::bus::encode(&protocol::bus::Message { header: h, body });
    plain.write_all(&ping).unwrap();
    let mut buf = [0u8; 16];
    assert!(matches!(plain.read(&mut buf), Ok(0) | Err(_)));
    // Writes to the first master: a key of another node is MOVED to its
    // plain port (this client is not on TLS).
    let mut c = nodes[0].raw();
    let mut written = Vec::new();
    for i in 0..200 {
        let k = format!("t{i}");
        match c.cmd(&["SET", &k, &i.to_string()]) {
            r if r == ok() => written.push(k),
            r => {
                let e = text(&r);
                let port = e.rsplit(':').next().unwrap();
                assert!(
                    nodes[1..3].iter().any(|n| n.port.to_string() == port),
                    "{e}"
                );
            }
        }
    }
    assert!(written.len() > 30, "{}", written.len());
    assert_eq!(c.cmd(&["WAIT", "1", "5000"]), int(1));
    let id = myid(&nodes[3]);
    kill9(nodes[0].pid());
    until("the Redis replica takes over", 30, || {
        text(&nodes[3].raw().cmd(&["CLUSTER", "NODES"]))
            .lines()
            .any(|l| l.starts_with(&id) && l.contains("myself,master"))
    });
    for s in &nodes[1..] {
        until("cluster_state:ok again", 30, || cluster_ok(s));
    }
    let mut r = nodes[3].raw();
    for k in &written {
        assert_eq!(r.cmd(&["GET", k]), bulk(&k[1..]), "{k}");
    }
}

/// A node that serves slots 0-5460 only (`bar` is in slot 5061, `foo` in
/// 12182). By default (`cluster-require-full-coverage yes`) the cluster is
/// down and refuses every key; `cluster-allow-reads-when-down yes` lets
/// reads of its slots through; with `cluster-require-full-coverage no` the
/// cluster is up for the slots it has. Holds for redis-server 7.0.15 too.
#[test]
fn coverage_options_decide_what_a_partial_cluster_serves() {
    let down = err("CLUSTERDOWN The cluster is down");
    let unserved = err("CLUSTERDOWN Hash slot not served");
    let cases = [
        (("yes", "no"), "fail", down.clone(), down.clone()),
        (
            ("yes", "yes"),
            "fail",
            nil(),
            err("CLUSTERDOWN The cluster is down and only accepts read commands"),
        ),
        (("no", "no"), "ok", nil(), ok()),
    ];
    for ((full, reads), state, get_bar, set_bar) in cases {
        let s = node_with(
            &server_bin(),
            &[
                ("cluster-require-full-coverage", full),
                ("cluster-allow-reads-when-down", reads),
            ],
        );
        let mut c = s.raw();
        assert_eq!(c.cmd(&["CLUSTER", "ADDSLOTSRANGE", "0", "5460"]), ok());
        // A master waits a moment after start-up before it calls the
        // cluster up; the state it settles in is the one to check.
        until("the cluster state", 20, || {
            text(&c.cmd(&["CLUSTER", "INFO"])).contains(&format!("cluster_state:{state}"))
        });
        if state == "fail" {
            // Past the start-up delay, it stays down.
            std::thread::sleep(Duration::from_millis(2500));
            assert!(text(&c.cmd(&["CLUSTER", "INFO"])).contains("cluster_state:fail"));
        }
        assert_eq!(c.cmd(&["GET", "bar"]), get_bar, "{full} {reads}");
        assert_eq!(c.cmd(&["SET", "bar", "1"]), set_bar, "{full} {reads}");
        // A slot nobody serves is named as such, up or down.
        assert_eq!(c.cmd(&["GET", "foo"]), unserved, "{full} {reads}");
    }
}

/// `cluster-allow-pubsubshard-when-down`: while the cluster is down (a
/// node with part of the slots), SPUBLISH to a channel of a slot it serves
/// goes through by default and is refused with `no`. Holds for
/// redis-server 7.0.15 too.
#[test]
fn pubsubshard_when_down_follows_its_option() {
    for (allow, reply) in [
        ("yes", int(0)),
        ("no", err("CLUSTERDOWN The cluster is down")),
    ] {
        let s = node_with(
            &server_bin(),
            &[("cluster-allow-pubsubshard-when-down", allow)],
        );
        let mut c = s.raw();
        assert_eq!(c.cmd(&["CLUSTER", "ADDSLOTSRANGE", "0", "5460"]), ok());
        assert!(text(&c.cmd(&["CLUSTER", "INFO"])).contains("cluster_state:fail"));
        assert_eq!(c.cmd(&["SPUBLISH", "bar", "m"]), reply, "{allow}");
    }
}

fn kill9(pid: u32) {
    let _ = std::process::Command::new("kill")
        .args(["-9", &pid.to_string()])
        .status();
}

mod bus_input {
    use super::*;
    use protocol::bus::{self, flag, kind, Body, Header, Message};
    use std::io::{Read, Write};
    use std::net::{TcpListener, TcpStream};

    const FAKE: &[u8; 40] = b"fedcba9876543210fedcba9876543210fedcba98";

    fn read_message(s: &mut TcpStream) -> Message {
        let mut buf = vec![0u8; bus::LEN_PREFIX];
        s.read_exact(&mut buf).expect("a message");
        let len = bus::frame_len(&buf).unwrap().unwrap();
        buf.resize(len, 0);
        s.read_exact(&mut buf[bus::LEN_PREFIX..]).unwrap();
        bus::decode(&buf).unwrap()
    }

    fn pong(port: u16, cport: u16, epoch: u64, slots: std::ops::Range<u16>) -> Vec<u8> {
        let mut h = Header::new(kind::PONG, *FAKE);
        (h.port, h.cport, h.flags) = (port, cport, flag::MASTER);
        (h.current_epoch, h.config_epoch) = (epoch, epoch);
        for s in slots {
            bus::set_slot(&mut h.slots, s);
        }
        let body = Body::Gossip {
            nodes: vec![],
            exts: vec![],
        };
        bus::encode(&Message { header: h, body })
    }

    fn bus_port(s: &Server) -> u16 {
        cluster_port(s).parse().unwrap()
    }

    /// Garbage, truncated, oversized and unknown messages are dropped (the
    /// link, or just the message), and a node claiming this node's slots
    /// at an older epoch gets an UPDATE instead of the slots.
    #[test]
    fn bad_input_is_dropped_and_a_stale_claim_loses() {
        let s = node(&server_bin());
        let mut c = s.raw();
        assert_eq!(c.cmd(&["CLUSTER", "ADDSLOTSRANGE", "0", "16383"]), ok());
        assert_eq!(c.cmd(&["CLUSTER", "SET-CONFIG-EPOCH", "5"]), ok());
        let cport = bus_port(&s);
        let closed = |l: &mut TcpStream| {
            l.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            matches!(l.read(&mut [0u8; 64]), Ok(0) | Err(_))
        };
        // A wrong signature, and a length of 2 GB, end the link.
        let mut l = TcpStream::connect(("127.0.0.1", cport)).unwrap();
        l.write_all(b"XXXX\x00\x00\x10\x00").unwrap();
        assert!(closed(&mut l));
        let mut l = TcpStream::connect(("127.0.0.1", cport)).unwrap();
        l.write_all(b"RCmb\x80\x00\x00\x00").unwrap();
        l.write_all(&[0u8; 4096]).unwrap();
        assert!(closed(&mut l));
        // A length that does not fit its type, an unknown type, a message
        // cut short: dropped, nothing learnt.
        let mut l = TcpStream::connect(("127.0.0.1", cport)).unwrap();
        // (a PONG whose count says one gossip section, cut in the middle of it)
        let mut bad = pong(1, 2, 9, 0..16384);
        bad[14..16].copy_from_slice(&1u16.to_be_bytes());
        bad.extend_from_slice(&[0u8; 50]);
        let len = (bad.len() as u32).to_be_bytes();
        bad[4..8].copy_from_slice(&len);
        l.write_all(&bad).unwrap();
        let mut unknown = pong(1, 2, 9, 0..16384);
        unknown[12..14].copy_from_slice(&77u16.to_be_bytes());
        l.write_all(&unknown).unwrap();
        let cut = pong(1, 2, 9, 0..16384);
        l.write_all(&cut[..cut.len() / 2]).unwrap();
        drop(l);
        assert_eq!(c.cmd(&["PING"]), simple("PONG"));
        let nodes = text(&c.cmd(&["CLUSTER", "NODES"]));
        assert_eq!(nodes.lines().count(), 1, "{nodes}");
        assert!(
            nodes.contains("myself,master - 0 0 5 connected 0-16383"),
            "{nodes}"
        );

        // A node that claims slots 0-99 at epoch 1.
        let fake = TcpListener::bind("127.0.0.1:0").unwrap();
        let fake_cport = fake.local_addr().unwrap().port();
        let fake_port = free_port();
        let (p, cp) = (fake_port.to_string(), fake_cport.to_string());
        assert_eq!(c.cmd(&["CLUSTER", "MEET", "127.0.0.1", &p, &cp]), ok());
        let (mut link, _) = fake.accept().unwrap();
        link.set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        assert_eq!(read_message(&mut link).header.kind, kind::MEET);
        link.write_all(&pong(fake_port, fake_cport, 1, 0..0))
            .unwrap();
        let fake_name = std::str::from_utf8(FAKE).unwrap();
        until("the handshake completes", 10, || {
            text(&c.cmd(&["CLUSTER", "NODES"]))
                .lines()
                .any(|l| l.starts_with(fake_name))
        });
        link.write_all(&pong(fake_port, fake_cport, 1, 0..100))
            .unwrap();
        let update = loop {
            let m = read_message(&mut link);
            if m.header.kind == kind::UPDATE {
                break m;
            }
        };
        let Body::Update {
            config_epoch, name, ..
        } = update.body
        else {
            panic!("{update:?}");
        };
        assert_eq!(config_epoch, 5);
        assert_eq!(name, update.header.sender);
        let nodes = text(&c.cmd(&["CLUSTER", "NODES"]));
        assert!(
            nodes.contains("myself,master - 0 0 5 connected 0-16383"),
            "{nodes}"
        );
    }
}
