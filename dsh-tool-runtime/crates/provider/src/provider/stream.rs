//! Stream accumulators: a streamed answer's deltas assembled into the non-streamed response.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

/// Bounds on what an accumulator holds, so a hostile or runaway stream cannot grow memory
/// without bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StreamLimits {
    /// Most bytes of text and argument JSON accumulated over the whole stream. Default 16 MiB.
    pub max_bytes: usize,
    /// Most tool calls (content blocks for Anthropic). Default 1,024.
    pub max_calls: usize,
}

impl Default for StreamLimits {
    fn default() -> Self {
        StreamLimits {
            max_bytes: 16 << 20,
            max_calls: 1024,
        }
    }
}

/// Why a stream chunk was refused. The accumulator keeps what it had before the chunk.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum StreamError {
    /// The stream exceeded [`StreamLimits::max_bytes`].
    #[error("dsh-tools: the stream exceeds {limit} bytes of text and arguments")]
    TooManyBytes {
        /// The limit, in bytes.
        limit: usize,
    },
    /// The stream opened more than [`StreamLimits::max_calls`] tool calls or blocks.
    #[error("dsh-tools: the stream opens more than {limit} tool calls or blocks")]
    TooManyCalls {
        /// The limit.
        limit: usize,
    },
}

/// Counts bytes against the limit.
#[derive(Debug, Default, Clone)]
struct Budget {
    used: usize,
}

impl Budget {
    fn take(&mut self, limits: &StreamLimits, bytes: usize) -> Result<(), StreamError> {
        let used = self.used.saturating_add(bytes);
        if used > limits.max_bytes {
            return Err(StreamError::TooManyBytes {
                limit: limits.max_bytes,
            });
        }
        self.used = used;
        Ok(())
    }
}

/// A Chat Completions stream (`stream: true`) read chunk by chunk: `choices[0].delta.content`
/// and the `delta.tool_calls[]` fragments, keyed by `index` (id, type and name arrive on a
/// call's first fragment, `function.arguments` in pieces).
#[derive(Debug, Default, Clone)]
pub struct OpenAiChatStream {
    limits: StreamLimits,
    budget: Budget,
    content: String,
    finish_reason: Option<Value>,
    calls: BTreeMap<u64, (Option<String>, Option<String>, String)>,
}

impl OpenAiChatStream {
    /// An empty accumulator with default limits.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty accumulator with `limits`.
    pub fn with_limits(limits: StreamLimits) -> Self {
        OpenAiChatStream {
            limits,
            ..Self::default()
        }
    }

    /// Takes one chunk (a `chat.completion.chunk` object, the JSON of one `data:` line). A chunk
    /// without choices (usage) is ignored.
    ///
    /// # Errors
    /// [`StreamError`] when the chunk would pass a limit; the chunk is then not taken.
    pub fn push(&mut self, chunk: &Value) -> Result<(), StreamError> {
        let Some(choice) = chunk.pointer("/choices/0") else {
            return Ok(());
        };
        let delta = choice.get("delta");
        let text = delta
            .and_then(|d| d.get("content"))
            .and_then(Value::as_str)
            .unwrap_or_default();
        let fragments = delta
            .and_then(|d| d.get("tool_calls"))
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or_default();
        let mut bytes = text.len();
        let mut new_calls = 0;
        for (position, fragment) in fragments.iter().enumerate() {
            let index = fragment_index(fragment, position);
            if !self.calls.contains_key(&index) {
                new_calls += 1;
            }
            bytes += ["/id", "/function/name", "/function/arguments"]
                .iter()
                .filter_map(|p| fragment.pointer(p).and_then(Value::as_str))
                .map(str::len)
                .sum::<usize>();
        }
        if self.calls.len() + new_calls > self.limits.max_calls {
            return Err(StreamError::TooManyCalls {
                limit: self.limits.max_calls,
            });
        }
        self.budget.take(&self.limits, bytes)?;
        self.content.push_str(text);
        for (position, fragment) in fragments.iter().enumerate() {
            let entry = self
                .calls
                .entry(fragment_index(fragment, position))
                .or_default();
            let text = |pointer| fragment.pointer(pointer).and_then(Value::as_str);
            if let Some(id) = text("/id").filter(|id| !id.is_empty()) {
                entry.0 = Some(id.to_owned());
            }
            if let Some(name) = text("/function/name") {
                entry.1.get_or_insert_with(String::new).push_str(name);
            }
            if let Some(arguments) = text("/function/arguments") {
                entry.2.push_str(arguments);
            }
        }
        if let Some(reason) = choice.get("finish_reason").filter(|r| !r.is_null()) {
            self.finish_reason = Some(reason.clone());
        }
        Ok(())
    }

    /// The `chat.completion` response the chunks make up (a stream cut short gives what arrived:
    /// a call's truncated arguments then fail as that call's `INVALID_ARGS`).
    pub fn finish(&self) -> Value {
        let calls: Vec<Value> = self
            .calls
            .values()
            .map(|(id, name, arguments)| {
                let mut call = Map::new();
                if let Some(id) = id {
                    call.insert("id".into(), json!(id));
                }
                call.insert("type".into(), json!("function"));
                call.insert(
                    "function".into(),
                    json!({"name": name, "arguments": arguments}),
                );
                Value::Object(call)
            })
            .collect();
        let mut message = Map::new();
        message.insert("role".into(), json!("assistant"));
        message.insert(
            "content".into(),
            if self.content.is_empty() {
                Value::Null
            } else {
                json!(self.content)
            },
        );
        if !calls.is_empty() {
            message.insert("tool_calls".into(), Value::Array(calls));
        }
        json!({"object": "chat.completion", "choices": [{
            "index": 0,
            "message": message,
            "finish_reason": self.finish_reason.clone().unwrap_or(Value::Null),
        }]})
    }
}

