//! hash commands.

use super::Command;

pub static COMMANDS: &[Command] = &[];
