//! R6: the data families reach their keys through the shard. In the files
//! of [`crate::DATA_FAMILIES`] an operation (`fn op_*`) names nothing of the
//! whole server ([`crate::SERVER_TYPES`]), and no code reaches past the
//! shard's view: no `.dbs` field and no lookup method ([`crate::LOOKUPS`])
//! called on a `.st` field.

use syn::visit::{self, Visit};
use syn::{Expr, ExprField, ExprMethodCall, ItemFn, Member};

use crate::cfg::is_test;
use crate::{LOOKUPS, SERVER_TYPES};

/// One place where a data family goes past the shard.
#[derive(Debug)]
pub(crate) struct PastShard {
    pub line: usize,
    pub what: String,
}

pub(crate) fn past_shard(file: &syn::File) -> Vec<PastShard> {
    let mut v = Seek {
        out: Vec::new(),
        op: None,
    };
    v.visit_file(file);
    v.out
}

struct Seek {
    out: Vec<PastShard>,
    /// The operation being read.
    op: Option<String>,
}

fn ends_in_st(e: &Expr) -> bool {
    matches!(e, Expr::Field(ExprField { member: Member::Named(m), .. }) if m == "st")
}

impl<'a> Visit<'a> for Seek {
    fn visit_item_mod(&mut self, m: &'a syn::ItemMod) {
        if !is_test(&m.attrs) {
            visit::visit_item_mod(self, m);
        }
    }

    fn visit_item_fn(&mut self, f: &'a ItemFn) {
        if is_test(&f.attrs) {
            return;
        }
        let name = f.sig.ident.to_string();
        let outer = self.op.take();
        if name.starts_with("op_") {
            self.op = Some(name);
        }
        visit::visit_item_fn(self, f);
        self.op = outer;
    }

    fn visit_ident(&mut self, i: &'a proc_macro2::Ident) {
        if let Some(op) = &self.op {
            if SERVER_TYPES.iter().any(|t| i == t) {
                self.out.push(PastShard {
                    line: i.span().start().line,
                    what: format!("operation {op} names {i}: an operation takes the shard's Keys, not the server"),
                });
            }
        }
    }

    fn visit_expr_field(&mut self, e: &'a ExprField) {
        if let Member::Named(m) = &e.member {
            if m == "dbs" {
                self.out.push(PastShard {
                    line: m.span().start().line,
                    what: "reaches the databases (`.dbs`) past the shard's Keys".into(),
                });
            }
        }
        visit::visit_expr_field(self, e);
    }

    fn visit_expr_method_call(&mut self, e: &'a ExprMethodCall) {
        if ends_in_st(&e.receiver) && LOOKUPS.iter().any(|l| e.method == l) {
            self.out.push(PastShard {
                line: e.method.span().start().line,
                what: format!(
                    "looks a key up through the server (`st.{}`), not the shard's Keys",
                    e.method
                ),
            });
        }
        visit::visit_expr_method_call(self, e);
    }
}
