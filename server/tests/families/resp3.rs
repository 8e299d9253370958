//! RESP2 and RESP3 reply shapes of the same commands, byte for byte as
//! redis-server 7.0.15 sends them.

use cinnabar_server::testkit::*;

/// Each command with its RESP2 and its RESP3 reply.
const CASES: &[(&str, &[u8], &[u8])] = &[
    ("ZADD z 1.5 a 2 b 3 c", b":3\r\n", b":3\r\n"),
    ("HSET h f v", b":1\r\n", b":1\r\n"),
    ("SADD s x", b":1\r\n", b":1\r\n"),
    ("ZSCORE z a", b"$3\r\n1.5\r\n", b",1.5\r\n"),
    ("ZSCORE z nope", b"$-1\r\n", b"_\r\n"),
    (
        "ZMSCORE z a nope",
        b"*2\r\n$3\r\n1.5\r\n$-1\r\n",
        b"*2\r\n,1.5\r\n_\r\n",
    ),
    ("ZINCRBY z 1 a", b"$3\r\n2.5\r\n", b",2.5\r\n"),
    (
        "ZRANGE z 0 1 WITHSCORES",
        b"*4\r\n$1\r\nb\r\n$1\r\n2\r\n$1\r\na\r\n$3\r\n2.5\r\n",
        b"*2\r\n*2\r\n$1\r\nb\r\n,2\r\n*2\r\n$1\r\na\r\n,2.5\r\n",
    ),
    // Without a count ZPOPMIN is flat in RESP3 too; with one, pairs.
    (
        "ZPOPMIN z",
        b"*2\r\n$1\r\nb\r\n$1\r\n2\r\n",
        b"*2\r\n$1\r\nb\r\n,2\r\n",
    ),
    (
        "ZPOPMAX z 1",
        b"*2\r\n$1\r\nc\r\n$1\r\n3\r\n",
        b"*1\r\n*2\r\n$1\r\nc\r\n,3\r\n",
    ),
    (
        "HGETALL h",
        b"*2\r\n$1\r\nf\r\n$1\r\nv\r\n",
        b"%1\r\n$1\r\nf\r\n$1\r\nv\r\n",
    ),
    ("SMEMBERS s", b"*1\r\n$1\r\nx\r\n", b"~1\r\n$1\r\nx\r\n"),
    ("GET nokey", b"$-1\r\n", b"_\r\n"),
    ("LPOP nolist", b"$-1\r\n", b"_\r\n"),
    (
        "HRANDFIELD h 1 WITHVALUES",
        b"*2\r\n$1\r\nf\r\n$1\r\nv\r\n",
        b"*1\r\n*2\r\n$1\r\nf\r\n$1\r\nv\r\n",
    ),
    (
        "ZRANDMEMBER z 1 WITHSCORES",
        b"*2\r\n$1\r\na\r\n$3\r\n2.5\r\n",
        b"*1\r\n*2\r\n$1\r\na\r\n,2.5\r\n",
    ),
    (
        "CONFIG GET maxmemory",
        b"*2\r\n$9\r\nmaxmemory\r\n$1\r\n0\r\n",
        b"%1\r\n$9\r\nmaxmemory\r\n$1\r\n0\r\n",
    ),
];

fn check(resp3: bool) {
    let mut h = Harness::new();
    if resp3 {
        h.resp3();
    }
    for (line, two, three) in CASES {
        let args: Vec<&str> = line.split(' ').collect();
        let want = if resp3 { three } else { two };
        let got = h.raw(&args);
        assert_eq!(
            String::from_utf8_lossy(&got),
            String::from_utf8_lossy(want),
            "{line} (RESP{})",
            if resp3 { 3 } else { 2 }
        );
    }
}

#[test]
fn resp2_shapes() {
    check(false);
}

#[test]
fn resp3_shapes() {
    check(true);
}

#[test]
fn hello_switches_protocol_both_ways() {
    let mut h = Harness::new();
    h.run(&["SET", "k", "v"]);
    h.resp3();
    assert_eq!(h.raw(&["GET", "nokey"]), b"_\r\n");
    // HELLO answers in the protocol it switches to: a flat array here.
    let Frame::Array(hello) = h.run(&["HELLO", "2"]) else {
        panic!("HELLO 2 answers with an array");
    };
    assert_eq!(hello[4..6], [bulk("proto"), int(2)]);
    assert_eq!(h.raw(&["GET", "nokey"]), b"$-1\r\n");
}

/// One command, several replies: SUBSCRIBE confirms each channel with a
/// push of its own (bytes as Redis 7.0.15 sends them).
#[test]
fn subscribe_pushes_one_reply_per_channel() {
    let mut h = Harness::new();
    h.resp3();
    let id = h.client;
    let push = |ch: &str, n: i64| Frame::Push(vec![bulk("subscribe"), bulk(ch), int(n)]);
    assert_eq!(
        h.frames_on(id, &["SUBSCRIBE", "a", "b"]),
        vec![push("a", 1), push("b", 2)]
    );
}
