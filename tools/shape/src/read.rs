//! Reading one file: what it defines, imports and names (for the graph), and
//! how long its functions are. Everything here is plain data, because syn's
//! trees hold spans that may not leave the thread that parsed them.

use std::collections::HashSet;

use proc_macro2::{Spacing, Span, TokenStream, TokenTree};
use syn::ext::IdentExt;
use syn::visit::{self, Visit};
use syn::{Attribute, Ident, ImplItem, Item, Meta, TraitItem, UseTree, Visibility};

use crate::cfg::is_test;
use crate::{GENERATED_HEAD_LINES, GENERATED_MARKS};

/// One module of a file: the file's own (index 0) or an inline `mod x { }`.
#[derive(Debug, Default)]
pub(crate) struct ModFacts {
    pub name: String,
    /// Index of the enclosing module in the same file.
    pub parent: Option<usize>,
    /// `#[cfg(test)] mod x;`: the file of `x` is no part of the graph.
    pub test_children: Vec<String>,
    /// Names of items (anywhere in the module, function bodies included:
    /// they shadow glob imports the same way).
    pub defined: HashSet<String>,
    pub uses: Vec<UseFact>,
    /// Every distinct path written in the module's code, as its segments.
    pub paths: HashSet<Vec<String>>,
    /// Names bound by patterns (`let`, parameters, closures, arms) anywhere
    /// in the module: such a name written alone is taken for the local, not
    /// for what a glob brings in (`|b| b.1` beside a glob that has `fn b`).
    pub locals: HashSet<String>,
    /// Inherent `impl T { .. }` blocks: `T` as written, and the names of
    /// their functions.
    pub impls: Vec<(Vec<String>, Vec<String>)>,
    /// Structs with named fields, each field's type as written (when it is
    /// a path, behind any references).
    pub structs: Vec<(String, FieldTypes)>,
    pub calls: HashSet<MethodCall>,
}

/// A struct's named fields, each with its type as a path.
pub(crate) type FieldTypes = Vec<(String, Vec<String>)>;

/// `recv.method(..)` whose receiver has a type the code spells out: a
/// variable or parameter of type `root` (`self` in an impl of `root`), then
/// `fields` (`ctx.st.touch(..)`: `Ctx`, `[st]`, `touch`).
#[derive(Debug, PartialEq, Eq, Hash)]
pub(crate) struct MethodCall {
    pub root: Vec<String>,
    pub fields: Vec<String>,
    pub method: String,
}

/// One leaf of a `use` tree.
#[derive(Debug)]
pub(crate) struct UseFact {
    /// The name it binds; `None` for a glob.
    pub alias: Option<String>,
    pub segs: Vec<String>,
}

#[derive(Debug)]
pub(crate) struct FnLen {
    pub name: String,
    pub line: usize,
    pub lines: usize,
}

#[derive(Debug)]
pub(crate) struct FileFacts {
    /// Path from the workspace root, with `/`.
    pub rel: String,
    pub lines_before_tests: usize,
    pub generated: bool,
    pub fns: Vec<FnLen>,
    /// Where a data family goes past the shard (R6).
    pub past_shard: Vec<crate::data::PastShard>,
    /// Empty unless the graph was asked for.
    pub mods: Vec<ModFacts>,
    pub error: Option<String>,
}

