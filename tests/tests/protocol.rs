//! Wire-protocol edge cases, checked byte for byte against what Redis 7.0.15
//! sends (verified with `CINNABAR_BIN=$(command -v redis-server)`).

use cinnabar_tests::*;
use std::thread;
use std::time::{Duration, Instant};

fn proto_err(opts: &[(&str, &str)], input: &[u8], expected: &str) {
    let s = Server::start(opts);
    let mut c = s.raw();
    c.send(input);
    assert_eq!(
        c.read(),
        err(expected),
        "input {:?}",
        String::from_utf8_lossy(&input[..input.len().min(40)])
    );
    c.expect_closed();
    // The server survives and serves others.
    let mut c2 = s.raw_auth();
    assert_eq!(c2.cmd(&["PING"]), simple("PONG"));
}

#[test]
fn malformed_multibulk_length() {
    proto_err(
        &[],
        b"*abc\r\n",
        "ERR Protocol error: invalid multibulk length",
    );
    proto_err(
        &[],
        b"*2147483648\r\n",
        "ERR Protocol error: invalid multibulk length",
    );
}

#[test]
fn negative_bulk_length() {
    proto_err(
        &[],
        b"*1\r\n$-5\r\n",
        "ERR Protocol error: invalid bulk length",
    );
    proto_err(
        &[],
        b"*2\r\n$4\r\nPING\r\n$abc\r\n",
        "ERR Protocol error: invalid bulk length",
    );
}

#[test]
fn expected_dollar() {
    proto_err(
        &[],
        b"*1\r\n+x\r\n",
        "ERR Protocol error: expected '$', got '+'",
    );
    // Earlier complete commands of the same write are answered first.
    let s = Server::start(&[]);
    let mut c = s.raw();
    c.send(b"PING\r\n*1\r\n$4\r\nPING\r\n*1\r\n:1\r\n");
    assert_eq!(c.read(), simple("PONG"));
    assert_eq!(c.read(), simple("PONG"));
    assert_eq!(c.read(), err("ERR Protocol error: expected '$', got ':'"));
    c.expect_closed();
}

#[test]
fn unbalanced_quotes_inline() {
    proto_err(
        &[],
        b"ECHO \"unbalanced\r\n",
        "ERR Protocol error: unbalanced quotes in request",
    );
}

#[test]
fn empty_and_negative_multibulk_are_ignored() {
    let s = Server::start(&[]);
    let mut c = s.raw();
    c.send(b"*0\r\n*-1\r\n*-5\r\n\r\n\r\nPING\r\n");
    assert_eq!(c.read(), simple("PONG"));
    c.expect_silence(Duration::from_millis(100));
}

/// Redis 7.0.15 accepts any multibulk length up to INT_MAX from an
/// authenticated client; 1,048,577 arguments are simply read.
#[test]
fn multibulk_over_one_million_args() {
    let s = Server::start(&[]);
    let mut c = s.raw();
    c.send(b"*1048577\r\n");
    c.expect_silence(Duration::from_millis(200));
    let mut req = Vec::with_capacity(8 * 1048577);
    req.extend_from_slice(b"$4\r\nECHO\r\n");
    for _ in 0..1048576 {
        req.extend_from_slice(b"$1\r\nx\r\n");
    }
    c.send(&req);
    assert_eq!(
        c.read(),
        err("ERR wrong number of arguments for 'echo' command")
    );
    assert_eq!(c.cmd(&["PING"]), simple("PONG"));
}

#[test]
fn unauthenticated_limits() {
    let opts = [("requirepass", "123456")];
    proto_err(
        &opts,
        b"*1048577\r\n",
        "ERR Protocol error: unauthenticated multibulk length",
    );
    proto_err(
        &opts,
        b"*11\r\n",
        "ERR Protocol error: unauthenticated multibulk length",
    );
    proto_err(
        &opts,
        b"*1\r\n$16385\r\n",
        "ERR Protocol error: unauthenticated bulk length",
    );
    let s = Server::start(&opts);
    let mut c = s.raw();
    c.send(b"*10\r\n");
    c.expect_silence(Duration::from_millis(200));
    let mut c = s.raw();
    c.send(b"*1\r\n$16384\r\n");
    c.expect_silence(Duration::from_millis(200));
}

