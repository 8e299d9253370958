//! Client eviction (`maxmemory-clients`): a client whose buffers push the
//! clients' total past the limit is closed, largest first, unless it set
//! CLIENT NO-EVICT; INFO counts it and the log names it.
//!
//! Every expectation was checked against Redis 7.0.15; run
//! `CINNABAR_BIN=$(command -v redis-server) cargo test -p cinnabar-tests
//! --test client_eviction` to check them again.

use cinnabar_tests::{bulk, info_int, ok, text, wait_for, RawClient, RespFrame as Frame, Server};

/// CLIENT LIST's `field` of the client called `name`, if it is connected.
fn field(r: &mut RawClient, name: &str, f: &str) -> Option<u64> {
    let list = text(&r.cmd(&["CLIENT", "LIST"]));
    let line = list
        .lines()
        .find(|l| l.contains(&format!(" name={name} ")))?;
    let v = line
        .split(' ')
        .find_map(|kv| kv.strip_prefix(&format!("{f}=")))?;
    Some(v.parse().unwrap())
}

fn evicted_clients(r: &mut RawClient) -> u64 {
    let info = text(&r.cmd(&["INFO", "stats"]));
    let line = info
        .lines()
        .find_map(|l| l.strip_prefix("evicted_clients:"))
        .unwrap();
    line.trim().parse().unwrap()
}

/// A named client that has started sending an argument of `n` bytes. The
/// server may evict it before it has written them all (the write then
/// fails; the tests look at what the server did).
fn half_sent(s: &Server, name: &str, n: usize) -> RawClient {
    use std::io::Write;
    let mut c = s.raw();
    assert_eq!(c.cmd(&["CLIENT", "SETNAME", name]), ok());
    let mut req = format!("*2\r\n${n}\r\n").into_bytes();
    req.resize(req.len() + n, b'v');
    let _ = c.sock.write_all(&req);
    c
}

#[test]
fn a_large_query_buffer_gets_the_client_evicted_and_logged() {
    let s = Server::start(&[("maxmemory-clients", "1mb")]);
    let mut r = s.raw();
    assert_eq!(r.cmd(&["CLIENT", "NO-EVICT", "on"]), ok());
    let mut small = half_sent(&s, "small", 300_000);
    wait_for("qbuf", || field(&mut r, "small", "qbuf") == Some(300_000));
    assert!(field(&mut r, "small", "tot-mem").unwrap() >= 300_000);
    assert_eq!(evicted_clients(&mut r), 0);
    let mut big = half_sent(&s, "big", 2_000_000);
    big.expect_closed();
    assert_eq!(field(&mut r, "big", "tot-mem"), None);
    assert_eq!(evicted_clients(&mut r), 1);
    assert!(s.log().contains("* Evicting client: id="));
    assert!(s.log().contains(" name=big "));
    // The small one stays, and its request completes.
    small.send(b"\r\n$1\r\nx\r\n");
    assert!(small.try_read().is_ok());
}

#[test]
fn no_evict_clients_stay_whatever_they_hold() {
    let s = Server::start(&[("maxmemory-clients", "500000")]);
    let mut r = s.raw();
    assert_eq!(r.cmd(&["CLIENT", "NO-EVICT", "on"]), ok());
    let mut c = s.raw();
    assert_eq!(c.cmd(&["CLIENT", "SETNAME", "keeper"]), ok());
    assert_eq!(c.cmd(&["CLIENT", "NO-EVICT", "on"]), ok());
    let mut req = b"*2\r\n$1000000\r\n".to_vec();
    req.resize(req.len() + 1_000_000, b'v');
    c.send(&req);
    wait_for("qbuf", || {
        field(&mut r, "keeper", "qbuf") == Some(1_000_000)
    });
    assert!(field(&mut r, "keeper", "tot-mem").unwrap() > 1_000_000);
    assert_eq!(evicted_clients(&mut r), 0);
}

