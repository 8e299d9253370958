//! CONFIG SET of options Redis applies live to the listeners.

use cinnabar_tests::*;

#[test]
fn config_set_port_rebinds_and_refuses_a_busy_port() {
    let s = Server::start(&[]);
    let mut c = s.raw();
    // A port someone else listens on: refused, old port still served.
    let busy = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let busy_port = busy.local_addr().unwrap().port().to_string();
    assert_eq!(
        c.cmd(&["CONFIG", "SET", "port", &busy_port]),
        err("ERR CONFIG SET failed (possibly related to argument 'port') - Unable to listen on this port. Check server logs.")
    );
    assert_eq!(c.cmd(&["PING"]), simple("PONG"));
    assert_eq!(
        c.cmd(&["CONFIG", "SET", "bind", "192.0.2.1"]),
        err("ERR CONFIG SET failed (possibly related to argument 'bind') - Failed to bind to specified addresses.")
    );
    // A free port: new connections go there, the old port is closed, and
    // the connection that asked keeps working.
    let new_port = free_port();
    assert_eq!(
        c.cmd(&["CONFIG", "SET", "port", &new_port.to_string()]),
        ok()
    );
    assert_eq!(RawClient::connect(new_port).cmd(&["PING"]), simple("PONG"));
    // The old accept loop is stopped asynchronously: allow it a moment.
    let closed = (0..100).any(|_| {
        std::thread::sleep(std::time::Duration::from_millis(10));
        std::net::TcpStream::connect(("127.0.0.1", s.port)).is_err()
    });
    assert!(closed, "old port still accepts");
    assert_eq!(
        c.cmd(&["CONFIG", "GET", "port"]),
        RespFrame::Array(vec![bulk("port"), bulk(new_port.to_string())])
    );
}

/// INFO latencystats: a line per command run, with the configured
/// percentiles in Redis's format; `latency-tracking no` stops recording.
#[test]
fn latencystats_follow_latency_tracking() {
    let s = Server::start(&[]);
    let mut c = s.raw();
    let info = |c: &mut RawClient| text(&c.cmd(&["INFO", "latencystats"]));
    assert_eq!(c.cmd(&["SET", "k", "v"]), ok());
    let line = info(&mut c)
        .lines()
        .find(|l| l.starts_with("latency_percentiles_usec_set:"))
        .expect("set has a line")
        .to_string();
    let fields: Vec<&str> = line.split(':').nth(1).unwrap().split(',').collect();
    assert_eq!(fields.len(), 3, "{line}");
    for (f, p) in fields.iter().zip(["p50=", "p99=", "p99.9="]) {
        let v = f.strip_prefix(p).expect(p);
        assert!(v.parse::<f64>().unwrap() > 0.0 && v.split('.').nth(1).unwrap().len() == 3);
    }
    c.cmd(&[
        "CONFIG",
        "SET",
        "latency-tracking-info-percentiles",
        "10 100",
    ]);
    assert!(info(&mut c).contains("latency_percentiles_usec_set:p10="));
    // A slow call is measured as slow (the buckets grow to it).
    let s2 = Server::start(&[("enable-debug-command", "yes")]);
    let mut d = s2.raw();
    d.cmd(&["DEBUG", "SLEEP", "0.05"]);
    let line = info(&mut d);
    let p50 = line
        .lines()
        .find_map(|l| l.strip_prefix("latency_percentiles_usec_debug:p50="))
        .and_then(|v| v.split(',').next())
        .and_then(|v| v.parse::<f64>().ok())
        .expect("debug's p50");
    assert!(p50 >= 50000.0, "{line}");
    c.cmd(&["CONFIG", "RESETSTAT"]);
    c.cmd(&["CONFIG", "SET", "latency-tracking", "no"]);
    assert_eq!(c.cmd(&["GET", "k"]), bulk("v"));
    assert!(!info(&mut c).contains("latency_percentiles_usec_get"));
}

