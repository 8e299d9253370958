//! WATCH/MULTI/EXEC across connections: CLIENT LIST during a transaction,
//! and the seeds' optimistic-locking retry loop under concurrency. The
//! invalidation cases run in-process (server/tests/families/transactions.rs).

use cinnabar_tests::RespFrame as Frame;
use cinnabar_tests::*;
use std::thread;

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
