//! What an option is: its name, the kind of value it takes, its default,
//! whether CONFIG SET may change it (the rows of `table`).

#[derive(Debug, Clone, Copy)]
pub enum Kind {
    Bool,
    Int(i64, i64),
    /// A memory value held in a signed type: the range applies.
    Memory(i64, i64),
    /// A memory value held in an unsigned 64-bit type (maxmemory).
    UMemory,
    Enum(&'static [&'static str]),
    Str,
    /// A structured value with its own validation (save, bind, …).
    Special,
}

pub struct Opt {
    pub name: &'static str,
    pub kind: Kind,
    pub default: &'static str,
    pub mutable: bool,
}
