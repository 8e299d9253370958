//! SORT and SORT_RO.
//!
//! Behaviour follows Redis 7.0.15 as observed, including its C-isms:
//! - BY/GET patterns are C strings for the `#`, `*` and `->` searches
//!   (a NUL ends the search) but binary for what is copied around them;
//!   only the first `*` is substituted, and `->` counts only after it and
//!   when something follows it.
//! - A BY pattern without `*` means "don't sort" (even if another BY has
//!   one; the last BY is the one looked up):
//!   lists and sorted sets keep their order (DESC walks them backwards and
//!   LIMIT picks the range directly), sets keep their iteration order —
//!   except with STORE, where a set is sorted ALPHA so the stored list does
//!   not depend on hash table order.
//! - Numbers are parsed as `strtod` does (whitespace, hex, `inf`; a NUL
//!   ends the number; NaN, overflow and underflow are refused; see
//!   `storage::num::parse_sort_score`), compared
//!   as doubles, ties broken by the elements' bytes.
//! - ALPHA compares with `strcoll` in the C locale (bytes up to the first
//!   NUL), or fully binary when storing; ALPHA ties keep the source order
//!   (glibc's qsort is a stable merge sort).
//! - A sorted set source is converted to the skiplist encoding, even by
//!   SORT_RO, as Redis does (visible in OBJECT ENCODING).
//! - `start + count - 1` in LIMIT saturates instead of overflowing.

use super::{int_arg, is, Ctx, Handler};
use crate::core::config::class;
use crate::core::error::{CmdResult, Error, WRONGTYPE};
use crate::state::State;
use bytes::Bytes;
use std::cmp::Ordering;
use storage::num::parse_sort_score;
use storage::{LpVal, Quicklist, SortedSet, Value};

pub static HANDLERS: &[(&str, Handler)] = &[("sort", sort), ("sort_ro", sort_ro)];

/// The key arguments of a SORT call (COMMAND GETKEYS): the source and the
/// last STORE destination, skipping the arguments of LIMIT, GET and BY as
/// Redis's key extraction does.
pub fn sort_keys(a: &[Bytes]) -> Vec<usize> {
    let mut keys = vec![1];
    let mut store = None;
    let mut i = 2;
    while i < a.len() {
        if is(&a[i], "limit") {
            i += 2;
        } else if is(&a[i], "get") || is(&a[i], "by") {
            i += 1;
        } else if is(&a[i], "store") && i + 1 < a.len() {
            store = Some(i + 1);
            i += 1;
        }
        i += 1;
    }
    keys.extend(store);
    keys
}

/// SORT key [BY pattern] [LIMIT offset count] [GET pattern [GET pattern ...]]
///   [ASC | DESC] [ALPHA] [STORE destination]
fn sort(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    sort_generic(c, a, false)
}

/// SORT_RO key [BY pattern] [LIMIT offset count] [GET pattern [GET pattern ...]]
///   [ASC | DESC] [ALPHA]
fn sort_ro(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    sort_generic(c, a, true)
}

struct Opts<'a> {
    desc: bool,
    alpha: bool,
    offset: i64,
    count: i64,
    by: Option<&'a [u8]>,
    /// Some BY had no `*`: that disables sorting even if a later BY has one.
    dontsort: bool,
    gets: Vec<Pattern<'a>>,
    store: Option<&'a [u8]>,
}

