//! The descriptions the model keeps: a schema's doc text and notes, said once, without what the
//! type already says.

use serde_json::{Map, Value};

use super::{MAX_DEFAULT_NOTE, Node, NodeId};
use crate::sdk::text::comment_line;

/// `doc` (notes only, or none) preceded by the docs of `members`, which are taken off them so the
/// text is said once.
pub(super) fn lift_member_docs(
    doc: Option<String>,
    members: &[NodeId],
    nodes: &mut [Node],
) -> Option<String> {
    let mut lines: Vec<String> = Vec::new();
    for &member in members {
        if let Some(line) = nodes[member].doc.take()
            && !lines.contains(&line)
        {
            lines.push(line);
        }
    }
    if lines.is_empty() {
        return doc;
    }
    lines.extend(doc);
    Some(lines.join(" "))
}

/// The doc line of a schema: its description, then its format, range, length, pattern and
/// default as `keyword value` notes (JSON Schema 2020-12 validation and format vocabularies).
pub(super) fn doc_of(map: &Map<String, Value>) -> Option<String> {
    const NOTED: &[&str] = &[
        "format",
        "minimum",
        "exclusiveMinimum",
        "maximum",
        "exclusiveMaximum",
        "multipleOf",
        "minLength",
        "maxLength",
        "pattern",
        "minItems",
        "maxItems",
        "uniqueItems",
        "minProperties",
        "maxProperties",
        "default",
        "deprecated",
    ];
    let mut text = map
        .get("description")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    let mut notes = Vec::new();
    for key in NOTED {
        let Some(value) = map.get(*key) else { continue };
        if restates_type(map, key, value) {
            continue;
        }
        let rendered = match value {
            Value::String(s) => s.clone(),
            Value::Number(_) | Value::Bool(_) | Value::Null => value.to_string(),
            // Defaults may be arrays or objects: shown as JSON when small.
            _ => shallow_json(value),
        };
        // `keyword value`: the colon would cost a token and say nothing.
        notes.push(format!("{key} {rendered}"));
    }
    if !notes.is_empty() {
        if !text.trim().is_empty() {
            text.push(' ');
        }
        text.push('(');
        text.push_str(&notes.join("; "));
        text.push(')');
    }
    comment_line(&text)
}

/// `format` values that only name a machine number type (schemars writes them for every Rust
/// integer and float): the rendered `number` / `int` / `float` says all a program needs.
const NUMERIC_FORMATS: &[&str] = &[
    "int", "int8", "int16", "int32", "int64", "int128", "uint", "uint8", "uint16", "uint32",
    "uint64", "uint128", "float", "double", "integer", "number",
];

/// True when the note `key: value` of `map` adds nothing to its rendered type: a numeric
/// `format`, and the `minimum: 0` that comes with every unsigned (`uint*`) format.
fn restates_type(map: &Map<String, Value>, key: &str, value: &Value) -> bool {
    let format = map.get("format").and_then(Value::as_str);
    match key {
        "format" => format.is_some_and(|f| NUMERIC_FORMATS.contains(&f)),
        "minimum" => format.is_some_and(|f| f.starts_with("uint")) && value.as_f64() == Some(0.0),
        _ => false,
    }
}

/// JSON text of a small array or object value, or `…` when it nests or runs long. Never recurses
/// into nested containers, so a hostile `default` cannot cost stack or time.
fn shallow_json(value: &Value) -> String {
    let scalars = |v: &Value| !v.is_array() && !v.is_object();
    let text = match value {
        Value::Array(items) if items.iter().all(scalars) => value.to_string(),
        Value::Object(map) if map.values().all(scalars) => value.to_string(),
        _ => return "…".to_owned(),
    };
    if text.len() > MAX_DEFAULT_NOTE {
        "…".to_owned()
    } else {
        text
    }
}
