//! Results out: the messages of the next request, from a step's calls and results.

use serde_json::{Map, Value, json};

use super::calls::{CallRecord, view};
use super::content::{image_part, parts, split, text_part, user_message};
use super::{Message, ParsedCall, ParsedResponse, Provider, ToolLoop};
use crate::result::ToolResult;

impl ToolLoop {
    /// The messages to append to the conversation after `response` and its `results` (one per
    /// call of `response`, in the same order), in this order:
    /// 1. the model's turn ([`ParsedResponse::assistant`]);
    /// 2. one result per call, in model order, marked failed as the provider marks it:
    ///    - Chat Completions: a `role: "tool"` message per call (failures read `Error: …`),
    ///      [`Message::ChatToolResult`];
    ///    - Responses: a `function_call_output` item per call, images inside its `output`
    ///      ([`Message::FunctionCallOutput`] when there are none);
    ///    - Anthropic: one user message of `tool_result` blocks, `is_error: true` on failures,
    ///      images inside the block;
    ///    - Gemini: one user content of `functionResponse` parts, `response.output` on success
    ///      and `response.error` on failure, the call's id echoed when it had one;
    /// 3. for Chat Completions and Gemini, whose results carry no image, one user message per
    ///    result with images, naming the call;
    /// 4. the results' additional contexts, each a user message, in model order.
    ///
    /// A result list shorter than the calls is completed with nothing: callers pass one result
    /// per call ([`ToolLoop::step`] does).
    pub fn next_messages(&self, response: &ParsedResponse, results: &[ToolResult]) -> Vec<Message> {
        next_messages(
            self.provider,
            response.assistant().to_vec(),
            response.records(),
            results,
            Vec::new(),
        )
    }
}

/// [`ToolLoop::next_messages`] for `provider`, after the model's turn `assistant` (taken, so a
/// step does not copy it), which the calls of `records` are read from.
///
/// `reply_ids`: the ids OpenAI results are sent under, one per record, when the caller has
/// them already (a step, which read them to run the calls); empty, each is read from the turn.
pub(crate) fn next_messages(
    provider: Provider,
    assistant: Vec<Value>,
    records: &[CallRecord],
    results: &[ToolResult],
    reply_ids: Vec<String>,
) -> Vec<Message> {
    let turn = assistant.len();
    // Room for the turn, a result per call and the grouped results' message.
    let mut out = Vec::with_capacity(turn + records.len() + 1);
    out.extend(assistant.into_iter().map(Message::Json));
    let mut image_messages = Vec::new();
    let mut grouped = Vec::new();
    let mut reply_ids = reply_ids.into_iter();
    for (record, result) in records.iter().zip(results) {
        let (text, images) = split(result.content());
        // An OpenAI text result needs only its id, which a step hands over: the call is read
        // from the turn (at the start of `out`) only when more is needed. Each message is built
        // before it is pushed, so that borrow ends first.
        let reply_id = match provider {
            Provider::OpenAiChat | Provider::OpenAiResponses => reply_ids.next(),
            _ => None,
        };
        let call = (reply_id.is_none() || !images.is_empty())
            .then(|| view(provider, &out[..turn], record));
        if let Some(call) = &call
            && matches!(provider, Provider::OpenAiChat | Provider::Gemini)
            && !images.is_empty()
        {
            // Chat Completions and Gemini results carry no image: a user message after them does.
            image_messages.push(images_message(provider, call.model_name, call.id, &images));
        }
        let id = || {
            reply_id.unwrap_or_else(|| call.as_ref().map(|c| c.id.to_owned()).unwrap_or_default())
        };
        let message = match (provider, &call) {
            (Provider::OpenAiChat, _) => Message::ChatToolResult {
                tool_call_id: id(),
                content: text,
            },
            (Provider::OpenAiResponses, _) if images.is_empty() => Message::FunctionCallOutput {
                call_id: id(),
                output: text,
            },
            (_, Some(call)) => {
                match result_message(provider, call, result, text, &images, &mut grouped) {
                    Some(message) => message,
                    None => continue,
                }
            }
            // Not reached: the call is read whenever there are images or no id was handed over.
            (_, None) => continue,
        };
        out.push(message);
    }
    if !grouped.is_empty() {
        out.push(Message::Json(match provider {
            Provider::Gemini => json!({"role": "user", "parts": grouped}),
            _ => json!({"role": "user", "content": grouped}),
        }));
    }
    out.extend(image_messages.into_iter().map(Message::Json));
    for result in results.iter().take(records.len()) {
        for context in result.additional_contexts() {
            let content = parts(provider, &context.content);
            if !content.is_empty() {
                out.push(Message::Json(user_message(provider, content)));
            }
        }
    }
    out
}

/// The JSON message of `call`'s `result` (its text `text`, its images `images`): a Responses
/// output with images; `None` when it joins the results grouped in one message (Anthropic,
/// Gemini), pushed on `grouped`. Text results of the OpenAI APIs are typed by the caller.
fn result_message(
    provider: Provider,
    call: &ParsedCall<'_>,
    result: &ToolResult,
    text: String,
    images: &[(&str, &str)],
    grouped: &mut Vec<Value>,
) -> Option<Message> {
    match provider {
        // Typed by the caller.
        Provider::OpenAiChat => None,
        Provider::OpenAiResponses => {
            let mut output = vec![text_part(provider, &text)];
            output.extend(images.iter().map(|(m, d)| image_part(provider, m, d)));
            Some(Message::Json(json!({
                "type": "function_call_output",
                "call_id": call.id,
                "output": output,
            })))
        }
        Provider::Anthropic => {
            let mut block = Map::new();
            block.insert("type".into(), json!("tool_result"));
            block.insert("tool_use_id".into(), json!(call.id));
            let content = parts(provider, result.content());
            if !content.is_empty() {
                block.insert("content".into(), Value::Array(content));
            }
            if result.is_error() {
                block.insert("is_error".into(), Value::Bool(true));
            }
            grouped.push(Value::Object(block));
            None
        }
        Provider::Gemini => {
            let key = if result.is_error() { "error" } else { "output" };
            let mut response = Map::new();
            response.insert("name".into(), json!(call.model_name));
            response.insert("response".into(), json!({ key: text }));
            if let Some(id) = call.model_id {
                response.insert("id".into(), json!(id));
            }
            grouped.push(json!({ "functionResponse": response }));
            None
        }
    }
}

/// A user message carrying the images of one result, for providers whose results take none.
fn images_message(provider: Provider, name: &str, id: &str, images: &[(&str, &str)]) -> Value {
    let mut content = vec![text_part(
        provider,
        &format!("Images returned by the call {id} of `{name}`:"),
    )];
    content.extend(images.iter().map(|(m, d)| image_part(provider, m, d)));
    user_message(provider, content)
}
