//! COMMAND INFO and COMMAND DOCS of every command and subcommand cinnabar
//! has are the real Redis 7.0.15's: both servers are asked, over RESP2 and
//! RESP3 (skipped when redis-server is not installed).

use cinnabar_tests::{server_bin, tool, RawClient, Server};
use protocol::Frame;
use std::collections::HashSet;

/// Keeps the subcommands cinnabar has and sorts them by name: Redis lists
/// them in its dict's order, which changes from run to run.
fn normalize(f: Frame, ours: &HashSet<Vec<u8>>) -> Frame {
    let name = |f: &Frame| match f {
        Frame::Array(v) => v.first().cloned(),
        other => Some(other.clone()),
    };
    let known = |f: &Frame| match name(f) {
        Some(Frame::Bulk(n)) => ours.contains(&n[..]),
        _ => false,
    };
    let key = |f: &Frame| format!("{:?}", name(f));
    match f {
        // A COMMAND INFO entry: its subcommands are its last element.
        Frame::Array(mut v) if v.len() == 10 && matches!(v[0], Frame::Bulk(_)) => {
            if let Frame::Array(subs) = &mut v[9] {
                subs.retain(known);
                subs.sort_by_key(key);
            }
            Frame::Array(v.into_iter().map(|x| normalize(x, ours)).collect())
        }
        Frame::Array(v) => Frame::Array(v.into_iter().map(|x| normalize(x, ours)).collect()),
        Frame::Map(m) => Frame::Map(
            m.into_iter()
                .map(|(k, v)| {
                    let v = match (&k, v) {
                        (Frame::Bulk(b), Frame::Map(mut subs)) if &b[..] == b"subcommands" => {
                            subs.retain(|(n, _)| known(n));
                            subs.sort_by_key(|(n, _)| key(n));
                            Frame::Map(subs)
                        }
                        (_, v) => v,
                    };
                    (k, normalize(v, ours))
                })
                .collect(),
        ),
        other => other,
    }
}

fn ask(c: &mut RawClient, args: &[&[u8]], ours: &HashSet<Vec<u8>>) -> Frame {
    normalize(c.cmd(args), ours)
}

#[test]
fn info_and_docs_as_redis() {
    let Some(redis) = tool("redis-server") else {
        eprintln!("SKIP info_and_docs_as_redis: no redis-server");
        return;
    };
    let us = Server::start_bin(&server_bin(), &[]);
    let them = Server::start_bin(&redis, &[]);
    let (mut a, mut b) = (us.raw(), them.raw());
    let Frame::Array(list) = a.cmd(&["COMMAND", "LIST"]) else {
        panic!("COMMAND LIST");
    };
    let ours: HashSet<Vec<u8>> = list
        .iter()
        .map(|f| match f {
            Frame::Bulk(n) => n.to_vec(),
            other => panic!("{other:?}"),
        })
        .collect();
    assert!(ours.len() > 250, "{}", ours.len());
    for resp in ["2", "3"] {
        a.cmd(&["HELLO", resp]);
        b.cmd(&["HELLO", resp]);
        for name in &ours {
            for sub in [&b"INFO"[..], b"DOCS"] {
                let args: &[&[u8]] = &[b"COMMAND", sub, name];
                assert_eq!(
                    ask(&mut a, args, &ours),
                    ask(&mut b, args, &ours),
                    "RESP{resp} COMMAND {} {}",
                    String::from_utf8_lossy(sub),
                    String::from_utf8_lossy(name)
                );
            }
        }
    }
}
