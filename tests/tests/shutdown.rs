//! Shutting down as Redis 7.0.15: signals acted on by the cron (so SHUTDOWN
//! ABORT can cancel them), a second SIGINT exiting at once during the final
//! save, a failed final save keeping the server up, `shutdown-on-sigterm`,
//! and the wait for lagging replicas (`shutdown-timeout`) that SHUTDOWN
//! clients block in. A fatal signal's bug report (crash.rs).

use cinnabar_tests::{bulk, is_real_redis, ok, simple, wait_for, RawClient, RespFrame, Server};
use std::process::Command;
use std::time::Duration;

fn cmd(c: &mut RawClient, args: &[&str]) -> RespFrame {
    c.cmd(args)
}

fn signal(pid: u32, sig: &str) {
    let st = Command::new("kill")
        .args([&format!("-{sig}"), &pid.to_string()])
        .status()
        .expect("kill");
    assert!(st.success());
}

fn error_text(f: RespFrame) -> String {
    match f {
        RespFrame::Error(e) => String::from_utf8_lossy(&e).into_owned(),
        other => panic!("expected an error, got {other:?}"),
    }
}

fn info_field(c: &mut RawClient, name: &str) -> Option<String> {
    let RespFrame::Bulk(b) = cmd(c, &["INFO", "everything"]) else {
        panic!("INFO")
    };
    String::from_utf8_lossy(&b)
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{name}:")).map(str::to_string))
}

fn fill(c: &mut RawClient, n: usize) {
    for i in 0..n {
        assert_eq!(cmd(c, &["SET", &i.to_string(), "v"]), ok());
    }
}

#[test]
fn shutdown_abort_cancels_a_signal_not_acted_on_yet() {
    if is_real_redis() {
        return;
    }
    let s = Server::start(&[("enable-debug-command", "yes")]);
    let mut c = s.raw();
    assert_eq!(
        error_text(cmd(&mut c, &["SHUTDOWN", "ABORT"])),
        "ERR No shutdown in progress."
    );
    cmd(&mut c, &["DEBUG", "PAUSE-CRON", "1"]);
    signal(s.pid(), "TERM");
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(cmd(&mut c, &["SHUTDOWN", "ABORT"]), ok());
    cmd(&mut c, &["DEBUG", "PAUSE-CRON", "0"]);
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(cmd(&mut c, &["PING"]), simple("PONG"));
    let log = s.log();
    assert!(log.contains("signal-handler ("), "{log}");
    assert!(
        log.contains("Received SIGTERM scheduling shutdown..."),
        "{log}"
    );
    assert!(log.contains("Shutdown manually aborted."), "{log}");
}

#[test]
fn a_second_sigint_exits_during_the_final_save_and_removes_its_file() {
    if is_real_redis() {
        return;
    }
    let mut s = Server::start(&[("save", "900 1")]);
    let mut c = s.raw();
    fill(&mut c, 20);
    // 20 keys at 100 ms each: the final save takes 2 s.
    cmd(&mut c, &["CONFIG", "SET", "rdb-key-save-delay", "100000"]);
    let temp = s.dir.join(format!("temp-{}.rdb", s.pid()));
    signal(s.pid(), "INT");
    wait_for("the final save's file", || temp.exists());
    signal(s.pid(), "INT");
    wait_for("the exit", || !s.alive());
    assert_eq!(s.exit_code(), Some(1));
    assert!(!temp.exists());
    assert!(s.log().contains("You insist... exiting now."));
}

#[test]
fn a_failed_final_save_keeps_the_server_up() {
    if is_real_redis() {
        return;
    }
    let mut s = Server::start(&[("save", "900 1")]);
    let mut c = s.raw();
    fill(&mut c, 20);
    // The rename over dump.rdb fails.
    std::fs::create_dir(s.dir.join("dump.rdb")).unwrap();
    signal(s.pid(), "INT");
    wait_for("the failed save", || {
        s.log().contains("Error trying to save the DB, can't exit")
    });
    assert_eq!(cmd(&mut c, &["PING"]), simple("PONG"));
    assert_eq!(
        error_text(cmd(&mut c, &["SHUTDOWN"])),
        "ERR Errors trying to SHUTDOWN. Check logs."
    );
    assert_eq!(cmd(&mut c, &["PING"]), simple("PONG"));
    // The failure cancelled the signal's shutdown: nothing to abort.
    assert!(error_text(cmd(&mut c, &["SHUTDOWN", "ABORT"])).contains("No shutdown"));
    c.send_cmd(&["SHUTDOWN", "NOSAVE"]);
    c.expect_closed();
    wait_for("the exit", || !s.alive());
    assert!(s.log().contains("Redis is now ready to exit, bye bye..."));
}

