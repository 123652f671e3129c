//! Schema dialects: one parameters schema, several provider wire forms.
//!
//! [`Dialect::transform`] takes any JSON Schema object — schemars output, an MCP server's
//! `inputSchema` (draft-07 or 2020-12), a hand-written schema — and returns the form one provider
//! accepts, or a [`DialectError`] naming the JSON Pointer of the part that cannot be expressed.
//! Transforms are pure and deterministic (the same input gives the same bytes: key order follows
//! the input), never recurse deeper than [`MAX_DEPTH`] JSON levels, and fail per schema, so one
//! bad tool never costs the others ([`transform_tools`]).
//!
//! Every dialect but [`Dialect::Mcp`], which serves the schema as written:
//! - drops `$schema` (clients fetch the URL or pick the wrong draft) and `$id`;
//! - makes the root an object schema with `properties` (an empty-parameter tool carries
//!   `"properties": {}`);
//! - inlines non-recursive local `$ref`s, keeping keywords written beside the `$ref`; recursive
//!   ones stay as `$ref`s into the output's own `#/$defs` (or fail, for Gemini), so no `$ref`
//!   dangles after inlining;
//! - upgrades draft-07 spellings (`definitions`, list `items`, `additionalItems`,
//!   `dependencies`) to JSON Schema 2020-12.

mod anthropic_strict;
mod bfcl;
mod error;
mod gemini;
mod json_schema;
mod keywords;
mod normalize;
mod openai;
mod refs;

use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

pub use crate::json::MAX_DIALECT_SCHEMA_DEPTH as MAX_DEPTH;
use crate::json::MAX_DIALECT_SCHEMA_DEPTH;
#[doc(hidden)]
pub use anthropic_strict::anthropic_strict;
pub use bfcl::bfcl_to_json_schema;
pub use error::{DialectError, DialectErrorKind};
pub use normalize::normalize_strict_arguments;
pub use refs::{MAX_NODES, MAX_REF_TARGETS};

use error::Path;
use keywords::{
    check_depth, check_keywords, const_unions_to_enums, drop_non_standard_formats, insert_first,
    json_type, types_of,
};
use refs::Recursion;

/// A provider's wire form of a parameters schema.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum Dialect {
    /// JSON Schema 2020-12 that the widest set of clients accepts: no `$schema`, non-recursive
    /// `$ref`s inlined, recursive ones under `#/$defs`, every object node with `properties`,
    /// no `type` lists (an optional `Option<T>` property is absent from `required` with a scalar
    /// `type`; other type lists become `anyOf`), OpenAPI `nullable` turned into JSON Schema.
    #[default]
    Portable,
    /// OpenAI function calling with `strict: true` (Structured Outputs supported-schema rules):
    /// every object closed (`additionalProperties: false`) at every depth, every property in
    /// `required` with optional ones made nullable unions, `oneOf` → `anyOf`, single `allOf`
    /// unwrapped, a `$ref` with siblings wrapped in `anyOf`, unsupported keywords and `format`s
    /// moved into `description` as text. Free-form maps, untyped values and arrays, tuples and
    /// the documented size limits give a [`DialectError`]: send that tool non-strict.
    #[serde(rename = "openai-strict")]
    OpenAiStrict,
    /// Gemini `functionDeclarations[].parameters` (OpenAPI 3.0 Schema subset): every `$ref`
    /// inlined (recursion is an error), no `additionalProperties` or `$schema`, `const` → a
    /// one-value `enum`, `oneOf` → `anyOf` with `anyOf` alone on its node, `type` lists and
    /// null branches → `nullable: true`, other keywords moved into `description`.
    Gemini,
    /// Anthropic `tools[].input_schema` (non-strict): JSON Schema 2020-12 with an object root
    /// and no OpenAPI keywords (`nullable` becomes a `type` list).
    Anthropic,
    /// MCP `Tool.inputSchema`: the schema as written, every keyword kept (`$schema`, `$id`,
    /// `$defs`, `$ref`, `$anchor`, `allOf`/`anyOf`, `if`/`then`/`else`, draft-07 spellings):
    /// MCP lets `inputSchema` use any JSON Schema 2020-12 keyword and declare its dialect with
    /// `$schema` (SEP-1613, SEP-2106), so nothing is inlined or dropped. Only the root is made
    /// an object schema: `type: "object"` and `properties: {}` added where absent (`true` and
    /// `{}` become `{"type": "object", "properties": {}}`), unless a `$ref` names the root
    /// (`#`), whose meaning that would change. A schema fails exactly where
    /// [`Dialect::Anthropic`] fails (too deep, a dangling or external `$ref`, a non-object root).
    Mcp,
}

impl Dialect {
    /// Every dialect, in declaration order.
    pub const ALL: [Dialect; 5] = [
        Dialect::Portable,
        Dialect::OpenAiStrict,
        Dialect::Gemini,
        Dialect::Anthropic,
        Dialect::Mcp,
    ];

