//! The module graph of `server/src`: modules laid out from the files' paths
//! (as rustc finds `mod x;` without `#[path]`), names resolved the way the
//! compiler's name lookup does for what matters here (imports, globs,
//! re-exports), and one arrow for every name a file takes from another.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use crate::read::FileFacts;
use crate::LIB_CRATE;

/// Arrows between files (indices into the file list), each with the names
/// that make it.
pub(crate) type Arrows = BTreeMap<(usize, usize), BTreeSet<String>>;

struct Module {
    /// `None` for a folder that has no `mod.rs` of its own.
    file: Option<usize>,
    parent: Option<usize>,
    root: usize,
    children: HashMap<String, usize>,
    defined: HashSet<String>,
    imports: HashMap<String, Vec<String>>,
    globs: Vec<Vec<String>>,
}

/// What a name or path stands for.
#[derive(Clone, Debug, PartialEq)]
enum Res {
    Module(usize),
    /// An item of a module; also a name a path reaches in a module that does
    /// not show it (made by a macro): the arrow still goes to that module.
    Item(usize, String),
    /// Outside the crate: std, other crates, the prelude, locals.
    External,
}

struct Resolver {
    mods: Vec<Module>,
    lib_root: usize,
    memo: RefCell<HashMap<(usize, String), Option<Res>>>,
    busy: RefCell<HashSet<(usize, String)>>,
}

/// A file's module path under `src`: `cmd/geo/mod.rs` is `cmd::geo`; `main.rs`
/// is the root of a crate of its own.
fn module_path(under_src: &str) -> (bool, Vec<String>) {
    if under_src == "main.rs" {
        return (true, Vec::new());
    }
    let mut parts: Vec<String> = under_src.split('/').map(str::to_string).collect();
    let last = parts.pop().unwrap_or_default();
    if last != "mod.rs" && !(parts.is_empty() && last == "lib.rs") {
        parts.push(last.trim_end_matches(".rs").to_string());
    }
    (false, parts)
}

impl Resolver {
    fn new_module(
        &mut self,
        file: Option<usize>,
        parent: Option<usize>,
        root: Option<usize>,
    ) -> usize {
        let id = self.mods.len();
        self.mods.push(Module {
            file,
            parent,
            root: root.unwrap_or(id),
            children: HashMap::new(),
            defined: HashSet::new(),
            imports: HashMap::new(),
            globs: Vec::new(),
        });
        id
    }

    fn ensure(&mut self, from: usize, path: &[String]) -> usize {
        let mut cur = from;
        for seg in path {
            cur = match self.mods[cur].children.get(seg) {
                Some(&c) => c,
                None => {
                    let root = self.mods[cur].root;
                    let c = self.new_module(None, Some(cur), Some(root));
                    self.mods[cur].children.insert(seg.clone(), c);
                    c
                }
            };
        }
        cur
    }

    fn lookup(&self, m: usize, name: &str) -> Option<Res> {
        let key = (m, name.to_string());
        if let Some(r) = self.memo.borrow().get(&key) {
            return r.clone();
        }
        // A glob cycle (`pub use child::*` above, `use super::*` below) would
        // otherwise ask the same question forever.
        if !self.busy.borrow_mut().insert(key.clone()) {
            return None;
        }
        let r = self.lookup_uncached(m, name);
        self.busy.borrow_mut().remove(&key);
        self.memo.borrow_mut().insert(key, r.clone());
        r
    }

    /// `None`: the name is not in scope in `m` at all.
    fn lookup_uncached(&self, m: usize, name: &str) -> Option<Res> {
        let md = &self.mods[m];
        if let Some(&c) = md.children.get(name) {
            return Some(Res::Module(c));
        }
        if md.defined.contains(name) {
            return Some(Res::Item(m, name.to_string()));
        }
        if let Some(segs) = md.imports.get(name) {
            return Some(self.resolve(m, segs));
        }
        for g in &md.globs {
            if let Res::Module(src) = self.resolve(m, g) {
                match self.lookup(src, name) {
                    Some(Res::External) | None => {}
                    found => return found,
                }
            }
        }
        None
    }

