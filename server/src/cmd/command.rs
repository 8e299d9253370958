//! COMMAND and its subcommands: COUNT LIST INFO DOCS GETKEYS
//! GETKEYSANDFLAGS HELP.
//!
//! The metadata Redis shows (ACL categories, tips, key specs, docs) was
//! recorded from a real Redis 7.0.15 (`COMMAND` and `COMMAND DOCS` over
//! RESP3) into `command_info.resp` and `command_docs.resp`. Only commands
//! present in cinnabar's table are shown; a command missing from the
//! recording gets an entry derived from its table row. Key extraction for
//! GETKEYS follows the recorded key specs, so movable-key commands work.

use super::flags::*;
use super::help::help_reply;
use super::{is, lookup, lookup_sub, table, Command, Ctx};
use crate::error::{CmdResult, Error};
use bytes::Bytes;
use protocol::{Frame, ReplyBuf};
use std::collections::HashMap;
use std::sync::OnceLock;

const G: &str = "server";

pub static COMMANDS: &[Command] = &[Command::new(
    "command",
    -1,
    LOADING | STALE,
    G,
    (0, 0, 0),
    command,
)];

// Subcommands are dispatched here rather than declared with
// `Command::parent`, because bare COMMAND is itself a valid call.
const SUBS: &[(&str, i32)] = &[
    ("count", 2),
    ("list", -2),
    ("info", -2),
    ("docs", -2),
    ("getkeys", -4),
    ("getkeysandflags", -4),
    ("help", 2),
];

static INFO_RAW: &[u8] = include_bytes!("command_info.resp");
static DOCS_RAW: &[u8] = include_bytes!("command_docs.resp");

/// Recorded COMMAND INFO entries by name (subcommands included, as
/// `parent|sub`).
fn recorded_info() -> &'static HashMap<String, Frame> {
    static M: OnceLock<HashMap<String, Frame>> = OnceLock::new();
    M.get_or_init(|| {
        let mut m = HashMap::new();
        fn add(m: &mut HashMap<String, Frame>, f: &Frame) {
            if let Frame::Array(v) = f {
                if let Some(Frame::Bulk(name)) = v.first() {
                    m.insert(String::from_utf8_lossy(name).into_owned(), f.clone());
                }
                if let Some(Frame::Array(subs)) = v.get(9) {
                    for s in subs {
                        add(m, s);
                    }
                }
            }
        }
        if let Some((Frame::Array(all), _)) = protocol::parse_reply(INFO_RAW) {
            for f in &all {
                add(&mut m, f);
            }
        }
        m
    })
}

/// Recorded COMMAND DOCS entries by name (subcommands included).
fn recorded_docs() -> &'static HashMap<String, Frame> {
    static M: OnceLock<HashMap<String, Frame>> = OnceLock::new();
    M.get_or_init(|| {
        let mut m = HashMap::new();
        fn add(m: &mut HashMap<String, Frame>, name: &Frame, doc: &Frame) {
            let Frame::Bulk(n) = name else { return };
            m.insert(String::from_utf8_lossy(n).into_owned(), doc.clone());
            if let Frame::Map(fields) = doc {
                for (k, v) in fields {
                    if matches!(k, Frame::Bulk(b) if &b[..] == b"subcommands") {
                        if let Frame::Map(subs) = v {
                            for (sn, sd) in subs {
                                add(m, sn, sd);
                            }
                        }
                    }
                }
            }
        }
        if let Some((Frame::Map(all), _)) = protocol::parse_reply(DOCS_RAW) {
            for (n, d) in &all {
                add(&mut m, n, d);
            }
        }
        m
    })
}

/// Writes a recorded frame, degrading RESP3 types as the buffer requires.
fn emit(o: &mut ReplyBuf, f: &Frame) {
    match f {
        Frame::Simple(s) => o.simple(&String::from_utf8_lossy(s)),
        Frame::Error(e) => o.error(&String::from_utf8_lossy(e)),
        Frame::Integer(n) => o.int(*n),
        Frame::Bulk(b) => o.bulk(b),
        Frame::Null => o.null(),
        Frame::Array(v) | Frame::Push(v) => {
            o.array(v.len());
            v.iter().for_each(|x| emit(o, x));
        }
        Frame::Set(v) => {
            o.set(v.len());
            v.iter().for_each(|x| emit(o, x));
        }
        Frame::Map(v) => {
            o.map(v.len());
            for (k, x) in v {
                emit(o, k);
                emit(o, x);
            }
        }
        Frame::Double(d) => o.double(*d),
        Frame::Boolean(b) => o.boolean(*b),
        Frame::BigNumber(b) => o.big_number(&String::from_utf8_lossy(b)),
        Frame::Verbatim(b) => o.verbatim(b),
    }
}

