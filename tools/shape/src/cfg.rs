//! Which items only a test build compiles: the checks leave them alone.

use proc_macro2::{TokenStream, TokenTree};
use syn::{Attribute, Meta};

/// Whether `attrs` hold a `cfg` that only a test build satisfies:
/// `cfg(test)` or `cfg(all(.., test, ..))`. `any(test, ..)` and `not(test)`
/// may hold outside tests, so their items stay.
pub(crate) fn is_test(attrs: &[Attribute]) -> bool {
    attrs.iter().any(|a| match &a.meta {
        Meta::List(l) if l.path.is_ident("cfg") => requires_test(l.tokens.clone()),
        _ => false,
    })
}

fn requires_test(ts: TokenStream) -> bool {
    let toks: Vec<TokenTree> = ts.into_iter().collect();
    match toks.as_slice() {
        [TokenTree::Ident(i)] => i == "test",
        [TokenTree::Ident(i), TokenTree::Group(g)] if i == "all" => {
            let mut parts = vec![TokenStream::new()];
            for t in g.stream() {
                match &t {
                    TokenTree::Punct(p) if p.as_char() == ',' => parts.push(TokenStream::new()),
                    _ => parts.last_mut().unwrap().extend([t]),
                }
            }
            parts.into_iter().any(requires_test)
        }
        _ => false,
    }
}