    /// Resolves a path written in module `m`, following re-exports until it
    /// reaches an item or runs out of modules.
    fn resolve(&self, m: usize, segs: &[String]) -> Res {
        self.resolve_n(m, segs).0
    }

    /// As [`Self::resolve`], with how many segments the result stands for:
    /// `State::new` is the item `State` and one more.
    fn resolve_n(&self, m: usize, segs: &[String]) -> (Res, usize) {
        let Some(first) = segs.first() else {
            return (Res::Module(m), 0);
        };
        let mut rest = &segs[1..];
        let mut cur = match first.as_str() {
            "crate" => Res::Module(self.mods[m].root),
            "self" => Res::Module(m),
            "super" => {
                let mut at = m;
                let mut path = segs;
                while path.first().map(String::as_str) == Some("super") {
                    match self.mods[at].parent {
                        Some(p) => at = p,
                        None => return (Res::External, 0),
                    }
                    path = &path[1..];
                }
                rest = path;
                Res::Module(at)
            }
            "Self" => return (Res::External, 0),
            name => match self.lookup(m, name) {
                Some(r) => r,
                None if name == LIB_CRATE => Res::Module(self.lib_root),
                None => return (Res::External, 0),
            },
        };
        let mut used = segs.len() - rest.len();
        for seg in rest {
            match cur {
                Res::Module(mm) => {
                    used += 1;
                    cur = match self.lookup(mm, seg) {
                        Some(r) => r,
                        None => return (Res::Item(mm, seg.clone()), used),
                    }
                }
                // An item's associated names (variants, methods, consts) live
                // where the item does, but for methods: see `Types`.
                _ => break,
            }
        }
        (cur, used)
    }

    /// The type a path written in `m` names, as (module, name).
    fn type_key(&self, m: usize, segs: &[String]) -> Option<TypeKey> {
        match self.resolve(m, segs) {
            Res::Item(mm, n) => Some((mm, n)),
            _ => None,
        }
    }
}

/// What method calls need: where each type's inherent functions are, and
/// its fields' types. A type is (its module, its name).
#[derive(Default)]
struct Types {
    /// Inherent functions by type, then name: the files of their impls.
    fns: HashMap<TypeKey, HashMap<String, BTreeSet<usize>>>,
    /// Named fields by struct: the struct's module and each field's type.
    fields: HashMap<TypeKey, (usize, HashMap<String, Vec<String>>)>,
}

/// A type: the module that defines it and its name.
type TypeKey = (usize, String);

impl Types {
    fn new(r: &Resolver, mods: &[(usize, &crate::read::ModFacts)]) -> Types {
        let mut t = Types::default();
        for &(id, m) in mods {
            let Some(file) = r.mods[id].file else {
                continue;
            };
            for (ty, fns) in &m.impls {
                if let Some(key) = r.type_key(id, ty) {
                    let by_name = t.fns.entry(key).or_default();
                    for f in fns {
                        by_name.entry(f.clone()).or_default().insert(file);
                    }
                }
            }
            for (name, fields) in &m.structs {
                let fields = fields.iter().cloned().collect();
                t.fields.insert((id, name.clone()), (id, fields));
            }
        }
        t
    }

    /// The files whose impls define `method` for the receiver `root.fields..`
    /// written in module `m`.
    fn method_files(
        &self,
        r: &Resolver,
        m: usize,
        call: &crate::read::MethodCall,
    ) -> Option<&BTreeSet<usize>> {
        let mut key = r.type_key(m, &call.root)?;
        for f in &call.fields {
            let (sm, fields) = self.fields.get(&key)?;
            key = r.type_key(*sm, fields.get(f)?)?;
        }
        self.fns.get(&key)?.get(&call.method)
    }

