//! CONFIG SET of an unchanged value applies nothing, as in Redis 7.0.15:
//! setting `bind` and `port` to what they are keeps the listeners.

use cinnabar_tests::*;

#[test]
fn config_set_to_the_current_bind_and_port() {
    let s = Server::start(&[]);
    let mut c = s.raw();
    let get = |c: &mut RawClient, name: &str| match c.cmd(&["CONFIG", "GET", name]) {
        RespFrame::Array(kv) => text(&kv[1]),
        f => panic!("{f:?}"),
    };
    let bind = get(&mut c, "bind");
    let port = get(&mut c, "port");
    assert_eq!(c.cmd(&["CONFIG", "SET", "bind", &bind]), ok());
    assert_eq!(
        c.cmd(&["CONFIG", "SET", "port", &port, "bind", &bind]),
        ok()
    );
    assert_eq!(s.raw().cmd(&["PING"]), simple("PONG"));
}
