//! A command's keys as COMMAND GETKEYS finds them: from its key specs,
//! or, where they cannot tell (SET's GET, BITFIELD's writes, SORT's
//! BY/GET/STORE, a malformed key count), by the per-command rules Redis
//! has for them.

use super::key_flags::{self, ACCESS, INCOMPLETE, NOT_KEY, OW, RO, RW, UPDATE, VARIABLE_FLAGS};
use super::{flags, is, Begin, Find, Meta};
use crate::core::error::Error;
use bytes::Bytes;

/// As `get_keys`, for a command already looked up.
pub fn keys_for(cmd: &'static Meta, args: &[Bytes]) -> Result<Vec<(usize, u32)>, Error> {
    let rules = fallback(cmd);
    if rules.is_none() && cmd.specs.iter().all(|s| s.flags & NOT_KEY != 0) {
        return Err(Error::other("ERR The command has no key arguments"));
    }
    if !cmd.arity_ok(args.len()) {
        return Err(Error::other(
            "ERR Invalid number of arguments specified for command",
        ));
    }
    let from_specs = if cmd.specs.iter().any(|s| s.flags & VARIABLE_FLAGS != 0) {
        None
    } else {
        keys_from_specs(cmd, args)
    };
    let keys = from_specs.unwrap_or_else(|| rules.map_or_else(Vec::new, |f| f(cmd, args)));
    if keys.is_empty() && !cmd.has(flags::NO_MANDATORY_KEYS) {
        return Err(Error::other("ERR Invalid arguments specified for command"));
    }
    Ok(keys)
}

type Keys = Vec<(usize, u32)>;

/// Keys found by the key specs, or None when a spec cannot tell (unknown,
/// incomplete, or a bad key count or position).
fn keys_from_specs(cmd: &Meta, args: &[Bytes]) -> Option<Keys> {
    let argc = args.len() as i64;
    let mut out = Vec::new();
    for spec in cmd.specs {
        if spec.flags & NOT_KEY != 0 {
            continue;
        }
        if spec.flags & INCOMPLETE != 0 {
            return None;
        }
        let mut first = match spec.begin {
            Begin::Index(i) => i as i64,
            Begin::Keyword(kw, from) => {
                let found = if from > 0 {
                    (from as i64..argc - 1).find(|&i| is(&args[i as usize], kw))
                } else {
                    (2..=argc + from as i64)
                        .rev()
                        .find(|&i| is(&args[i as usize], kw))
                };
                match found {
                    Some(i) => i + 1,
                    None => continue,
                }
            }
            Begin::Unknown => return None,
        };
        let (last, step) = match spec.find {
            Find::Range {
                lastkey,
                keystep,
                limit,
            } => {
                let lastkey = lastkey as i64;
                let last = if lastkey >= 0 {
                    first + lastkey
                } else if limit == 0 {
                    argc + lastkey
                } else {
                    first + (argc - first) / limit as i64 + lastkey
                };
                (last, keystep)
            }
            Find::Keynum {
                keynumidx,
                firstkey,
                keystep,
            } => {
                let at = first + keynumidx as i64;
                if at >= argc {
                    return None;
                }
                let n = storage::num::parse_i64(&args[at as usize]).filter(|&n| n >= 0)?;
                first += firstkey as i64;
                (first.checked_add(n)? - 1, keystep)
            }
            Find::Unknown => return None,
        };
        if last >= argc || last < first || first >= argc {
            return None;
        }
        let positions = (first..=last).step_by(step.max(1) as usize);
        out.extend(positions.map(|i| (i as usize, spec.flags)));
    }
    Some(out)
}

/// Redis's own key rules for the commands whose specs may not tell.
fn fallback(cmd: &Meta) -> Option<fn(&Meta, &[Bytes]) -> Keys> {
    match cmd.name {
        "set" => Some(set_keys),
        "bitfield" => Some(bitfield_keys),
        "sort" => Some(sort_keys),
        "sort_ro" => Some(|_, _| vec![(1, RO | ACCESS)]),
        "migrate" => Some(migrate_keys),
        _ if cmd
            .specs
            .iter()
            .any(|s| matches!(s.find, Find::Keynum { .. })) =>
        {
            Some(keynum_keys)
        }
        _ => None,
    }
}

/// MIGRATE: the key argument, or with KEYS (and an empty key argument)
/// the keys after it; AUTH and AUTH2 take their values first.
fn migrate_keys(_: &Meta, args: &[Bytes]) -> Keys {
    let flags = RW | ACCESS | key_flags::DELETE;
    let mut i = 6;
    while i < args.len() {
        if is(&args[i], "keys") && args[3].is_empty() {
            return (i + 1..args.len()).map(|k| (k, flags)).collect();
        } else if is(&args[i], "auth") {
            i += 1;
        } else if is(&args[i], "auth2") {
            i += 2;
        }
        i += 1;
    }
    vec![(3, flags)]
}

/// SET reads the old value only with GET.
fn set_keys(_: &Meta, args: &[Bytes]) -> Keys {
    let flags = if args[3..].iter().any(|a| is(a, "get")) {
        RW | ACCESS | UPDATE
    } else {
        OW | UPDATE
    };
    vec![(1, flags)]
}

/// BITFIELD writes unless every operation is a whole GET or OVERFLOW.
fn bitfield_keys(_: &Meta, args: &[Bytes]) -> Keys {
    let mut i = 2;
    while i < args.len() {
        let rest = args.len() - i - 1;
        if is(&args[i], "get") && rest >= 2 {
            i += 3;
        } else if is(&args[i], "overflow") && rest >= 1 {
            i += 2;
        } else {
            return vec![(1, RW | ACCESS | UPDATE)];
        }
    }
    vec![(1, RO | ACCESS)]
}

/// SORT's key, and the destination of its last STORE (LIMIT's two
/// arguments and BY's and GET's one are skipped).
fn sort_keys(_: &Meta, args: &[Bytes]) -> Keys {
    let mut keys = vec![(1, RO | ACCESS)];
    let mut store = None;
    let mut i = 2;
    while i < args.len() {
        if is(&args[i], "limit") {
            i += 2;
        } else if is(&args[i], "get") || is(&args[i], "by") {
            i += 1;
        } else if is(&args[i], "store") && i + 1 < args.len() {
            store = Some(i + 1);
        }
        i += 1;
    }
    keys.extend(store.map(|s| (s, OW | UPDATE)));
    keys
}

/// A key count read as C's `atoi`, keys without flags, then the
/// fixed-position keys (a destination): nothing if the count is below 1 or
/// more than the arguments left.
fn keynum_keys(cmd: &Meta, args: &[Bytes]) -> Keys {
    let mut out = Vec::new();
    let mut fixed = Vec::new();
    for spec in cmd.specs {
        match (&spec.begin, &spec.find) {
            (
                Begin::Index(b),
                Find::Keynum {
                    keynumidx,
                    firstkey,
                    keystep,
                },
            ) => {
                let first = (b + firstkey) as usize;
                let step = (*keystep).max(1) as usize;
                let n = storage::num::atoi(&args[(b + keynumidx) as usize]);
                if n < 1 || n as usize > args.len().saturating_sub(first) / step {
                    return Vec::new();
                }
                out.extend((0..n as usize).map(|k| (first + k * step, 0)));
            }
            (Begin::Index(b), _) => fixed.push((*b as usize, 0)),
            _ => {}
        }
    }
    out.extend(fixed);
    out
}
