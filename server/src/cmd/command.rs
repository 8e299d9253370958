//! COMMAND and its subcommands: COUNT LIST INFO DOCS GETKEYS
//! GETKEYSANDFLAGS HELP.
//!
//! Everything is read from the command table (`super::table`: Redis
//! 7.0.15's generated rows bound to cinnabar's handlers), so only what
//! cinnabar implements is shown. COMMAND's own subcommands are dispatched
//! here, since bare COMMAND is a valid call, but are described by their rows
//! like any other. GETKEYS finds the keys as `crate::core::command::keys`
//! does: by the key specs, else by Redis's per-command rules.

use super::help::help_reply;
use super::key_flags;
use super::{
    callable, flags, get_keys, is, lookup, sub_of, table, Begin, Command, Ctx, Find, Handler, Meta,
};
use crate::core::error::{CmdResult, Error};
use bytes::Bytes;
use protocol::{Frame, ReplyBuf};

pub static HANDLERS: &[(&str, Handler)] = &[("command", command)];

/// Writes a frame, degrading RESP3 types as the buffer requires.
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

/// Every command clients can call, by the name Redis knows it by (a
/// renamed command keeps it), in a stable order.
fn all_commands() -> Vec<&'static Command> {
    let mut v: Vec<&'static Command> = callable().collect();
    v.sort_by_key(|c| c.name);
    v
}

/// The row of an implemented command or subcommand by full name (`get`,
/// `config|get`).
fn find_full(name: &[u8]) -> Option<&'static Meta> {
    match name.iter().position(|&b| b == b'|') {
        Some(i) => sub_of(lookup(&name[..i])?, &name[i + 1..]),
        None => lookup(name).map(|c| c.meta),
    }
}

