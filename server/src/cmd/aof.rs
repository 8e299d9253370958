//! BGREWRITEAOF.

use super::{Ctx, Handler};
use crate::core::error::{CmdResult, Error};
use crate::state::aof::Start;
use bytes::Bytes;

pub static HANDLERS: &[(&str, Handler)] = &[("bgrewriteaof", bgrewriteaof)];

/// BGREWRITEAOF
///
/// The base is written in the background by the snapshot engine; while a
/// BGSAVE uses it, or inside MULTI/EXEC, the rewrite is scheduled for the
/// cron, as Redis does.
fn bgrewriteaof(c: &mut Ctx, _: &[Bytes]) -> CmdResult {
    if c.st.aof.rewrite.is_some() {
        return Err(Error::other(
            "ERR Background append only file rewriting already in progress",
        ));
    }
    match crate::state::aof::bgrewriteaof(c.st, c.cl.deny_blocking) {
        Ok(Start::Started) => c
            .out
            .simple("Background append only file rewriting started"),
        Ok(Start::Scheduled) => c
            .out
            .simple("Background append only file rewriting scheduled"),
        Err(_) => return Err(Error::other(
            "ERR Can't execute an AOF background rewriting. Please check the server logs for more information.",
        )),
    }
    Ok(())
}
