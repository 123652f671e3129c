//! Calls in: the tool calls of a provider's response, and the model's turn to send back.

use std::borrow::Cow;

use serde_json::{Map, Value, json};

use super::{Provider, ProviderError, ToolLoop};
use crate::error::ErrorCode;
use crate::result::ToolFailure;

/// Most keys an object may hold to be searched by comparing them: the objects a call is read
/// from hold a few, and comparing a few short keys is cheaper than hashing the one sought (the
/// map's hasher is SipHash).
const SCANNED: usize = 8;

/// `map[key]`.
fn map_field<'a>(map: &'a Map<String, Value>, key: &str) -> Option<&'a Value> {
    if map.len() > SCANNED {
        return map.get(key);
    }
    map.iter()
        .find_map(|(name, value)| (name == key).then_some(value))
}

/// `map[key]`, mutable.
fn map_field_mut<'a>(map: &'a mut Map<String, Value>, key: &str) -> Option<&'a mut Value> {
    if map.len() > SCANNED {
        return map.get_mut(key);
    }
    map.iter_mut()
        .find_map(|(name, value)| (name == key).then_some(value))
}

/// `value[key]` when `value` is an object.
fn field<'a>(value: &'a Value, key: &str) -> Option<&'a Value> {
    map_field(value.as_object()?, key)
}

/// `value[key]`, mutable, when `value` is an object.
fn field_mut<'a>(value: &'a mut Value, key: &str) -> Option<&'a mut Value> {
    map_field_mut(value.as_object_mut()?, key)
}

/// One tool call read from a response, borrowed from the model's turn it was read from
/// ([`ParsedResponse::calls`], [`Step::calls`](super::Step::calls)): reading an answer copies no
/// id, name or argument of it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ParsedCall<'a> {
    /// The id its result is sent under: the model's, or `dsh_call_<position>` when it gave none
    /// (the same id is written into the model's turn sent back, so the request stays well formed;
    /// Gemini, which matches results by name and order, gets none written).
    pub id: &'a str,
    /// The id as the model sent it (`None`: absent or empty; normal for Gemini, which then
    /// matches results to calls by name and order).
    pub model_id: Option<&'a str>,
    /// The registry's tool name: the name the model called, mapped back when the last
    /// [`ToolLoop::tools`] sent the tool renamed (empty when the model gave none).
    pub name: &'a str,
    /// The tool name as the model sent it: the name results are sent back under.
    pub model_name: &'a str,
    /// The arguments as the model's turn carries them: the JSON text for OpenAI (a string,
    /// which may be malformed), the `input` or `args` object for Anthropic and Gemini; `None`
    /// when the call has none. [`ParsedCall::arguments`] gives them as a value.
    pub raw_arguments: Option<&'a Value>,
    /// Why the call cannot run, when it cannot: it then ends in a failure result with this error
    /// and no hook, guard or body runs. Malformed or truncated argument JSON is `INVALID_ARGS`,
    /// a call without a name `UNKNOWN_TOOL`, an OpenAI or Anthropic call without an id a plain
    /// failure.
    pub error: Option<&'a ToolFailure>,
}

impl<'a> ParsedCall<'a> {
    /// The arguments as a value: argument text parsed (`{}` when it is empty, or when it does
    /// not parse, which [`ParsedCall::error`] then says), an object as it is (borrowed), `{}`
    /// when there are none. These are the arguments before strict nulls are normalised back.
    pub fn arguments(&self) -> Cow<'a, Value> {
        match self.raw_arguments {
            Some(Value::String(text)) => Cow::Owned(arguments_text(text).0),
            None | Some(Value::Null) => Cow::Owned(Value::Object(Map::new())),
            Some(value) => Cow::Borrowed(value),
        }
    }
}

/// Where a call is in the model's turn, and what the turn does not say about it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct CallRecord {
    /// The index of the turn's message (Responses: item) holding the call.
    message: usize,
    /// The call's index in that message's list (`tool_calls`, `content`, `parts`); unused for
    /// Responses, whose item is the call.
    entry: usize,
    /// What only some calls have, boxed so that a record stays small (a step's records are
    /// one small allocation).
    unusual: Option<Box<Unusual>>,
    /// The parsed arguments of a runnable call, until a step hands them to the pipeline.
    pub(crate) arguments: Option<Value>,
}

/// What the turn does not say about a call, when there is something.
#[derive(Debug, Clone, Default, PartialEq)]
struct Unusual {
    /// The id made up for a call the model gave none (`dsh_call_<position>`).
    generated_id: Option<String>,
    /// The registry's name, when the tool was sent renamed.
    real_name: Option<String>,
    /// Why the call cannot run.
    error: Option<ToolFailure>,
}

