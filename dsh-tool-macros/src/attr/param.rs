//! The attributes of one fn parameter: `#[arg(...)]`, `#[args]` and doc comments.

use quote::ToTokens;
use syn::parse::Parser;
use syn::punctuated::Punctuated;
use syn::{Attribute, Expr, LitStr, Meta, Path, Token};

use crate::ctxt::Ctxt;
use crate::symbol::*;

use super::{
    ARG_ARGUMENT, Attr, find_key, int_literal, lit_str, malformed, meta_items, number_literal,
};

/// How each `#[arg]` key is written, for "malformed" messages.
fn arg_syntax(key: Symbol) -> &'static str {
    match key {
        DESCRIPTION => "description = \"…\"",
        RENAME => "rename = \"wireName\"",
        DEFAULT => "default = <expr>",
        RANGE => "range(min = 1, max = 100)",
        LENGTH => "length(min = 1, max = 100)",
        _ => "pattern = \"^[a-z]+$\"",
    }
}

/// `range(min = …, max = …)` or `length(min = …, max = …)`: the literals as written plus their
/// values.
pub(crate) struct Bounds {
    /// The `range` / `length` key, for spans.
    pub key: Path,
    pub min: Option<(Expr, f64)>,
    pub max: Option<(Expr, f64)>,
}

/// The attributes of one fn parameter.
#[derive(Default)]
pub(crate) struct Param {
    /// `///` comments, passed on to the generated field (schemars reads them).
    pub docs: Vec<Attribute>,
    pub description: Option<LitStr>,
    pub rename: Option<LitStr>,
    /// `(key, expr)` of `default = expr`.
    pub default: Option<(Path, Expr)>,
    pub range: Option<Bounds>,
    pub length: Option<Bounds>,
    pub pattern: Option<LitStr>,
    /// The first `#[arg]` attribute, for spans.
    pub arg_attr: Option<Attribute>,
    /// The `#[args]` attribute, when present.
    pub args_attr: Option<Attribute>,
}

impl Param {
    /// Reads `#[doc]`, `#[arg(...)]` and `#[args]` from a parameter's attributes.
    pub(crate) fn from_attrs(cx: &Ctxt, attrs: &[Attribute]) -> Param {
        let mut param = Param::default();
        let mut description = Attr::none(cx, ARG_ARGUMENT, DESCRIPTION);
        let mut rename = Attr::none(cx, ARG_ARGUMENT, RENAME);
        let mut default = Attr::none(cx, ARG_ARGUMENT, DEFAULT);
        let mut range = Attr::none(cx, ARG_ARGUMENT, RANGE);
        let mut length = Attr::none(cx, ARG_ARGUMENT, LENGTH);
        let mut pattern = Attr::none(cx, ARG_ARGUMENT, PATTERN);

        for attr in attrs {
            let path = attr.path();
            if path == DOC {
                param.docs.push(attr.clone());
            } else if path == ARGS {
                // #[args]
                if !matches!(attr.meta, Meta::Path(_)) {
                    cx.error_spanned_by(attr, "`#[args]` takes no arguments; write `#[args]`");
                }
                if param.args_attr.is_some() {
                    cx.error_spanned_by(attr, "duplicate `#[args]` attribute; keep only one");
                }
                param.args_attr.get_or_insert_with(|| attr.clone());
            } else if path == ARG {
                param.arg_attr.get_or_insert_with(|| attr.clone());
                let tokens = match &attr.meta {
                    Meta::List(list) => list.tokens.clone(),
                    _ => {
                        cx.error_spanned_by(
                            attr,
                            "malformed `#[arg]` attribute; write `#[arg(key = value, …)]`",
                        );
                        continue;
                    }
                };
                for meta in meta_items(cx, tokens) {
                    let Some(key) = find_key(ARG_KEYS, meta.path()) else {
                        let word = meta.path().to_token_stream().to_string();
                        cx.error_spanned_by(meta.path(), unknown_key("#[arg]", &word, ARG_KEYS));
                        continue;
                    };
                    let syntax = arg_syntax(key);
                    match (&meta, key) {
                        // #[arg(range(min = 1, max = 10))], #[arg(length(max = 100))]
                        (Meta::List(list), RANGE | LENGTH) => {
                            if let Some(bounds) = parse_bounds(cx, list, key) {
                                match key {
                                    RANGE => range.set(&list.path, bounds),
                                    _ => length.set(&list.path, bounds),
                                }
                            }
                        }
                        (Meta::NameValue(nv), DESCRIPTION | RENAME | PATTERN) => {
                            match lit_str(&nv.value) {
                                // #[arg(description = "…")]
                                Some(lit) if key == DESCRIPTION => {
                                    description.set(&nv.path, lit.clone());
                                }
                                // #[arg(rename = "filePath")]
                                Some(lit) if key == RENAME => rename.set(&nv.path, lit.clone()),
                                // #[arg(pattern = "^[a-z]+$")]
                                Some(lit) => pattern.set(&nv.path, lit.clone()),
                                None => malformed(cx, &nv.value, ARG, key, syntax),
                            }
                        }
                        // #[arg(default = 10)]
                        (Meta::NameValue(nv), DEFAULT) => {
                            default.set(&nv.path, (nv.path.clone(), nv.value.clone()));
                        }
                        _ => malformed(cx, &meta, ARG, key, syntax),
                    }
                }
            }
        }

        param.description = description.get();
        param.rename = rename.get();
        param.default = default.get();
        param.range = range.get();
        param.length = length.get();
        param.pattern = pattern.get();
        param
    }
}

