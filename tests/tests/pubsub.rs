//! Pub/Sub against the built `cinnabar-server`: fan-out, patterns, RESP3
//! push frames, subscribed mode, delivery order, output-buffer limits for
//! subscribers that do not read, CLIENT LIST, keyspace notifications.
//!
//! Every expectation was checked against Redis 7.0.15; run
//! `CINNABAR_BIN=$(command -v redis-server) cargo test -p cinnabar-tests
//! --test pubsub` to check them again.

use cinnabar_tests::{bulk, int, text, RawClient, ReadEnd, RespFrame as Frame, Server};
use std::time::{Duration, Instant};

fn b(s: &str) -> Frame {
    bulk(s)
}

fn arr(v: Vec<Frame>) -> Frame {
    Frame::Array(v)
}

fn message(ch: &str, msg: &str) -> Frame {
    arr(vec![b("message"), b(ch), b(msg)])
}

fn pmessage(pat: &str, ch: &str, msg: &str) -> Frame {
    arr(vec![b("pmessage"), b(pat), b(ch), b(msg)])
}

fn confirm(kind: &str, name: &str, n: i64) -> Frame {
    arr(vec![b(kind), b(name), int(n)])
}

/// Subscribes `c` to `channels`, checking each confirmation.
fn subscribe(c: &mut RawClient, channels: &[&str]) {
    let mut args = vec!["SUBSCRIBE"];
    args.extend_from_slice(channels);
    c.send_cmd(&args);
    for (i, ch) in channels.iter().enumerate() {
        assert_eq!(c.read(), confirm("subscribe", ch, i as i64 + 1));
    }
}

#[test]
fn fan_out_to_several_subscribers() {
    let s = Server::start(&[]);
    let mut subs: Vec<RawClient> = (0..4).map(|_| s.raw()).collect();
    for c in &mut subs[..3] {
        subscribe(c, &["news", "other"]);
    }
    subscribe(&mut subs[3], &["other"]);
    let mut p = s.raw();
    assert_eq!(p.cmd(&["PUBLISH", "news", "hello"]), int(3));
    assert_eq!(p.cmd(&["PUBLISH", "other", "x\r\n\0y"]), int(4));
    assert_eq!(p.cmd(&["PUBLISH", "nobody", "x"]), int(0));
    for c in &mut subs[..3] {
        assert_eq!(c.read(), message("news", "hello"));
        assert_eq!(c.read(), message("other", "x\r\n\0y"));
    }
    assert_eq!(subs[3].read(), message("other", "x\r\n\0y"));
    assert_eq!(
        p.cmd(&["PUBSUB", "NUMSUB", "news", "other", "nobody"]),
        arr(vec![
            b("news"),
            int(3),
            b("other"),
            int(4),
            b("nobody"),
            int(0)
        ])
    );
    // A subscriber that leaves stops counting at once.
    subs.pop();
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(p.cmd(&["PUBLISH", "other", "y"]), int(3));
    // Sharded channels are separate from ordinary ones.
    let mut sh = s.raw();
    sh.send_cmd(&["SSUBSCRIBE", "news"]);
    assert_eq!(sh.read(), confirm("ssubscribe", "news", 1));
    assert_eq!(p.cmd(&["SPUBLISH", "news", "s"]), int(1));
    assert_eq!(sh.read(), arr(vec![b("smessage"), b("news"), b("s")]));
    assert_eq!(p.cmd(&["PUBLISH", "news", "n"]), int(3));
    sh.expect_silence(Duration::from_millis(100));
}