#[test]
fn a_percentage_is_of_maxmemory() {
    let s = Server::start(&[("maxmemory", "10mb")]);
    let mut r = s.raw();
    assert_eq!(r.cmd(&["CONFIG", "SET", "maxmemory-clients", "5%"]), ok());
    assert_eq!(
        r.cmd(&["CONFIG", "GET", "maxmemory-clients"]),
        Frame::Array(vec![bulk("maxmemory-clients"), bulk("5%")])
    );
    assert_eq!(r.cmd(&["CLIENT", "NO-EVICT", "on"]), ok());
    // 5% of 10mb is 524288 bytes.
    let _stays = half_sent(&s, "stays", 300_000);
    wait_for("qbuf", || field(&mut r, "stays", "qbuf") == Some(300_000));
    let mut goes = half_sent(&s, "goes", 600_000);
    goes.expect_closed();
    assert!(field(&mut r, "stays", "qbuf").is_some());
    assert_eq!(evicted_clients(&mut r), 1);
}

#[test]
fn lowering_the_limit_evicts_the_largest_first() {
    let s = Server::start(&[]);
    let mut r = s.raw();
    assert_eq!(r.cmd(&["CLIENT", "NO-EVICT", "on"]), ok());
    let sizes = [("c100", 100_000), ("c200", 200_000), ("c400", 400_000)];
    let _clients: Vec<RawClient> = sizes
        .iter()
        .map(|&(name, n)| {
            let c = half_sent(&s, name, n);
            wait_for("qbuf", || field(&mut r, name, "qbuf") == Some(n as u64));
            c
        })
        .collect();
    let mem: Vec<u64> = sizes
        .iter()
        .map(|&(name, _)| field(&mut r, name, "tot-mem").unwrap())
        .collect();
    // Room for the two smaller ones (and then some), not for the third.
    let limit = mem[0] + mem[1] + 50_000;
    assert_eq!(
        r.cmd(&["CONFIG", "SET", "maxmemory-clients", &limit.to_string()]),
        ok()
    );
    assert!(field(&mut r, "c100", "qbuf").is_some());
    assert!(field(&mut r, "c200", "qbuf").is_some());
    assert_eq!(field(&mut r, "c400", "qbuf"), None);
    assert_eq!(evicted_clients(&mut r), 1);
    assert_eq!(r.cmd(&["CONFIG", "RESETSTAT"]), ok());
    assert_eq!(evicted_clients(&mut r), 0);
}

#[test]
fn a_growing_transaction_queue_gets_the_client_evicted() {
    let s = Server::start(&[("maxmemory-clients", "300000")]);
    let mut r = s.raw();
    assert_eq!(r.cmd(&["CLIENT", "NO-EVICT", "on"]), ok());
    let mut c = s.raw();
    assert_eq!(c.cmd(&["CLIENT", "SETNAME", "tx"]), ok());
    assert_eq!(c.cmd(&["MULTI"]), ok());
    let v = "v".repeat(50_000);
    let mut queued = 0;
    while c.try_cmd_queued(&v) {
        queued += 1;
        assert!(queued < 10, "never evicted");
    }
    assert!(queued >= 3, "evicted after {queued}");
    assert_eq!(field(&mut r, "tx", "qbuf"), None);
}

#[test]
fn a_client_piling_up_replies_goes_before_any_key() {
    let s = Server::start(&[
        ("maxmemory", "11mb"),
        ("maxmemory-policy", "allkeys-lru"),
        ("maxmemory-clients", "3mb"),
    ]);
    let mut r = s.raw();
    assert_eq!(r.cmd(&["CLIENT", "NO-EVICT", "on"]), ok());
    for j in 0..50 {
        r.cmd(&["SETRANGE", &j.to_string(), "100000", "x"]);
    }
    // 4 MB of replies asked for at once, none read: the client is evicted
    // as they pile up, and the keys stay.
    let mut c = s.raw();
    c.send(&b"*2\r\n$4\r\nMGET\r\n$1\r\n1\r\n".repeat(40));
    wait_for("eviction", || evicted_clients(&mut r) == 1);
    assert_eq!(info_int(&mut r, "stats", "evicted_keys"), 0);
    assert_eq!(r.cmd(&["DBSIZE"]), Frame::Integer(50));
}

trait Queue {
    fn try_cmd_queued(&mut self, v: &str) -> bool;
}

impl Queue for RawClient {
    /// Queues a SET in the open transaction: false once the server closed
    /// the connection.
    fn try_cmd_queued(&mut self, v: &str) -> bool {
        self.send_cmd(&["SET", "k", v]);
        self.try_read().is_ok()
    }
}