    /// `Type::f` when `f` is an inherent function of `Type` in some file.
    fn assoc_files(&self, ty: &Res, f: &str) -> Option<&BTreeSet<usize>> {
        match ty {
            Res::Item(mm, n) => self.fns.get(&(*mm, n.clone()))?.get(f),
            _ => None,
        }
    }
}

pub(crate) struct Graph {
    /// The files, as paths from the workspace root.
    pub files: Vec<String>,
    pub arrows: Arrows,
}

/// `facts` are the files of `src` (a path from the workspace root ending in
/// `server/src`), read with their graph facts.
pub(crate) fn build(src: &str, facts: &[&FileFacts], methods: bool) -> Graph {
    let prefix = format!("{src}/");
    let placed: Vec<(bool, Vec<String>)> = facts
        .iter()
        .map(|f| module_path(f.rel.strip_prefix(&prefix).unwrap_or(&f.rel)))
        .collect();
    let tests = test_paths(facts, &placed);
    let kept: Vec<Placed> = facts
        .iter()
        .zip(&placed)
        .filter(|(f, (bin, path))| {
            f.error.is_none() && !tests.iter().any(|(b, tp)| b == bin && path.starts_with(tp))
        })
        .map(|(f, (bin, path))| (*f, *bin, path.as_slice()))
        .collect();
    let (r, mod_ids) = lay_out(&kept);
    let all_mods: Vec<(usize, &crate::read::ModFacts)> = kept
        .iter()
        .enumerate()
        .flat_map(|(i, (f, _, _))| mod_ids[i].iter().copied().zip(&f.mods))
        .collect();
    let types = if methods {
        Types::new(&r, &all_mods)
    } else {
        Types::default()
    };
    let mut arrows = Arrows::new();
    for (i, (f, _, _)) in kept.iter().enumerate() {
        for (m, &id) in f.mods.iter().zip(&mod_ids[i]) {
            arrows_of(&r, &types, i, id, m, &mut arrows);
        }
    }
    Graph {
        files: kept.iter().map(|(f, _, _)| f.rel.clone()).collect(),
        arrows,
    }
}

/// A file with its place: in `main.rs`'s crate or not, and its module path.
type Placed<'a> = (&'a FileFacts, bool, &'a [String]);

/// The module paths under `#[cfg(test)] mod x;` declarations: their files
/// are test code.
fn test_paths(facts: &[&FileFacts], placed: &[(bool, Vec<String>)]) -> Vec<(bool, Vec<String>)> {
    let mut out = Vec::new();
    for (f, (bin, path)) in facts.iter().zip(placed) {
        let mut inline_paths: Vec<Vec<String>> = Vec::new();
        for m in &f.mods {
            let p = match m.parent {
                Some(i) => {
                    let mut p = inline_paths[i].clone();
                    p.push(m.name.clone());
                    p
                }
                None => path.clone(),
            };
            for t in &m.test_children {
                let mut tp = p.clone();
                tp.push(t.clone());
                out.push((*bin, tp));
            }
            inline_paths.push(p);
        }
    }
    out
}

/// Makes the modules of the kept files and fills their scopes; returns, for
/// each file, the module id of each of its modules (by facts index).
fn lay_out(kept: &[Placed]) -> (Resolver, Vec<Vec<usize>>) {
    let mut r = Resolver {
        mods: Vec::new(),
        lib_root: 0,
        memo: RefCell::new(HashMap::new()),
        busy: RefCell::new(HashSet::new()),
    };
    let lib_root = r.new_module(None, None, None);
    let main_root = r.new_module(None, None, None);
    r.lib_root = lib_root;
    let mut mod_ids: Vec<Vec<usize>> = vec![Vec::new(); kept.len()];
    for (i, &(f, bin, path)) in kept.iter().enumerate() {
        let top = r.ensure(if bin { main_root } else { lib_root }, path);
        r.mods[top].file = Some(i);
        let mut ids = Vec::with_capacity(f.mods.len());
        for m in &f.mods {
            let id = match m.parent {
                None => top,
                Some(p) => {
                    let id = r.ensure(ids[p], std::slice::from_ref(&m.name));
                    r.mods[id].file = Some(i);
                    id
                }
            };
            let md = &mut r.mods[id];
            md.defined.extend(m.defined.iter().cloned());
            for u in &m.uses {
                match &u.alias {
                    Some(a) if a != "_" => {
                        md.imports.insert(a.clone(), u.segs.clone());
                    }
                    Some(_) => {}
                    None => md.globs.push(u.segs.clone()),
                }
            }
            ids.push(id);
        }
        mod_ids[i] = ids;
    }
    (r, mod_ids)
}

