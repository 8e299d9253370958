//! What a script or function declares of itself (its shebang's flags, or
//! a library's `flags`), which the checks of a request read in place of
//! its runner command's.

use crate::core::command::Meta;
use crate::core::error::Error;
use crate::state::State;
use bytes::Bytes;
use scripting::flags as sflags;

pub const OOM: &str = "OOM command not allowed when used memory > 'maxmemory'.";

/// The flags the script or function an EVAL, EVALSHA or FCALL (or its _RO
/// form) runs declares (`EVAL_COMPAT` for a script without a shebang);
/// `None` for another command or one not known yet.
pub fn runner_flags(st: &State, cmd: &Meta, args: &[Bytes]) -> Option<u32> {
    let arg = args.get(1)?;
    let engine = st.engine.as_ref();
    match cmd.name {
        "eval" | "eval_ro" => scripting::engine::parse_eval_shebang(arg).ok().map(|f| f.0),
        "evalsha" | "evalsha_ro" => {
            let sha = String::from_utf8_lossy(arg).to_ascii_lowercase();
            engine.and_then(|e| e.script_flags(&sha))
        }
        "fcall" | "fcall_ro" => {
            let name = String::from_utf8_lossy(arg);
            engine.and_then(|e| e.functions.get(&*name).map(|f| f.flags))
        }
        _ => None,
    }
}

/// Over `maxmemory` (the gatekeeper has evicted what it could).
pub fn out_of_memory(st: &State) -> bool {
    st.memory.maxmemory > 0 && crate::state::evict::used_memory() > st.memory.maxmemory
}

/// A script or function declared with flags (not an EVAL in the pre-7.0
/// mode) is refused whole in cluster mode if `no-cluster`; if it may write,
/// while the disk cannot take writes (MISCONF), and when memory is over the
/// limit unless it is `allow-oom`.
pub fn refuse_by_flags(st: &State, flags: u32) -> Result<(), Error> {
    if flags & sflags::NO_CLUSTER != 0 && flags & sflags::EVAL_COMPAT == 0 && st.cluster.is_some() {
        return Err(Error::other(
            "ERR Can not run script on cluster, 'no-cluster' flag is set.",
        ));
    }
    if flags & (sflags::EVAL_COMPAT | sflags::NO_WRITES) == 0 {
        if let Some(e) = crate::state::persist::writes_denied(st) {
            return Err(Error::other(e));
        }
    }
    let may_write_without_oom =
        flags & (sflags::EVAL_COMPAT | sflags::NO_WRITES | sflags::ALLOW_OOM) == 0;
    if may_write_without_oom && out_of_memory(st) {
        return Err(Error::other(OOM));
    }
    Ok(())
}
