//! Start-up as Redis's own test suite and service managers see it: the
//! logo's facts (` PID: <pid>`, which `runtest` waits for), the test-only
//! options Redis 7.0.15 accepts, listening while the dataset loads, and
//! running as a system service (daemonize, pidfile, NOTIFY_SOCKET, a Unix
//! socket, modules).

use cinnabar_tests::{
    bulk, err, is_real_redis, ok, simple, text, wait_for, RespFrame, Server, TempDir,
};
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
            ("enable-protected-configs", "yes"),
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
    assert_eq!(c.cmd(&["CONFIG", "SET", "dir", dir.dir()]), loading);
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

/// Debian's packaged redis.conf (package redis-server) with the port and
/// paths moved into `dir`, or, where it is not installed, the directives
/// of it that matter here.
fn debian_conf(dir: &TempDir, port: u16, extra: &str) -> std::path::PathBuf {
    let packaged = std::fs::read_to_string("/etc/redis/redis.conf").unwrap_or_else(|_| {
        "bind 127.0.0.1 -::1\nport 6379\ndaemonize yes\npidfile /run/redis/redis-server.pid\nloglevel notice\nlogfile /var/log/redis/redis-server.log\ndir /var/lib/redis\n".into()
    });
    let mut conf = String::new();
    for line in packaged.lines() {
        let name = line.split_whitespace().next().unwrap_or("");
        conf.push_str(match name {
            "port" | "pidfile" | "logfile" | "dir" => continue,
            _ => line,
        });
        conf.push('\n');
    }
    conf.push_str(&format!(
        "port {port}\npidfile {0}/redis.pid\nlogfile {0}/redis.log\ndir {0}\nsave \"\"\n{extra}\n",
        dir.dir()
    ));
    let path = dir.path().join("redis.conf");
    std::fs::write(&path, conf).unwrap();
    path
}

#[test]
fn daemonize_detaches_and_writes_the_pidfile() {
    let dir = TempDir::new("daemonize");
    let port = cinnabar_tests::free_port();
    let conf = debian_conf(&dir, port, "");
    let t = std::time::Instant::now();
    let status = std::process::Command::new(cinnabar_tests::server_bin())
        .arg(&conf)
        .stdin(std::process::Stdio::null())
        .status()
        .unwrap();
    assert!(status.success(), "{status}");
    assert!(t.elapsed() < Duration::from_secs(5));
    let pidfile = dir.path().join("redis.pid");
    wait_for("the pidfile", || pidfile.exists());
    let pid: i32 = std::fs::read_to_string(&pidfile)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let mut c = loop {
        if let Ok(c) = cinnabar_tests::RawClient::try_connect(port) {
            break c;
        }
        assert!(t.elapsed() < Duration::from_secs(10));
        std::thread::sleep(Duration::from_millis(10));
    };
    assert_eq!(info_field(&mut c, "server", "process_id"), pid.to_string());
    wait_for("the end of loading", || c.cmd(&["PING"]) == simple("PONG"));
    c.send_cmd(&["SHUTDOWN", "NOSAVE"]);
    c.expect_closed();
    wait_for("the pidfile removed", || !pidfile.exists());
    let log = std::fs::read_to_string(dir.path().join("redis.log")).unwrap();
    assert!(log.contains("Ready to accept connections"), "{log}");
}