/// Options in any order; a repeated option overrides the earlier one, GETs
/// accumulate. SORT_RO has no STORE (a syntax error). BY with a pattern
/// and GET need a user who may read every key (`all_keys`).
fn parse(a: &[Bytes], readonly: bool, all_keys: bool) -> Result<Opts<'_>, Error> {
    let mut o = Opts {
        desc: false,
        alpha: false,
        offset: 0,
        count: -1,
        by: None,
        dontsort: false,
        gets: Vec::new(),
        store: None,
    };
    let mut j = 2;
    while j < a.len() {
        let left = a.len() - j - 1;
        let w = &a[j];
        if is(w, "asc") {
            o.desc = false;
        } else if is(w, "desc") {
            o.desc = true;
        } else if is(w, "alpha") {
            o.alpha = true;
        } else if is(w, "limit") && left >= 2 {
            o.offset = int_arg(&a[j + 1])?;
            o.count = int_arg(&a[j + 2])?;
            j += 2;
        } else if is(w, "store") && left >= 1 && !readonly {
            o.store = Some(&a[j + 1]);
            j += 1;
        } else if is(w, "by") && left >= 1 {
            o.by = Some(&a[j + 1]);
            let pattern = cstr(&a[j + 1]).contains(&b'*');
            o.dontsort |= !pattern;
            if pattern && !all_keys {
                return Err(Error::other(
                    "ERR BY option of SORT denied due to insufficient ACL permissions.",
                ));
            }
            j += 1;
        } else if is(w, "get") && left >= 1 {
            if !all_keys {
                return Err(Error::other(
                    "ERR GET option of SORT denied due to insufficient ACL permissions.",
                ));
            }
            o.gets.push(Pattern::compile(&a[j + 1]));
            j += 1;
        } else {
            return Err(Error::Syntax);
        }
        j += 1;
    }
    Ok(o)
}

/// The bytes of `b` as C sees them: up to the first NUL.
fn cstr(b: &[u8]) -> &[u8] {
    match b.iter().position(|&x| x == 0) {
        Some(i) => &b[..i],
        None => b,
    }
}

/// A BY or GET pattern, split once so each element only costs a key build.
#[derive(Debug, PartialEq)]
enum Pattern<'a> {
    /// `#`: the element itself.
    Elem,
    /// No `*`: never matches.
    Never,
    /// `prefix*postfix`, or `prefix*postfix->field` reading a hash field.
    Key {
        prefix: &'a [u8],
        postfix: &'a [u8],
        field: Option<&'a [u8]>,
    },
}

impl<'a> Pattern<'a> {
    fn compile(p: &'a [u8]) -> Self {
        let c = cstr(p);
        if c == b"#" {
            return Pattern::Elem;
        }
        let Some(star) = c.iter().position(|&x| x == b'*') else {
            return Pattern::Never;
        };
        let arrow = c[star + 1..]
            .windows(2)
            .position(|w| w == b"->")
            .map(|i| star + 1 + i)
            // `->` with nothing after it is part of the key name.
            .filter(|&f| f + 2 < c.len());
        match arrow {
            Some(f) => Pattern::Key {
                prefix: &p[..star],
                postfix: &p[star + 1..f],
                field: Some(&p[f + 2..]),
            },
            None => Pattern::Key {
                prefix: &p[..star],
                postfix: &p[star + 1..],
                field: None,
            },
        }
    }
}

/// Looks `pat` up for element `el` and hands the value (`None` if the key
/// is missing, of the wrong type, or lacks the field) to `f`. Lookups count
/// as reads (expiry, keyspace hits and misses) as in Redis.
fn lookup<R>(
    st: &mut State,
    db: usize,
    now: i64,
    pat: &Pattern,
    el: &[u8],
    key: &mut Vec<u8>,
    f: impl FnOnce(Option<&[u8]>) -> R,
) -> R {
    let (prefix, postfix, field) = match pat {
        Pattern::Elem => return f(Some(el)),
        Pattern::Never => return f(None),
        Pattern::Key {
            prefix,
            postfix,
            field,
        } => (prefix, postfix, field),
    };
    key.clear();
    key.extend_from_slice(prefix);
    key.extend_from_slice(el);
    key.extend_from_slice(postfix);
    match (st.lookup_read(db, key, now), field) {
        (Some(Value::Str(s)), None) => f(Some(s.as_bytes(&mut itoa::Buffer::new()))),
        (Some(Value::Hash(h)), Some(field)) => {
            let mut f = Some(f);
            let mut call = |v: Option<&[u8]>| f.take().map(|f| f(v));
            match h.get_with(field, |v| call(Some(v))) {
                Some(Some(r)) => r,
                _ => call(None).expect("called once"),
            }
        }
        _ => f(None),
    }
}