/// Parses the `min = …, max = …` list of `range(...)` (number literals) or `length(...)`
/// (non-negative integer literals).
fn parse_bounds(cx: &Ctxt, list: &syn::MetaList, key: Symbol) -> Option<Bounds> {
    let items = match Punctuated::<Meta, Token![,]>::parse_terminated.parse2(list.tokens.clone()) {
        Ok(items) => items,
        Err(err) => {
            cx.syn_error(err);
            return None;
        }
    };
    let what = if key == RANGE {
        "`range` bound"
    } else {
        "`length` bound"
    };
    let mut min = Attr::none(cx, what, MIN);
    let mut max = Attr::none(cx, what, MAX);
    let expected = if key == RANGE {
        "a number literal"
    } else {
        "a non-negative integer literal"
    };
    for meta in &items {
        let Meta::NameValue(nv) = meta else {
            cx.error_spanned_by(
                meta,
                format!("malformed `{key}` bound; write `{}`", arg_syntax(key)),
            );
            continue;
        };
        let slot = if nv.path == MIN {
            &mut min
        } else if nv.path == MAX {
            &mut max
        } else {
            cx.error_spanned_by(
                &nv.path,
                format!(
                    "unknown `{key}` bound `{}`; expected `min` or `max`",
                    nv.path.to_token_stream()
                ),
            );
            continue;
        };
        let value = if key == RANGE {
            number_literal(&nv.value)
        } else {
            match int_literal(&nv.value) {
                #[allow(clippy::cast_precision_loss)] // lengths far beyond 2^53 are not meaningful
                Some(Ok(value)) if value >= 0 => Some(value as f64),
                _ => None,
            }
        };
        match value {
            Some(value) => slot.set(&nv.path, (nv.value.clone(), value)),
            None => cx.error_spanned_by(
                &nv.value,
                format!(
                    "`{key}` bound `{}` must be {expected}",
                    nv.path.to_token_stream()
                ),
            ),
        }
    }
    let (min, max) = (min.get(), max.get());
    if min.is_none() && max.is_none() {
        if items.is_empty() {
            cx.error_spanned_by(
                list,
                format!(
                    "`{key}` needs `min`, `max` or both; write `{}`",
                    arg_syntax(key)
                ),
            );
        }
        return None;
    }
    Some(Bounds {
        key: list.path.clone(),
        min,
        max,
    })
}