pub(crate) fn read(rel: String, text: &str, want_graph: bool) -> FileFacts {
    let generated = text
        .lines()
        .take(GENERATED_HEAD_LINES)
        .any(|l| GENERATED_MARKS.iter().any(|m| l.contains(m)));
    let lines_before_tests = text
        .lines()
        .position(|l| l.trim_start().starts_with("#[cfg(test)]"))
        .unwrap_or_else(|| text.lines().count());
    let mut facts = FileFacts {
        rel,
        lines_before_tests,
        generated,
        fns: Vec::new(),
        past_shard: Vec::new(),
        mods: Vec::new(),
        error: None,
    };
    let file = match syn::parse_file(text) {
        Ok(f) => f,
        Err(e) => {
            let at = e.span().start();
            facts.error = Some(format!("{}:{}: {e}", at.line, at.column + 1));
            return facts;
        }
    };
    if !generated {
        let mut fns = Fns::default();
        fns.visit_file(&file);
        facts.fns = fns.out;
    }
    if is_data_family(&facts.rel) {
        facts.past_shard = crate::data::past_shard(&file);
    }
    if want_graph {
        let mut ex = Extract {
            mods: vec![ModFacts::default()],
            cur: 0,
            impl_ty: Vec::new(),
            vars: Vec::new(),
        };
        ex.visit_file(&file);
        facts.mods = ex.mods;
    }
    facts
}

fn is_data_family(rel: &str) -> bool {
    let Some(r) = rel
        .strip_prefix(crate::GRAPH_ROOT)
        .and_then(|r| r.strip_prefix('/'))
    else {
        return false;
    };
    crate::DATA_FAMILIES.iter().any(|d| {
        if d.ends_with('/') {
            r.starts_with(d)
        } else {
            r == *d
        }
    })
}

fn name(i: &Ident) -> String {
    i.unraw().to_string()
}

fn item_name(item: &Item) -> Option<&Ident> {
    Some(match item {
        Item::Const(i) => &i.ident,
        Item::Enum(i) => &i.ident,
        Item::Fn(i) => &i.sig.ident,
        Item::Macro(i) => i.ident.as_ref()?,
        Item::Static(i) => &i.ident,
        Item::Struct(i) => &i.ident,
        Item::Trait(i) => &i.ident,
        Item::TraitAlias(i) => &i.ident,
        Item::Type(i) => &i.ident,
        Item::Union(i) => &i.ident,
        _ => return None,
    })
}

fn flatten_use(tree: &UseTree, prefix: &mut Vec<String>, out: &mut Vec<UseFact>) {
    match tree {
        UseTree::Path(p) => {
            prefix.push(name(&p.ident));
            flatten_use(&p.tree, prefix, out);
            prefix.pop();
        }
        UseTree::Name(n) => {
            let leaf = name(&n.ident);
            if leaf == "self" {
                out.push(UseFact {
                    alias: prefix.last().cloned(),
                    segs: prefix.clone(),
                });
            } else {
                let mut segs = prefix.clone();
                segs.push(leaf.clone());
                out.push(UseFact {
                    alias: Some(leaf),
                    segs,
                });
            }
        }
        UseTree::Rename(r) => {
            let mut segs = prefix.clone();
            if r.ident != "self" {
                segs.push(name(&r.ident));
            }
            out.push(UseFact {
                alias: Some(name(&r.rename)),
                segs,
            });
        }
        UseTree::Glob(_) => out.push(UseFact {
            alias: None,
            segs: prefix.clone(),
        }),
        UseTree::Group(g) => {
            for t in &g.items {
                flatten_use(t, prefix, out);
            }
        }
    }
}

/// Finds `a :: b :: c` runs in a macro's tokens (and, through `$crate`, in
/// `macro_rules!` bodies). A run that follows `::` belongs to a path rooted
/// outside the crate (`::std::..`) and is skipped.
fn scan_tokens(ts: TokenStream, out: &mut HashSet<Vec<String>>) {
    let toks: Vec<TokenTree> = ts.into_iter().collect();
    let colon = |t: Option<&TokenTree>, joint: bool| {
        matches!(t, Some(TokenTree::Punct(p))
            if p.as_char() == ':' && (!joint || p.spacing() == Spacing::Joint))
    };
    let mut i = 0;
    while i < toks.len() {
        match &toks[i] {
            TokenTree::Group(g) => {
                scan_tokens(g.stream(), out);
                i += 1;
            }
            TokenTree::Ident(id) => {
                let rooted =
                    i >= 2 && colon(toks.get(i - 1), false) && colon(toks.get(i - 2), true);
                let mut segs = vec![id.to_string().trim_start_matches("r#").to_string()];
                let mut j = i + 1;
                while colon(toks.get(j), true) && colon(toks.get(j + 1), false) {
                    match toks.get(j + 2) {
                        Some(TokenTree::Ident(next)) => {
                            segs.push(next.to_string().trim_start_matches("r#").to_string());
                            j += 3;
                        }
                        _ => break,
                    }
                }
                if segs.len() >= 2 && !rooted {
                    out.insert(segs);
                }
                i = j;
            }
            _ => i += 1,
        }
    }
}

