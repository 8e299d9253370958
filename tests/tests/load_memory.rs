//! A load holds the dataset, not the image beside it: at start-up, on
//! DEBUG RELOAD and on a replica (the master's RDB written to disk as it
//! arrives, or parsed from the socket), the peak resident memory stays
//! within a few MB of what the loaded keys take, as Redis's does.

use cinnabar_tests::{int, wait_for, RawClient, Server, TempDir};

const MB: usize = 1 << 20;
const VALUES: usize = 40;
/// What a load may hold beyond its keys (the image is 40 MB).
const SLACK_KB: u64 = 16 * 1024;

/// 1 MB values LZF cannot shrink.
fn fill(c: &mut RawClient) {
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    for i in 0..VALUES {
        let v: Vec<u8> = (0..MB)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect();
        c.cmd(&[b"SET".as_slice(), format!("k{i}").as_bytes(), &v]);
    }
}

fn status_kb(s: &Server, field: &str) -> u64 {
    let text = std::fs::read_to_string(format!("/proc/{}/status", s.pid())).unwrap();
    let line = text.lines().find(|l| l.starts_with(field)).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// Starts counting the peak afresh (false where the kernel does not let us).
fn reset_peak(s: &Server) -> bool {
    std::fs::write(format!("/proc/{}/clear_refs", s.pid()), "5").is_ok()
}

fn saved_dataset() -> (Server, TempDir) {
    let s = Server::start(&[
        ("enable-debug-command", "yes"),
        ("repl-diskless-sync-delay", "0"),
    ]);
    let mut c = s.raw();
    fill(&mut c);
    c.cmd(&["SAVE"]);
    let d = TempDir::new("load-memory");
    std::fs::copy(s.dir.join("dump.rdb"), d.path().join("dump.rdb")).unwrap();
    (s, d)
}

#[test]
fn a_restart_and_debug_reload_do_not_hold_the_file() {
    let (s, d) = saved_dataset();
    let r = Server::start(&[("dir", d.dir())]);
    assert_eq!(r.raw().cmd(&["DBSIZE"]), int(VALUES as i64));
    // Its peak against what the server that wrote the file holds.
    let (peak, held) = (status_kb(&r, "VmHWM:"), status_kb(&s, "VmRSS:"));
    assert!(
        peak < held + SLACK_KB,
        "start-up peaked at {peak} KB, the writer holds {held} KB"
    );
    let mut c = s.raw();
    if !reset_peak(&s) {
        eprintln!("skipped DEBUG RELOAD: no clear_refs");
        return;
    }
    let before = status_kb(&s, "VmRSS:");
    // A debug build reloading 40 MB on a loaded machine may take longer
    // than a reply's usual wait; this is a bound on liveness, not a timing.
    c.set_timeout(std::time::Duration::from_secs(120));
    c.cmd(&["DEBUG", "RELOAD"]);
    assert_eq!(c.cmd(&["DBSIZE"]), int(VALUES as i64));
    let peak = status_kb(&s, "VmHWM:");
    assert!(
        peak < before + SLACK_KB,
        "DEBUG RELOAD peaked at {peak} KB from {before} KB"
    );
}

#[test]
fn a_replica_does_not_hold_the_masters_rdb() {
    let (m, _d) = saved_dataset();
    for (diskless_sync, load) in [
        ("no", "disabled"),
        ("yes", "disabled"),
        ("yes", "swapdb"),
        ("no", "on-empty-db"),
    ] {
        m.cli_out(&["CONFIG", "SET", "repl-diskless-sync", diskless_sync]);
        let r = Server::start(&[("repl-diskless-load", load)]);
        let port = m.port.to_string();
        r.cli_out(&["REPLICAOF", "127.0.0.1", &port]);
        wait_for("the replica's keys", || {
            r.cli_out(&["INFO", "replication"])
                .contains("master_link_status:up")
                && r.cli_out(&["DBSIZE"]) == VALUES.to_string()
        });
        let (peak, held) = (status_kb(&r, "VmHWM:"), status_kb(&m, "VmRSS:"));
        assert!(
            peak < held + SLACK_KB,
            "{diskless_sync}/{load}: the replica peaked at {peak} KB, its master holds {held} KB"
        );
    }
}
