//! Replies shared by the container commands: HELP texts and the unknown
//! subcommand error.

use super::Ctx;
use crate::core::error::Error;

/// A HELP reply as Redis builds it: a header naming the command, `lines`,
/// then the HELP entry, each a status reply.
pub fn help_reply(c: &mut Ctx, cmd: &str, lines: &[&str]) {
    c.out.array(lines.len() + 3);
    c.out.simple(&format!(
        "{cmd} <subcommand> [<arg> [value] [opt] ...]. Subcommands are:"
    ));
    for l in lines {
        c.out.simple(l);
    }
    c.out.simple("HELP");
    c.out.simple("    Prints this help.");
}

/// `ERR unknown subcommand or wrong number of arguments for 'x'. Try CMD HELP.`
pub fn bad_sub(sub: &[u8], cmd: &str) -> Error {
    Error::other(format!(
        "ERR unknown subcommand or wrong number of arguments for '{}'. Try {cmd} HELP.",
        String::from_utf8_lossy(sub)
    ))
}
