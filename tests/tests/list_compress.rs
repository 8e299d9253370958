//! `list-compress-depth`: DEBUG OBJECT's quicklist fields and the RDB size
//! of compressed lists as Redis 7.0.15 reports them, and RDB files with
//! compressed list nodes crossing between cinnabar and the real Redis.

use cinnabar_tests::{is_real_redis, ok, text, tool, RawClient, RespFrame, Server, TempDir};
use std::path::Path;

fn must(c: &mut RawClient, args: &[&str]) {
    let r = c.cmd(args);
    assert!(!matches!(r, RespFrame::Error(_)), "{args:?} -> {r:?}");
}

/// `field:value` of DEBUG OBJECT `key`.
fn field(c: &mut RawClient, key: &str, name: &str) -> String {
    let line = text(&c.cmd(&["DEBUG", "OBJECT", key]));
    line.split(' ')
        .find_map(|f| f.strip_prefix(name)?.strip_prefix(':'))
        .unwrap_or_else(|| panic!("{name} in {line}"))
        .to_string()
}

/// A list of ten 3000-byte elements (five nodes) and one of 10,000 short
/// ones (17 nodes), made while `list-compress-depth` is `depth`.
fn populate(c: &mut RawClient, depth: usize) {
    must(
        c,
        &["CONFIG", "SET", "list-compress-depth", &depth.to_string()],
    );
    let big = "a".repeat(3000);
    for _ in 0..10 {
        must(c, &["RPUSH", "big", &big]);
    }
    let elems: Vec<String> = (0..10_000).map(|i| format!("element-{i}")).collect();
    for chunk in elems.chunks(1000) {
        let mut args = vec!["RPUSH", "many"];
        args.extend(chunk.iter().map(String::as_str));
        must(c, &args);
    }
    must(c, &["CONFIG", "SET", "list-compress-depth", "0"]);
}

/// Values measured on redis-server 7.0.15 with `rdbcompression no`.
#[test]
fn debug_object_reports_compressed_lists_as_redis() {
    let s = Server::start(&[("enable-debug-command", "yes"), ("rdbcompression", "no")]);
    let mut c = s.raw();
    populate(&mut c, 1);
    let got: Vec<String> = ["ql_nodes", "ql_compressed", "ql_uncompressed_size"]
        .iter()
        .map(|f| field(&mut c, "big", f))
        .collect();
    assert_eq!(got, ["5", "1", "30075"]);
    assert_eq!(field(&mut c, "big", "serializedlength"), "12322");
    assert_eq!(field(&mut c, "many", "serializedlength"), "59883");
    assert_eq!(field(&mut c, "many", "ql_compressed"), "1");
    // Compression is the list's own from its creation: CONFIG SET changes
    // lists created afterwards only.
    must(&mut c, &["RPUSH", "plain", "x"]);
    must(&mut c, &["CONFIG", "SET", "list-compress-depth", "2"]);
    must(&mut c, &["RPUSH", "plain", &"b".repeat(9000)]);
    assert_eq!(field(&mut c, "plain", "ql_compressed"), "0");
    must(&mut c, &["RPUSH", "big", "tail"]);
    assert_eq!(field(&mut c, "big", "ql_compressed"), "1");
    // Reads and writes in the compressed middle.
    assert_eq!(text(&c.cmd(&["LINDEX", "many", "5000"])), "element-5000");
    must(&mut c, &["LSET", "many", "5000", "changed"]);
    assert_eq!(text(&c.cmd(&["LINDEX", "many", "5000"])), "changed");
    assert_eq!(
        c.cmd(&["LINSERT", "many", "BEFORE", "element-7000", "new"]),
        RespFrame::Integer(10_001)
    );
    assert_eq!(c.cmd(&["LREM", "many", "0", "new"]), RespFrame::Integer(1));
    assert_eq!(text(&c.cmd(&["LINDEX", "many", "7000"])), "element-7000");
}

fn check(c: &mut RawClient) -> Vec<String> {
    let big = "a".repeat(3000);
    assert_eq!(
        c.cmd(&["LRANGE", "big", "0", "-1"]),
        RespFrame::Array(vec![RespFrame::Bulk(big.into_bytes().into()); 10])
    );
    let many = c.cmd(&["LRANGE", "many", "0", "-1"]);
    let want: Vec<RespFrame> = (0..10_000)
        .map(|i| RespFrame::Bulk(format!("element-{i}").into_bytes().into()))
        .collect();
    assert_eq!(many, RespFrame::Array(want));
    ["big", "many"]
        .iter()
        .flat_map(|k| ["ql_nodes", "ql_compressed", "serializedlength"].map(|f| field(c, k, f)))
        .collect()
}

