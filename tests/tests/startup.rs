//! Start-up as Redis's own test suite and service managers see it: the
//! logo's facts (` PID: <pid>`, which `runtest` waits for), the test-only
//! options Redis 7.0.15 accepts, listening while the dataset loads, and
//! running as a system service (daemonize, pidfile, NOTIFY_SOCKET, a Unix
//! socket, modules).

use cinnabar_tests::{is_real_redis, Server};

#[test]
fn logo_shows_the_pid_and_port() {
    let s = Server::start(&[("always-show-logo", "yes")]);
    let log = s.log();
    assert!(log.contains(&format!(" PID: {}\n", s.pid())), "{log}");
    assert!(log.contains(&format!(" Port: {}\n", s.port)), "{log}");
    assert!(log.contains("Running in standalone mode"), "{log}");
    assert!(log.contains("Redis version=7.0.15, bits=64"), "{log}");
}

#[test]
fn without_the_logo_one_line() {
    let s = Server::start(&[]);
    let log = s.log();
    assert!(
        log.contains(&format!("Running mode=standalone, port={}.", s.port)),
        "{log}"
    );
    assert!(!log.contains(" PID: "), "{log}");
}

#[test]
fn a_busy_port_is_reported_as_redis_does() {
    let s = Server::start(&[]);
    let out = std::process::Command::new(cinnabar_tests::server_bin())
        .args(["--port", &s.port.to_string(), "--bind", "127.0.0.1"])
        .args(["--save", ""])
        .current_dir(&s.dir)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains(&format!(
            "Failed listening on port {} (TCP), aborting.",
            s.port
        )),
        "{text}"
    );
    if !is_real_redis() {
        assert!(
            text.contains("Could not create server TCP listening socket"),
            "{text}"
        );
    }
}
