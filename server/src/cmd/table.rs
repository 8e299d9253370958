//! The command table: what each command is, from Redis 7.0.15's own
//! metadata (generated into [`crate::core::command::meta`] by
//! `tools/gen_command_table.py`), joined with the handlers the families
//! bind by name (`HANDLERS`, `config|get` for a subcommand). Rows left
//! unbound are commands not implemented yet: unknown to clients and to
//! COMMAND.

use super::ctx::Ctx;
pub use crate::core::command::{flags, key_flags, Begin, Find, KeySpec, Meta};
use crate::core::error::{CmdResult, Error};
use ahash::AHashMap as HashMap;
use bytes::Bytes;
use std::sync::OnceLock;

pub type Handler = fn(&mut Ctx, &[Bytes]) -> CmdResult;

/// A command cinnabar implements: Redis's row bound to its handler. Reads
/// as its [`Meta`] (`cmd.name`, `cmd.arity`, `cmd.has(..)`).
pub struct Command {
    pub meta: &'static Meta,
    pub handler: Handler,
    /// The implemented subcommands of a container command (CONFIG, …),
    /// which then dispatches on its first argument.
    pub subcommands: &'static [Command],
    /// Its place in `Stats::cmd`: counting a call indexes, where a map by
    /// name hashed the name on every request.
    pub slot: usize,
}

impl std::ops::Deref for Command {
    type Target = Meta;
    fn deref(&self) -> &Meta {
        self.meta
    }
}

fn no_handler(_: &mut Ctx, _: &[Bytes]) -> CmdResult {
    Ok(())
}

