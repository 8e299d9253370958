//! server commands.

use super::Command;

pub static COMMANDS: &[Command] = &[];

/// Client names may not contain spaces or newlines.
pub fn validate_client_name(n: &[u8]) -> crate::error::CmdResult {
    if n.iter().any(|&b| !(b'!'..=b'~').contains(&b)) {
        return Err(crate::error::Error::other(
            "ERR Client names cannot contain spaces, newlines or special characters.",
        ));
    }
    Ok(())
}
