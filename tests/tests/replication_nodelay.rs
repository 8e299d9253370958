//! `repl-disable-tcp-nodelay`: with `yes` the master turns TCP_NODELAY off
//! on a replica's socket once it syncs in full; a replica that continues
//! with PSYNC keeps it on. Measured on Redis 7.0.15 by reading the option
//! of the master's socket, which this test does too: the socket is taken
//! from the server with pidfd_getfd (the test started the server, so it
//! may), matched by its peer, the replica's port.

use cinnabar_tests::{info_field, info_int, RawClient, Server};
use std::net::TcpStream;
use std::os::fd::FromRawFd;

/// TCP_NODELAY of the master's socket whose peer is `replica`.
fn master_nodelay(s: &Server, replica: &RawClient) -> bool {
    let peer = replica.sock.local_addr().unwrap();
    // SAFETY: syscalls with integer arguments; each fd they return is
    // ours and handed to a TcpStream, which closes it.
    let pidfd = unsafe { libc::syscall(libc::SYS_pidfd_open, s.pid(), 0) };
    assert!(
        pidfd >= 0,
        "pidfd_open: {}",
        std::io::Error::last_os_error()
    );
    let mut found = None;
    for entry in std::fs::read_dir(format!("/proc/{}/fd", s.pid())).unwrap() {
        let entry = entry.unwrap();
        let is_socket = std::fs::read_link(entry.path())
            .is_ok_and(|l| l.to_string_lossy().starts_with("socket:"));
        let Ok(n) = entry.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        if !is_socket {
            continue;
        }
        let fd = unsafe { libc::syscall(libc::SYS_pidfd_getfd, pidfd, n, 0) };
        if fd < 0 {
            let e = std::io::Error::last_os_error();
            // Closed since the listing: not the replica's, which is open.
            assert_eq!(e.raw_os_error(), Some(libc::EBADF), "pidfd_getfd: {e}");
            continue;
        }
        let sock = unsafe { TcpStream::from_raw_fd(fd as i32) };
        if sock.peer_addr().is_ok_and(|a| a == peer) {
            found = Some(sock.nodelay().unwrap());
            break;
        }
    }
    unsafe { libc::close(pidfd as i32) };
    found.expect("the master's socket of the replica")
}

#[test]
fn full_sync_turns_nodelay_off_only_when_asked() {
    let s = Server::start(&[]);
    let r = s.sync_replica();
    assert!(master_nodelay(&s, &r), "default no: nodelay stays on");

    let s = Server::start(&[("repl-disable-tcp-nodelay", "yes")]);
    let r = s.sync_replica();
    assert!(!master_nodelay(&s, &r), "yes: off after the full sync");

    // A second replica continues from the backlog the first one made.
    let mut c = s.raw();
    let replid = info_field(&mut c, "replication", "master_replid");
    let offset = info_int(&mut c, "replication", "master_repl_offset");
    let mut p = s.raw();
    p.send_cmd(&["PSYNC", &replid, &(offset + 1).to_string()]);
    let line = cinnabar_tests::text(&p.read());
    assert!(line.starts_with("CONTINUE"), "{line}");
    assert!(master_nodelay(&s, &p), "yes: a partial sync keeps nodelay");
    drop(r);
}