#[test]
fn supervised_systemd_notifies_the_socket() {
    use std::os::unix::net::UnixDatagram;
    let dir = TempDir::new("notify");
    let sock_path = dir.path().join("notify.sock");
    let sock = UnixDatagram::bind(&sock_path).unwrap();
    sock.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let port = cinnabar_tests::free_port();
    // As Debian's unit starts it: supervised, in the foreground.
    let conf = debian_conf(&dir, port, "supervised systemd\ndaemonize no");
    let mut child = std::process::Command::new(cinnabar_tests::server_bin())
        .arg(&conf)
        .env("NOTIFY_SOCKET", &sock_path)
        .stdin(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let next = || {
        let mut buf = [0u8; 256];
        let n = sock.recv(&mut buf).expect("a notification");
        String::from_utf8_lossy(&buf[..n]).into_owned()
    };
    assert_eq!(next(), "STATUS=Redis is loading...\n");
    assert_eq!(next(), "STATUS=Ready to accept connections\n");
    assert_eq!(next(), "READY=1\n");
    let mut c = cinnabar_tests::RawClient::connect(port);
    assert_eq!(c.cmd(&["PING"]), simple("PONG"));
    c.send_cmd(&["SHUTDOWN", "NOSAVE"]);
    c.expect_closed();
    assert_eq!(next(), "STOPPING=1\n");
    assert!(child.wait().unwrap().success());
}

#[test]
fn unix_socket_serves_as_tcp() {
    use std::io::{Read, Write};
    use std::os::unix::fs::PermissionsExt;
    let dir = TempDir::new("unixsocket");
    let path = dir.path().join("redis.sock");
    let s = Server::start(&[
        ("unixsocket", path.to_str().unwrap()),
        ("unixsocketperm", "700"),
    ]);
    let mode = std::fs::metadata(&path).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o700);
    let mut u = std::os::unix::net::UnixStream::connect(&path).unwrap();
    u.write_all(b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n*1\r\n$4\r\nPING\r\n")
        .unwrap();
    let mut buf = [0u8; 64];
    let mut got = Vec::new();
    while got.len() < 12 {
        let n = u.read(&mut buf).unwrap();
        assert!(n > 0);
        got.extend_from_slice(&buf[..n]);
    }
    assert_eq!(got, b"+OK\r\n+PONG\r\n");
    let out = std::process::Command::new("redis-cli")
        .args(["-s", path.to_str().unwrap(), "CLIENT", "LIST"])
        .output()
        .expect("redis-cli");
    let list = String::from_utf8_lossy(&out.stdout);
    let p = path.display();
    assert!(list.contains(&format!("addr={p}:0 laddr={p}:0 ")), "{list}");
    assert!(list.contains(" flags=U "), "{list}");
    let mut c = s.raw();
    assert_eq!(c.cmd(&["GET", "k"]), bulk("v"));
    assert_eq!(
        c.cmd(&["CONFIG", "GET", "unixsocketperm"]),
        RespFrame::Array(vec![bulk("unixsocketperm"), bulk("700")])
    );
}

#[test]
fn loadmodule_stops_the_start() {
    let out = std::process::Command::new(cinnabar_tests::server_bin())
        .args(["--port", &cinnabar_tests::free_port().to_string()])
        .args(["--save", "", "--loadmodule", "/nonexistent/module.so"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let log = String::from_utf8_lossy(&out.stdout);
    assert!(log.contains("# Module /nonexistent/module.so failed to load: /nonexistent/module.so: cannot open shared object file: No such file or directory"), "{log}");
    assert!(
        log.contains("# Can't load module from /nonexistent/module.so: server aborting"),
        "{log}"
    );
}

#[test]
fn module_commands_as_with_no_module_loaded() {
    let s = Server::start(&[]);
    let mut c = s.raw();
    assert_eq!(c.cmd(&["MODULE", "LIST"]), RespFrame::Array(vec![]));
    assert_eq!(
        c.cmd(&["MODULE", "LOAD", "/x.so"]),
        err("ERR MODULE command not allowed. If the enable-module-command option is set to \"local\", you can run it from a local connection, otherwise you need to set this option in the configuration file, and then restart the server.")
    );
    let s = Server::start(&[("enable-module-command", "yes")]);
    let mut c = s.raw();
    assert_eq!(
        c.cmd(&["MODULE", "LOAD", "/x.so"]),
        err("ERR Error loading the extension. Please check the server logs.")
    );
    assert_eq!(
        c.cmd(&["MODULE", "UNLOAD", "foo"]),
        err("ERR Error unloading module: no such module with that name")
    );
}

#[test]
fn unsupported_features_are_refused() {
    if is_real_redis() {
        return;
    }
    let out = std::process::Command::new(cinnabar_tests::server_bin())
        .args(["--port", &cinnabar_tests::free_port().to_string()])
        .args(["--syslog-enabled", "yes"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8_lossy(&out.stderr);
    assert!(
        text.contains("*** FATAL CONFIG FILE ERROR (Redis 7.0.15) ***"),
        "{text}"
    );
    assert!(text.contains("not supported by this server"), "{text}");
    // A TLS bus without certificates does not start, in Redis's words.
    let dir = TempDir::new("tls-cluster");
    let out = std::process::Command::new(cinnabar_tests::server_bin())
        .args(["--port", &cinnabar_tests::free_port().to_string()])
        .args([
            "--cluster-enabled",
            "yes",
            "--tls-cluster",
            "yes",
            "--dir",
            dir.dir(),
        ])
        .output()
        .unwrap();
    assert_ne!(out.status.code(), Some(0));
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("No tls-cert-file configured!"), "{text}");
}

#[test]
fn supervised_upstart_stops_itself_when_ready() {
    let dir = TempDir::new("upstart");
    let port = cinnabar_tests::free_port();
    let conf = debian_conf(&dir, port, "supervised auto");
    let mut child = std::process::Command::new(cinnabar_tests::server_bin())
        .arg(&conf)
        .env("UPSTART_JOB", "redis")
        .env_remove("NOTIFY_SOCKET")
        .stdin(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let pid = child.id();
    // Upstart waits for the SIGSTOP, then continues the job.
    wait_for("the job to stop itself", || {
        std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
            s.rsplit(')')
                .next()
                .is_some_and(|r| r.trim_start().starts_with('T'))
        })
    });
    let status = std::process::Command::new("kill")
        .args(["-CONT", &pid.to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let mut c = cinnabar_tests::RawClient::connect(port);
    assert_eq!(c.cmd(&["PING"]), simple("PONG"));
    c.send_cmd(&["SHUTDOWN", "NOSAVE"]);
    c.expect_closed();
    assert!(child.wait().unwrap().success());
}

/// Immutable numeric options are checked against 7.0.15's ranges at
/// start-up, in its words (`databases 0` was accepted).
#[test]
fn immutable_options_out_of_range_are_refused() {
    for (opt, value, range) in [
        ("databases", "0", "between 1 and 2147483647"),
        ("cluster-port", "65536", "between 0 and 65535"),
        ("tcp-backlog", "-1", "between 0 and 2147483647"),
        ("socket-mark-id", "-1", "between 0 and 4294967295"),
    ] {
        let out = std::process::Command::new(cinnabar_tests::server_bin())
            .args(["--port", &cinnabar_tests::free_port().to_string()])
            .args([&format!("--{opt}"), value])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1), "{opt} {value}");
        let text = String::from_utf8_lossy(&out.stderr);
        assert!(
            text.contains(&format!("argument must be {range} inclusive")),
            "{opt} {value}: {text}"
        );
    }
}