/// Every command of the table in a stable order.
fn all_commands() -> Vec<&'static Command> {
    let mut v: Vec<&'static Command> = table().values().copied().collect();
    v.sort_by_key(|c| c.name);
    v
}

/// The recorded entry of one of COMMAND's own subcommands, by full name.
fn command_sub<'a>(name: &[u8], recorded: &'a HashMap<String, Frame>) -> Option<&'a Frame> {
    let n = String::from_utf8_lossy(name).to_ascii_lowercase();
    command_subs().any(|s| s == n).then(|| recorded.get(&n))?
}

/// Finds a command or subcommand by full name (`get`, `config|get`).
fn find_full(name: &[u8]) -> Option<&'static Command> {
    let s = String::from_utf8_lossy(name).to_ascii_lowercase();
    match s.split_once('|') {
        Some((p, sub)) => {
            let parent = lookup(p.as_bytes())?;
            lookup_sub(parent, sub.as_bytes())
        }
        None => lookup(s.as_bytes()),
    }
}

fn acl_categories(c: &Command) -> Vec<String> {
    let mut v = Vec::new();
    if c.has(WRITE) {
        v.push("@write".to_string());
    }
    if c.has(READONLY) {
        v.push("@read".into());
    }
    if c.has(ADMIN) {
        v.push("@admin".into());
        v.push("@dangerous".into());
    }
    if c.has(PUBSUB) {
        v.push("@pubsub".into());
    }
    if c.has(FAST) {
        v.push("@fast".into());
    } else {
        v.push("@slow".into());
    }
    if c.has(BLOCKING) {
        v.push("@blocking".into());
    }
    v.push(format!("@{}", c.group));
    v
}

/// One COMMAND INFO entry.
fn write_info(o: &mut ReplyBuf, c: &Command) {
    if let Some(Frame::Array(rec)) = recorded_info().get(c.name) {
        if rec.len() == 10 {
            o.array(10);
            for f in &rec[..9] {
                emit(o, f);
            }
            // COMMAND's subcommands are dispatched in this module, not
            // declared in the table: show them as recorded.
            if c.name == "command" {
                emit(o, &rec[9]);
                return;
            }
            // Only the subcommands cinnabar has.
            match rec[9] {
                Frame::Set(_) => o.set(c.subcommands.len()),
                _ => o.array(c.subcommands.len()),
            }
            for s in c.subcommands {
                write_info(o, s);
            }
            return;
        }
    }
    o.array(10);
    o.bulk(c.name.as_bytes());
    o.int(c.arity as i64);
    let names: Vec<&str> = NAMES
        .iter()
        .filter(|(f, _)| c.has(*f))
        .map(|(_, n)| *n)
        .collect();
    o.set(names.len());
    for n in names {
        o.simple(n);
    }
    o.int(c.first_key as i64);
    o.int(c.last_key as i64);
    o.int(c.step as i64);
    let cats = acl_categories(c);
    o.set(cats.len());
    for cat in &cats {
        o.simple(cat);
    }
    o.set(0);
    if c.first_key > 0 {
        o.array(1);
        o.map(3);
        o.bulk(b"flags");
        o.set(1);
        o.simple(if c.has(WRITE) { "RW" } else { "RO" });
        o.bulk(b"begin_search");
        o.map(2);
        o.bulk(b"type");
        o.bulk(b"index");
        o.bulk(b"spec");
        o.map(1);
        o.bulk(b"index");
        o.int(c.first_key as i64);
        o.bulk(b"find_keys");
        o.map(2);
        o.bulk(b"type");
        o.bulk(b"range");
        o.bulk(b"spec");
        o.map(3);
        o.bulk(b"lastkey");
        o.int(if c.last_key < 0 {
            c.last_key as i64
        } else {
            (c.last_key - c.first_key) as i64
        });
        o.bulk(b"keystep");
        o.int(c.step as i64);
        o.bulk(b"limit");
        o.int(0);
    } else {
        o.array(0);
    }
    o.array(c.subcommands.len());
    for s in c.subcommands {
        write_info(o, s);
    }
}

