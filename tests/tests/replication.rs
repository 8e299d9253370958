//! Replication, the master's side: the stream a SYNC replica reads (as
//! Redis's own test helper `attach_to_replication_stream` reads it), INFO
//! replication, ROLE, WAIT, `redis-cli --rdb`, and a real redis-server
//! following cinnabar (DEBUG DIGEST equal).

use cinnabar_tests::{bulk, info_int, int, server_bin, tool, RawClient, RespFrame, Server};
use std::io::Read;
use std::time::{Duration, Instant};

/// Reads as much of the stream as `want` shows (CRLF shown as a space).
fn stream(c: &mut RawClient, want: &str) -> String {
    let mut v = vec![0u8; want.len() + want.matches(' ').count()];
    c.sock.read_exact(&mut v).expect("stream bytes");
    String::from_utf8_lossy(&v).replace("\r\n", " ")
}

/// The replication cron's first second (a PING is due then, with a
/// replica attached, whatever the period).
fn past_the_first_ping() {
    std::thread::sleep(Duration::from_millis(1100));
}

fn cli(s: &Server, args: &[&str]) -> String {
    s.cli_out(args)
}

/// Waits until `s`'s link to its master is up.
fn wait_linked(s: &Server) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !cli(s, &["INFO", "replication"]).contains("master_link_status:up") {
        assert!(Instant::now() < deadline, "no link: {}", s.log());
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn the_stream_selects_and_wraps_as_redis_does() {
    let s = Server::start(&[("repl-ping-replica-period", "3600")]);
    past_the_first_ping();
    let mut r = s.sync_replica();
    let mut c = s.raw();
    c.cmd(&["SET", "a", "1"]);
    c.cmd(&["SELECT", "3"]);
    c.cmd(&["MULTI"]);
    c.cmd(&["SET", "x", "1"]);
    c.cmd(&["SELECT", "0"]);
    c.cmd(&["SET", "y", "2"]);
    c.cmd(&["EXEC"]);
    // One write in a transaction is not wrapped; FLUSHALL of nothing is
    // still sent.
    c.cmd(&["MULTI"]);
    c.cmd(&["GET", "a"]);
    c.cmd(&["INCR", "n"]);
    c.cmd(&["EXEC"]);
    c.cmd(&["FLUSHALL"]);
    c.cmd(&["FLUSHALL"]);
    // PUBLISH goes to replicas (not the AOF).
    c.cmd(&["PUBLISH", "ch", "m"]);
    let want = "*2 $6 SELECT $1 0 *3 $3 SET $1 a $1 1 \
                *2 $6 SELECT $1 3 *1 $5 MULTI *3 $3 SET $1 x $1 1 \
                *2 $6 SELECT $1 0 *3 $3 SET $1 y $1 2 *1 $4 EXEC \
                *2 $4 INCR $1 n *1 $8 FLUSHALL *1 $8 FLUSHALL *3 $7 PUBLISH $2 ch $1 m ";
    assert_eq!(stream(&mut r, want), want);
}

#[test]
fn info_role_and_client_list_show_the_replica() {
    let s = Server::start(&[("repl-ping-replica-period", "3600")]);
    past_the_first_ping();
    let before = cli(&s, &["INFO", "replication"]);
    assert!(before.contains("connected_slaves:0"), "{before}");
    assert!(before.contains("repl_backlog_active:0"), "{before}");
    let old_id = before
        .lines()
        .find_map(|l| l.strip_prefix("master_replid:"))
        .unwrap()
        .to_string();
    let mut c = s.raw();
    assert_eq!(
        c.cmd(&["REPLCONF", "listening-port", "7777"]),
        protocol::Frame::Simple("OK".into())
    );
    c.send(b"PSYNC ? -1\r\n");
    let mut line = Vec::new();
    let mut b = [0u8; 1];
    while b[0] != b'\n' {
        c.sock.read_exact(&mut b).unwrap();
        line.push(b[0]);
    }
    let line = String::from_utf8(line).unwrap();
    assert!(line.starts_with("+FULLRESYNC "), "{line}");
    let deadline = Instant::now() + Duration::from_secs(5);
    let info = loop {
        let info = cli(&s, &["INFO", "replication"]);
        if info.contains("state=online") || Instant::now() > deadline {
            break info;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(info.contains("connected_slaves:1"), "{info}");
    assert!(
        info.contains("slave0:ip=127.0.0.1,port=7777,state=online,offset=0,lag="),
        "{info}"
    );
    assert!(info.contains("repl_backlog_active:1"), "{info}");
    assert!(info.contains("repl_backlog_first_byte_offset:1"), "{info}");
    let new_id = info
        .lines()
        .find_map(|l| l.strip_prefix("master_replid:"))
        .unwrap();
    assert_ne!(new_id, old_id, "a new backlog gets a new replication ID");
    assert!(line.contains(new_id), "{line}");
    assert_eq!(cli(&s, &["ROLE"]), "master\n0\n127.0.0.1\n7777\n0");
    assert!(cli(&s, &["CLIENT", "LIST"]).contains("flags=S"));
    assert_eq!(
        cli(&s, &["CLIENT", "LIST", "TYPE", "replica"])
            .lines()
            .count(),
        1
    );
    assert!(cli(&s, &["INFO", "clients"]).contains("connected_clients:1"));
    // Its acknowledgement answers WAIT.
    let mut w = s.raw();
    w.cmd(&["SET", "k", "v"]);
    w.send_cmd(&["WAIT", "1", "0"]);
    std::thread::sleep(Duration::from_millis(100));
    c.send_cmd(&["REPLCONF", "ACK", "1000"]);
    assert_eq!(w.read(), protocol::Frame::Integer(1));
    assert_eq!(
        w.cmd(&["WAIT", "2", "50"]),
        protocol::Frame::Integer(1),
        "the timeout answers how many acknowledged"
    );
}

/// `replica-announce-ip` and `replica-announce-port`: what the replica
/// tells its master (REPLCONF ip-address, listening-port), so the master's
/// INFO and ROLE name the address it is reached at (NAT, Sentinel).
#[test]
fn a_replica_announces_its_address() {
    let m = Server::start(&[]);
    let r = Server::start(&[
        ("replica-announce-ip", "10.1.2.3"),
        ("replica-announce-port", "7777"),
        ("replicaof", &format!("127.0.0.1 {}", m.port)),
    ]);
    wait_linked(&r);
    let deadline = Instant::now() + Duration::from_secs(10);
    let info = loop {
        let info = cli(&m, &["INFO", "replication"]);
        if info.contains("state=online") {
            break info;
        }
        assert!(Instant::now() < deadline, "{info}");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(info.contains("slave0:ip=10.1.2.3,port=7777,"), "{info}");
    let role = cli(&m, &["ROLE"]);
    assert!(role.contains("10.1.2.3") && role.contains("7777"), "{role}");
}

#[test]
fn replconf_errors_as_redis() {
    let s = Server::start(&[]);
    assert_eq!(cli(&s, &["REPLCONF", "foo"]), "ERR syntax error");
    assert_eq!(
        cli(&s, &["REPLCONF", "foo", "bar"]),
        "ERR Unrecognized REPLCONF option: foo"
    );
    assert_eq!(
        cli(&s, &["REPLCONF", "listening-port", "x"]),
        "ERR value is not an integer or out of range"
    );
    assert_eq!(
        cli(&s, &["REPLCONF", "rdb-only", "2"]),
        "ERR value is out of range, value must between 0 and 1"
    );
    assert_eq!(
        cli(&s, &["REPLCONF", "capa", "eof", "capa", "psync2"]),
        "OK"
    );
}

#[test]
fn redis_cli_rdb_writes_a_file_redis_check_rdb_accepts() {
    let Some(check) = tool("redis-check-rdb") else {
        eprintln!("skipped: no redis-check-rdb");
        return;
    };
    let s = Server::start(&[]);
    let mut c = s.raw();
    for i in 0..500 {
        c.cmd(&["SET", &format!("k{i}"), "v"]);
        c.cmd(&["RPUSH", "l", &i.to_string()]);
    }
    let file = s.dir.join("out.rdb");
    let o = s.cli(&["--rdb", file.to_str().unwrap()]);
    assert!(o.status.success(), "{o:?}");
    let o = std::process::Command::new(check)
        .arg(&file)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{text}");
    assert!(text.contains("501 keys read"), "{text}");
}

/// `redis-cli --replica`: the handshake, then the stream as quoted lines.
#[test]
fn redis_cli_replica_shows_the_stream() {
    use std::io::BufRead;
    let s = Server::start(&[("repl-diskless-sync-delay", "0")]);
    let line = format!("exec stdbuf -oL redis-cli -p {} --replica 2>&1", s.port);
    let mut child = std::process::Command::new("sh")
        .args(["-c", &line])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("run redis-cli --replica");
    let out = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(out).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let mut c = s.raw();
    let mut seen = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(20);
    while !seen.iter().any(|l: &String| l == "\"SET\",\"a\",\"1\"") {
        assert!(Instant::now() < deadline, "no SET in {seen:?}");
        c.cmd(&["SET", "a", "1"]);
        seen.extend(rx.recv_timeout(Duration::from_millis(200)).ok());
        seen.extend(rx.try_iter());
    }
    let _ = child.kill();
    let _ = child.wait();
    let sync = "SYNC with master, discarding bytes of bulk transfer until EOF marker...";
    assert!(seen.iter().any(|l| l == sync), "{seen:?}");
    assert!(
        seen.iter().any(|l| l.starts_with("SYNC done after ")),
        "{seen:?}"
    );
}

/// `masteruser` and `masterauth` in the handshake, in both directions with
/// real Redis: a wrong password leaves the link down, the right one (set
/// while the replica retries) brings it up.
#[test]
fn replicas_authenticate_with_masteruser_and_masterauth() {
    let Some(redis) = tool("redis-server") else {
        eprintln!("skipped: no redis-server");
        return;
    };
    for (master, replica) in [(redis.clone(), server_bin()), (server_bin(), redis)] {
        let opts = [
            ("requirepass", "adminpw"),
            ("repl-diskless-sync-delay", "0"),
        ];
        let m = Server::start_bin(&master, &opts);
        let mut c = m.raw_auth();
        let user = [
            "ACL",
            "SETUSER",
            "repl",
            "on",
            ">replpw",
            "+psync",
            "+replconf",
            "+ping",
        ];
        assert_eq!(c.cmd(&user), cinnabar_tests::ok());
        c.cmd(&["SET", "k", "v"]);
        let s = Server::start_bin(&replica, &[("masteruser", "repl"), ("masterauth", "wrong")]);
        assert_eq!(
            cli(&s, &["REPLICAOF", "127.0.0.1", &m.port.to_string()]),
            "OK"
        );
        std::thread::sleep(Duration::from_millis(1500));
        let info = cli(&s, &["INFO", "replication"]);
        assert!(info.contains("master_link_status:down"), "{info}");
        assert_eq!(cli(&s, &["DBSIZE"]), "0");
        let wrong = "Unable to AUTH to MASTER: -WRONGPASS invalid username-password pair";
        assert!(s.log().contains(wrong), "{}", s.log());
        assert_eq!(cli(&s, &["CONFIG", "SET", "masterauth", "replpw"]), "OK");
        wait_linked(&s);
        c.cmd(&["SET", "k2", "v2"]);
        cinnabar_tests::wait_for("k2 on the replica", || cli(&s, &["GET", "k2"]) == "v2");
        assert_eq!(cli(&s, &["GET", "k"]), "v");
    }
}

/// `redis-cli --functions-rdb`: the function libraries without the keys,
/// in a file real Redis loads (REPLCONF rdb-filter-only functions).
#[test]
fn redis_cli_functions_rdb_has_the_libraries_only() {
    let (Some(check), Some(redis)) = (tool("redis-check-rdb"), tool("redis-server")) else {
        eprintln!("skipped: no redis-check-rdb or redis-server");
        return;
    };
    let s = Server::start(&[]);
    let mut c = s.raw();
    let lib = "#!lua name=mylib\nredis.register_function('f', function() return 1 end)";
    assert_eq!(c.cmd(&["FUNCTION", "LOAD", lib]), bulk("mylib"));
    c.cmd(&["SET", "k", "v"]);
    let file = s.dir.join("functions.rdb");
    let o = s.cli(&["--functions-rdb", file.to_str().unwrap()]);
    assert!(o.status.success(), "{o:?}");
    let o = std::process::Command::new(check)
        .arg(&file)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("0 keys read"), "{text}");
    let r = Server::start_bin(
        &redis,
        &[
            ("dir", s.dir.to_str().unwrap()),
            ("dbfilename", "functions.rdb"),
        ],
    );
    let mut rc = r.raw();
    assert_eq!(rc.cmd(&["FCALL", "f", "0"]), int(1));
    assert_eq!(rc.cmd(&["DBSIZE"]), int(0));
    assert!(matches!(
        c.cmd(&["REPLCONF", "rdb-filter-only", "keys"]),
        RespFrame::Error(_)
    ));
}

#[test]
fn a_real_redis_replica_follows() {
    let Some(redis) = tool("redis-server") else {
        eprintln!("skipped: no redis-server");
        return;
    };
    let s = Server::start(&[("enable-debug-command", "yes")]);
    let mut c = s.raw();
    for i in 0..200 {
        c.cmd(&["SET", &format!("pre{i}"), "v"]);
    }
    let port = s.port.to_string();
    let rep = Server::start_bin(
        &redis,
        &[
            ("replicaof", &format!("127.0.0.1 {port}")),
            ("enable-debug-command", "yes"),
        ],
    );
    for i in 0..300 {
        let k = format!("k{i}");
        c.cmd(&["SET", &k, "v", "EX", "1000"]);
        c.cmd(&["HSET", "h", &k, "1"]);
        c.cmd(&["ZADD", "z", &i.to_string(), &k]);
        c.cmd(&["EVAL", "redis.call('incr','a') redis.call('incr','b')", "0"]);
        c.cmd(&["SELECT", "2"]);
        c.cmd(&["LPUSH", "l", &k]);
        c.cmd(&["SELECT", "0"]);
    }
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let m = cli(&s, &["DEBUG", "DIGEST"]);
        let r = rep.cli_out(&["DEBUG", "DIGEST"]);
        if m == r {
            break;
        }
        assert!(Instant::now() < deadline, "digests differ: {m} {r}");
        std::thread::sleep(Duration::from_millis(50));
    }
    let info = rep.cli_out(&["INFO", "replication"]);
    assert!(info.contains("master_link_status:up"), "{info}");
    // A dropped link resumes from the backlog.
    cli(&s, &["CLIENT", "KILL", "TYPE", "replica"]);
    for i in 0..100 {
        c.cmd(&["INCR", &format!("n{i}")]);
    }
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let m = cli(&s, &["DEBUG", "DIGEST"]);
        let r = rep.cli_out(&["DEBUG", "DIGEST"]);
        if m == r {
            break;
        }
        assert!(Instant::now() < deadline, "digests differ: {m} {r}");
        std::thread::sleep(Duration::from_millis(50));
    }
    let stats = cli(&s, &["INFO", "stats"]);
    assert!(stats.contains("sync_full:1"), "{stats}");
    assert!(stats.contains("sync_partial_ok:1"), "{stats}");
}

#[test]
fn psync_continues_from_the_backlog() {
    let s = Server::start(&[("repl-ping-replica-period", "3600")]);
    past_the_first_ping();
    let first = s.sync_replica();
    let mut c = s.raw();
    c.cmd(&["SET", "a", "1"]);
    let info = cli(&s, &["INFO", "replication"]);
    let id = info
        .lines()
        .find_map(|l| l.strip_prefix("master_replid:"))
        .unwrap()
        .to_string();
    drop(first);
    let mut r = s.raw();
    r.cmd(&["REPLCONF", "capa", "psync2"]);
    // From byte 1: the whole stream so far.
    r.send_cmd(&["PSYNC", &id, "1"]);
    let mut line = vec![0u8; 52];
    r.sock.read_exact(&mut line).unwrap();
    assert_eq!(line, format!("+CONTINUE {id}\r\n").into_bytes());
    let want = "*2 $6 SELECT $1 0 *3 $3 SET $1 a $1 1 ";
    assert_eq!(stream(&mut r, want), want);
    // It follows the stream from there.
    c.cmd(&["SET", "b", "2"]);
    let want = "*3 $3 SET $1 b $1 2 ";
    assert_eq!(stream(&mut r, want), want);
    let stats = cli(&s, &["INFO", "stats"]);
    assert!(stats.contains("sync_partial_ok:1"), "{stats}");
    // An unknown ID or an offset past the stream: a full sync.
    let mut x = s.raw();
    x.send_cmd(&["PSYNC", &id, "100000"]);
    let mut head = [0u8; 12];
    x.sock.read_exact(&mut head).unwrap();
    assert_eq!(&head, b"+FULLRESYNC ");
    let stats = cli(&s, &["INFO", "stats"]);
    assert!(stats.contains("sync_partial_err:1"), "{stats}");
}

/// Waits until both servers' DEBUG DIGEST agree.
fn same_digest(a: &Server, b: &Server) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let x = a.cli_out(&["DEBUG", "DIGEST"]);
        let y = b.cli_out(&["DEBUG", "DIGEST"]);
        if x == y {
            return;
        }
        assert!(Instant::now() < deadline, "digests differ: {x} {y}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn cinnabar_follows_a_real_redis_master() {
    let Some(redis) = tool("redis-server") else {
        eprintln!("skipped: no redis-server");
        return;
    };
    let m = Server::start_bin(&redis, &[("enable-debug-command", "yes")]);
    let mut c = m.raw();
    for i in 0..200 {
        c.cmd(&["SET", &format!("pre{i}"), "v"]);
    }
    let s = Server::start(&[("enable-debug-command", "yes")]);
    let port = m.port.to_string();
    assert_eq!(cli(&s, &["REPLICAOF", "127.0.0.1", &port]), "OK");
    assert_eq!(
        cli(&s, &["REPLICAOF", "127.0.0.1", &port]),
        "OK Already connected to specified master"
    );
    for i in 0..300 {
        let k = format!("k{i}");
        c.cmd(&["SET", &k, "v", "EX", "1000"]);
        c.cmd(&["HSET", "h", &k, "1"]);
        c.cmd(&["EVAL", "redis.call('incr','a') redis.call('incr','b')", "0"]);
        c.cmd(&["SELECT", "2"]);
        c.cmd(&["LPUSH", "l", &k]);
        c.cmd(&["SELECT", "0"]);
    }
    same_digest(&m, &s);
    let info = cli(&s, &["INFO", "replication"]);
    assert!(info.contains("role:slave"), "{info}");
    assert!(info.contains("master_link_status:up"), "{info}");
    assert!(info.contains(&format!("master_port:{port}")), "{info}");
    assert_eq!(
        cli(&s, &["SET", "x", "1"]),
        "READONLY You can't write against a read only replica."
    );
    // A dropped link resumes from the master's backlog.
    m.cli_out(&["CLIENT", "KILL", "TYPE", "replica"]);
    for i in 0..50 {
        c.cmd(&["INCR", &format!("n{i}")]);
    }
    same_digest(&m, &s);
    assert!(m.cli_out(&["INFO", "stats"]).contains("sync_partial_ok:1"));
    // So does a link the replica drops.
    assert_eq!(cli(&s, &["CLIENT", "KILL", "TYPE", "master"]), "1");
    for i in 0..50 {
        c.cmd(&["INCR", &format!("n{i}")]);
    }
    same_digest(&m, &s);
    let deadline = Instant::now() + Duration::from_secs(10);
    while !m.cli_out(&["INFO", "stats"]).contains("sync_partial_ok:2") {
        assert!(Instant::now() < deadline, "no second partial sync");
        std::thread::sleep(Duration::from_millis(50));
    }
    // Promoted, it keeps its data and takes writes.
    assert_eq!(cli(&s, &["REPLICAOF", "NO", "ONE"]), "OK");
    assert_eq!(cli(&s, &["GET", "pre1"]), "v");
    assert_eq!(cli(&s, &["SET", "x", "1"]), "OK");
    assert!(cli(&s, &["ROLE"]).starts_with("master"));
}

#[test]
fn cinnabar_follows_cinnabar() {
    let m = Server::start(&[("enable-debug-command", "yes")]);
    let s = Server::start(&[
        ("enable-debug-command", "yes"),
        ("replicaof", &format!("127.0.0.1 {}", m.port)),
    ]);
    let mut c = m.raw();
    for i in 0..300 {
        c.cmd(&["RPUSH", "l", &i.to_string()]);
        c.cmd(&["ZADD", "z", &i.to_string(), &format!("m{i}")]);
    }
    same_digest(&m, &s);
    let mut w = m.raw();
    for i in 0..100 {
        w.cmd(&["SET", &format!("k{i}"), "v"]);
    }
    assert_eq!(
        w.cmd(&["SET", "k", "v"]),
        protocol::Frame::Simple("OK".into())
    );
    assert_eq!(w.cmd(&["WAIT", "1", "5000"]), protocol::Frame::Integer(1));
    let role = cli(&s, &["ROLE"]);
    assert!(
        role.starts_with(&format!("slave\n127.0.0.1\n{}\nconnected", m.port)),
        "{role}"
    );
    // The stream's bytes (the writes after the sync) count as
    // replication traffic on both sides, and not as the master's output.
    let out = info_int(&mut w, "stats", "total_net_output_bytes");
    let sent = info_int(&mut w, "stats", "total_net_repl_output_bytes");
    assert!(sent > 100 * 25, "sent {sent}");
    let got = info_int(&mut s.raw(), "stats", "total_net_repl_input_bytes");
    assert!(got > 100 * 25 && got <= sent, "got {got} of {sent}");
    let out2 = info_int(&mut w, "stats", "total_net_output_bytes");
    w.cmd(&["SET", "k", "v"]);
    let out3 = info_int(&mut w, "stats", "total_net_output_bytes");
    // An INFO reply each time, and +OK: not the SET's stream.
    let (info, with_set) = (out2 - out, out3 - out2);
    assert!(with_set - info < 50, "{info} then {with_set}");
}

/// A 32 MB SET costs master and replica about the value, as Redis (43 MB
/// each there): the master kept the room it serialized the write in (64
/// MB), and the replica its read buffer grown around the argument.
#[test]
fn a_large_write_leaves_no_buffers_behind() {
    let m = Server::start(&[("repl-diskless-sync-delay", "0")]);
    let s = Server::start(&[("replicaof", &format!("127.0.0.1 {}", m.port))]);
    wait_linked(&s);
    let mut c = m.raw();
    let v = "x".repeat(32 << 20);
    assert_eq!(
        c.cmd(&["SET", "k", &v]),
        protocol::Frame::Simple("OK".into())
    );
    assert_eq!(c.cmd(&["WAIT", "1", "5000"]), protocol::Frame::Integer(1));
    drop(c);
    for srv in [&m, &s] {
        let used = info_int(&mut srv.raw(), "memory", "used_memory");
        assert!(used < 40 << 20, "{used}");
    }
}

#[test]
fn a_promoted_replica_takes_its_old_master_back_partially() {
    let a = Server::start(&[("enable-debug-command", "yes")]);
    let b = Server::start(&[
        ("enable-debug-command", "yes"),
        ("replicaof", &format!("127.0.0.1 {}", a.port)),
    ]);
    let mut c = a.raw();
    for i in 0..200 {
        c.cmd(&["SET", &format!("k{i}"), "v"]);
    }
    same_digest(&a, &b);
    let mut w = a.raw();
    w.cmd(&["SET", "last", "1"]);
    assert_eq!(w.cmd(&["WAIT", "1", "5000"]), protocol::Frame::Integer(1));
    assert_eq!(cli(&b, &["REPLICAOF", "NO", "ONE"]), "OK");
    let info = cli(&b, &["INFO", "replication"]);
    let old = cli(&a, &["INFO", "replication"]);
    let old_id = old
        .lines()
        .find_map(|l| l.strip_prefix("master_replid:"))
        .unwrap();
    assert!(info.contains(&format!("master_replid2:{old_id}")), "{info}");
    assert_eq!(cli(&b, &["SET", "after", "1"]), "OK");
    assert_eq!(
        cli(&a, &["REPLICAOF", "127.0.0.1", &b.port.to_string()]),
        "OK"
    );
    same_digest(&a, &b);
    let stats = cli(&b, &["INFO", "stats"]);
    assert!(stats.contains("sync_partial_ok:1"), "{stats}");
    assert!(stats.contains("sync_full:0"), "{stats}");
    assert_eq!(cli(&a, &["GET", "after"]), "1");
}

#[test]
fn a_replica_leaves_expiry_to_its_master() {
    let m = Server::start(&[("enable-debug-command", "yes")]);
    let s = Server::start(&[
        ("enable-debug-command", "yes"),
        ("replicaof", &format!("127.0.0.1 {}", m.port)),
    ]);
    let mut c = m.raw();
    c.cmd(&["DEBUG", "SET-ACTIVE-EXPIRE", "0"]);
    c.cmd(&["SET", "k", "v", "PX", "100"]);
    assert_eq!(c.cmd(&["WAIT", "1", "5000"]), protocol::Frame::Integer(1));
    std::thread::sleep(Duration::from_millis(300));
    // Expired: missing to readers, still there until the master's DEL.
    assert_eq!(cli(&s, &["GET", "k"]), "");
    assert_eq!(cli(&s, &["DBSIZE"]), "1");
    assert_eq!(cli(&m, &["GET", "k"]), "");
    let deadline = Instant::now() + Duration::from_secs(10);
    while cli(&s, &["DBSIZE"]) != "0" {
        assert!(Instant::now() < deadline, "the master's DEL never came");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn the_master_link_is_a_client_flagged_m() {
    let m = Server::start(&[]);
    let s = Server::start(&[("replicaof", &format!("127.0.0.1 {}", m.port))]);
    wait_linked(&s);
    let list = cli(&s, &["CLIENT", "LIST", "TYPE", "master"]);
    assert!(
        list.starts_with("id=") && list.contains(&format!("addr=127.0.0.1:{} ", m.port)),
        "{list}"
    );
    assert!(
        list.contains(" flags=M ") && list.contains(" user=(superuser) "),
        "{list}"
    );
    assert!(cli(&s, &["INFO", "clients"]).contains("connected_clients:2"));
    // Killed, it reconnects with PSYNC (partial).
    assert_eq!(cli(&s, &["CLIENT", "KILL", "TYPE", "master"]), "1");
    let deadline = Instant::now() + Duration::from_secs(20);
    while !cli(&m, &["INFO", "stats"]).contains("sync_partial_ok:1") {
        assert!(Instant::now() < deadline, "no partial resync");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_replica_shows_its_handshake_and_times_out_on_a_silent_master() {
    // The master waits for more replicas a long time, sending newlines.
    let m = Server::start(&[
        ("repl-diskless-sync-delay", "1000"),
        ("enable-debug-command", "yes"),
    ]);
    let s = Server::start(&[("repl-timeout", "2")]);
    cli(&s, &["REPLICAOF", "127.0.0.1", &m.port.to_string()]);
    let deadline = Instant::now() + Duration::from_secs(10);
    while !cli(&s, &["ROLE"]).contains("handshake") {
        assert!(Instant::now() < deadline, "no handshake state");
        std::thread::sleep(Duration::from_millis(50));
    }
    // Silent (it sleeps): the replica gives up after repl-timeout.
    let mut c = m.raw();
    c.send_cmd(&["DEBUG", "SLEEP", "4"]);
    let deadline = Instant::now() + Duration::from_secs(10);
    while !s.log().contains("Timeout connecting to the MASTER") {
        assert!(Instant::now() < deadline, "no timeout");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn becoming_a_replica_ends_blocked_clients_waits() {
    let m = Server::start(&[]);
    let s = Server::start(&[]);
    let mut b = s.raw();
    b.send_cmd(&["BLPOP", "foo", "0"]);
    std::thread::sleep(Duration::from_millis(100));
    cli(&s, &["REPLICAOF", "127.0.0.1", &m.port.to_string()]);
    assert_eq!(
        b.read(),
        protocol::Frame::Error(
            "UNBLOCKED force unblock from blocking operation, instance state changed (master -> replica?)"
                .into()
        )
    );
    b.expect_closed();
}

#[test]
fn a_full_resync_replaces_the_replicas_functions() {
    let lib = "#!lua name=test\nredis.register_function('test', function() return 'hello1' end)";
    let m = Server::start(&[("repl-diskless-sync-delay", "0")]);
    let s = Server::start(&[]);
    assert_eq!(cli(&m, &["FUNCTION", "LOAD", lib]), "test");
    assert_eq!(cli(&s, &["FUNCTION", "LOAD", lib]), "test");
    cli(&s, &["REPLICAOF", "127.0.0.1", &m.port.to_string()]);
    wait_linked(&s);
    assert!(cli(&s, &["FUNCTION", "LIST"]).contains("test"));
}

/// `master_repl_offset` of `s`.
fn repl_offset(s: &Server) -> String {
    cli(s, &["INFO", "replication"])
        .lines()
        .find_map(|l| l.strip_prefix("master_repl_offset:"))
        .unwrap()
        .to_string()
}

#[test]
fn a_replica_counts_commands_split_across_reads() {
    let m = Server::start(&[("repl-ping-replica-period", "3600")]);
    let s = Server::start(&[("replicaof", &format!("127.0.0.1 {}", m.port))]);
    wait_linked(&s);
    let big = "x".repeat(300_000);
    let mut c = m.raw();
    for i in 0..20 {
        c.cmd(&["SET", &format!("k{i}"), &big]);
    }
    let deadline = Instant::now() + Duration::from_secs(20);
    while repl_offset(&m) != repl_offset(&s) {
        assert!(
            Instant::now() < deadline,
            "offsets differ: {} {}",
            repl_offset(&m),
            repl_offset(&s)
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_partial_resync_goes_on_in_the_selected_database() {
    let m = Server::start(&[]);
    let s = Server::start(&[("replicaof", &format!("127.0.0.1 {}", m.port))]);
    wait_linked(&s);
    let mut c = m.raw();
    c.cmd(&["SELECT", "9"]);
    c.cmd(&["INCR", "x"]);
    assert_eq!(c.cmd(&["WAIT", "1", "5000"]), protocol::Frame::Integer(1));
    assert_eq!(cli(&s, &["CLIENT", "KILL", "TYPE", "master"]), "1");
    let deadline = Instant::now() + Duration::from_secs(20);
    while !cli(&m, &["INFO", "stats"]).contains("sync_partial_ok:1") {
        assert!(Instant::now() < deadline, "no partial resync");
        std::thread::sleep(Duration::from_millis(50));
    }
    // No SELECT comes after the resync: db 9 still.
    c.cmd(&["INCR", "x"]);
    assert_eq!(c.cmd(&["WAIT", "1", "5000"]), protocol::Frame::Integer(1));
    let mut r = s.raw();
    r.cmd(&["SELECT", "9"]);
    assert_eq!(r.cmd(&["GET", "x"]), protocol::Frame::Bulk("2".into()));
    assert_eq!(cli(&s, &["DBSIZE"]), "0");
}

#[test]
fn psync_with_a_wrong_offset_is_refused_and_logged() {
    let s = Server::start(&[]);
    let mut c = s.raw();
    assert_eq!(
        c.cmd(&["PSYNC", "replicationid", "offset_str"]),
        protocol::Frame::Error("ERR value is not an integer or out of range".into())
    );
    assert!(s
        .log()
        .contains("asks for synchronization but with a wrong offset"));
    assert_eq!(c.cmd(&["PING"]), protocol::Frame::Simple("PONG".into()));
}

#[test]
fn info_shows_the_replica_priority_and_announcement() {
    let s = Server::start(&[("replica-priority", "7"), ("replica-announced", "no")]);
    cli(&s, &["REPLICAOF", "127.0.0.1", "1"]);
    let info = cli(&s, &["INFO", "replication"]);
    assert!(info.contains("slave_priority:7"), "{info}");
    assert!(info.contains("replica_announced:0"), "{info}");
}

#[test]
fn a_replica_that_would_get_a_reply_is_disconnected() {
    let s = Server::start(&[("repl-ping-replica-period", "3600")]);
    past_the_first_ping();
    let mut r = s.sync_replica();
    r.send_cmd(&["PING"]);
    r.expect_closed();
    assert!(s
        .log()
        .contains("Replica generated a reply to command 'ping', disconnecting it: "));
    assert_eq!(cli(&s, &["PING"]), "PONG");
}

/// A replica's link may not touch the keyspace: a read or a write is
/// refused, and that error (which would land in its stream) is logged as
/// one a master should never send, before the replica is disconnected.
#[test]
fn a_replica_may_not_use_the_keyspace() {
    let s = Server::start(&[("repl-ping-replica-period", "3600")]);
    past_the_first_ping();
    for cmd in [&["GET", "k"][..], &["SET", "k", "v"], &["NOSUCH", "x"]] {
        let mut r = s.sync_replica();
        r.send_cmd(cmd);
        r.expect_closed();
    }
    let log = s.log();
    for name in ["get", "set", "<unknown>"] {
        assert!(log.contains(&format!(
            "Replica generated a reply to command '{name}', disconnecting it: "
        )));
    }
    assert!(log.contains("== CRITICAL == This master is sending an error to its replica: 'Replica can't interact with the keyspace' after processing the command 'get'"));
    assert!(log.contains("== CRITICAL == This master is sending an error to its replica: 'Replica can't interact with the keyspace' after processing the command 'set'"));
    assert_eq!(cli(&s, &["EXISTS", "k"]), "0");
    let stats = cli(&s, &["INFO", "stats"]);
    assert!(stats.contains("unexpected_error_replies:3"), "{stats}");
}

/// `min-replicas-to-write` holds scripts' writes to the same rule as
/// commands': refused while too few replicas are connected, allowed once
/// one is (and a read-only script is never refused).
#[test]
fn scripts_write_once_enough_replicas_are_connected() {
    let m = Server::start(&[("min-replicas-to-write", "1")]);
    let write = ["EVAL", "return redis.call('set', KEYS[1], 'v')", "1", "k"];
    assert_eq!(
        cli(&m, &write),
        "NOREPLICAS Not enough good replicas to write. script: b0e7bbc2efc136be74cdebcb73a106ad46ea881b, on @user_script:1."
    );
    assert_eq!(cli(&m, &["EVAL", "return redis.call('get', 'k')", "0"]), "");
    let r = Server::start(&[("replicaof", &format!("127.0.0.1 {}", m.port))]);
    let deadline = Instant::now() + Duration::from_secs(10);
    while !cli(&m, &["INFO", "replication"]).contains("min_slaves_good_slaves:1") {
        assert!(Instant::now() < deadline, "the replica did not connect");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(cli(&m, &write), "OK");
    drop(r);
}

/// A command from the master that fails on the replica (DEBUG REPLICATE
/// sends one the master never ran) is logged as Redis logs it and counted
/// in `unexpected_error_replies`; the replica goes on with the stream.
#[test]
fn errors_from_the_master_are_logged_and_counted() {
    let m = Server::start(&[
        ("enable-debug-command", "yes"),
        ("repl-diskless-sync", "no"),
    ]);
    let r = Server::start(&[("replicaof", &format!("127.0.0.1 {}", m.port))]);
    wait_linked(&r);
    let deadline = Instant::now() + Duration::from_secs(10);
    assert_eq!(
        cli(&m, &["DEBUG", "REPLICATE", "fake-command-1", "a"]),
        "OK"
    );
    assert_eq!(cli(&m, &["SET", "foo", "bar"]), "OK");
    while cli(&r, &["GET", "foo"]) != "bar" {
        assert!(Instant::now() < deadline, "the stream stopped");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(cli(&m, &["EXISTS", "fake-command-1"]), "0");
    assert!(cli(&r, &["INFO", "stats"]).contains("unexpected_error_replies:1"));
    let log = r.log();
    assert!(
        log.contains("== CRITICAL == This replica is sending an error to its master: 'unknown command 'fake-command-1', with args beginning with: 'a' ' after processing the command '<unknown>'"),
        "{log}"
    );
    // panic-on-replicas: the replica stops there, unless it is writable.
    let w = Server::start(&[
        ("replicaof", &format!("127.0.0.1 {}", m.port)),
        ("propagation-error-behavior", "panic"),
        ("replica-read-only", "no"),
    ]);
    wait_linked(&w);
    assert_eq!(cli(&w, &["SET", "n", "foo"]), "OK");
    assert_eq!(cli(&m, &["INCRBY", "n", "1"]), "1");
    assert_eq!(cli(&m, &["SET", "after", "1"]), "OK");
    while cli(&w, &["GET", "after"]) != "1" {
        assert!(Instant::now() < deadline, "the writable replica stopped");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(w.log().contains("after processing the command 'incrby'"));
    let mut p = Server::start(&[
        ("replicaof", &format!("127.0.0.1 {}", m.port)),
        ("propagation-error-behavior", "panic-on-replicas"),
    ]);
    wait_linked(&p);
    assert_eq!(cli(&m, &["DEBUG", "REPLICATE", "fake-command-2"]), "OK");
    while p.alive() {
        assert!(Instant::now() < deadline, "the replica did not stop");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(p.log().contains("This replica panicked sending an error to its master after processing the command '<unknown>'"));
}

/// `redis.set_repl` chooses where a script's next commands propagate:
/// nowhere, the AOF only, replicas only, or both.
#[test]
fn scripts_choose_where_their_commands_propagate() {
    let m = Server::start(&[
        ("appendonly", "yes"),
        ("enable-debug-command", "yes"),
        ("repl-diskless-sync", "no"),
    ]);
    let r = Server::start(&[("replicaof", &format!("127.0.0.1 {}", m.port))]);
    wait_linked(&r);
    let deadline = Instant::now() + Duration::from_secs(10);
    let script = "redis.call('set','a','1'); redis.set_repl(redis.REPL_NONE); \
                  redis.call('set','b','2'); redis.set_repl(redis.REPL_AOF); \
                  redis.call('set','c','3'); redis.set_repl(redis.REPL_REPLICA); \
                  redis.call('set','e','5'); redis.set_repl(redis.REPL_ALL); \
                  redis.call('set','d','4')";
    cli(&m, &["EVAL", script, "0"]);
    let mget = |s: &Server| cli(s, &["MGET", "a", "b", "c", "d", "e"]);
    while mget(&r) != "1\n\n\n4\n5" {
        assert!(Instant::now() < deadline, "replica has {:?}", mget(&r));
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(mget(&m), "1\n2\n3\n4\n5");
    assert_eq!(cli(&m, &["DEBUG", "LOADAOF"]), "OK");
    assert_eq!(mget(&m), "1\n\n3\n4");
}

/// A disk-based BGSAVE that only replicas wanted stops once none waits
/// for it (the replica leaving mid-handshake at once, on REPLICAOF NO
/// ONE), unless save points make the file worth finishing.
#[test]
fn a_bgsave_no_replica_waits_for_is_abandoned() {
    let m = Server::start(&[
        ("repl-diskless-sync", "no"),
        ("rdb-key-save-delay", "1000000"),
    ]);
    for i in 0..100 {
        cli(&m, &["SET", &i.to_string(), "v"]);
    }
    let r = Server::start(&[]);
    let saving = || cli(&m, &["INFO", "persistence"]).contains("rdb_bgsave_in_progress:1");
    for save in ["", "900 1"] {
        cli(&m, &["CONFIG", "SET", "save", save]);
        cli(&r, &["REPLICAOF", "127.0.0.1", &m.port.to_string()]);
        cinnabar_tests::wait_for("the sync's BGSAVE", || {
            saving() && cli(&m, &["INFO", "replication"]).contains("state=wait_bgsave")
        });
        cli(&r, &["REPLICAOF", "NO", "ONE"]);
        if save.is_empty() {
            cinnabar_tests::wait_for("the BGSAVE to stop", || !saving());
            assert!(m
                .log()
                .contains("Background saving terminated: no replica waits for it any more"));
        } else {
            cinnabar_tests::wait_for("the replica to leave", || {
                cli(&m, &["INFO", "replication"]).contains("connected_slaves:0")
            });
            std::thread::sleep(Duration::from_millis(200));
            assert!(saving());
        }
    }
}
