//! Client-side caching (CLIENT TRACKING) against the built
//! `cinnabar-server`: RESP3 pushes on the tracking connection, RESP2
//! redirection to a `__redis__:invalidate` subscriber, BCAST prefixes,
//! OPTIN/OPTOUT, NOLOOP, broken redirections, every write path that
//! invalidates (commands, MULTI, scripts, expiry, eviction, flushes, the
//! table limit, unblocked clients) and where each message lands relative
//! to the replies.
//!
//! Every expectation was checked against Redis 7.0.15; run
//! `CINNABAR_BIN=$(command -v redis-server) cargo test -p cinnabar-tests
//! --test tracking` to check them again.

use cinnabar_tests::{bulk, err, int, ok, text, RawClient, RespFrame as Frame, Server};
use std::time::Duration;

fn b(s: &str) -> Frame {
    bulk(s)
}

/// The RESP3 push for `keys`.
fn inval(keys: &[&str]) -> Frame {
    Frame::Push(vec![
        b("invalidate"),
        Frame::Array(keys.iter().map(|k| b(k)).collect()),
    ])
}

/// The RESP2 message a redirect client subscribed to
/// `__redis__:invalidate` gets for `keys`.
fn message(keys: &[&str]) -> Frame {
    Frame::Array(vec![
        b("message"),
        b("__redis__:invalidate"),
        Frame::Array(keys.iter().map(|k| b(k)).collect()),
    ])
}

/// A RESP3 connection.
fn resp3(s: &Server) -> RawClient {
    let mut c = s.raw();
    c.send_cmd(&["HELLO", "3"]);
    assert!(matches!(c.read(), Frame::Map(_)));
    c
}

fn id_of(c: &mut RawClient) -> String {
    text(&c.cmd(&["CLIENT", "ID"]))
}

/// A RESP2 connection subscribed to the invalidation channel, and its id.
fn redirect_client(s: &Server) -> (RawClient, String) {
    let mut c = s.raw();
    let id = id_of(&mut c);
    c.send_cmd(&["SUBSCRIBE", "__redis__:invalidate"]);
    c.read();
    (c, id)
}

fn info_field(c: &mut RawClient, name: &str) -> String {
    let info = text(&c.cmd(&["INFO", "everything"]));
    info.lines()
        .find_map(|l| l.strip_prefix(&format!("{name}:")))
        .unwrap_or_else(|| panic!("no {name} in INFO"))
        .to_string()
}

const QUIET: Duration = Duration::from_millis(150);

#[test]
fn resp3_invalidation_on_the_tracking_connection() {
    let s = Server::start(&[]);
    let mut r = resp3(&s);
    let mut w = s.raw();
    assert_eq!(r.cmd(&["CLIENT", "TRACKING", "on"]), ok());
    assert_eq!(r.cmd(&["GET", "k"]), Frame::Null);
    assert_eq!(w.cmd(&["SET", "k", "1"]), ok());
    assert_eq!(r.read(), inval(&["k"]));
    // Invalidated keys are forgotten until read again.
    assert_eq!(w.cmd(&["SET", "k", "2"]), ok());
    r.expect_silence(QUIET);
    // The client's own write: the reply first, then the push.
    assert_eq!(
        r.cmd(&["MGET", "k", "j"]),
        Frame::Array(vec![b("2"), Frame::Null])
    );
    r.send_cmd(&["MSET", "j", "1", "k", "3"]);
    assert_eq!(r.read_raw().unwrap(), b"+OK\r\n");
    assert_eq!(r.read(), inval(&["j"]));
    assert_eq!(r.read(), inval(&["k"]));
    // A read that fails still tracks its key.
    assert_eq!(w.cmd(&["LPUSH", "l", "x"]), int(1));
    assert!(matches!(r.cmd(&["GET", "l"]), Frame::Error(_)));
    assert_eq!(w.cmd(&["DEL", "l"]), int(1));
    assert_eq!(r.read(), inval(&["l"]));
    // Keys are tracked by name across databases.
    r.cmd(&["GET", "x"]);
    w.cmd(&["SELECT", "5"]);
    w.cmd(&["SET", "x", "1"]);
    assert_eq!(r.read(), inval(&["x"]));
    // A flush: a null instead of keys, after the flushing client's reply.
    r.send_cmd(&["FLUSHALL"]);
    assert_eq!(r.read_raw().unwrap(), b"+OK\r\n");
    assert_eq!(r.read_raw().unwrap(), b">2\r\n$10\r\ninvalidate\r\n_\r\n");
    assert_eq!(w.cmd(&["FLUSHDB"]), ok());
    assert_eq!(r.read_raw().unwrap(), b">2\r\n$10\r\ninvalidate\r\n_\r\n");
    // RESP2 without a redirection: nowhere to send, nothing sent.
    r.cmd(&["HELLO", "2"]);
    r.cmd(&["GET", "k"]);
    w.cmd(&["SELECT", "0"]);
    w.cmd(&["SET", "k", "1"]);
    r.expect_silence(QUIET);
    assert_eq!(r.cmd(&["PING"]), Frame::Simple("PONG".into()));
}