/// A span of [`Arena`] bytes.
type Span = (usize, usize);

/// Bytes of many short strings in one buffer: one allocation per SORT
/// rather than one per element.
#[derive(Default)]
struct Arena(Vec<u8>);

impl Arena {
    fn push(&mut self, b: &[u8]) -> Span {
        let at = self.0.len();
        self.0.extend_from_slice(b);
        (at, b.len())
    }

    fn get(&self, (at, len): Span) -> &[u8] {
        &self.0[at..at + len]
    }
}

#[derive(Clone, Copy)]
struct Item {
    el: Span,
    score: f64,
    /// The BY value for ALPHA (in the BY arena); `None` when missing.
    cmp: Option<Span>,
}

/// Orders `items` as SORT does: each element's score or BY value looked
/// up first, then the sort Redis would run for this request (`start..=end`
/// is the LIMIT window).
fn order(
    st: &mut State,
    db: usize,
    now: i64,
    o: &Opts,
    items: &mut [Item],
    els: &Arena,
    (start, end): (i64, i64),
) -> Result<(), Error> {
    let mut by_vals = Arena::default();
    let by = o.by.map(Pattern::compile);
    let mut conversion_error = false;
    let mut kbuf = Vec::new();
    for it in items.iter_mut() {
        let alpha = o.alpha;
        let el = els.get(it.el);
        let (score, cmp) = match &by {
            Some(p) => lookup(st, db, now, p, el, &mut kbuf, |v| match v {
                None => (Some(0.0), None),
                Some(v) if alpha => (Some(0.0), Some(by_vals.push(v))),
                Some(v) => (parse_sort_score(v), None),
            }),
            None if alpha => (Some(0.0), None),
            None => (parse_sort_score(el), None),
        };
        match score {
            Some(s) => it.score = s,
            None => conversion_error = true,
        }
        it.cmp = cmp;
    }
    if conversion_error {
        return Err(Error::other(
            "ERR One or more scores can't be converted into double",
        ));
    }
    let (alpha, bypat, store, desc) = (o.alpha, by.is_some(), o.store.is_some(), o.desc);
    let by_vals = &by_vals;
    let mut cmp = |x: &Item, y: &Item| {
        let ord = compare(x, y, els, by_vals, alpha, bypat, store);
        if desc {
            ord.reverse()
        } else {
            ord
        }
    };
    // Which algorithm decides the order of ALPHA BY ties: Redis sorts a
    // LIMIT window with its partial quicksort, everything else with
    // glibc's (stable) qsort.
    let partial = start != 0 || end != items.len() as i64 - 1;
    if bypat && partial {
        if end >= start && start >= 0 {
            crate::core::pqsort::pqsort(items, start as usize, end as usize, &mut cmp);
        }
    } else if !alpha {
        // A total order (ties go by the bytes): any sort gives the same.
        items.sort_unstable_by(cmp);
    } else {
        items.sort_by(cmp);
    }
    Ok(())
}

