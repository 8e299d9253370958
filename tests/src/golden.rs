//! Golden replies: scripts of commands whose replies were recorded from the
//! real redis-server 7.0.15, replayed against cinnabar.
//!
//! A script `tests/golden/<family>.txt` has one command per line in
//! redis-cli quoting (`SET k "a\x00b"`). Also:
//! - blank lines and lines starting with `#` are ignored;
//! - `~ CMD ...` runs CMD but records only the reply's type (for replies
//!   that vary by run: TIME, INFO, CLIENT ID, RANDOMKEY, ...);
//! - `^ CMD ...` records the reply with the elements of its top-level
//!   aggregate sorted (KEYS, SMEMBERS, CONFIG GET a b: order is unspecified);
//! - `!server NAME VALUE` (before the first command) starts the server with
//!   `--NAME VALUE`;
//! - `!reconnect` opens a new connection; `!sleep MS` waits;
//! - `!read` records one more reply of the last command (a debugging
//!   session's EVAL reply follows its last log), recorded as `> !read`.
//!
//! The transcript (`<family>.expected`) is, per command, a line `> CMD` and
//! the reply in an unambiguous form: one line per RESP element, aggregates
//! indented under their header, bulk strings quoted with `\xNN` escapes, and
//! `$-1` / `*-1` / `_` kept apart. A connection the server closed instead of
//! replying reads `!closed` (the next command reconnects).

use crate::{encode, RawClient, ReadEnd, Server};
use std::fmt::Write as _;
use std::io::Write as _;
use std::path::Path;
use std::time::Duration;

pub enum Step {
    Cmd {
        lineno: usize,
        line: String,
        args: Vec<Vec<u8>>,
        type_only: bool,
        sorted: bool,
    },
    Reconnect,
    Sleep(u64),
    Read,
}

pub struct Script {
    pub server_opts: Vec<(String, String)>,
    pub steps: Vec<Step>,
}

pub fn parse_script(text: &str) -> Result<Script, String> {
    let mut s = Script {
        server_opts: vec![],
        steps: vec![],
    };
    for (i, raw) in text.lines().enumerate() {
        let lineno = i + 1;
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        if let Some(d) = line.strip_prefix('!') {
            let words: Vec<&str> = d.split_whitespace().collect();
            match words.as_slice() {
                ["server", name, rest @ ..] => {
                    if !s.steps.is_empty() {
                        return Err(format!("line {lineno}: !server after a command"));
                    }
                    s.server_opts.push((name.to_string(), rest.join(" ")));
                }
                ["reconnect"] => s.steps.push(Step::Reconnect),
                ["read"] => s.steps.push(Step::Read),
                ["sleep", ms] => s.steps.push(Step::Sleep(
                    ms.parse()
                        .map_err(|_| format!("line {lineno}: bad !sleep"))?,
                )),
                _ => return Err(format!("line {lineno}: unknown directive {line}")),
            }
            continue;
        }
        let (type_only, sorted, cmd) = if let Some(rest) = line.strip_prefix("~ ") {
            (true, false, rest)
        } else if let Some(rest) = line.strip_prefix("^ ") {
            (false, true, rest)
        } else {
            (false, false, line)
        };
        let args = protocol::split_args(cmd.as_bytes())
            .ok_or_else(|| format!("line {lineno}: unbalanced quotes"))?;
        if args.is_empty() {
            continue;
        }
        s.steps.push(Step::Cmd {
            lineno,
            line: line.to_string(),
            args: args.into_iter().map(|a| a.to_vec()).collect(),
            type_only,
            sorted,
        });
    }
    Ok(s)
}

/// Runs `script` against a fresh `bin` server and returns the transcript.
pub fn run_script(bin: &Path, script: &Script) -> String {
    let opts: Vec<(&str, &str)> = script
        .server_opts
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    let server = Server::start_bin(bin, &opts);
    run_script_on(server.port, script)
}

