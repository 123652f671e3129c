//! Calls in: the tool calls of a provider's response, and the model's turn to send back.

use serde_json::{Map, Value, json};

use super::{Provider, ProviderError, ToolLoop};
use crate::error::ErrorCode;
use crate::result::ToolFailure;

/// One tool call read from a response.
#[derive(Debug, Clone, PartialEq)]
pub struct ParsedCall {
    /// The id its result is sent under: the model's, or `dsh_call_<position>` when it gave none
    /// (the same id is written into the model's turn sent back, so the request stays well formed).
    pub id: String,
    /// The id as the model sent it (`None`: absent or empty; normal for Gemini, which then
    /// matches results to calls by name and order).
    pub model_id: Option<String>,
    /// The registry's tool name: the name the model called, mapped back when the last
    /// [`ToolLoop::tools`] sent the tool renamed (empty when the model gave none).
    pub name: String,
    /// The tool name as the model sent it: the name results are sent back under.
    pub model_name: String,
    /// The parsed arguments (`{}` for an empty argument string, and when they could not be
    /// parsed).
    pub arguments: Value,
    /// Why the call cannot run, when it cannot: it then ends in a failure result with this error
    /// and no hook, guard or body runs. Malformed or truncated argument JSON is `INVALID_ARGS`,
    /// a call without a name `UNKNOWN_TOOL`, an OpenAI or Anthropic call without an id a plain
    /// failure.
    pub error: Option<ToolFailure>,
}

/// What a response holds: the model's text, its tool calls in model order, and its turn in the
/// form the next request carries it.
#[derive(Debug, Clone, PartialEq)]
pub struct ParsedResponse {
    /// The model's text beside the calls (text parts joined by `\n`; empty when there is none).
    pub text: String,
    /// The calls, in model order.
    pub calls: Vec<ParsedCall>,
    /// The model's turn as messages (Responses: input items) of the next request, with every
    /// call id filled in; empty when the model said nothing.
    pub assistant: Vec<Value>,
}

impl ToolLoop {
    /// Reads the tool calls of `response`, the body of the provider's non-streamed answer (or
    /// what [`OpenAiChatStream`](super::OpenAiChatStream) / [`AnthropicStream`](super::AnthropicStream)
    /// assembled). Also accepted: a Chat Completions `message` object, a Responses `output`
    /// array, an Anthropic `content` array, a Gemini `content` object.
    ///
    /// # Errors
    /// [`ProviderError::Response`] when `response` is not of the provider's shape. Problems of
    /// one call are never errors: they are that call's [`ParsedCall::error`].
    pub fn parse(&self, response: &Value) -> Result<ParsedResponse, ProviderError> {
        let mut parsed = parse(self.provider, response)?;
        if !self.renamed.is_empty() {
            for call in &mut parsed.calls {
                if let Some(real) = self.renamed.get(&call.model_name) {
                    call.name.clone_from(real);
                }
            }
        }
        Ok(parsed)
    }
}

/// [`ToolLoop::parse`] for `provider`.
pub(crate) fn parse(provider: Provider, response: &Value) -> Result<ParsedResponse, ProviderError> {
    let shape = |reason: &str| ProviderError::Response {
        provider,
        reason: reason.to_owned(),
    };
    match provider {
        Provider::OpenAiChat => {
            let message = match response.get("choices") {
                Some(choices) => choices
                    .get(0)
                    .and_then(|choice| choice.get("message"))
                    .ok_or_else(|| shape("`choices[0].message` is missing"))?,
                None if response.get("role").is_some() => response,
                None => return Err(shape("`choices` is missing")),
            };
            Ok(openai_chat(message))
        }
        Provider::OpenAiResponses => {
            let output = response.get("output").unwrap_or(response);
            let items = output
                .as_array()
                .ok_or_else(|| shape("`output` is not an array"))?;
            Ok(openai_responses(items))
        }
        Provider::Anthropic => {
            let content = response.get("content").unwrap_or(response);
            let blocks = content
                .as_array()
                .ok_or_else(|| shape("`content` is not an array"))?;
            Ok(anthropic(blocks))
        }
        Provider::Gemini => {
            let content = match response.get("candidates") {
                Some(candidates) => candidates
                    .get(0)
                    .ok_or_else(|| shape("`candidates` is empty"))?
                    .get("content")
                    .cloned()
                    // A candidate stopped by a filter has no content: nothing was said.
                    .unwrap_or_else(|| json!({"role": "model", "parts": []})),
                None if response.get("parts").is_some() => response.clone(),
                None => return Err(shape("`candidates` is missing")),
            };
            gemini(content).ok_or_else(|| shape("`content.parts` is not an array"))
        }
    }
}