/// Every family's bindings of names (`get`, `config|get`) to handlers,
/// installed once at start-up by `cmd::families::install`: the table is
/// assembled then, as Redis populates its command table, so that the
/// dispatch the families call (`execute`, `lookup`) does not name them.
static BINDINGS: OnceLock<&'static [&'static [(&'static str, Handler)]]> = OnceLock::new();

/// Installs the families' bindings; the first call wins.
pub fn install(families: &'static [&'static [(&'static str, Handler)]]) {
    let _ = BINDINGS.set(families);
}

fn bindings() -> impl Iterator<Item = &'static (&'static str, Handler)> {
    BINDINGS
        .get()
        .expect("the command table is installed at start-up (cmd::families::install)")
        .iter()
        .flat_map(|f| f.iter())
}

/// The implemented commands by name: each binding joined with its
/// generated row; a container command is there when one of its
/// subcommands is bound.
pub fn table() -> &'static HashMap<&'static str, &'static Command> {
    static TABLE: OnceLock<HashMap<&'static str, &'static Command>> = OnceLock::new();
    TABLE.get_or_init(|| {
        let row = |name: &str| {
            crate::core::command::rows::find(name).unwrap_or_else(|| panic!("no row for {name}"))
        };
        let mut subs: HashMap<&str, Vec<Command>> = HashMap::new();
        let mut tops: Vec<Command> = Vec::new();
        for &(name, handler) in bindings() {
            let meta = row(name);
            let cmd = Command {
                meta,
                handler,
                subcommands: &[],
                slot: crate::core::command::rows::slot_of(meta),
            };
            match name.split_once('|') {
                Some((parent, _)) => subs.entry(parent).or_default().push(cmd),
                None => tops.push(cmd),
            }
        }
        for (parent, subcommands) in subs {
            let meta = row(parent);
            tops.push(Command {
                meta,
                handler: no_handler,
                subcommands: subcommands.leak(),
                slot: crate::core::command::rows::slot_of(meta),
            });
        }
        let tops: &'static [Command] = tops.leak();
        tops.iter().map(|c| (c.name, c)).collect()
    })
}

/// Every command and subcommand of [`table`], each with its statistics
/// slot, in no order.
pub fn all_commands() -> impl Iterator<Item = &'static Command> {
    table()
        .values()
        .flat_map(|&c| std::iter::once(c).chain(c.subcommands.iter()))
}

/// FNV-1a, one step: the hash [`lookup`] computes while it lowercases.
fn name_hash(h: u32, c: u8) -> u32 {
    (h ^ c as u32).wrapping_mul(0x0100_0193)
}

const NAME_HASH_SEED: u32 = 0x811c_9dc5;

/// `rename-command` lines in the order read: (old name, new name), an
/// empty new name removing the command. Set once, before any lookup.
static RENAMES: OnceLock<Vec<(String, String)>> = OnceLock::new();

/// The names clients call the commands of [`table`] by, once `renames`
/// applied ([`crate::core::command::rows::apply_renames`]). Every row of Redis's
/// takes part, bound or not, as the configuration's check saw them.
fn rename(renames: &[(String, String)]) -> Result<Vec<(String, &'static Command)>, &'static str> {
    let mut names: Vec<(String, Option<&'static Command>)> = crate::core::command::meta::META
        .iter()
        .map(|m| (m.name.to_string(), table().get(m.name).copied()))
        .collect();
    crate::core::command::rows::apply_renames(&mut names, renames)?;
    Ok(names
        .into_iter()
        .filter_map(|(n, c)| Some((n, c?)))
        .collect())
}

/// Installs the `rename-command` lines of the configuration (checked by
/// [`crate::core::command::rows::check_renames`] when it was read). Called at start-up, before the first
/// request is looked up.
pub fn rename_commands(renames: &[(String, String)]) {
    assert!(BY_HASH.get().is_none(), "commands renamed after a lookup");
    RENAMES
        .set(renames.to_vec())
        .expect("commands renamed twice");
}

/// A callable command and the name clients call it by.
type Named = (&'static str, &'static Command);

static BY_HASH: OnceLock<Box<[Option<&'static Named>]>> = OnceLock::new();

/// The callable commands by their names' [`name_hash`], linear probing in
/// a table at most a quarter full (few names collide). Every request looks its command up: hashing
/// the lowercased copy again through a general map took ~220 instructions.
fn by_hash() -> &'static [Option<&'static Named>] {
    BY_HASH.get_or_init(|| {
        let mut names = match RENAMES.get() {
            Some(r) => rename(r).expect("renames checked when the configuration was read"),
            None => table().iter().map(|(n, &c)| (n.to_string(), c)).collect(),
        };
        // Which of two names that collide is found first does not depend
        // on the map's random order.
        names.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        let named: &'static [Named] = names
            .into_iter()
            .map(|(name, c)| match table().get_key_value(name.as_str()) {
                Some((&n, _)) => (n, c),
                None => (&*name.leak(), c),
            })
            .collect::<Vec<_>>()
            .leak();
        let mask = (named.len() * 4).next_power_of_two() - 1;
        let mut slots = vec![None; mask + 1];
        for e in named {
            let mut i = e.0.bytes().fold(NAME_HASH_SEED, name_hash) as usize & mask;
            while slots[i].is_some() {
                i = (i + 1) & mask;
            }
            slots[i] = Some(e);
        }
        slots.into_boxed_slice()
    })
}

/// The commands clients can call (all of [`table`] but those renamed to
/// ""), each with the name Redis knows it by, in no order.
pub fn callable() -> impl Iterator<Item = &'static Command> {
    by_hash().iter().flatten().map(|&&(_, c)| c)
}

/// Looks a command up by the name clients call it by, case-insensitively,
/// without allocating.
pub fn lookup(name: &[u8]) -> Option<&'static Command> {
    let mut buf = [0u8; 32];
    if name.len() > buf.len() {
        return lookup_long(name);
    }
    let mut h = NAME_HASH_SEED;
    for (d, s) in buf.iter_mut().zip(name) {
        *d = s.to_ascii_lowercase();
        h = name_hash(h, *d);
    }
    let lower = &buf[..name.len()];
    let slots = by_hash();
    let mask = slots.len() - 1;
    let mut i = h as usize & mask;
    while let Some(&(n, c)) = slots[i] {
        if n.as_bytes() == lower {
            return Some(c);
        }
        i = (i + 1) & mask;
    }
    None
}

/// A name longer than [`lookup`]'s buffer: only a renamed command has one.
#[cold]
#[inline(never)]
fn lookup_long(name: &[u8]) -> Option<&'static Command> {
    RENAMES.get()?;
    by_hash()
        .iter()
        .flatten()
        .find(|(n, _)| n.as_bytes().eq_ignore_ascii_case(name))
        .map(|&&(_, c)| c)
}

