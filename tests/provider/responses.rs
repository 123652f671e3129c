//! Responses in each provider's documented shape parse into the right calls, every call ends in
//! exactly one result, and the next request's messages are in the provider's form and order.

use std::sync::{Arc, Mutex};

use dsh_tools::hooks::{PreNext, ToolCallView};
use dsh_tools::provider::{Message, Provider, Step, ToolLoop};
use dsh_tools::result::ErrorCode;
use serde_json::{Value, json};

use crate::support::{PIXEL, at, registry, values};

pub(crate) fn fixture(provider: Provider) -> Value {
    let path = format!(
        "{}/tests/provider/fixtures/{provider}.json",
        env!("CARGO_MANIFEST_DIR")
    );
    serde_json::from_str(&std::fs::read_to_string(path).expect("fixture")).expect("fixture JSON")
}

const NAMES: [&str; 6] = ["add", "search", "nope", "snapshot", "note", "fail"];

/// Runs `response` through a strict loop and counts the results the pipeline published per call id.
pub(crate) async fn step(provider: Provider, response: &Value) -> (Step, Vec<String>) {
    let registry = registry();
    let published = Arc::new(Mutex::new(Vec::new()));
    let seen = published.clone();
    registry.on_result(move |call, _| seen.lock().unwrap().push(call.call_id.clone()));
    let mut tool_loop = ToolLoop::new(&registry, None, provider);
    tool_loop.tools().expect("tools");
    let step = tool_loop
        .step(response.clone())
        .await
        .expect("a response of the provider's shape");
    let published = published.lock().unwrap().clone();
    (step, published)
}

/// The six calls of every fixture: text beside parallel calls, a strict null, an unknown tool,
/// an image, a context, a failing body.
fn check_fixture_results(step: &Step) {
    assert_eq!(step.text, "I will add, search and look.");
    let names: Vec<&str> = step.calls().iter().map(|call| call.name).collect();
    assert_eq!(names, NAMES);
    assert_eq!(step.results.len(), 6, "one result per call");
    assert_eq!(step.results[0].value(), Some(&json!(3)));
    // `limit: null` under strict mode means "absent": normalised before validation.
    assert_eq!(
        step.results[1].value(),
        Some(&json!({"query": "rust", "limit_given": false}))
    );
    assert_eq!(step.results[2].error_code(), Some(ErrorCode::UnknownTool));
    assert!(!step.results[3].is_error());
    assert_eq!(step.results[4].additional_contexts().len(), 1);
    assert_eq!(step.results[5].text(), "Error: disk full");
    assert!(!step.done, "calls were made: the model speaks next");
}

#[tokio::test]
async fn openai_chat_fixture() {
    let (step, published) = step(Provider::OpenAiChat, &fixture(Provider::OpenAiChat)).await;
    check_fixture_results(&step);
    assert_eq!(
        published.len(),
        6,
        "each call through the pipeline once: {published:?}"
    );
    let m = &values(&step.messages);
    // assistant, 6 tool messages, the image as a user message, the context.
    assert_eq!(m.len(), 9, "{m:#?}");
    assert_eq!(at(&m[0], "/role"), "assistant");
    assert_eq!(
        at(&m[0], "/tool_calls/1/function/arguments"),
        "{\"query\": \"rust\", \"limit\": null}"
    );
    for (index, id) in [
        "call_add",
        "call_search",
        "call_nope",
        "call_snap",
        "call_note",
        "call_fail",
    ]
    .iter()
    .enumerate()
    {
        assert_eq!(at(&m[index + 1], "/role"), "tool");
        assert_eq!(at(&m[index + 1], "/tool_call_id"), id);
    }
    assert_eq!(at(&m[1], "/content"), "3");
    assert!(
        at(&m[3], "/content")
            .as_str()
            .unwrap()
            .starts_with("Error: unknown tool \"nope\"")
    );
    assert_eq!(at(&m[4], "/content"), "a screenshot");
    assert_eq!(at(&m[6], "/content"), "Error: disk full");
    assert_eq!(at(&m[7], "/role"), "user");
    assert_eq!(
        at(&m[7], "/content/1/image_url/url"),
        &format!("data:image/png;base64,{PIXEL}")
    );
    assert_eq!(at(&m[8], "/content/0/text"), "remember: the note was taken");
}

