//! Anthropic strict tool use: the OpenAI strict form narrowed to what Anthropic's grammar admits.
//!
//! Anthropic's strict mode (structured outputs, "JSON schema limitations") requires
//! `additionalProperties: false` on every object, has no recursive schemas, no numeric bounds, no
//! string lengths or patterns, arrays' `minItems` only 0 or 1, and `enum`s of primitives only.
//! Starting from [`Dialect::OpenAiStrict`](super::Dialect::OpenAiStrict) gives closed objects and
//! nullable optionals (which Anthropic accepts); the keywords it does not enforce are moved into
//! `description` as text, as its SDK's `transform_schema` does.

use serde_json::{Map, Value};

use super::Dialect;
use super::keywords::{append_notes, children_mut};

/// String `format`s Anthropic's strict mode accepts.
const FORMATS: [&str; 10] = [
    "date-time",
    "time",
    "date",
    "duration",
    "email",
    "hostname",
    "uri",
    "ipv4",
    "ipv6",
    "uuid",
];

/// Keywords Anthropic's strict mode does not enforce: moved into the description.
const UNSUPPORTED: [&str; 13] = [
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "multipleOf",
    "minLength",
    "maxLength",
    "pattern",
    "maxItems",
    "uniqueItems",
    "minProperties",
    "maxProperties",
    "contentEncoding",
];

/// The schema in Anthropic's strict form, or why it cannot be strict (the caller sends the tool
/// non-strict and reports the reason).
pub fn anthropic_strict(schema: &Value) -> Result<Value, String> {
    let mut out = Dialect::OpenAiStrict
        .transform(schema)
        .map_err(|error| error.to_string())?;
    let mut stack = vec![&mut out];
    while let Some(node) = stack.pop() {
        let Value::Object(map) = node else { continue };
        if map.contains_key("$ref") {
            return Err("a recursive schema cannot be strict on Anthropic".to_owned());
        }
        if let Some(values) = map.get("enum").and_then(Value::as_array)
            && values.iter().any(|v| v.is_object() || v.is_array())
        {
            return Err(
                "an `enum` with object or array values cannot be strict on Anthropic".to_owned(),
            );
        }
        let mut notes = Map::new();
        for keyword in UNSUPPORTED {
            if let Some(value) = map.remove(keyword) {
                notes.insert(keyword.to_owned(), value);
            }
        }
        if map
            .get("minItems")
            .and_then(Value::as_u64)
            .is_some_and(|min| min > 1)
            && let Some(value) = map.remove("minItems")
        {
            notes.insert("minItems".to_owned(), value);
        }
        if map
            .get("format")
            .and_then(Value::as_str)
            .is_some_and(|format| !FORMATS.contains(&format))
            && let Some(value) = map.remove("format")
        {
            notes.insert("format".to_owned(), value);
        }
        append_notes(map, notes);
        stack.extend(children_mut(map).into_iter().map(|(_, _, child)| child));
    }
    Ok(out)
}