#[test]
fn pattern_subscriptions() {
    let s = Server::start(&[]);
    let mut c = s.raw();
    c.send_cmd(&["PSUBSCRIBE", "news.*", "n?ws.[ab]", "x\\*", "*"]);
    for (i, p) in ["news.*", "n?ws.[ab]", "x\\*", "*"].iter().enumerate() {
        assert_eq!(c.read(), confirm("psubscribe", p, i as i64 + 1));
    }
    c.send_cmd(&["SUBSCRIBE", "news.a"]);
    assert_eq!(c.read(), confirm("subscribe", "news.a", 5));
    let mut p = s.raw();
    assert_eq!(p.cmd(&["PUBSUB", "NUMPAT"]), int(4));
    // The channel subscription first, then each matching pattern (a client
    // gets one message per match).
    assert_eq!(p.cmd(&["PUBLISH", "news.a", "m1"]), int(4));
    let mut got = vec![c.read()];
    assert_eq!(got[0], message("news.a", "m1"));
    got = (0..3).map(|_| c.read()).collect();
    for want in [
        pmessage("news.*", "news.a", "m1"),
        pmessage("n?ws.[ab]", "news.a", "m1"),
        pmessage("*", "news.a", "m1"),
    ] {
        assert!(got.contains(&want), "{got:?} lacks {want:?}");
    }
    assert_eq!(p.cmd(&["PUBLISH", "x*", "m2"]), int(2));
    got = (0..2).map(|_| c.read()).collect();
    assert!(got.contains(&pmessage("x\\*", "x*", "m2")));
    assert!(got.contains(&pmessage("*", "x*", "m2")));
    assert_eq!(p.cmd(&["PUBLISH", "xy", "m3"]), int(1));
    assert_eq!(c.read(), pmessage("*", "xy", "m3"));
    // The empty channel matches no pattern, not even `*`.
    assert_eq!(p.cmd(&["PUBLISH", "", "m4"]), int(0));
    c.send_cmd(&["PUNSUBSCRIBE", "*", "nope"]);
    assert_eq!(c.read(), confirm("punsubscribe", "*", 4));
    assert_eq!(c.read(), confirm("punsubscribe", "nope", 4));
    assert_eq!(p.cmd(&["PUBLISH", "xy", "m5"]), int(0));
    assert_eq!(p.cmd(&["PUBSUB", "NUMPAT"]), int(3));
    // Without arguments: every pattern, in subscription order.
    c.send_cmd(&["PUNSUBSCRIBE"]);
    assert_eq!(c.read(), confirm("punsubscribe", "news.*", 3));
    assert_eq!(c.read(), confirm("punsubscribe", "n?ws.[ab]", 2));
    assert_eq!(c.read(), confirm("punsubscribe", "x\\*", 1));
    assert_eq!(p.cmd(&["PUBSUB", "NUMPAT"]), int(0));
    let mut chans = p.cmd(&["PUBSUB", "CHANNELS", "news.?"]);
    assert_eq!(chans, arr(vec![b("news.a")]));
    chans = p.cmd(&["PUBSUB", "CHANNELS", "x*"]);
    assert_eq!(chans, arr(vec![]));
}

#[test]
fn resp3_push_frames_and_commands_while_subscribed() {
    let s = Server::start(&[]);
    let mut c = s.raw();
    assert!(matches!(c.cmd(&["HELLO", "3"]), Frame::Map(_)));
    c.send_cmd(&["SUBSCRIBE", "a"]);
    assert_eq!(c.read(), Frame::Push(vec![b("subscribe"), b("a"), int(1)]));
    // Any command runs; messages arrive as push frames between replies.
    assert_eq!(c.cmd(&["SET", "k", "v"]), cinnabar_tests::ok());
    let mut p = s.raw();
    assert_eq!(p.cmd(&["PUBLISH", "a", "hi"]), int(1));
    assert_eq!(c.read(), Frame::Push(vec![b("message"), b("a"), b("hi")]));
    assert_eq!(c.cmd(&["GET", "k"]), b("v"));
    // Publishing to itself: the message comes before the PUBLISH reply.
    c.send_cmd(&["PUBLISH", "a", "self"]);
    assert_eq!(c.read(), Frame::Push(vec![b("message"), b("a"), b("self")]));
    assert_eq!(c.read(), int(1));
    c.send_cmd(&["UNSUBSCRIBE"]);
    assert_eq!(
        c.read(),
        Frame::Push(vec![b("unsubscribe"), b("a"), int(0)])
    );
    c.send_cmd(&["UNSUBSCRIBE"]);
    assert_eq!(
        c.read(),
        Frame::Push(vec![b("unsubscribe"), Frame::Null, int(0)])
    );
}

#[test]
fn resp2_subscribed_mode() {
    let s = Server::start(&[]);
    let mut c = s.raw();
    subscribe(&mut c, &["a", "b"]);
    let e = |name: &str| {
        cinnabar_tests::err(&format!(
            "ERR Can't execute '{name}': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context"
        ))
    };
    assert_eq!(c.cmd(&["GET", "k"]), e("get"));
    assert_eq!(c.cmd(&["CONFIG", "GET", "x"]), e("config|get"));
    assert_eq!(c.cmd(&["PUBLISH", "a", "x"]), e("publish"));
    assert_eq!(c.cmd(&["PING"]), arr(vec![b("pong"), b("")]));
    assert_eq!(c.cmd(&["PING", "m"]), arr(vec![b("pong"), b("m")]));
    // Unsubscribing from everything (any order) leaves subscribed mode.
    c.send_cmd(&["UNSUBSCRIBE"]);
    let mut left = vec![];
    for n in [1, 0] {
        match c.read() {
            Frame::Array(v) if v.len() == 3 && v[0] == b("unsubscribe") && v[2] == int(n) => {
                left.push(v[1].clone())
            }
            f => panic!("unexpected {f:?}"),
        }
    }
    left.sort_by_key(|f| format!("{f:?}"));
    assert_eq!(left, vec![b("a"), b("b")]);
    assert_eq!(c.cmd(&["GET", "k"]), Frame::Null);
    assert_eq!(c.cmd(&["PING"]), cinnabar_tests::simple("PONG"));
}