#[tokio::test]
async fn openai_responses_fixture() {
    let (step, published) = step(
        Provider::OpenAiResponses,
        &fixture(Provider::OpenAiResponses),
    )
    .await;
    check_fixture_results(&step);
    assert_eq!(published.len(), 6);
    let m = &values(&step.messages);
    // 7 output items echoed, 6 outputs, the context (images travel inside their output).
    assert_eq!(m.len(), 14, "{m:#?}");
    assert_eq!(at(&m[0], "/type"), "message");
    for index in 0..6 {
        assert_eq!(at(&m[7 + index], "/type"), "function_call_output");
        assert_eq!(at(&m[7 + index], "/call_id"), at(&m[1 + index], "/call_id"));
    }
    assert_eq!(at(&m[10], "/output/0/text"), "a screenshot");
    assert_eq!(at(&m[10], "/output/1/type"), "input_image");
    assert_eq!(at(&m[12], "/output"), "Error: disk full");
    assert_eq!(at(&m[13], "/content/0/type"), "input_text");
}

#[tokio::test]
async fn anthropic_fixture() {
    let (step, published) = step(Provider::Anthropic, &fixture(Provider::Anthropic)).await;
    check_fixture_results(&step);
    assert_eq!(published.len(), 6);
    let m = &values(&step.messages);
    // assistant, one user message of 6 tool_result blocks, the context.
    assert_eq!(m.len(), 3, "{m:#?}");
    let blocks = at(&m[1], "/content").as_array().unwrap();
    assert_eq!(blocks.len(), 6);
    let ids: Vec<&str> = blocks
        .iter()
        .map(|b| b["tool_use_id"].as_str().unwrap())
        .collect();
    assert_eq!(
        ids,
        [
            "toolu_add",
            "toolu_search",
            "toolu_nope",
            "toolu_snap",
            "toolu_note",
            "toolu_fail"
        ]
    );
    let errors: Vec<bool> = blocks.iter().map(|b| b.get("is_error").is_some()).collect();
    assert_eq!(errors, [false, false, true, false, false, true]);
    assert_eq!(at(&blocks[3], "/content/1/source/data"), PIXEL);
    assert_eq!(at(&m[2], "/content/0/text"), "remember: the note was taken");
}

#[tokio::test]
async fn gemini_fixture_with_and_without_ids() {
    let (step, published) = step(Provider::Gemini, &fixture(Provider::Gemini)).await;
    check_fixture_results(&step);
    assert_eq!(published.len(), 6);
    assert!(
        step.calls()
            .iter()
            .skip(1)
            .all(|call| call.model_id.is_none() && call.error.is_none())
    );
    let m = &values(&step.messages);
    // model turn, one user content of 6 functionResponse parts, the image, the context.
    assert_eq!(m.len(), 4, "{m:#?}");
    assert_eq!(at(&m[0], "/role"), "model");
    let parts = at(&m[1], "/parts").as_array().unwrap();
    assert_eq!(parts.len(), 6);
    assert_eq!(at(&parts[0], "/functionResponse/id"), "g_add");
    assert_eq!(at(&parts[0], "/functionResponse/response/output"), "3");
    assert!(
        parts[1]["functionResponse"].get("id").is_none(),
        "no id invented for the provider"
    );
    assert_eq!(at(&parts[1], "/functionResponse/name"), "search");
    assert!(
        at(&parts[2], "/functionResponse/response/error")
            .as_str()
            .unwrap()
            .contains("unknown tool")
    );
    assert_eq!(at(&m[2], "/parts/1/inlineData/mimeType"), "image/png");
    assert_eq!(at(&m[3], "/parts/0/text"), "remember: the note was taken");
}