impl CallRecord {
    /// Why the call cannot run, when it cannot.
    pub(crate) fn error(&self) -> Option<&ToolFailure> {
        self.unusual.as_ref()?.error.as_ref()
    }

    fn generated_id(&self) -> Option<&str> {
        self.unusual.as_ref()?.generated_id.as_deref()
    }

    fn real_name(&self) -> Option<&str> {
        self.unusual.as_ref()?.real_name.as_deref()
    }
}

/// What a response holds: the model's text, its tool calls in model order, and its turn in the
/// form the next request carries it.
#[derive(Debug, Clone, PartialEq)]
pub struct ParsedResponse {
    /// The model's text beside the calls (text parts joined by `\n`; empty when there is none).
    pub text: String,
    /// The model's turn as messages (Responses: input items) of the next request, with every
    /// call id filled in; empty when the model said nothing.
    assistant: Vec<Value>,
    provider: Provider,
    records: Vec<CallRecord>,
}

impl ParsedResponse {
    /// The calls, in model order, borrowed from [`ParsedResponse::assistant`].
    pub fn calls(&self) -> Vec<ParsedCall<'_>> {
        calls(self.provider, &self.assistant, &self.records)
    }

    /// The model's turn as messages (Responses: input items) of the next request, with every
    /// call id filled in; empty when the model said nothing.
    pub fn assistant(&self) -> &[Value] {
        &self.assistant
    }

    /// The call records, in model order.
    pub(crate) fn records(&self) -> &[CallRecord] {
        &self.records
    }

    /// The parts a step uses: the text, the turn, the call records.
    pub(crate) fn into_parts(self) -> (String, Vec<Value>, Vec<CallRecord>) {
        (self.text, self.assistant, self.records)
    }
}

/// The calls of `records`, read from the model's turn `turn`.
pub(crate) fn calls<'a>(
    provider: Provider,
    turn: &'a [Value],
    records: &'a [CallRecord],
) -> Vec<ParsedCall<'a>> {
    records
        .iter()
        .map(|record| view(provider, turn, record))
        .collect()
}

/// The call of `record`, read from the model's turn `turn` (a part the turn no longer holds
/// reads as empty).
pub(crate) fn view<'a>(
    provider: Provider,
    turn: &'a [Value],
    record: &'a CallRecord,
) -> ParsedCall<'a> {
    let message = turn.get(record.message);
    let (entry, arguments_at) = match provider {
        Provider::OpenAiChat => (
            message
                .and_then(|m| field(m, "tool_calls"))
                .and_then(|calls| calls.get(record.entry)),
            None,
        ),
        Provider::OpenAiResponses => (message, Some("arguments")),
        Provider::Anthropic => (
            message
                .and_then(|m| field(m, "content"))
                .and_then(|blocks| blocks.get(record.entry)),
            Some("input"),
        ),
        Provider::Gemini => (
            message
                .and_then(|m| field(m, "parts"))
                .and_then(|parts| parts.get(record.entry))
                .and_then(|part| field(part, "functionCall")),
            Some("args"),
        ),
    };
    let id_key = if provider == Provider::OpenAiResponses {
        "call_id"
    } else {
        "id"
    };
    // Chat Completions nests the name and arguments under `function`.
    let function = match arguments_at {
        Some(_) => entry,
        None => entry.and_then(|entry| field(entry, "function")),
    };
    let str_at = |value: Option<&'a Value>, key: &str| -> &'a str {
        value
            .and_then(|value| field(value, key))
            .and_then(Value::as_str)
            .unwrap_or_default()
    };
    let generated_id = record.generated_id();
    let model_id = match generated_id {
        Some(_) => None,
        None => Some(str_at(entry, id_key)),
    };
    let model_name = str_at(function, "name");
    ParsedCall {
        id: generated_id.or(model_id).unwrap_or_default(),
        model_id,
        name: record.real_name().unwrap_or(model_name),
        model_name,
        raw_arguments: function.and_then(|f| field(f, arguments_at.unwrap_or("arguments"))),
        error: record.error(),
    }
}