/// The id to use for the call at `position`, and the failure when a required id is missing.
fn call_id(
    given: Option<&Value>,
    position: usize,
    required: bool,
) -> (String, Option<String>, Option<ToolFailure>) {
    match given.and_then(Value::as_str).filter(|id| !id.is_empty()) {
        Some(id) => (id.to_owned(), Some(id.to_owned()), None),
        None => {
            let failure = required.then(|| {
                ToolFailure::plain(
                    "the tool call has no id, so it was not run; call the tool again",
                )
            });
            (format!("dsh_call_{position}"), None, failure)
        }
    }
}

/// Parses a call's arguments: a JSON string (empty means `{}`) or an already parsed value.
fn arguments(raw: Option<&Value>) -> (Value, Option<ToolFailure>) {
    match raw {
        None | Some(Value::Null) => (json!({}), None),
        Some(Value::String(text)) if text.trim().is_empty() => (json!({}), None),
        Some(Value::String(text)) => match serde_json::from_str::<Value>(text) {
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
        },
        Some(other) => (other.clone(), None),
    }
}

/// A call from its parts; a missing name is the call's failure.
fn call(
    id: (String, Option<String>, Option<ToolFailure>),
    name: Option<&Value>,
    raw: Option<&Value>,
) -> ParsedCall {
    let (id, model_id, id_failure) = id;
    let name = name.and_then(Value::as_str).unwrap_or_default().to_owned();
    let (arguments, args_failure) = arguments(raw);
    let name_failure = name.is_empty().then(|| {
        ToolFailure::coded(
            ErrorCode::UnknownTool,
            "unknown tool \"\": the tool call names no tool",
        )
    });
    ParsedCall {
        id,
        model_id,
        model_name: name.clone(),
        name,
        arguments,
        error: id_failure.or(name_failure).or(args_failure),
    }
}

fn openai_chat(message: &Value) -> ParsedResponse {
    let text = match message.get("content") {
        Some(Value::String(text)) => text.clone(),
        Some(Value::Array(parts)) => joined(parts.iter().filter_map(|part| part.get("text"))),
        _ => String::new(),
    };
    let tool_calls = message.get("tool_calls").and_then(Value::as_array);
    let count = tool_calls.map_or(0, Vec::len);
    let mut calls = Vec::with_capacity(count);
    let mut echoed = Vec::with_capacity(count);
    for (position, raw) in tool_calls.into_iter().flatten().enumerate() {
        let function = raw.get("function");
        let raw_arguments = function.and_then(|f| f.get("arguments"));
        let parsed = call(
            call_id(raw.get("id"), position, true),
            function.and_then(|f| f.get("name")),
            raw_arguments,
        );
        let arguments_text = match raw_arguments {
            Some(Value::String(text)) => text.clone(),
            Some(Value::Null) | None => String::new(),
            Some(other) => other.to_string(),
        };
        // Built field by field: `json!` would copy each string once more.
        let mut function = Map::new();
        function.insert("name".into(), Value::String(parsed.name.clone()));
        function.insert("arguments".into(), Value::String(arguments_text));
        let mut echo = Map::new();
        echo.insert("id".into(), Value::String(parsed.id.clone()));
        echo.insert("type".into(), Value::String("function".into()));
        echo.insert("function".into(), Value::Object(function));
        echoed.push(Value::Object(echo));
        calls.push(parsed);
    }
    let mut turn = Map::new();
    turn.insert("role".into(), json!("assistant"));
    turn.insert(
        "content".into(),
        if text.is_empty() && !echoed.is_empty() {
            Value::Null
        } else {
            json!(text)
        },
    );
    if !echoed.is_empty() {
        turn.insert("tool_calls".into(), Value::Array(echoed));
    }
    let assistant = if text.is_empty() && calls.is_empty() {
        Vec::new()
    } else {
        vec![Value::Object(turn)]
    };
    ParsedResponse {
        text,
        calls,
        assistant,
    }
}