    /// The dialect's stable name, as serde writes it: `portable`, `openai-strict`, `gemini`,
    /// `anthropic`, `mcp`.
    pub fn as_str(self) -> &'static str {
        match self {
            Dialect::Portable => "portable",
            Dialect::OpenAiStrict => "openai-strict",
            Dialect::Gemini => "gemini",
            Dialect::Anthropic => "anthropic",
            Dialect::Mcp => "mcp",
        }
    }

    /// Writes a parameters schema in this dialect.
    ///
    /// `schema` is any JSON Schema (draft-07 or 2020-12) whose root describes an object; `true`
    /// and `{}` mean "no parameters". The input is not modified.
    ///
    /// # Errors
    /// A [`DialectError`] with the JSON Pointer of the offending node when the schema is deeper
    /// than [`MAX_DEPTH`], would exceed [`MAX_NODES`] after inlining, has a dangling or external
    /// `$ref`, a non-object root, or (per dialect) something the provider cannot accept — see
    /// [`DialectErrorKind`].
    pub fn transform(self, schema: &Value) -> Result<Value, DialectError> {
        check_depth(schema, MAX_DIALECT_SCHEMA_DEPTH)
            .map_err(|(path, kind)| path.error(self, kind))?;
        check_keywords(schema).map_err(|(path, kind)| path.error(self, kind))?;
        let root_error =
            |found: String| Path::default().error(self, DialectErrorKind::RootNotObject { found });
        let empty = Value::Object(Map::new());
        let schema = match schema {
            Value::Bool(true) => &empty,
            Value::Object(_) => schema,
            Value::Bool(false) => return Err(root_error("`false`".to_owned())),
            other => return Err(root_error(json_type(other).to_owned())),
        };
        let recursion = match self {
            Dialect::Gemini => Recursion::Reject,
            _ => Recursion::Anchor,
        };
        let mut out = refs::expand(schema, self, recursion)?;
        let Value::Object(root) = &mut out else {
            return Err(root_error("a boolean schema".to_owned()));
        };
        object_root(root).map_err(root_error)?;
        if self == Dialect::Mcp {
            // Checked like the other dialects; served as written.
            let mut written = schema.clone();
            if let Value::Object(root) = &mut written
                && !refers_to_root(schema)
            {
                object_root_type(root);
            }
            return Ok(written);
        }
        drop_non_standard_formats(&mut out);
        const_unions_to_enums(&mut out);
        match self {
            Dialect::Portable => json_schema::portable(&mut out),
            Dialect::Anthropic | Dialect::Mcp => json_schema::standard(&mut out),
            Dialect::OpenAiStrict => openai::strict(&mut out)?,
            Dialect::Gemini => gemini::gemini(&mut out)?,
        }
        Ok(out)
    }
}

impl fmt::Display for Dialect {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.as_str())
    }
}

/// Makes the root `type: "object"` with `properties` (an object-or-null root becomes an
/// object: tool arguments are always an object). `Err` describes a root of another type.
fn object_root(root: &mut Map<String, Value>) -> Result<(), String> {
    let object = Value::String("object".to_owned());
    match types_of(root) {
        Ok(None) => insert_first(root, "type", object),
        Ok(Some(types)) if types.iter().any(|ty| ty == "object") => {
            if types.len() > 1 {
                root.insert("type".to_owned(), object);
            }
        }
        Ok(Some(types)) => return Err(format!("type {}", types.join(" or "))),
        Err(kind) => return Err(kind.to_string()),
    }
    root.entry("properties")
        .or_insert_with(|| Value::Object(Map::new()));
    Ok(())
}

/// Adds `type: "object"` to a root that names no type (an object-or-null root, which
/// [`object_root`] accepted, keeps its list: it allows every object) and `properties: {}` to
/// one without `properties`; neither changes which arguments the schema accepts.
fn object_root_type(root: &mut Map<String, Value>) {
    if !root.contains_key("type") {
        insert_first(root, "type", Value::String("object".to_owned()));
    }
    root.entry("properties")
        .or_insert_with(|| Value::Object(Map::new()));
}

/// Whether a `$ref` anywhere in `schema` names its root (`#`): then a keyword added to the root
/// would also constrain every value that reference checks.
fn refers_to_root(schema: &Value) -> bool {
    let mut stack = vec![schema];
    while let Some(node) = stack.pop() {
        match node {
            Value::Object(map) => {
                if map.get("$ref").and_then(Value::as_str) == Some("#") {
                    return true;
                }
                stack.extend(map.values());
            }
            Value::Array(items) => stack.extend(items),
            _ => {}
        }
    }
    false
}

/// Transforms many tools' parameters schemas, one result per tool, in input order: a tool whose
/// schema cannot be written in `dialect` gets its own [`DialectError`] and the others are
/// unaffected.
///
/// `tools` are `(tool name, parameters schema)` pairs; each result is paired with its name.
pub fn transform_tools<'a>(
    dialect: Dialect,
    tools: &[(&'a str, &Value)],
) -> Vec<(&'a str, Result<Value, DialectError>)> {
    tools
        .iter()
        .map(|(name, schema)| (*name, dialect.transform(schema)))
        .collect()
}