fn sort_generic(c: &mut Ctx, a: &[Bytes], readonly: bool) -> CmdResult {
    let all_keys = super::perm::reads_all_keys(c.st, c.cl);
    let mut o = parse(a, readonly, all_keys)?;
    let db = c.cl.db;
    let now = c.now;
    let key = &a[1][..];
    let mut dontsort = o.dontsort;
    let len = match c.st.lookup_read(db, key, now) {
        None => 0,
        Some(Value::List(l)) => l.len(),
        Some(Value::Set(s)) => s.len(),
        Some(Value::ZSet(z)) => z.len(),
        Some(_) => return Err(WRONGTYPE),
    };
    let is_set = matches!(c.st.shard.dbs[db].get(key), Some(Value::Set(_)));
    // A set's order is arbitrary: what is stored or given to a script is
    // made deterministic by sorting it. (Id 0 with blocking denied is a
    // script's client, or the AOF loader, which replays only STORE forms.)
    let from_script = c.cl.id == 0 && c.cl.deny_blocking;
    if dontsort && is_set && (o.store.is_some() || from_script) {
        dontsort = false;
        o.alpha = true;
        o.by = None;
    }
    if let Some(Value::ZSet(z)) = c.st.shard.dbs[db].get_mut(key) {
        if z.as_listpack().is_some() {
            z.convert_to_skiplist();
        }
    }

    let len = len as i64;
    let mut start = o.offset.max(0);
    let mut end = if o.count < 0 {
        len - 1
    } else {
        start.saturating_add(o.count) - 1
    };
    if start >= len {
        start = len - 1;
        end = len - 2;
    }
    if end >= len {
        end = len - 1;
    }

    let mut els = Arena::default();
    let mut items: Vec<Item> = load(
        c.st.shard.dbs[db].get(key),
        dontsort,
        o.desc,
        &mut start,
        &mut end,
        &mut els,
    )
    .into_iter()
    .map(|el| Item {
        el,
        score: 0.0,
        cmp: None,
    })
    .collect();

    if !dontsort {
        order(c.st, db, now, &o, &mut items, &els, (start, end))?;
    }

    let n = (end - start + 1).max(0) as usize;
    let range = if n == 0 {
        &items[..0]
    } else {
        let s = (start.max(0) as usize).min(items.len());
        &items[s..s.saturating_add(n).min(items.len())]
    };
    let outputlen = range.len() * o.gets.len().max(1);
    let mut kbuf = Vec::new();
    let Some(dest) = o.store else {
        c.out.array(outputlen);
        for it in range {
            let el = els.get(it.el);
            if o.gets.is_empty() {
                c.out.bulk(el);
            }
            for g in &o.gets {
                let out = &mut *c.out;
                lookup(c.st, db, now, g, el, &mut kbuf, |v| match v {
                    Some(v) => out.bulk(v),
                    None => out.null(),
                });
            }
        }
        return Ok(());
    };
    let mut list = Quicklist::new(c.st.tun.list_fill);
    for it in range {
        let el = els.get(it.el);
        if o.gets.is_empty() {
            list.push_back(el);
        }
        for g in &o.gets {
            lookup(c.st, db, now, g, el, &mut kbuf, |v| {
                list.push_back(v.unwrap_or(b""))
            });
        }
    }
    if outputlen > 0 {
        c.st.expire_if_needed(db, dest, now);
        c.st.keys(db, now)
            .set(dest, Value::List(Box::new(list)), false);
        c.st.changed(class::LIST, "sortstore", db, dest);
        // Redis counts one change per stored element.
        c.st.dirty += outputlen as u64 - 1;
    } else if c.st.shard.dbs[db].remove(dest).is_some() {
        c.st.changed(class::GENERIC, "del", db, dest);
    }
    c.out.int(outputlen as i64);
    Ok(())
}

/// The elements to sort. When not sorting a list or sorted set, only the
/// LIMIT range is taken, in DESC order if asked, and `start`/`end` are
/// moved to index it.
fn load(
    v: Option<&Value>,
    dontsort: bool,
    desc: bool,
    start: &mut i64,
    end: &mut i64,
    arena: &mut Arena,
) -> Vec<Span> {
    let mut buf = itoa::Buffer::new();
    let add = |e: LpVal| arena.push(e.bytes(&mut buf));
    let range = |start: &mut i64, end: &mut i64| {
        let n = (*end - *start + 1).max(0) as usize;
        let s = *start;
        *end -= *start;
        *start = 0;
        (s.max(0) as usize, n)
    };
    match v {
        Some(Value::List(l)) if dontsort => {
            if *end < *start {
                return Vec::new();
            }
            let (s, n) = range(start, end);
            let from = if desc { l.len() - s - 1 } else { s };
            l.iter_from(from, !desc).take(n).map(add).collect()
        }
        Some(Value::List(l)) => l.iter().map(add).collect(),
        Some(Value::Set(s)) => s.iter().map(add).collect(),
        Some(Value::ZSet(z)) if dontsort => {
            let len = z.len();
            let (s, n) = range(start, end);
            if n == 0 {
                return Vec::new();
            }
            let entries = if desc {
                let hi = len.saturating_sub(s);
                z.entries(hi.saturating_sub(n), hi, true)
            } else {
                z.entries(s, s + n, false)
            };
            entries.iter().map(|(m, _)| arena.push(m)).collect()
        }
        Some(Value::ZSet(z)) => zset_members(z, arena),
        _ => Vec::new(),
    }
}