#[test]
fn resp2_redirection_to_a_subscriber() {
    let s = Server::start(&[]);
    let (mut rd, rid) = redirect_client(&s);
    let mut r = s.raw();
    let mut w = s.raw();
    assert_eq!(r.cmd(&["CLIENT", "TRACKING", "on", "REDIRECT", &rid]), ok());
    assert_eq!(r.cmd(&["CLIENT", "GETREDIR"]), int(rid.parse().unwrap()));
    w.cmd(&["SET", "a", "1"]);
    w.cmd(&["SET", "b", "1"]);
    r.cmd(&["GET", "a"]);
    w.cmd(&["INCR", "b"]);
    w.cmd(&["INCR", "a"]);
    assert_eq!(rd.read(), message(&["a"]));
    r.cmd(&["GET", "a"]);
    w.cmd(&["FLUSHALL"]);
    assert_eq!(
        rd.read_raw().unwrap(),
        b"*3\r\n$7\r\nmessage\r\n$20\r\n__redis__:invalidate\r\n$-1\r\n"
    );
    // The same keys tracked by two clients redirecting to one connection:
    // one message each.
    let mut r2 = s.raw();
    r2.cmd(&["CLIENT", "TRACKING", "on", "REDIRECT", &rid]);
    r.cmd(&["GET", "k"]);
    r2.cmd(&["GET", "k"]);
    w.cmd(&["SET", "k", "v"]);
    assert_eq!(rd.read(), message(&["k"]));
    assert_eq!(rd.read(), message(&["k"]));
    // A RESP3 redirect client gets pushes, subscribed or not.
    let mut rd3 = resp3(&s);
    let id3 = id_of(&mut rd3);
    r.cmd(&["CLIENT", "TRACKING", "on", "REDIRECT", &id3]);
    r.cmd(&["GET", "k"]);
    w.cmd(&["SET", "k", "v"]);
    assert_eq!(rd3.read(), inval(&["k"]));
    // A RESP2 redirect client that is not subscribed gets nothing.
    let mut plain = s.raw();
    let pid = id_of(&mut plain);
    r.cmd(&["CLIENT", "TRACKING", "on", "REDIRECT", &pid]);
    r.cmd(&["GET", "k"]);
    w.cmd(&["SET", "k", "v"]);
    plain.expect_silence(QUIET);
    // ON again without REDIRECT sends to the connection itself.
    assert_eq!(r.cmd(&["CLIENT", "TRACKING", "on"]), ok());
    assert_eq!(r.cmd(&["CLIENT", "GETREDIR"]), int(0));
    assert_eq!(r.cmd(&["CLIENT", "TRACKING", "off"]), ok());
    assert_eq!(r.cmd(&["CLIENT", "GETREDIR"]), int(-1));
}