#[test]
fn shutdown_on_sigterm_chooses_the_signal_s_options() {
    if is_real_redis() {
        return;
    }
    let mut s = Server::start(&[("save", "900 1")]);
    let mut c = s.raw();
    fill(&mut c, 3);
    assert_eq!(
        error_text(cmd(&mut c, &["CONFIG", "SET", "shutdown-on-sigterm", "save nosave"])),
        "ERR CONFIG SET failed (possibly related to argument 'shutdown-on-sigterm') - shutdown options SAVE and NOSAVE can't be used simultaneously"
    );
    cmd(
        &mut c,
        &["CONFIG", "SET", "shutdown-on-sigterm", "force nosave"],
    );
    assert_eq!(
        cmd(&mut c, &["CONFIG", "GET", "shutdown-on-sigterm"]),
        RespFrame::Array(vec![bulk("shutdown-on-sigterm"), bulk("nosave force")])
    );
    signal(s.pid(), "TERM");
    wait_for("the exit", || !s.alive());
    assert_eq!(s.exit_code(), Some(0));
    assert!(!s.log().contains("Saving the final RDB snapshot"));
    assert!(!s.dir.join("dump.rdb").exists());
}

/// A master whose one replica is stopped (SIGSTOP) after a write it has
/// not acknowledged.
fn lagging_pair() -> (Server, Server, RawClient) {
    let m = Server::start(&[]);
    let r = Server::start(&[]);
    let mut mc = m.raw();
    let mut rc = r.raw();
    cmd(&mut rc, &["REPLICAOF", "127.0.0.1", &m.port.to_string()]);
    cmd(&mut mc, &["SET", "k", "1"]);
    wait_for("the replica to sync", || {
        cmd(&mut rc, &["GET", "k"]) == bulk("1")
    });
    signal(r.pid(), "STOP");
    cmd(&mut mc, &["INCR", "k"]);
    (m, r, mc)
}

#[test]
fn shutdown_waits_for_a_lagging_replica_until_it_catches_up() {
    if is_real_redis() {
        return;
    }
    let (mut m, r, mut mc) = lagging_pair();
    cmd(&mut mc, &["CONFIG", "SET", "shutdown-timeout", "300"]);
    let mut waiter = m.raw();
    waiter.send_cmd(&["SHUTDOWN"]);
    wait_for("the wait", || {
        info_field(&mut mc, "shutdown_in_milliseconds").is_some()
    });
    assert_eq!(info_field(&mut mc, "blocked_clients").as_deref(), Some("1"));
    // Writes wait meanwhile; reads go on.
    let mut w = m.raw();
    w.send_cmd(&["SET", "x", "1"]);
    w.expect_silence(Duration::from_millis(200));
    assert_eq!(cmd(&mut mc, &["GET", "k"]), bulk("2"));
    signal(r.pid(), "CONT");
    waiter.expect_closed();
    wait_for("the exit", || !m.alive());
    let log = m.log();
    assert!(
        log.contains("Waiting for replicas before shutting down."),
        "{log}"
    );
    assert!(
        log.contains("1 of 1 replicas are in sync when shutting down."),
        "{log}"
    );
    assert!(!log.contains("Lagging replica"), "{log}");
    let mut rc = r.raw();
    assert_eq!(cmd(&mut rc, &["GET", "k"]), bulk("2"));
}

#[test]
fn shutdown_gives_up_on_a_replica_after_the_timeout() {
    if is_real_redis() {
        return;
    }
    let (mut m, r, mut mc) = lagging_pair();
    cmd(&mut mc, &["CONFIG", "SET", "shutdown-timeout", "1"]);
    signal(m.pid(), "TERM");
    wait_for("the exit", || !m.alive());
    signal(r.pid(), "CONT");
    let log = m.log();
    assert!(log.contains("Lagging replica 127.0.0.1:"), "{log}");
    assert!(
        log.contains("0 of 1 replicas are in sync when shutting down."),
        "{log}"
    );
}

#[test]
fn an_aborted_wait_answers_every_blocked_shutdown_with_an_error() {
    if is_real_redis() {
        return;
    }
    let (m, r, mut mc) = lagging_pair();
    let mut a = m.raw();
    let mut b = m.raw();
    a.send_cmd(&["SHUTDOWN"]);
    b.send_cmd(&["SHUTDOWN", "NOSAVE"]);
    wait_for("both to block", || {
        info_field(&mut mc, "blocked_clients").as_deref() == Some("2")
    });
    assert_eq!(cmd(&mut mc, &["SHUTDOWN", "ABORT"]), ok());
    for c in [&mut a, &mut b] {
        assert_eq!(
            error_text(c.read()),
            "ERR Errors trying to SHUTDOWN. Check logs."
        );
    }
    assert_eq!(info_field(&mut mc, "shutdown_in_milliseconds"), None);
    // Writes run again.
    assert_eq!(cmd(&mut mc, &["SET", "y", "1"]), ok());
    signal(r.pid(), "CONT");
    assert!(m.log().contains("Shutdown manually aborted."));
}