struct Extract {
    mods: Vec<ModFacts>,
    cur: usize,
    /// The type of each enclosing impl (`None`: one not spelled as a path).
    impl_ty: Vec<Option<Vec<String>>>,
    /// Per enclosing function, the variables whose type is written down.
    vars: Vec<std::collections::HashMap<String, Vec<String>>>,
}

impl Extract {
    /// A type as the path it names, behind references and parentheses;
    /// `Self` is the enclosing impl's type.
    fn type_segs(&self, ty: &syn::Type) -> Option<Vec<String>> {
        match ty {
            syn::Type::Reference(r) => self.type_segs(&r.elem),
            syn::Type::Paren(p) => self.type_segs(&p.elem),
            syn::Type::Group(g) => self.type_segs(&g.elem),
            syn::Type::Path(p) if p.qself.is_none() && p.path.leading_colon.is_none() => {
                let segs: Vec<String> = p.path.segments.iter().map(|s| name(&s.ident)).collect();
                Some(self.unself(segs))
            }
            _ => None,
        }
    }

    fn unself(&self, segs: Vec<String>) -> Vec<String> {
        match (segs.first().map(String::as_str), self.impl_ty.last()) {
            (Some("Self"), Some(Some(ty))) => ty.iter().chain(&segs[1..]).cloned().collect(),
            _ => segs,
        }
    }

    /// The receiver of a method call as a typed variable and fields, if the
    /// code spells its type out.
    fn receiver(&self, e: &syn::Expr) -> Option<(Vec<String>, Vec<String>)> {
        match e {
            syn::Expr::Path(p) if p.qself.is_none() && p.path.segments.len() == 1 => {
                let var = name(&p.path.segments[0].ident);
                let ty = self.vars.last()?.get(&var)?;
                Some((ty.clone(), Vec::new()))
            }
            syn::Expr::Field(f) => {
                let syn::Member::Named(field) = &f.member else {
                    return None;
                };
                let (root, mut fields) = self.receiver(&f.base)?;
                fields.push(name(field));
                Some((root, fields))
            }
            syn::Expr::Paren(p) => self.receiver(&p.expr),
            syn::Expr::Reference(r) => self.receiver(&r.expr),
            syn::Expr::Unary(u) if matches!(u.op, syn::UnOp::Deref(_)) => self.receiver(&u.expr),
            _ => None,
        }
    }

    /// Visits a function with its typed parameters (and `self`) in scope.
    fn in_fn(&mut self, sig: &syn::Signature, f: impl FnOnce(&mut Self)) {
        let mut vars = std::collections::HashMap::new();
        for arg in &sig.inputs {
            match arg {
                syn::FnArg::Receiver(_) => {
                    if let Some(Some(ty)) = self.impl_ty.last() {
                        vars.insert("self".to_string(), ty.clone());
                    }
                }
                syn::FnArg::Typed(t) => {
                    if let (syn::Pat::Ident(p), Some(ty)) = (&*t.pat, self.type_segs(&t.ty)) {
                        vars.insert(name(&p.ident), ty);
                    }
                }
            }
        }
        self.vars.push(vars);
        f(self);
        self.vars.pop();
    }
}