/// The arrows out of file `from` that module `id` (read as `m`) makes.
fn arrows_of(
    r: &Resolver,
    types: &Types,
    from: usize,
    id: usize,
    m: &crate::read::ModFacts,
    arrows: &mut Arrows,
) {
    let mut to = |file: Option<usize>, name: String| {
        if let Some(to) = file.filter(|&to| to != from) {
            arrows.entry((from, to)).or_default().insert(name);
        }
    };
    let file_of = |m: usize| r.mods[m].file;
    for u in &m.uses {
        match (r.resolve(id, &u.segs), &u.alias) {
            (Res::Item(mm, n), Some(_)) => to(file_of(mm), n),
            (Res::Item(mm, n), None) => to(file_of(mm), format!("{n}::*")),
            (Res::Module(mm), None) => {
                let last = u.segs.last().map_or("self", String::as_str);
                to(file_of(mm), format!("{last}::*"));
            }
            // A module brought in is no arrow until something is taken from it.
            _ => {}
        }
    }
    for p in &m.paths {
        if p.len() == 1 && m.locals.contains(&p[0]) {
            continue;
        }
        let (res, used) = r.resolve_n(id, p);
        if let Some(f) = p.get(used) {
            for &file in types.assoc_files(&res, f).into_iter().flatten() {
                to(Some(file), f.clone());
            }
        }
        if let Res::Item(mm, n) = res {
            to(file_of(mm), n);
        }
    }
    for c in &m.calls {
        for &file in types.method_files(r, id, c).into_iter().flatten() {
            to(Some(file), c.method.clone());
        }
    }
}

/// Strongly connected components of more than one file, each sorted, the
/// largest first (Tarjan's algorithm).
pub(crate) fn circles(n: usize, arrows: &Arrows) -> Vec<Vec<usize>> {
    let mut next: Vec<Vec<usize>> = vec![Vec::new(); n];
    for &(a, b) in arrows.keys() {
        next[a].push(b);
    }
    struct T<'a> {
        next: &'a [Vec<usize>],
        index: Vec<Option<usize>>,
        low: Vec<usize>,
        on: Vec<bool>,
        stack: Vec<usize>,
        count: usize,
        out: Vec<Vec<usize>>,
    }
    fn visit(t: &mut T, v: usize) {
        t.index[v] = Some(t.count);
        t.low[v] = t.count;
        t.count += 1;
        t.stack.push(v);
        t.on[v] = true;
        for &w in &t.next[v] {
            match t.index[w] {
                None => {
                    visit(t, w);
                    t.low[v] = t.low[v].min(t.low[w]);
                }
                Some(iw) if t.on[w] => t.low[v] = t.low[v].min(iw),
                _ => {}
            }
        }
        if Some(t.low[v]) == t.index[v] {
            let mut c = Vec::new();
            while let Some(w) = t.stack.pop() {
                t.on[w] = false;
                c.push(w);
                if w == v {
                    break;
                }
            }
            if c.len() > 1 {
                c.sort_unstable();
                t.out.push(c);
            }
        }
    }
    let mut t = T {
        next: &next,
        index: vec![None; n],
        low: vec![0; n],
        on: vec![false; n],
        stack: Vec::new(),
        count: 0,
        out: Vec::new(),
    };
    for v in 0..n {
        if t.index[v].is_none() {
            visit(&mut t, v);
        }
    }
    let mut out = t.out;
    out.sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
    out
}