#[test]
fn a_fatal_signal_logs_the_bug_report_and_ends_the_process() {
    if is_real_redis() {
        return;
    }
    let mut s = Server::start(&[]);
    let mut c = s.raw();
    cmd(&mut c, &["SET", "k", "v"]);
    signal(s.pid(), "ABRT");
    wait_for("the crash", || !s.alive());
    assert_eq!(s.exit_code(), None, "ended by the signal");
    let log = s.log();
    for part in [
        "=== REDIS BUG REPORT START: Cut & paste starting from here ===",
        "Redis 7.0.15 crashed by signal: 6, si_code: 0",
        "Killed by PID: ",
        "------ STACK TRACE ------",
        "------ INFO OUTPUT ------",
        "db0:keys=1,expires=0",
        "------ CLIENT LIST OUTPUT ------",
        "=== REDIS BUG REPORT END. Make sure to include from START to END. ===",
    ] {
        assert!(log.contains(part), "{part} missing from:\n{log}");
    }
}

#[test]
fn debug_segfault_crashes_with_a_stack_trace_through_the_debug_command() {
    if is_real_redis() {
        return;
    }
    let mut s = Server::start(&[("enable-debug-command", "yes")]);
    let mut c = s.raw();
    c.send_cmd(&["DEBUG", "SEGFAULT"]);
    c.expect_closed();
    wait_for("the crash", || !s.alive());
    let log = s.log();
    assert!(log.contains("crashed by signal: 11, si_code: 2"), "{log}");
    assert!(log.contains("Accessing address: 0x"), "{log}");
    assert!(log.contains("cmd::debug::debug"), "{log}");
    assert!(log.contains("REDIS BUG REPORT END"), "{log}");
}

/// `crash-log-enabled no`: a fatal signal ends the process with nothing
/// logged (no bug report), as Redis's.
#[test]
fn crash_log_enabled_no_ends_without_a_report() {
    let mut s = Server::start(&[("enable-debug-command", "yes"), ("crash-log-enabled", "no")]);
    let mut c = s.raw();
    c.send_cmd(&["DEBUG", "SEGFAULT"]);
    c.expect_closed();
    wait_for("the crash", || !s.alive());
    assert_eq!(s.exit_code(), None, "ended by the signal");
    let log = s.log();
    assert!(!log.contains("BUG REPORT"), "{log}");
    assert!(!log.contains("crashed by signal"), "{log}");
}

/// The watchdog, as Redis's: a command that holds the worker past
/// `watchdog-period` gets the worker's stack trace logged, and the server
/// goes on.
#[test]
fn the_watchdog_logs_the_stalled_workers_stack_trace() {
    if is_real_redis() {
        return;
    }
    let s = Server::start(&[("enable-debug-command", "yes")]);
    let mut c = s.raw();
    assert_eq!(
        cmd(&mut c, &["CONFIG", "SET", "watchdog-period", "200"]),
        ok()
    );
    assert_eq!(cmd(&mut c, &["DEBUG", "SLEEP", "1"]), ok());
    wait_for("the watchdog's report", || {
        s.log().contains("signal-handler")
    });
    let log = s.log();
    let report = &log[log.find("--- WATCHDOG TIMER EXPIRED ---").expect(&log)..];
    assert!(report.contains("------ STACK TRACE ------"), "{report}");
    assert!(report.contains("std::thread::functions::sleep"), "{report}");
    assert!(report.contains("cmd::debug::debug"), "{report}");
    assert!(!report.contains("on_watchdog_signal"), "{report}");
    assert_eq!(
        cmd(&mut c, &["CONFIG", "SET", "watchdog-period", "0"]),
        ok()
    );
    assert_eq!(cmd(&mut c, &["PING"]), simple("PONG"));
}

/// Once SHUTDOWN has closed its client's connection, nobody can connect:
/// the listeners stop first, as when Redis exits (a client reconnecting at
/// once was accepted, even served, while the process wound down). Also
/// when SHUTDOWN NOSAVE ends a busy script.
#[test]
fn after_shutdown_new_connections_are_refused() {
    for busy in [false, true] {
        let s = Server::start(&[("busy-reply-threshold", "10")]);
        let addr = s.addr();
        if busy {
            let mut script = s.raw();
            script.send_cmd(&["EVAL", "while true do end", "0"]);
            let mut c = s.raw();
            wait_for("the script to be busy", || {
                matches!(cmd(&mut c, &["PING"]), RespFrame::Error(_))
            });
        }
        let mut c = s.raw();
        c.send_cmd(&["SHUTDOWN", "NOSAVE"]);
        assert!(c.try_read().is_err(), "SHUTDOWN answered");
        let again = std::net::TcpStream::connect(&addr);
        assert!(again.is_err(), "connected after SHUTDOWN (busy: {busy})");
    }
}