#[test]
fn messages_arrive_in_publish_order() {
    let s = Server::start(&[]);
    let mut sub = s.raw();
    subscribe(&mut sub, &["seq"]);
    let mut psub = s.raw();
    psub.send_cmd(&["PSUBSCRIBE", "se*"]);
    assert_eq!(psub.read(), confirm("psubscribe", "se*", 1));
    let n = 3000;
    let mut p1 = s.raw();
    let mut p2 = s.raw();
    // Two publishers interleaved, each pipelining its whole run.
    let mut batch1 = Vec::new();
    let mut batch2 = Vec::new();
    for i in 0..n {
        batch1.extend(cinnabar_tests::encode(&[
            "PUBLISH",
            "seq",
            &format!("a{i}"),
        ]));
        batch2.extend(cinnabar_tests::encode(&[
            "PUBLISH",
            "seq",
            &format!("b{i}"),
        ]));
    }
    p1.send(&batch1);
    p2.send(&batch2);
    for _ in 0..n {
        assert_eq!(p1.read(), int(2));
        assert_eq!(p2.read(), int(2));
    }
    for c in [&mut sub, &mut psub] {
        let (mut a, mut bb) = (0, 0);
        for _ in 0..2 * n {
            let f = c.read();
            let Frame::Array(v) = f else { panic!("{f:?}") };
            let Some(Frame::Bulk(m)) = v.last() else {
                panic!("{v:?}")
            };
            let m = String::from_utf8_lossy(m).into_owned();
            if let Some(i) = m.strip_prefix('a') {
                assert_eq!(i, a.to_string());
                a += 1;
            } else {
                assert_eq!(&m[1..], bb.to_string());
                bb += 1;
            }
        }
    }
}

/// Publishes `size`-byte messages to `ch` until nobody is subscribed any
/// more (or `max` messages); the number published. Each PUBLISH must be
/// answered promptly: the publisher never waits for a subscriber.
fn publish_until_gone(
    p: &mut RawClient,
    ch: &str,
    size: usize,
    max: usize,
    pause: Duration,
) -> usize {
    let msg = "x".repeat(size);
    for i in 0..max {
        let t = Instant::now();
        let r = p.cmd(&["PUBLISH", ch, &msg]);
        assert!(
            t.elapsed() < Duration::from_secs(2),
            "PUBLISH took {:?}",
            t.elapsed()
        );
        if r == int(0) {
            return i;
        }
        std::thread::sleep(pause);
    }
    max
}

/// Reads whatever the server had sent and expects the connection closed.
fn drain_until_closed(c: &mut RawClient) -> usize {
    let mut n = 0;
    c.set_timeout(Duration::from_secs(5));
    loop {
        match c.read_raw() {
            Ok(r) => n += r.len(),
            Err(ReadEnd::Closed) => return n,
            Err(ReadEnd::Timeout) => panic!("subscriber still connected after {n} bytes"),
        }
    }
}

#[test]
fn subscriber_that_never_reads_is_disconnected_at_the_hard_limit() {
    let s = Server::start(&[("client-output-buffer-limit", "pubsub 4mb 0 0")]);
    let mut slow = s.raw();
    let Frame::Integer(slow_id) = slow.cmd(&["CLIENT", "ID"]) else {
        panic!()
    };
    subscribe(&mut slow, &["firehose"]);
    let mut fast = s.raw();
    let Frame::Integer(fast_id) = fast.cmd(&["CLIENT", "ID"]) else {
        panic!()
    };
    subscribe(&mut fast, &["firehose"]);
    let mut other = s.raw();
    let mut p = s.raw();
    let size = 100 * 1024;
    // One reader keeps up; the other never reads. 400 × 100 KB takes the
    // slow one's output far past 4 MB beyond what the sockets hold.
    // Counts bytes only: parsing in a debug build could fall 4 MB behind.
    // The publisher keeps at most two messages ahead of it (the machine
    // may be busy), so only the slow one can reach the limit.
    let fast_got = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counter = fast_got.clone();
    let fast_reader = std::thread::spawn(move || {
        use std::io::Read;
        let mut buf = vec![0u8; 1 << 20];
        fast.set_timeout(Duration::from_secs(3));
        while let Ok(n @ 1..) = fast.sock.read(&mut buf) {
            counter.fetch_add(n, std::sync::atomic::Ordering::SeqCst);
        }
        counter.load(std::sync::atomic::Ordering::SeqCst)
    });
    let frame_len =
        |m: usize| cinnabar_tests::encode(&["message", "firehose", &"x".repeat(m)]).len();
    let msg = "x".repeat(size);
    let mut published = 0;
    for i in 0..400 {
        let wait = Instant::now();
        while fast_got.load(std::sync::atomic::Ordering::SeqCst) + 2 * frame_len(size)
            < i * frame_len(size)
        {
            assert!(wait.elapsed() < Duration::from_secs(5), "fast reader stuck");
            std::thread::sleep(Duration::from_millis(1));
        }
        let t = Instant::now();
        let r = p.cmd(&["PUBLISH", "firehose", &msg]);
        assert!(
            t.elapsed() < Duration::from_secs(2),
            "PUBLISH took {:?}",
            t.elapsed()
        );
        published += 1;
        if r == int(1) {
            break;
        }
        assert_eq!(r, int(2));
    }
    assert!(
        published < 400,
        "the slow subscriber was never disconnected"
    );
    // The one that went is the one that does not read.
    assert_eq!(other.cmd(&["PING"]), cinnabar_tests::simple("PONG"));
    let list = text(&other.cmd(&["CLIENT", "LIST"]));
    assert!(!list.contains(&format!("id={slow_id} ")), "{list}");
    assert!(list.contains(&format!("id={fast_id} ")), "{list}");
    // The slow client gets what the sockets held, then the close.
    let drained = drain_until_closed(&mut slow);
    assert!(drained < published * (size + 64));
    // The fast subscriber got every message.
    for _ in 0..5 {
        assert_eq!(p.cmd(&["PUBLISH", "firehose", "tail"]), int(1));
    }
    assert_eq!(
        fast_reader.join().unwrap(),
        published * frame_len(size) + 5 * frame_len(4)
    );
}

