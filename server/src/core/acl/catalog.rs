//! The ACL's view of the commands: every command and subcommand of Redis
//! 7.0.15 with its categories, from the generated metadata.

use crate::core::acl::{Catalog, CmdDesc};
use crate::core::command::meta;
use std::sync::OnceLock;

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
