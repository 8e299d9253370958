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