/// The output a subscriber has not read shows in CLIENT LIST (`omem`,
/// `oll`, `events=rw`), the number the output limit is checked against.
#[test]
fn client_list_shows_unread_output() {
    let s = Server::start(&[("client-output-buffer-limit", "pubsub 0 0 0")]);
    let mut slow = s.raw();
    subscribe(&mut slow, &["firehose"]);
    let mut p = s.raw();
    let msg = "x".repeat(100 * 1024);
    // 30 MB: far more than the sockets hold.
    for _ in 0..300 {
        assert_eq!(p.cmd(&["PUBLISH", "firehose", &msg]), int(1));
    }
    let list = text(&p.cmd(&["CLIENT", "LIST", "TYPE", "pubsub"]));
    let field = |name: &str| -> usize {
        let v = list
            .split(' ')
            .find_map(|f| f.strip_prefix(&format!("{name}=")));
        v.and_then(|v| v.trim().parse().ok()).unwrap_or(0)
    };
    assert!(field("omem") > 10 << 20, "{list}");
    assert_eq!(field("oll"), field("omem").div_ceil(16 * 1024), "{list}");
    assert!(list.contains(" events=rw "), "{list}");
}

#[test]
fn subscriber_over_the_soft_limit_too_long_is_disconnected() {
    let s = Server::start(&[("client-output-buffer-limit", "pubsub 0 256kb 1")]);
    let mut slow = s.raw();
    subscribe(&mut slow, &["soft"]);
    let mut p = s.raw();
    let start = Instant::now();
    let n = publish_until_gone(&mut p, "soft", 256 * 1024, 400, Duration::from_millis(40));
    assert!(n < 400, "never disconnected");
    // Over the soft limit for more than a whole second first.
    assert!(
        start.elapsed() > Duration::from_secs(1),
        "{:?}",
        start.elapsed()
    );
    drain_until_closed(&mut slow);
    assert_eq!(p.cmd(&["PING"]), cinnabar_tests::simple("PONG"));
}

#[test]
fn client_list_shows_subscriptions() {
    let s = Server::start(&[]);
    let mut c = s.raw();
    subscribe(&mut c, &["a", "b"]);
    c.send_cmd(&["PSUBSCRIBE", "p*"]);
    assert_eq!(c.read(), confirm("psubscribe", "p*", 3));
    c.send_cmd(&["SSUBSCRIBE", "s"]);
    assert_eq!(c.read(), confirm("ssubscribe", "s", 1));
    let mut o = s.raw();
    let list = text(&o.cmd(&["CLIENT", "LIST"]));
    let lines: Vec<&str> = list.lines().collect();
    assert_eq!(lines.len(), 2);
    assert!(
        lines[0].contains(" flags=P db=0 sub=2 psub=1 ssub=1 "),
        "{}",
        lines[0]
    );
    assert!(
        lines[1].contains(" flags=N db=0 sub=0 psub=0 ssub=0 "),
        "{}",
        lines[1]
    );
    let pubsub = text(&o.cmd(&["CLIENT", "LIST", "TYPE", "pubsub"]));
    assert_eq!(pubsub.lines().count(), 1);
    assert!(pubsub.contains("sub=2 psub=1 ssub=1"));
}

