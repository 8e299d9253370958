//! BGREWRITEAOF.

use super::flags::*;
use super::{Command, Ctx};
use crate::error::{CmdResult, Error};
use bytes::Bytes;

pub static COMMANDS: &[Command] = &[Command::new(
    "bgrewriteaof",
    1,
    ADMIN | NOSCRIPT,
    "admin",
    (0, 0, 0),
    bgrewriteaof,
)];

/// BGREWRITEAOF
///
/// The new base is written before the reply, under the state lock (see
/// `aof::rewrite`), so a rewrite is never seen in progress.
fn bgrewriteaof(c: &mut Ctx, _: &[Bytes]) -> CmdResult {
    crate::aof::rewrite(c.st).map_err(|e| {
        Error::other(format!(
            "ERR Background append only file rewriting failed: {e}"
        ))
    })?;
    c.out
        .simple("Background append only file rewriting started");
    Ok(())
}
