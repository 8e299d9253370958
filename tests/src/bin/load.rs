//! A small load generator for what redis-benchmark cannot measure.
//!
//!   cinnabar-load multi-incr PORT CLIENTS SECONDS
//!   cinnabar-load publish PORT SUBSCRIBERS SECONDS
//!
//! multi-incr: each client sends MULTI, 10 × INCR, EXEC in one write and
//! reads the 12 replies; prints transactions per second.
//!
//! publish: SUBSCRIBERS connections subscribe to one channel; two
//! publishers send PUBLISH in pipelined rounds of 32; prints messages the
//! subscribers received per second (each PUBLISH counts once per
//! subscriber).

use cinnabar_tests::{encode, parse_reply, RespFrame};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const CHANNEL: &str = "bench:channel";
const PAYLOAD: &str = "0123456789abcdef";
const PUBLISHERS: usize = 2;
const PIPELINE: usize = 32;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let mode = args.get(1).map(String::as_str);
    if args.len() != 5 || !matches!(mode, Some("multi-incr" | "publish")) {
        eprintln!("usage: cinnabar-load multi-incr|publish PORT CLIENTS SECONDS");
        std::process::exit(2);
    }
    let port: u16 = args[2].parse().expect("port");
    let clients: usize = args[3].parse().expect("clients");
    let secs: u64 = args[4].parse().expect("seconds");
    let rate = if mode == Some("publish") {
        publish(port, clients, secs)
    } else {
        multi_incr(port, clients, secs)
    };
    println!("{rate:.2}");
    // Subscribers may sit in a blocking read: exit without joining them.
    std::process::exit(0);
}

fn connect(port: u16) -> TcpStream {
    let s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    s.set_nodelay(true).ok();
    s
}

/// Sends `req` and reads `n` replies, panicking on an error reply.
fn round_trip(s: &mut TcpStream, req: &[u8], n: usize, buf: &mut Vec<u8>) {
    s.write_all(req).expect("write");
    let mut chunk = [0u8; 4096];
    let mut replies = 0;
    while replies < n {
        match parse_reply(buf) {
            Some((f, used)) => {
                buf.drain(..used);
                if let RespFrame::Error(e) = f {
                    panic!("error reply: {}", String::from_utf8_lossy(&e));
                }
                replies += 1;
            }
            None => {
                let got = s.read(&mut chunk).expect("read");
                assert!(got > 0, "server closed the connection");
                buf.extend_from_slice(&chunk[..got]);
            }
        }
    }
}

/// Runs `clients` threads, each with its own connection, doing round trips
/// of `req` (`n` replies) until `secs` have passed; round trips per second.
fn run_clients(port: u16, clients: usize, secs: u64, req: &[u8], n: usize) -> f64 {
    let stop = AtomicBool::new(false);
    let done = AtomicU64::new(0);
    std::thread::scope(|sc| {
        for _ in 0..clients {
            sc.spawn(|| {
                let (mut s, mut buf) = (connect(port), Vec::new());
                while !stop.load(Ordering::Relaxed) {
                    round_trip(&mut s, req, n, &mut buf);
                    done.fetch_add(1, Ordering::Relaxed);
                }
            });
        }
        let start = Instant::now();
        std::thread::sleep(Duration::from_secs(secs));
        stop.store(true, Ordering::Relaxed);
        done.load(Ordering::Relaxed) as f64 / start.elapsed().as_secs_f64()
    })
}

fn multi_incr(port: u16, clients: usize, secs: u64) -> f64 {
    let mut req = encode(&["MULTI"]);
    for i in 0..10 {
        req.extend(encode(&["INCR", &format!("load:counter:{i}")]));
    }
    req.extend(encode(&["EXEC"]));
    run_clients(port, clients, secs, &req, 12)
}

fn publish(port: u16, subscribers: usize, secs: u64) -> f64 {
    let frame = encode(&["message", CHANNEL, PAYLOAD]);
    let received = Arc::new(AtomicU64::new(0));
    for _ in 0..subscribers {
        let mut s = connect(port);
        let mut buf = Vec::new();
        round_trip(&mut s, &encode(&["SUBSCRIBE", CHANNEL]), 1, &mut buf);
        assert!(buf.is_empty(), "unexpected data after SUBSCRIBE");
        let received = received.clone();
        // Every message has the same size: count bytes, not frames.
        std::thread::spawn(move || {
            let mut chunk = vec![0u8; 64 * 1024];
            while let Ok(n @ 1..) = s.read(&mut chunk) {
                received.fetch_add(n as u64, Ordering::Relaxed);
            }
        });
    }
    let mut req = Vec::new();
    for _ in 0..PIPELINE {
        req.extend(encode(&["PUBLISH", CHANNEL, PAYLOAD]));
    }
    let publishers =
        std::thread::spawn(move || run_clients(port, PUBLISHERS, secs, &req, PIPELINE));
    // Measure the middle of the run: after the pipelines fill, before they
    // stop.
    std::thread::sleep(Duration::from_millis(300));
    let (b0, t0) = (received.load(Ordering::Relaxed), Instant::now());
    std::thread::sleep(Duration::from_secs(secs).saturating_sub(Duration::from_millis(600)));
    let (b1, t1) = (received.load(Ordering::Relaxed), Instant::now());
    publishers.join().ok();
    (b1 - b0) as f64 / frame.len() as f64 / (t1 - t0).as_secs_f64()
}