/// A response whose calls cannot all run, in `provider`'s shape: a good call, malformed and
/// truncated argument JSON, no id, no name.
pub(crate) fn hostile(provider: Provider) -> Value {
    let calls = [
        (Some("c1"), Some("add"), "{\"a\": 2, \"b\": 2}"),
        (Some("c2"), Some("add"), "{a: 1}"),
        (Some("c3"), Some("add"), "{\"a\": 1, \"b\""),
        (None, Some("add"), "{\"a\": 1, \"b\": 1}"),
        (Some("c5"), None, "{}"),
    ];
    match provider {
        Provider::OpenAiChat => {
            let calls: Vec<Value> = calls
                .iter()
                .map(|(id, name, args)| {
                    let mut call = json!({"type": "function", "function": {"arguments": args}});
                    if let Some(id) = id {
                        call["id"] = json!(id);
                    }
                    if let Some(name) = name {
                        call["function"]["name"] = json!(name);
                    }
                    call
                })
                .collect();
            json!({"choices": [{"index": 0, "finish_reason": "tool_calls",
                "message": {"role": "assistant", "content": null, "tool_calls": calls}}]})
        }
        Provider::OpenAiResponses => {
            let items: Vec<Value> = calls
                .iter()
                .map(|(id, name, args)| {
                    let mut item = json!({"type": "function_call", "arguments": args});
                    if let Some(id) = id {
                        item["call_id"] = json!(id);
                    }
                    if let Some(name) = name {
                        item["name"] = json!(name);
                    }
                    item
                })
                .collect();
            json!({"output": items})
        }
        // A streamed Anthropic answer carries its input as JSON text until it is parsed.
        Provider::Anthropic => {
            let blocks: Vec<Value> = calls
                .iter()
                .map(|(id, name, args)| {
                    let mut block = json!({"type": "tool_use", "input": args});
                    if let Some(id) = id {
                        block["id"] = json!(id);
                    }
                    if let Some(name) = name {
                        block["name"] = json!(name);
                    }
                    block
                })
                .collect();
            json!({"role": "assistant", "content": blocks})
        }
        Provider::Gemini => {
            let parts: Vec<Value> = calls
                .iter()
                .map(|(id, name, args)| {
                    let mut call = json!({"args": args});
                    if let Some(id) = id {
                        call["id"] = json!(id);
                    }
                    if let Some(name) = name {
                        call["name"] = json!(name);
                    }
                    json!({"functionCall": call})
                })
                .collect();
            json!({"candidates": [{"content": {"role": "model", "parts": parts}}]})
        }
        _ => unreachable!("every provider is listed"),
    }
}

#[tokio::test]
async fn calls_that_cannot_run_end_in_their_own_failure() {
    for provider in Provider::ALL {
        let (step, published) = step(provider, &hostile(provider)).await;
        assert_eq!(step.results.len(), 5, "{provider}");
        assert_eq!(step.results[0].value(), Some(&json!(4)), "{provider}");
        assert_eq!(
            step.results[1].error_code(),
            Some(ErrorCode::InvalidArgs),
            "{provider}"
        );
        assert!(
            step.results[1].text().contains("is malformed"),
            "{provider}: {}",
            step.results[1].text()
        );
        assert_eq!(
            step.results[2].error_code(),
            Some(ErrorCode::InvalidArgs),
            "{provider}"
        );
        assert!(
            step.results[2].text().contains("is truncated"),
            "{provider}: {}",
            step.results[2].text()
        );
        match provider {
            // Gemini's ids are optional: the call runs, its result is matched by name and order.
            Provider::Gemini => assert_eq!(step.results[3].value(), Some(&json!(2))),
            _ => {
                assert!(step.results[3].text().contains("has no id"), "{provider}");
                assert_eq!(step.calls()[3].id, "dsh_call_3");
            }
        }
        assert_eq!(
            step.results[4].error_code(),
            Some(ErrorCode::UnknownTool),
            "{provider}"
        );
        let ran = if provider == Provider::Gemini { 2 } else { 1 };
        assert_eq!(
            published.len(),
            ran,
            "{provider}: only runnable calls reach the pipeline"
        );
        // Every call id in the model's turn has exactly one result message.
        let ids = result_ids(provider, &values(&step.messages));
        let call_ids: Vec<String> = step.calls().iter().map(|call| call.id.to_owned()).collect();
        if provider == Provider::Gemini {
            assert_eq!(ids.len(), 5);
        } else {
            assert_eq!(ids, call_ids, "{provider}");
        }
    }
}

