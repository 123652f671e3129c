//! rig: a rig agent, driven by a scripted OpenAI Chat Completions model, runs the registry's
//! tools through the pipeline; an approval denial, a timeout and invalid arguments reach rig as
//! tool errors.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use dsh_tools::guards::TimeoutPolicy;
use dsh_tools::hooks::{ApprovalOutcome, ApprovalRequest, PreDecision, PreNext, ToolCallView};
use dsh_tools::provider::rig_agent::AgentBuilder;
use dsh_tools::provider::rig_core::driver::{Exchange, Model, Opened, Opening, Transport};
use dsh_tools::provider::rig_core::providers::openai::OpenAIConfig;
use dsh_tools::provider::rig_core::providers::openai::wire::Chat;
use dsh_tools::provider::rig_core::tool::ToolErrorKind;
use dsh_tools::provider::rig_core::wire::{Body, Encoded, WireFrame};
use dsh_tools::provider::{Provider, ToolLoop};
use dsh_tools::{Registry, ToolDefinition, ToolExec};
use serde_json::{Value, json};

/// A completion model answering each request with the next canned Chat Completions body, and
/// keeping the requests it was sent.
#[derive(Clone, Default)]
struct Scripted {
    answers: Arc<Mutex<VecDeque<Value>>>,
    requests: Arc<Mutex<Vec<Value>>>,
}

impl Transport<Chat> for Scripted {
    fn send(&self, payload: Encoded, _exchange: Exchange) -> Opening<WireFrame> {
        if let Body::Bytes(bytes) = payload.request.body() {
            let request = serde_json::from_slice(bytes).expect("a JSON request");
            self.requests.lock().unwrap().push(request);
        }
        let answer = self
            .answers
            .lock()
            .unwrap()
            .pop_front()
            .expect("the script has an answer for every request");
        let frames = payload.framing.split(answer.to_string().as_bytes());
        Opening::ready(Opened::new(futures::stream::iter(
            frames.into_iter().map(Ok),
        )))
    }
}

fn completion(message: Value) -> Value {
    json!({"id": "chatcmpl-1", "object": "chat.completion", "created": 0, "model": "gpt-4.1",
        "choices": [{"index": 0, "message": message,
            "finish_reason": if message.get("tool_calls").is_some() { "tool_calls" } else { "stop" }}],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}})
}

fn call(id: &str, name: &str, arguments: Value) -> Value {
    json!({"id": id, "type": "function", "function": {"name": name, "arguments": arguments.to_string()}})
}

/// The approval requests the approver saw.
type Asked = Arc<Mutex<Vec<ApprovalRequest>>>;
/// Each result the pipeline published: the tool and its error code.
type Results = Arc<Mutex<Vec<(String, Option<String>)>>>;

/// `add`; `wipe`, which needs approval (the approver says no); `slow`, which runs until its
/// 50 ms timeout cancels it; `server.tool`, a name OpenAI refuses. Every result is recorded.
fn registry() -> (Registry, Asked, Results) {
    let registry = Registry::new();
    TimeoutPolicy::new().install(&registry);
    let tools = [
        super::support::add(),
        ToolDefinition::builder("wipe")
            .description("Wipes the disk.")
            .parameters(json!({"type": "object", "properties": {}}))
            .handler(|_, _| async { Ok(json!("wiped")) }),
        ToolDefinition::builder("slow")
            .description("Runs until cancelled.")
            .parameters(json!({"type": "object", "properties": {}}))
            .timeout_ms(50)
            .handler(|_, exec: ToolExec| async move {
                // Stops only when the timeout policy cancels it.
                exec.signal().cancelled().await;
                Ok(json!("stopped"))
            }),
        ToolDefinition::builder("server.tool")
            .description("An upstream tool.")
            .parameters(json!({"type": "object", "properties": {}}))
            .handler(|_, _| async { Ok(json!("upstream ran")) }),
    ];
    for tool in tools {
        registry.register(tool.build().unwrap()).unwrap();
    }
    registry.on_pre_execute(|view: Arc<ToolCallView>, next: PreNext| async move {
        if view.name == "wipe" {
            PreDecision::Ask {
                reason: Some("wiping is destructive".into()),
            }
        } else {
            next.run().await
        }
    });
    let asked = Arc::new(Mutex::new(Vec::new()));
    let record = asked.clone();
    registry.set_approver(move |request| {
        record.lock().unwrap().push(request);
        async { ApprovalOutcome::Rejected }
    });
    let results = Arc::new(Mutex::new(Vec::new()));
    let sink = results.clone();
    registry.on_result(move |call, result| {
        let code = result.error_code().map(|code| code.as_str().to_owned());
        sink.lock().unwrap().push((call.name.clone(), code));
    });
    (registry, asked, results)
}