/// Commands and the keyspace events Redis 7.0.15 publishes for them
/// (`channel=message`, in order), starting with `notify-keyspace-events
/// KEA`. Recorded with a `PSUBSCRIBE __key*__:*` listener.
const EVENTS: &[(&str, &str)] = &[
        ("DEBUG SET-ACTIVE-EXPIRE 0", ""),
        ("SET s 1", "__keyspace@0__:s=set __keyevent@0__:set=s"),
        ("SET s 2 EX 100", "__keyspace@0__:s=set __keyevent@0__:set=s __keyspace@0__:s=expire __keyevent@0__:expire=s"),
        ("SET s 3 KEEPTTL", "__keyspace@0__:s=set __keyevent@0__:set=s"),
        ("SETEX s2 100 v", "__keyspace@0__:s2=set __keyevent@0__:set=s2 __keyspace@0__:s2=expire __keyevent@0__:expire=s2"),
        ("SETNX s 9", ""),
        ("GETSET s 5", "__keyspace@0__:s=set __keyevent@0__:set=s"),
        ("GETDEL s2", "__keyspace@0__:s2=del __keyevent@0__:del=s2"),
        ("GETEX s EX 50", "__keyspace@0__:s=expire __keyevent@0__:expire=s"),
        ("GETEX s PERSIST", "__keyspace@0__:s=persist __keyevent@0__:persist=s"),
        ("MSET a 1 b 2", "__keyspace@0__:a=set __keyevent@0__:set=a __keyspace@0__:b=set __keyevent@0__:set=b"),
        ("APPEND a x", "__keyspace@0__:a=append __keyevent@0__:append=a"),
        ("SETRANGE a 1 yy", "__keyspace@0__:a=setrange __keyevent@0__:setrange=a"),
        ("INCR n", "__keyspace@0__:n=incrby __keyevent@0__:incrby=n"),
        ("DECRBY n 2", "__keyspace@0__:n=incrby __keyevent@0__:incrby=n"),
        ("INCRBYFLOAT f 1.5", "__keyspace@0__:f=incrbyfloat __keyevent@0__:incrbyfloat=f"),
        ("GET nokey", ""),
        ("SETBIT bm 1 1", "__keyspace@0__:bm=setbit __keyevent@0__:setbit=bm"),
        ("BITOP OR bm2 bm bm", "__keyspace@0__:bm2=set __keyevent@0__:set=bm2"),
        ("BITFIELD bf SET u8 0 5", "__keyspace@0__:bf=setbit __keyevent@0__:setbit=bf"),
        ("DEL a b nokey", "__keyspace@0__:a=del __keyevent@0__:del=a __keyspace@0__:b=del __keyevent@0__:del=b"),
        ("UNLINK bm2", "__keyspace@0__:bm2=del __keyevent@0__:del=bm2"),
        ("EXPIRE s 100", "__keyspace@0__:s=expire __keyevent@0__:expire=s"),
        ("PEXPIRE s 100000", "__keyspace@0__:s=expire __keyevent@0__:expire=s"),
        ("PERSIST s", "__keyspace@0__:s=persist __keyevent@0__:persist=s"),
        ("EXPIRE s 0", "__keyspace@0__:s=del __keyevent@0__:del=s"),
        ("SET r1 v", "__keyspace@0__:r1=set __keyevent@0__:set=r1"),
        ("RENAME r1 r2", "__keyspace@0__:r1=rename_from __keyevent@0__:rename_from=r1 __keyspace@0__:r2=rename_to __keyevent@0__:rename_to=r2"),
        ("RENAMENX r2 r3", "__keyspace@0__:r2=rename_from __keyevent@0__:rename_from=r2 __keyspace@0__:r3=rename_to __keyevent@0__:rename_to=r3"),
        ("COPY r3 r4", "__keyspace@0__:r4=copy_to __keyevent@0__:copy_to=r4"),
        ("MOVE r4 1", "__keyspace@0__:r4=move_from __keyevent@0__:move_from=r4 __keyspace@1__:r4=move_to __keyevent@1__:move_to=r4"),
        ("COPY r3 r5 DB 2", "__keyspace@2__:r5=copy_to __keyevent@2__:copy_to=r5"),
        ("LPUSH l a b c", "__keyspace@0__:l=lpush __keyevent@0__:lpush=l"),
        ("RPUSH l d", "__keyspace@0__:l=rpush __keyevent@0__:rpush=l"),
        ("LINSERT l BEFORE a z", "__keyspace@0__:l=linsert __keyevent@0__:linsert=l"),
        ("LSET l 0 q", "__keyspace@0__:l=lset __keyevent@0__:lset=l"),
        ("LPOP l", "__keyspace@0__:l=lpop __keyevent@0__:lpop=l"),
        ("RPOP l", "__keyspace@0__:l=rpop __keyevent@0__:rpop=l"),
        ("LTRIM l 0 1", "__keyspace@0__:l=ltrim __keyevent@0__:ltrim=l"),
        ("LREM l 1 z", "__keyspace@0__:l=lrem __keyevent@0__:lrem=l"),
        ("LMOVE l l2 LEFT RIGHT", "__keyspace@0__:l2=rpush __keyevent@0__:rpush=l2 __keyspace@0__:l=lpop __keyevent@0__:lpop=l __keyspace@0__:l=del __keyevent@0__:del=l"),
        ("RPOPLPUSH l2 l", "__keyspace@0__:l=lpush __keyevent@0__:lpush=l __keyspace@0__:l2=rpop __keyevent@0__:rpop=l2 __keyspace@0__:l2=del __keyevent@0__:del=l2"),
        ("LPOP l 5", "__keyspace@0__:l=lpop __keyevent@0__:lpop=l __keyspace@0__:l=del __keyevent@0__:del=l"),
        ("BLPOP nol 0.01", ""),
        ("HSET h a 1 b 2", "__keyspace@0__:h=hset __keyevent@0__:hset=h"),
        ("HSETNX h c 3", "__keyspace@0__:h=hset __keyevent@0__:hset=h"),
        ("HINCRBY h a 1", "__keyspace@0__:h=hincrby __keyevent@0__:hincrby=h"),
        ("HINCRBYFLOAT h a 1.5", "__keyspace@0__:h=hincrbyfloat __keyevent@0__:hincrbyfloat=h"),
        ("HDEL h a", "__keyspace@0__:h=hdel __keyevent@0__:hdel=h"),
        ("HDEL h b c", "__keyspace@0__:h=hdel __keyevent@0__:hdel=h __keyspace@0__:h=del __keyevent@0__:del=h"),
        ("SADD s1 a b c", "__keyspace@0__:s1=sadd __keyevent@0__:sadd=s1"),
        ("SREM s1 a", "__keyspace@0__:s1=srem __keyevent@0__:srem=s1"),
        ("SMOVE s1 s2x b", "__keyspace@0__:s1=srem __keyevent@0__:srem=s1 __keyspace@0__:s2x=sadd __keyevent@0__:sadd=s2x"),
        ("SPOP s1", "__keyspace@0__:s1=spop __keyevent@0__:spop=s1 __keyspace@0__:s1=del __keyevent@0__:del=s1"),
        ("SADD s5 a b", "__keyspace@0__:s5=sadd __keyevent@0__:sadd=s5"),
        ("SINTERSTORE s6 s5 s5", "__keyspace@0__:s6=sinterstore __keyevent@0__:sinterstore=s6"),
        ("SUNIONSTORE s7 s5 s5", "__keyspace@0__:s7=sunionstore __keyevent@0__:sunionstore=s7"),
        ("SDIFFSTORE s8 s5 s5", ""),
        ("SPOP s5 5", "__keyspace@0__:s5=spop __keyevent@0__:spop=s5 __keyspace@0__:s5=del __keyevent@0__:del=s5"),
        ("ZADD z 1 a 2 b 3 c", "__keyspace@0__:z=zadd __keyevent@0__:zadd=z"),
        ("ZINCRBY z 1 a", "__keyspace@0__:z=zincr __keyevent@0__:zincr=z"),
        ("ZREM z a", "__keyspace@0__:z=zrem __keyevent@0__:zrem=z"),
        ("ZREMRANGEBYSCORE z 0 2", "__keyspace@0__:z=zremrangebyscore __keyevent@0__:zremrangebyscore=z"),
        ("ZADD z 1 a 2 b", "__keyspace@0__:z=zadd __keyevent@0__:zadd=z"),
        ("ZREMRANGEBYRANK z 0 0", "__keyspace@0__:z=zremrangebyrank __keyevent@0__:zremrangebyrank=z"),
        ("ZREMRANGEBYLEX z - +", "__keyspace@0__:z=zremrangebylex __keyevent@0__:zremrangebylex=z __keyspace@0__:z=del __keyevent@0__:del=z"),
        ("ZADD z 1 a 2 b 3 c", "__keyspace@0__:z=zadd __keyevent@0__:zadd=z"),
        ("ZPOPMIN z", "__keyspace@0__:z=zpopmin __keyevent@0__:zpopmin=z"),
        ("ZPOPMAX z", "__keyspace@0__:z=zpopmax __keyevent@0__:zpopmax=z"),
        ("ZUNIONSTORE z2 1 z", "__keyspace@0__:z2=zunionstore __keyevent@0__:zunionstore=z2"),
        ("ZINTERSTORE z3 1 z", "__keyspace@0__:z3=zinterstore __keyevent@0__:zinterstore=z3"),
        ("ZDIFFSTORE z4 1 z", "__keyspace@0__:z4=zdiffstore __keyevent@0__:zdiffstore=z4"),
        ("ZRANGESTORE z5 z 0 -1", "__keyspace@0__:z5=zrangestore __keyevent@0__:zrangestore=z5"),
        ("ZDIFFSTORE z4 1 nokey", "__keyspace@0__:z4=del __keyevent@0__:del=z4"),
        ("RPUSH sl 3 1 2", "__keyspace@0__:sl=rpush __keyevent@0__:rpush=sl"),
        ("SORT sl STORE sl2", "__keyspace@0__:sl2=sortstore __keyevent@0__:sortstore=sl2"),
        ("SORT nokey STORE sl2", "__keyspace@0__:sl2=del __keyevent@0__:del=sl2"),
        ("SET x 1 PX 1", "__keyspace@0__:x=set __keyevent@0__:set=x __keyspace@0__:x=expire __keyevent@0__:expire=x"),
        ("DEBUG SLEEP 0.01", ""),
        ("GET x", "__keyspace@0__:x=expired __keyevent@0__:expired=x"),
        ("HSET x a 1", "__keyspace@0__:x=hset __keyevent@0__:hset=x"),
        ("FLUSHDB", ""),
        ("CONFIG SET notify-keyspace-events KEAnm", ""),
        ("SET nn 1", "__keyspace@0__:nn=new __keyevent@0__:new=nn __keyspace@0__:nn=set __keyevent@0__:set=nn"),
        ("RENAME nn nn2", "__keyspace@0__:nn2=new __keyevent@0__:new=nn2 __keyspace@0__:nn=rename_from __keyevent@0__:rename_from=nn __keyspace@0__:nn2=rename_to __keyevent@0__:rename_to=nn2"),
        ("LPUSH nl a", "__keyspace@0__:nl=new __keyevent@0__:new=nl __keyspace@0__:nl=lpush __keyevent@0__:lpush=nl"),
        ("GET missing", "__keyspace@0__:missing=keymiss __keyevent@0__:keymiss=missing"),
        ("HGET missing f", "__keyspace@0__:missing=keymiss __keyevent@0__:keymiss=missing"),
        ("SMEMBERS missing", "__keyspace@0__:missing=keymiss __keyevent@0__:keymiss=missing"),
        ("ZSCORE missing a", "__keyspace@0__:missing=keymiss __keyevent@0__:keymiss=missing"),
        ("MGET missing nn2", "__keyspace@0__:missing=keymiss __keyevent@0__:keymiss=missing"),
        ("SUNION missing nl", "__keyspace@0__:missing=keymiss __keyevent@0__:keymiss=missing"),
        ("TYPE missing", "__keyspace@0__:missing=keymiss __keyevent@0__:keymiss=missing"),
        ("EXISTS missing", "__keyspace@0__:missing=keymiss __keyevent@0__:keymiss=missing"),
        ("PTTL missing", "__keyspace@0__:missing=keymiss __keyevent@0__:keymiss=missing"),
        ("EXPIRETIME missing", "__keyspace@0__:missing=keymiss __keyevent@0__:keymiss=missing"),
        ("OBJECT ENCODING missing", ""),
        ("MEMORY USAGE missing", ""),
        ("CONFIG SET notify-keyspace-events El", ""),
        ("SET e1 1", ""),
        ("LPUSH e2 a", "__keyevent@0__:lpush=e2"),
        ("RPOP e2", "__keyevent@0__:rpop=e2"),
        ("CONFIG SET notify-keyspace-events Kg", ""),
        ("SET e1 2", ""),
        ("EXPIRE e1 10", "__keyspace@0__:e1=expire"),
        ("DEL e1", "__keyspace@0__:e1=del"),
        ("CONFIG SET notify-keyspace-events Ex", ""),
        ("SET e3 1 PX 1", ""),
        ("DEBUG SLEEP 0.01", ""),
        ("GET e3", "__keyevent@0__:expired=e3"),
        ("CONFIG SET notify-keyspace-events \"\"", ""),
        ("SET e4 1", ""),
];

