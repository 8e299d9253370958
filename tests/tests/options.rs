//! Options whose effect no feature's own file observes (issue 28: every
//! implemented option has a test that sees it work, not only CONFIG GET
//! echo it). Each test holds on cinnabar and on redis-server 7.0.15.

use cinnabar_tests::{bulk, err, int, ok, text, wait_for, RawClient, RespFrame, Server, TempDir};
use std::time::Duration;

fn info_int(c: &mut RawClient, section: &str, field: &str) -> i64 {
    cinnabar_tests::info_int(c, section, field)
}

/// `timeout`: a client idle past it is closed by the cron; a client
/// blocked in BLPOP is not idle and stays until served.
#[test]
fn timeout_closes_idle_clients_but_not_blocked_ones() {
    let s = Server::start(&[("timeout", "1")]);
    let mut blocked = s.raw();
    blocked.send_cmd(&["BLPOP", "queue", "0"]);
    // An idle client that saw the cron close it, twice over, leaves no
    // doubt that the cron has passed the blocked one too.
    for _ in 0..2 {
        let mut idle = s.raw();
        assert_eq!(idle.cmd(&["PING"]), RespFrame::Simple("PONG".into()));
        idle.set_timeout(Duration::from_secs(15));
        idle.expect_closed();
    }
    let mut admin = s.raw();
    assert_eq!(admin.cmd(&["RPUSH", "queue", "job"]), int(1));
    assert_eq!(
        blocked.read(),
        RespFrame::Array(vec![
            RespFrame::Bulk("queue".into()),
            RespFrame::Bulk("job".into())
        ])
    );
}

/// `databases`: SELECT reaches the last database and no further.
#[test]
fn databases_bounds_select_and_swapdb() {
    let s = Server::start(&[("databases", "4")]);
    let mut c = s.raw();
    assert_eq!(c.cmd(&["SELECT", "3"]), ok());
    assert_eq!(c.cmd(&["SELECT", "4"]), err("ERR DB index is out of range"));
    assert_eq!(
        c.cmd(&["SWAPDB", "0", "4"]),
        err("ERR DB index is out of range")
    );
    assert_eq!(
        c.cmd(&["MOVE", "k", "4"]),
        err("ERR DB index is out of range")
    );
}

/// `loglevel`: a notice (SAVE's "DB saved on disk") is left out under
/// `warning` and written once CONFIG SET lowers the level; start-up's
/// warnings ("Server initialized") are written under `warning` too.
#[test]
fn loglevel_decides_which_lines_are_written() {
    let s = Server::start(&[("loglevel", "warning")]);
    let mut c = s.raw();
    let log = s.log();
    assert!(log.contains(" # Server initialized"), "{log}");
    assert!(!log.contains("Ready to accept connections"), "{log}");
    assert_eq!(c.cmd(&["SET", "k", "v"]), ok());
    assert_eq!(c.cmd(&["SAVE"]), ok());
    assert!(!s.log().contains("DB saved on disk"), "{}", s.log());
    assert_eq!(c.cmd(&["CONFIG", "SET", "loglevel", "notice"]), ok());
    assert_eq!(c.cmd(&["SAVE"]), ok());
    wait_for("the notice in the log", || {
        s.log().contains("DB saved on disk")
    });
}

/// `logfile`: the log goes to that file instead of standard output.
#[test]
fn logfile_receives_the_log() {
    let d = TempDir::new("logfile");
    let file = d.path().join("server.log");
    let s = Server::start(&[("logfile", file.to_str().unwrap())]);
    wait_for("the log file", || {
        std::fs::read_to_string(&file).is_ok_and(|t| t.contains("Ready to accept connections"))
    });
    assert!(!s.log().contains("Ready to accept connections"));
}

/// `enable-debug-command no` (the default) refuses DEBUG.
#[test]
fn enable_debug_command_no_refuses_debug() {
    let s = Server::start(&[("enable-debug-command", "no")]);
    let mut c = s.raw();
    assert_eq!(
        c.cmd(&["DEBUG", "SLEEP", "0"]),
        err("ERR DEBUG command not allowed. If the enable-debug-command option is set to \"local\", you can run it from a local connection, otherwise you need to set this option in the configuration file, and then restart the server.")
    );
    let on = Server::start(&[("enable-debug-command", "yes")]);
    assert_eq!(on.raw().cmd(&["DEBUG", "SLEEP", "0"]), ok());
}