#[tokio::test]
async fn a_rig_agent_runs_our_tools_through_the_pipeline_and_sees_failures_as_tool_errors() {
    let (registry, asked, results) = registry();
    let rig = ToolLoop::new(&registry, None, Provider::OpenAiChat)
        .rig_tools()
        .unwrap();
    assert_eq!(
        rig.renamed,
        [("server.tool".to_owned(), "server_tool".to_owned())]
    );
    let scripted = Scripted::default();
    scripted.answers.lock().unwrap().extend([
        completion(json!({"role": "assistant", "content": null, "tool_calls": [
            call("c1", "add", json!({"a": 2, "b": 2})),
            call("c2", "wipe", json!({})),
            call("c3", "slow", json!({})),
            call("c4", "add", json!({"a": "two", "b": 1})),
            call("c5", "server_tool", json!({})),
        ]})),
        completion(json!({"role": "assistant", "content": "done"})),
    ]);
    let wire = OpenAIConfig::new("test-key").chat("gpt-4.1");
    let agent = AgentBuilder::new(Model::new(wire, scripted.clone()))
        .dynamic_tools(rig.tools)
        .build();
    let response = agent
        .prompt("Add 2 and 2, then wipe.")
        .max_turns(3)
        .await
        .unwrap();
    assert_eq!(response.output(), "done");

    // Every call went through the pipeline: one result each, with the pipeline's codes.
    let mut seen = results.lock().unwrap().clone();
    seen.sort();
    let code = |code: &str| Some(code.to_owned());
    assert_eq!(
        seen,
        [
            ("add".to_owned(), None),
            ("add".to_owned(), code("INVALID_ARGS")),
            ("server.tool".to_owned(), None),
            ("slow".to_owned(), code("TOOL_TIMEOUT")),
            ("wipe".to_owned(), code("DENIED")),
        ]
    );
    let asked = asked.lock().unwrap();
    assert_eq!(asked.len(), 1, "the approver was asked once, for wipe");
    assert_eq!(asked[0].tool_name, "wipe");

    // rig recorded the failures as tool errors, the successes as results.
    let transcript = serde_json::to_value(&response.messages).unwrap();
    let mut tool_results = Vec::new();
    collect_tool_results(&transcript, &mut tool_results);
    let error_of = |name: &str| -> Vec<bool> {
        tool_results
            .iter()
            .filter(|result| result["name"] == name)
            .map(|result| result.get("is_error") == Some(&json!(true)))
            .collect()
    };
    assert_eq!(error_of("wipe"), [true], "{transcript:#}");
    assert_eq!(error_of("slow"), [true], "{transcript:#}");
    let mut add = error_of("add");
    add.sort();
    assert_eq!(add, [false, true], "{transcript:#}");
    assert_eq!(error_of("server_tool"), [false], "{transcript:#}");

    // The second request carried the results to the model: the sum, and the model-facing errors.
    let requests = scripted.requests.lock().unwrap();
    assert_eq!(requests.len(), 2);
    let sent = requests[1].to_string();
    for expected in [
        "the user rejected tool",
        "timed out",
        "invalid arguments",
        "upstream ran",
    ] {
        assert!(sent.contains(expected), "{expected} missing from {sent}");
    }
    // The tools were offered under names OpenAI accepts.
    let offered: Vec<&str> = requests[0]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|tool| tool["function"]["name"].as_str().unwrap())
        .collect();
    assert!(offered.contains(&"server_tool"), "{offered:?}");
}

/// Every object with `"type": "tool_result"` in `value`, however deep.
fn collect_tool_results<'a>(value: &'a Value, out: &mut Vec<&'a Value>) {
    match value {
        Value::Object(map) => {
            if map.contains_key("is_error")
                || (map.contains_key("call") && map.contains_key("content"))
            {
                out.push(value);
            }
            map.values()
                .for_each(|child| collect_tool_results(child, out));
        }
        Value::Array(items) => items
            .iter()
            .for_each(|child| collect_tool_results(child, out)),
        _ => {}
    }
}

#[tokio::test]
async fn a_rig_tool_called_directly_gives_the_pipeline_failure_as_a_typed_error() {
    let (registry, _, _) = registry();
    let rig = ToolLoop::new(&registry, None, Provider::OpenAiChat)
        .rig_tools()
        .unwrap();
    let tool = |name: &str| {
        rig.tools
            .iter()
            .find(|tool| tool.name().as_str() == name)
            .unwrap_or_else(|| panic!("no rig tool {name}"))
    };
    let sum = tool("add").execute(json!({"a": 2, "b": 3})).await.unwrap();
    assert_eq!(sum.render(), "5");
    for (name, arguments, kind, code) in [
        ("wipe", json!({}), ToolErrorKind::PermissionDenied, "DENIED"),
        ("slow", json!({}), ToolErrorKind::Timeout, "TOOL_TIMEOUT"),
        (
            "add",
            json!({"a": "two", "b": 1}),
            ToolErrorKind::InvalidArgs,
            "INVALID_ARGS",
        ),
    ] {
        let error = tool(name).execute(arguments).await.unwrap_err();
        assert_eq!(error.kind(), kind, "{name}");
        assert_eq!(error.code(), Some(code), "{name}");
        assert!(
            error.model_output().render().starts_with("Error: "),
            "{name}"
        );
    }
}