/// The calls are read from the model's turn sent back: the model's ids and names, the arguments
/// as the turn carries them, and the same calls from a parse alone.
#[tokio::test]
async fn calls_are_read_from_the_turn_sent_back() {
    for provider in Provider::ALL {
        let (step, _) = step(provider, &hostile(provider)).await;
        let calls = step.calls();
        assert_eq!(calls.len(), 5, "{provider}");
        assert_eq!(calls[0].model_id, Some("c1"), "{provider}");
        assert_eq!(calls[0].id, "c1", "{provider}");
        assert_eq!(calls[0].name, "add", "{provider}");
        assert_eq!(calls[0].model_name, "add", "{provider}");
        assert!(calls[0].error.is_none(), "{provider}");
        assert_eq!(*calls[0].arguments(), json!({"a": 2, "b": 2}), "{provider}");
        // Malformed arguments read as `{}`, their failure in the call's error.
        assert_eq!(*calls[1].arguments(), json!({}), "{provider}");
        assert!(calls[1].error.is_some(), "{provider}");
        if matches!(provider, Provider::OpenAiChat | Provider::OpenAiResponses) {
            assert_eq!(calls[1].raw_arguments, Some(&json!("{a: 1}")), "{provider}");
        }
        assert_eq!(calls[3].model_id, None, "{provider}");
        assert_eq!(calls[3].id, "dsh_call_3", "{provider}");
        assert_eq!(calls[4].name, "", "{provider}");
        let tool_loop = ToolLoop::new(&registry(), None, provider);
        let parsed = tool_loop.parse(hostile(provider)).expect("parsed");
        assert_eq!(parsed.calls(), calls, "{provider}");
        assert_eq!(
            parsed.assistant(),
            &values(&step.messages)[..parsed.assistant().len()]
        );
    }
}

#[tokio::test]
async fn a_well_formed_chat_call_and_one_repaired_read_the_same() {
    let answer = |call: Value| {
        json!({"choices": [{"index": 0, "message": {"role": "assistant", "content": null,
            "tool_calls": [call]}}]})
    };
    let well_formed = json!({"id": "c1", "type": "function",
        "function": {"name": "add", "arguments": "{\"a\": 2, \"b\": 3}"}});
    // A stream's `index`, a function's stray field, `type` missing: each repaired on the way.
    let repaired = [
        json!({"index": 0, "id": "c1", "type": "function",
            "function": {"name": "add", "arguments": "{\"a\": 2, \"b\": 3}"}}),
        json!({"id": "c1", "function": {"name": "add", "arguments": "{\"a\": 2, \"b\": 3}"}}),
        json!({"id": "c1", "type": "function",
            "function": {"name": "add", "arguments": "{\"a\": 2, \"b\": 3}", "x": 1}}),
    ];
    let (expected, _) = step(Provider::OpenAiChat, &answer(well_formed)).await;
    assert_eq!(expected.results[0].value(), Some(&json!(5)));
    // The result is held as its id and text, not a JSON object.
    assert!(matches!(
        &expected.messages[1],
        Message::ChatToolResult { tool_call_id, content } if tool_call_id == "c1" && content == "5"
    ));
    assert_eq!(
        values(&expected.messages),
        [
            json!({"role": "assistant", "content": null, "tool_calls": [{"id": "c1",
                "type": "function", "function": {"name": "add",
                "arguments": "{\"a\": 2, \"b\": 3}"}}]}),
            json!({"role": "tool", "tool_call_id": "c1", "content": "5"}),
        ]
    );
    for call in repaired {
        let (got, _) = step(Provider::OpenAiChat, &answer(call.clone())).await;
        assert_eq!(got.calls(), expected.calls(), "{call}");
        assert_eq!(got.results[0].value(), Some(&json!(5)), "{call}");
        // The repaired call is sent back in the request's form, keys in the request's order
        // apart from where the model put them.
        let turn = &values(&got.messages)[0]["tool_calls"][0];
        let mut keys: Vec<&str> = turn
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        keys.sort_unstable();
        assert_eq!(keys, ["function", "id", "type"], "{call}");
        assert_eq!(
            turn["function"],
            expected.messages[0].to_value()["tool_calls"][0]["function"]
        );
        assert_eq!(got.messages[1], expected.messages[1], "{call}");
    }
}

