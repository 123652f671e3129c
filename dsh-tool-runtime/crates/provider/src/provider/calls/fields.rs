//! Reading a call out of a provider's JSON: fields found without hashing a few short keys, and
//! a call's id, name and arguments made what the request takes back, with its record.

use serde_json::{Map, Value, json};

use super::{CallRecord, Unusual};
use crate::error::ErrorCode;
use crate::result::ToolFailure;

/// Most keys an object may hold to be searched by comparing them: the objects a call is read
/// from hold a few, and comparing a few short keys is cheaper than hashing the one sought (the
/// map's hasher is SipHash).
const SCANNED: usize = 8;

/// `map[key]`.
#[inline]
pub(super) fn map_field<'a>(map: &'a Map<String, Value>, key: &str) -> Option<&'a Value> {
    if map.len() > SCANNED {
        return map.get(key);
    }
    map.iter()
        .find_map(|(name, value)| (name == key).then_some(value))
}

/// `map[key]`, mutable.
pub(super) fn map_field_mut<'a>(
    map: &'a mut Map<String, Value>,
    key: &str,
) -> Option<&'a mut Value> {
    if map.len() > SCANNED {
        return map.get_mut(key);
    }
    map.iter_mut()
        .find_map(|(name, value)| (name == key).then_some(value))
}

/// `value[key]` when `value` is an object.
#[inline]
pub(super) fn field<'a>(value: &'a Value, key: &str) -> Option<&'a Value> {
    map_field(value.as_object()?, key)
}

/// `value[key]`, mutable, when `value` is an object.
pub(super) fn field_mut<'a>(value: &'a mut Value, key: &str) -> Option<&'a mut Value> {
    map_field_mut(value.as_object_mut()?, key)
}

/// `value` as an object: anything else is replaced by an empty one (a malformed call entry is
/// sent back in the form the request needs, its failure reported by the call).
pub(super) fn object(value: &mut Value) -> &mut Map<String, Value> {
    if !value.is_object() {
        *value = Value::Object(Map::new());
    }
    match value {
        Value::Object(map) => map,
        _ => unreachable!("replaced by an object above"),
    }
}

/// `map[key]` as an object, made one when it is missing or of another type.
pub(super) fn object_at<'a>(
    map: &'a mut Map<String, Value>,
    key: &str,
) -> &'a mut Map<String, Value> {
    if !map_field(map, key).is_some_and(Value::is_object) {
        map.insert(key.to_owned(), Value::Object(Map::new()));
    }
    match map_field_mut(map, key) {
        Some(Value::Object(inner)) => inner,
        _ => unreachable!("made an object above"),
    }
}

/// The id made up for the call at `position` when `map[key]` holds none (it is then written
/// there: the turn sent back must carry the id its result answers), and the failure when a
/// required id is missing.
pub(super) fn call_id(
    map: &mut Map<String, Value>,
    key: &str,
    position: usize,
    required: bool,
) -> (Option<String>, Option<ToolFailure>) {
    let given = map_field(map, key)
        .and_then(Value::as_str)
        .is_some_and(|id| !id.is_empty());
    if given {
        return (None, None);
    }
    let failure = required.then(|| {
        ToolFailure::plain("the tool call has no id, so it was not run; call the tool again")
    });
    let id = format!("dsh_call_{position}");
    map.insert(key.to_owned(), Value::String(id.clone()));
    (Some(id), failure)
}

/// `true` when `map[key]` names a tool; an empty name is written there when it is missing.
pub(super) fn call_name(map: &mut Map<String, Value>, key: &str) -> bool {
    match map_field(map, key) {
        Some(Value::String(name)) => !name.is_empty(),
        _ => {
            map.insert(key.to_owned(), Value::String(String::new()));
            false
        }
    }
}

/// Parses a call's argument JSON text (empty means `{}`).
pub(super) fn arguments_text(text: &str) -> (Value, Option<ToolFailure>) {
    // Arguments are an object: only text that is not needs the emptiness check.
    if !text.starts_with('{') && text.trim().is_empty() {
        return (json!({}), None);
    }
    match serde_json::from_str::<Value>(text) {
        Ok(value) => (value, None),
        Err(error) => {
            let what = if error.is_eof() {
                "truncated"
            } else {
                "malformed"
            };
            let failure = ToolFailure::coded(
                ErrorCode::InvalidArgs,
                format!(
                    "invalid arguments: the argument JSON is {what} ({error}); send the arguments as one JSON object"
                ),
            );
            (json!({}), Some(failure))
        }
    }
}

/// A call's arguments sent as a JSON string (OpenAI): parsed, and the field left a string
/// (`""` when missing, the JSON text when a server sent a value).
pub(super) fn string_arguments(
    map: &mut Map<String, Value>,
    key: &str,
) -> (Value, Option<ToolFailure>) {
    match map_field_mut(map, key) {
        Some(Value::String(text)) => arguments_text(text),
        Some(Value::Null) | None => {
            map.insert(key.to_owned(), Value::String(String::new()));
            (json!({}), None)
        }
        Some(other) => {
            let value = other.take();
            *other = Value::String(value.to_string());
            (value, None)
        }
    }
}

/// A call's arguments sent as a JSON value (Anthropic, Gemini): a copy for the pipeline (a
/// string is parsed), and the field left an object, whatever arrived (`{}` when missing and
/// `required`).
pub(super) fn value_arguments(
    map: &mut Map<String, Value>,
    key: &str,
    required: bool,
) -> (Value, Option<ToolFailure>) {
    let parsed = match map_field(map, key) {
        None | Some(Value::Null) => (json!({}), None),
        Some(Value::String(text)) => arguments_text(text),
        Some(other) => (other.clone(), None),
    };
    let is_object = map_field(map, key).is_some_and(Value::is_object);
    if !is_object && (required || map.contains_key(key)) {
        let sent = if parsed.0.is_object() {
            parsed.0.clone()
        } else {
            json!({})
        };
        map.insert(key.to_owned(), sent);
    }
    parsed
}

/// The record of the call at `entry` of the turn's message `message`; a missing name is the
/// call's failure.
pub(super) fn record(
    (message, entry): (usize, usize),
    id: (Option<String>, Option<ToolFailure>),
    named: bool,
    arguments: (Value, Option<ToolFailure>),
) -> CallRecord {
    let (generated_id, id_failure) = id;
    let (arguments, args_failure) = arguments;
    let name_failure = (!named).then(|| {
        ToolFailure::coded(
            ErrorCode::UnknownTool,
            "unknown tool \"\": the tool call names no tool",
        )
    });
    let error = id_failure.or(name_failure).or(args_failure);
    let runnable = error.is_none();
    let unusual = (generated_id.is_some() || error.is_some()).then(|| {
        Box::new(Unusual {
            generated_id,
            real_name: None,
            error,
        })
    });
    CallRecord {
        message,
        entry,
        unusual,
        arguments: runnable.then_some(arguments),
    }
}
