//! Each provider's response shape: its text, its calls, and the turn sent back.

use serde_json::{Value, json};

use super::ParsedResponse;
use super::fields::{
    arguments_text, call_id, call_name, field, field_mut, map_field, map_field_mut, object,
    object_at, record, string_arguments, value_arguments,
};
use crate::provider::Provider;
use crate::result::ToolFailure;

/// A Chat Completions message: its text and calls, and the message itself as the turn sent
/// back (`role`, `content` and `tool_calls` only; each call `id`, `type` and `function` with
/// `name` and `arguments`, as the request takes them).
pub(super) fn openai_chat(message: Value) -> ParsedResponse {
    let provider = Provider::OpenAiChat;
    let Value::Object(mut turn) = message else {
        return ParsedResponse {
            text: String::new(),
            assistant: Vec::new(),
            provider,
            records: Vec::new(),
        };
    };
    let text = match map_field(&turn, "content") {
        Some(Value::String(text)) => text.clone(),
        Some(Value::Array(parts)) => joined(parts.iter().filter_map(|part| part.get("text"))),
        _ => String::new(),
    };
    turn.retain(|key, _| matches!(key.as_str(), "role" | "content" | "tool_calls"));
    let mut records = Vec::new();
    if let Some(Value::Array(tool_calls)) = map_field_mut(&mut turn, "tool_calls") {
        records.reserve(tool_calls.len());
        for (position, raw) in tool_calls.iter_mut().enumerate() {
            if let Some(arguments) = well_formed_chat_call(raw) {
                records.push(record((0, position), (None, None), true, arguments));
                continue;
            }
            let map = object(raw);
            map.retain(|key, _| matches!(key.as_str(), "id" | "type" | "function"));
            let id = call_id(map, "id", position, true);
            if map_field(map, "type").and_then(Value::as_str) != Some("function") {
                map.insert("type".into(), Value::String("function".into()));
            }
            let function = object_at(map, "function");
            function.retain(|key, _| matches!(key.as_str(), "name" | "arguments"));
            let named = call_name(function, "name");
            let arguments = string_arguments(function, "arguments");
            records.push(record((0, position), id, named, arguments));
        }
    }
    if records.is_empty() {
        turn.shift_remove("tool_calls");
        if text.is_empty() {
            return ParsedResponse {
                text,
                assistant: Vec::new(),
                provider,
                records,
            };
        }
    }
    if map_field(&turn, "role").and_then(Value::as_str) != Some("assistant") {
        turn.insert("role".into(), Value::String("assistant".into()));
    }
    // Text parts are sent back as one string; no text beside calls is `null`.
    let content_kept = match map_field(&turn, "content") {
        Some(Value::String(_)) => !text.is_empty() || records.is_empty(),
        Some(Value::Null) => text.is_empty() && !records.is_empty(),
        _ => false,
    };
    if !content_kept {
        let content = if text.is_empty() && !records.is_empty() {
            Value::Null
        } else {
            Value::String(text.clone())
        };
        turn.insert("content".into(), content);
    }
    ParsedResponse {
        text,
        assistant: vec![Value::Object(turn)],
        provider,
        records,
    }
}

/// The arguments of a Chat Completions call that is already what the request takes back (its
/// keys `id`, `type` and `function` only, a non-empty id, type `function`, a function of a
/// non-empty `name` and an `arguments` string), read in one pass without changing it; `None`
/// for any other call, which the general path reads and repairs. Most calls are well formed.
fn well_formed_chat_call(call: &Value) -> Option<(Value, Option<ToolFailure>)> {
    let Value::Object(call) = call else {
        return None;
    };
    if call.len() != 3 {
        return None;
    }
    let mut function = None;
    for (key, value) in call {
        let fits = match key.as_str() {
            "id" => value.as_str().is_some_and(|id| !id.is_empty()),
            "type" => value.as_str() == Some("function"),
            "function" => {
                function = value.as_object();
                function.is_some_and(|function| function.len() == 2)
            }
            _ => false,
        };
        if !fits {
            return None;
        }
    }
    let (mut name, mut arguments) = (None, None);
    for (key, value) in function? {
        match (key.as_str(), value) {
            ("name", Value::String(text)) if !text.is_empty() => name = Some(text),
            ("arguments", Value::String(text)) => arguments = Some(text),
            _ => return None,
        }
    }
    name?;
    arguments.map(|text| arguments_text(text))
}

