//! Parsing of the `#[tool(...)]` arguments and of the parameter attributes (`#[arg(...)]`,
//! `#[args]`, doc comments) into [`Tool`] and [`Param`].
//!
//! The argument list is first split into `syn::Meta` items, then each item is interpreted on its
//! own, so one bad key never hides the next.

use proc_macro2::TokenStream;
use quote::ToTokens;
use syn::parse::Parser;
use syn::punctuated::Punctuated;
use syn::{Attribute, Expr, ExprLit, ExprPath, ExprUnary, Ident, Lit, LitStr, Meta, Path, Token};

use crate::ctxt::Ctxt;
use crate::symbol::*;

/// One argument value, remembering the first occurrence so a second one is reported as a
/// duplicate instead of silently winning.
struct Attr<'c, T> {
    cx: &'c Ctxt,
    /// What the key belongs to, e.g. "`#[tool]` argument" or "`range` bound".
    what: &'static str,
    name: Symbol,
    value: Option<T>,
}

impl<'c, T> Attr<'c, T> {
    fn none(cx: &'c Ctxt, what: &'static str, name: Symbol) -> Self {
        Attr {
            cx,
            what,
            name,
            value: None,
        }
    }

    fn set<A: ToTokens>(&mut self, key: A, value: T) {
        if self.value.is_some() {
            self.cx.error_spanned_by(
                key,
                format!("duplicate {} `{}`; keep only one", self.what, self.name),
            );
        } else {
            self.value = Some(value);
        }
    }

    fn get(self) -> Option<T> {
        self.value
    }
}

const TOOL_ARGUMENT: &str = "`#[tool]` argument";
const ARG_ARGUMENT: &str = "`#[arg]` argument";

/// `#[tool(timeout_ms = N)]`: the literal as written (validated in `check.rs`).
pub struct Timeout {
    /// The value; may be zero, negative or out of range here.
    pub ms: i128,
    /// The value tokens, for spans.
    pub value: Expr,
}

/// `#[tool(concurrency_safe)]` or `#[tool(concurrency_safe = path)]`.
pub enum ConcurrencySafe {
    Always,
    Classifier(ExprPath),
}

/// The raw `#[tool(...)]` arguments, before defaults are resolved (see `ast.rs`).
#[derive(Default)]
pub struct Tool {
    pub name: Option<LitStr>,
    pub description: Option<LitStr>,
    pub timeout_ms: Option<Timeout>,
    pub concurrency_safe: Option<ConcurrencySafe>,
    pub render: Option<ExprPath>,
    pub present_call: Option<ExprPath>,
    pub present_result: Option<ExprPath>,
    pub presentation_meta: Option<ExprPath>,
    pub finalize_content: Option<ExprPath>,
    /// The `deny_unknown` key itself, for spans.
    pub deny_unknown: Option<Path>,
    pub args: Option<Ident>,
    pub krate: Option<Path>,
    /// An unknown key was a near miss of `description` (already reported).
    pub description_misspelt: bool,
}

/// How each `#[tool]` key is written, for "malformed" messages.
fn tool_syntax(key: Symbol) -> &'static str {
    match key {
        NAME => "name = \"my_tool\"",
        DESCRIPTION => "description = \"…\"",
        TIMEOUT_MS => "timeout_ms = 5_000",
        CONCURRENCY_SAFE => "concurrency_safe` or `concurrency_safe = path::to::classifier",
        RENDER => "render = path::to::render_fn",
        PRESENT_CALL => "present_call = path::to::fn",
        PRESENT_RESULT => "present_result = path::to::fn",
        PRESENTATION_META => "presentation_meta = path::to::fn",
        FINALIZE_CONTENT => "finalize_content = path::to::fn",
        DENY_UNKNOWN => "deny_unknown",
        ARGS => "args = MyToolArgs",
        _ => "crate = dsh_tools",
    }
}

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

fn malformed<A: ToTokens>(cx: &Ctxt, obj: A, attr: Symbol, key: Symbol, syntax: &str) {
    cx.error_spanned_by(
        obj,
        format!("malformed `#[{attr}]` argument `{key}`; write `{syntax}`"),
    );
}

