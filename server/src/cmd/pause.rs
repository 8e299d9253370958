//! The CLIENT PAUSE check connections make before they run a request: a
//! paused request waits, unread, until the pause ends. It looks the
//! request up in the command table (and into a MULTI's queue for EXEC),
//! so it is the dispatcher's; the pause itself is `State::pause`.

use super::flags::WRITE;
use super::{resolve, Command};
use crate::core::command::may_replicate;
use crate::state::script_flags::runner_flags;
use crate::state::{Client, State};
use bytes::Bytes;

/// Whether a request of `cl` must wait for the current CLIENT PAUSE to end.
pub fn must_pause(st: &State, cl: &Client, args: &[Bytes], now: i64) -> bool {
    let Some(p) = &st.pause else {
        return false;
    };
    if p.until_ms <= now {
        return false;
    }
    match resolve(args) {
        // Refused at once: the gatekeeper's arity check comes first.
        Ok(cmd) if !cmd.arity_ok(args.len()) => false,
        Ok(cmd) if p.writes_only => may_write(st, cl, cmd, args),
        Ok(_) => true,
        Err(_) => false,
    }
}

/// What CLIENT PAUSE WRITE holds back: a write or may-replicate command, a
/// script or function not declared `no-writes` (one not known yet counts
/// as writing), or an EXEC whose queue holds one of these.
fn may_write(st: &State, cl: &Client, cmd: &Command, args: &[Bytes]) -> bool {
    if cmd.has(WRITE) || may_replicate(cmd.name) {
        return true;
    }
    if cmd.name == "exec" {
        return cl.multi.as_ref().is_some_and(|q| {
            q.iter()
                .any(|a| resolve(a).is_ok_and(|c| may_write(st, cl, c, a)))
        });
    }
    if !matches!(cmd.name, "eval" | "evalsha" | "fcall") {
        return false;
    }
    let script_flags = runner_flags(st, cmd, args);
    script_flags.is_none_or(|f| f & scripting::flags::NO_WRITES == 0)
}
