//! Stored values and their encodings.
//!
//! Each type is one enum whose variants are its encodings, named as Redis
//! 7.0 reports them in OBJECT ENCODING; callers use the type's methods and
//! do not match on the encoding.

use crate::num::parse_i64;
use crate::{CBytes, Hash, Quicklist, Set, SortedSet};

/// Longest string Redis stores as `embstr`.
const EMBSTR_MAX: usize = 44;

/// A stored value. Aggregates are boxed so a dict node stays small and a
/// string (the common case) needs no second allocation.
#[derive(Clone)]
pub enum Value {
    Str(StrValue),
    List(Box<Quicklist>),
    Hash(Box<Hash>),
    Set(Box<Set>),
    ZSet(Box<SortedSet>),
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

/// A string value.
///
/// - `Int`: a canonical decimal that fits an i64 (`int` encoding);
/// - `Emb`: a string written whole (SET, GETSET, …): `embstr` up to 44 bytes,
///   `raw` above;
/// - `Raw`: a string modified in place (APPEND, SETRANGE, SETBIT), kept in a
///   growable buffer so repeated appends are amortized O(1), always `raw`.
#[derive(Clone)]
pub enum StrValue {
    Int(i64),
    Emb(CBytes),
    Raw(Vec<u8>),
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
            *self = StrValue::Raw(self.to_vec());
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
        }
    }

    pub fn encoding(&self) -> &'static str {
        match self {
            Value::Str(s) => s.encoding(),
            Value::List(_) => "quicklist",
            Value::Hash(h) => h.encoding(),
            Value::Set(s) => s.encoding(),
            Value::ZSet(z) => z.encoding(),
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
        }
    }

    /// Approximate heap bytes owned by the value, for MEMORY USAGE and
    /// eviction accounting.
    pub fn heap_size(&self) -> usize {
        match self {
            Value::Str(StrValue::Int(_)) => 0,
            Value::Str(StrValue::Emb(b)) => b.heap_size(),
            Value::Str(StrValue::Raw(v)) => v.capacity(),
            Value::List(l) => l.heap_size(),
            Value::Hash(h) => h.heap_size(),
            Value::Set(s) => s.heap_size(),
            Value::ZSet(z) => z.heap_size(),
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
        assert!(
            std::mem::size_of::<Value>() <= 32,
            "{}",
            std::mem::size_of::<Value>()
        );
    }
}