#[test]
fn keyspace_notifications_match_redis() {
    let s = Server::start(&[("enable-debug-command", "yes")]);
    let mut c = s.raw();
    let mut l = s.raw();
    assert_eq!(
        c.cmd(&["CONFIG", "SET", "notify-keyspace-events", "KEA"]),
        cinnabar_tests::ok()
    );
    l.send_cmd(&["PSUBSCRIBE", "__key*__:*"]);
    assert_eq!(l.read(), confirm("psubscribe", "__key*__:*", 1));
    // A marker after each command tells where its events end.
    l.send_cmd(&["SUBSCRIBE", "sync"]);
    assert_eq!(l.read(), confirm("subscribe", "sync", 2));
    let mut diffs = Vec::new();
    for (i, (line, want)) in EVENTS.iter().enumerate() {
        let args = protocol::split_args(line.as_bytes()).expect("quoting");
        let reply = c.cmd(&args);
        // Errors are expected (SUNION on a list); DEBUG must be enabled.
        assert!(
            !matches!(&reply, Frame::Error(e) if e.starts_with(b"ERR")),
            "{line}: {reply:?}"
        );
        assert_eq!(c.cmd(&["PUBLISH", "sync", &i.to_string()]), int(1));
        let mut got = Vec::new();
        loop {
            let Frame::Array(v) = l.read() else { panic!() };
            let s = |f: &Frame| match f {
                Frame::Bulk(x) => String::from_utf8_lossy(x).into_owned(),
                f => panic!("{f:?}"),
            };
            if s(&v[0]) == "message" {
                break;
            }
            got.push(format!("{}={}", s(&v[2]), s(&v[3])));
        }
        let got = got.join(" ");
        if got != *want {
            diffs.push(format!("{line}\n   want: {want}\n   got:  {got}"));
        }
    }
    assert!(diffs.is_empty(), "events differ:\n{}", diffs.join("\n"));
}

