//! Edges Redis's own suite checks, against the built `cinnabar-server`:
//! plain quicklist nodes (DEBUG QUICKLIST-PACKED-THRESHOLD), DEBUG LOADAOF,
//! BITFIELD's dirty counting, eviction at CONFIG SET maxmemory, DEBUG
//! HTSTATS and HTSTATS-KEY.
//!
//! Every expectation was checked against Redis 7.0.15; run
//! `CINNABAR_BIN=$(command -v redis-server) cargo test -p cinnabar-tests
//! --test debug_edges` to check them again.

use cinnabar_tests::{bulk, err, info_field, int, ok, text, RawClient, RespFrame as Frame, Server};
use std::time::Duration;

fn debug_server() -> Server {
    Server::start(&[("enable-debug-command", "yes")])
}

fn dirty(c: &mut RawClient) -> i64 {
    let Frame::Bulk(info) = c.cmd(&["INFO", "persistence"]) else {
        panic!("INFO is a bulk string");
    };
    let info = String::from_utf8_lossy(&info).into_owned();
    info.lines()
        .find_map(|l| l.strip_prefix("rdb_changes_since_last_save:"))
        .and_then(|v| v.trim().parse().ok())
        .expect("rdb_changes_since_last_save")
}

fn ql_nodes(c: &mut RawClient, key: &str) -> String {
    let Frame::Simple(s) = c.cmd(&["DEBUG", "OBJECT", key]) else {
        panic!("DEBUG OBJECT is a status reply");
    };
    let s = String::from_utf8_lossy(&s).into_owned();
    s.split(' ')
        .find_map(|f| f.strip_prefix("ql_nodes:"))
        .expect("ql_nodes")
        .to_string()
}

#[test]
fn quicklist_packed_threshold_makes_plain_nodes() {
    let s = debug_server();
    let mut c = s.raw();
    let bad = err("ERR argument must be a memory value bigger than 1 and smaller than 4gb");
    for v in ["abc", "-1", "4gb", "5gb", "1.5k", "-0"] {
        assert_eq!(
            c.cmd(&["DEBUG", "QUICKLIST-PACKED-THRESHOLD", v]),
            bad,
            "{v}"
        );
    }
    for v in ["1", "1b", "1K", "0"] {
        assert_eq!(
            c.cmd(&["DEBUG", "QUICKLIST-PACKED-THRESHOLD", v]),
            ok(),
            "{v}"
        );
    }
    assert_eq!(c.cmd(&["RPUSH", "l", "a", "b", "c"]), int(3));
    assert_eq!(ql_nodes(&mut c, "l"), "1");
    assert_eq!(c.cmd(&["DEBUG", "QUICKLIST-PACKED-THRESHOLD", "1b"]), ok());
    // Every element is now large: each push takes a node of its own, and a
    // large LSET value splits the packed node around it.
    assert_eq!(c.cmd(&["RPUSH", "l", "dddd"]), int(4));
    assert_eq!(ql_nodes(&mut c, "l"), "2");
    assert_eq!(c.cmd(&["LSET", "l", "1", "xxxxxxx"]), ok());
    assert_eq!(ql_nodes(&mut c, "l"), "4");
    assert_eq!(c.cmd(&["LINSERT", "l", "AFTER", "xxxxxxx", "y"]), int(5));
    assert_eq!(ql_nodes(&mut c, "l"), "5");
    assert_eq!(
        c.cmd(&["LRANGE", "l", "0", "-1"]),
        Frame::Array(["a", "xxxxxxx", "y", "c", "dddd"].map(bulk).to_vec())
    );
    assert_eq!(c.cmd(&["DEBUG", "QUICKLIST-PACKED-THRESHOLD", "5b"]), ok());
    assert_eq!(c.cmd(&["DEL", "l"]), int(1));
    assert_eq!(c.cmd(&["RPUSH", "l", "aa", "bb", "cc", "dd", "ee"]), int(5));
    assert_eq!(c.cmd(&["LSET", "l", "2", "eeeeeeeeee"]), ok());
    assert_eq!(ql_nodes(&mut c, "l"), "3");
    assert_eq!(c.cmd(&["DEBUG", "QUICKLIST-PACKED-THRESHOLD", "0"]), ok());
    assert_eq!(c.cmd(&["RPUSH", "l", "ffffffffff"]), int(6));
    assert_eq!(ql_nodes(&mut c, "l"), "3");
}

