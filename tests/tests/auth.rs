//! requirepass: the NOAUTH gate, AUTH's errors, and clients that
//! authenticate (raw RESP, the redis crate, redis-cli -a).

use cinnabar_tests::*;

const PASS: &str = "123456";
const WRONGPASS: &str = "WRONGPASS invalid username-password pair or user is disabled.";

#[test]
fn raw_client_must_authenticate() {
    let s = Server::start(&[("requirepass", PASS)]);
    let mut c = s.raw();
    assert_eq!(c.cmd(&["GET", "k"]), err("NOAUTH Authentication required."));
    assert_eq!(
        c.cmd(&["SET", "k", "v"]),
        err("NOAUTH Authentication required.")
    );
    assert_eq!(c.cmd(&["PING"]), err("NOAUTH Authentication required."));
    // Arity and unknown commands are checked before authentication.
    assert_eq!(
        c.cmd(&["GET"]),
        err("ERR wrong number of arguments for 'get' command")
    );
    assert_eq!(
        c.cmd(&["NOSUCH", "a"]),
        err("ERR unknown command 'NOSUCH', with args beginning with: 'a' ")
    );
    assert_eq!(c.cmd(&["AUTH", "wrong"]), err(WRONGPASS));
    assert_eq!(c.cmd(&["AUTH", "default", "wrong"]), err(WRONGPASS));
    assert_eq!(c.cmd(&["AUTH", "nouser", PASS]), err(WRONGPASS));
    assert_eq!(c.cmd(&["AUTH", "a", "b", "c"]), err("ERR syntax error"));
    assert_eq!(c.cmd(&["GET", "k"]), err("NOAUTH Authentication required."));
    assert_eq!(c.cmd(&["AUTH", PASS]), ok());
    assert_eq!(c.cmd(&["SET", "k", "v"]), ok());
    assert_eq!(c.cmd(&["GET", "k"]), bulk("v"));
    // A wrong AUTH later does not log the client out.
    assert_eq!(c.cmd(&["AUTH", "wrong"]), err(WRONGPASS));
    assert_eq!(c.cmd(&["GET", "k"]), bulk("v"));

    let mut c2 = s.raw();
    assert_eq!(c2.cmd(&["AUTH", "default", PASS]), ok());
    assert_eq!(c2.cmd(&["GET", "k"]), bulk("v"));
}

#[test]
fn auth_without_requirepass() {
    let s = Server::start(&[]);
    let mut c = s.raw();
    assert_eq!(
        c.cmd(&["AUTH", "x"]),
        err("ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?")
    );
    // The default user has `nopass`: any password is accepted.
    assert_eq!(c.cmd(&["AUTH", "default", "x"]), ok());
    assert_eq!(c.cmd(&["AUTH", "nouser", "x"]), err(WRONGPASS));
    assert_eq!(c.cmd(&["PING"]), simple("PONG"));
}

#[test]
fn hello_auth() {
    let s = Server::start(&[("requirepass", PASS)]);
    let mut c = s.raw();
    assert_eq!(
        c.cmd(&["HELLO", "3"]),
        err("NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time")
    );
    assert_eq!(
        c.cmd(&["HELLO", "3", "AUTH", "default", "wrong"]),
        err(WRONGPASS)
    );
    match c.cmd(&["HELLO", "3", "AUTH", "default", PASS]) {
        RespFrame::Map(m) => assert!(m.iter().any(|(k, v)| *k == bulk("proto") && *v == int(3))),
        other => panic!("HELLO reply {other:?}"),
    }
    assert_eq!(c.cmd(&["GET", "nokey"]), nil());
}

#[test]
fn redis_crate_with_password() {
    let s = Server::start(&[("requirepass", PASS)]);
    let mut r = s.redis();
    let _: () = redis::cmd("SET").arg("k").arg("v").query(&mut r).unwrap();
    let v: String = redis::cmd("GET").arg("k").query(&mut r).unwrap();
    assert_eq!(v, "v");
    let bad = redis::Client::open(format!("redis://:wrong@127.0.0.1:{}/", s.port))
        .unwrap()
        .get_connection();
    assert!(bad.is_err(), "wrong password accepted");
    let none = redis::Client::open(format!("redis://127.0.0.1:{}/", s.port))
        .unwrap()
        .get_connection();
    if let Ok(mut c) = none {
        let r: redis::RedisResult<Option<String>> = redis::cmd("GET").arg("k").query(&mut c);
        let e = r.expect_err("unauthenticated GET succeeded");
        assert_eq!(e.code(), Some("NOAUTH"));
    }
}

#[test]
fn redis_cli_with_password() {
    let s = Server::start(&[("requirepass", PASS)]);
    assert_eq!(s.cli_out(&["GET", "k"]), "NOAUTH Authentication required.");
    let o = s.cli(&["-a", "wrong", "GET", "k"]);
    let all = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(all.contains(&format!("AUTH failed: {WRONGPASS}")), "{all}");
    assert_eq!(
        s.cli_out(&["-a", PASS, "--no-auth-warning", "SET", "k", "v"]),
        "OK"
    );
    assert_eq!(
        s.cli_out(&["-a", PASS, "--no-auth-warning", "GET", "k"]),
        "v"
    );
    assert_eq!(
        s.cli_out(&["-a", PASS, "--no-auth-warning", "PING"]),
        "PONG"
    );
    assert_eq!(
        s.cli_out(&[
            "-a",
            PASS,
            "--no-auth-warning",
            "--user",
            "default",
            "GET",
            "k"
        ]),
        "v"
    );
}