/// CLIENT REPLY OFF / SKIP silence replies, not the (un)subscribe
/// confirmations or the messages, which Redis sends as pushes (RESP3) and
/// in RESP2 alike.
#[test]
fn client_reply_off_keeps_pubsub_pushes() {
    let s = Server::start(&[]);
    let mut c = s.raw();
    assert!(matches!(c.cmd(&["HELLO", "3"]), Frame::Map(_)));
    c.send_cmd(&["CLIENT", "REPLY", "OFF"]);
    c.send_cmd(&["SUBSCRIBE", "channel"]);
    assert_eq!(
        c.read(),
        Frame::Push(vec![b("subscribe"), b("channel"), int(1)])
    );
    c.send_cmd(&["PSUBSCRIBE", "ch*"]);
    assert_eq!(
        c.read(),
        Frame::Push(vec![b("psubscribe"), b("ch*"), int(2)])
    );
    c.send_cmd(&["SET", "k", "v"]);
    let mut p = s.raw();
    assert_eq!(p.cmd(&["PUBLISH", "channel", "hello"]), int(2));
    assert_eq!(
        c.read(),
        Frame::Push(vec![b("message"), b("channel"), b("hello")])
    );
    assert_eq!(
        c.read(),
        Frame::Push(vec![b("pmessage"), b("ch*"), b("channel"), b("hello")])
    );
    // A message to itself is kept; the PUBLISH reply is not.
    c.send_cmd(&["PUBLISH", "channel", "self"]);
    assert_eq!(
        c.read(),
        Frame::Push(vec![b("message"), b("channel"), b("self")])
    );
    assert_eq!(
        c.read(),
        Frame::Push(vec![b("pmessage"), b("ch*"), b("channel"), b("self")])
    );
    c.send_cmd(&["UNSUBSCRIBE", "channel"]);
    assert_eq!(
        c.read(),
        Frame::Push(vec![b("unsubscribe"), b("channel"), int(1)])
    );
    c.send_cmd(&["PUNSUBSCRIBE", "ch*"]);
    assert_eq!(
        c.read(),
        Frame::Push(vec![b("punsubscribe"), b("ch*"), int(0)])
    );
    c.expect_silence(Duration::from_millis(100));

    // RESP2, with SKIP: the confirmation comes, and SKIP is used up.
    let mut c = s.raw();
    c.send_cmd(&["CLIENT", "REPLY", "SKIP"]);
    c.send_cmd(&["PSUBSCRIBE", "*"]);
    assert_eq!(c.read(), confirm("psubscribe", "*", 1));
    assert_eq!(c.cmd(&["PING"]), arr(vec![b("pong"), b("")]));
}

/// Requests that reach the server together run in their arrival order, as
/// Redis serves readable clients within one event-loop round: a PUBLISH
/// sent after another connection's UNSUBSCRIBE does not reach it. DEBUG
/// SLEEP holds the server while both arrive.
#[test]
fn requests_arriving_together_run_in_arrival_order() {
    let s = Server::start(&[("enable-debug-command", "yes")]);
    let mut sub = s.raw();
    let mut p = s.raw();
    let mut c = s.raw();
    for _ in 0..5 {
        subscribe(&mut sub, &["ch"]);
        c.send_cmd(&["DEBUG", "SLEEP", "0.1"]);
        std::thread::sleep(Duration::from_millis(20));
        sub.send_cmd(&["UNSUBSCRIBE"]);
        std::thread::sleep(Duration::from_millis(5));
        p.send_cmd(&["PUBLISH", "ch", "x"]);
        assert_eq!(c.read(), cinnabar_tests::ok());
        assert_eq!(sub.read(), confirm("unsubscribe", "ch", 0));
        assert_eq!(p.read(), int(0));
    }
}
