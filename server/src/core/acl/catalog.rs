//! The ACL's view of the commands: every command and subcommand of Redis
//! 7.0.15 with its categories, from the generated metadata.

use crate::core::command::meta;
use std::sync::OnceLock;

/// The categories, in Redis's order (ACL CAT, and the order rules are
/// tried when describing a user).
pub const CATEGORIES: &[&str] = &[
    "keyspace",
    "read",
    "write",
    "set",
    "sortedset",
    "list",
    "hash",
    "string",
    "bitmap",
    "hyperloglog",
    "geo",
    "stream",
    "pubsub",
    "admin",
    "fast",
    "slow",
    "blocking",
    "dangerous",
    "connection",
    "transaction",
    "scripting",
];

/// The number of command ids a selector's bitmap holds.
pub(super) const WORDS: usize = 8;

/// A command or subcommand as the ACL sees it.
pub struct CmdDesc {
    /// `get`, `config|get`.
    pub name: &'static str,
    /// Bit `i` set: in `CATEGORIES[i]`.
    pub cats: u32,
    /// The ids of its subcommands (empty for most commands).
    pub subs: Vec<usize>,
}

/// Every command, by id (its index).
pub struct Catalog {
    pub cmds: Vec<CmdDesc>,
}

impl Catalog {
    pub fn new(cmds: Vec<CmdDesc>) -> Self {
        assert!(
            cmds.len() <= WORDS * 64,
            "too many commands for the ACL bitmap"
        );
        Catalog { cmds }
    }

    pub fn id(&self, name: &[u8]) -> Option<usize> {
        self.cmds
            .iter()
            .position(|c| c.name.as_bytes().eq_ignore_ascii_case(name))
    }

    /// The ids in category `cat`.
    pub(super) fn in_category(&self, cat: usize) -> impl Iterator<Item = usize> + '_ {
        (0..self.cmds.len()).filter(move |&i| self.cmds[i].cats & (1 << cat) != 0)
    }
}

pub fn category(name: &[u8]) -> Option<usize> {
    CATEGORIES
        .iter()
        .position(|c| c.as_bytes().eq_ignore_ascii_case(name))
}

/// Every command of Redis 7.0.15 with its categories, ids in META order
/// (a command, then its subcommands).
pub fn catalog() -> &'static Catalog {
    static CATALOG: OnceLock<Catalog> = OnceLock::new();
    CATALOG.get_or_init(|| {
        let cats = |acl: &[&str]| {
            acl.iter()
                .filter_map(|c| crate::core::acl::category(c.trim_start_matches('@').as_bytes()))
                .fold(0u32, |m, i| m | 1 << i)
        };
        let mut cmds = Vec::new();
        for m in meta::META {
            let id = cmds.len();
            cmds.push(CmdDesc {
                name: m.name,
                cats: cats(m.acl),
                subs: (id + 1..id + 1 + m.subs.len()).collect(),
            });
            for s in m.subs {
                cmds.push(CmdDesc {
                    name: s.name,
                    cats: cats(s.acl),
                    subs: Vec::new(),
                });
            }
        }
        Catalog::new(cmds)
    })
}
