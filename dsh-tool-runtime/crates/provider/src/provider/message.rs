//! One message of the next request, as a step builds it.

use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};

/// One message (Responses API: one input item) of the next request, serialized in the
/// provider's shape (`serde_json::to_value`, `to_vec` or an HTTP client's JSON body).
///
/// A text result of Chat Completions or of the Responses API, one per call, is held as its two
/// strings rather than built into a JSON object (which would take six more allocations a call:
/// three keys, a constant and the object's two tables); everything else is held as the
/// provider's JSON. Either way the serialized message is the same.
///
/// A conversation can be a `Vec<Message>` (a message of the caller's own is
/// `Message::from(json!({…}))`) or a `Vec<Value>` ([`Message::into_value`]). Deserializing
/// gives [`Message::Json`].
///
/// ```
/// use dsh_tool_provider::provider::Message;
/// use serde_json::json;
///
/// let result = Message::ChatToolResult {
///     tool_call_id: "call_1".into(),
///     content: "4".into(),
/// };
/// assert_eq!(
///     result.into_value(),
///     json!({"role": "tool", "tool_call_id": "call_1", "content": "4"})
/// );
/// ```
#[derive(Debug, Clone)]
pub enum Message {
    /// A message as the provider's JSON: the model's turn, the results of Anthropic and Gemini
    /// (one user message), a result with images, a user message.
    Json(Value),
    /// A Chat Completions tool message, serialized as
    /// `{"role": "tool", "tool_call_id": …, "content": …}`.
    ChatToolResult {
        /// The id of the call this answers.
        tool_call_id: String,
        /// The result as text (a failure's reads `Error: …`).
        content: String,
    },
    /// A Responses API item with a text output, serialized as
    /// `{"type": "function_call_output", "call_id": …, "output": …}`.
    FunctionCallOutput {
        /// The `call_id` of the `function_call` item this answers.
        call_id: String,
        /// The result as text.
        output: String,
    },
}

impl Message {
    /// The message as the provider's JSON.
    pub fn into_value(self) -> Value {
        match self {
            Message::Json(value) => value,
            Message::ChatToolResult {
                tool_call_id,
                content,
            } => object([
                ("role", Value::String("tool".into())),
                ("tool_call_id", Value::String(tool_call_id)),
                ("content", Value::String(content)),
            ]),
            Message::FunctionCallOutput { call_id, output } => object([
                ("type", Value::String("function_call_output".into())),
                ("call_id", Value::String(call_id)),
                ("output", Value::String(output)),
            ]),
        }
    }

    /// [`Message::into_value`] of a copy.
    pub fn to_value(&self) -> Value {
        self.clone().into_value()
    }

    /// The JSON of a [`Message::Json`]; `None` for the typed variants.
    pub fn as_json(&self) -> Option<&Value> {
        match self {
            Message::Json(value) => Some(value),
            _ => None,
        }
    }
}

/// An object of three fields, in order.
fn object(fields: [(&str, Value); 3]) -> Value {
    let mut map = Map::with_capacity(fields.len());
    for (key, value) in fields {
        map.insert(key.to_owned(), value);
    }
    Value::Object(map)
}

impl From<Value> for Message {
    fn from(value: Value) -> Self {
        Message::Json(value)
    }
}

impl From<Message> for Value {
    fn from(message: Message) -> Self {
        message.into_value()
    }
}

/// Messages are equal when they serialize to the same JSON, whichever form holds them (a
/// typed result equals the [`Message::Json`] of its JSON).
impl PartialEq for Message {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (Message::Json(value), other) | (other, Message::Json(value)) => other == value,
            (
                Message::ChatToolResult {
                    tool_call_id,
                    content,
                },
                Message::ChatToolResult {
                    tool_call_id: other_id,
                    content: other_content,
                },
            ) => tool_call_id == other_id && content == other_content,
            (
                Message::FunctionCallOutput { call_id, output },
                Message::FunctionCallOutput {
                    call_id: other_id,
                    output: other_output,
                },
            ) => call_id == other_id && output == other_output,
            _ => false,
        }
    }
}

/// A message compares equal to the JSON it serializes to.
impl PartialEq<Value> for Message {
    fn eq(&self, other: &Value) -> bool {
        match self {
            Message::Json(value) => value == other,
            _ => &self.to_value() == other,
        }
    }
}

/// JSON compares equal to a message that serializes to it.
impl PartialEq<Message> for Value {
    fn eq(&self, other: &Message) -> bool {
        other == self
    }
}

impl Serialize for Message {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let (kind, id_key, id, text_key, text) = match self {
            Message::Json(value) => return value.serialize(serializer),
            Message::ChatToolResult {
                tool_call_id,
                content,
            } => (
                ("role", "tool"),
                "tool_call_id",
                tool_call_id,
                "content",
                content,
            ),
            Message::FunctionCallOutput { call_id, output } => (
                ("type", "function_call_output"),
                "call_id",
                call_id,
                "output",
                output,
            ),
        };
        let mut map = serializer.serialize_map(Some(3))?;
        map.serialize_entry(kind.0, kind.1)?;
        map.serialize_entry(id_key, id)?;
        map.serialize_entry(text_key, text)?;
        map.end()
    }
}

impl<'de> Deserialize<'de> for Message {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Value::deserialize(deserializer).map(Message::Json)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_typed_message_serializes_as_its_json() {
        let messages = [
            (
                Message::ChatToolResult {
                    tool_call_id: "c1".into(),
                    content: "Error: no".into(),
                },
                json!({"role": "tool", "tool_call_id": "c1", "content": "Error: no"}),
            ),
            (
                Message::FunctionCallOutput {
                    call_id: "c2".into(),
                    output: "4".into(),
                },
                json!({"type": "function_call_output", "call_id": "c2", "output": "4"}),
            ),
            (
                Message::Json(json!({"role": "user", "content": "hi"})),
                json!({"role": "user", "content": "hi"}),
            ),
        ];
        for (message, expected) in messages {
            assert_eq!(serde_json::to_value(&message).unwrap(), expected);
            // The keys come in the order the value gives them.
            assert_eq!(
                serde_json::to_string(&message).unwrap(),
                expected.to_string()
            );
            assert_eq!(message, expected);
            assert_eq!(message.to_value(), expected);
            assert_eq!(vec![expected.clone()], vec![message.clone()]);
            assert_eq!(Value::from(message.clone()), expected);
            assert_eq!(expected, message);
            // Read back, a message is JSON, and equal to the message it was.
            let back: Message = serde_json::from_value(expected.clone()).unwrap();
            assert!(matches!(back, Message::Json(_)));
            assert_eq!(back, message);
            assert_eq!(message, back);
        }
    }

    #[test]
    fn only_json_messages_are_borrowed_as_json() {
        let user = Message::from(json!({"role": "user", "content": "hi"}));
        assert_eq!(
            user.as_json(),
            Some(&json!({"role": "user", "content": "hi"}))
        );
        let result = Message::ChatToolResult {
            tool_call_id: "c1".into(),
            content: "4".into(),
        };
        assert_eq!(result.as_json(), None);
        assert_ne!(result, json!({"role": "tool", "tool_call_id": "c1"}));
        let output = Message::FunctionCallOutput {
            call_id: "c1".into(),
            output: "4".into(),
        };
        assert_ne!(result, output);
        assert_ne!(
            result,
            Message::ChatToolResult {
                tool_call_id: "c2".into(),
                content: "4".into(),
            }
        );
    }
}