#[test]
fn inline_too_big() {
    proto_err(
        &[],
        &vec![b'a'; 70000],
        "ERR Protocol error: too big inline request",
    );
    // Just under the limit is an (unknown) command, named in 128 chars.
    let s = Server::start(&[]);
    let mut c = s.raw();
    let mut line = vec![b'a'; 60000];
    line.extend_from_slice(b"\r\n");
    c.send(&line);
    let name = "a".repeat(128);
    assert_eq!(
        c.read(),
        err(&format!(
            "ERR unknown command '{name}', with args beginning with: "
        ))
    );
    assert_eq!(c.cmd(&["PING"]), simple("PONG"));
}

#[test]
fn bulk_over_proto_max_bulk_len() {
    proto_err(
        &[],
        b"*1\r\n$536870913\r\n",
        "ERR Protocol error: invalid bulk length",
    );
    proto_err(
        &[("proto-max-bulk-len", "1mb")],
        b"*1\r\n$1048577\r\n",
        "ERR Protocol error: invalid bulk length",
    );
    // At the limit it waits for the data; nothing is allocated up front
    // that the client did not send.
    let s = Server::start(&[]);
    let mut c = s.raw();
    c.send(b"*1\r\n$536870912\r\n");
    c.expect_silence(Duration::from_millis(200));
    let s = Server::start(&[("proto-max-bulk-len", "1mb")]);
    let mut c = s.raw();
    let v = vec![b'z'; 1048576];
    assert_eq!(c.cmd(&[&b"SET"[..], b"big", &v]), ok());
    assert_eq!(c.cmd(&["GET", "big"]), bulk(&v));
}

#[test]
fn inline_commands_and_quoting() {
    let s = Server::start(&[]);
    let mut c = s.raw();
    c.send(b"SET \"a b\" \"c\\x00\\r\\n\"\r\nGET \"a b\"\r\nGET 'a b'\n");
    assert_eq!(c.read(), ok());
    assert_eq!(c.read(), bulk(b"c\0\r\n"));
    assert_eq!(c.read(), bulk(b"c\0\r\n"));
}

#[test]
fn binary_keys_and_values_round_trip() {
    let s = Server::start(&[]);
    let mut c = s.raw();
    let all: Vec<u8> = (0..=255u8).collect();
    let cases: Vec<(Vec<u8>, Vec<u8>)> = vec![
        (b"\0".to_vec(), b"\0".to_vec()),
        (b"k\r\nk".to_vec(), b"\r\n\r\n".to_vec()),
        (b"$3\r\n*1".to_vec(), b"*1\r\n$3\r\nGET\r\n".to_vec()),
        (all.clone(), all.iter().rev().copied().collect()),
        (vec![0xff; 40], vec![0u8; 100_000]),
        (b"empty".to_vec(), vec![]),
    ];
    for (k, v) in &cases {
        assert_eq!(c.cmd(&[&b"SET"[..], k, v]), ok());
    }
    for (k, v) in &cases {
        assert_eq!(c.cmd(&[&b"GET"[..], k]), bulk(v), "key {k:?}");
    }
    // The same through the redis crate.
    let mut r = s.redis();
    for (k, v) in &cases {
        let got: Vec<u8> = redis::cmd("GET").arg(k).query(&mut r).unwrap();
        assert_eq!(&got, v);
    }
    let _: () = redis::cmd("SET")
        .arg(&all[..])
        .arg(&all[..])
        .query(&mut r)
        .unwrap();
    assert_eq!(c.cmd(&[&b"GET"[..], &all]), bulk(&all));
}

#[test]
fn pipeline_ten_thousand_commands_in_one_write() {
    let s = Server::start(&[]);
    let mut c = s.raw();
    let mut req = Vec::new();
    for i in 0..5000 {
        req.extend_from_slice(&encode(&["SET", &format!("key:{i}"), &format!("val:{i}")]));
    }
    for i in 0..5000 {
        req.extend_from_slice(&encode(&["GET", &format!("key:{i}")]));
    }
    c.send(&req);
    for _ in 0..5000 {
        assert_eq!(c.read(), ok());
    }
    for i in 0..5000 {
        assert_eq!(c.read(), bulk(format!("val:{i}")));
    }
    // Inline and multibulk mixed in one pipeline, split at odd places.
    let mut mixed = Vec::new();
    for i in 0..2000 {
        if i % 2 == 0 {
            mixed.extend_from_slice(format!("ECHO m{i}\r\n").as_bytes());
        } else {
            mixed.extend_from_slice(&encode(&["ECHO", &format!("m{i}")]));
        }
    }
    for chunk in mixed.chunks(777) {
        c.send(chunk);
    }
    for i in 0..2000 {
        assert_eq!(c.read(), bulk(format!("m{i}")));
    }
}