/// Runs `script` against a server already listening on `port`.
pub fn run_script_on(port: u16, script: &Script) -> String {
    let connect = || {
        let mut c = RawClient::connect(port);
        c.set_timeout(Duration::from_secs(5));
        c
    };
    let mut c = connect();
    let mut out = String::new();
    let mut broken = false;
    for step in &script.steps {
        match step {
            Step::Reconnect => {
                c = connect();
                broken = false;
            }
            Step::Sleep(ms) => std::thread::sleep(Duration::from_millis(*ms)),
            Step::Read => {
                out.push_str("> !read\n");
                match c.read_raw() {
                    Ok(raw) => out.push_str(&format_reply(&raw)),
                    Err(ReadEnd::Closed) => {
                        out.push_str("!closed\n");
                        broken = true;
                    }
                    Err(ReadEnd::Timeout) => {
                        out.push_str("!timeout\n");
                        broken = true;
                    }
                }
            }
            Step::Cmd {
                line,
                args,
                type_only,
                sorted,
                ..
            } => {
                if broken {
                    c = connect();
                    broken = false;
                }
                let _ = writeln!(out, "> {line}");
                let sent = c.sock.write_all(&encode(args)).is_ok();
                let reply = if sent {
                    c.read_raw()
                } else {
                    Err(ReadEnd::Closed)
                };
                match reply {
                    Ok(raw) if *type_only => {
                        let _ = writeln!(out, "~{}", raw[0] as char);
                    }
                    Ok(raw) if *sorted => out.push_str(&format_sorted(&raw)),
                    Ok(raw) => out.push_str(&format_reply(&raw)),
                    Err(ReadEnd::Closed) => {
                        out.push_str("!closed\n");
                        broken = true;
                    }
                    Err(ReadEnd::Timeout) => {
                        out.push_str("!timeout\n");
                        broken = true;
                    }
                }
            }
        }
    }
    out
}

/// Renders one raw RESP reply, one line per element (see the module doc).
pub fn format_reply(raw: &[u8]) -> String {
    let mut out = String::new();
    let mut pos = 0;
    while pos < raw.len() {
        if fmt_at(raw, &mut pos, 0, &mut out).is_none() {
            let _ = writeln!(out, "!malformed {}", escape(&raw[pos..]));
            break;
        }
    }
    out
}

/// Like [`format_reply`], with the top-level aggregate's elements (each
/// rendered with its children) in sorted order.
pub fn format_sorted(raw: &[u8]) -> String {
    let Some(end) = raw.windows(2).position(|w| w == b"\r\n") else {
        return format_reply(raw);
    };
    if !matches!(raw[0], b'*' | b'~' | b'%' | b'>') {
        return format_reply(raw);
    }
    let mut pos = end + 2;
    let mut items = Vec::new();
    while pos < raw.len() {
        let mut s = String::new();
        if fmt_at(raw, &mut pos, 1, &mut s).is_none() {
            return format_reply(raw);
        }
        items.push(s);
    }
    items.sort();
    let mut out = format!("{} (sorted)\n", String::from_utf8_lossy(&raw[..end]));
    out.extend(items);
    out
}

fn fmt_at(buf: &[u8], pos: &mut usize, depth: usize, out: &mut String) -> Option<()> {
    let start = *pos;
    let end = start + buf.get(start..)?.windows(2).position(|w| w == b"\r\n")?;
    let kind = buf[start];
    let line = &buf[start + 1..end];
    *pos = end + 2;
    let indent = "  ".repeat(depth);
    let num = || -> Option<i64> { std::str::from_utf8(line).ok()?.parse().ok() };
    match kind {
        b'$' | b'=' | b'!' => {
            let n = num()?;
            if n < 0 {
                let _ = writeln!(out, "{indent}{}{n}", kind as char);
            } else {
                let n = n as usize;
                let data = buf.get(*pos..*pos + n)?;
                if buf.get(*pos + n..*pos + n + 2)? != b"\r\n" {
                    return None;
                }
                *pos += n + 2;
                let _ = writeln!(out, "{indent}{}\"{}\"", kind as char, escape(data));
            }
        }
        b'*' | b'~' | b'>' | b'%' | b'|' => {
            let n = num()?;
            let _ = writeln!(out, "{indent}{}{n}", kind as char);
            let items = if matches!(kind, b'%' | b'|') {
                2 * n
            } else {
                n
            };
            for _ in 0..items.max(0) {
                fmt_at(buf, pos, depth + 1, out)?;
            }
        }
        b'+' | b'-' | b':' | b',' | b'#' | b'(' | b'_' => {
            let _ = writeln!(out, "{indent}{}{}", kind as char, escape(line));
        }
        _ => return None,
    }
    Some(())
}

