//! The typed error a dialect transform returns for one tool's schema.

use super::Dialect;

/// Why one schema could not be written in a dialect, and where.
///
/// `path` is a JSON Pointer (RFC 6901) into the schema as the transform sees it after local
/// `$ref`s were inlined: a node reached through a `$ref` is named by the path of the `$ref` site
/// (`/properties/tags/items`), a node of a kept recursive definition by `/$defs/<name>/…`. The
/// root is the empty pointer `""`.
///
/// An error concerns one tool only: callers send that tool in another dialect (for example
/// non-strict) and keep the others.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{dialect} dialect: schema at {}: {kind}", display_path(path))]
pub struct DialectError {
    /// The dialect that was asked for.
    pub dialect: Dialect,
    /// JSON Pointer of the offending node (`""` = root).
    pub path: String,
    /// What is wrong there.
    pub kind: DialectErrorKind,
}

fn display_path(path: &str) -> String {
    if path.is_empty() {
        "the root".to_owned()
    } else {
        format!("`{path}`")
    }
}

/// The reasons a schema cannot be expressed in a dialect.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DialectErrorKind {
    /// The schema nests deeper than the transform's bound (counted in JSON levels, after
    /// inlining). The bound keeps every walk off the stack limit.
    #[error("nesting is deeper than {limit} JSON levels")]
    TooDeep {
        /// The bound, in JSON levels.
        limit: usize,
    },
    /// Inlining `$ref`s would make the schema larger than the transform's bound (a definition
    /// used twice by a definition used twice … grows exponentially).
    #[error("inlining `$ref`s would produce more than {limit} schema nodes")]
    TooLarge {
        /// The bound, in schema nodes.
        limit: usize,
    },
    /// More distinct `$ref` targets than the transform analyses.
    #[error("more than {limit} distinct `$ref` targets")]
    TooManyRefTargets {
        /// The bound, in distinct targets.
        limit: usize,
    },
    /// A parameters schema must describe a JSON object (every provider, and MCP's `inputSchema`).
    #[error("a parameters schema must be an object schema, found {found}")]
    RootNotObject {
        /// What the root was instead (`type "string"`, `anyOf`, `false`, …).
        found: String,
    },
    /// A value in a schema position is neither an object nor a boolean (JSON Schema 2020-12 §4.3).
    #[error("expected a schema (object or boolean), found {found}")]
    NotASchema {
        /// The JSON type found.
        found: &'static str,
    },
    /// A keyword whose value breaks JSON Schema 2020-12's own rules (`"type": 5`,
    /// `"required": "a"`, `"properties": [..]`, an empty `enum`, …).
    #[error("`{keyword}` {reason}")]
    InvalidKeyword {
        /// The keyword.
        keyword: String,
        /// What is wrong with its value.
        reason: &'static str,
    },
    /// A `$ref` that does not point into the same document, or points at nothing.
    #[error("`$ref` {reference:?} does not resolve to a schema in this document")]
    UnresolvedRef {
        /// The reference as written.
        reference: String,
    },
    /// A recursive `$ref` in a dialect that has no references (Gemini `parameters`).
    #[error("`$ref` {reference:?} is recursive, which this dialect cannot express")]
    RecursiveRef {
        /// The reference as written.
        reference: String,
    },
    /// The schema `false` accepts no value; no provider dialect can state that.
    #[error("the schema `false` accepts no value")]
    Unsatisfiable,
    /// OpenAI strict mode: an object whose keys are not all named (`additionalProperties` open
    /// or a schema, `patternProperties`, or no `properties`) cannot be closed without changing
    /// what it accepts.
    #[error("an object with arbitrary keys (a map) cannot be made strict")]
    FreeFormObject,
    /// OpenAI strict mode: an array without an `items` schema.
    #[error("an array without an `items` schema cannot be made strict")]
    UntypedArray,
    /// OpenAI strict mode: tuple arrays (`prefixItems`, draft-07 list `items`).
    #[error("a tuple array (`prefixItems`) cannot be made strict")]
    TupleArray,
    /// OpenAI strict mode: a node without `type`, `anyOf`, `$ref`, `enum` or `const` accepts any
    /// JSON value ("schema must have a 'type' key").
    #[error("a schema without a `type` accepts any value and cannot be made strict")]
    UntypedValue,
    /// OpenAI strict mode: a union at the root of the parameters schema.
    #[error("the root of a strict schema cannot be a union (`anyOf`)")]
    RootUnion,
    /// OpenAI strict mode: a `$ref` next to `anyOf` cannot be wrapped into the `anyOf`.
    #[error("a `$ref` beside `anyOf` cannot be made strict")]
    RefBesideAnyOf,
    /// A documented provider size limit (OpenAI: 5,000 properties, 10 object nesting levels,
    /// 120,000 characters of names and values, 1,000 enum values, 15,000 characters for one
    /// string enum of more than 250 values).
    #[error("{what}: {found} exceeds the provider limit of {limit}")]
    LimitExceeded {
        /// The quantity limited.
        what: &'static str,
        /// The documented limit.
        limit: usize,
        /// The value reached.
        found: usize,
    },
}

/// A JSON Pointer under construction: segments pushed on descent and popped on return.
#[derive(Debug, Default, Clone)]
pub(crate) struct Path(Vec<String>);

impl Path {
    pub(crate) fn push(&mut self, segment: &str) {
        self.0.push(segment.to_owned());
    }

    pub(crate) fn pop(&mut self) {
        self.0.pop();
    }

    /// The RFC 6901 text: `~` as `~0`, `/` as `~1`.
    pub(crate) fn pointer(&self) -> String {
        let mut out = String::new();
        for segment in &self.0 {
            out.push('/');
            out.push_str(&segment.replace('~', "~0").replace('/', "~1"));
        }
        out
    }

    pub(crate) fn error(&self, dialect: Dialect, kind: DialectErrorKind) -> DialectError {
        DialectError {
            dialect,
            path: self.pointer(),
            kind,
        }
    }
}
