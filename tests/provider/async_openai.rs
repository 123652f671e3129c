//! async-openai's types in and out: tools, a response, the next messages, a request of its own
//! type, for Chat Completions and Responses.

use dsh_tools::provider::async_openai_types::types::chat::{
    CreateChatCompletionRequestArgs, CreateChatCompletionResponse,
};
use dsh_tools::provider::async_openai_types::types::responses::{
    CreateResponseArgs, InputParam, Response,
};
use dsh_tools::provider::{Provider, ProviderError, ToolLoop};
use serde_json::{Value, json};

use crate::responses::fixture;
use crate::support::registry;

/// `value` without object members that are `null` (typed models skip absent options).
fn without_nulls(value: &Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.iter()
                .filter(|(_, v)| !v.is_null())
                .map(|(k, v)| (k.clone(), without_nulls(v)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(without_nulls).collect()),
        other => other.clone(),
    }
}

#[tokio::test]
async fn a_chat_completion_round_trip_in_async_openai_types() {
    let registry = registry();
    let mut tool_loop = ToolLoop::new(&registry, None, Provider::OpenAiChat);
    let (tools, system) = tool_loop.chat_completion_tools().unwrap();
    assert_eq!(tools.len(), 7);
    assert_eq!(system, None);
    let response: CreateChatCompletionResponse =
        serde_json::from_value(fixture(Provider::OpenAiChat)).expect("async-openai reads it");
    let typed = tool_loop.step_chat_completion(&response).await.unwrap();
    assert_eq!(typed.step.results[0].value(), Some(&json!(3)));
    assert_eq!(typed.messages.len(), typed.step.messages.len());
    for (message, built) in typed.messages.iter().zip(&typed.step.messages) {
        assert_eq!(
            without_nulls(&serde_json::to_value(message).unwrap()),
            without_nulls(&built.to_value())
        );
    }
    let request = CreateChatCompletionRequestArgs::default()
        .model("gpt-4.1")
        .messages(typed.messages)
        .tools(tools)
        .build()
        .unwrap();
    let body = serde_json::to_value(&request).unwrap();
    assert_eq!(body["messages"][1]["tool_call_id"], "call_add");
    assert_eq!(body["tools"][1]["function"]["strict"], true);
}

#[tokio::test]
async fn a_responses_round_trip_in_async_openai_types() {
    let registry = registry();
    let mut tool_loop = ToolLoop::new(&registry, None, Provider::OpenAiResponses);
    let (tools, _) = tool_loop.response_tools().unwrap();
    assert_eq!(tools.len(), 7);
    let response: Response =
        serde_json::from_value(fixture(Provider::OpenAiResponses)).expect("async-openai reads it");
    let typed = tool_loop.step_response(&response).await.unwrap();
    assert_eq!(
        typed.step.results[1].value(),
        Some(&json!({"query": "rust", "limit_given": false}))
    );
    assert_eq!(typed.messages.len(), typed.step.messages.len());
    let request = CreateResponseArgs::default()
        .model("gpt-4.1")
        .input(InputParam::Items(typed.messages))
        .tools(tools)
        .build()
        .unwrap();
    let body = serde_json::to_value(&request).unwrap();
    assert_eq!(body["input"][7]["type"], "function_call_output");
    assert_eq!(body["input"][7]["call_id"], "call_add");
}

#[test]
fn an_adapter_of_another_provider_is_a_typed_error() {
    let registry = registry();
    let mut tool_loop = ToolLoop::new(&registry, None, Provider::Anthropic);
    let error = tool_loop.chat_completion_tools().unwrap_err();
    assert_eq!(
        error,
        ProviderError::WrongProvider {
            expected: Provider::OpenAiChat,
            found: Provider::Anthropic
        }
    );
}