/// The implemented subcommands of a row.
fn implemented_subs(m: &'static Meta) -> impl Iterator<Item = &'static Meta> {
    m.subs
        .iter()
        .filter(|s| find_full(s.name.as_bytes()).is_some())
}

fn flag_names(o: &mut ReplyBuf, bits: u32, names: &[(u32, &str)]) {
    let n = names.iter().filter(|(f, _)| bits & f != 0).count();
    o.set(n);
    for (_, name) in names.iter().filter(|(f, _)| bits & f != 0) {
        o.simple(name);
    }
}

fn int_map(o: &mut ReplyBuf, fields: &[(&str, i32)]) {
    o.map(fields.len());
    for (k, v) in fields {
        o.bulk(k.as_bytes());
        o.int(*v as i64);
    }
}

/// One COMMAND INFO entry.
fn write_info(o: &mut ReplyBuf, m: &'static Meta) {
    o.array(10);
    o.bulk(m.name.as_bytes());
    o.int(m.arity as i64);
    flag_names(o, m.flags, flags::NAMES);
    o.int(m.first_key as i64);
    o.int(m.last_key as i64);
    o.int(m.step as i64);
    o.set(m.acl.len());
    m.acl.iter().for_each(|a| o.simple(a));
    o.set(m.tips.len());
    m.tips.iter().for_each(|t| o.bulk(t.as_bytes()));
    o.set(m.specs.len());
    for s in m.specs {
        o.map(3 + !s.notes.is_empty() as usize);
        if !s.notes.is_empty() {
            o.bulk(b"notes");
            o.bulk(s.notes.as_bytes());
        }
        o.bulk(b"flags");
        flag_names(o, s.flags, key_flags::NAMES);
        o.bulk(b"begin_search");
        o.map(2);
        o.bulk(b"type");
        match s.begin {
            Begin::Index(i) => {
                o.bulk(b"index");
                o.bulk(b"spec");
                int_map(o, &[("index", i)]);
            }
            Begin::Keyword(kw, from) => {
                o.bulk(b"keyword");
                o.bulk(b"spec");
                o.map(2);
                o.bulk(b"keyword");
                o.bulk(kw.as_bytes());
                o.bulk(b"startfrom");
                o.int(from as i64);
            }
            Begin::Unknown => {
                o.bulk(b"unknown");
                o.bulk(b"spec");
                o.map(0);
            }
        }
        o.bulk(b"find_keys");
        o.map(2);
        o.bulk(b"type");
        match s.find {
            Find::Range {
                lastkey,
                keystep,
                limit,
            } => {
                o.bulk(b"range");
                o.bulk(b"spec");
                int_map(
                    o,
                    &[("lastkey", lastkey), ("keystep", keystep), ("limit", limit)],
                );
            }
            Find::Keynum {
                keynumidx,
                firstkey,
                keystep,
            } => {
                o.bulk(b"keynum");
                o.bulk(b"spec");
                int_map(
                    o,
                    &[
                        ("keynumidx", keynumidx),
                        ("firstkey", firstkey),
                        ("keystep", keystep),
                    ],
                );
            }
            Find::Unknown => {
                o.bulk(b"unknown");
                o.bulk(b"spec");
                o.map(0);
            }
        }
    }
    if m.subs.is_empty() {
        o.set(0);
    } else {
        let subs: Vec<&'static Meta> = implemented_subs(m).collect();
        o.array(subs.len());
        subs.into_iter().for_each(|s| write_info(o, s));
    }
}

/// One COMMAND DOCS value (the map for a name).
fn write_docs(o: &mut ReplyBuf, m: &'static Meta) {
    let Some((Frame::Map(fields), _)) = protocol::parse_reply(m.docs) else {
        unreachable!("generated docs of {} are a RESP3 map", m.name);
    };
    o.map(fields.len() + !m.subs.is_empty() as usize);
    for (k, v) in &fields {
        emit(o, k);
        emit(o, v);
    }
    if !m.subs.is_empty() {
        let subs: Vec<&'static Meta> = implemented_subs(m).collect();
        o.bulk(b"subcommands");
        o.map(subs.len());
        for s in subs {
            o.bulk(s.name.as_bytes());
            write_docs(o, s);
        }
    }
}

/// COMMAND [subcommand ...]
fn command(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    if a.len() == 1 {
        let all = all_commands();
        c.out.array(all.len());
        for cmd in all {
            write_info(c.out, cmd.meta);
        }
        return Ok(());
    }
    let this = table()["command"];
    let Some(sub) = sub_of(this, &a[1]) else {
        return Err(Error::UnknownSubcommand {
            sub: String::from_utf8_lossy(&a[1]).into_owned(),
            cmd: "COMMAND".into(),
        });
    };
    if !sub.arity_ok(a.len()) {
        return Err(Error::Arity(sub.name.into()));
    }
    match &sub.name["command|".len()..] {
        "count" => c.out.int(callable().count() as i64),
        "list" => list(c, a)?,
        "info" => {
            if a.len() == 2 {
                return command(c, &a[..1]);
            }
            c.out.array(a.len() - 2);
            for name in &a[2..] {
                match find_full(name) {
                    Some(m) => write_info(c.out, m),
                    None => c.out.null(),
                }
            }
        }
        "docs" => {
            // In the order asked; unknown names are left out.
            let docs: Vec<&'static Meta> = if a.len() == 2 {
                all_commands().into_iter().map(|c| c.meta).collect()
            } else {
                a[2..].iter().filter_map(|n| find_full(n)).collect()
            };
            c.out.map(docs.len());
            for m in docs {
                c.out.bulk(m.name.as_bytes());
                write_docs(c.out, m);
            }
        }
        "getkeys" | "getkeysandflags" => {
            let keys = get_keys(&a[2..])?;
            c.out.array(keys.len());
            for (i, bits) in keys {
                if sub.name == "command|getkeys" {
                    c.out.bulk(&a[2 + i]);
                } else {
                    c.out.array(2);
                    c.out.bulk(&a[2 + i]);
                    flag_names(c.out, bits, key_flags::NAMES);
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
        for m in std::iter::once(cmd.meta).chain(implemented_subs(cmd.meta)) {
            let keep = match &filter {
                Filter::All => true,
                Filter::Module => false,
                Filter::Cat(cat) => m.acl.contains(&cat.as_str()),
                Filter::Pattern(p) => storage::glob::matches(p, m.name.as_bytes(), true),
            };
            if keep {
                names.push(m.name);
            }
        }
    }
    c.out.array(names.len());
    for n in names {
        c.out.bulk(n.as_bytes());
    }
    Ok(())
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
    use super::key_flags::{ACCESS, OW, RO, RW, UPDATE};
    use super::*;
    use std::collections::HashMap;

    fn keys(args: &[&str]) -> Result<Vec<(usize, u32)>, Error> {
        let a: Vec<Bytes> = args.iter().map(|s| Bytes::from(s.to_string())).collect();
        get_keys(&a)
    }

    #[test]
    fn keys_from_specs_and_rules() {
        crate::cmd::families::install();
        assert_eq!(keys(&["get", "a"]).unwrap(), vec![(1, RO | ACCESS)]);
        assert_eq!(keys(&["set", "a", "b"]).unwrap(), vec![(1, OW | UPDATE)]);
        assert_eq!(
            keys(&["set", "a", "b", "get"]).unwrap(),
            vec![(1, RW | ACCESS | UPDATE)]
        );
        assert!(keys(&["ping", "x"]).is_err());
        assert!(keys(&["nosuch", "x"]).is_err());
        assert!(keys(&["config", "get", "x"]).is_err());
        let pos =
            |a: &[&str]| -> Vec<usize> { keys(a).unwrap().into_iter().map(|k| k.0).collect() };
        assert_eq!(
            pos(&["sort", "a", "limit", "store", "1", "store", "q"]),
            [1, 6]
        );
        assert_eq!(pos(&["zunionstore", "d", "2", "a", "b"]), [1, 3, 4]);
        assert_eq!(pos(&["zunionstore", "d", "2x", "a", "b"]), [3, 4, 1]);
        assert_eq!(pos(&["eval", "s", "0"]), Vec::<usize>::new());
        assert_eq!(pos(&["mset", "a", "1", "b"]), [1, 3]);
    }

    /// The recorded COMMAND reply of Redis 7.0.15, by full name.
    fn recorded() -> HashMap<String, Frame> {
        fn add(m: &mut HashMap<String, Frame>, f: &Frame) {
            let Frame::Array(v) = f else { return };
            let Frame::Bulk(name) = &v[0] else { return };
            m.insert(String::from_utf8_lossy(name).into_owned(), f.clone());
            if let Frame::Array(subs) = &v[9] {
                subs.iter().for_each(|s| add(m, s));
            }
        }
        let mut m = HashMap::new();
        let Some((Frame::Array(all), _)) =
            parse_reply(include_bytes!("../core/command/command_info.resp"))
        else {
            panic!("recording parses");
        };
        all.iter().for_each(|f| add(&mut m, f));
        m
    }

    use protocol::parse_reply;

    /// COMMAND INFO of every implemented command and subcommand is Redis
    /// 7.0.15's, but for the subcommands cinnabar does not implement.
    #[test]
    fn info_as_recorded() {
        crate::cmd::families::install();
        let rec = recorded();
        let mut names: Vec<&str> = Vec::new();
        for c in table().values() {
            names.push(c.name);
            names.extend(implemented_subs(c.meta).map(|s| s.name));
        }
        assert!(names.len() > 250);
        for name in names {
            let Some(Frame::Array(mut want)) = rec.get(name).cloned() else {
                panic!("{name} not recorded");
            };
            if let Frame::Array(subs) = &mut want[9] {
                subs.retain(|s| match s {
                    Frame::Array(v) => match &v[0] {
                        Frame::Bulk(n) => find_full(n).is_some(),
                        _ => false,
                    },
                    _ => false,
                });
                subs.sort_by_key(|s| format!("{s:?}"));
            }
            let mut w = ReplyBuf::new(true);
            emit(&mut w, &Frame::Array(want));
            let mut g = ReplyBuf::new(true);
            write_info(&mut g, find_full(name.as_bytes()).unwrap());
            assert_eq!(
                String::from_utf8_lossy(&g.buf),
                String::from_utf8_lossy(&w.buf),
                "{name}"
            );
        }
    }
}