fn find_key(keys: &[Symbol], path: &Path) -> Option<Symbol> {
    keys.iter().copied().find(|key| path == key)
}

/// Splits an argument list into `Meta` items; a syntax error is recorded and yields no items.
fn meta_items(cx: &Ctxt, tokens: TokenStream) -> Vec<Meta> {
    match Punctuated::<Meta, Token![,]>::parse_terminated.parse2(tokens) {
        Ok(items) => items.into_iter().collect(),
        Err(err) => {
            cx.syn_error(err);
            Vec::new()
        }
    }
}

fn lit_str(expr: &Expr) -> Option<&LitStr> {
    match expr {
        Expr::Lit(ExprLit {
            lit: Lit::Str(lit), ..
        }) => Some(lit),
        _ => None,
    }
}

fn expr_path(expr: &Expr) -> Option<&ExprPath> {
    match expr {
        Expr::Path(path) if path.qself.is_none() => Some(path),
        _ => None,
    }
}

/// An integer literal, possibly negated.
fn int_literal(expr: &Expr) -> Option<syn::Result<i128>> {
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
fn number_literal(expr: &Expr) -> Option<f64> {
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

impl Tool {
    /// Parses the tokens inside `#[tool(...)]`.
    pub fn from_tokens(cx: &Ctxt, tokens: TokenStream) -> Tool {
        let mut name = Attr::none(cx, TOOL_ARGUMENT, NAME);
        let mut description = Attr::none(cx, TOOL_ARGUMENT, DESCRIPTION);
        let mut timeout_ms = Attr::none(cx, TOOL_ARGUMENT, TIMEOUT_MS);
        let mut concurrency_safe = Attr::none(cx, TOOL_ARGUMENT, CONCURRENCY_SAFE);
        let mut render = Attr::none(cx, TOOL_ARGUMENT, RENDER);
        let mut present_call = Attr::none(cx, TOOL_ARGUMENT, PRESENT_CALL);
        let mut present_result = Attr::none(cx, TOOL_ARGUMENT, PRESENT_RESULT);
        let mut presentation_meta = Attr::none(cx, TOOL_ARGUMENT, PRESENTATION_META);
        let mut finalize_content = Attr::none(cx, TOOL_ARGUMENT, FINALIZE_CONTENT);
        let mut deny_unknown = Attr::none(cx, TOOL_ARGUMENT, DENY_UNKNOWN);
        let mut args = Attr::none(cx, TOOL_ARGUMENT, ARGS);
        let mut krate = Attr::none(cx, TOOL_ARGUMENT, CRATE);
        let mut description_misspelt = false;

        for meta in meta_items(cx, tokens) {
            let Some(key) = find_key(TOOL_KEYS, meta.path()) else {
                let word = meta.path().to_token_stream().to_string();
                // A misspelt `description` is the description: no second error about a missing one.
                description_misspelt |= did_you_mean(&word, TOOL_KEYS) == Some(DESCRIPTION);
                cx.error_spanned_by(meta.path(), unknown_key("#[tool]", &word, TOOL_KEYS));
                continue;
            };
            let syntax = tool_syntax(key);
            match (&meta, key) {
                // #[tool(concurrency_safe)]
                (Meta::Path(path), CONCURRENCY_SAFE) => {
                    concurrency_safe.set(path, ConcurrencySafe::Always);
                }
                // #[tool(deny_unknown)]
                (Meta::Path(path), DENY_UNKNOWN) => deny_unknown.set(path, path.clone()),
                (Meta::NameValue(nv), key) => {
                    let value = &nv.value;
                    match key {
                        // #[tool(name = "read_file")]
                        NAME => match lit_str(value) {
                            Some(lit) => name.set(&nv.path, lit.clone()),
                            None => malformed(cx, value, TOOL, key, syntax),
                        },
                        // #[tool(description = "Reads a file.")]
                        DESCRIPTION => match lit_str(value) {
                            Some(lit) => description.set(&nv.path, lit.clone()),
                            None => malformed(cx, value, TOOL, key, syntax),
                        },
                        // #[tool(timeout_ms = 5_000)]
                        TIMEOUT_MS => match int_literal(value) {
                            Some(Ok(ms)) => timeout_ms.set(
                                &nv.path,
                                Timeout {
                                    ms,
                                    value: value.clone(),
                                },
                            ),
                            Some(Err(err)) => cx.syn_error(err),
                            None => malformed(cx, value, TOOL, key, syntax),
                        },
                        // #[tool(concurrency_safe = path::to::classifier)]
                        CONCURRENCY_SAFE => match expr_path(value) {
                            Some(path) => concurrency_safe
                                .set(&nv.path, ConcurrencySafe::Classifier(path.clone())),
                            None => malformed(cx, value, TOOL, key, syntax),
                        },
                        // #[tool(render = path::to::fn)], and the other hook paths alike
                        RENDER | PRESENT_CALL | PRESENT_RESULT | PRESENTATION_META
                        | FINALIZE_CONTENT => {
                            let slot = match key {
                                RENDER => &mut render,
                                PRESENT_CALL => &mut present_call,
                                PRESENT_RESULT => &mut present_result,
                                PRESENTATION_META => &mut presentation_meta,
                                _ => &mut finalize_content,
                            };
                            match expr_path(value) {
                                Some(path) => slot.set(&nv.path, path.clone()),
                                None => malformed(cx, value, TOOL, key, syntax),
                            }
                        }
                        // #[tool(args = ReadArgs)]
                        ARGS => match expr_path(value).and_then(|path| path.path.get_ident()) {
                            Some(ident) => args.set(&nv.path, ident.clone()),
                            None => malformed(cx, value, TOOL, key, syntax),
                        },
                        // #[tool(crate = dsh_tools)] or #[tool(crate = "dsh_tools")]
                        CRATE => {
                            let path = match value {
                                Expr::Path(path) if path.qself.is_none() => Some(path.path.clone()),
                                _ => lit_str(value).and_then(|lit| lit.parse::<Path>().ok()),
                            };
                            match path {
                                Some(path) => krate.set(&nv.path, path),
                                None => malformed(cx, value, TOOL, key, syntax),
                            }
                        }
                        _ => malformed(cx, &meta, TOOL, key, syntax),
                    }
                }
                _ => malformed(cx, &meta, TOOL, key, syntax),
            }
        }

        Tool {
            name: name.get(),
            description: description.get(),
            timeout_ms: timeout_ms.get(),
            concurrency_safe: concurrency_safe.get(),
            render: render.get(),
            present_call: present_call.get(),
            present_result: present_result.get(),
            presentation_meta: presentation_meta.get(),
            finalize_content: finalize_content.get(),
            deny_unknown: deny_unknown.get(),
            args: args.get(),
            krate: krate.get(),
            description_misspelt,
        }
    }

    /// Parses a `#[tool]` / `#[tool(...)]` attribute found on a method inside `#[toolbox]`.
    pub fn from_attribute(cx: &Ctxt, attr: &Attribute) -> Tool {
        match &attr.meta {
            Meta::Path(_) => Tool::default(),
            Meta::List(list) => Tool::from_tokens(cx, list.tokens.clone()),
            Meta::NameValue(nv) => {
                cx.error_spanned_by(
                    nv,
                    "malformed `#[tool]` attribute; write `#[tool]` or `#[tool(key = value, …)]`",
                );
                Tool::default()
            }
        }
    }
}

/// `range(min = …, max = …)` or `length(min = …, max = …)`: the literals as written plus their
/// values.
pub struct Bounds {
    /// The `range` / `length` key, for spans.
    pub key: Path,
    pub min: Option<(Expr, f64)>,
    pub max: Option<(Expr, f64)>,
}

/// The attributes of one fn parameter.
#[derive(Default)]
pub struct Param {
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
    pub fn from_attrs(cx: &Ctxt, attrs: &[Attribute]) -> Param {
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