impl<'ast> Visit<'ast> for Extract {
    fn visit_item(&mut self, item: &'ast Item) {
        if is_test(item_attrs(item)) {
            if let Item::Mod(m) = item {
                if m.content.is_none() {
                    self.mods[self.cur].test_children.push(name(&m.ident));
                }
            }
            return;
        }
        if let Some(id) = item_name(item) {
            self.mods[self.cur].defined.insert(name(id));
        }
        match item {
            Item::Use(u) => {
                for a in &u.attrs {
                    self.visit_attribute(a);
                }
                if u.leading_colon.is_none() {
                    let mut prefix = Vec::new();
                    flatten_use(&u.tree, &mut prefix, &mut self.mods[self.cur].uses);
                }
            }
            Item::Mod(m) => {
                for a in &m.attrs {
                    self.visit_attribute(a);
                }
                if let Some((_, items)) = &m.content {
                    let outer = self.cur;
                    self.mods.push(ModFacts {
                        name: name(&m.ident),
                        parent: Some(outer),
                        ..ModFacts::default()
                    });
                    self.cur = self.mods.len() - 1;
                    for i in items {
                        self.visit_item(i);
                    }
                    self.cur = outer;
                }
            }
            _ => visit::visit_item(self, item),
        }
    }

    fn visit_impl_item(&mut self, i: &'ast ImplItem) {
        if !is_test(impl_item_attrs(i)) {
            visit::visit_impl_item(self, i);
        }
    }

    fn visit_trait_item(&mut self, i: &'ast TraitItem) {
        if !is_test(trait_item_attrs(i)) {
            visit::visit_trait_item(self, i);
        }
    }

    fn visit_item_impl(&mut self, i: &'ast syn::ItemImpl) {
        // `Self` inside the impl's own header is not yet this impl's type.
        let ty = self.type_segs(&i.self_ty);
        if let (None, Some(ty)) = (&i.trait_, &ty) {
            let fns = i
                .items
                .iter()
                .filter(|it| !is_test(impl_item_attrs(it)))
                .filter_map(|it| match it {
                    ImplItem::Fn(f) => Some(name(&f.sig.ident)),
                    _ => None,
                })
                .collect();
            self.mods[self.cur].impls.push((ty.clone(), fns));
        }
        self.impl_ty.push(ty);
        visit::visit_item_impl(self, i);
        self.impl_ty.pop();
    }

    fn visit_item_trait(&mut self, t: &'ast syn::ItemTrait) {
        // `self` in a default method has no one type.
        self.impl_ty.push(None);
        visit::visit_item_trait(self, t);
        self.impl_ty.pop();
    }

    fn visit_item_struct(&mut self, s: &'ast syn::ItemStruct) {
        if let syn::Fields::Named(fields) = &s.fields {
            let typed = fields
                .named
                .iter()
                .filter_map(|f| Some((name(f.ident.as_ref()?), self.type_segs(&f.ty)?)))
                .collect();
            self.mods[self.cur].structs.push((name(&s.ident), typed));
        }
        visit::visit_item_struct(self, s);
    }

    fn visit_item_fn(&mut self, f: &'ast syn::ItemFn) {
        self.in_fn(&f.sig, |s| visit::visit_item_fn(s, f));
    }

    fn visit_impl_item_fn(&mut self, f: &'ast syn::ImplItemFn) {
        self.in_fn(&f.sig, |s| visit::visit_impl_item_fn(s, f));
    }

    fn visit_trait_item_fn(&mut self, f: &'ast syn::TraitItemFn) {
        self.in_fn(&f.sig, |s| visit::visit_trait_item_fn(s, f));
    }

