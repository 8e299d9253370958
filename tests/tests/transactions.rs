//! WATCH/MULTI/EXEC across connections: CLIENT LIST during a transaction,
//! the seeds' optimistic-locking retry loop under concurrency, keys that
//! expire while watched, a transaction met by a busy script or a change of
//! min-replicas-to-write (replies as from Redis 7.0.15). The invalidation
//! cases run in-process (server/tests/families/transactions.rs).

use cinnabar_tests::RespFrame as Frame;
use cinnabar_tests::*;
use std::thread;
use std::time::{Duration, Instant};

/// CLIENT LIST shows a transaction as Redis 7.0.15 does: flag `x` (and `d`
/// once a watched key changed), the queued count and their memory, and the
/// last command looked up, NULL when unknown.
#[test]
fn client_list_shows_transactions() {
    let s = Server::start(&[]);
    let mut a = s.raw();
    let mut b = s.raw();
    let mut o = s.raw();
    let line = |o: &mut RawClient, name: &str| {
        text(&o.cmd(&["CLIENT", "LIST"]))
            .lines()
            .find(|l| l.contains(&format!(" name={name} ")))
            .expect("client listed")
            .to_string()
    };
    assert_eq!(a.cmd(&["CLIENT", "SETNAME", "a"]), ok());
    assert_eq!(a.cmd(&["WATCH", "w"]), ok());
    assert_eq!(a.cmd(&["MULTI"]), ok());
    assert_eq!(a.cmd(&["SET", "x", "12345"]), simple("QUEUED"));
    assert_eq!(a.cmd(&["GET", "x"]), simple("QUEUED"));
    let l = line(&mut o, "a");
    assert!(l.contains(" flags=x db=0 "), "{l}");
    assert!(l.contains(" multi=2 "), "{l}");
    // Arguments' bytes plus 8 per argument: (3+1+5) + 24 + (3+1) + 16.
    assert!(l.contains(" multi-mem=53 "), "{l}");
    assert!(l.contains(" cmd=get "), "{l}");
    assert_eq!(b.cmd(&["SET", "w", "1"]), ok());
    assert!(line(&mut o, "a").contains(" flags=xd "));
    assert_eq!(a.cmd(&["EXEC"]), Frame::Null);
    let l = line(&mut o, "a");
    assert!(l.contains(" flags=N ") && l.contains(" multi=-1 "), "{l}");
    assert!(matches!(a.cmd(&["NOSUCH"]), Frame::Error(_)));
    assert!(line(&mut o, "a").contains(" cmd=NULL "));
}

/// Ten clients increment one counter with WATCH/GET/MULTI/SET/EXEC retries
/// (the seeds' pattern): no update may be lost.
#[test]
fn optimistic_increments_lose_nothing() {
    let s = Server::start(&[]);
    let port = s.port;
    let per_client = 200;
    let handles: Vec<_> = (0..10)
        .map(|_| {
            thread::spawn(move || {
                let mut c = RawClient::connect(port);
                let mut retries = 0;
                for _ in 0..per_client {
                    loop {
                        assert_eq!(c.cmd(&["WATCH", "counter"]), ok());
                        let cur = match c.cmd(&["GET", "counter"]) {
                            Frame::Bulk(b) => String::from_utf8_lossy(&b).parse::<i64>().unwrap(),
                            _ => 0,
                        };
                        assert_eq!(c.cmd(&["MULTI"]), ok());
                        let next = (cur + 1).to_string();
                        assert_eq!(c.cmd(&["SET", "counter", &next]), simple("QUEUED"));
                        match c.cmd(&["EXEC"]) {
                            Frame::Array(r) => {
                                assert_eq!(r, vec![ok()]);
                                break;
                            }
                            Frame::Null => retries += 1,
                            other => panic!("EXEC replied {other:?}"),
                        }
                    }
                }
                retries
            })
        })
        .collect();
    let retries: i32 = handles.into_iter().map(|h| h.join().unwrap()).sum();
    let mut c = s.raw();
    assert_eq!(
        c.cmd(&["GET", "counter"]),
        bulk((10 * per_client).to_string())
    );
    // With ten writers some transactions must have been aborted and retried.
    assert!(retries > 0, "no EXEC was ever aborted");
}

const BUSY: &str =
    "BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.";

/// Waits until the running script makes the server answer -BUSY.
fn wait_busy(s: &Server) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while s.raw().cmd(&["PING"]) != err(BUSY) {
        assert!(Instant::now() < deadline, "the script never got busy");
        thread::sleep(Duration::from_millis(20));
    }
}