#[test]
fn broken_redirection() {
    let s = Server::start(&[]);
    let (mut rd, rid) = redirect_client(&s);
    let mut r = resp3(&s);
    let mut w = s.raw();
    r.cmd(&["CLIENT", "TRACKING", "on", "REDIRECT", &rid]);
    r.cmd(&["GET", "k"]);
    r.cmd(&["GET", "j"]);
    rd.send_cmd(&["QUIT"]);
    assert_eq!(rd.read(), ok());
    std::thread::sleep(Duration::from_millis(100));
    w.cmd(&["SET", "k", "1"]);
    let broken = Frame::Push(vec![b("tracking-redir-broken"), int(rid.parse().unwrap())]);
    assert_eq!(r.read(), broken);
    let info = r.cmd(&["CLIENT", "TRACKINGINFO"]);
    let Frame::Map(m) = info else {
        panic!("{info:?}")
    };
    assert_eq!(
        m[0],
        (b("flags"), Frame::Set(vec![b("on"), b("broken_redirect")]))
    );
    let line = text(&r.cmd(&["CLIENT", "INFO"]));
    assert!(line.contains(" flags=tR "), "{line}");
    assert!(line.contains(&format!(" redir={rid} ")), "{line}");
    // Its own write: the broken notice after the reply.
    r.send_cmd(&["SET", "j", "1"]);
    assert_eq!(r.read(), ok());
    assert_eq!(r.read(), broken);
    assert_eq!(
        r.cmd(&["CLIENT", "TRACKING", "on", "REDIRECT", &rid]),
        err("ERR The client ID you want redirect to does not exist")
    );
}

#[test]
fn bcast_prefixes_and_noloop() {
    let s = Server::start(&[]);
    let mut r = resp3(&s);
    let mut w = s.raw();
    assert_eq!(
        r.cmd(&["CLIENT", "TRACKING", "on", "BCAST", "PREFIX", "b", "PREFIX", "a"]),
        ok()
    );
    // One message per prefix, prefixes and keys in order.
    w.cmd(&["MSET", "a1", "1", "b2", "1", "a0", "1", "c", "1", "b1", "2"]);
    assert_eq!(r.read(), inval(&["a0", "a1"]));
    assert_eq!(r.read(), inval(&["b1", "b2"]));
    // A transaction's keys go out after EXEC's reply.
    r.send_cmd(&["MULTI"]);
    r.send_cmd(&["SET", "a5", "1"]);
    r.send_cmd(&["SET", "b5", "1"]);
    r.send_cmd(&["EXEC"]);
    assert_eq!(r.read(), ok());
    r.read();
    r.read();
    assert_eq!(r.read(), Frame::Array(vec![ok(), ok()]));
    assert_eq!(r.read(), inval(&["a5"]));
    assert_eq!(r.read(), inval(&["b5"]));
    // Adding a prefix keeps the others.
    assert_eq!(
        r.cmd(&["CLIENT", "TRACKING", "on", "BCAST", "PREFIX", "c:"]),
        ok()
    );
    w.cmd(&["INCR", "c:1"]);
    assert_eq!(r.read(), inval(&["c:1"]));
    assert_eq!(info_field(&mut r, "tracking_total_prefixes"), "3");
    // NOLOOP leaves out the client's own changes, not a script's.
    r.cmd(&["CLIENT", "TRACKING", "off"]);
    assert_eq!(info_field(&mut r, "tracking_total_prefixes"), "0");
    r.cmd(&["CLIENT", "TRACKING", "on", "BCAST", "NOLOOP"]);
    assert_eq!(r.cmd(&["SET", "mine", "1"]), ok());
    r.send_cmd(&["EVAL", "redis.call('set','scripted','1')", "0"]);
    assert_eq!(r.read(), Frame::Null);
    assert_eq!(r.read(), inval(&["scripted"]));
    w.cmd(&["SET", "theirs", "1"]);
    assert_eq!(r.read(), inval(&["theirs"]));
    // Switching modes needs OFF first.
    assert_eq!(
        r.cmd(&["CLIENT", "TRACKING", "on"]),
        err("ERR You can't switch BCAST mode on/off before disabling tracking for this client, and then re-enabling it with a different mode.")
    );
}