fn zset_members(z: &SortedSet, arena: &mut Arena) -> Vec<Span> {
    let mut v = Vec::with_capacity(z.len());
    z.for_each(|m, _| v.push(arena.push(m)));
    v
}

/// Redis's comparison of two sort entries (before DESC is applied).
fn compare(
    x: &Item,
    y: &Item,
    els: &Arena,
    by_vals: &Arena,
    alpha: bool,
    by: bool,
    store: bool,
) -> Ordering {
    // strcoll in the C locale compares C strings byte-wise; STORE compares
    // whole binary strings so the stored list is deterministic.
    let text = |p: &[u8], q: &[u8]| {
        if store {
            p.cmp(q)
        } else {
            cstr(p).cmp(cstr(q))
        }
    };
    if !alpha {
        x.score
            .partial_cmp(&y.score)
            .unwrap_or(Ordering::Equal)
            .then_with(|| els.get(x.el).cmp(els.get(y.el)))
    } else if by {
        match (x.cmp, y.cmp) {
            (None, None) => Ordering::Equal,
            (None, Some(_)) => Ordering::Less,
            (Some(_), None) => Ordering::Greater,
            (Some(p), Some(q)) => text(by_vals.get(p), by_vals.get(q)),
        }
    } else {
        text(els.get(x.el), els.get(y.el))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_split_as_redis() {
        use Pattern::*;
        assert_eq!(Pattern::compile(b"#"), Elem);
        assert_eq!(Pattern::compile(b"#\x00x"), Elem);
        assert_eq!(Pattern::compile(b"##"), Never);
        assert_eq!(Pattern::compile(b"nosort"), Never);
        assert_eq!(Pattern::compile(b"k_\x00*"), Never);
        let key = |p: &'static [u8], q: &'static [u8], f: Option<&'static [u8]>| Key {
            prefix: p,
            postfix: q,
            field: f,
        };
        assert_eq!(Pattern::compile(b"w_*"), key(b"w_", b"", None));
        assert_eq!(Pattern::compile(b"a*b*c"), key(b"a", b"b*c", None));
        assert_eq!(Pattern::compile(b"h_*->f"), key(b"h_", b"", Some(b"f")));
        assert_eq!(
            Pattern::compile(b"h_*x->a->b"),
            key(b"h_", b"x", Some(b"a->b"))
        );
        assert_eq!(Pattern::compile(b"h_*->"), key(b"h_", b"->", None));
        assert_eq!(Pattern::compile(b"a->b*"), key(b"a->b", b"", None));
        assert_eq!(
            Pattern::compile(b"k_*->f\x00z"),
            key(b"k_", b"", Some(b"f\x00z"))
        );
        assert_eq!(
            Pattern::compile(b"k_*\x00->f"),
            key(b"k_", b"\x00->f", None)
        );
        assert_eq!(
            Pattern::compile(b"{kb:doc:*}->updated"),
            key(b"{kb:doc:", b"}", Some(b"updated"))
        );
    }

    use crate::core::config::Config;
    use crate::state::{Client, State};
    use protocol::{parse_reply, Frame, ReplyBuf};
    use storage::{Hash, Set};

    /// A server state with values built through the storage API (the
    /// list/set/hash/zset commands live in other modules).
    struct T {
        st: State,
        cl: Client,
    }

    impl T {
        fn new() -> Self {
            T {
                st: State::new(Config::default()),
                cl: Client::new(1, "t".into(), "t".into(), -1, true),
            }
        }
        fn put(&mut self, k: &str, v: Value) {
            self.st.shard.dbs[0].set(k.as_bytes(), v, false);
        }
        fn list(&mut self, k: &str, els: &[&str]) {
            let mut l = Quicklist::new(-2);
            for e in els {
                l.push_back(e.as_bytes());
            }
            self.put(k, Value::List(Box::new(l)));
        }
        fn set(&mut self, k: &str, els: &[&str]) {
            let mut s = Set::new_for(els[0].as_bytes());
            for e in els {
                s.add(e.as_bytes(), 512);
            }
            self.put(k, Value::Set(s));
        }
        fn hash(&mut self, k: &str, fv: &[(&str, &str)]) {
            let mut h = Hash::new();
            for (f, v) in fv {
                h.set(f.as_bytes(), v.as_bytes(), &Default::default());
            }
            self.put(k, Value::Hash(h));
        }
        fn zset(&mut self, k: &str, m: &[(f64, &str)]) {
            let mut z = SortedSet::new_listpack();
            for (s, e) in m {
                z.add(e.as_bytes(), *s, Default::default(), &Default::default());
            }
            self.put(k, Value::ZSet(z));
        }
        fn run(&mut self, cmd: &str) -> Frame {
            let args: Vec<Bytes> = cmd
                .split(' ')
                .map(|x| Bytes::copy_from_slice(x.as_bytes()))
                .collect();
            let mut out = ReplyBuf::new(false);
            crate::cmd::execute(&mut self.st, &mut self.cl, &mut out, &args);
            parse_reply(&out.buf).expect("one reply").0
        }
        /// The reply as words: bulks as text, nil as `-`.
        fn words(&mut self, cmd: &str) -> String {
            match self.run(cmd) {
                Frame::Array(v) => v
                    .iter()
                    .map(|f| match f {
                        Frame::Bulk(b) => String::from_utf8_lossy(b).into_owned(),
                        Frame::Null => "-".into(),
                        f => format!("{f:?}"),
                    })
                    .collect::<Vec<_>>()
                    .join(" "),
                Frame::Error(e) | Frame::Simple(e) => String::from_utf8_lossy(&e).into_owned(),
                Frame::Integer(n) => n.to_string(),
                f => format!("{f:?}"),
            }
        }
        fn lrange(&self, k: &str) -> Vec<String> {
            match self.st.shard.dbs[0].get(k.as_bytes()) {
                Some(Value::List(l)) => l
                    .iter()
                    .map(|e| String::from_utf8_lossy(&e.to_vec()).into_owned())
                    .collect(),
                _ => vec![],
            }
        }
    }

    /// Replies recorded from Redis 7.0.15 for the same data.
    #[test]
    fn search_chapter_queries() {
        crate::cmd::families::install();
        let mut t = T::new();
        t.set("idx:q", &["1", "2", "3", "4", "5", "6", "7"]);
        let docs = [
            ("1", "1500000003", "beta"),
            ("2", "1500000001", "alpha"),
            ("3", "1500000007", "delta"),
            ("4", "1500000002", "Gamma"),
            ("5", "1500000009", "epsilon"),
            ("6", "1500000004", "zeta"),
            ("7", "1500000005", "eta"),
        ];
        for (id, up, title) in docs {
            t.hash(
                &format!("kb:doc:{id}"),
                &[("id", id), ("updated", up), ("title", title)],
            );
        }
        let q = |t: &mut T, s: &str| t.words(s);
        assert_eq!(
            q(&mut t, "SORT idx:q BY kb:doc:*->updated LIMIT 0 20 DESC"),
            "5 3 7 6 1 4 2"
        );
        assert_eq!(
            q(&mut t, "SORT idx:q BY kb:doc:*->updated LIMIT 3 3 DESC"),
            "6 1 4"
        );
        assert_eq!(
            q(
                &mut t,
                "SORT idx:q DESC ALPHA BY kb:doc:*->title LIMIT 0 20"
            ),
            "6 7 5 3 1 2 4"
        );
        assert_eq!(
            q(
                &mut t,
                "SORT idx:q BY kb:doc:*->updated LIMIT 0 2 GET # GET kb:doc:*->title GET nope:*"
            ),
            "2 alpha - 4 Gamma -"
        );
        assert_eq!(
            q(&mut t, "SORT idx:q BY kb:doc:*->title GET #"),
            "ERR One or more scores can't be converted into double"
        );
    }

    #[test]
    fn options_and_store() {
        crate::cmd::families::install();
        let mut t = T::new();
        t.list("l", &["c", "a", "b", "d", "e"]);
        assert_eq!(t.words("SORT l ALPHA DESC"), "e d c b a");
        assert_eq!(t.words("SORT l BY nosort DESC LIMIT 1 2"), "d b");
        assert_eq!(t.words("SORT l BY nosort BY w_*"), "c a b d e");
        assert_eq!(t.words("SORT l LIMIT 1"), "ERR syntax error");
        assert_eq!(t.words("SORT_RO l STORE d"), "ERR syntax error");
        assert_eq!(
            t.words("SORT l LIMIT x 1"),
            "ERR value is not an integer or out of range"
        );
        // ALPHA BY ties in a LIMIT window land where Redis's quicksort puts them.
        let els: Vec<String> = ('a'..='t').map(String::from).collect();
        let els: Vec<&str> = els.iter().map(String::as_str).collect();
        t.list("t", &els);
        assert_eq!(
            t.words("SORT t BY nope_* ALPHA LIMIT 0 10"),
            "t b c d e f g h i j"
        );
        t.set("s", &["5", "3", "10", "1"]);
        assert_eq!(t.words("SORT s BY nosort STORE d"), "4");
        assert_eq!(t.lrange("d"), ["1", "10", "3", "5"]);
        assert_eq!(t.words("SORT s BY nosort GET k_* LIMIT 0 2 STORE d"), "2");
        assert_eq!(t.lrange("d"), ["", ""]);
        assert_eq!(t.words("SORT s LIMIT 0 0 STORE d"), "0");
        assert!(t.st.shard.dbs[0].get(b"d").is_none());
        t.put("str", Value::str(b"x"));
        assert_eq!(
            t.words("SORT str"),
            "WRONGTYPE Operation against a key holding the wrong kind of value"
        );
    }

    #[test]
    fn sorted_sets() {
        crate::cmd::families::install();
        let mut t = T::new();
        t.zset("z", &[(3.0, "c"), (1.0, "a"), (2.0, "b"), (4.0, "d")]);
        assert_eq!(
            t.st.shard.dbs[0].get(b"z").map(Value::encoding),
            Some("listpack")
        );
        assert_eq!(t.words("SORT_RO z BY nosort DESC LIMIT 1 2"), "c b");
        assert_eq!(
            t.st.shard.dbs[0].get(b"z").map(Value::encoding),
            Some("skiplist")
        );
        assert_eq!(t.words("SORT z BY nosort LIMIT 3 10"), "d");
        assert_eq!(t.words("SORT z ALPHA DESC"), "d c b a");
        t.zset("zn", &[(1.0, "10"), (2.0, "9"), (3.0, "100"), (4.0, "-1")]);
        assert_eq!(t.words("SORT zn"), "-1 9 10 100");
        assert_eq!(t.words("SORT zn BY nosort DESC"), "-1 100 9 10");
    }

    #[test]
    fn store_keys() {
        let args = |s: &str| -> Vec<Bytes> {
            s.split(' ')
                .map(|x| Bytes::copy_from_slice(x.as_bytes()))
                .collect()
        };
        assert_eq!(
            sort_keys(&args("SORT l STORE a LIMIT 0 1 STORE b GET x BY y")),
            vec![1, 8]
        );
        assert_eq!(
            sort_keys(&args("SORT l BY store GET store LIMIT store store")),
            vec![1]
        );
        assert_eq!(sort_keys(&args("SORT l STORE")), vec![1]);
    }
}