/// While a script is busy MULTI and DISCARD are allowed, anything else is
/// refused and marks the transaction, and EXEC discards it, saying why.
#[test]
fn transaction_meets_busy_script() {
    let s = Server::start(&[("busy-reply-threshold", "100")]);
    let mut a = s.raw();
    let mut b = s.raw();
    let mut k = s.raw();
    assert_eq!(b.cmd(&["SET", "xx", "1"]), ok());
    assert_eq!(b.cmd(&["MULTI"]), ok());
    assert_eq!(b.cmd(&["INCR", "xx"]), simple("QUEUED"));
    a.send_cmd(&["EVAL", "while true do end", "0"]);
    wait_busy(&s);
    let abort = format!("EXECABORT Transaction discarded because of: {BUSY}");
    assert_eq!(b.cmd(&["EXEC"]), err(&abort));
    assert_eq!(b.cmd(&["EXEC"]), err(&abort));
    assert_eq!(b.cmd(&["DISCARD"]), err("ERR DISCARD without MULTI"));
    assert_eq!(b.cmd(&["MULTI"]), ok());
    assert_eq!(b.cmd(&["MULTI"]), err("ERR MULTI calls can not be nested"));
    assert_eq!(b.cmd(&["DISCARD"]), ok());
    assert_eq!(b.cmd(&["MULTI"]), ok());
    assert_eq!(b.cmd(&["INCR", "xx"]), err(BUSY));
    assert_eq!(k.cmd(&["SCRIPT", "KILL"]), ok());
    assert!(matches!(a.read(), Frame::Error(_)));
    // Still in the transaction opened while busy, which the refusal marked.
    assert_eq!(b.cmd(&["INCR", "xx"]), simple("QUEUED"));
    assert_eq!(
        b.cmd(&["EXEC"]),
        err("EXECABORT Transaction discarded because of previous errors.")
    );
    assert_eq!(b.cmd(&["GET", "xx"]), bulk("1"));
}

/// A watched key whose time runs out fails EXEC though nothing deleted it
/// yet; SWAPDB bringing in, or replacing, only expired keys changes nothing.
#[test]
fn watched_keys_that_expire() {
    let s = Server::start(&[("enable-debug-command", "yes")]);
    let mut c = s.raw();
    assert_eq!(c.cmd(&["DEBUG", "SET-ACTIVE-EXPIRE", "0"]), ok());
    assert_eq!(c.cmd(&["SET", "key", "1", "PX", "50"]), ok());
    assert_eq!(c.cmd(&["WATCH", "key"]), ok());
    thread::sleep(Duration::from_millis(80));
    assert_eq!(c.cmd(&["MULTI"]), ok());
    assert_eq!(c.cmd(&["INCR", "key"]), simple("QUEUED"));
    assert_eq!(c.cmd(&["EXEC"]), Frame::Null);

    assert_eq!(c.cmd(&["SET", "x", "foo", "PX", "1"]), ok());
    assert_eq!(c.cmd(&["SELECT", "1"]), ok());
    assert_eq!(c.cmd(&["SET", "x", "bar", "PX", "1"]), ok());
    assert_eq!(c.cmd(&["SET", "y", "baz", "PX", "1"]), ok());
    thread::sleep(Duration::from_millis(5));
    assert_eq!(c.cmd(&["SELECT", "0"]), ok());
    assert_eq!(c.cmd(&["WATCH", "x", "y"]), ok());
    assert_eq!(c.cmd(&["SWAPDB", "0", "1"]), ok());
    assert_eq!(c.cmd(&["MULTI"]), ok());
    assert_eq!(c.cmd(&["PING"]), simple("QUEUED"));
    assert_eq!(c.cmd(&["EXEC"]), Frame::Array(vec![simple("PONG")]));
}

/// min-replicas-to-write set after a write was queued: EXEC is refused.
#[test]
fn exec_refused_without_enough_replicas() {
    let s = Server::start(&[]);
    let mut c = s.raw();
    let mut o = s.raw();
    assert_eq!(c.cmd(&["SET", "xx", "1"]), ok());
    assert_eq!(c.cmd(&["MULTI"]), ok());
    assert_eq!(c.cmd(&["INCR", "xx"]), simple("QUEUED"));
    assert_eq!(
        o.cmd(&["CONFIG", "SET", "min-replicas-to-write", "2"]),
        ok()
    );
    assert_eq!(
        c.cmd(&["EXEC"]),
        err("EXECABORT Transaction discarded because of: NOREPLICAS Not enough good replicas to write.")
    );
    assert_eq!(c.cmd(&["GET", "xx"]), bulk("1"));
}