    fn visit_local(&mut self, l: &'ast syn::Local) {
        let (binding, ty) = match &l.pat {
            syn::Pat::Type(t) => (&*t.pat, self.type_segs(&t.ty)),
            p => (p, None),
        };
        if let (syn::Pat::Ident(p), Some(vars)) = (binding, self.vars.last_mut()) {
            // An untyped `let` that shadows a typed variable hides its type.
            match ty {
                Some(ty) => vars.insert(name(&p.ident), ty),
                None => vars.remove(&name(&p.ident)),
            };
        }
        visit::visit_local(self, l);
    }

    fn visit_expr_method_call(&mut self, c: &'ast syn::ExprMethodCall) {
        if let Some((root, fields)) = self.receiver(&c.receiver) {
            self.mods[self.cur].calls.insert(MethodCall {
                root,
                fields,
                method: name(&c.method),
            });
        }
        visit::visit_expr_method_call(self, c);
    }

    fn visit_path(&mut self, p: &'ast syn::Path) {
        if p.leading_colon.is_none() {
            let segs: Vec<String> = p.segments.iter().map(|s| name(&s.ident)).collect();
            let segs = self.unself(segs);
            self.mods[self.cur].paths.insert(segs);
        }
        visit::visit_path(self, p);
    }

    fn visit_macro(&mut self, m: &'ast syn::Macro) {
        // A macro named alone (`info!`) is in the macro namespace, which
        // `macro_rules!` fills by textual order, not by `use`: looking it up
        // among items would find a `fn info` a glob brings in.
        if m.path.segments.len() > 1 {
            self.visit_path(&m.path);
        }
        scan_tokens(m.tokens.clone(), &mut self.mods[self.cur].paths);
    }

    fn visit_pat_ident(&mut self, p: &'ast syn::PatIdent) {
        // `LIMIT` or `Empty` in a pattern is a constant or a unit variant
        // (syn cannot tell them from a binding); by Rust's naming, a binding
        // starts lower-case.
        let n = name(&p.ident);
        if n.starts_with(|c: char| c.is_lowercase() || c == '_') {
            self.mods[self.cur].locals.insert(n);
        }
        visit::visit_pat_ident(self, p);
    }

    fn visit_attribute(&mut self, a: &'ast Attribute) {
        visit::visit_attribute(self, a);
        if let Meta::List(l) = &a.meta {
            // An attribute's arguments are tokens, as a macro's are:
            // `#[derive(crate::x::Trait)]` names a path only there.
            scan_tokens(l.tokens.clone(), &mut self.mods[self.cur].paths);
        }
    }
}

pub(crate) fn item_attrs(item: &Item) -> &[Attribute] {
    match item {
        Item::Const(i) => &i.attrs,
        Item::Enum(i) => &i.attrs,
        Item::ExternCrate(i) => &i.attrs,
        Item::Fn(i) => &i.attrs,
        Item::ForeignMod(i) => &i.attrs,
        Item::Impl(i) => &i.attrs,
        Item::Macro(i) => &i.attrs,
        Item::Mod(i) => &i.attrs,
        Item::Static(i) => &i.attrs,
        Item::Struct(i) => &i.attrs,
        Item::Trait(i) => &i.attrs,
        Item::TraitAlias(i) => &i.attrs,
        Item::Type(i) => &i.attrs,
        Item::Union(i) => &i.attrs,
        Item::Use(i) => &i.attrs,
        _ => &[],
    }
}

fn impl_item_attrs(i: &ImplItem) -> &[Attribute] {
    match i {
        ImplItem::Const(i) => &i.attrs,
        ImplItem::Fn(i) => &i.attrs,
        ImplItem::Type(i) => &i.attrs,
        ImplItem::Macro(i) => &i.attrs,
        _ => &[],
    }
}

fn trait_item_attrs(i: &TraitItem) -> &[Attribute] {
    match i {
        TraitItem::Const(i) => &i.attrs,
        TraitItem::Fn(i) => &i.attrs,
        TraitItem::Type(i) => &i.attrs,
        TraitItem::Macro(i) => &i.attrs,
        _ => &[],
    }
}

