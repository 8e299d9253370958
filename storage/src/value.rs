//! Stored values and their encodings.
//!
//! Each type is one enum whose variants are its encodings, named as Redis
//! 7.0 reports them in OBJECT ENCODING; callers use the type's methods and
//! do not match on the encoding.
//!
//! Layout (checked by the `handles_stay_small` test): `Value` is 24 bytes,
//! so a keyspace dict node (next 8 + value 24 + access clock 8, then the
//! key: see `dict/node.rs`) fits 48 bytes with a key of up to 7 bytes. `StrValue` is the largest variant: a
//! `CBytes` (inline up to 22 bytes), whose tag byte leaves room for the
//! enum tags; everything else is at most 16 bytes and sits after it. The
//! compact encodings are held directly — `Hash`, `Set` and `SortedSet` are
//! 16-byte enums whose small form is an exact-size `Box<[u8]>` (listpack or
//! intset) and whose large form a box — so a small hash, set or sorted set
//! costs the node plus one allocation of exactly its bytes, as in Redis
//! (dict entry + robj + listpack), rounded up to the allocator's class
//! (8-byte steps to 64 bytes, then 80, 96, 112, 128, …; see the storage
//! section of docs/ARCHITECTURE.md).
//! The rare growable string (`Raw`) and the quicklist and the stream are
//! boxed.

use crate::num::parse_i64;
use crate::{CBytes, Hash, Quicklist, Set, SortedSet, Stream};

/// Longest string Redis stores as `embstr`.
const EMBSTR_MAX: usize = 44;

/// A stored value (24 bytes; see the module comment).
#[derive(Clone)]
pub enum Value {
    Str(StrValue),
    List(Box<Quicklist>),
    Hash(Hash),
    Set(Set),
    ZSet(SortedSet),
    Stream(Box<Stream>),
}

/// The Rust type behind each Redis type, so callers can ask for "the list
/// at this key" generically and get WRONGTYPE otherwise.
pub trait Typed: Sized {
    fn of(v: &Value) -> Option<&Self>;
    fn of_mut(v: &mut Value) -> Option<&mut Self>;
}

macro_rules! typed {
    ($t:ty, $variant:ident) => {
        impl Typed for $t {
            fn of(v: &Value) -> Option<&Self> {
                match v {
                    Value::$variant(x) => Some(x),
                    _ => None,
                }
            }
            fn of_mut(v: &mut Value) -> Option<&mut Self> {
                match v {
                    Value::$variant(x) => Some(x),
                    _ => None,
                }
            }
        }
    };
}

typed!(StrValue, Str);
typed!(Quicklist, List);
typed!(Hash, Hash);
typed!(Set, Set);
typed!(SortedSet, ZSet);
typed!(Stream, Stream);

/// A string value.
///
/// - `Int`: a canonical decimal that fits an i64 (`int` encoding);
/// - `Emb`: a string written whole (SET, GETSET, …): `embstr` up to 44 bytes,
///   `raw` above;
/// - `Raw`: a string modified in place (APPEND, SETRANGE, SETBIT), kept in a
///   growable buffer so repeated appends are amortized O(1), always `raw`
///   (boxed: a 24-byte `Vec` would make every `Value` 32 bytes).
#[derive(Clone)]
pub enum StrValue {
    Int(i64),
    Emb(CBytes),
    Raw(Box<Vec<u8>>),
}

impl StrValue {
    /// The encoding Redis picks for a string set whole.
    pub fn new(b: &[u8]) -> Self {
        if b.len() <= 20 {
            if let Some(n) = parse_i64(b) {
                return StrValue::Int(n);
            }
        }
        StrValue::Emb(CBytes::new(b))
    }

    /// The bytes of the string; integers are formatted into `buf`.
    pub fn as_bytes<'a>(&'a self, buf: &'a mut itoa::Buffer) -> &'a [u8] {
        match self {
            StrValue::Int(n) => buf.format(*n).as_bytes(),
            StrValue::Emb(b) => b,
            StrValue::Raw(v) => v,
        }
    }

    pub fn to_vec(&self) -> Vec<u8> {
        self.as_bytes(&mut itoa::Buffer::new()).to_vec()
    }

    /// A `raw` string owning `v` (for in-place edits to come).
    pub fn raw(v: Vec<u8>) -> Self {
        StrValue::Raw(Box::new(v))
    }