#[test]
fn debug_loadaof_reloads_what_the_aof_holds() {
    let s = Server::start(&[("enable-debug-command", "yes"), ("appendonly", "yes")]);
    let mut c = s.raw();
    assert_eq!(c.cmd(&["SET", "foo", "bar", "EX", "100"]), ok());
    assert_eq!(c.cmd(&["SET", "foo", "bar2", "KEEPTTL"]), ok());
    assert_eq!(c.cmd(&["SET", "p", "v", "EX", "100"]), ok());
    assert_eq!(c.cmd(&["GETEX", "p", "PERSIST"]), bulk("v"));
    assert_eq!(c.cmd(&["DEBUG", "LOADAOF"]), ok());
    assert_eq!(c.cmd(&["DBSIZE"]), int(2));
    assert_eq!(c.cmd(&["GET", "foo"]), bulk("bar2"));
    let Frame::Integer(ttl) = c.cmd(&["TTL", "foo"]) else {
        panic!("TTL is an integer");
    };
    assert!((90..=100).contains(&ttl), "{ttl}");
    assert_eq!(c.cmd(&["TTL", "p"]), int(-1));
    // What was loaded is not counted as new changes.
    assert_eq!(dirty(&mut c), 0);
}

/// With the AOF off, DEBUG LOADAOF loads what the last BGREWRITEAOF wrote.
#[test]
fn debug_loadaof_with_the_aof_off_loads_the_last_rewrite() {
    let s = debug_server();
    let mut c = s.raw();
    assert_eq!(c.cmd(&["SET", "x", "10", "EX", "1000"]), ok());
    assert_eq!(
        c.cmd(&["CONFIG", "SET", "aof-use-rdb-preamble", "no"]),
        ok()
    );
    assert_eq!(
        c.cmd(&["BGREWRITEAOF"]),
        Frame::Simple("Background append only file rewriting started".into())
    );
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let Frame::Bulk(info) = c.cmd(&["INFO", "persistence"]) else {
            panic!("INFO is a bulk string");
        };
        if String::from_utf8_lossy(&info).contains("aof_rewrite_in_progress:0") {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "rewrite never ended");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(c.cmd(&["SET", "y", "later"]), ok());
    assert_eq!(c.cmd(&["DEBUG", "LOADAOF"]), ok());
    assert_eq!(c.cmd(&["GET", "x"]), bulk("10"));
    assert_eq!(c.cmd(&["EXISTS", "y"]), int(0));
    let Frame::Integer(ttl) = c.cmd(&["TTL", "x"]) else {
        panic!("TTL is an integer");
    };
    assert!((900..=1000).contains(&ttl), "{ttl}");
}

#[test]
fn setbit_and_bitfield_count_only_changes() {
    let s = debug_server();
    let mut c = s.raw();
    let d0 = dirty(&mut c);
    // Creating the key counts, a field written with its own value does not.
    c.cmd(&["BITFIELD", "f", "SET", "i5", "0", "0"]);
    assert_eq!(dirty(&mut c), d0 + 1);
    c.cmd(&["BITFIELD", "f", "SET", "i5", "0", "0"]);
    c.cmd(&["SETBIT", "f", "0", "0"]);
    assert_eq!(dirty(&mut c), d0 + 1);
    c.cmd(&[
        "BITFIELD", "f", "SET", "i5", "0", "1", "SET", "i5", "0", "1",
    ]);
    assert_eq!(dirty(&mut c), d0 + 2);
    c.cmd(&["BITFIELD", "f", "INCRBY", "i5", "0", "0"]);
    assert_eq!(dirty(&mut c), d0 + 2);
    // Two changes and a growth of the string.
    c.cmd(&[
        "BITFIELD", "f", "SET", "i5", "0", "2", "SET", "i5", "5", "3", "SET", "i5", "0", "2",
    ]);
    assert_eq!(dirty(&mut c), d0 + 5);
    // Growing alone counts once.
    c.cmd(&["BITFIELD", "f", "SET", "i5", "100", "0"]);
    assert_eq!(dirty(&mut c), d0 + 6);
    c.cmd(&[
        "BITFIELD", "f", "OVERFLOW", "FAIL", "INCRBY", "u2", "0", "100",
    ]);
    assert_eq!(dirty(&mut c), d0 + 6);
    // Once the command grows the string, each of its writes counts.
    c.cmd(&[
        "BITFIELD", "f", "SET", "i5", "200", "0", "SET", "i5", "200", "0",
    ]);
    assert_eq!(dirty(&mut c), d0 + 8);
    // A new key counts its change once.
    c.cmd(&["BITFIELD", "g", "INCRBY", "i5", "0", "1"]);
    assert_eq!(dirty(&mut c), d0 + 9);
    c.cmd(&["BITFIELD", "g", "INCRBY", "i5", "0", "1"]);
    assert_eq!(dirty(&mut c), d0 + 10);
}