/// `tcp-backlog` is the listening socket's queue, which `ss` shows as
/// its Send-Q.
#[test]
fn tcp_backlog_is_the_listen_queue() {
    let s = Server::start(&[("tcp-backlog", "37")]);
    let out = std::process::Command::new("ss")
        .args(["-ltnH", &format!("sport = :{}", s.port)])
        .output()
        .expect("ss (iproute2) runs");
    let table = String::from_utf8_lossy(&out.stdout);
    let queues: Vec<&str> = table
        .lines()
        .filter_map(|l| l.split_whitespace().nth(2))
        .collect();
    assert_eq!(queues, ["37"], "{table}");
}

/// `lfu-log-factor 0` makes every access count, so ten reads take a new
/// key's counter from 5 to 15; the default factor of 10 makes each step
/// past the first ever less likely.
#[test]
fn lfu_log_factor_sets_how_fast_the_counter_grows() {
    for (factor, exactly_fifteen) in [("0", true), ("10", false)] {
        let s = Server::start(&[
            ("maxmemory-policy", "allkeys-lfu"),
            ("lfu-log-factor", factor),
        ]);
        let mut c = s.raw();
        assert_eq!(c.cmd(&["SET", "k", "v"]), ok());
        for _ in 0..10 {
            assert_eq!(c.cmd(&["GET", "k"]), RespFrame::Bulk("v".into()));
        }
        let freq = match c.cmd(&["OBJECT", "FREQ", "k"]) {
            RespFrame::Integer(n) => n,
            f => panic!("{f:?}"),
        };
        // With factor 10 the chance of ten steps is below 1e-12.
        assert_eq!(freq == 15, exactly_fifteen, "factor {factor}: {freq}");
        assert!((6..=15).contains(&freq), "factor {factor}: {freq}");
    }
}

/// A set too large to free under the lock (a hash table of 200 members).
fn big_set(c: &mut RawClient, key: &str) {
    let mut args = vec!["SADD".to_string(), key.to_string()];
    args.extend((0..200).map(|i| format!("member{i}")));
    assert_eq!(c.cmd(&args), int(200));
}

fn wait_lazyfreed(c: &mut RawClient, want: i64, what: &str) {
    wait_for(what, || {
        info_int(c, "memory", "lazyfree_pending_objects") == 0
            && info_int(c, "memory", "lazyfreed_objects") >= want
    });
    assert_eq!(info_int(c, "memory", "lazyfreed_objects"), want, "{what}");
}

/// The lazyfree-lazy-* options send a large value (or a flushed
/// database) to the lazy-free thread, which INFO memory's
/// `lazyfreed_objects` counts; with the option off the same deletion is
/// freed in place and counts nothing.
#[test]
fn lazyfree_options_free_in_the_background() {
    type Delete = fn(&mut RawClient);
    let cases: [(&str, Delete, i64); 4] = [
        (
            "lazyfree-lazy-user-del",
            |c| {
                big_set(c, "big");
                assert_eq!(c.cmd(&["DEL", "big"]), int(1));
            },
            1,
        ),
        (
            "lazyfree-lazy-server-del",
            |c| {
                // The first round's RENAME and SET left strings.
                c.cmd(&["DEL", "big", "big2"]);
                big_set(c, "big");
                assert_eq!(c.cmd(&["SET", "src", "v"]), ok());
                assert_eq!(c.cmd(&["RENAME", "src", "big"]), ok());
                big_set(c, "big2");
                assert_eq!(c.cmd(&["SET", "big2", "v"]), ok());
            },
            2,
        ),
        (
            // An expiry set in the past, and one that comes (the key goes
            // by active or by lazy expiry, freed the same way).
            "lazyfree-lazy-expire",
            |c| {
                big_set(c, "big");
                assert_eq!(c.cmd(&["PEXPIREAT", "big", "1"]), int(1));
                big_set(c, "big2");
                assert_eq!(c.cmd(&["PEXPIRE", "big2", "1"]), int(1));
                wait_for("big2 to expire", || c.cmd(&["EXISTS", "big2"]) == int(0));
            },
            2,
        ),
        (
            // A flush hands over the whole table and counts its keys,
            // however small they are.
            "lazyfree-lazy-user-flush",
            |c| {
                for k in ["a", "b", "c"] {
                    assert_eq!(c.cmd(&["SET", k, "v"]), ok());
                }
                assert_eq!(c.cmd(&["FLUSHALL"]), ok());
            },
            3,
        ),
    ];
    for (option, delete, objects) in cases {
        let s = Server::start(&[(option, "no")]);
        let mut c = s.raw();
        delete(&mut c);
        wait_lazyfreed(&mut c, 0, &format!("{option} no"));
        assert_eq!(c.cmd(&["CONFIG", "SET", option, "yes"]), ok());
        delete(&mut c);
        wait_lazyfreed(&mut c, objects, &format!("{option} yes"));
    }
}

