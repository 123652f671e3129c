//! Streams: OpenAI `tool_calls` deltas and Anthropic `input_json_delta`s assembled into the
//! response a non-streamed request returns; a stream cut short fails only the cut call.

use dsh_tools::provider::{AnthropicStream, OpenAiChatStream, Provider, StreamError, StreamLimits};
use dsh_tools::result::ErrorCode;
use serde_json::{Value, json};

use crate::responses::step;

/// Chat Completions chunks: text, then two calls whose arguments arrive in pieces, interleaved.
pub(crate) fn openai_chunks(cut_short: bool) -> Vec<Value> {
    let chunk = |delta: Value, finish: Value| {
        json!({"id": "chatcmpl-1", "object": "chat.completion.chunk",
        "created": 1765000000, "model": "gpt-4.1", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
    };
    let call = |index: u64, id: Option<&str>, name: Option<&str>, args: &str| {
        let mut fragment = json!({"index": index, "function": {"arguments": args}});
        if let Some(id) = id {
            fragment["id"] = json!(id);
            fragment["type"] = json!("function");
        }
        if let Some(name) = name {
            fragment["function"]["name"] = json!(name);
        }
        fragment
    };
    let mut chunks = vec![
        chunk(
            json!({"role": "assistant", "content": "Adding"}),
            Value::Null,
        ),
        chunk(json!({"content": " twice."}), Value::Null),
        chunk(
            json!({"tool_calls": [call(0, Some("call_1"), Some("add"), "")]}),
            Value::Null,
        ),
        chunk(
            json!({"tool_calls": [call(0, None, None, "{\"a\": 1,")]}),
            Value::Null,
        ),
        chunk(
            json!({"tool_calls": [call(1, Some("call_2"), Some("search"), "{\"query\"")]}),
            Value::Null,
        ),
        chunk(
            json!({"tool_calls": [call(0, None, None, " \"b\": 2}")]}),
            Value::Null,
        ),
        chunk(
            json!({"tool_calls": [call(1, None, None, ": \"x\", \"limit\": null}")]}),
            Value::Null,
        ),
        chunk(json!({}), json!("tool_calls")),
    ];
    if cut_short {
        chunks.truncate(6);
    }
    chunks
}

#[tokio::test]
async fn openai_tool_call_deltas_assemble_into_calls() {
    for cut_short in [false, true] {
        let mut stream = OpenAiChatStream::new();
        for chunk in openai_chunks(cut_short) {
            stream.push(&chunk).unwrap();
        }
        let response = stream.finish();
        let (step, _) = step(Provider::OpenAiChat, &response).await;
        assert_eq!(step.text, "Adding twice.");
        assert_eq!(step.calls()[0].id, "call_1");
        assert_eq!(step.results[0].value(), Some(&json!(3)));
        if cut_short {
            assert_eq!(step.results[1].error_code(), Some(ErrorCode::InvalidArgs));
            assert!(
                step.results[1].text().contains("truncated"),
                "{}",
                step.results[1].text()
            );
        } else {
            assert_eq!(
                step.results[1].value(),
                Some(&json!({"query": "x", "limit_given": false}))
            );
        }
    }
}

/// Anthropic events: text, then a tool_use whose input arrives as partial JSON.
pub(crate) fn anthropic_events(cut_short: bool) -> Vec<Value> {
    let mut events = vec![
        json!({"type": "message_start", "message": {"id": "msg_1", "type": "message", "role": "assistant",
            "model": "claude-sonnet-4-5", "content": [], "stop_reason": null, "stop_sequence": null,
            "usage": {"input_tokens": 10, "output_tokens": 1}}}),
        json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
        json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Adding"}}),
        json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": " now."}}),
        json!({"type": "content_block_stop", "index": 0}),
        json!({"type": "content_block_start", "index": 1, "content_block": {"type": "tool_use", "id": "toolu_1", "name": "add", "input": {}}}),
        json!({"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": ""}}),
        json!({"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": "{\"a\": 5,"}}),
        json!({"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": " \"b\": 6}"}}),
        json!({"type": "content_block_stop", "index": 1}),
        json!({"type": "content_block_start", "index": 2, "content_block": {"type": "tool_use", "id": "toolu_2", "name": "snapshot", "input": {}}}),
        json!({"type": "content_block_stop", "index": 2}),
        json!({"type": "message_delta", "delta": {"stop_reason": "tool_use", "stop_sequence": null}, "usage": {"output_tokens": 30}}),
        json!({"type": "message_stop"}),
    ];
    if cut_short {
        events.truncate(8);
    }
    events
}

#[tokio::test]
async fn anthropic_input_json_deltas_assemble_into_calls() {
    for cut_short in [false, true] {
        let mut stream = AnthropicStream::new();
        for event in anthropic_events(cut_short) {
            stream.push(&event).unwrap();
        }
        let response = stream.finish();
        let (step, _) = step(Provider::Anthropic, &response).await;
        assert_eq!(step.text, "Adding now.");
        if cut_short {
            assert_eq!(step.calls().len(), 1);
            assert!(
                step.results[0].text().contains("truncated"),
                "{}",
                step.results[0].text()
            );
            // The turn sent back carries an object input, whatever arrived.
            assert_eq!(
                step.messages[0].to_value()["content"][1]["input"],
                json!({})
            );
        } else {
            assert_eq!(step.results[0].value(), Some(&json!(11)));
            // A tool_use without input deltas keeps its start input.
            assert!(!step.results[1].is_error());
            assert_eq!(
                step.messages[0].to_value()["content"][1]["input"],
                json!({"a": 5, "b": 6})
            );
            assert_eq!(
                step.messages[0].to_value()["content"][0]["text"],
                "Adding now."
            );
        }
    }
}

#[test]
fn streams_are_bounded() {
    let limits = StreamLimits {
        max_bytes: 64,
        max_calls: 2,
    };
    let mut stream = OpenAiChatStream::with_limits(limits);
    let big = json!({"choices": [{"index": 0, "delta": {"content": "x".repeat(65)}}]});
    assert_eq!(
        stream.push(&big),
        Err(StreamError::TooManyBytes { limit: 64 })
    );
    let many = json!({"choices": [{"index": 0, "delta": {"tool_calls": [
        {"index": 0, "id": "a"}, {"index": 7, "id": "b"}, {"index": 4_000_000_000u64, "id": "c"}]}}]});
    assert_eq!(
        stream.push(&many),
        Err(StreamError::TooManyCalls { limit: 2 })
    );
    assert_eq!(
        stream.finish()["choices"][0]["message"].get("tool_calls"),
        None,
        "a refused chunk is not taken"
    );
    let mut stream = AnthropicStream::with_limits(limits);
    for index in 0..2 {
        stream.push(&json!({"type": "content_block_start", "index": index, "content_block": {"type": "text", "text": ""}})).unwrap();
    }
    let third = json!({"type": "content_block_start", "index": 9, "content_block": {"type": "text", "text": ""}});
    assert_eq!(
        stream.push(&third),
        Err(StreamError::TooManyCalls { limit: 2 })
    );
    let delta = json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "y".repeat(100)}});
    assert_eq!(
        stream.push(&delta),
        Err(StreamError::TooManyBytes { limit: 64 })
    );
}