/// Finds a subcommand of `parent` for `args[1]`.
pub fn lookup_sub(parent: &'static Command, sub: &[u8]) -> Option<&'static Command> {
    let skip = parent.name.len() + 1;
    parent
        .subcommands
        .iter()
        .find(|c| c.name.as_bytes()[skip..].eq_ignore_ascii_case(sub))
}

/// The command (or subcommand) for a request, or the error for an unknown one.
pub fn resolve(args: &[Bytes]) -> Result<&'static Command, Error> {
    let Some(cmd) = lookup(&args[0]) else {
        let mut rest = String::new();
        for a in &args[1..] {
            if rest.len() >= 128 {
                break;
            }
            let s = String::from_utf8_lossy(a);
            let room = 128 - rest.len();
            rest.push_str(&format!("'{}' ", s.chars().take(room).collect::<String>()));
        }
        let name: String = String::from_utf8_lossy(&args[0])
            .chars()
            .take(128)
            .collect();
        return Err(Error::UnknownCommand(format!(
            "'{name}', with args beginning with: {rest}"
        )));
    };
    if cmd.subcommands.is_empty() {
        return Ok(cmd);
    }
    if args.len() < 2 {
        return Err(Error::Arity(cmd.name.into()));
    }
    lookup_sub(cmd, &args[1]).ok_or_else(|| Error::UnknownSubcommand {
        sub: String::from_utf8_lossy(&args[1])
            .chars()
            .take(128)
            .collect(),
        cmd: cmd.name.to_ascii_uppercase(),
    })
}

/// Keys of a full command (`args[0]` its name) by position in `args`, with
/// their key-spec flags, found as COMMAND GETKEYS finds them.
pub fn get_keys(args: &[Bytes]) -> Result<Vec<(usize, u32)>, Error> {
    let unknown = || Error::other("ERR Invalid command specified");
    let parent = lookup(&args[0]).ok_or_else(unknown)?;
    let cmd = match args.get(1) {
        Some(sub) if !parent.subs.is_empty() => sub_of(parent, sub).ok_or_else(unknown)?,
        _ => parent.meta,
    };
    crate::core::command::keys::keys_for(cmd, args)
}

/// An implemented subcommand of `parent`: COMMAND's own are all
/// implemented, by its handler.
pub fn sub_of(parent: &'static Command, sub: &[u8]) -> Option<&'static Meta> {
    if parent.name == "command" {
        let skip = parent.name.len() + 1;
        return parent
            .subs
            .iter()
            .find(|s| s.name.as_bytes()[skip..].eq_ignore_ascii_case(sub));
    }
    lookup_sub(parent, sub).map(|c| c.meta)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Redis 7.0.15's commands and subcommands cinnabar does not implement
    /// yet: their rows stay unbound, so they are unknown to clients.
    const NOT_IMPLEMENTED: &[&str] = &[];

    /// Every binding has a row, and every row is bound or listed as not
    /// implemented (COMMAND's subcommands are served by its handler).
    #[test]
    fn bindings_match_rows() {
        crate::cmd::families::install();
        let mut bound = std::collections::HashSet::new();
        for &(name, _) in bindings() {
            assert!(
                crate::core::command::rows::find(name).is_some(),
                "{name} is bound but has no row"
            );
            assert!(bound.insert(name), "{name} is bound twice");
            assert!(!NOT_IMPLEMENTED.contains(&name), "{name} is bound");
            if let Some((parent, _)) = name.split_once('|') {
                assert!(!bound.contains(parent), "{parent} is bound, and {name}");
            }
        }
        for m in crate::core::command::meta::META {
            let implemented = bound.contains(m.name) || table().contains_key(m.name);
            assert!(
                implemented != NOT_IMPLEMENTED.contains(&m.name),
                "{}: bind it or list it as not implemented",
                m.name
            );
            for s in m.subs.iter().filter(|_| m.name != "command") {
                assert!(
                    bound.contains(s.name) != NOT_IMPLEMENTED.contains(&s.name),
                    "{}: bind it or list it as not implemented",
                    s.name
                );
            }
        }
    }

    #[test]
    fn table_is_consistent() {
        crate::cmd::families::install();
        assert!(crate::core::command::meta::META
            .windows(2)
            .all(|w| w[0].name < w[1].name));
        for (name, c) in table() {
            assert_eq!(*name, c.name);
            assert!(c.arity != 0, "{name}");
            assert!(
                c.has(flags::WRITE) as u8 + c.has(flags::READONLY) as u8 <= 1,
                "{name}"
            );
            assert!(std::ptr::eq(lookup(name.as_bytes()).unwrap(), *c), "{name}");
            assert!(std::ptr::eq(
                lookup(name.to_uppercase().as_bytes()).unwrap(),
                *c
            ));
            assert!(lookup(format!("{name}@").as_bytes()).is_none(), "{name}@");
            for s in c.subcommands {
                assert!(s.name.starts_with(&format!("{name}|")), "{}", s.name);
                let sub = &s.name[name.len() + 1..];
                assert!(lookup_sub(c, sub.to_uppercase().as_bytes()).is_some());
            }
        }
    }
}
