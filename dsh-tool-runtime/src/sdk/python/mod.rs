//! Python rendering of the model: a `Tools` protocol of keyword-only `async def`s, `TypedDict`
//! classes for nested objects and outputs, type aliases, keywords and literals.
//!
//! Target: Python 3.10 and mypy `--strict --python-version 3.10`. A tool whose arguments are an
//! object with plain keys is a method with keyword-only parameters (optional ones default to the
//! schema's default where mypy accepts it, else `...`); the bridge sends keyword arguments as the
//! arguments object. Other argument schemas are one dict parameter. `Required` / `NotRequired`
//! (PEP 655, Python 3.11) come from `typing_extensions` under `TYPE_CHECKING`, so the checker
//! knows them and nothing is imported at run time. The file starts with
//! `from __future__ import annotations` and quotes every type expression Python would evaluate
//! (aliases, functional `TypedDict` values), so it also imports cleanly at run time despite
//! forward and recursive references.
//!
//! This file names tools and members and lays out the `Tools` protocol; `hints.rs` turns schema
//! nodes into type hints and `syntax.rs` writes the Python text they are made of.

mod hints;
mod syntax;

use std::collections::BTreeMap;

use serde::Serialize;

use super::model::Model;
use super::text::{NameAllocator, is_ascii_identifier, quoted};
use hints::{Rendered, Renderer};
use syntax::comment;

/// Python's hard keywords (Python 3.10 reference §2.3.1, `keyword.kwlist`) and `__debug__`,
/// which cannot be assigned either. Soft keywords (`match`, `case`, `_`, `type`) are ordinary
/// names where we use them.
pub const KEYWORDS: &[&str] = &[
    "False",
    "None",
    "True",
    "and",
    "as",
    "assert",
    "async",
    "await",
    "break",
    "class",
    "continue",
    "def",
    "del",
    "elif",
    "else",
    "except",
    "finally",
    "for",
    "from",
    "global",
    "if",
    "import",
    "in",
    "is",
    "lambda",
    "nonlocal",
    "not",
    "or",
    "pass",
    "raise",
    "return",
    "try",
    "while",
    "with",
    "yield",
    "__debug__",
];

/// Builtins the generated annotations use: a class-body field or a `Tools` method with one of
/// these names would shadow it for the annotations that follow in the same class scope.
const ANNOTATION_BUILTINS: &[&str] = &["bool", "dict", "float", "int", "list", "str"];

/// Names a generated class or alias may not take: the names the file imports or declares, and
/// the builtin it subclasses. Generated names always start with an upper-case letter, so
/// lower-case builtins cannot collide.
pub(crate) const RESERVED: &[&str] = &[
    "Any",
    "Exception",
    "False",
    "Literal",
    "None",
    "NotRequired",
    "Protocol",
    "Required",
    "TYPE_CHECKING",
    "ToolCallError",
    "Tools",
    "True",
    "TypeAlias",
    "TypedDict",
];

/// A fresh allocator for Python type names.
pub(crate) fn names() -> NameAllocator {
    NameAllocator::new(RESERVED)
}

/// True when `name` can be written as a bare name in a class body: an ASCII identifier that is
/// no keyword, does not start with `__` (private-name mangling, Python reference §6.2.1) nor an
/// upper-case letter (generated and `typing` names), and shadows no annotation builtin.
fn is_plain_member(name: &str) -> bool {
    is_ascii_identifier(name)
        && !KEYWORDS.contains(&name)
        && !name.starts_with("__")
        && !name.starts_with(|c: char| c.is_ascii_uppercase())
        && !ANNOTATION_BUILTINS.contains(&name)
}

/// True when a tool can be a bare `async def` of `Tools` and be called as `tools.<name>(...)`:
/// a plain member name that does not start with `_` at all (such attributes are conventionally
/// private, and the runtime object may define its own).
fn is_bare_tool_name(name: &str) -> bool {
    (is_plain_member(name) || is_stable_unicode_identifier(name)) && !name.starts_with('_')
}