fn start(bin: Option<&Path>, dir: &str) -> Server {
    let opts = [
        ("dir", dir),
        ("enable-debug-command", "yes"),
        ("rdbcompression", "no"),
        ("list-compress-depth", "1"),
    ];
    match bin {
        Some(b) => Server::start_bin(b, &opts),
        None => Server::start(&opts),
    }
}

/// Each server saves compressed lists; the other loads them (and
/// compresses them again) with the same contents and layout.
#[test]
fn compressed_list_rdb_crosses_both_ways() {
    if is_real_redis() {
        return;
    }
    let Some(redis) = tool("redis-server") else {
        eprintln!("redis-server not installed: skipped");
        return;
    };
    for (from, to) in [(Some(redis.as_path()), None), (None, Some(redis.as_path()))] {
        let src = TempDir::new("qlzf-src");
        let s = start(from, src.dir());
        let mut c = s.raw();
        populate(&mut c, 1);
        let before = check(&mut c);
        assert_eq!(c.cmd(&["SAVE"]), ok());
        let dst = TempDir::new("qlzf-dst");
        std::fs::copy(src.path().join("dump.rdb"), dst.path().join("dump.rdb")).unwrap();
        let d = start(to, dst.dir());
        let mut dc = d.raw();
        assert_eq!(check(&mut dc), before, "{from:?} -> {to:?}");
    }
}

/// A list keeps its nodes through a save and a load (Redis writes each node
/// as it holds it and loads it as one node), whatever
/// `list-max-listpack-size` says meanwhile; the DUMP of such a list is
/// Redis's byte for byte (checked on both servers by the same figures).
#[test]
fn lists_keep_their_nodes_through_a_reload() {
    let s = Server::start(&[("enable-debug-command", "yes")]);
    let mut c = s.raw();
    let nodes = |c: &mut RawClient| field(c, "l", "ql_nodes");
    must(&mut c, &["CONFIG", "SET", "list-max-listpack-size", "4"]);
    let elems: Vec<String> = (1..=10).map(|i| i.to_string()).collect();
    let mut args = vec!["RPUSH", "l"];
    args.extend(elems.iter().map(String::as_str));
    must(&mut c, &args);
    assert_eq!(nodes(&mut c), "3");
    must(&mut c, &["CONFIG", "SET", "list-max-listpack-size", "-2"]);
    assert_eq!(c.cmd(&["DEBUG", "RELOAD"]), ok());
    assert_eq!(nodes(&mut c), "3");
    // The new fill applies to the loaded tail node: 2 + 3 fit.
    must(&mut c, &["RPUSH", "l", "11", "12", "13"]);
    assert_eq!(nodes(&mut c), "3");
    must(&mut c, &["CONFIG", "SET", "list-max-listpack-size", "4"]);
    assert_eq!(c.cmd(&["DEBUG", "RELOAD"]), ok());
    must(&mut c, &["RPUSH", "l", "14"]);
    assert_eq!(nodes(&mut c), "4");
    // Nodes of 4, 4, 5 and 1 elements.
    let RespFrame::Bulk(dump) = c.cmd(&["DUMP", "l"]) else {
        panic!("DUMP")
    };
    let want = [
        0x12, 0x04, 0x02, 0x0f, 0x0f, 0x00, 0x00, 0x00, 0x04, 0x00, 0x01, 0x01, 0x02, 0x01, 0x03,
        0x01, 0x04, 0x01, 0xff, 0x02, 0x0f, 0x0f, 0x00, 0x00, 0x00, 0x04, 0x00, 0x05, 0x01, 0x06,
        0x01, 0x07, 0x01, 0x08, 0x01, 0xff, 0x02, 0x11, 0x11, 0x00, 0x00, 0x00, 0x05, 0x00, 0x09,
        0x01, 0x0a, 0x01, 0x0b, 0x01, 0x0c, 0x01, 0x0d, 0x01, 0xff, 0x02, 0x09, 0x09, 0x00, 0x00,
        0x00, 0x01, 0x00, 0x0e, 0x01, 0xff,
    ];
    assert_eq!(&dump[..dump.len() - 10], &want[..]);
}