/// Printable ASCII as is; `"`, `\` and everything else escaped.
pub fn escape(b: &[u8]) -> String {
    let mut s = String::with_capacity(b.len());
    for &c in b {
        match c {
            b'"' => s.push_str("\\\""),
            b'\\' => s.push_str("\\\\"),
            b'\n' => s.push_str("\\n"),
            b'\r' => s.push_str("\\r"),
            b'\t' => s.push_str("\\t"),
            0x20..=0x7e => s.push(c as char),
            _ => {
                let _ = write!(s, "\\x{c:02x}");
            }
        }
    }
    s
}

/// One command's transcript: the `> CMD` line and the reply lines.
#[derive(Debug, Clone, PartialEq)]
pub struct Block {
    pub cmd: String,
    pub reply: String,
}

pub fn blocks(transcript: &str) -> Vec<Block> {
    let mut v: Vec<Block> = Vec::new();
    for line in transcript.lines() {
        if let Some(cmd) = line.strip_prefix("> ") {
            v.push(Block {
                cmd: cmd.to_string(),
                reply: String::new(),
            });
        } else if let Some(b) = v.last_mut() {
            b.reply.push_str(line);
            b.reply.push('\n');
        }
    }
    v
}

pub struct Mismatch {
    pub index: usize,
    pub cmd: String,
    pub expected: String,
    pub got: String,
}

/// Mismatching blocks, in order. A differing command line means the
/// `.expected` file is stale: reported as a mismatch of the command itself.
pub fn compare(expected: &str, got: &str) -> (usize, Vec<Mismatch>) {
    let e = blocks(expected);
    let g = blocks(got);
    let mut bad = Vec::new();
    for i in 0..e.len().max(g.len()) {
        let (eb, gb) = (e.get(i), g.get(i));
        match (eb, gb) {
            (Some(eb), Some(gb)) if eb == gb => {}
            (Some(eb), Some(gb)) if eb.cmd != gb.cmd => bad.push(Mismatch {
                index: i,
                cmd: gb.cmd.clone(),
                expected: format!("(stale .expected: it has `{}` here; re-record)\n", eb.cmd),
                got: gb.reply.clone(),
            }),
            _ => bad.push(Mismatch {
                index: i,
                cmd: eb.or(gb).map(|b| b.cmd.clone()).unwrap_or_default(),
                expected: eb.map(|b| b.reply.clone()).unwrap_or("(none)\n".into()),
                got: gb.map(|b| b.reply.clone()).unwrap_or("(none)\n".into()),
            }),
        }
    }
    (e.len().max(g.len()), bad)
}

/// A readable report of the first `limit` mismatches.
pub fn render_mismatches(name: &str, bad: &[Mismatch], limit: usize) -> String {
    let mut s = String::new();
    for m in bad.iter().take(limit) {
        let _ = writeln!(s, "--- {name} #{}: {}", m.index + 1, m.cmd);
        for (label, text) in [("expected", &m.expected), ("got     ", &m.got)] {
            for (i, l) in text.lines().enumerate() {
                let head = if i == 0 { label } else { "        " };
                let _ = writeln!(s, "    {head} {l}");
            }
        }
    }
    if bad.len() > limit {
        let _ = writeln!(s, "    ... and {} more", bad.len() - limit);
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_every_type() {
        let raw = b"*4\r\n$3\r\na\"\x00\r\n$-1\r\n*-1\r\n%1\r\n+k\r\n:5\r\n";
        assert_eq!(
            format_reply(raw),
            "*4\n  $\"a\\\"\\x00\"\n  $-1\n  *-1\n  %1\n    +k\n    :5\n"
        );
        assert_eq!(format_reply(b"-ERR x\r\n"), "-ERR x\n");
        assert_eq!(format_reply(b"_\r\n"), "_\n");
    }

    #[test]
    fn parses_scripts() {
        let s = parse_script("# c\n!server requirepass x\nSET a \"b c\"\n~ TIME\n!reconnect\n")
            .unwrap();
        assert_eq!(s.server_opts, vec![("requirepass".into(), "x".into())]);
        assert_eq!(s.steps.len(), 3);
        match &s.steps[1] {
            Step::Cmd {
                type_only, args, ..
            } => {
                assert!(type_only);
                assert_eq!(args, &vec![b"TIME".to_vec()]);
            }
            _ => panic!(),
        }
    }

    #[test]
    fn compares_blocks() {
        let (n, bad) = compare("> A\n+OK\n> B\n:1\n", "> A\n+OK\n> B\n:2\n");
        assert_eq!(n, 2);
        assert_eq!(bad.len(), 1);
        assert_eq!(bad[0].cmd, "B");
    }
}
