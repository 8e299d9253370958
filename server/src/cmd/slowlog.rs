//! The slowlog: what a command that took long leaves there (its arguments
//! cut as Redis cuts them, secrets redacted), for calls and for blocked
//! clients served or timed out.

use super::{flags, Command};
use crate::state::{Client, SlowEntry, State};
use bytes::Bytes;

/// Logs the command in the slowlog if it took at least
/// slowlog-log-slower-than (`dur` in microseconds).
pub fn slowlog_if_slow(st: &mut State, cl: &Client, cmd: &Command, args: &[Bytes], dur: u64) {
    if st.tun.slowlog_slower_than >= 0
        && dur as i64 >= st.tun.slowlog_slower_than
        && !cmd.has(flags::SKIP_SLOWLOG)
    {
        let secret = secret_args(cmd.name, args);
        slowlog_push(st, cl, args, &secret, dur as i64);
    }
}

fn slowlog_push(st: &mut State, cl: &Client, args: &[Bytes], secret: &[usize], dur: i64) {
    // As Redis: at most 32 arguments, each cut to 128 bytes.
    let mut logged: Vec<Bytes> = Vec::new();
    for (i, a) in args.iter().enumerate() {
        if i == 31 && args.len() > 32 {
            logged.push(Bytes::from(format!(
                "... ({} more arguments)",
                args.len() - 31
            )));
            break;
        }
        if secret.contains(&i) {
            logged.push(Bytes::from_static(b"(redacted)"));
        } else if a.len() > 128 {
            let mut t = a[..128].to_vec();
            t.extend_from_slice(format!("... ({} more bytes)", a.len() - 128).as_bytes());
            logged.push(Bytes::from(t));
        } else {
            // A copy: the argument is a slice of the connection's read
            // buffer, which an entry would otherwise keep alive whole.
            logged.push(Bytes::copy_from_slice(a));
        }
    }
    let id = st.slowlog_next_id;
    st.slowlog_next_id += 1;
    st.slowlog.push_front(SlowEntry {
        id,
        time: crate::core::clock::now_ms() / 1000,
        duration_us: dur,
        args: logged,
        addr: cl.addr.clone(),
        name: cl.name.clone().unwrap_or_default(),
    });
    st.slowlog.truncate(st.tun.slowlog_max_len);
}

/// The positions of the arguments Redis redacts (in MONITOR and the
/// slowlog): every argument of AUTH, the user name and password of HELLO's
/// AUTH and MIGRATE's AUTH/AUTH2, ACL SETUSER's user and rules, the values
/// of CONFIG SET's sensitive options.
pub fn secret_args(name: &str, args: &[Bytes]) -> Vec<usize> {
    match name {
        "auth" => (1..args.len()).collect(),
        "acl|setuser" => (2..args.len()).collect(),
        "config|set" => (2..args.len())
            .step_by(2)
            .filter(|&i| {
                ["requirepass", "masteruser", "masterauth"]
                    .iter()
                    .any(|o| super::is(&args[i], o))
            })
            .map(|i| i + 1)
            .filter(|&i| i < args.len())
            .collect(),
        "hello" => {
            let mut j = 2;
            while j < args.len() {
                if super::is(&args[j], "auth") {
                    return (j + 1..(j + 3).min(args.len())).collect();
                }
                j += 2;
            }
            Vec::new()
        }
        "migrate" => {
            for j in 6..args.len() {
                if super::is(&args[j], "auth") {
                    return (j + 1..(j + 2).min(args.len())).collect();
                }
                if super::is(&args[j], "auth2") {
                    return (j + 1..(j + 3).min(args.len())).collect();
                }
                if super::is(&args[j], "keys") {
                    break;
                }
            }
            Vec::new()
        }
        _ => Vec::new(),
    }
}
