//! Parsing of the `#[tool(...)]` arguments and of the parameter attributes (`#[arg(...)]`,
//! `#[args]`, doc comments) into [`Tool`] and [`Param`].
//!
//! The argument list is first split into `syn::Meta` items, then each item is interpreted on its
//! own, so one bad key never hides the next.
//!
//! One file per attribute: [`tool`] (`#[tool(...)]`), [`timeout`] (its `timeout_ms`), [`param`]
//! (`#[arg(...)]`, `#[args]` and doc comments on a parameter); this file holds the shared pieces.

mod param;
mod timeout;
mod tool;

pub(crate) use param::{Bounds, Param};
pub(crate) use timeout::Timeout;
pub(crate) use tool::{ConcurrencySafe, Hint, Tool};

use proc_macro2::TokenStream;
use quote::ToTokens;
use syn::parse::Parser;
use syn::punctuated::Punctuated;
use syn::{Expr, ExprLit, ExprPath, ExprUnary, Lit, LitStr, Meta, Path, Token};

use crate::ctxt::Ctxt;
use crate::symbol::*;

/// One argument value, remembering the first occurrence so a second one is reported as a
/// duplicate instead of silently winning.
pub(super) struct Attr<'c, T> {
    cx: &'c Ctxt,
    /// What the key belongs to, e.g. "`#[tool]` argument" or "`range` bound".
    what: &'static str,
    name: Symbol,
    value: Option<T>,
}

impl<'c, T> Attr<'c, T> {
    pub(super) fn none(cx: &'c Ctxt, what: &'static str, name: Symbol) -> Self {
        Attr {
            cx,
            what,
            name,
            value: None,
        }
    }

    pub(super) fn set<A: ToTokens>(&mut self, key: A, value: T) {
        if self.value.is_some() {
            self.cx.error_spanned_by(
                key,
                format!("duplicate {} `{}`; keep only one", self.what, self.name),
            );
        } else {
            self.value = Some(value);
        }
    }

    pub(super) fn get(self) -> Option<T> {
        self.value
    }
}

pub(super) const TOOL_ARGUMENT: &str = "`#[tool]` argument";
pub(super) const ARG_ARGUMENT: &str = "`#[arg]` argument";

pub(super) fn malformed<A: ToTokens>(cx: &Ctxt, obj: A, attr: Symbol, key: Symbol, syntax: &str) {
    cx.error_spanned_by(
        obj,
        format!("malformed `#[{attr}]` argument `{key}`; write `{syntax}`"),
    );
}

pub(super) fn find_key(keys: &[Symbol], path: &Path) -> Option<Symbol> {
    keys.iter().copied().find(|key| path == key)
}

/// Splits an argument list into `Meta` items; a syntax error is recorded and yields no items.
pub(super) fn meta_items(cx: &Ctxt, tokens: TokenStream) -> Vec<Meta> {
    match Punctuated::<Meta, Token![,]>::parse_terminated.parse2(tokens) {
        Ok(items) => items.into_iter().collect(),
        Err(err) => {
            cx.syn_error(err);
            Vec::new()
        }
    }
}

pub(super) fn lit_str(expr: &Expr) -> Option<&LitStr> {
    match expr {
        Expr::Lit(ExprLit {
            lit: Lit::Str(lit), ..
        }) => Some(lit),
        _ => None,
    }
}

pub(super) fn lit_bool(expr: &Expr) -> Option<bool> {
    match expr {
        Expr::Lit(ExprLit {
            lit: Lit::Bool(lit),
            ..
        }) => Some(lit.value),
        _ => None,
    }
}

pub(super) fn expr_path(expr: &Expr) -> Option<&ExprPath> {
    match expr {
        Expr::Path(path) if path.qself.is_none() => Some(path),
        _ => None,
    }
}

/// An integer literal, possibly negated.
pub(super) fn int_literal(expr: &Expr) -> Option<syn::Result<i128>> {
    match expr {
        Expr::Lit(ExprLit {
            lit: Lit::Int(lit), ..
        }) => Some(lit.base10_parse::<i128>()),
        Expr::Unary(ExprUnary {
            op: syn::UnOp::Neg(_),
            expr,
            ..
        }) => int_literal(expr).map(|value| value.map(|value| -value)),
        _ => None,
    }
}

/// A number literal (integer or float), possibly negated.
pub(super) fn number_literal(expr: &Expr) -> Option<f64> {
    match expr {
        Expr::Lit(ExprLit {
            lit: Lit::Int(lit), ..
        }) => lit.base10_parse::<f64>().ok(),
        Expr::Lit(ExprLit {
            lit: Lit::Float(lit),
            ..
        }) => lit.base10_parse::<f64>().ok(),
        Expr::Unary(ExprUnary {
            op: syn::UnOp::Neg(_),
            expr,
            ..
        }) => number_literal(expr).map(|value| -value),
        _ => None,
    }
}