/// One COMMAND DOCS value (the map for a name).
fn write_docs(o: &mut ReplyBuf, c: &Command) {
    let Some(Frame::Map(fields)) = recorded_docs().get(c.name) else {
        o.map(1);
        o.bulk(b"group");
        o.bulk(c.group.as_bytes());
        return;
    };
    o.map(fields.len());
    for (k, v) in fields {
        emit(o, k);
        if c.name != "command" && matches!(k, Frame::Bulk(b) if &b[..] == b"subcommands") {
            o.map(c.subcommands.len());
            for s in c.subcommands {
                o.bulk(s.name.as_bytes());
                write_docs(o, s);
            }
        } else {
            emit(o, v);
        }
    }
}

/// COMMAND [subcommand ...]
fn command(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    if a.len() == 1 {
        let all = all_commands();
        c.out.array(all.len());
        for cmd in all {
            write_info(c.out, cmd);
        }
        return Ok(());
    }
    let sub = String::from_utf8_lossy(&a[1]).to_ascii_lowercase();
    let Some(&(_, arity)) = SUBS.iter().find(|(n, _)| *n == sub) else {
        return Err(Error::UnknownSubcommand {
            sub: String::from_utf8_lossy(&a[1]).into_owned(),
            cmd: "COMMAND".into(),
        });
    };
    let n = a.len() as i32;
    if (arity > 0 && n != arity) || (arity < 0 && n < -arity) {
        return Err(Error::Arity(format!("command|{sub}")));
    }
    match sub.as_str() {
        "count" => c.out.int(table().len() as i64),
        "list" => list(c, a)?,
        "info" => {
            if a.len() == 2 {
                return command(c, &a[..1]);
            }
            c.out.array(a.len() - 2);
            for name in &a[2..] {
                match (find_full(name), command_sub(name, recorded_info())) {
                    (Some(cmd), _) => write_info(c.out, cmd),
                    (None, Some(rec)) => emit(c.out, rec),
                    (None, None) => c.out.null(),
                }
            }
        }
        "docs" => {
            enum Doc {
                Row(&'static Command),
                Recorded(String, &'static Frame),
            }
            let docs: Vec<Doc> = if a.len() == 2 {
                all_commands().into_iter().map(Doc::Row).collect()
            } else {
                // In the order asked; unknown names are left out.
                a[2..]
                    .iter()
                    .filter_map(|n| match find_full(n) {
                        Some(cmd) => Some(Doc::Row(cmd)),
                        None => command_sub(n, recorded_docs()).map(|rec| {
                            Doc::Recorded(String::from_utf8_lossy(n).to_ascii_lowercase(), rec)
                        }),
                    })
                    .collect()
            };
            c.out.map(docs.len());
            for d in docs {
                match d {
                    Doc::Row(cmd) => {
                        c.out.bulk(cmd.name.as_bytes());
                        write_docs(c.out, cmd);
                    }
                    Doc::Recorded(name, rec) => {
                        c.out.bulk(name.as_bytes());
                        emit(c.out, rec);
                    }
                }
            }
        }
        "getkeys" | "getkeysandflags" => {
            let keys = get_keys(&a[2..])?;
            c.out.array(keys.len());
            for (i, flags) in keys {
                if sub == "getkeys" {
                    c.out.bulk(&a[2 + i]);
                } else {
                    c.out.array(2);
                    c.out.bulk(&a[2 + i]);
                    c.out.set(flags.len());
                    for f in flags {
                        c.out.simple(&f);
                    }
                }
            }
        }
        _ => help(c),
    }
    Ok(())
}

/// COMMAND LIST [FILTERBY MODULE name | ACLCAT category | PATTERN pattern]
fn list(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    enum Filter<'a> {
        All,
        Module,
        Cat(String),
        Pattern(&'a [u8]),
    }
    let filter = match a.len() {
        2 => Filter::All,
        5 if is(&a[2], "filterby") => {
            if is(&a[3], "module") {
                Filter::Module
            } else if is(&a[3], "aclcat") {
                Filter::Cat(format!(
                    "@{}",
                    String::from_utf8_lossy(&a[4]).to_ascii_lowercase()
                ))
            } else if is(&a[3], "pattern") {
                Filter::Pattern(&a[4])
            } else {
                return Err(Error::Syntax);
            }
        }
        _ => return Err(Error::Syntax),
    };
    let mut names = Vec::new();
    for cmd in all_commands() {
        let rows = std::iter::once(cmd).chain(cmd.subcommands.iter());
        let mut all: Vec<String> = rows.map(|x| x.name.to_string()).collect();
        if cmd.name == "command" {
            all.extend(command_subs());
        }
        for name in all {
            let keep = match &filter {
                Filter::All => true,
                Filter::Module => false,
                Filter::Cat(cat) => categories_of(&name).iter().any(|k| k == cat),
                Filter::Pattern(p) => storage::glob::matches(p, name.as_bytes(), true),
            };
            if keep {
                names.push(name);
            }
        }
    }
    c.out.array(names.len());
    for n in names {
        c.out.bulk(n.as_bytes());
    }
    Ok(())
}

/// COMMAND's own subcommands by full name (`command|count`): not table
/// rows, see `SUBS`.
fn command_subs() -> impl Iterator<Item = String> {
    SUBS.iter().map(|(s, _)| format!("command|{s}"))
}

/// ACL categories of a command by full name: recorded, else derived from
/// its table row.
fn categories_of(name: &str) -> Vec<String> {
    if let Some(Frame::Array(rec)) = recorded_info().get(name) {
        if let Some(Frame::Set(cats) | Frame::Array(cats)) = rec.get(6) {
            return cats
                .iter()
                .filter_map(|f| match f {
                    Frame::Simple(s) | Frame::Bulk(s) => {
                        Some(String::from_utf8_lossy(s).into_owned())
                    }
                    _ => None,
                })
                .collect();
        }
    }
    find_full(name.as_bytes())
        .map(acl_categories)
        .unwrap_or_default()
}

fn map_get<'a>(f: &'a Frame, key: &str) -> Option<&'a Frame> {
    match f {
        Frame::Map(v) => v
            .iter()
            .find(|(k, _)| matches!(k, Frame::Bulk(b) if &b[..] == key.as_bytes()))
            .map(|(_, v)| v),
        _ => None,
    }
}

