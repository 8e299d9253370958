//! `server_cpulist`, `bio_cpulist`, `bgsave_cpulist`, `aof_rewrite_cpulist`:
//! the CPU affinity of each of the server's threads, read from
//! /proc/<pid>/task/*/status. Redis 7.0.15 on a 2-CPU machine pins its
//! main and I/O threads to `server_cpulist`, its bio threads to
//! `bio_cpulist` (else they keep the start-up mask), and its BGSAVE and
//! BGREWRITEAOF children to their lists (else they inherit the main
//! thread's). cinnabar has no fork: the saver thread stands for the child.
//! The thread names are cinnabar's (Redis's differ), so these run against
//! cinnabar only.

use cinnabar_tests::{bulk, is_real_redis, ok, wait_for, RespFrame, Server};
use std::time::Duration;

/// The test's own CPUs, which the server inherits: the tests need two.
fn two_cpus() -> (String, String, String) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let list = field(&status);
    let mut cpus = Vec::new();
    for part in list.split(',') {
        match part.split_once('-') {
            Some((a, b)) => cpus.extend(a.parse::<u32>().unwrap()..=b.parse::<u32>().unwrap()),
            None => cpus.push(part.parse::<u32>().unwrap()),
        }
    }
    assert!(
        cpus.len() >= 2,
        "the affinity tests need two CPUs; this process may use {list}"
    );
    (cpus[0].to_string(), cpus[1].to_string(), list)
}

fn field(status: &str) -> String {
    status
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .expect("Cpus_allowed_list")
        .trim()
        .to_string()
}

/// (thread name, Cpus_allowed_list) of every thread of `pid`.
fn threads(pid: u32) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for t in std::fs::read_dir(format!("/proc/{pid}/task")).unwrap() {
        let t = t.unwrap().path();
        let (Ok(comm), Ok(status)) = (
            std::fs::read_to_string(t.join("comm")),
            std::fs::read_to_string(t.join("status")),
        ) else {
            continue;
        };
        out.push((comm.trim().to_string(), field(&status)));
    }
    out
}

/// The masks of the threads called `name`; fails if there is none.
fn masks(pid: u32, name: &str) -> Vec<String> {
    let all = threads(pid);
    let found: Vec<String> = all
        .iter()
        .filter(|(n, _)| n == name)
        .map(|(_, m)| m.clone())
        .collect();
    assert!(!found.is_empty(), "no thread {name} in {all:?}");
    found
}

/// The mask of the one thread called `name`.
fn only(pid: u32, name: &str) -> String {
    let m = masks(pid, name);
    assert_eq!(m.len(), 1, "threads {name}: {m:?}");
    m[0].clone()
}

fn has_thread(pid: u32, name: &str) -> bool {
    threads(pid).iter().any(|(n, _)| n == name)
}

/// Runs `cmd` (BGSAVE or BGREWRITEAOF) with a slow save and returns the
/// saver thread's mask while it runs.
fn saver_mask(s: &Server, cmd: &str, reply: &str) -> String {
    let mut c = s.raw();
    assert_eq!(
        c.cmd(&["CONFIG", "SET", "rdb-key-save-delay", "100000"]),
        ok()
    );
    assert_eq!(
        cinnabar_tests::text(&c.cmd(&[cmd])),
        reply,
        "{cmd} did not start"
    );
    wait_for("the saver thread", || has_thread(s.pid(), "bgsave"));
    let m = only(s.pid(), "bgsave");
    assert_eq!(c.cmd(&["CONFIG", "SET", "rdb-key-save-delay", "0"]), ok());
    wait_for("the save to end", || !has_thread(s.pid(), "bgsave"));
    m
}

/// FLUSHALL ASYNC of more keys than are freed inline starts the lazy-free
/// thread.
fn start_lazyfree(s: &Server) {
    let mut c = s.raw();
    assert_eq!(c.cmd(&["DEBUG", "POPULATE", "1000"]), ok());
    assert_eq!(c.cmd(&["FLUSHALL", "ASYNC"]), ok());
    wait_for("the lazy-free thread", || has_thread(s.pid(), "lazyfree"));
    assert_eq!(c.cmd(&["DEBUG", "POPULATE", "20"]), ok());
}

#[test]
fn each_thread_on_its_list() {
    if is_real_redis() {
        return;
    }
    let (a, b, _) = two_cpus();
    let s = Server::start(&[
        ("server_cpulist", &a),
        ("bio_cpulist", &b),
        ("bgsave_cpulist", &b),
        ("appendonly", "yes"),
        ("enable-debug-command", "yes"),
    ]);
    start_lazyfree(&s);
    let pid = s.pid();
    assert_eq!(only(pid, "cinnabar-server"), a);
    for m in masks(pid, "tokio-rt-worker") {
        assert_eq!(m, a, "a worker");
    }
    assert_eq!(only(pid, "aof-fsync"), b);
    assert_eq!(only(pid, "lazyfree"), b);
    assert_eq!(saver_mask(&s, "BGSAVE", "Background saving started"), b);
}

#[test]
fn without_their_lists_savers_inherit_and_bio_keeps_the_start_mask() {
    if is_real_redis() {
        return;
    }
    let (a, b, start) = two_cpus();
    let s = Server::start(&[
        ("server_cpulist", &a),
        ("aof_rewrite_cpulist", &b),
        ("enable-debug-command", "yes"),
    ]);
    start_lazyfree(&s);
    assert_eq!(only(s.pid(), "lazyfree"), start);
    assert_eq!(saver_mask(&s, "BGSAVE", "Background saving started"), a);
    assert_eq!(
        saver_mask(
            &s,
            "BGREWRITEAOF",
            "Background append only file rewriting started"
        ),
        b
    );
}

/// Redis starts with a list it cannot read and leaves the mask alone,
/// without a word in the log; the option keeps its text.
#[test]
fn a_list_redis_cannot_read_is_ignored() {
    if is_real_redis() {
        return;
    }
    let (_, b, start) = two_cpus();
    let bad = format!("{b}-0");
    let s = Server::start(&[("server_cpulist", &bad)]);
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(only(s.pid(), "cinnabar-server"), start);
    for m in masks(s.pid(), "tokio-rt-worker") {
        assert_eq!(m, start);
    }
    let mut c = s.raw();
    assert_eq!(
        c.cmd(&["CONFIG", "GET", "server_cpulist"]),
        RespFrame::Array(vec![bulk("server_cpulist"), bulk(&bad)])
    );
}
