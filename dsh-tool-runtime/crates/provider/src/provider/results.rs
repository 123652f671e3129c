//! Results out: the messages of the next request, from a step's calls and results.

use serde_json::{Map, Value, json};

use super::calls::{CallRecord, view};
use super::content::{image_part, parts, split, text_part, user_message};
use super::{ParsedResponse, Provider, ToolLoop};
use crate::result::ToolResult;

impl ToolLoop {
    /// The messages to append to the conversation after `response` and its `results` (one per
    /// call of `response`, in the same order), in this order:
    /// 1. the model's turn ([`ParsedResponse::assistant`]);
    /// 2. one result per call, in model order, marked failed as the provider marks it:
    ///    - Chat Completions: a `role: "tool"` message per call (failures read `Error: …`);
    ///    - Responses: a `function_call_output` item per call, images inside its `output`;
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
    pub fn next_messages(&self, response: &ParsedResponse, results: &[ToolResult]) -> Vec<Value> {
        next_messages(
            self.provider,
            response.assistant().to_vec(),
            response.records(),
            results,
        )
    }
}

/// [`ToolLoop::next_messages`] for `provider`, after the model's turn `assistant` (taken, so a
/// step does not copy it), which the calls of `records` are read from.
pub(crate) fn next_messages(
    provider: Provider,
    assistant: Vec<Value>,
    records: &[CallRecord],
    results: &[ToolResult],
) -> Vec<Value> {
    let mut out = assistant;
    let turn = out.len();
    out.reserve(records.len() + 1);
    let mut image_messages = Vec::new();
    let mut grouped = Vec::new();
    for (record, result) in records.iter().zip(results) {
        let is_error = result.is_error();
        let (text, images) = split(result.content());
        // The call is read from the turn at the start of `out`; each message is built before it
        // is pushed, so that borrow ends first.
        let call = view(provider, &out[..turn], record);
        // Chat Completions and Gemini results carry no image: a user message after them does.
        if matches!(provider, Provider::OpenAiChat | Provider::Gemini) && !images.is_empty() {
            image_messages.push(images_message(provider, call.model_name, call.id, &images));
        }
        let message = match provider {
            Provider::OpenAiChat => {
                let mut message = Map::with_capacity(3);
                message.insert("role".into(), Value::String("tool".into()));
                message.insert("tool_call_id".into(), Value::String(call.id.to_owned()));
                message.insert("content".into(), Value::String(text));
                Some(Value::Object(message))
            }
            Provider::OpenAiResponses => {
                let output = if images.is_empty() {
                    Value::String(text)
                } else {
                    let mut items = vec![text_part(provider, &text)];
                    items.extend(images.iter().map(|(m, d)| image_part(provider, m, d)));
                    Value::Array(items)
                };
                let mut item = Map::with_capacity(3);
                item.insert("type".into(), Value::String("function_call_output".into()));
                item.insert("call_id".into(), Value::String(call.id.to_owned()));
                item.insert("output".into(), output);
                Some(Value::Object(item))
            }
            Provider::Anthropic => {
                let mut block = Map::new();
                block.insert("type".into(), json!("tool_result"));
                block.insert("tool_use_id".into(), json!(call.id));
                let content = parts(provider, result.content());
                if !content.is_empty() {
                    block.insert("content".into(), Value::Array(content));
                }
                if is_error {
                    block.insert("is_error".into(), Value::Bool(true));
                }
                grouped.push(Value::Object(block));
                None
            }
            Provider::Gemini => {
                let key = if is_error { "error" } else { "output" };
                let mut response = Map::new();
                response.insert("name".into(), json!(call.model_name));
                response.insert("response".into(), json!({ key: text }));
                if let Some(id) = call.model_id {
                    response.insert("id".into(), json!(id));
                }
                grouped.push(json!({ "functionResponse": response }));
                None
            }
        };
        out.extend(message);
    }
    if !grouped.is_empty() {
        out.push(match provider {
            Provider::Gemini => json!({"role": "user", "parts": grouped}),
            _ => json!({"role": "user", "content": grouped}),
        });
    }
    out.extend(image_messages);
    for result in results.iter().take(records.len()) {
        for context in result.additional_contexts() {
            let content = parts(provider, &context.content);
            if !content.is_empty() {
                out.push(user_message(provider, content));
            }
        }
    }
    out
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