fn map_int(f: &Frame, key: &str) -> Option<i64> {
    match map_get(f, key)? {
        Frame::Integer(n) => Some(*n),
        _ => None,
    }
}

fn invalid_args() -> Error {
    Error::other("ERR Invalid arguments specified for command")
}

/// Key positions (in `args`, where `args[0]` is the command name) and their
/// flags, found by the command's key specs.
pub fn get_keys(args: &[Bytes]) -> Result<Vec<(usize, Vec<String>)>, Error> {
    let parent = lookup(&args[0]).ok_or_else(|| Error::other("ERR Invalid command specified"))?;
    let cmd = if parent.subcommands.is_empty() {
        parent
    } else {
        args.get(1)
            .and_then(|s| lookup_sub(parent, s))
            .ok_or_else(|| Error::other("ERR Invalid command specified"))?
    };
    let specs: Vec<Frame> = match recorded_info().get(cmd.name) {
        Some(Frame::Array(rec)) => match rec.get(8) {
            Some(Frame::Array(s) | Frame::Set(s)) => s.clone(),
            _ => Vec::new(),
        },
        _ => Vec::new(),
    };
    let has_keys = !specs.is_empty() || cmd.first_key > 0;
    if !has_keys {
        return Err(Error::other("ERR The command has no key arguments"));
    }
    if !cmd.arity_ok(args.len()) {
        return Err(Error::other(
            "ERR Invalid number of arguments specified for command",
        ));
    }
    let argc = args.len() as i64;
    let mut out: Vec<(usize, Vec<String>)> = Vec::new();
    if specs.is_empty() {
        let flags = vec![if cmd.has(WRITE) { "RW" } else { "RO" }.to_string()];
        for p in cmd.key_positions(args.len()) {
            out.push((p, flags.clone()));
        }
        return Ok(out);
    }
    for spec in &specs {
        // SET's key is overwritten unless GET reads the old value first.
        if cmd.name == "set" && !args[3..].iter().any(|o| is(o, "get")) {
            out.push((1, vec!["OW".into(), "update".into()]));
            continue;
        }
        let flags: Vec<String> = match map_get(spec, "flags") {
            Some(Frame::Set(v) | Frame::Array(v)) => v
                .iter()
                .filter_map(|f| match f {
                    // Redis leaves this spec-level marker out of the reply.
                    Frame::Simple(s) | Frame::Bulk(s) if &s[..] != b"variable_flags" => {
                        Some(String::from_utf8_lossy(s).into_owned())
                    }
                    _ => None,
                })
                .collect(),
            _ => Vec::new(),
        };
        let Some(bs) = map_get(spec, "begin_search") else {
            continue;
        };
        let bs_type = match map_get(bs, "type") {
            Some(Frame::Bulk(t)) => t.clone(),
            _ => continue,
        };
        let Some(bspec) = map_get(bs, "spec") else {
            continue;
        };
        let start: i64 = match &bs_type[..] {
            b"index" => map_int(bspec, "index").unwrap_or(0),
            b"keyword" => {
                let kw = match map_get(bspec, "keyword") {
                    Some(Frame::Bulk(k)) => k.clone(),
                    _ => continue,
                };
                let from = map_int(bspec, "startfrom").unwrap_or(1);
                let found = if from >= 0 {
                    (from..argc).find(|&i| is(&args[i as usize], &String::from_utf8_lossy(&kw)))
                } else {
                    let first = argc + from;
                    (1..=first)
                        .rev()
                        .find(|&i| is(&args[i as usize], &String::from_utf8_lossy(&kw)))
                };
                match found {
                    Some(i) => i + 1,
                    None => continue,
                }
            }
            _ => continue,
        };
        if start <= 0 || start >= argc {
            continue;
        }
        let Some(fk) = map_get(spec, "find_keys") else {
            continue;
        };
        let fk_type = match map_get(fk, "type") {
            Some(Frame::Bulk(t)) => t.clone(),
            _ => continue,
        };
        let Some(fspec) = map_get(fk, "spec") else {
            continue;
        };
        let (first, last, step) = match &fk_type[..] {
            b"range" => {
                let lastkey = map_int(fspec, "lastkey").unwrap_or(0);
                let step = map_int(fspec, "keystep").unwrap_or(1).max(1);
                let limit = map_int(fspec, "limit").unwrap_or(0);
                let last = if lastkey >= 0 {
                    start + lastkey
                } else if limit <= 1 {
                    argc + lastkey
                } else {
                    start + ((argc - 1 - start) / limit)
                };
                (start, last, step)
            }
            b"keynum" => {
                let idx = map_int(fspec, "keynumidx").unwrap_or(0);
                let firstkey = map_int(fspec, "firstkey").unwrap_or(1);
                let step = map_int(fspec, "keystep").unwrap_or(1).max(1);
                let pos = start + idx;
                if pos >= argc {
                    return Err(invalid_args());
                }
                let n = super::int_arg(&args[pos as usize]).map_err(|_| invalid_args())?;
                if n < 0 {
                    return Err(invalid_args());
                }
                let first = start + firstkey;
                let last = n
                    .checked_mul(step)
                    .and_then(|x| x.checked_add(first - step))
                    .ok_or_else(invalid_args)?;
                if n > 0 && last >= argc {
                    return Err(invalid_args());
                }
                (first, if n == 0 { first - 1 } else { last }, step)
            }
            _ => continue,
        };
        if last >= argc {
            return Err(invalid_args());
        }
        let mut i = first;
        while i <= last {
            if i > 0 && i < argc {
                out.push((i as usize, flags.clone()));
            }
            i += step;
        }
    }
    if out.is_empty() {
        return Err(invalid_args());
    }
    Ok(out)
}

