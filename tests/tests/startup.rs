//! Start-up as Redis's own test suite and service managers see it: the
//! logo's facts (` PID: <pid>`, which `runtest` waits for), the test-only
//! options Redis 7.0.15 accepts, listening while the dataset loads, and
//! running as a system service (daemonize, pidfile, NOTIFY_SOCKET, a Unix
//! socket, modules).

use cinnabar_tests::{bulk, err, is_real_redis, ok, simple, text, RespFrame, Server, TempDir};
use std::time::Duration;

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

fn info_field(c: &mut cinnabar_tests::RawClient, section: &str, field: &str) -> String {
    let r = text(&c.cmd(&["INFO", section]));
    r.lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")))
        .unwrap_or_else(|| panic!("no {field} in {r}"))
        .to_string()
}

#[test]
fn hidden_test_options_start_and_answer_only_by_name() {
    let s = Server::start(&[
        ("use-exit-on-panic", "yes"),
        ("key-load-delay", "50"),
        ("rdb-key-save-delay", "-10"),
        ("loading-process-events-interval-bytes", "1024"),
        ("watchdog-period", "0"),
    ]);
    let mut c = s.raw();
    assert_eq!(
        c.cmd(&["CONFIG", "GET", "key-load-delay"]),
        RespFrame::Array(vec![bulk("key-load-delay"), bulk("50")])
    );
    assert!(text(&c.cmd(&["CONFIG", "GET", "*"])).contains("maxmemory-samples"));
    for pattern in ["*", "key*", "*delay*"] {
        let all = text(&c.cmd(&["CONFIG", "GET", pattern]));
        assert!(!all.contains("key-load-delay"), "{pattern}: {all}");
    }
    assert_eq!(
        c.cmd(&["CONFIG", "SET", "loading-process-events-interval-bytes", "10"]),
        err("ERR CONFIG SET failed (possibly related to argument 'loading-process-events-interval-bytes') - argument must be between 1024 and 2147483647 inclusive")
    );
    assert_eq!(c.cmd(&["CONFIG", "SET", "use-exit-on-panic", "no"]), ok());
}

#[test]
fn use_exit_on_panic_exits_with_1() {
    let mut s = Server::start(&[
        ("use-exit-on-panic", "yes"),
        ("enable-debug-command", "yes"),
    ]);
    let mut c = s.raw();
    c.send_cmd(&["DEBUG", "PANIC"]);
    c.expect_closed();
    assert_eq!(wait_exit(&mut s), Some(1));
    let log = s.log();
    assert!(
        log.contains("Guru Meditation: DEBUG PANIC called at Unix time"),
        "{log}"
    );
}

#[test]
fn rdb_key_save_delay_slows_a_background_save() {
    let s = Server::start(&[("rdb-key-save-delay", "200000")]);
    let mut c = s.raw();
    for i in 0..10 {
        assert_eq!(c.cmd(&["SET", &format!("k{i}"), "v"]), ok());
    }
    assert_eq!(c.cmd(&["BGSAVE"]), simple("Background saving started"));
    std::thread::sleep(Duration::from_millis(600));
    assert_eq!(
        info_field(&mut c, "persistence", "rdb_bgsave_in_progress"),
        "1"
    );
    // Clients are not held up by the slow walk.
    let t = std::time::Instant::now();
    assert_eq!(c.cmd(&["SET", "x", "y"]), ok());
    assert!(t.elapsed() < Duration::from_millis(150));
}

/// Fills `dir` with `n` keys saved as the server's dataset (RDB, or AOF
/// with `aof`), then stops the server.
fn dataset(dir: &TempDir, n: usize, aof: bool) {
    let mut s = Server::start(&[
        ("dir", dir.dir()),
        ("appendonly", if aof { "yes" } else { "no" }),
        ("enable-debug-command", "yes"),
    ]);
    let mut c = s.raw();
    if aof {
        for i in 0..n {
            assert_eq!(c.cmd(&["SET", &format!("key:{i}"), "value"]), ok());
        }
    } else {
        assert_eq!(c.cmd(&["DEBUG", "POPULATE", &n.to_string()]), ok());
        assert_eq!(c.cmd(&["SAVE"]), ok());
    }
    c.send_cmd(&["SHUTDOWN", "NOSAVE"]);
    c.expect_closed();
    wait_exit(&mut s);
}

fn wait_exit(s: &mut Server) -> Option<i32> {
    let t = std::time::Instant::now();
    while s.alive() && t.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(10));
    }
    s.exit_code()
}

/// The server answers while it loads: -LOADING for what cannot run, INFO
/// with the progress, and the dataset once it is done.
fn listens_while_loading(aof: bool) {
    let dir = TempDir::new(if aof { "loading-aof" } else { "loading-rdb" });
    dataset(&dir, 2000, aof);
    let s = Server::start_listening(
        &cinnabar_tests::server_bin(),
        &[
            ("dir", dir.dir()),
            ("appendonly", if aof { "yes" } else { "no" }),
            ("key-load-delay", "1000"),
            ("loading-process-events-interval-bytes", "1024"),
        ],
    );
    let mut c = s.raw();
    let loading = err("LOADING Redis is loading the dataset in memory");
    assert_eq!(c.cmd(&["GET", "key:1"]), loading);
    assert_eq!(c.cmd(&["PING"]), loading);
    let info = text(&c.cmd(&["INFO", "persistence"]));
    for field in [
        "loading:1",
        "async_loading:0",
        "loading_start_time:",
        "loading_total_bytes:",
        "loading_rdb_used_mem:",
        "loading_loaded_bytes:",
        "loading_loaded_perc:",
        "loading_eta_seconds:",
    ] {
        assert!(info.contains(field), "{field}: {info}");
    }
    // ok-loading commands run.
    assert_eq!(c.cmd(&["CONFIG", "SET", "loglevel", "verbose"]), ok());
    s.wait_loaded();
    assert_eq!(c.cmd(&["DBSIZE"]), cinnabar_tests::int(2000));
    assert_eq!(info_field(&mut c, "persistence", "loading"), "0");
}

#[test]
fn rdb_loading_answers_loading() {
    listens_while_loading(false);
}

#[test]
fn aof_loading_answers_loading() {
    listens_while_loading(true);
}

#[test]
fn shutdown_while_loading_keeps_the_file() {
    let dir = TempDir::new("loading-shutdown");
    dataset(&dir, 2000, false);
    let rdb = dir.path().join("dump.rdb");
    let size = std::fs::metadata(&rdb).unwrap().len();
    let mut s = Server::start_listening(
        &cinnabar_tests::server_bin(),
        &[
            ("dir", dir.dir()),
            ("key-load-delay", "1000"),
            ("save", "1 1"),
        ],
    );
    let mut c = s.raw();
    c.send_cmd(&["SHUTDOWN"]);
    c.expect_closed();
    assert_eq!(wait_exit(&mut s), Some(0));
    assert_eq!(std::fs::metadata(&rdb).unwrap().len(), size);
}