#[cfg(test)]
mod tests {
    use crate::testtree::Tree;

    /// The arrows of a tree of `server/src` files, paths from `server/src`.
    fn arrows(files: &[(&str, &str)]) -> Vec<String> {
        let files: Vec<(String, &str)> = files
            .iter()
            .map(|(p, t)| (format!("server/src/{p}"), *t))
            .collect();
        let refs: Vec<(&str, &str)> = files.iter().map(|(p, t)| (p.as_str(), *t)).collect();
        let tree = Tree::new(&refs);
        tree.check()
            .arrows
            .iter()
            .map(|a| a.to_string().replace("server/src/", ""))
            .collect()
    }

    #[test]
    fn use_trees_with_groups_renames_and_nesting() {
        let got = arrows(&[
            ("lib.rs", "mod a; mod b; mod c;"),
            (
                "a.rs",
                "use crate::b::{x, y as z, inner::{w}};\nuse crate::c::Q as _;",
            ),
            (
                "b.rs",
                "pub fn x() {} pub fn y() {} pub mod inner { pub fn w() {} }",
            ),
            ("c.rs", "pub struct Q;"),
        ]);
        assert_eq!(got, ["a.rs -> b.rs: w, x, y", "a.rs -> c.rs: Q"]);
    }

    #[test]
    fn use_super_self_and_globs() {
        let got = arrows(&[
            ("lib.rs", "mod p;"),
            (
                "p/mod.rs",
                "mod k; pub fn up() {} pub(crate) mod own { pub fn g() {} }\nuse self::own::g;",
            ),
            ("p/k.rs", "use super::up;"),
        ]);
        // `self::own::g` stays in p/mod.rs: a self-arrow, dropped.
        assert_eq!(got, ["p/k.rs -> p/mod.rs: up"]);
        let got = arrows(&[
            ("lib.rs", ""),
            ("a.rs", "use crate::b::*;\nfn f() { let _ = helper(); }"),
            ("b.rs", "pub fn helper() {}"),
        ]);
        assert_eq!(got, ["a.rs -> b.rs: b::*, helper"]);
    }

    #[test]
    fn re_exports_are_followed_to_the_defining_file() {
        let got = arrows(&[
            ("lib.rs", ""),
            (
                "a.rs",
                "use crate::cmd::lookup;\nfn f() { crate::cmd::Named::new(); }",
            ),
            (
                "cmd/mod.rs",
                "mod table; mod names;\npub use table::*;\npub use names::Named;",
            ),
            ("cmd/table.rs", "pub fn lookup() {}"),
            ("cmd/names.rs", "pub struct Named;"),
        ]);
        assert_eq!(
            got,
            [
                "a.rs -> cmd/names.rs: Named",
                "a.rs -> cmd/table.rs: lookup",
                "cmd/mod.rs -> cmd/names.rs: Named",
                "cmd/mod.rs -> cmd/table.rs: table::*",
            ]
        );
    }

    #[test]
    fn inline_paths_in_expressions_types_patterns_bounds_and_attributes() {
        let got = arrows(&[
            ("lib.rs", ""),
            (
                "a.rs",
                "#[derive(crate::d::Derived)]\nstruct S(crate::t::T);\n\
                 fn f<X: crate::tr::Tr>(e: u8) { crate::e::go(); match e { crate::p::E::V => {} _ => {} } }",
            ),
            ("d.rs", "pub struct Derived;"),
            ("t.rs", "pub struct T;"),
            ("tr.rs", "pub trait Tr {}"),
            ("e.rs", "pub fn go() {}"),
            ("p.rs", "pub enum E { V }"),
        ]);
        assert_eq!(
            got,
            [
                "a.rs -> d.rs: Derived",
                "a.rs -> e.rs: go",
                "a.rs -> p.rs: E",
                "a.rs -> t.rs: T",
                "a.rs -> tr.rs: Tr",
            ]
        );
    }