fn help(c: &mut Ctx) {
    help_reply(
        c,
        "COMMAND",
        &[
            "(no subcommand)",
            "    Return details about all Redis commands.",
            "COUNT",
            "    Return the total number of commands in this Redis server.",
            "LIST",
            "    Return a list of all commands in this Redis server.",
            "INFO [<command-name> ...]",
            "    Return details about multiple Redis commands.",
            "    If no command names are given, documentation details for all",
            "    commands are returned.",
            "DOCS [<command-name> ...]",
            "    Return documentation details about multiple Redis commands.",
            "    If no command names are given, documentation details for all",
            "    commands are returned.",
            "GETKEYS <full-command>",
            "    Return the keys from a full Redis command.",
            "GETKEYSANDFLAGS <full-command>",
            "    Return the keys and the access flags from a full Redis command.",
        ],
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(args: &[&str]) -> Result<Vec<usize>, Error> {
        let a: Vec<Bytes> = args.iter().map(|s| Bytes::from(s.to_string())).collect();
        get_keys(&a).map(|v| v.into_iter().map(|(i, _)| i).collect())
    }

    #[test]
    fn recordings_parse() {
        assert!(recorded_info().len() > 300);
        assert!(recorded_docs().len() > 300);
        assert!(recorded_info().contains_key("config|get"));
    }

    #[test]
    fn keys_from_specs() {
        assert_eq!(keys(&["get", "a"]).unwrap(), vec![1]);
        assert_eq!(keys(&["set", "a", "b"]).unwrap(), vec![1]);
        assert!(keys(&["ping", "x"]).is_err());
        assert!(keys(&["nosuch", "x"]).is_err());
        assert!(keys(&["config", "get", "x"]).is_err());
        let a: Vec<Bytes> = ["set", "a", "b", "get"]
            .iter()
            .map(|s| Bytes::from(s.to_string()))
            .collect();
        assert_eq!(get_keys(&a).unwrap()[0].1, vec!["RW", "access", "update"]);
    }
}
