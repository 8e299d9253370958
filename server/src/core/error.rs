//! Command errors. `Display` is Redis's exact reply text, code first; the
//! leading `-` is added by the reply encoder.

use std::fmt;

#[derive(Debug, Clone, PartialEq)]
pub enum Error {
    Storage(storage::Error),
    Syntax,
    /// Wrong argument count; holds the command's full name (`config|get`).
    Arity(String),
    /// `cmd` and its first arguments, already quoted as Redis shows them.
    UnknownCommand(String),
    UnknownSubcommand {
        sub: String,
        cmd: String,
    },
    NoAuth,
    WrongPass,
    NoSuchKey,
    DbIndexOutOfRange,
    InvalidDbIndex,
    InvalidExpire(&'static str),
    OutOfRange,
    /// Any other error: the whole text, code included.
    Other(String),
    /// A script passing on the error of a command it ran, which that
    /// command already counted in the error stats.
    Relayed(String),
    /// A cluster redirection or refusal (-MOVED, -ASK, -TRYAGAIN,
    /// -CROSSSLOT, -CLUSTERDOWN), the whole text: EXEC passes it on as it
    /// is instead of wrapping it in -EXECABORT.
    Cluster(String),
}

pub type CmdResult = Result<(), Error>;

impl From<storage::Error> for Error {
    fn from(e: storage::Error) -> Self {
        Error::Storage(e)
    }
}

impl Error {
    pub fn other(s: impl Into<String>) -> Self {
        Error::Other(s.into())
    }

    /// Whether the error counts in INFO errorstats (it was not counted
    /// where it arose).
    pub fn counts(&self) -> bool {
        !matches!(self, Error::Relayed(_))
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Storage(e) => write!(f, "{e}"),
            Error::Syntax => f.write_str("ERR syntax error"),
            Error::Arity(name) => write!(f, "ERR wrong number of arguments for '{name}' command"),
            Error::UnknownCommand(s) => write!(f, "ERR unknown command {s}"),
            Error::UnknownSubcommand { sub, cmd } => {
                write!(f, "ERR unknown subcommand '{sub}'. Try {cmd} HELP.")
            }
            Error::NoAuth => f.write_str("NOAUTH Authentication required."),
            Error::WrongPass => {
                f.write_str("WRONGPASS invalid username-password pair or user is disabled.")
            }
            Error::NoSuchKey => f.write_str("ERR no such key"),
            Error::DbIndexOutOfRange => f.write_str("ERR DB index is out of range"),
            Error::InvalidDbIndex => f.write_str("ERR value is not an integer or out of range"),
            Error::InvalidExpire(cmd) => write!(f, "ERR invalid expire time in '{cmd}' command"),
            Error::OutOfRange => f.write_str("ERR index out of range"),
            Error::Other(s) | Error::Relayed(s) | Error::Cluster(s) => f.write_str(s),
        }
    }
}

/// Shorthands for the storage errors used everywhere.
pub const WRONGTYPE: Error = Error::Storage(storage::Error::WrongType);
pub const NOT_INTEGER: Error = Error::Storage(storage::Error::NotInteger);
pub const NOT_FLOAT: Error = Error::Storage(storage::Error::NotFloat);