fn openai_responses(items: &[Value]) -> ParsedResponse {
    let mut texts = Vec::new();
    let mut calls = Vec::new();
    let mut assistant = Vec::with_capacity(items.len());
    for item in items {
        let mut item = item.clone();
        match item.get("type").and_then(Value::as_str) {
            Some("function_call") => {
                let parsed = call(
                    call_id(item.get("call_id"), calls.len(), true),
                    item.get("name"),
                    item.get("arguments"),
                );
                if let Some(map) = item.as_object_mut() {
                    map.insert("call_id".into(), json!(parsed.id));
                    map.entry("name").or_insert_with(|| json!(""));
                    map.entry("arguments").or_insert_with(|| json!(""));
                }
                calls.push(parsed);
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
        assistant.push(item);
    }
    ParsedResponse {
        text: texts.join("\n"),
        calls,
        assistant,
    }
}

fn anthropic(blocks: &[Value]) -> ParsedResponse {
    let mut texts = Vec::new();
    let mut calls = Vec::new();
    let mut content = Vec::with_capacity(blocks.len());
    for block in blocks {
        let mut block = block.clone();
        match block.get("type").and_then(Value::as_str) {
            Some("tool_use") => {
                let parsed = call(
                    call_id(block.get("id"), calls.len(), true),
                    block.get("name"),
                    block.get("input"),
                );
                if let Some(map) = block.as_object_mut() {
                    map.insert("id".into(), json!(parsed.id));
                    map.insert("name".into(), json!(parsed.name));
                    // The turn sent back must carry an object, whatever arrived.
                    let input = if parsed.arguments.is_object() {
                        parsed.arguments.clone()
                    } else {
                        json!({})
                    };
                    map.insert("input".into(), input);
                }
                calls.push(parsed);
            }
            Some("text") => {
                if let Some(text) = block.get("text").and_then(Value::as_str) {
                    texts.push(text.to_owned());
                }
            }
            _ => {}
        }
        content.push(block);
    }
    let assistant = if content.is_empty() {
        Vec::new()
    } else {
        vec![json!({"role": "assistant", "content": content})]
    };
    ParsedResponse {
        text: texts.join("\n"),
        calls,
        assistant,
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
    let mut calls = Vec::new();
    for part in parts.iter_mut() {
        if let Some(function_call) = part.get_mut("functionCall") {
            let parsed = call(
                call_id(function_call.get("id"), calls.len(), false),
                function_call.get("name"),
                function_call.get("args"),
            );
            // The turn sent back must carry an object, whatever arrived.
            if let Some(map) = function_call.as_object_mut()
                && map.contains_key("args")
            {
                let args = if parsed.arguments.is_object() {
                    parsed.arguments.clone()
                } else {
                    json!({})
                };
                map.insert("args".into(), args);
            }
            calls.push(parsed);
        } else if let Some(text) = part.get("text").and_then(Value::as_str)
            && part.get("thought").and_then(Value::as_bool) != Some(true)
        {
            texts.push(text.to_owned());
        }
    }
    let said = !parts.is_empty();
    Some(ParsedResponse {
        text: texts.join("\n"),
        calls,
        assistant: if said { vec![content] } else { Vec::new() },
    })
}

fn joined<'a>(texts: impl Iterator<Item = &'a Value>) -> String {
    texts
        .filter_map(Value::as_str)
        .collect::<Vec<_>>()
        .join("\n")
}