    pub fn len(&self) -> usize {
        match self {
            StrValue::Int(n) => itoa::Buffer::new().format(*n).len(),
            StrValue::Emb(b) => b.len(),
            StrValue::Raw(v) => v.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The value as an integer, if it is one (Redis's `getLongLongFromObject`).
    pub fn as_i64(&self) -> Option<i64> {
        match self {
            StrValue::Int(n) => Some(*n),
            StrValue::Emb(b) => parse_i64(b),
            StrValue::Raw(v) => parse_i64(v),
        }
    }

    /// The growable buffer for in-place edits, converting to `raw` first.
    pub fn make_raw(&mut self) -> &mut Vec<u8> {
        if !matches!(self, StrValue::Raw(_)) {
            *self = StrValue::raw(self.to_vec());
        }
        match self {
            StrValue::Raw(v) => v,
            _ => unreachable!(),
        }
    }

    pub fn encoding(&self) -> &'static str {
        match self {
            StrValue::Int(_) => "int",
            StrValue::Emb(b) if b.len() <= EMBSTR_MAX => "embstr",
            _ => "raw",
        }
    }
}

impl Value {
    /// How many allocations freeing the value takes, as Redis's
    /// `lazyfreeGetFreeEffort` counts them: a list's nodes, a table's
    /// entries, a skiplist's members, a stream's nodes and its groups'
    /// pending entries; one for a string or any compact encoding. Past 64
    /// the lazy-free paths free it in the background.
    pub fn free_effort(&self) -> usize {
        match self {
            Value::List(q) => q.node_count(),
            Value::Hash(Hash::Table(d)) => d.len(),
            Value::Set(Set::Table(d)) => d.len(),
            Value::ZSet(SortedSet::Skiplist(z)) => z.len(),
            Value::Stream(s) => {
                s.node_count() + s.groups.values().map(|g| 1 + g.pel.len()).sum::<usize>()
            }
            _ => 1,
        }
    }

    pub fn str(b: &[u8]) -> Self {
        Value::Str(StrValue::new(b))
    }

    /// The name TYPE replies with.
    pub fn type_name(&self) -> &'static str {
        match self {
            Value::Str(_) => "string",
            Value::List(_) => "list",
            Value::Hash(_) => "hash",
            Value::Set(_) => "set",
            Value::ZSet(_) => "zset",
            Value::Stream(_) => "stream",
        }
    }

    pub fn encoding(&self) -> &'static str {
        match self {
            Value::Str(s) => s.encoding(),
            Value::List(_) => "quicklist",
            Value::Hash(h) => h.encoding(),
            Value::Set(s) => s.encoding(),
            Value::ZSet(z) => z.encoding(),
            Value::Stream(_) => "stream",
        }
    }

    /// True for an aggregate with no elements left: Redis deletes the key.
    pub fn is_empty_aggregate(&self) -> bool {
        match self {
            Value::Str(_) => false,
            Value::List(l) => l.is_empty(),
            Value::Hash(h) => h.is_empty(),
            Value::Set(s) => s.is_empty(),
            Value::ZSet(z) => z.is_empty(),
            // An empty stream stays: its last ID and groups live on.
            Value::Stream(_) => false,
        }
    }

    /// Approximate heap bytes owned by the value, for MEMORY USAGE and
    /// eviction accounting.
    pub fn heap_size(&self) -> usize {
        match self {
            Value::Str(StrValue::Int(_)) => 0,
            Value::Str(StrValue::Emb(b)) => b.heap_size(),
            Value::Str(StrValue::Raw(v)) => v.capacity() + std::mem::size_of::<Vec<u8>>(),
            Value::List(l) => l.heap_size(),
            Value::Hash(h) => h.heap_size(),
            Value::Set(s) => s.heap_size(),
            Value::ZSet(z) => z.heap_size(),
            Value::Stream(s) => s.heap_size() + std::mem::size_of::<Stream>(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn string_encodings_as_redis() {
        assert_eq!(StrValue::new(b"123").encoding(), "int");
        assert_eq!(StrValue::new(b"0123").encoding(), "embstr");
        assert_eq!(StrValue::new(&[b'a'; 44]).encoding(), "embstr");
        assert_eq!(StrValue::new(&[b'a'; 45]).encoding(), "raw");
        let mut s = StrValue::new(b"1");
        s.make_raw().push(b'2');
        assert_eq!(s.encoding(), "raw");
        assert_eq!(s.as_i64(), Some(12));
    }

    #[test]
    fn handles_stay_small() {
        use std::mem::size_of;
        assert_eq!(size_of::<Value>(), 24);
        assert_eq!(size_of::<StrValue>(), 24);
        assert_eq!(size_of::<Hash>(), 16);
        assert_eq!(size_of::<Set>(), 16);
        assert_eq!(size_of::<SortedSet>(), 16);
    }
}