/// `slowlog-max-len` keeps the newest entries only.
#[test]
fn slowlog_max_len_keeps_the_newest_entries() {
    let s = Server::start(&[("slowlog-log-slower-than", "0"), ("slowlog-max-len", "3")]);
    let mut c = s.raw();
    for i in 0..10 {
        assert_eq!(c.cmd(&["SET", &format!("k{i}"), "v"]), ok());
    }
    assert_eq!(c.cmd(&["SLOWLOG", "LEN"]), int(3));
    let kept = text(&c.cmd(&["SLOWLOG", "GET", "10"]));
    assert!(kept.contains("k9") && !kept.contains("k0"), "{kept}");
    // A long argument is kept to its first 128 bytes, as they are.
    let long = vec![0xffu8; 130];
    assert_eq!(c.cmd(&[&b"SET"[..], b"bin", &long]), ok());
    let RespFrame::Array(entries) = c.cmd(&["SLOWLOG", "GET", "2"]) else {
        panic!("SLOWLOG GET")
    };
    let RespFrame::Array(entry) = &entries[0] else {
        panic!("{entries:?}")
    };
    let mut want = vec![0xffu8; 128];
    want.extend_from_slice(b"... (2 more bytes)");
    assert_eq!(
        entry[3],
        RespFrame::Array(vec![bulk("SET"), bulk("bin"), bulk(want)])
    );
}

/// `shutdown-on-sigint nosave`: SIGINT ends the server without the save
/// its save points would make; by default the final save is written.
#[test]
fn shutdown_on_sigint_decides_the_final_save() {
    for (flags, saved) in [("default", true), ("nosave", false)] {
        let mut s = Server::start(&[("save", "900 1"), ("shutdown-on-sigint", flags)]);
        assert_eq!(s.raw().cmd(&["SET", "k", "v"]), ok());
        let killed = std::process::Command::new("kill")
            .args(["-INT", &s.pid().to_string()])
            .status()
            .unwrap();
        assert!(killed.success());
        wait_for("the server to exit", || !s.alive());
        assert_eq!(s.dir.join("dump.rdb").exists(), saved, "{flags}");
    }
}

/// `cluster-config-file` is where a cluster node keeps its nodes table.
#[test]
fn cluster_config_file_names_the_nodes_file() {
    let s = Server::start(&[
        ("cluster-enabled", "yes"),
        ("cluster-config-file", "mynodes.conf"),
    ]);
    let path = s.dir.join("mynodes.conf");
    wait_for("the nodes file", || {
        std::fs::read_to_string(&path).is_ok_and(|t| t.contains("myself"))
    });
    assert!(!s.dir.join("nodes.conf").exists());
}

fn unix_s() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

