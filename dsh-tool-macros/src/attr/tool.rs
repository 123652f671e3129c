//! The `#[tool(...)]` argument list.

use proc_macro2::TokenStream;
use quote::ToTokens;
use syn::{Attribute, Expr, ExprPath, Ident, LitStr, Meta, Path};

use crate::ctxt::Ctxt;
use crate::symbol::*;

use super::{
    Attr, TOOL_ARGUMENT, Timeout, expr_path, find_key, lit_bool, lit_str, malformed, meta_items,
};

/// `#[tool(concurrency_safe)]` or `#[tool(concurrency_safe = path)]`.
pub(crate) enum ConcurrencySafe {
    Always,
    Classifier(ExprPath),
}

/// A behaviour hint, `#[tool(read_only)]` or `#[tool(read_only = false)]`: the key (for spans)
/// and the value.
pub(crate) struct Hint {
    pub key: Path,
    pub value: bool,
}

/// The raw `#[tool(...)]` arguments, before defaults are resolved (see `ast.rs`).
#[derive(Default)]
pub(crate) struct Tool {
    pub name: Option<LitStr>,
    pub description: Option<LitStr>,
    pub timeout_ms: Option<Timeout>,
    pub concurrency_safe: Option<ConcurrencySafe>,
    pub render: Option<ExprPath>,
    pub present_call: Option<ExprPath>,
    pub present_result: Option<ExprPath>,
    pub presentation_meta: Option<ExprPath>,
    pub finalize_content: Option<ExprPath>,
    /// The `allow_unknown` key itself, for spans.
    pub allow_unknown: Option<Path>,
    /// The `deny_unknown` key: the default, said explicitly (see `check.rs`).
    pub deny_unknown: Option<Path>,
    /// MCP `annotations`: a display title and the four behaviour hints.
    pub title: Option<LitStr>,
    pub read_only: Option<Hint>,
    pub destructive: Option<Hint>,
    pub idempotent: Option<Hint>,
    pub open_world: Option<Hint>,
    /// `#[tool(task)]`: served over MCP, a call may run as a task.
    pub task: Option<Hint>,
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
        ALLOW_UNKNOWN => "allow_unknown",
        TITLE => "title = \"Read File\"",
        READ_ONLY => "read_only` or `read_only = false",
        DESTRUCTIVE => "destructive` or `destructive = false",
        IDEMPOTENT => "idempotent` or `idempotent = false",
        OPEN_WORLD => "open_world` or `open_world = false",
        TASK => "task` or `task = false",
        ARGS => "args = MyToolArgs",
        _ => "crate = dsh_tools",
    }
}

impl Tool {
    /// Parses the tokens inside `#[tool(...)]`.
    pub(crate) fn from_tokens(cx: &Ctxt, tokens: TokenStream) -> Tool {
        let mut name = Attr::none(cx, TOOL_ARGUMENT, NAME);
        let mut description = Attr::none(cx, TOOL_ARGUMENT, DESCRIPTION);
        let mut timeout_ms = Attr::none(cx, TOOL_ARGUMENT, TIMEOUT_MS);
        let mut concurrency_safe = Attr::none(cx, TOOL_ARGUMENT, CONCURRENCY_SAFE);
        let mut render = Attr::none(cx, TOOL_ARGUMENT, RENDER);
        let mut present_call = Attr::none(cx, TOOL_ARGUMENT, PRESENT_CALL);
        let mut present_result = Attr::none(cx, TOOL_ARGUMENT, PRESENT_RESULT);
        let mut presentation_meta = Attr::none(cx, TOOL_ARGUMENT, PRESENTATION_META);
        let mut finalize_content = Attr::none(cx, TOOL_ARGUMENT, FINALIZE_CONTENT);
        let mut allow_unknown = Attr::none(cx, TOOL_ARGUMENT, ALLOW_UNKNOWN);
        let mut deny_unknown = Attr::none(cx, TOOL_ARGUMENT, DENY_UNKNOWN);
        let mut title = Attr::none(cx, TOOL_ARGUMENT, TITLE);
        let mut read_only = Attr::none(cx, TOOL_ARGUMENT, READ_ONLY);
        let mut destructive = Attr::none(cx, TOOL_ARGUMENT, DESTRUCTIVE);
        let mut idempotent = Attr::none(cx, TOOL_ARGUMENT, IDEMPOTENT);
        let mut open_world = Attr::none(cx, TOOL_ARGUMENT, OPEN_WORLD);
        let mut task = Attr::none(cx, TOOL_ARGUMENT, TASK);
        let mut args = Attr::none(cx, TOOL_ARGUMENT, ARGS);
        let mut krate = Attr::none(cx, TOOL_ARGUMENT, CRATE);
        let mut description_misspelt = false;

        for meta in meta_items(cx, tokens) {
            // The default said explicitly; a value (`deny_unknown = false`) is no way to open
            // the object, so only the bare key is taken.
            if meta.path() == DENY_UNKNOWN {
                if matches!(meta, Meta::Path(_)) {
                    deny_unknown.set(meta.path(), meta.path().clone());
                } else {
                    cx.error_spanned_by(
                        meta.path(),
                        "`deny_unknown` takes no value: unknown properties are refused by default; write `allow_unknown` to accept them",
                    );
                }
                continue;
            }
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
                // #[tool(allow_unknown)]
                (Meta::Path(path), ALLOW_UNKNOWN) => allow_unknown.set(path, path.clone()),
                // #[tool(read_only)], and the other hints alike
                (Meta::Path(path), READ_ONLY | DESTRUCTIVE | IDEMPOTENT | OPEN_WORLD | TASK) => {
                    let slot = match key {
                        READ_ONLY => &mut read_only,
                        DESTRUCTIVE => &mut destructive,
                        IDEMPOTENT => &mut idempotent,
                        OPEN_WORLD => &mut open_world,
                        _ => &mut task,
                    };
                    slot.set(
                        path,
                        Hint {
                            key: path.clone(),
                            value: true,
                        },
                    );
                }
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
                        TIMEOUT_MS => match Timeout::parse(value) {
                            Some(Ok(timeout)) => timeout_ms.set(&nv.path, timeout),
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
                        // #[tool(title = "Read File")]
                        TITLE => match lit_str(value) {
                            Some(lit) => title.set(&nv.path, lit.clone()),
                            None => malformed(cx, value, TOOL, key, syntax),
                        },
                        // #[tool(open_world = false)], and the other hints alike
                        READ_ONLY | DESTRUCTIVE | IDEMPOTENT | OPEN_WORLD | TASK => {
                            let slot = match key {
                                READ_ONLY => &mut read_only,
                                DESTRUCTIVE => &mut destructive,
                                IDEMPOTENT => &mut idempotent,
                                OPEN_WORLD => &mut open_world,
                                _ => &mut task,
                            };
                            match lit_bool(value) {
                                Some(flag) => slot.set(
                                    &nv.path,
                                    Hint {
                                        key: nv.path.clone(),
                                        value: flag,
                                    },
                                ),
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
            allow_unknown: allow_unknown.get(),
            deny_unknown: deny_unknown.get(),
            title: title.get(),
            read_only: read_only.get(),
            destructive: destructive.get(),
            idempotent: idempotent.get(),
            open_world: open_world.get(),
            task: task.get(),
            args: args.get(),
            krate: krate.get(),
            description_misspelt,
        }
    }

    /// Parses a `#[tool]` / `#[tool(...)]` attribute found on a method inside `#[toolbox]`.
    pub(crate) fn from_attribute(cx: &Ctxt, attr: &Attribute) -> Tool {
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