#[tokio::test]
async fn an_id_made_up_for_a_call_is_not_one_the_model_used() {
    let args = "{\"a\": 1, \"b\": 1}";
    let answers = [
        (
            Provider::OpenAiChat,
            json!({"choices": [{"index": 0, "message": {"role": "assistant", "content": null,
            "tool_calls": [
                {"id": "dsh_call_1", "type": "function", "function": {"name": "add", "arguments": args}},
                {"type": "function", "function": {"name": "add", "arguments": args}},
                {"id": "dsh_call_1_1", "type": "function", "function": {"name": "add", "arguments": args}},
            ]}}]}),
        ),
        (
            Provider::OpenAiResponses,
            json!({"output": [
                {"type": "function_call", "call_id": "dsh_call_1", "name": "add", "arguments": args},
                {"type": "function_call", "name": "add", "arguments": args},
                {"type": "function_call", "call_id": "dsh_call_1_1", "name": "add", "arguments": args},
            ]}),
        ),
        (
            Provider::Anthropic,
            json!({"content": [
                {"type": "tool_use", "id": "dsh_call_1", "name": "add", "input": {"a": 1, "b": 1}},
                {"type": "tool_use", "name": "add", "input": {"a": 1, "b": 1}},
                {"type": "tool_use", "id": "dsh_call_1_1", "name": "add", "input": {"a": 1, "b": 1}},
            ]}),
        ),
    ];
    for (provider, answer) in answers {
        let (step, _) = step(provider, &answer).await;
        let ids: Vec<&str> = step.calls().iter().map(|call| call.id).collect();
        assert_eq!(
            ids,
            ["dsh_call_1", "dsh_call_1_2", "dsh_call_1_1"],
            "{provider}"
        );
        assert_eq!(
            result_ids(provider, &values(&step.messages)),
            ids,
            "{provider}"
        );
        // Each id is sent twice: in the turn sent back, and in its result.
        let wire = serde_json::to_string(&step.messages).unwrap();
        for id in ids {
            let quoted = format!("\"{id}\"");
            assert_eq!(wire.matches(&quoted).count(), 2, "{provider}: {wire}");
        }
    }
}

/// The ids the result messages answer, in order (Gemini: names for calls without id).
pub(crate) fn result_ids(provider: Provider, messages: &[Value]) -> Vec<String> {
    let text = |value: &Value| value.as_str().unwrap_or_default().to_owned();
    match provider {
        Provider::OpenAiChat => messages
            .iter()
            .filter(|m| m["role"] == "tool")
            .map(|m| text(&m["tool_call_id"]))
            .collect(),
        Provider::OpenAiResponses => messages
            .iter()
            .filter(|m| m["type"] == "function_call_output")
            .map(|m| text(&m["call_id"]))
            .collect(),
        Provider::Anthropic => messages
            .iter()
            .flat_map(|m| m["content"].as_array().cloned().unwrap_or_default())
            .filter(|b| b["type"] == "tool_result")
            .map(|b| text(&b["tool_use_id"]))
            .collect(),
        Provider::Gemini => messages
            .iter()
            .flat_map(|m| m["parts"].as_array().cloned().unwrap_or_default())
            .filter_map(|p| p.get("functionResponse").cloned())
            .map(|r| text(r.get("id").unwrap_or(&r["name"])))
            .collect(),
        _ => unreachable!("every provider is listed"),
    }
}