/// A fragment's `index`, or its position in the chunk when a server leaves it out.
fn fragment_index(fragment: &Value, position: usize) -> u64 {
    fragment
        .get("index")
        .and_then(Value::as_u64)
        .unwrap_or(position as u64)
}

/// An Anthropic Messages stream read event by event (`message_start`, `content_block_start`,
/// `content_block_delta` with `text_delta`, `input_json_delta`, `thinking_delta` or
/// `signature_delta`, `content_block_stop`, `message_delta`, `message_stop`).
#[derive(Debug, Default, Clone)]
pub struct AnthropicStream {
    limits: StreamLimits,
    budget: Budget,
    message: Map<String, Value>,
    /// Each block, and the argument JSON of a `tool_use` block as it arrived.
    blocks: BTreeMap<u64, (Value, Option<String>)>,
}

impl AnthropicStream {
    /// An empty accumulator with default limits.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty accumulator with `limits`.
    pub fn with_limits(limits: StreamLimits) -> Self {
        AnthropicStream {
            limits,
            ..Self::default()
        }
    }

    /// Takes one event (the JSON of one `data:` line). Unknown events (`ping`) are ignored.
    ///
    /// # Errors
    /// [`StreamError`] when the event would pass a limit; the event is then not taken.
    pub fn push(&mut self, event: &Value) -> Result<(), StreamError> {
        let index = event.get("index").and_then(Value::as_u64).unwrap_or(0);
        match event.get("type").and_then(Value::as_str) {
            Some("message_start") => {
                if let Some(Value::Object(message)) = event.get("message") {
                    self.message = message.clone();
                }
            }
            Some("content_block_start") => {
                if !self.blocks.contains_key(&index) && self.blocks.len() >= self.limits.max_calls {
                    return Err(StreamError::TooManyCalls {
                        limit: self.limits.max_calls,
                    });
                }
                let block = event.get("content_block").cloned().unwrap_or(json!({}));
                self.budget.take(&self.limits, block.to_string().len())?;
                let partial = (block.get("type").and_then(Value::as_str) == Some("tool_use"))
                    .then(String::new);
                self.blocks.insert(index, (block, partial));
            }
            Some("content_block_delta") => {
                let Some(delta) = event.get("delta") else {
                    return Ok(());
                };
                let Some((block, partial)) = self.blocks.get_mut(&index) else {
                    return Ok(());
                };
                let (key, piece) = match delta.get("type").and_then(Value::as_str) {
                    Some("text_delta") => ("text", delta.get("text")),
                    Some("input_json_delta") => ("", delta.get("partial_json")),
                    Some("thinking_delta") => ("thinking", delta.get("thinking")),
                    Some("signature_delta") => ("signature", delta.get("signature")),
                    _ => return Ok(()),
                };
                let piece = piece.and_then(Value::as_str).unwrap_or_default();
                self.budget.take(&self.limits, piece.len())?;
                if key.is_empty() {
                    partial.get_or_insert_with(String::new).push_str(piece);
                } else if let Some(map) = block.as_object_mut() {
                    match map.entry(key).or_insert_with(|| json!("")) {
                        Value::String(text) => text.push_str(piece),
                        slot => *slot = Value::String(piece.to_owned()),
                    }
                }
            }
            Some("message_delta") => {
                if let Some(Value::Object(delta)) = event.get("delta") {
                    for (key, value) in delta {
                        self.message.insert(key.clone(), value.clone());
                    }
                }
                // The final usage counts update the ones `message_start` gave.
                if let Some(Value::Object(usage)) = event.get("usage") {
                    let slot = self.message.entry("usage").or_insert_with(|| json!({}));
                    if let Some(counts) = slot.as_object_mut() {
                        counts.extend(usage.clone());
                    }
                }
            }
            _ => {}
        }
        Ok(())
    }

    /// The `message` the events make up. A `tool_use` block's `input` is the object its
    /// `input_json_delta`s spell; when they do not spell one (the stream was cut short, the JSON
    /// is malformed) it is the joined text, and reading the calls fails that call with
    /// `INVALID_ARGS`.
    pub fn finish(&self) -> Value {
        let content: Vec<Value> = self
            .blocks
            .values()
            .map(|(block, partial)| {
                let mut block = block.clone();
                if let (Some(partial), Some(map)) = (partial, block.as_object_mut())
                    && !partial.is_empty()
                {
                    let input = serde_json::from_str::<Value>(partial)
                        .ok()
                        .filter(Value::is_object)
                        .unwrap_or_else(|| Value::String(partial.clone()));
                    map.insert("input".into(), input);
                }
                block
            })
            .collect();
        let mut message = self.message.clone();
        message.entry("role").or_insert_with(|| json!("assistant"));
        message.insert("content".into(), Value::Array(content));
        Value::Object(message)
    }
}