    #[test]
    fn paths_inside_macro_tokens() {
        let got = arrows(&[
            ("lib.rs", ""),
            (
                "a.rs",
                "use crate::m;\nfn f() { println!(\"{} {}\", crate::c::C, m::D); vec![::std::x::Y]; }\n\
                 macro_rules! mk { () => { $crate::r::R } }",
            ),
            ("c.rs", "pub const C: u8 = 0;"),
            ("m.rs", "pub const D: u8 = 0;"),
            ("r.rs", "pub struct R;"),
            ("k/mod.rs", "mod s;"),
            ("k/s.rs", "fn f() { assert!(super::ok()); }"),
        ]);
        assert_eq!(
            got,
            [
                "a.rs -> c.rs: C",
                "a.rs -> m.rs: D",
                "a.rs -> r.rs: R",
                "k/s.rs -> k/mod.rs: ok"
            ]
        );
    }

    #[test]
    fn a_module_brought_in_by_use_leads_to_the_deepest_file() {
        let got = arrows(&[
            ("lib.rs", ""),
            (
                "a.rs",
                "use crate::cmd;\nfn f() { cmd::gate::reject(); cmd::deep::inner::g(); }",
            ),
            ("cmd/mod.rs", "pub mod gate; pub mod deep;"),
            ("cmd/gate.rs", "pub fn reject() {}"),
            ("cmd/deep/mod.rs", "pub mod inner;"),
            ("cmd/deep/inner.rs", "pub fn g() {}"),
        ]);
        assert_eq!(
            got,
            [
                "a.rs -> cmd/deep/inner.rs: g",
                "a.rs -> cmd/gate.rs: reject"
            ]
        );
    }

    #[test]
    fn a_name_no_module_shows_goes_to_the_module_reached() {
        // `made` comes from a macro in b.rs: the arrow still goes there.
        let got = arrows(&[
            ("lib.rs", ""),
            (
                "a.rs",
                "fn f() { crate::b::made(); crate::b::nothing::deeper(); }",
            ),
            ("b.rs", "m!();"),
        ]);
        assert_eq!(got, ["a.rs -> b.rs: made, nothing"]);
    }

    #[test]
    fn containment_is_no_arrow_but_use_of_a_child_and_super_are() {
        let got = arrows(&[
            ("lib.rs", "pub mod a; pub mod b;"),
            ("a.rs", ""),
            ("b.rs", ""),
        ]);
        assert!(got.is_empty(), "{got:?}");
        let got = arrows(&[
            ("lib.rs", ""),
            ("p.rs", "mod c;\npub fn top() {}\nfn f() { c::g(); }"),
            ("p/c.rs", "pub fn g() { super::top() }"),
        ]);
        assert_eq!(got, ["p.rs -> p/c.rs: g", "p/c.rs -> p.rs: top"]);
    }

    #[test]
    fn test_code_external_paths_and_self_arrows_are_left_out() {
        let got = arrows(&[
            ("lib.rs", "#[cfg(test)]\nmod only_tests;"),
            (
                "a.rs",
                "use std::fmt;\nuse storage::Db;\nfn f() { tokio::spawn(); crate::a::g(); }\npub fn g() {}\n\
                 #[cfg(test)]\nmod tests { use crate::b::x; }\n\
                 #[cfg(all(test, unix))]\nfn t() { crate::b::x(); }\n\
                 struct S;\nimpl S {\n#[cfg(test)]\nfn m() { crate::b::x(); }\n}\n\
                 #[cfg(not(test))]\nfn n() { crate::c::y(); }",
            ),
            ("b.rs", "pub fn x() {}"),
            ("c.rs", "pub fn y() {}"),
            ("only_tests.rs", "use crate::b::x;"),
        ]);
        assert_eq!(got, ["a.rs -> c.rs: y"]);
        let tree = Tree::new(&[
            ("server/src/lib.rs", "#[cfg(test)]\nmod only_tests;"),
            ("server/src/only_tests.rs", ""),
        ]);
        assert_eq!(tree.check().files, 1);
    }