#[test]
fn config_set_maxmemory_evicts_at_once() {
    let s = debug_server();
    let mut c = s.raw();
    let mut sub = s.raw();
    assert_eq!(
        c.cmd(&["CONFIG", "SET", "notify-keyspace-events", "Ee"]),
        ok()
    );
    assert_eq!(
        c.cmd(&["CONFIG", "SET", "maxmemory-policy", "allkeys-lru"]),
        ok()
    );
    sub.send_cmd(&["PSUBSCRIBE", "*"]);
    sub.read();
    assert_eq!(c.cmd(&["SET", "foo", "bar"]), ok());
    assert_eq!(c.cmd(&["CONFIG", "SET", "maxmemory", "1"]), ok());
    assert_eq!(
        sub.read(),
        Frame::Array(
            ["pmessage", "*", "__keyevent@0__:evicted", "foo"]
                .map(bulk)
                .to_vec()
        )
    );
    assert_eq!(c.cmd(&["CONFIG", "SET", "maxmemory", "0"]), ok());
    assert_eq!(c.cmd(&["DBSIZE"]), int(0));
    sub.expect_silence(Duration::from_millis(50));
}

/// The server's clock never runs behind the wall clock: a deadline set at
/// the client's "now + 10 s" never shows more than 10 s left.
#[test]
fn getex_pxat_never_shows_more_time_than_given() {
    let s = debug_server();
    let mut c = s.raw();
    assert_eq!(c.cmd(&["SET", "foo", "bar"]), ok());
    for _ in 0..200 {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis() as i64;
        let at = (now + 10_000).to_string();
        assert_eq!(c.cmd(&["GETEX", "foo", "PXAT", &at]), bulk("bar"));
        let Frame::Integer(left) = c.cmd(&["PTTL", "foo"]) else {
            panic!("PTTL is an integer");
        };
        assert!((5000..=10_000).contains(&left), "{left}");
        std::thread::sleep(Duration::from_micros(370));
    }
}

fn rbs(c: &mut RawClient, name: &str) -> usize {
    let Frame::Bulk(list) = c.cmd(&["CLIENT", "LIST"]) else {
        panic!("CLIENT LIST is a bulk string");
    };
    let list = String::from_utf8_lossy(&list).into_owned();
    let line = list
        .lines()
        .find(|l| l.contains(&format!(" name={name} ")))
        .expect("the named client");
    line.split(' ')
        .find_map(|f| f.strip_prefix("rbs="))
        .and_then(|v| v.parse().ok())
        .expect("rbs")
}

