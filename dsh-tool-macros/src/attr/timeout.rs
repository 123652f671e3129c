//! `#[tool(timeout_ms = N)]`: where the timeout literal is parsed (its range is checked in
//! `check.rs`, where the fix is suggested).

use syn::Expr;

use super::int_literal;

/// `#[tool(timeout_ms = N)]`: the literal as written (validated in `check.rs`).
pub(crate) struct Timeout {
    /// The value; may be zero, negative or out of range here.
    pub ms: i128,
    /// The value tokens, for spans.
    pub value: Expr,
}

impl Timeout {
    /// Reads the value of `timeout_ms = …`: `None` when it is not an integer literal, a
    /// `syn::Error` when the literal does not fit.
    pub(super) fn parse(value: &Expr) -> Option<syn::Result<Timeout>> {
        Some(int_literal(value)?.map(|ms| Timeout {
            ms,
            value: value.clone(),
        }))
    }
}