/// Function lengths. A function's name carries what encloses it (`Type::f`
/// for a method, `outer::inner` for a nested fn) so it can be found.
#[derive(Default)]
struct Fns {
    out: Vec<FnLen>,
    scope: Vec<String>,
}

impl Fns {
    fn record(
        &mut self,
        name: &Ident,
        vis: Option<&Visibility>,
        sig: &syn::Signature,
        body: &syn::Block,
    ) {
        let start = first_span(vis, sig).start().line;
        let end = body.brace_token.span.close().end().line;
        let mut full = self.scope.join("::");
        if !full.is_empty() {
            full.push_str("::");
        }
        full.push_str(&name.to_string());
        self.out.push(FnLen {
            name: full,
            line: start,
            lines: end + 1 - start,
        });
    }

    fn nested(&mut self, part: String, f: impl FnOnce(&mut Self)) {
        self.scope.push(part);
        f(self);
        self.scope.pop();
    }
}

/// Where a function's signature starts: `pub`, `const`, `async`, `unsafe`,
/// `extern` or `fn`, whichever comes first (attributes and doc comments are
/// not part of it).
fn first_span(vis: Option<&Visibility>, sig: &syn::Signature) -> Span {
    let vis = match vis {
        Some(Visibility::Public(p)) => Some(p.span),
        Some(Visibility::Restricted(r)) => Some(r.pub_token.span),
        _ => None,
    };
    vis.or(sig.constness.as_ref().map(|t| t.span))
        .or(sig.asyncness.as_ref().map(|t| t.span))
        .or(sig.unsafety.as_ref().map(|t| t.span))
        .or(sig.abi.as_ref().map(|a| a.extern_token.span))
        .unwrap_or(sig.fn_token.span)
}

/// The type an impl is for, as one name (`State`, `Vec` for `Vec<T>`).
pub(crate) fn type_name(ty: &syn::Type) -> String {
    match ty {
        syn::Type::Path(p) => p
            .path
            .segments
            .last()
            .map(|s| name(&s.ident))
            .unwrap_or_default(),
        syn::Type::Reference(r) => type_name(&r.elem),
        syn::Type::Group(g) => type_name(&g.elem),
        syn::Type::Paren(p) => type_name(&p.elem),
        _ => "_".to_string(),
    }
}

impl<'ast> Visit<'ast> for Fns {
    fn visit_item(&mut self, item: &'ast Item) {
        if is_test(item_attrs(item)) {
            return;
        }
        match item {
            Item::Fn(f) => {
                self.record(&f.sig.ident, Some(&f.vis), &f.sig, &f.block);
                self.nested(name(&f.sig.ident), |s| visit::visit_item_fn(s, f));
            }
            Item::Impl(i) => self.nested(type_name(&i.self_ty), |s| visit::visit_item_impl(s, i)),
            Item::Trait(t) => self.nested(name(&t.ident), |s| visit::visit_item_trait(s, t)),
            _ => visit::visit_item(self, item),
        }
    }

    fn visit_impl_item(&mut self, i: &'ast ImplItem) {
        if is_test(impl_item_attrs(i)) {
            return;
        }
        if let ImplItem::Fn(f) = i {
            self.record(&f.sig.ident, Some(&f.vis), &f.sig, &f.block);
            self.nested(name(&f.sig.ident), |s| visit::visit_impl_item_fn(s, f));
        } else {
            visit::visit_impl_item(self, i);
        }
    }

    fn visit_trait_item(&mut self, i: &'ast TraitItem) {
        if is_test(trait_item_attrs(i)) {
            return;
        }
        if let TraitItem::Fn(f) = i {
            if let Some(body) = &f.default {
                self.record(&f.sig.ident, None, &f.sig, body);
                self.nested(name(&f.sig.ident), |s| visit::visit_trait_item_fn(s, f));
                return;
            }
        }
        visit::visit_trait_item(self, i);
    }
}