/// The reply buffer shrinks to 1 KB once idle past the peak reset time and
/// grows back, doubling up to 16 KB, while replies fill it.
#[test]
fn reply_buffer_shrinks_when_idle_and_grows_when_busy() {
    let s = debug_server();
    let mut c = s.raw();
    let mut tc = s.raw();
    assert_eq!(
        c.cmd(&["DEBUG", "REPLYBUFFER", "PEAK-RESET-TIME", "100"]),
        ok()
    );
    assert_eq!(tc.cmd(&["CLIENT", "SETNAME", "test_client"]), ok());
    assert_eq!(rbs(&mut c, "test_client"), 16384);
    let wait = |c: &mut RawClient, tc: &mut RawClient, get: bool, ok: &dyn Fn(usize) -> bool| {
        for _ in 0..20 {
            if get {
                tc.cmd(&["GET", "bigval"]);
            }
            if ok(rbs(c, "test_client")) {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        panic!("rbs is {}", rbs(c, "test_client"));
    };
    wait(&mut c, &mut tc, false, &|n| (1024..2046).contains(&n));
    assert_eq!(c.cmd(&["SET", "bigval", &"x".repeat(32768)]), ok());
    assert_eq!(
        c.cmd(&["DEBUG", "REPLYBUFFER", "PEAK-RESET-TIME", "never"]),
        ok()
    );
    wait(&mut c, &mut tc, true, &|n| (16384..32768).contains(&n));
    // Both resizes counted (INFO stats), the shrinks at least once each.
    let counter = |c: &mut RawClient, f: &str| -> u64 {
        info_field(c, "stats", f).parse().expect("a number")
    };
    assert!(counter(&mut c, "reply_buffer_shrinks") >= 1);
    assert!(counter(&mut c, "reply_buffer_expands") >= 4);
    assert_eq!(
        c.cmd(&["DEBUG", "REPLYBUFFER", "PEAK-RESET-TIME", "reset"]),
        ok()
    );
    assert_eq!(c.cmd(&["DEBUG", "REPLYBUFFER", "RESIZING", "0"]), ok());
    assert_eq!(
        c.cmd(&["DEBUG", "REPLYBUFFER", "PEAK-RESET-TIME", "x"]),
        err("ERR value is not an integer or out of range")
    );
}

/// DEBUG SET-SKIP-CHECKSUM-VALIDATION: a payload whose CRC does not match
/// restores once checks are off; a corrupt ziplist is refused either way,
/// with the integrity failure in the verbose log.
#[test]
fn skip_checksum_validation() {
    let s = Server::start(&[("enable-debug-command", "yes"), ("loglevel", "verbose")]);
    let mut c = s.raw();
    let nocrc = b"\x00\x01v\n\x00\x00\x00\x00\x00\x00\x00\x00\x00";
    let restore = |c: &mut RawClient, key: &str, p: &[u8]| {
        c.cmd(&[b"RESTORE".as_slice(), key.as_bytes(), b"0", p])
    };
    assert_eq!(
        restore(&mut c, "k", nocrc),
        err("ERR DUMP payload version or checksum are wrong")
    );
    assert_eq!(c.cmd(&["DEBUG", "SET-SKIP-CHECKSUM-VALIDATION", "1"]), ok());
    assert_eq!(restore(&mut c, "k", nocrc), ok());
    assert_eq!(c.cmd(&["GET", "k"]), bulk("v"));
    let badzl = b"\x0D\x1B\x1B\x00\x00\x00\x16\x00\x00\x00\x04\x00\x00\x02\x61\x00\x04\x02\x62\x00\x04\x14\x63\x00\x04\x02\x64\x00\xFF\x09\x00\x00\x00\x00\x00\x00\x00\x00\x00";
    assert_eq!(restore(&mut c, "z", badzl), err("ERR Bad data format"));
    assert!(s.log().contains("integrity check failed"), "{}", s.log());
    assert_eq!(c.cmd(&["DEBUG", "SET-SKIP-CHECKSUM-VALIDATION", "0"]), ok());
    assert_eq!(
        restore(&mut c, "k2", nocrc),
        err("ERR DUMP payload version or checksum are wrong")
    );
}

/// LOLWUT draws each version's art: VERSION 5 a grid of squares in
/// Braille of the asked size, VERSION 6 a skyline of ANSI cells; other
/// versions and bare arguments print the version line.
#[test]
fn lolwut_draws_each_versions_art() {
    let s = Server::start(&[]);
    let mut c = s.raw();
    let art = |c: &mut RawClient, args: &[&str]| text(&c.cmd(args));
    assert_eq!(art(&mut c, &["LOLWUT"]), "Redis ver. 7.0.15\n");
    assert_eq!(
        art(&mut c, &["LOLWUT", "5", "6", "7"]),
        "Redis ver. 7.0.15\n"
    );
    assert_eq!(
        art(&mut c, &["LOLWUT", "VERSION", "9", "x"]),
        "Redis ver. 7.0.15\n"
    );
    assert_eq!(
        c.cmd(&["LOLWUT", "VERSION", "5", "x"]),
        err("ERR value is not an integer or out of range")
    );
    // The smallest canvas: one cell, the same dots as Redis's.
    assert_eq!(
        art(&mut c, &["LOLWUT", "VERSION", "5", "0", "0", "0"]),
        "\u{280b}\n\nGeorg Nees - schotter, plotter on paper, 1968. Redis ver. 7.0.15\n"
    );
    // 10 columns, one 16-pixel square: 20 pixel rows, 5 lines of 10 cells,
    // the top edge straight (the first rows are not scattered).
    let five = art(&mut c, &["LOLWUT", "VERSION", "5", "10", "1", "1"]);
    let lines: Vec<&str> = five.lines().collect();
    assert_eq!(lines.len(), 7, "{five}");
    assert!(lines[..5].iter().all(|l| l.chars().count() == 10), "{five}");
    assert_eq!(
        lines[0],
        "\u{2800}\u{2864}\u{2824}\u{2824}\u{2824}\u{2824}\u{2824}\u{2824}\u{2824}\u{2844}"
    );
    let six = art(&mut c, &["LOLWUT", "VERSION", "6", "30", "8"]);
    let lines: Vec<&str> = six.lines().collect();
    assert_eq!(lines.len(), 10, "{six}");
    assert!(
        lines[..8]
            .iter()
            .all(|l| l.matches("\x1b[0m").count() == 30),
        "{six}"
    );
    assert!(
        lines[0].starts_with("\x1b[0;97;107m \x1b[0m"),
        "the sky is white: {six}"
    );
    assert!(six.ends_with("Original 8 bit image from Plaguemon by hikikomori. Redis ver. 7.0.15\n"));
}

const EMPTY_TABLE: &str =
    "Hash table 0 stats (main hash table):\nNo stats available for empty dictionaries\n";
/// A table of 4 buckets holding one entry.
const ONE_ENTRY: &str = "Hash table 0 stats (main hash table):\n table size: 4\n number of elements: 1\n different slots: 1\n max chain length: 1\n avg chain length (counted): 1.00\n avg chain length (computed): 1.00\n Chain length distribution:\n   0: 3 (75.00%)\n   1: 1 (25.00%)\n";

#[test]
fn debug_htstats_shows_the_keyspace_tables() {
    let s = debug_server();
    let mut c = s.raw();
    assert_eq!(
        c.cmd(&["DEBUG", "HTSTATS", "9"]),
        bulk(format!(
            "[Dictionary HT]\n{EMPTY_TABLE}[Expires HT]\n{EMPTY_TABLE}"
        ))
    );
    assert_eq!(c.cmd(&["SELECT", "9"]), ok());
    assert_eq!(c.cmd(&["SET", "k", "v", "EX", "100"]), ok());
    assert_eq!(
        c.cmd(&["DEBUG", "HTSTATS", "9"]),
        bulk(format!(
            "[Dictionary HT]\n{ONE_ENTRY}[Expires HT]\n{ONE_ENTRY}"
        ))
    );
    assert_eq!(
        c.cmd(&["DEBUG", "HTSTATS", "16"]),
        err("ERR Out of range database")
    );
    assert_eq!(
        c.cmd(&["DEBUG", "HTSTATS", "x"]),
        err("ERR value is not an integer or out of range")
    );
    // 7.0.15 has no FULL option.
    assert_eq!(
        c.cmd(&["DEBUG", "htstats", "9", "full"]),
        err("ERR unknown subcommand or wrong number of arguments for 'htstats'. Try DEBUG HELP.")
    );
    // Text in RESP3.
    c.cmd(&["HELLO", "3"]);
    assert_eq!(
        c.cmd(&["DEBUG", "HTSTATS", "0"]),
        Frame::Verbatim(
            format!("[Dictionary HT]\n{EMPTY_TABLE}[Expires HT]\n{EMPTY_TABLE}").into()
        )
    );
}

#[test]
fn debug_htstats_key_shows_a_values_table() {
    let s = debug_server();
    let mut c = s.raw();
    for (opt, val) in [
        ("hash-max-listpack-entries", "0"),
        ("set-max-intset-entries", "0"),
        ("zset-max-listpack-entries", "0"),
    ] {
        assert_eq!(c.cmd(&["CONFIG", "SET", opt, val]), ok());
    }
    assert_eq!(c.cmd(&["HSET", "h", "f", "v"]), int(1));
    assert_eq!(c.cmd(&["SADD", "s", "1"]), int(1));
    assert_eq!(c.cmd(&["ZADD", "z", "1", "m"]), int(1));
    for key in ["h", "s", "z"] {
        assert_eq!(
            c.cmd(&["DEBUG", "HTSTATS-KEY", key]),
            bulk(ONE_ENTRY),
            "{key}"
        );
    }
    assert_eq!(c.cmd(&["SET", "str", "v"]), ok());
    assert_eq!(
        c.cmd(&["DEBUG", "HTSTATS-KEY", "str"]),
        err("ERR The value stored at the specified key is not represented using an hash table")
    );
    assert_eq!(
        c.cmd(&["DEBUG", "HTSTATS-KEY", "nokey"]),
        err("ERR no such key")
    );
    assert!(text(&c.cmd(&["DEBUG", "HELP"])).contains("HTSTATS-KEY <key>"));
}