pub(super) fn openai_responses(mut items: Vec<Value>) -> ParsedResponse {
    let mut texts = Vec::new();
    let mut records = Vec::new();
    for (index, item) in items.iter_mut().enumerate() {
        match field(item, "type").and_then(Value::as_str) {
            Some("function_call") => {
                let map = object(item);
                let id = call_id(map, "call_id", records.len(), true);
                let named = call_name(map, "name");
                let arguments = string_arguments(map, "arguments");
                records.push(record((index, 0), id, named, arguments));
            }
            Some("message") => {
                let parts = item.get("content").and_then(Value::as_array);
                texts.extend(
                    parts
                        .into_iter()
                        .flatten()
                        .filter(|part| {
                            part.get("type").and_then(Value::as_str) == Some("output_text")
                        })
                        .filter_map(|part| {
                            part.get("text").and_then(Value::as_str).map(str::to_owned)
                        }),
                );
            }
            _ => {}
        }
    }
    ParsedResponse {
        text: texts.join("\n"),
        assistant: items,
        provider: Provider::OpenAiResponses,
        records,
    }
}

pub(super) fn anthropic(mut blocks: Vec<Value>) -> ParsedResponse {
    let mut texts = Vec::new();
    let mut records = Vec::new();
    for (index, block) in blocks.iter_mut().enumerate() {
        match field(block, "type").and_then(Value::as_str) {
            Some("tool_use") => {
                let map = object(block);
                let id = call_id(map, "id", records.len(), true);
                let named = call_name(map, "name");
                let arguments = value_arguments(map, "input", true);
                records.push(record((0, index), id, named, arguments));
            }
            Some("text") => {
                if let Some(text) = block.get("text").and_then(Value::as_str) {
                    texts.push(text.to_owned());
                }
            }
            _ => {}
        }
    }
    let assistant = if blocks.is_empty() {
        Vec::new()
    } else {
        vec![json!({"role": "assistant", "content": blocks})]
    };
    ParsedResponse {
        text: texts.join("\n"),
        assistant,
        provider: Provider::Anthropic,
        records,
    }
}

pub(super) fn gemini(mut content: Value) -> Option<ParsedResponse> {
    let map = content.as_object_mut()?;
    map.entry("role").or_insert_with(|| json!("model"));
    let parts = map
        .entry("parts")
        .or_insert_with(|| json!([]))
        .as_array_mut()?;
    let mut texts = Vec::new();
    let mut records = Vec::new();
    for (index, part) in parts.iter_mut().enumerate() {
        if let Some(function_call) = field_mut(part, "functionCall") {
            let map = object(function_call);
            let given = map_field(map, "id")
                .and_then(Value::as_str)
                .is_some_and(|id| !id.is_empty());
            // No id is normal for Gemini: results are matched by name and order, so none is
            // written into the turn sent back.
            let id = (!given).then(|| format!("dsh_call_{}", records.len()));
            let named = map_field(map, "name")
                .and_then(Value::as_str)
                .is_some_and(|name| !name.is_empty());
            let arguments = value_arguments(map, "args", false);
            records.push(record((0, index), (id, None), named, arguments));
        } else if let Some(text) = part.get("text").and_then(Value::as_str)
            && part.get("thought").and_then(Value::as_bool) != Some(true)
        {
            texts.push(text.to_owned());
        }
    }
    let said = !parts.is_empty();
    Some(ParsedResponse {
        text: texts.join("\n"),
        assistant: if said { vec![content] } else { Vec::new() },
        provider: Provider::Gemini,
        records,
    })
}

pub(super) fn joined<'a>(texts: impl Iterator<Item = &'a Value>) -> String {
    texts
        .filter_map(Value::as_str)
        .collect::<Vec<_>>()
        .join("\n")
}