#[test]
fn abrupt_disconnect_mid_command() {
    let s = Server::start(&[]);
    let partials: &[&[u8]] = &[
        b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$10\r\nabc",
        b"*3\r\n$3\r\nSET\r\n",
        b"*3",
        b"SET k",
        b"*1\r\n$536870912\r\n",
    ];
    for p in partials {
        let mut c = s.raw();
        c.send(p);
        c.shutdown();
    }
    // Lots of unread replies, then gone.
    let mut c = s.raw();
    let mut req = Vec::new();
    for _ in 0..20000 {
        req.extend_from_slice(b"ECHO aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n");
    }
    c.send(&req);
    drop(c);
    let mut c = s.raw();
    assert_eq!(c.cmd(&["GET", "k"]), nil());
    assert_eq!(c.cmd(&["PING"]), simple("PONG"));
}

#[test]
fn ten_thousand_connections_while_a_client_works() {
    let s = Server::start(&[]);
    let port = s.port;
    let start = Instant::now();
    let churn: Vec<_> = (0..4)
        .map(|t| {
            thread::spawn(move || {
                for i in 0..2500 {
                    let mut c = RawClient::connect(port);
                    match i % 3 {
                        0 => {}
                        1 => c.send(b"*2\r\n$4\r\nECHO\r\n$5\r\nhel"),
                        _ => {
                            assert_eq!(
                                c.cmd(&["ECHO", &format!("{t}:{i}")]),
                                bulk(format!("{t}:{i}"))
                            )
                        }
                    }
                    drop(c);
                }
            })
        })
        .collect();
    let mut worker = s.raw();
    let mut n = 0u64;
    while churn.iter().any(|h| !h.is_finished()) {
        let v = n.to_string();
        assert_eq!(worker.cmd(&["SET", "counter", &v]), ok());
        assert_eq!(worker.cmd(&["GET", "counter"]), bulk(&v));
        n += 1;
        assert!(start.elapsed() < Duration::from_secs(60), "churn too slow");
    }
    for h in churn {
        h.join().expect("churn thread");
    }
    assert!(n > 0);
    assert_eq!(worker.cmd(&["PING"]), simple("PONG"));
}

#[test]
fn a_client_that_closes_its_side_after_its_requests_gets_every_reply() {
    // Replies wait in the connection's outbox for the end of the
    // event-loop round (round.rs), while the connection reads on and meets
    // the end of the input: they must all leave before it closes. Also
    // checked against redis-server 7.0.15.
    use std::io::{Read, Write};
    let s = Server::start(&[]);
    for requests in [1usize, 3, 5000] {
        let mut sock = std::net::TcpStream::connect(("127.0.0.1", s.port)).unwrap();
        let mut input = Vec::new();
        for i in 0..requests {
            input.extend_from_slice(
                format!("*2\r\n$4\r\nECHO\r\n${}\r\n{i}\r\n", i.to_string().len()).as_bytes(),
            );
        }
        sock.write_all(&input).unwrap();
        sock.shutdown(std::net::Shutdown::Write).unwrap();
        sock.set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        let mut got = Vec::new();
        sock.read_to_end(&mut got).unwrap();
        let want: String = (0..requests)
            .map(|i| format!("${}\r\n{i}\r\n", i.to_string().len()))
            .collect();
        assert_eq!(String::from_utf8_lossy(&got), want, "{requests} requests");
    }
}

