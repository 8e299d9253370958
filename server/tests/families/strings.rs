//! Strings: the seed workloads that need no connection of their own.

use cinnabar_server::testkit::*;

/// Moved from the seed workloads (002 ch.5 §4 isUnderMaintenance()): a flag
/// string read at most once a second.
#[test]
fn seed002_maintenance_flag() {
    let mut h = Harness::new();
    let under = |h: &mut Harness| h.run(&["GET", "is-under-maintenance"]) == bulk("yes");
    assert!(!under(&mut h));
    assert_eq!(h.run(&["SET", "is-under-maintenance", "yes"]), ok());
    assert!(under(&mut h));
    assert_eq!(h.run(&["SET", "is-under-maintenance", "no"]), ok());
    assert!(!under(&mut h));
}

/// Moved from the seed workloads (002 ch.6 copyLogsToRedis()/
/// processLogsFromRedis()/RedisInputStream): a log file is APPENDed to a
/// key in 8 KB blocks, read back through STRLEN and SUBSTR (byte at a time
/// and in blocks), each reader INCRs `<key>:done`, and the sender deletes
/// both keys once all have finished.
#[test]
fn seed002_log_file_through_append_and_substr() {
    let mut h = Harness::new();
    // Binary content like a .gz file: every byte value, not a multiple of 8 KB.
    let file: Vec<u8> = (0..50_000u32).map(|i| (i * 7 + i / 256) as u8).collect();
    let key = "1logs/access-1.log.gz";
    let mut len = 0;
    for block in file.chunks(8192) {
        len += block.len() as i64;
        assert_eq!(h.run(&[&b"APPEND"[..], key.as_bytes(), block]), int(len));
    }
    let readers = 3;
    for r in 0..readers {
        let rc = h.connect();
        assert_eq!(h.run_on(rc, &["STRLEN", key]), int(file.len() as i64));
        let mut pos = 0usize;
        let mut got = Vec::new();
        let substr = |h: &mut Harness, from: usize, to: usize| -> Vec<u8> {
            match h.run_on(rc, &["SUBSTR", key, &from.to_string(), &to.to_string()]) {
                Frame::Bulk(b) => b.to_vec(),
                other => panic!("SUBSTR: {other:?}"),
            }
        };
        // read(): one byte; read(buf, off, len): a block.
        got.extend_from_slice(&substr(&mut h, pos, pos));
        pos += 1;
        let block = 1000 + 3000 * r;
        loop {
            let b = substr(&mut h, pos, pos + block - 1);
            if b.is_empty() {
                break;
            }
            pos += b.len();
            got.extend_from_slice(&b);
        }
        assert_eq!(got, file, "reader {r}");
        h.run_on(rc, &["INCR", &format!("{key}:done")]);
    }
    // clean(): the sender deletes the file once every reader is done.
    let done = format!("{key}:done");
    assert_eq!(h.run(&["GET", &done]), bulk(readers.to_string()));
    assert_eq!(h.run(&["DEL", key, &done]), int(2));
    assert_eq!(h.run(&["STRLEN", key]), int(0));
}

#[test]
fn counters_and_their_limits() {
    let mut h = Harness::new();
    assert_eq!(h.run(&["INCR", "n"]), int(1));
    assert_eq!(h.run(&["INCRBY", "n", "-11"]), int(-10));
    assert_eq!(h.run(&["DECRBY", "n", "5"]), int(-15));
    assert_eq!(h.run(&["INCRBYFLOAT", "n", "0.5"]), bulk("-14.5"));
    assert_eq!(h.run(&["SET", "big", "9223372036854775807"]), ok());
    assert_eq!(
        h.run(&["INCR", "big"]),
        err("ERR increment or decrement would overflow")
    );
    assert_eq!(h.run(&["GET", "big"]), bulk("9223372036854775807"));
}