/// True for a non-ASCII Python identifier that reads back as itself: Python parses identifiers
/// as XID_Start XID_Continue* and NFKC-normalizes them (`搜索` is a method, as in DSH), so only
/// characters whose NFKC form is themselves may appear. Without normalization tables this admits
/// the scripts where that holds for every letter (CJK ideographs, kana, Hangul syllables, basic
/// Cyrillic and Greek, Latin-1 letters); other names are reached by index.
fn is_stable_unicode_identifier(name: &str) -> bool {
    let stable = |c: char| {
        c.is_ascii_alphanumeric()
            || c == '_'
            || matches!(u32::from(c),
                0x00C0..=0x00D6 | 0x00D8..=0x00F6 | 0x00F8..=0x00FF
                | 0x0391..=0x03A9 | 0x03B1..=0x03C9
                | 0x0410..=0x044F
                | 0x3041..=0x3096 | 0x30A1..=0x30FA
                | 0x3400..=0x4DBF | 0x4E00..=0x9FFF
                | 0xAC00..=0xD7A3)
    };
    let mut chars = name.chars();
    !name.is_ascii()
        && chars
            .next()
            .is_some_and(|c| (c == '_' || unicode_ident::is_xid_start(c)) && stable(c))
        && chars.all(|c| unicode_ident::is_xid_continue(c) && stable(c))
}

/// How a program reaches tool `name` on `tools`: the bare method name, or the quoted name to
/// subscript with.
pub(crate) fn access_key(name: &str) -> String {
    if is_bare_tool_name(name) {
        name.to_owned()
    } else {
        quoted(name)
    }
}

/// One member of the `Tools` protocol.
#[derive(Debug, Serialize)]
pub(crate) struct ToolEntry {
    /// `async def` when true, a `getattr(tools, …)` comment otherwise.
    bare: bool,
    /// The member's lines without the class body's indent: the signature (keyword parameters,
    /// one per line when some have a doc) and the docstring; all comments for a subscript tool.
    lines: Vec<String>,
}

/// The template context of the Python file: sorted sequences only.
#[derive(Debug, Serialize)]
pub(crate) struct Context {
    /// Names imported from `typing`, in a fixed order.
    imports: Vec<&'static str>,
    /// Names imported from `typing_extensions` for the checker only (`Required`, `NotRequired`
    /// of Python 3.11, PEP 655), in a fixed order.
    extensions: Vec<&'static str>,
    /// Generated classes and aliases, in emission order.
    blocks: Vec<String>,
    tools: Vec<ToolEntry>,
    /// True when at least one tool is a bare method (otherwise `Tools` needs `pass`).
    any_bare: bool,
}

/// Builds the template context from the model, allocating class names from `names` (the
/// allocator the model's named types came from). Tools that answer alike share one output class;
/// a class shared so is named after its keys (`ContentOutput`), not after one of the tools, so
/// that no tool's output reads as another's: the first rendering finds the shared classes, a
/// second one names them.
pub(crate) fn context(model: &Model, names: NameAllocator) -> Context {
    let first = Renderer::new(model, names.clone()).tools(&vec![None; model.tools.len()]);
    let mut users: BTreeMap<&str, usize> = BTreeMap::new();
    for class in first.output_classes.iter().flatten() {
        *users.entry(class).or_default() += 1;
    }
    let hints: Vec<Option<String>> = model
        .tools
        .iter()
        .zip(&first.output_classes)
        .map(|(tool, class)| {
            let class = class.as_deref()?;
            (users[class] > 1).then(|| first.render.shared_output_hint(tool.output))
        })
        .collect();
    let Rendered { render, tools, .. } = if hints.iter().all(Option::is_none) {
        first
    } else {
        Renderer::new(model, names).tools(&hints)
    };
    let mut imports = vec!["Protocol"];
    for name in ["Any", "Literal", "TypeAlias", "TypedDict"] {
        if render.uses.contains(name) {
            imports.push(name);
        }
    }
    imports.sort_unstable();
    let extensions: Vec<&'static str> = ["NotRequired", "Required"]
        .into_iter()
        .filter(|name| render.uses.contains(name))
        .collect();
    if !extensions.is_empty() {
        imports.push("TYPE_CHECKING");
        imports.sort_unstable();
    }
    Context {
        imports,
        extensions,
        blocks: render.blocks,
        any_bare: tools.iter().any(|t| t.bare),
        tools,
    }
}

