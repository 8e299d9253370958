//! MODULE: cinnabar loads no Redis modules, so it answers as Redis does
//! with none loaded: an empty LIST, and LOAD/LOADEX failing as for a
//! library that does not load (also how `loadmodule` stops start-up).

use super::help::help_reply;
use super::{Ctx, Handler};
use crate::core::error::{CmdResult, Error};
use bytes::Bytes;

pub static HANDLERS: &[(&str, Handler)] = &[
    ("module|help", help),
    ("module|list", list),
    ("module|load", load),
    ("module|loadex", load),
    ("module|unload", unload),
];

const NOT_ALLOWED: &str = "ERR MODULE command not allowed. If the enable-module-command option is set to \"local\", you can run it from a local connection, otherwise you need to set this option in the configuration file, and then restart the server.";

/// `enable-module-command`, as DEBUG's option.
fn allowed(c: &Ctx) -> CmdResult {
    if c.st.cfg.enable_module_command.permits(c.cl.is_local()) {
        Ok(())
    } else {
        Err(Error::other(NOT_ALLOWED))
    }
}

/// MODULE LIST
fn list(c: &mut Ctx, _a: &[Bytes]) -> CmdResult {
    c.out.array(0);
    Ok(())
}

/// MODULE LOAD path [arg ...] / MODULE LOADEX path [CONFIG name value ...] [ARGS ...]
fn load(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    allowed(c)?;
    let path = String::from_utf8_lossy(&a[2]);
    tracing::warn!(
        "Module {path} failed to load: {}",
        crate::core::os::module_load_error(&path)
    );
    Err(Error::other(
        "ERR Error loading the extension. Please check the server logs.",
    ))
}

/// MODULE UNLOAD name
fn unload(c: &mut Ctx, _a: &[Bytes]) -> CmdResult {
    allowed(c)?;
    Err(Error::other(
        "ERR Error unloading module: no such module with that name",
    ))
}

/// MODULE HELP
fn help(c: &mut Ctx, _a: &[Bytes]) -> CmdResult {
    help_reply(
        c,
        "MODULE",
        &[
            "LIST",
            "    Return a list of loaded modules.",
            "LOAD <path> [<arg> ...]",
            "    Load a module library from <path>, passing to it any optional arguments.",
            "LOADEX <path> [[CONFIG NAME VALUE] [CONFIG NAME VALUE]] [ARGS ...]",
            "    Load a module library from <path>, while passing it module configurations and optional arguments.",
            "UNLOAD <name>",
            "    Unload a module.",
        ],
    );
    Ok(())
}