/// `client-query-buffer-limit`, as Redis 7.0.15 applies it: what counts is
/// the input not yet parsed, so a request still arriving past the limit
/// closes its connection (and is logged), while a pipeline of whole
/// requests, or a MULTI queue, larger than the limit does not.
#[test]
fn a_request_growing_past_the_query_buffer_limit_closes_the_connection() {
    let s = Server::start(&[("client-query-buffer-limit", "1mb")]);
    let chunk = vec![b'x'; 100_000];
    let set = |v: &[u8]| {
        let mut r = format!("*3\r\n$3\r\nSET\r\n$1\r\nk\r\n${}\r\n", v.len()).into_bytes();
        r.extend_from_slice(v);
        r.extend_from_slice(b"\r\n");
        r
    };

    let mut c = s.raw();
    c.send(&set(&chunk).repeat(30));
    for _ in 0..30 {
        assert_eq!(c.read(), ok());
    }
    c.send(b"MULTI\r\n");
    assert_eq!(c.read(), ok());
    for _ in 0..30 {
        c.send(&set(&chunk));
        assert_eq!(c.read(), simple("QUEUED"));
    }
    assert_eq!(c.cmd(&["DISCARD"]), ok());

    let mut big = s.raw();
    big.send(b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$10000000\r\n");
    for _ in 0..20 {
        if big.try_send(&chunk).is_err() {
            break;
        }
    }
    big.expect_closed();
    assert_eq!(c.cmd(&["PING"]), simple("PONG"));
    if !is_real_redis() {
        assert!(s
            .log()
            .contains("Closing client that reached max query buffer length: id="));
        assert!(s.log().contains("(qbuf initial bytes: \"xxxx"));
    }
}

/// An inline request is a C string to Redis: a NUL before the newline hides
/// it, so the request is never answered (a TLS hello on the plain port gets
/// silence, not an error), until the line grows too big.
#[test]
fn an_inline_request_with_a_nul_is_never_answered() {
    let s = Server::start(&[]);
    let hello = b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\n";
    for input in [&b"PING\x00\r\n"[..], b"FOO\x00BAR\r\n", hello] {
        let mut c = s.raw();
        c.send(input);
        c.expect_silence(Duration::from_millis(300));
        c.send(b"PING\r\n");
        c.expect_silence(Duration::from_millis(100));
    }
    let mut c = s.raw();
    c.send(b"PING\x00");
    c.send(&vec![b'x'; 70_000]);
    assert_eq!(c.read(), err("ERR Protocol error: too big inline request"));
    c.expect_closed();
}

/// `socket-mark-id` marks the listening sockets (SO_MARK), and so every
/// connection they accept, as `ss -e` shows (`fwmark`), as Redis does.
#[test]
fn socket_mark_id_marks_the_sockets() {
    let Some(ss) = tool("ss") else {
        return;
    };
    let s = Server::start(&[("socket-mark-id", "42")]);
    let mut c = s.raw();
    assert_eq!(c.cmd(&["PING"]), simple("PONG"));
    let out = std::process::Command::new(ss)
        .args(["-tne", "-a", &format!("sport = :{}", s.port)])
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = out.lines().skip(1).collect();
    assert!(lines.len() >= 2, "{out}");
    assert!(lines.iter().all(|l| l.contains("fwmark:0x2a")), "{out}");
}

/// `tcp-keepalive` (300 by default) puts a keepalive timer on every client
/// socket, as Redis does; 0 leaves it off. Read from /proc/net/tcp: the
/// server's side of the connection has timer 2 (keepalive) running.
#[test]
fn client_sockets_carry_the_keepalive_timer_of_tcp_keepalive() {
    fn timer_of(server_port: u16, client_port: u16) -> Option<String> {
        let table = std::fs::read_to_string("/proc/net/tcp").ok()?;
        let (local, remote) = (format!(":{server_port:04X}"), format!(":{client_port:04X}"));
        table.lines().skip(1).find_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f[1].ends_with(&local) && f[2].ends_with(&remote)).then(|| f[5].to_string())
        })
    }
    for (opt, want) in [("300", "02"), ("0", "00")] {
        let s = Server::start(&[("tcp-keepalive", opt)]);
        let mut c = s.raw();
        assert_eq!(c.cmd(&["PING"]), simple("PONG"));
        let port = c.sock.local_addr().unwrap().port();
        let timer = timer_of(s.port, port).expect("the connection in /proc/net/tcp");
        assert_eq!(&timer[..2], want, "tcp-keepalive {opt}: timer {timer}");
    }
}
