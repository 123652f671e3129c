//! Calls in: the tool calls of a provider's response, and the model's turn to send back.
//!
//! Each provider's response shape is read in `responses.rs`, a call's fields in `fields.rs`.

mod fields;
mod responses;

use std::borrow::Cow;
use std::collections::HashSet;

use serde_json::{Map, Value, json};

use super::{Message, Provider, ProviderError, ToolLoop};
use crate::result::ToolFailure;
use fields::{arguments_text, field, field_mut};
use responses::{anthropic, gemini, openai_chat, openai_responses};

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

/// A message of the model's turn as a call is read from it: a response's own JSON, or a step's
/// [`Message`] (whose turn messages are [`Message::Json`]).
pub(crate) trait TurnMessage {
    /// The message's JSON, if it is held as JSON.
    fn json(&self) -> Option<&Value>;
}

impl TurnMessage for Value {
    fn json(&self) -> Option<&Value> {
        Some(self)
    }
}

impl TurnMessage for Message {
    fn json(&self) -> Option<&Value> {
        self.as_json()
    }
}

/// The calls of `records`, read from the model's turn `turn`.
pub(crate) fn calls<'a, M: TurnMessage>(
    provider: Provider,
    turn: &'a [M],
    records: &'a [CallRecord],
) -> Vec<ParsedCall<'a>> {
    records
        .iter()
        .map(|record| view(provider, turn, record))
        .collect()
}

/// The call of `record`, read from the model's turn `turn` (a part the turn no longer holds
/// reads as empty).
#[inline]
pub(crate) fn view<'a, M: TurnMessage>(
    provider: Provider,
    turn: &'a [M],
    record: &'a CallRecord,
) -> ParsedCall<'a> {
    let message = turn.get(record.message).and_then(M::json);
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
    /// what the next request needs changed (a missing call id filled in, unique among the
    /// turn's ids; for Chat Completions, the fields its request message does not take dropped;
    /// Responses items and Anthropic blocks are sent back as the response gave them), and the
    /// calls ([`ParsedResponse::calls`]) are read from it, so
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
pub(crate) fn parse(provider: Provider, response: Value) -> Result<ParsedResponse, ProviderError> {
    let mut parsed = read_response(provider, response)?;
    unique_made_up_ids(&mut parsed);
    Ok(parsed)
}

/// Makes every id made up for a call without one (`dsh_call_<position>`) differ from the ids
/// the model gave: one the model already used gets a suffix (`dsh_call_<position>_<n>`), in the
/// record and in the turn sent back. Two calls under one id would get two results the request
/// cannot tell apart. Ids the model itself repeats are sent back as it gave them.
fn unique_made_up_ids(parsed: &mut ParsedResponse) {
    if parsed
        .records
        .iter()
        .all(|record| record.generated_id().is_none())
    {
        return;
    }
    let provider = parsed.provider;
    let mut taken: HashSet<String> = parsed
        .records
        .iter()
        .filter(|record| record.generated_id().is_none())
        .map(|record| view(provider, &parsed.assistant, record).id.to_owned())
        .collect();
    for (position, record) in parsed.records.iter_mut().enumerate() {
        let Some(made_up) = record.generated_id() else {
            continue;
        };
        if !taken.contains(made_up) {
            taken.insert(made_up.to_owned());
            continue;
        }
        let base = made_up.to_owned();
        let unique = (1..)
            .map(|n| format!("{base}_{n}"))
            .find(|id| !taken.contains(id))
            .unwrap_or_else(|| format!("{base}_{position}"));
        taken.insert(unique.clone());
        if provider != Provider::Gemini
            && let Some(map) = call_map_mut(provider, &mut parsed.assistant, record)
        {
            let key = if provider == Provider::OpenAiResponses {
                "call_id"
            } else {
                "id"
            };
            map.insert(key.to_owned(), Value::String(unique.clone()));
        }
        if let Some(unusual) = record.unusual.as_mut() {
            unusual.generated_id = Some(unique);
        }
    }
}

/// The object of `record`'s call in the model's turn `turn` (Gemini: its `functionCall`).
fn call_map_mut<'a>(
    provider: Provider,
    turn: &'a mut [Value],
    record: &CallRecord,
) -> Option<&'a mut Map<String, Value>> {
    let message = turn.get_mut(record.message)?;
    let call = match provider {
        Provider::OpenAiChat => field_mut(message, "tool_calls")?.get_mut(record.entry)?,
        Provider::OpenAiResponses => message,
        Provider::Anthropic => field_mut(message, "content")?.get_mut(record.entry)?,
        Provider::Gemini => field_mut(
            field_mut(message, "parts")?.get_mut(record.entry)?,
            "functionCall",
        )?,
    };
    call.as_object_mut()
}

/// A response of `provider`'s shape read into its text, calls and turn.
fn read_response(provider: Provider, mut response: Value) -> Result<ParsedResponse, ProviderError> {
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
            if !message.is_object() {
                return Err(shape("`choices[0].message` is not an object"));
            }
            // `null` is how the API says "no calls"; anything else but a list is no answer.
            if message
                .get("tool_calls")
                .is_some_and(|calls| !calls.is_array() && !calls.is_null())
            {
                return Err(shape("`choices[0].message.tool_calls` is not an array"));
            }
            Ok(openai_chat(message))
        }
        Provider::OpenAiResponses => {
            let output = match response.get_mut("output") {
                Some(output) => output.take(),
                None => response,
            };
            match output {
                Value::Array(items) if items.iter().all(Value::is_object) => {
                    Ok(openai_responses(items))
                }
                Value::Array(_) => Err(shape("an `output` item is not an object")),
                _ => Err(shape("`output` is not an array")),
            }
        }
        Provider::Anthropic => {
            let content = match response.get_mut("content") {
                Some(content) => content.take(),
                None => response,
            };
            match content {
                Value::Array(blocks) if blocks.iter().all(Value::is_object) => {
                    Ok(anthropic(blocks))
                }
                Value::Array(_) => Err(shape("a `content` block is not an object")),
                _ => Err(shape("`content` is not an array")),
            }
        }
        Provider::Gemini => {
            let content = if let Some(candidates) = response.get_mut("candidates") {
                let candidate = candidates
                    .get_mut(0)
                    .ok_or_else(|| shape("`candidates` is empty"))?;
                if !candidate.is_object() {
                    return Err(shape("`candidates[0]` is not an object"));
                }
                candidate
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
