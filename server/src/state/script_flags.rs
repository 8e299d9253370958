//! What a script or function declares of itself (its shebang's flags, or
//! a library's `flags`), which the checks of a request read in place of
//! its runner command's.

use crate::core::command::Meta;
use crate::state::State;
use bytes::Bytes;

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
