//! Corrupt DUMP payloads from Redis's integration/corrupt-dump suite,
//! against the built `cinnabar-server`: RESTORE refuses each with `Bad
//! data format` and logs (at verbose) the line Redis logs for it, which
//! the suite greps for.
//!
//! Every expectation was checked against Redis 7.0.15 (but the last
//! test's, which it skips); run `CINNABAR_BIN=$(command -v redis-server) cargo test -p
//! cinnabar-tests --test corrupt_dump` to check them again.

use cinnabar_tests::{err, int, is_real_redis, ok, simple, RawClient, RespFrame as Frame, Server};

fn server() -> (Server, RawClient) {
    let s = Server::start(&[("enable-debug-command", "yes"), ("loglevel", "verbose")]);
    let mut c = s.raw();
    assert_eq!(c.cmd(&["DEBUG", "SET-SKIP-CHECKSUM-VALIDATION", "1"]), ok());
    (s, c)
}

/// RESTOREs `payload` and checks the refusal, and that it logged one more
/// line holding `logged` (the log is shared by the cases of a server).
fn refused(s: &Server, c: &mut RawClient, payload: &[u8], logged: &str) {
    let before = s.log().matches(logged).count();
    assert_eq!(restore(c, payload), err("ERR Bad data format"), "{logged}");
    let after = s.log().matches(logged).count();
    assert_eq!(after, before + 1, "{logged}: {}", s.log());
}

fn restore(c: &mut RawClient, payload: &[u8]) -> Frame {
    c.cmd(&[b"RESTORE".as_slice(), b"key", b"0", payload, b"REPLACE"])
}

#[test]
fn blobs_that_fail_their_checks_name_their_encoding() {
    let (s, mut c) = server();
    for sanitize in ["no", "yes"] {
        let set = ["CONFIG", "SET", "sanitize-dump-payload", sanitize];
        assert_eq!(c.cmd(&set), ok());
        // A stream node's listpack whose header size is wrong.
        refused(&s, &mut c, b"\x0f\x01\x10\x00\x00\x00\x00\x00\x00\x00\x02\x00\x00\x00\x00\x00\x00\x00\x02@U_\x00\x00\x00\x0f\x00\x01\x01\x00\x01\x02\x01\x881\x00\x00\x00\x00\x00\x00\x00\x09\x882\x00\x00\x00\x00\x00\x00\x00\x09\x00\x01\x00\x01\x00\x01\x00\x01\x02\x02\x881\x00\x00\x00\x00\x00\x00\x00\x09\x88a\x00\x00\x00\x00\x00\x00\x00\x09\x882\x00\x00\x00\x00\x00\x00\x00\x09\x88b\x00\x00\x00\x00\x00\x00\x00\x09\x08\x01\xff\x0a\x01\x00\x00\x09\x00E\x91\x0a\x87/\xa5\xf9.", "Stream listpack integrity check failed");
        // A zset ziplist with an entry of a bad encoding, then one whose
        // tail offset is wrong.
        refused(&s, &mut c, b"\x0c==\x00\x00\x00:\x00\x00\x00\x14\x00\x00\xf1\x02\xf1\x02\x02_1\x04\xf2\x02\xf3\x02\xf3\x02\x02_3\x04\xf4\x02\xee\x02\xf5\x02\x02_5\x04\xf6\x02\xf7\x02\xf7\x02\x02_7\x04\xf8\x02\xf9\x02\xf9\x02\x02_9\x04\xfa\xff\x09\x00\xae\xf9w*G$3\xf6", "Zset ziplist integrity check failed");
        refused(&s, &mut c, b"\x0c\x19\x19\x00\x00\x00\x02\x00\x00\x00\x06\x00\x00\xf1\x02\xf1\x02\x02_1\x04\xf2\x02\xf3\x02\xf3\xff\x09\x00Mr{\x97\xcd\x9ap\xc1", "Zset ziplist integrity check failed");
        // An empty zipmap is refused, not skipped as an empty key.
        refused(
            &s,
            &mut c,
            b"\x09\x02\x00\xff\x09\x00\xc0\xf1\xb8gL\x16\xac\xe3",
            "Zipmap integrity check failed",
        );
        // Two consumers of one group with the same name.
        refused(&s, &mut c, b"\x0f\x00\x00\x00\x00\x01\x07mygroup\x00\x00\x00\x02\x04name*L\xaa\x9a}\x01\x00\x00\x00\x04name+L\xaa\x9a}\x01\x00\x00\x00\x0a\x00\xcc\xed\x8c\xa7b\xee\xc7\xc8", "Duplicate stream consumer detected");
        // A quicklist's plain node of length 0.
        let p = b"\x12\x01\x01\x00\x0a\x00\x8f\xc6\xc0W\x1c\x0a\xb3<";
        assert_eq!(restore(&mut c, p), err("ERR Bad data format"));
    }
    assert_eq!(c.cmd(&["EXISTS", "key"]), int(0));
}

/// A hash listpack with a repeated field, restored unsanitized into a
/// server whose listpack limit makes it a table: Redis panics logging
/// `listpack with dup elements`; we refuse it, logging those words once.
#[test]
fn hash_listpack_with_dup_fields_is_refused() {
    if is_real_redis() {
        return;
    }
    let (s, mut c) = server();
    let set = ["CONFIG", "SET", "hash-max-listpack-entries", "1"];
    assert_eq!(c.cmd(&set), ok());
    refused(&s, &mut c, b"\x10\x17\x17\x00\x00\x00\x04\x00\x82a\x00\x03\x82b\x00\x03\x82a\x00\x03\x82d\x00\x03\xff\x0a\x00\xc0\xcf\xa6\x87\xe5\xa7\xc5\xbe", "listpack with dup elements");
    assert_eq!(c.cmd(&["PING"]), simple("PONG"));
}