impl ToolLoop {
    /// Reads the tool calls of `response`, the body of the provider's non-streamed answer (or
    /// what [`OpenAiChatStream`](super::OpenAiChatStream) / [`AnthropicStream`](super::AnthropicStream)
    /// assembled). Also accepted: a Chat Completions `message` object, a Responses `output`
    /// array, an Anthropic `content` array, a Gemini `content` object.
    ///
    /// `response` is taken, not borrowed: the model's turn sent back
    /// ([`ParsedResponse::assistant`]) is the response's own message moved out of it, with only
    /// what the next request needs changed (a missing call id filled in, fields the request
    /// does not take dropped), and the calls ([`ParsedResponse::calls`]) are read from it, so
    /// reading an answer copies nothing of it but each runnable call's arguments, parsed.
    ///
    /// # Errors
    /// [`ProviderError::Response`] when `response` is not of the provider's shape. Problems of
    /// one call are never errors: they are that call's [`ParsedCall::error`].
    pub fn parse(&self, response: Value) -> Result<ParsedResponse, ProviderError> {
        let mut parsed = parse(self.provider, response)?;
        if !self.renamed.is_empty() {
            for index in 0..parsed.records.len() {
                let model_name =
                    view(self.provider, &parsed.assistant, &parsed.records[index]).model_name;
                if let Some(real) = self.renamed.get(model_name) {
                    let record = &mut parsed.records[index];
                    record.unusual.get_or_insert_default().real_name = Some(real.clone());
                }
            }
        }
        Ok(parsed)
    }
}

/// [`ToolLoop::parse`] for `provider`.
pub(crate) fn parse(
    provider: Provider,
    mut response: Value,
) -> Result<ParsedResponse, ProviderError> {
    let shape = |reason: &str| ProviderError::Response {
        provider,
        reason: reason.to_owned(),
    };
    match provider {
        Provider::OpenAiChat => {
            let message = if let Some(choices) = field_mut(&mut response, "choices") {
                choices
                    .get_mut(0)
                    .and_then(|choice| field_mut(choice, "message"))
                    .map(Value::take)
                    .ok_or_else(|| shape("`choices[0].message` is missing"))?
            } else if response.get("role").is_some() {
                response
            } else {
                return Err(shape("`choices` is missing"));
            };
            Ok(openai_chat(message))
        }
        Provider::OpenAiResponses => {
            let output = match response.get_mut("output") {
                Some(output) => output.take(),
                None => response,
            };
            match output {
                Value::Array(items) => Ok(openai_responses(items)),
                _ => Err(shape("`output` is not an array")),
            }
        }
        Provider::Anthropic => {
            let content = match response.get_mut("content") {
                Some(content) => content.take(),
                None => response,
            };
            match content {
                Value::Array(blocks) => Ok(anthropic(blocks)),
                _ => Err(shape("`content` is not an array")),
            }
        }
        Provider::Gemini => {
            let content = if let Some(candidates) = response.get_mut("candidates") {
                candidates
                    .get_mut(0)
                    .ok_or_else(|| shape("`candidates` is empty"))?
                    .get_mut("content")
                    .map(Value::take)
                    // A candidate stopped by a filter has no content: nothing was said.
                    .unwrap_or_else(|| json!({"role": "model", "parts": []}))
            } else if response.get("parts").is_some() {
                response
            } else {
                return Err(shape("`candidates` is missing"));
            };
            gemini(content).ok_or_else(|| shape("`content.parts` is not an array"))
        }
    }
}

/// `value` as an object: anything else is replaced by an empty one (a malformed call entry is
/// sent back in the form the request needs, its failure reported by the call).
fn object(value: &mut Value) -> &mut Map<String, Value> {
    if !value.is_object() {
        *value = Value::Object(Map::new());
    }
    match value {
        Value::Object(map) => map,
        _ => unreachable!("replaced by an object above"),
    }
}

/// `map[key]` as an object, made one when it is missing or of another type.
fn object_at<'a>(map: &'a mut Map<String, Value>, key: &str) -> &'a mut Map<String, Value> {
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
fn call_id(
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
fn call_name(map: &mut Map<String, Value>, key: &str) -> bool {
    match map_field(map, key) {
        Some(Value::String(name)) => !name.is_empty(),
        _ => {
            map.insert(key.to_owned(), Value::String(String::new()));
            false
        }
    }
}

/// Parses a call's argument JSON text (empty means `{}`).
fn arguments_text(text: &str) -> (Value, Option<ToolFailure>) {
    if text.trim().is_empty() {
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
fn string_arguments(map: &mut Map<String, Value>, key: &str) -> (Value, Option<ToolFailure>) {
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
fn value_arguments(
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
fn record(
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

/// A Chat Completions message: its text and calls, and the message itself as the turn sent
/// back (`role`, `content` and `tool_calls` only; each call `id`, `type` and `function` with
/// `name` and `arguments`, as the request takes them).
fn openai_chat(message: Value) -> ParsedResponse {
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

fn openai_responses(mut items: Vec<Value>) -> ParsedResponse {
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

fn anthropic(mut blocks: Vec<Value>) -> ParsedResponse {
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

fn gemini(mut content: Value) -> Option<ParsedResponse> {
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

fn joined<'a>(texts: impl Iterator<Item = &'a Value>) -> String {
    texts
        .filter_map(Value::as_str)
        .collect::<Vec<_>>()
        .join("\n")
}
