//! Every keyword `#[tool]`, `#[toolbox]` and the parameter attributes accept, written once.

use std::fmt::{self, Display};

use syn::{Ident, Path};

/// An accepted keyword.
#[derive(Debug, Copy, Clone, PartialEq, Eq)]
pub(crate) struct Symbol(&'static str);

// Attributes.
pub(crate) const TOOL: Symbol = Symbol("tool");
pub(crate) const ARG: Symbol = Symbol("arg");
pub(crate) const ARGS: Symbol = Symbol("args");
pub(crate) const DOC: Symbol = Symbol("doc");

// `#[tool(...)]` keys.
pub(crate) const NAME: Symbol = Symbol("name");
pub(crate) const DESCRIPTION: Symbol = Symbol("description");
pub(crate) const TIMEOUT_MS: Symbol = Symbol("timeout_ms");
pub(crate) const CONCURRENCY_SAFE: Symbol = Symbol("concurrency_safe");
pub(crate) const RENDER: Symbol = Symbol("render");
pub(crate) const PRESENT_CALL: Symbol = Symbol("present_call");
pub(crate) const PRESENT_RESULT: Symbol = Symbol("present_result");
pub(crate) const PRESENTATION_META: Symbol = Symbol("presentation_meta");
pub(crate) const FINALIZE_CONTENT: Symbol = Symbol("finalize_content");
pub(crate) const ALLOW_UNKNOWN: Symbol = Symbol("allow_unknown");
/// Retired: unknown properties are refused by default. Recognised only to say so.
pub(crate) const DENY_UNKNOWN: Symbol = Symbol("deny_unknown");
pub(crate) const CRATE: Symbol = Symbol("crate");
pub(crate) const TITLE: Symbol = Symbol("title");
pub(crate) const READ_ONLY: Symbol = Symbol("read_only");
pub(crate) const DESTRUCTIVE: Symbol = Symbol("destructive");
pub(crate) const IDEMPOTENT: Symbol = Symbol("idempotent");
pub(crate) const OPEN_WORLD: Symbol = Symbol("open_world");
pub(crate) const TASK: Symbol = Symbol("task");

/// The `#[tool(...)]` keys, in the order error messages list them.
pub(crate) const TOOL_KEYS: &[Symbol] = &[
    NAME,
    DESCRIPTION,
    TIMEOUT_MS,
    CONCURRENCY_SAFE,
    RENDER,
    PRESENT_CALL,
    PRESENT_RESULT,
    PRESENTATION_META,
    FINALIZE_CONTENT,
    ALLOW_UNKNOWN,
    TITLE,
    READ_ONLY,
    DESTRUCTIVE,
    IDEMPOTENT,
    OPEN_WORLD,
    TASK,
    ARGS,
    CRATE,
];

// `#[arg(...)]` keys (`description` is shared with `#[tool]`).
pub(crate) const RENAME: Symbol = Symbol("rename");
pub(crate) const DEFAULT: Symbol = Symbol("default");
pub(crate) const RANGE: Symbol = Symbol("range");
pub(crate) const LENGTH: Symbol = Symbol("length");
pub(crate) const PATTERN: Symbol = Symbol("pattern");
pub(crate) const MIN: Symbol = Symbol("min");
pub(crate) const MAX: Symbol = Symbol("max");

/// The `#[arg(...)]` keys, in the order error messages list them.
pub(crate) const ARG_KEYS: &[Symbol] = &[DESCRIPTION, RENAME, DEFAULT, RANGE, LENGTH, PATTERN];

// Type names recognised syntactically (and then verified by a trait bound).
pub(crate) const TOOL_EXEC: Symbol = Symbol("ToolExec");
pub(crate) const OPTION: Symbol = Symbol("Option");
pub(crate) const RESULT: Symbol = Symbol("Result");

/// The key `word` is most likely a misspelling of: the one within an edit distance of 2 (and
/// less than half the word), if any.
pub(crate) fn did_you_mean(word: &str, keys: &[Symbol]) -> Option<Symbol> {
    keys.iter()
        .copied()
        .map(|key| (edit_distance(word, key.0), key))
        .filter(|(distance, _)| *distance <= 2 && *distance * 2 < word.len().max(1))
        .min_by_key(|(distance, _)| *distance)
        .map(|(_, key)| key)
}

/// Levenshtein distance in chars.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut previous = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let substitute = previous + usize::from(ca != *cb);
            previous = row[j + 1];
            row[j + 1] = substitute.min(row[j] + 1).min(previous + 1);
        }
    }
    row[b.len()]
}

/// The "unknown argument" message: a "did you mean" when a key is close, else every key.
pub(crate) fn unknown_key(what: &str, word: &str, keys: &[Symbol]) -> String {
    match did_you_mean(word, keys) {
        Some(key) => format!("unknown `{what}` argument `{word}`; did you mean `{key}`?"),
        None => format!(
            "unknown `{what}` argument `{word}`; expected one of {}",
            one_of(keys)
        ),
    }
}

/// Renders a key list as `` `a`, `b` or `c` `` for "expected one of" messages.
pub(crate) fn one_of(keys: &[Symbol]) -> String {
    let quoted: Vec<String> = keys.iter().map(|key| format!("`{key}`")).collect();
    match quoted.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} or {last}", rest.join(", ")),
        _ => quoted.concat(),
    }
}

impl PartialEq<Symbol> for Ident {
    fn eq(&self, word: &Symbol) -> bool {
        self == word.0
    }
}

impl PartialEq<Symbol> for &Ident {
    fn eq(&self, word: &Symbol) -> bool {
        *self == word.0
    }
}

impl PartialEq<Symbol> for Path {
    fn eq(&self, word: &Symbol) -> bool {
        self.is_ident(word.0)
    }
}

impl PartialEq<Symbol> for &Path {
    fn eq(&self, word: &Symbol) -> bool {
        self.is_ident(word.0)
    }
}

impl Display for Symbol {
    fn fmt(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
        formatter.write_str(self.0)
    }
}
