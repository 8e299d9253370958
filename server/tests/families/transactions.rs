//! WATCH/MULTI/EXEC between two clients, moved from the black-box tests:
//! the harness gives each client its own state, and expiry happens on its
//! clock instead of a sleep.

use cinnabar_server::testkit::*;

#[test]
fn another_clients_write_aborts_exec() {
    let mut h = Harness::new();
    let a = h.client;
    let b = h.connect();
    assert_eq!(h.run_on(a, &["SET", "k", "1"]), ok());
    assert_eq!(h.run_on(a, &["WATCH", "k"]), ok());
    assert_eq!(h.run_on(b, &["SET", "k", "2"]), ok());
    assert_eq!(h.run_on(a, &["MULTI"]), ok());
    assert_eq!(h.run_on(a, &["SET", "k", "3"]), simple("QUEUED"));
    assert_eq!(h.run_on(a, &["EXEC"]), nil());
    assert_eq!(h.run_on(a, &["GET", "k"]), bulk("2"));
    // Watching a key that another client creates also aborts.
    assert_eq!(h.run_on(a, &["WATCH", "new"]), ok());
    assert_eq!(h.run_on(b, &["SET", "new", "x"]), ok());
    assert_eq!(h.run_on(a, &["MULTI"]), ok());
    assert_eq!(h.run_on(a, &["PING"]), simple("QUEUED"));
    assert_eq!(h.run_on(a, &["EXEC"]), nil());
    // A write in another database to the same key name does not.
    assert_eq!(h.run_on(a, &["WATCH", "k"]), ok());
    assert_eq!(h.run_on(b, &["SELECT", "1"]), ok());
    assert_eq!(h.run_on(b, &["SET", "k", "other-db"]), ok());
    assert_eq!(h.run_on(a, &["MULTI"]), ok());
    assert_eq!(h.run_on(a, &["GET", "k"]), simple("QUEUED"));
    assert_eq!(h.run_on(a, &["EXEC"]), Frame::Array(vec![bulk("2")]));
}

#[test]
fn expiry_and_swapdb_abort_exec() {
    let mut h = Harness::new();
    let a = h.client;
    let b = h.connect();
    assert_eq!(h.run_on(a, &["SET", "t", "1", "PX", "50"]), ok());
    assert_eq!(h.run_on(a, &["WATCH", "t"]), ok());
    h.advance_ms(120);
    assert_eq!(h.run_on(a, &["MULTI"]), ok());
    assert_eq!(h.run_on(a, &["PING"]), simple("QUEUED"));
    assert_eq!(h.run_on(a, &["EXEC"]), nil());

    assert_eq!(h.run_on(a, &["SET", "s", "1"]), ok());
    assert_eq!(h.run_on(a, &["WATCH", "s"]), ok());
    assert_eq!(h.run_on(b, &["SWAPDB", "0", "1"]), ok());
    assert_eq!(h.run_on(a, &["MULTI"]), ok());
    assert_eq!(h.run_on(a, &["PING"]), simple("QUEUED"));
    assert_eq!(h.run_on(a, &["EXEC"]), nil());
}

/// Checked with redis-server 7.0.15 with active expiry off: a watched key
/// that expires before EXEC aborts it even while no expiry cycle has
/// deleted it; a key already expired when WATCHed does not.
#[test]
fn watched_key_expiring_aborts_without_an_expiry_cycle() {
    let mut h = Harness::new();
    assert_eq!(h.run(&["SET", "t", "1", "PX", "10"]), ok());
    h.advance_ms(50);
    assert_eq!(h.run(&["WATCH", "t"]), ok());
    assert_eq!(h.run(&["MULTI"]), ok());
    assert_eq!(h.run(&["PING"]), simple("QUEUED"));
    assert_eq!(h.run(&["EXEC"]), Frame::Array(vec![simple("PONG")]));
    assert_eq!(h.run(&["SET", "t", "1", "PX", "50"]), ok());
    assert_eq!(h.run(&["WATCH", "t"]), ok());
    h.advance_ms(120);
    assert_eq!(h.run(&["MULTI"]), ok());
    assert_eq!(h.run(&["PING"]), simple("QUEUED"));
    assert_eq!(h.run(&["EXEC"]), nil());
}