/// `lfu-decay-time`: OBJECT FREQ loses one per that many turns of the
/// (wall-clock) minute since the key's last access; 0 never decays. OBJECT
/// FREQ is no access, so the same idle key is read under each setting.
/// Waits for the minute to turn (up to a minute).
#[test]
fn lfu_decay_time_decays_the_counter_per_minute() {
    let s = Server::start(&[("maxmemory-policy", "allkeys-lfu")]);
    let mut c = s.raw();
    // The server's clock may lag its second by a cron tick: the minute it
    // stamped is that of a moment within these bounds.
    let before = unix_s().saturating_sub(1) / 60;
    assert_eq!(c.cmd(&["SET", "k", "v"]), ok());
    let after = unix_s() / 60;
    // Longer than `wait_for` waits.
    while unix_s().saturating_sub(1) / 60 <= after {
        std::thread::sleep(Duration::from_millis(200));
    }
    let freq = |c: &mut RawClient, decay: &str| {
        assert_eq!(c.cmd(&["CONFIG", "SET", "lfu-decay-time", decay]), ok());
        match c.cmd(&["OBJECT", "FREQ", "k"]) {
            RespFrame::Integer(n) => n,
            f => panic!("{f:?}"),
        }
    };
    let now_before = unix_s().saturating_sub(1) / 60;
    let decayed = freq(&mut c, "1");
    let now_after = unix_s() / 60;
    let turns = (now_before - after) as i64..=(now_after - before) as i64;
    assert!(turns.contains(&(5 - decayed)), "{decayed} after {turns:?}");
    assert_eq!(freq(&mut c, "0"), 5);
    assert_eq!(freq(&mut c, "1000"), 5);
}

/// `repl-backlog-ttl`: the backlog a replica made the master create is
/// freed that many seconds after the last replica left, with a new
/// replication ID.
#[test]
fn repl_backlog_ttl_frees_the_backlog_without_replicas() {
    let s = Server::start(&[("repl-backlog-ttl", "1")]);
    let mut c = s.raw();
    let field = |c: &mut RawClient, f: &str| cinnabar_tests::info_field(c, "replication", f);
    assert_eq!(field(&mut c, "repl_backlog_active"), "0");
    let replica = s.sync_replica();
    assert_eq!(field(&mut c, "repl_backlog_active"), "1");
    let id = field(&mut c, "master_replid");
    drop(replica);
    wait_for("the backlog to be freed", || {
        field(&mut c, "repl_backlog_active") == "0"
    });
    assert_ne!(field(&mut c, "master_replid"), id);
    assert!(s
        .log()
        .contains("Replication backlog freed after 1 seconds without connected replicas."));
}

/// `disable-thp`: `yes` turns transparent huge pages off for the process
/// (PR_SET_THP_DISABLE, shown as `THP_enabled: 0` in /proc/<pid>/status)
/// where the kernel's mode is `always`; Redis leaves them on under
/// `madvise`, where jemalloc asks for none, but cinnabar's allocator
/// (mimalloc) asks for them, so it turns them off there too.
#[test]
fn disable_thp_turns_huge_pages_off_for_the_process() {
    let mode = std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled")
        .expect("a Linux kernel with transparent huge pages");
    for (option, off) in [
        ("no", false),
        (
            "yes",
            mode.contains("[always]")
                || (mode.contains("[madvise]") && !cinnabar_tests::is_real_redis()),
        ),
    ] {
        let s = Server::start(&[("disable-thp", option)]);
        let status = std::fs::read_to_string(format!("/proc/{}/status", s.pid())).unwrap();
        let want = format!("THP_enabled:\t{}", if off { 0 } else { 1 });
        assert!(status.contains(&want), "{option} ({mode}): {status}");
    }
}