/// The immutable options with three or more choices take them all, as
/// Redis 7.0.15 does (`local`: from loopback connections only).
#[test]
fn immutable_enum_options_take_their_choices() {
    let s = Server::start(&[
        ("enable-debug-command", "local"),
        ("enable-protected-configs", "local"),
        ("enable-module-command", "local"),
    ]);
    let mut c = s.raw();
    assert_eq!(c.cmd(&["DEBUG", "SLEEP", "0"]), ok());
    assert_eq!(
        c.cmd(&["CONFIG", "GET", "enable-debug-command"]),
        RespFrame::Array(vec![bulk("enable-debug-command"), bulk("local")])
    );
    // Protected, not immutable: settable once allowed.
    let dir = TempDir::new("protected");
    assert_eq!(c.cmd(&["CONFIG", "SET", "dir", dir.dir()]), ok());
    assert_eq!(c.cmd(&["CONFIG", "SET", "dbfilename", "other.rdb"]), ok());
    let plain = Server::start(&[]);
    let mut d = plain.raw();
    assert_eq!(
        d.cmd(&["CONFIG", "SET", "dir", dir.dir()]),
        err("ERR CONFIG SET failed (possibly related to argument 'dir') - can't set protected config")
    );
    let out = std::process::Command::new(server_bin())
        .args(["--port", "0", "--enable-debug-command", "sometimes"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let text =
        String::from_utf8_lossy(&out.stderr).to_string() + &String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("argument(s) must be one of the following: no, yes, local"),
        "{text}"
    );
}

/// `oom-score-adj`: relative to the score found when turned on, or
/// absolute; restored when turned off; a value the kernel refuses fails
/// CONFIG SET and keeps the old values.
#[test]
fn oom_score_adj_sets_the_process_score() {
    let s = Server::start(&[]);
    let mut c = s.raw();
    let path = format!("/proc/{}/oom_score_adj", s.pid());
    let score = || -> i64 {
        std::fs::read_to_string(&path)
            .unwrap()
            .trim()
            .parse()
            .unwrap()
    };
    std::fs::write(&path, "22").unwrap();
    assert_eq!(
        c.cmd(&["CONFIG", "SET", "oom-score-adj-values", "9 20 30"]),
        ok()
    );
    assert_eq!(score(), 22, "untouched while off");
    assert_eq!(c.cmd(&["CONFIG", "SET", "oom-score-adj", "yes"]), ok());
    assert_eq!(score(), 31);
    assert_eq!(c.cmd(&["CONFIG", "SET", "oom-score-adj", "absolute"]), ok());
    assert_eq!(score(), 9);
    assert_eq!(
        c.cmd(&["CONFIG", "SET", "oom-score-adj-values", "1500 0 0"]),
        ok()
    );
    assert_eq!(score(), 1000, "clamped");
    assert_eq!(c.cmd(&["CONFIG", "SET", "oom-score-adj", "no"]), ok());
    assert_eq!(score(), 22, "restored");
    assert_eq!(
        c.cmd(&["CONFIG", "SET", "oom-score-adj-values", "-2001 0 0"]),
        err("ERR CONFIG SET failed (possibly related to argument 'oom-score-adj-values') - Invalid oom-score-adj-values, elements must be between -2000 and 2000.")
    );
    assert_eq!(
        c.cmd(&["CONFIG", "SET", "oom-score-adj", "maybe"]),
        err("ERR CONFIG SET failed (possibly related to argument 'oom-score-adj') - argument(s) must be one of the following: no, yes, relative, absolute")
    );
}

/// Starts the server on `conf` (which sets `port`); waits until it listens.
fn start_with_conf(conf: &std::path::Path, port: u16) -> std::process::Child {
    let child = std::process::Command::new(server_bin())
        .arg(conf)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while RawClient::try_connect(port).is_err() {
        assert!(std::time::Instant::now() < deadline, "server not listening");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    child
}

/// CONFIG GET * as sorted (name, value) pairs.
fn all_config(c: &mut RawClient) -> Vec<(String, String)> {
    let cinnabar_tests::RespFrame::Array(kv) = c.cmd(&["CONFIG", "GET", "*"]) else {
        panic!("CONFIG GET * is not an array");
    };
    let mut pairs: Vec<_> = kv.chunks(2).map(|p| (text(&p[0]), text(&p[1]))).collect();
    pairs.sort();
    pairs
}

/// `shutdown-on-sigint`/`shutdown-on-sigterm` take a set of SHUTDOWN's
/// flags, shown in Redis's order.
#[test]
fn shutdown_on_signal_options_take_flags() {
    let s = Server::start(&[]);
    let mut c = s.raw();
    for (set, shown) in [
        ("now nosave", "nosave now"),
        ("force now save", "save now force"),
        ("NOW now", "now"),
        ("default force", "force"),
        ("default", "default"),
    ] {
        assert_eq!(
            c.cmd(&["CONFIG", "SET", "shutdown-on-sigterm", set]),
            ok(),
            "{set}"
        );
        let cinnabar_tests::RespFrame::Array(v) = c.cmd(&["CONFIG", "GET", "shutdown-on-sigterm"])
        else {
            panic!("CONFIG GET is not an array");
        };
        assert_eq!(text(&v[1]), shown, "{set}");
    }
    assert_eq!(
        c.cmd(&["CONFIG", "SET", "shutdown-on-sigint", "save nosave"]),
        err("ERR CONFIG SET failed (possibly related to argument 'shutdown-on-sigint') - shutdown options SAVE and NOSAVE can't be used simultaneously")
    );
    for bad in ["", "later"] {
        assert_eq!(
            c.cmd(&["CONFIG", "SET", "shutdown-on-sigint", bad]),
            err("ERR CONFIG SET failed (possibly related to argument 'shutdown-on-sigint') - argument(s) must be one of the following: default, save, nosave, now, force")
        );
    }
}

/// DEBUG CONFIG-REWRITE-FORCE-ALL writes every option to the config file,
/// defaults included; a server started from it has the same configuration.
#[test]
fn config_rewrite_force_all_round_trips() {
    let dir = TempDir::new("forceall");
    let port = free_port();
    let conf = dir.path().join("redis.conf");
    let lines = format!(
        "port {port}\nbind 127.0.0.1\nsave \"\"\nenable-debug-command yes\ndir {}\n",
        dir.dir()
    );
    std::fs::write(&conf, lines).unwrap();
    let mut child = start_with_conf(&conf, port);
    let mut c = RawClient::connect(port);
    assert_eq!(
        c.cmd(&["CONFIG", "SET", "shutdown-on-sigterm", "nosave now"]),
        ok()
    );
    let before = all_config(&mut c);
    assert_eq!(c.cmd(&["DEBUG", "CONFIG-REWRITE-FORCE-ALL"]), ok());
    let written = std::fs::read_to_string(&conf).unwrap();
    for line in [
        "shutdown-on-sigterm nosave now",
        "maxmemory-policy noeviction",
        "hz 10",
    ] {
        assert!(
            written.lines().any(|l| l == line),
            "{line} missing:\n{written}"
        );
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let mut child = start_with_conf(&conf, port);
    let mut c = RawClient::connect(port);
    assert_eq!(all_config(&mut c), before);
    child.kill().unwrap();
    child.wait().unwrap();
    // Without a config file, Redis reports the NULL path's errno.
    let s = Server::start(&[("enable-debug-command", "yes")]);
    assert_eq!(
        s.raw().cmd(&["DEBUG", "CONFIG-REWRITE-FORCE-ALL"]),
        err("ERR CONFIG-REWRITE-FORCE-ALL failed: Bad address")
    );
}

/// The server's output when it refuses `args`.
fn refused_args(args: &[&str]) -> String {
    let out = std::process::Command::new(server_bin())
        .args(args)
        .output()
        .unwrap();
    assert!(!out.status.success(), "{args:?} started");
    String::from_utf8_lossy(&out.stderr).to_string() + &String::from_utf8_lossy(&out.stdout)
}

/// Command-line options as redis-server reads them: a `--word` right after
/// an option name without a value is that value, `--name value` in one
/// argument is a whole line, `--save` without a value is `save ""`, and
/// `replicaof` takes a host and a port.
#[test]
fn command_line_options_as_redis_reads_them() {
    for (args, want) in [
        (&["--port"][..], ">>> 'port'\nwrong number of arguments"),
        (
            &["--port", "--loglevel", "verbose"],
            ">>> 'port \"--loglevel\" \"verbose\"'\nwrong number of arguments",
        ),
        (
            &["--port", "--bla", "--loglevel", "verbose"],
            ">>> 'port \"--bla\"'\nargument couldn't be parsed into an integer",
        ),
        (
            &["--shutdown-on-sigint"],
            ">>> 'shutdown-on-sigint'\nargument(s) must be one of the following",
        ),
        (
            &["--replicaof", "127.0.0.1", "abc"],
            ">>> 'replicaof \"127.0.0.1\" \"abc\"'\nInvalid master port",
        ),
        (
            &["--replicaof", "--127.0.0.1", "--abc"],
            ">>> 'replicaof \"--127.0.0.1\"'\nwrong number of arguments",
        ),
    ] {
        let text = refused_args(args);
        assert!(text.contains(want), "{args:?}: {text}");
    }
    let s = Server::start(&[
        ("save", "3600 1"),
        ("proc-title-template", "--my--title"),
        ("shutdown-on-sigint", "nosave force now"),
    ]);
    let mut c = s.raw();
    let get = |c: &mut RawClient, name: &str| match c.cmd(&["CONFIG", "GET", name]) {
        RespFrame::Array(v) => text(&v[1]),
        f => panic!("{f:?}"),
    };
    assert_eq!(get(&mut c, "proc-title-template"), "--my--title");
    assert_eq!(get(&mut c, "shutdown-on-sigint"), "nosave now force");
    let master = Server::start(&[]);
    let replica = Server::start(&[("replicaof", &format!("127.0.0.1 {}", master.port))]);
    let mut r = replica.raw();
    assert_eq!(
        get(&mut r, "replicaof"),
        format!("127.0.0.1 {}", master.port)
    );
}