/// How a tool's arguments appear in its signature.
enum Params {
    /// Keyword-only parameters `(self, *, name: T, opt: U = ...)`, each with its doc.
    Keywords(Vec<Param>),
    /// One positional dict `(self, args: T)`: the arguments are no object with plain keys.
    Dict(String),
}

/// One keyword parameter.
struct Param {
    /// `name: T` or `name: T = ...`.
    text: String,
    doc: Option<String>,
}

/// Longest signature written on one line (no parameter has a doc).
const MAX_INLINE_SIGNATURE: usize = 120;

/// The lines of one `Tools` member. A bare tool is an `async def` with its description as the
/// docstring; any other name is the same shape in comments, called as
/// `getattr(tools, "name")(...)` (the form every runtime accepts: embedded Monty has no
/// `__getitem__` on objects, and a `Protocol` is not indexable for mypy), its description after
/// the return type.
fn member_lines(
    name: &str,
    bare: bool,
    params: &Params,
    output: &str,
    doc: Option<&str>,
) -> Vec<String> {
    let (head, first) = if bare {
        (format!("async def {name}("), "self, ")
    } else {
        (format!("# getattr(tools, {})(", quoted(name)), "")
    };
    let tail = if bare {
        format!(") -> {output}:")
    } else {
        format!(") -> {output}")
    };
    // A comment is not type-checked: the keyword-only marker would only cost tokens there.
    let star = if bare { "*, " } else { "" };
    let mut lines = Vec::new();
    match params {
        Params::Dict(ty) => lines.push(format!("{head}{first}args: {ty}{tail}")),
        Params::Keywords(params) if params.is_empty() => {
            lines.push(format!("{head}{}{tail}", first.trim_end_matches(", ")));
        }
        Params::Keywords(params) => {
            let inline = format!(
                "{head}{first}{star}{}{tail}",
                params
                    .iter()
                    .map(|p| p.text.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            );
            if params.iter().all(|p| p.doc.is_none()) && inline.len() <= MAX_INLINE_SIGNATURE {
                lines.push(inline);
            } else {
                lines.push(format!("{head}{first}{}", star.trim_end()));
                for param in params {
                    let doc = param
                        .doc
                        .as_ref()
                        .map_or_else(String::new, |doc| format!(" {}", comment(doc)));
                    let text = format!("{},{doc}", param.text);
                    lines.push(if bare { text } else { comment(&text) });
                }
                lines.push(if bare { tail } else { format!("# {tail}") });
            }
        }
    }
    // The description ends the signature's last line (as the docstring of a method): a line
    // break and an indent cheaper than a line of its own.
    if let Some(last) = lines.last_mut() {
        match doc {
            Some(doc) if bare => last.push_str(&format!(" \"\"\"{}\"\"\"", docstring_text(doc))),
            Some(doc) => last.push_str(&format!(": {doc}")),
            None if bare => last.push_str(" ..."),
            None => {}
        }
    }
    lines
}

/// Docstring body text: backslashes doubled and quotes escaped, so neither an escape sequence
/// nor a `"""` inside the description can end or alter the string.
fn docstring_text(line: &str) -> String {
    line.replace('\\', "\\\\").replace('"', "\\\"")
}