#[tokio::test]
async fn a_response_without_calls_is_the_answer_and_a_concluding_call_ends_the_loop() {
    let (step, _) = step(
        Provider::OpenAiChat,
        &json!({"choices": [{"index": 0,
        "message": {"role": "assistant", "content": "Done."}}]}),
    )
    .await;
    assert!(step.done);
    assert_eq!(step.text, "Done.");
    assert_eq!(
        step.messages,
        vec![json!({"role": "assistant", "content": "Done."})]
    );
    let (step, _) = step_of(
        Provider::Anthropic,
        json!({"content": [
        {"type": "tool_use", "id": "t1", "name": "stop", "input": {}}]}),
    )
    .await;
    assert!(step.done, "the body concluded the turn");
}

async fn step_of(provider: Provider, response: Value) -> (Step, Vec<String>) {
    step(provider, &response).await
}

#[tokio::test]
async fn a_response_of_another_shape_is_a_typed_error_and_runs_nothing() {
    let registry = registry();
    for provider in Provider::ALL {
        let tool_loop = ToolLoop::new(&registry, None, provider);
        let error = tool_loop
            .step(json!({"unexpected": true}))
            .await
            .unwrap_err();
        assert!(error.to_string().contains(provider.as_str()), "{error}");
    }
    // Parts of an answer that are not of the API's shape are no empty answer either.
    let malformed = [
        (
            Provider::OpenAiChat,
            json!({"choices": [{"message": {"role": "assistant", "tool_calls": {"id": "c1"}}}]}),
        ),
        (
            Provider::OpenAiChat,
            json!({"choices": [{"message": {"role": "assistant", "tool_calls": "x"}}]}),
        ),
        (Provider::OpenAiResponses, json!({"output": [null]})),
        (
            Provider::Anthropic,
            json!({"content": [null, {"type": "text", "text": "hi"}]}),
        ),
        (Provider::Gemini, json!({"candidates": [null]})),
        (Provider::Gemini, json!({"candidates": ["x"]})),
    ];
    for (provider, answer) in malformed {
        let tool_loop = ToolLoop::new(&registry, None, provider);
        let error = tool_loop.step(answer.clone()).await.unwrap_err();
        assert!(
            error.to_string().contains("not"),
            "{provider} {answer}: {error}"
        );
    }
    // A Chat Completions choice whose message is not an object is not an empty answer.
    let tool_loop = ToolLoop::new(&registry, None, Provider::OpenAiChat);
    for message in [json!(null), json!("4"), json!([])] {
        let error = tool_loop
            .step(json!({"choices": [{"index": 0, "message": message}]}))
            .await
            .unwrap_err();
        assert!(error.to_string().contains("not an object"), "{error}");
    }
}

/// Strict mode's `null` for an optional property means "absent": hooks, guards and events see
/// the arguments without it. A tool not sent strict keeps the model's own `null`.
#[tokio::test]
async fn strict_nulls_are_absent_before_any_hook_sees_the_call() {
    for strict in [true, false] {
        let registry = registry();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let sink = seen.clone();
        registry.on_pre_execute(move |view: Arc<ToolCallView>, next: PreNext| {
            if view.name == "search" {
                sink.lock().unwrap().push(Value::clone(&view.arguments));
            }
            next.run()
        });
        let mut tool_loop = ToolLoop::new(&registry, None, Provider::OpenAiChat).strict(strict);
        tool_loop.tools().unwrap();
        tool_loop.step(fixture(Provider::OpenAiChat)).await.unwrap();
        let expected = if strict {
            json!({"query": "rust"})
        } else {
            json!({"query": "rust", "limit": null})
        };
        assert_eq!(*seen.lock().unwrap(), [expected], "strict: {strict}");
    }
}