#[test]
fn bcast_prefix_overlaps() {
    let s = Server::start(&[]);
    let mut r = s.raw();
    assert_eq!(
        r.cmd(&["CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "FOOBAR", "PREFIX", "FOO"]),
        err("ERR Prefix 'FOOBAR' overlaps with another provided prefix 'FOO'. Prefixes for a single client must not overlap.")
    );
    assert_eq!(
        r.cmd(&["CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "FOO", "PREFIX", "BAR"]),
        ok()
    );
    assert_eq!(
        r.cmd(&["CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "BARB"]),
        err("ERR Prefix 'BARB' overlaps with an existing prefix 'BAR'. Prefixes for a single client must not overlap.")
    );
    r.cmd(&["CLIENT", "TRACKING", "OFF"]);
    // Redis 7.0.15 answers an overlap past the first given prefix with the
    // error and then enables tracking and answers OK too.
    r.send_cmd(&[
        "CLIENT", "TRACKING", "on", "bcast", "prefix", "a", "prefix", "b", "prefix", "bc",
    ]);
    assert_eq!(
        r.read(),
        err("ERR Prefix 'b' overlaps with another provided prefix 'bc'. Prefixes for a single client must not overlap.")
    );
    assert_eq!(r.read(), ok());
    let Frame::Array(info) = r.cmd(&["CLIENT", "TRACKINGINFO"]) else {
        panic!()
    };
    assert_eq!(info[5], Frame::Array(vec![b("a"), b("b"), b("bc")]));
}

#[test]
fn optin_optout_and_caching() {
    let s = Server::start(&[]);
    let mut r = resp3(&s);
    let mut w = s.raw();
    r.cmd(&["CLIENT", "TRACKING", "on", "OPTIN"]);
    r.cmd(&["GET", "not"]);
    // CACHING YES holds for the next command, through CLIENT commands and
    // a whole transaction.
    r.cmd(&["CLIENT", "CACHING", "yes"]);
    r.cmd(&["CLIENT", "ID"]);
    r.cmd(&["GET", "c1"]);
    r.cmd(&["CLIENT", "CACHING", "yes"]);
    r.cmd(&["PING"]);
    r.cmd(&["GET", "c2"]);
    r.cmd(&["MULTI"]);
    r.cmd(&["CLIENT", "CACHING", "yes"]);
    r.cmd(&["GET", "c3"]);
    r.cmd(&["GET", "c4"]);
    r.cmd(&["EXEC"]);
    r.cmd(&["GET", "c5"]);
    w.cmd(&[
        "MSET", "not", "1", "c1", "1", "c2", "1", "c3", "1", "c4", "1", "c5", "1",
    ]);
    assert_eq!(r.read(), inval(&["c1"]));
    assert_eq!(r.read(), inval(&["c3"]));
    assert_eq!(r.read(), inval(&["c4"]));
    r.expect_silence(QUIET);
    assert_eq!(
        r.cmd(&["CLIENT", "CACHING", "no"]),
        err("ERR CLIENT CACHING NO is only valid when tracking is enabled in OPTOUT mode.")
    );
    r.cmd(&["CLIENT", "TRACKING", "off"]);
    r.cmd(&["CLIENT", "TRACKING", "on", "OPTOUT"]);
    r.cmd(&["GET", "o1"]);
    r.cmd(&["CLIENT", "CACHING", "no"]);
    r.cmd(&["GET", "o2"]);
    w.cmd(&["MSET", "o1", "1", "o2", "1"]);
    assert_eq!(r.read(), inval(&["o1"]));
    r.expect_silence(QUIET);
    let Frame::Map(m) = r.cmd(&["CLIENT", "TRACKINGINFO"]) else {
        panic!()
    };
    assert_eq!(m[0].1, Frame::Set(vec![b("on"), b("optout")]));
}

#[test]
fn noloop_and_scripts() {
    let s = Server::start(&[]);
    let mut r = resp3(&s);
    let mut w = s.raw();
    r.cmd(&["CLIENT", "TRACKING", "on", "NOLOOP"]);
    r.cmd(&["GET", "k"]);
    // Its own write, in a script too, tells it nothing.
    assert_eq!(r.cmd(&["SET", "k", "1"]), ok());
    r.cmd(&["GET", "k"]);
    assert_eq!(
        r.cmd(&["EVAL", "return redis.call('set', KEYS[1], '2')", "1", "k"]),
        ok()
    );
    assert_eq!(r.cmd(&["GET", "k"]), b("2"));
    w.cmd(&["SET", "k", "3"]);
    assert_eq!(r.read(), inval(&["k"]));
    r.cmd(&["CLIENT", "TRACKING", "off"]);
    // A script that reads makes its caller track the declared keys; one
    // that only writes tracks nothing; the read-only script commands
    // themselves track nothing either.
    r.cmd(&["CLIENT", "TRACKING", "on"]);
    r.cmd(&["EVAL", "redis.call('set', 'k3', 'bar')", "2", "k1", "k2"]);
    r.cmd(&["EVAL_RO", "redis.call('ping')", "2", "k1", "k2"]);
    w.cmd(&["MSET", "k2", "1", "k1", "1"]);
    r.expect_silence(QUIET);
    r.cmd(&["EVAL", "redis.call('get', 'k3')", "2", "k1", "k2"]);
    w.cmd(&["MSET", "k2", "2", "k1", "2"]);
    assert_eq!(r.read(), inval(&["k2"]));
    assert_eq!(r.read(), inval(&["k1"]));
    assert_eq!(r.cmd(&["PING"]), Frame::Simple("PONG".into()));
}

#[test]
fn messages_follow_the_reply() {
    let s = Server::start(&[("enable-debug-command", "yes")]);
    let mut r = resp3(&s);
    r.cmd(&["CLIENT", "TRACKING", "on"]);
    // A transaction's invalidations come after EXEC's reply.
    r.cmd(&["MSET", "a", "1", "b", "2"]);
    r.cmd(&["GET", "a"]);
    r.cmd(&["MULTI"]);
    r.cmd(&["INCR", "a"]);
    r.cmd(&["GET", "b"]);
    r.send_cmd(&["EXEC"]);
    assert_eq!(r.read(), Frame::Array(vec![int(2), b("2")]));
    assert_eq!(r.read(), inval(&["a"]));
    // A lazy expiry met by a read: after that read's reply.
    assert_eq!(r.cmd(&["DEBUG", "SET-ACTIVE-EXPIRE", "0"]), ok());
    r.cmd(&["SET", "y", "1", "PX", "50"]);
    assert_eq!(r.cmd(&["GET", "y"]), b("1"));
    std::thread::sleep(Duration::from_millis(100));
    r.send_cmd(&["MGET", "a", "y"]);
    assert_eq!(r.read(), Frame::Array(vec![b("2"), Frame::Null]));
    assert_eq!(r.read(), inval(&["y"]));
    r.cmd(&["DEBUG", "SET-ACTIVE-EXPIRE", "1"]);
    // A flush in a transaction: after EXEC's reply.
    r.cmd(&["GET", "a"]);
    r.cmd(&["MULTI"]);
    r.cmd(&["FLUSHDB"]);
    r.send_cmd(&["EXEC"]);
    assert_eq!(r.read(), Frame::Array(vec![ok()]));
    assert_eq!(r.read_raw().unwrap(), b">2\r\n$10\r\ninvalidate\r\n_\r\n");
}

#[test]
fn eviction_invalidates_before_the_reply() {
    let s = Server::start(&[]);
    let mut r = resp3(&s);
    r.cmd(&["CLIENT", "TRACKING", "on"]);
    let used: u64 = info_field(&mut r, "used_memory").parse().unwrap();
    r.cmd(&[
        "CONFIG",
        "SET",
        "maxmemory",
        &(used + 100 * 1024).to_string(),
    ]);
    r.cmd(&["CONFIG", "SET", "maxmemory-policy", "volatile-random"]);
    r.cmd(&["SETEX", "volatile-key", "10000", "x"]);
    r.cmd(&["GET", "volatile-key"]);
    r.cmd(&["SETBIT", "big-key", "1600000", "0"]);
    r.send_cmd(&["GETBIT", "big-key", "0"]);
    assert_eq!(r.read(), inval(&["volatile-key"]));
    assert_eq!(r.read(), int(0));
    r.cmd(&["CONFIG", "SET", "maxmemory", "0"]);
}

#[test]
fn active_expiry_invalidates() {
    let s = Server::start(&[]);
    let (mut rd, rid) = redirect_client(&s);
    let mut r = s.raw();
    r.cmd(&[
        "CLIENT", "TRACKING", "on", "BCAST", "REDIRECT", &rid, "NOLOOP",
    ]);
    r.cmd(&["SET", "mykey", "v", "PX", "1"]);
    r.cmd(&["SET", "other", "v"]);
    // Only the expiry is told: the writes were the client's own.
    assert_eq!(rd.read(), message(&["mykey"]));
}

#[test]
fn unblocked_client_gets_its_reply_first() {
    let s = Server::start(&[]);
    let mut rd = resp3(&s);
    let mut w = s.raw();
    w.cmd(&["RPUSH", "list2", "a"]);
    rd.cmd(&["CLIENT", "TRACKING", "on"]);
    rd.cmd(&["LRANGE", "list2", "0", "-1"]);
    rd.send_cmd(&["BLMOVE", "list1", "list2", "left", "left", "0"]);
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(w.cmd(&["RPUSH", "list1", "foo"]), int(1));
    assert_eq!(rd.read(), b("foo"));
    assert_eq!(rd.read(), inval(&["list2"]));
}

#[test]
fn table_limit_evicts_keys() {
    let s = Server::start(&[]);
    let (mut rd, rid) = redirect_client(&s);
    let mut r = s.raw();
    r.cmd(&["CLIENT", "TRACKING", "on", "REDIRECT", &rid]);
    for i in 0..250 {
        r.cmd(&["GET", &format!("key{i}")]);
    }
    assert_eq!(info_field(&mut r, "tracking_total_keys"), "250");
    r.cmd(&["CONFIG", "SET", "tracking-table-max-keys", "1"]);
    // Exactly enough keys go (in rounds of growing effort).
    for _ in 0..249 {
        let Frame::Array(m) = rd.read() else { panic!() };
        assert_eq!(m[1], b("__redis__:invalidate"));
    }
    rd.send_cmd(&["PING"]);
    assert_eq!(rd.read(), Frame::Array(vec![b("pong"), b("")]));
    assert_eq!(info_field(&mut r, "tracking_total_keys"), "1");
}

#[test]
fn table_limit_before_a_queued_command() {
    let s = Server::start(&[("enable-debug-command", "yes")]);
    let mut r = s.raw();
    r.cmd(&["CONFIG", "SET", "tracking-table-max-keys", "2"]);
    assert_eq!(r.cmd(&["DEBUG", "PAUSE-CRON", "1"]), ok());
    let mut c = resp3(&s);
    c.cmd(&["CLIENT", "TRACKING", "on"]);
    c.cmd(&["MGET", "1{tag}", "2{tag}"]);
    c.cmd(&["MULTI"]);
    r.cmd(&["CONFIG", "SET", "tracking-table-max-keys", "1"]);
    c.send_cmd(&["PING"]);
    let Frame::Push(m) = c.read() else { panic!() };
    assert_eq!(m[0], b("invalidate"));
    assert_eq!(c.read(), Frame::Simple("QUEUED".into()));
    assert_eq!(
        c.cmd(&["EXEC"]),
        Frame::Array(vec![Frame::Simple("PONG".into())])
    );
    r.cmd(&["DEBUG", "PAUSE-CRON", "0"]);
}

#[test]
fn info_list_and_leaving() {
    let s = Server::start(&[]);
    let (_rd, rid) = redirect_client(&s);
    let mut r = s.raw();
    let mut b2 = s.raw();
    r.cmd(&["CLIENT", "TRACKING", "on", "REDIRECT", &rid]);
    r.cmd(&["GET", "key1"]);
    r.cmd(&["GET", "key2"]);
    b2.cmd(&["CLIENT", "TRACKING", "on", "BCAST", "PREFIX", "prefix:"]);
    assert_eq!(info_field(&mut r, "tracking_total_items"), "2");
    assert_eq!(info_field(&mut r, "tracking_total_keys"), "2");
    assert_eq!(info_field(&mut r, "tracking_total_prefixes"), "1");
    assert_eq!(info_field(&mut r, "tracking_clients"), "2");
    let line = text(&b2.cmd(&["CLIENT", "INFO"]));
    assert!(
        line.contains(" flags=tB ") && line.contains(" redir=0 "),
        "{line}"
    );
    // RESET and a disconnect turn tracking off; a client that stops
    // tracking leaves its keys in the table until they change.
    assert_eq!(b2.cmd(&["RESET"]), Frame::Simple("RESET".into()));
    assert_eq!(b2.cmd(&["CLIENT", "GETREDIR"]), int(-1));
    assert_eq!(info_field(&mut r, "tracking_total_prefixes"), "0");
    r.cmd(&["CLIENT", "TRACKING", "off"]);
    assert_eq!(info_field(&mut r, "tracking_clients"), "0");
    assert_eq!(info_field(&mut r, "tracking_total_keys"), "2");
    r.cmd(&["SET", "key1", "x"]);
    assert_eq!(info_field(&mut r, "tracking_total_keys"), "1");
    let line = text(&r.cmd(&["CLIENT", "INFO"]));
    assert!(
        line.contains(" flags=N ") && line.contains(" redir=-1 "),
        "{line}"
    );
    r.cmd(&["CLIENT", "TRACKING", "on"]);
    drop(r);
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(info_field(&mut b2, "tracking_clients"), "0");
    // FLUSHALL ASYNC empties the table at once.
    b2.cmd(&["FLUSHALL", "ASYNC"]);
    assert_eq!(info_field(&mut b2, "tracking_total_keys"), "0");
}

#[test]
fn positions_against_the_running_command() {
    let s = Server::start(&[]);
    let mut r = s.raw();
    let mut rd = resp3(&s);
    let rid = id_of(&mut rd);
    // The redirect client's own write: the message before its reply.
    r.cmd(&["CLIENT", "TRACKING", "on", "REDIRECT", &rid]);
    r.cmd(&["GET", "k"]);
    rd.send_cmd(&["SET", "k", "1"]);
    assert_eq!(rd.read(), inval(&["k"]));
    assert_eq!(rd.read(), ok());
    // CLIENT REPLY OFF and SKIP keep the pushes.
    let mut c = resp3(&s);
    c.cmd(&["CLIENT", "TRACKING", "on"]);
    c.cmd(&["GET", "q"]);
    c.send_cmd(&["CLIENT", "REPLY", "OFF"]);
    c.send_cmd(&["SET", "q", "1"]);
    assert_eq!(c.read(), inval(&["q"]));
    assert_eq!(c.cmd(&["CLIENT", "REPLY", "ON"]), ok());
    // Tracking turned on inside a transaction works from there on.
    c.cmd(&["CLIENT", "TRACKING", "off"]);
    c.cmd(&["MULTI"]);
    c.cmd(&["CLIENT", "TRACKING", "on"]);
    c.cmd(&["GET", "mk"]);
    c.cmd(&["SET", "mk", "1"]);
    assert_eq!(
        c.cmd(&["EXEC"]),
        Frame::Array(vec![ok(), Frame::Null, ok()])
    );
    assert_eq!(c.read(), inval(&["mk"]));
}