/// The syscalls named in `calls` that the server makes while `during`
/// runs, counted by strace attached to each of its threads (and the ones
/// they start).
fn syscalls_during(s: &Server, calls: &str, during: impl FnOnce()) -> Vec<String> {
    use std::io::BufRead;
    let strace = cinnabar_tests::tool("strace").expect("strace");
    let tasks = |pid: u32| -> Vec<String> {
        std::fs::read_dir(format!("/proc/{pid}/task"))
            .map(|d| {
                d.flatten()
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default()
    };
    let out = s.dir.join("strace.out");
    let threads = tasks(s.pid());
    let mut tracer = std::process::Command::new(strace)
        .args(["-f", "-e", &format!("trace={calls}"), "-o"])
        .arg(&out)
        .args(["-p", &s.pid().to_string()])
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run strace");
    let mut said = std::io::BufReader::new(tracer.stderr.take().unwrap()).lines();
    // strace 6 attaches all threads and says "... attached with N
    // threads"; older ones say "Process TID attached" for each.
    let mut attached = Vec::new();
    while threads
        .iter()
        .any(|t| !attached.contains(t) && tasks(s.pid()).contains(t))
    {
        let line = said
            .next()
            .expect("strace attaches (ptrace allowed?)")
            .unwrap();
        if line.contains(" attached with ") {
            break;
        }
        let tid = line
            .split("Process ")
            .nth(1)
            .and_then(|l| l.strip_suffix(" attached"));
        assert!(tid.is_some(), "strace: {line}");
        attached.extend(tid.map(str::to_string));
    }
    during();
    // SIGTERM: strace detaches and writes out what it saw.
    std::process::Command::new("kill")
        .arg(tracer.id().to_string())
        .status()
        .unwrap();
    tracer.wait().unwrap();
    std::fs::read_to_string(&out)
        .unwrap()
        .lines()
        .filter(|l| calls.split(',').any(|c| l.contains(&format!("{c}("))))
        .map(str::to_string)
        .collect()
}

/// `no-appendfsync-on-rewrite yes`: under `appendfsync always` the writes
/// made while an AOF rewrite or a BGSAVE runs are not fsynced (Redis holds
/// fsyncs while it has a child); with `no` each one is.
#[test]
fn no_appendfsync_on_rewrite_holds_fsyncs_while_a_snapshot_runs() {
    for (hold, job, field) in [
        ("yes", "BGREWRITEAOF", "aof_rewrite_in_progress"),
        ("yes", "BGSAVE", "rdb_bgsave_in_progress"),
        ("no", "BGREWRITEAOF", "aof_rewrite_in_progress"),
    ] {
        let s = Server::start(&[
            ("appendonly", "yes"),
            ("appendfsync", "always"),
            ("no-appendfsync-on-rewrite", hold),
            // A second per key: the snapshot of 20 keys outlasts the test.
            ("rdb-key-save-delay", "1000000"),
        ]);
        let mut c = s.raw();
        for i in 0..20 {
            assert_eq!(c.cmd(&["SET", &format!("k{i}"), "v"]), ok());
        }
        wait_for("the initial rewrite to end", || {
            info_int(&mut c, "persistence", "aof_rewrite_in_progress") == 0
        });
        assert!(matches!(c.cmd(&[job]), RespFrame::Simple(_)));
        wait_for("the snapshot", || {
            info_int(&mut c, "persistence", field) == 1
        });
        let syncs = syscalls_during(&s, "fsync,fdatasync", || {
            for i in 0..5 {
                assert_eq!(c.cmd(&["SET", &format!("x{i}"), "v"]), ok());
            }
        });
        assert_eq!(
            info_int(&mut c, "persistence", field),
            1,
            "{job}: still running"
        );
        if hold == "yes" {
            assert!(syncs.is_empty(), "{job}: {syncs:?}");
        } else {
            assert!(syncs.len() >= 5, "{job}: {syncs:?}");
        }
    }
}

/// `maxmemory` set below what is in use: the log says so, as Redis's does.
#[test]
fn maxmemory_below_the_usage_is_logged() {
    let s = Server::start(&[("enable-debug-command", "yes")]);
    let mut c = s.raw();
    assert_eq!(c.cmd(&["DEBUG", "POPULATE", "10000"]), ok());
    assert_eq!(c.cmd(&["CONFIG", "SET", "maxmemory", "100000"]), ok());
    assert_eq!(c.cmd(&["CONFIG", "SET", "maxmemory", "0"]), ok());
    wait_for("the warning in the log", || {
        s.log().contains(
            " # WARNING: the new maxmemory value set via CONFIG SET (100000) is smaller than the current memory usage (",
        )
    });
}