    #[test]
    fn main_names_the_library_by_its_crate_name() {
        let got = arrows(&[
            ("lib.rs", "pub mod b;"),
            (
                "main.rs",
                "use cinnabar_server::b::run;\nfn main() { cinnabar_server::b::init(); run(); }",
            ),
            ("b.rs", "pub fn run() {} pub fn init() {}"),
        ]);
        assert_eq!(got, ["main.rs -> b.rs: init, run"]);
    }

    #[test]
    fn a_local_or_a_macro_is_not_taken_for_a_glob_import() {
        let got = arrows(&[
            ("lib.rs", ""),
            ("p/mod.rs", "mod c;\npub fn b() {}\npub fn info() {}\npub fn real() {}"),
            ("p/c.rs", "use super::*;\nfn f(o: Option<(u8, u8)>) { o.map(|b| b.1); info!(\"x\"); real(); }"),
        ]);
        assert_eq!(got, ["p/c.rs -> p/mod.rs: real, super::*"]);
    }

    #[test]
    fn glob_cycles_terminate() {
        let got = arrows(&[
            ("lib.rs", ""),
            ("p/mod.rs", "mod c;\npub use c::*;\npub fn top() {}"),
            (
                "p/c.rs",
                "use super::*;\npub fn low() { top(); missing(); }",
            ),
        ]);
        assert_eq!(
            got,
            [
                "p/c.rs -> p/mod.rs: super::*, top",
                "p/mod.rs -> p/c.rs: c::*"
            ]
        );
    }

    const METHODS: &[(&str, &str)] = &[
        ("lib.rs", ""),
        ("state.rs", "pub struct State;\nimpl State {\n    pub fn own(&mut self) { self.touch(); Self::drop_all(); }\n}"),
        ("cmd/mod.rs", "use crate::state::State;\npub struct Ctx<'a> { pub st: &'a mut State, pub n: i64 }"),
        (
            "cmd/multi.rs",
            "use crate::state::State;\nimpl State {\n    pub fn touch(&mut self) {}\n    pub fn drop_all() {}\n    pub fn by_field(&self) {}\n    pub fn by_path(&self) {}\n}",
        ),
        (
            "cmd/fam.rs",
            "use super::Ctx;\nuse crate::state::State;\n\
             fn h(c: &mut Ctx) { c.st.by_field(); (*c.st).by_field(); State::by_path(c.st); }\n\
             fn shadowed(c: &mut Ctx) { let c = other(c); c.st.not_seen(); }\n\
             fn untyped(x: u8) { x.not_seen(); }",
        ),
    ];

    #[test]
    fn method_calls_through_self_typed_receivers_fields_and_paths() {
        let got = arrows(METHODS);
        assert_eq!(
            got,
            [
                "cmd/fam.rs -> cmd/mod.rs: Ctx",
                "cmd/fam.rs -> cmd/multi.rs: by_field, by_path",
                "cmd/fam.rs -> state.rs: State",
                "cmd/mod.rs -> state.rs: State",
                "cmd/multi.rs -> state.rs: State",
                "state.rs -> cmd/multi.rs: drop_all, touch",
            ]
        );
    }

    #[test]
    fn method_calls_can_be_left_out() {
        let files: Vec<(String, &str)> = METHODS
            .iter()
            .map(|(p, t)| (format!("server/src/{p}"), *t))
            .collect();
        let refs: Vec<(&str, &str)> = files.iter().map(|(p, t)| (p.as_str(), *t)).collect();
        let tree = Tree::new(&refs);
        let r = crate::check_with(tree.0.as_path(), crate::Options { methods: false });
        let got: Vec<String> = r
            .arrows
            .iter()
            .map(|a| a.to_string().replace("server/src/", ""))
            .collect();
        assert_eq!(
            got,
            [
                "cmd/fam.rs -> cmd/mod.rs: Ctx",
                "cmd/fam.rs -> state.rs: State",
                "cmd/mod.rs -> state.rs: State",
                "cmd/multi.rs -> state.rs: State",
            ]
        );
    }
}
