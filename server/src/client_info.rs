//! How a client is described to people: the CLIENT LIST / CLIENT INFO
//! line, which logs (output-buffer limits) use too, and the client type
//! that CLIENT LIST/KILL filter on.

use crate::state::Client;
use bytes::Bytes;

/// One CLIENT LIST line (without the newline). `current` carries the
/// request being executed, for the fields describing it.
pub fn client_line(cl: &Client, now: i64, current: Option<&[Bytes]>) -> String {
    let (qbuf, argv_mem) = match current {
        Some(args) => {
            let mut q = 1 + args.len().to_string().len() + 2;
            for a in args {
                q += 1 + a.len().to_string().len() + 2 + a.len() + 2;
            }
            (q, args.iter().map(|a| a.len()).sum::<usize>())
        }
        None => (cl.qbuf, 0),
    };
    // Redis's letters, in its order.
    let mut flags: String = [
        (cl.monitor, 'O'),
        (cl.subs.any(), 'P'),
        (cl.multi.is_some(), 'x'),
        (cl.blocked.is_some(), 'b'),
        (cl.dirty_cas, 'd'),
        (cl.close_after_reply, 'c'),
        (cl.no_evict, 'e'),
    ]
    .iter()
    .filter_map(|&(on, f)| on.then_some(f))
    .collect();
    if flags.is_empty() {
        flags.push('N');
    }
    let omem = cl.output_bytes();
    // Queued commands, and their arguments' bytes plus a pointer each, as
    // Redis 7.0 counts `multi-mem`.
    let (multi, multi_mem) = cl.multi.as_ref().map_or((-1, 0), |q| {
        let mem = q.iter().flatten().map(|a| a.len() + 8).sum::<usize>();
        (q.len() as i64, mem)
    });
    let name = cl
        .name
        .as_ref()
        .map(|n| String::from_utf8_lossy(n).into_owned())
        .unwrap_or_default();
    format!(
        "id={} addr={} laddr={} fd={} name={} age={} idle={} flags={} db={} sub={} psub={} ssub={} multi={} qbuf={} qbuf-free={} argv-mem={} multi-mem={} rbs=16384 rbp=16384 obl=0 oll={} omem={} tot-mem={} events={} cmd={} user=default redir=-1 resp={}",
        cl.id,
        cl.addr,
        cl.laddr,
        cl.fd,
        name,
        (now - cl.created_ms).max(0) / 1000,
        // The client running the command has just been heard from.
        if current.is_some() {
            0
        } else {
            (now - cl.last_interaction_ms).max(0) / 1000
        },
        flags,
        cl.db,
        cl.subs.channels.len(),
        cl.subs.patterns.len(),
        cl.subs.shard.len(),
        multi,
        qbuf,
        20474usize.saturating_sub(qbuf),
        argv_mem,
        multi_mem,
        // Unwritten output as Redis's reply list: 16 KB blocks.
        omem.div_ceil(16 * 1024),
        omem,
        37632 + qbuf + multi_mem + omem,
        if omem > 0 { "rw" } else { "r" },
        if current.is_some() { "NULL" } else { &cl.last_cmd },
        if cl.resp3 { 3 } else { 2 },
    )
}

/// The type CLIENT LIST/KILL TYPE filters on.
pub fn client_type(cl: &Client) -> &'static str {
    if cl.monitor {
        "replica"
    } else if cl.subs.any() {
        "pubsub"
    } else {
        "normal"
    }
}
