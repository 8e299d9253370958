//! A small load generator for what redis-benchmark cannot send: a whole
//! transaction per round trip.
//!
//!   cinnabar-load multi-incr PORT CLIENTS SECONDS
//!
//! Each client sends MULTI, 10 × INCR, EXEC in one write and reads the 12
//! replies; prints transactions per second.

use cinnabar_tests::{encode, parse_reply, RespFrame};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() != 5 || args[1] != "multi-incr" {
        eprintln!("usage: cinnabar-load multi-incr PORT CLIENTS SECONDS");
        std::process::exit(2);
    }
    let port: u16 = args[2].parse().expect("port");
    let clients: usize = args[3].parse().expect("clients");
    let secs: u64 = args[4].parse().expect("seconds");
    let mut req = encode(&["MULTI"]);
    for i in 0..10 {
        req.extend(encode(&["INCR", &format!("load:counter:{i}")]));
    }
    req.extend(encode(&["EXEC"]));
    let stop = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicU64::new(0));
    let threads: Vec<_> = (0..clients)
        .map(|_| {
            let (req, stop, done) = (req.clone(), stop.clone(), done.clone());
            std::thread::spawn(move || {
                let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
                s.set_nodelay(true).ok();
                let mut buf = Vec::new();
                let mut chunk = [0u8; 4096];
                while !stop.load(Ordering::Relaxed) {
                    s.write_all(&req).expect("write");
                    let mut replies = 0;
                    while replies < 12 {
                        match parse_reply(&buf) {
                            Some((f, used)) => {
                                buf.drain(..used);
                                if let RespFrame::Error(e) = f {
                                    panic!("error reply: {}", String::from_utf8_lossy(&e));
                                }
                                replies += 1;
                            }
                            None => {
                                let n = s.read(&mut chunk).expect("read");
                                assert!(n > 0, "server closed the connection");
                                buf.extend_from_slice(&chunk[..n]);
                            }
                        }
                    }
                    done.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    let start = Instant::now();
    std::thread::sleep(Duration::from_secs(secs));
    stop.store(true, Ordering::Relaxed);
    let n = done.load(Ordering::Relaxed);
    let elapsed = start.elapsed().as_secs_f64();
    for t in threads {
        t.join().ok();
    }
    println!("{:.2}", n as f64 / elapsed);
}
