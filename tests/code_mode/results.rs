//! `run_code` results against a scripted code runtime (no interpreter, no clock): failures win
//! over cancellation, the missing-runtime text, the runtime's own output-limit text, the
//! description texts, error codes reaching the program through the binding bridge, and a
//! completion too dense to decode or too deep for a tool value handed on as its text (also
//! through a durable journal).

use std::sync::{Arc, Mutex};

use dsh_tools::code::{
    BindingCall, CodeRunFailure, CodeRuntime, CodeRuntimeError, FailureKind, Isolation, JsonText,
    RunOutcome, RunRequest,
};
use dsh_tools::prelude::*;
use dsh_tools::result::ErrorCode;
use dsh_tools::{Mode, Registry, ToolCall, ToolDefinition, ToolError};
use futures::future::BoxFuture;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

/// What the scripted runtime does with a run.
#[derive(Clone)]
enum Script {
    /// Waits until the run signal is cancelled, then fails with this kind and message.
    FailOnCancel(FailureKind, &'static str),
    /// Calls the binding `name` with `args` and returns the failure the bridge answered.
    Call(&'static str, Value),
    /// Returns this completion, noting `run` in the calls.
    Return(JsonText),
}

struct Scripted {
    language: &'static str,
    script: Script,
    calls: Arc<Mutex<Vec<String>>>,
}

impl CodeRuntime for Scripted {
    fn language(&self) -> &'static str {
        self.language
    }

    fn isolation(&self) -> Isolation {
        Isolation::WorkerThread
    }

    fn run(&self, request: RunRequest) -> BoxFuture<'_, Result<RunOutcome, CodeRuntimeError>> {
        let script = self.script.clone();
        let calls = self.calls.clone();
        Box::pin(async move {
            match script {
                Script::Return(value) => {
                    calls.lock().unwrap().push("run".to_owned());
                    Ok(RunOutcome {
                        value: Some(value),
                        logs: vec!["log".to_owned()],
                        error: None,
                        sandbox: None,
                    })
                }
                Script::FailOnCancel(kind, message) => {
                    request.signal.cancelled().await;
                    Ok(RunOutcome {
                        value: None,
                        sandbox: None,
                        logs: vec!["partial".to_owned()],
                        error: Some(CodeRunFailure {
                            kind,
                            message: message.to_owned(),
                        }),
                    })
                }
                Script::Call(name, args) => {
                    let namespace = &request.bindings[0];
                    let class = namespace.error_class.clone().unwrap();
                    calls
                        .lock()
                        .unwrap()
                        .push(class.member_name_property.clone());
                    let dispatch = request.dispatch.clone().unwrap();
                    let answer = dispatch(BindingCall::new(
                        namespace.global.clone(),
                        name,
                        args,
                        request.signal.clone(),
                    ))
                    .await;
                    let error = answer.expect_err("the call fails");
                    Ok(RunOutcome {
                        value: Some(JsonText::from_value(
                            &json!({"message": error.message, "code": error.code}),
                        )),
                        logs: Vec::new(),
                        error: None,
                        sandbox: None,
                    })
                }
            }
        })
    }

    fn dispose(&self) -> BoxFuture<'_, ()> {
        Box::pin(async {})
    }
}

fn registry(language: &'static str, script: Script) -> (Registry, Arc<Mutex<Vec<String>>>) {
    let registry = Registry::new();
    let calls = Arc::new(Mutex::new(Vec::new()));
    registry.set_code_runtime(Arc::new(Scripted {
        language,
        script,
        calls: calls.clone(),
    }));
    registry.set_mode(Mode::Code);
    (registry, calls)
}

fn run_code(signal: CancellationToken) -> ToolCall {
    ToolCall::new(
        "run",
        "run_code",
        json!({"code": "return 1", "description": "Return one"}),
    )
    .with_signal(signal)
}

/// Failures win over cancellation: a run that hits a budget while the caller cancels keeps its
/// failure, with the runtime's own text and the captured output.
#[tokio::test]
async fn a_failed_run_keeps_its_failure_when_the_caller_cancels() {
    let (registry, _) = registry(
        "typescript",
        Script::FailOnCancel(FailureKind::OutputLimit, "outer output exceeded 200 bytes"),
    );
    let signal = CancellationToken::new();
    // The scripted run waits for this cancellation: no clock involved.
    let (result, ()) = tokio::join!(registry.execute(run_code(signal.clone())), async {
        tokio::task::yield_now().await;
        signal.cancel();
    });
    assert_eq!(
        result.error_code(),
        Some(ErrorCode::CodeRunFailed),
        "{result:?}"
    );
    assert_eq!(
        result.error().unwrap().message,
        "code run failed (output-limit): outer output exceeded 200 bytes\nCaptured output:\npartial"
    );
}

/// The runtime stopping the program because the caller cancelled is the cancellation itself:
/// `ABORTED`.
#[tokio::test]
async fn a_run_aborted_by_the_caller_reads_aborted() {
    let (registry, _) = registry(
        "python",
        Script::FailOnCancel(FailureKind::Abort, "aborted"),
    );
    let signal = CancellationToken::new();
    let (result, ()) = tokio::join!(registry.execute(run_code(signal.clone())), async {
        tokio::task::yield_now().await;
        signal.cancel();
    });
    assert_eq!(result.error_code(), Some(ErrorCode::Aborted), "{result:?}");
}

/// In code mode without a runtime, `run_code` says it requires one.
#[tokio::test]
async fn run_code_without_a_runtime_says_it_requires_one() {
    let registry = Registry::new();
    registry.set_mode(Mode::Code);
    let result = registry.execute(run_code(CancellationToken::new())).await;
    let message = &result.error().unwrap().message;
    assert!(message.contains("requires a code runtime"), "{message}");
    assert!(!message.starts_with("unknown tool"), "{message}");
}

/// Both flavours of the `run_code` description explain the `description` argument.
#[test]
fn both_run_code_descriptions_mention_the_description_argument() {
    for language in ["typescript", "python"] {
        let (registry, _) = registry(language, Script::FailOnCancel(FailureKind::Abort, ""));
        let run_code = registry.get("run_code", None).expect("run_code");
        assert!(
            run_code.description().contains("`description`"),
            "{language}: {}",
            run_code.description()
        );
    }
}

/// The program's `ToolCallError` carries the code of the failure — the author's code,
/// `INVALID_ARGS` for bad arguments — and its message stays the plain message. In Python the
/// tool-name attribute is `tool_name` (Python attributes are snake_case).
#[tokio::test]
async fn binding_failures_carry_their_error_code() {
    for (language, member) in [("typescript", "toolName"), ("python", "tool_name")] {
        for (tool, args, code, message) in [
            ("broken", json!({}), json!("EBROKEN"), "broken on purpose"),
            ("plain", json!({}), Value::Null, "plain failure"),
            (
                "typed",
                json!({"n": "x"}),
                json!("INVALID_ARGS"),
                "invalid arguments: \"n\" must be an integer",
            ),
        ] {
            let (registry, calls) = registry(language, Script::Call(tool, args));
            registry
                .register(
                    ToolDefinition::builder("broken")
                        .handler(|_, _| async {
                            Err(ToolError::new("broken on purpose").with_code("EBROKEN"))
                        })
                        .build()
                        .unwrap(),
                )
                .unwrap();
            registry
                .register(
                    ToolDefinition::builder("plain")
                        .handler(|_, _| async { Err(ToolError::new("plain failure")) })
                        .build()
                        .unwrap(),
                )
                .unwrap();
            registry
                .register(
                    ToolDefinition::builder("typed")
                        .parameters(
                            json!({"type": "object", "properties": {"n": {"type": "integer"}}}),
                        )
                        .handler(|args, _| async move { Ok(args) })
                        .build()
                        .unwrap(),
                )
                .unwrap();
            let result = registry.execute(run_code(CancellationToken::new())).await;
            let value = result
                .value()
                .cloned()
                .unwrap_or_else(|| panic!("{result:?}"));
            assert_eq!(
                value["result"],
                json!({"message": message, "code": code}),
                "{language} {tool}"
            );
            assert_eq!(calls.lock().unwrap().as_slice(), [member.to_owned()]);
        }
    }
}

/// A completion whose tree would take more than its text plus 16 MiB (200,000 ones: 400 KB of
/// JSON, some 32 MB as a tree) is handed on as its compact text: `result` is that string and
/// the model reads it after the logs. A small completion renders as pretty JSON, as always.
#[tokio::test]
async fn a_completion_too_dense_to_decode_is_handed_on_as_its_text() {
    let ones = JsonText::from_value(&Value::from(vec![1; 200_000]));
    let text = ones.as_str().to_owned();
    let (dense, _) = registry("typescript", Script::Return(ones));
    let result = dense.execute(run_code(CancellationToken::new())).await;
    let value = result.value().unwrap_or_else(|| panic!("{result:?}"));
    assert_eq!(value["logs"], json!(["log"]));
    assert_eq!(
        value.get("result"),
        None,
        "a dense completion is not taken for a string"
    );
    assert_eq!(value["resultJson"].as_str(), Some(text.as_str()));
    assert_eq!(result.text(), format!("log\n{text}"));
    let small = JsonText::from_value(&json!({"a": [1, 2]}));
    let (sparse, _) = registry("typescript", Script::Return(small));
    let result = sparse.execute(run_code(CancellationToken::new())).await;
    assert_eq!(result.value().unwrap()["result"], json!({"a": [1, 2]}));
    assert_eq!(result.text(), "log\n{\n  \"a\": [\n    1,\n    2\n  ]\n}");
}

/// A completion nested deeper than the pipeline lets a tool's value nest (255 levels under
/// `run_code`'s wrapper) is handed on as its compact text too, never refused as
/// `INVALID_TOOL_OUTPUT`; one within it stays a tree.
#[tokio::test]
async fn a_completion_nested_deeper_than_tool_values_is_handed_on_as_its_text() {
    let nested = |depth: usize| {
        let text = format!("{}1{}", "[".repeat(depth), "]".repeat(depth));
        // serde_json's default recursion limit (128) would refuse the deeper texts.
        let mut de = serde_json::Deserializer::from_str(&text);
        de.disable_recursion_limit();
        let completion = <JsonText as serde::Deserialize>::deserialize(&mut de).expect("JSON");
        (completion, text)
    };
    for depth in [256, 4_096] {
        let (completion, text) = nested(depth);
        let (registry, _) = registry("python", Script::Return(completion));
        let result = registry.execute(run_code(CancellationToken::new())).await;
        assert_eq!(result.error_code(), None, "{depth}: {}", result.text());
        let value = result.value().expect("a value");
        assert_eq!(value["resultJson"].as_str(), Some(text.as_str()), "{depth}");
        assert_eq!(result.text(), format!("log\n{text}"));
    }
    let (completion, _) = nested(255);
    let (registry, _) = registry("python", Script::Return(completion));
    let result = registry.execute(run_code(CancellationToken::new())).await;
    assert_eq!(result.error_code(), None, "{}", result.text());
    assert!(result.value().expect("a value")["result"].is_array());
}

/// A durable run's journal keeps such a result: the finished run answers a repeated call from
/// the journal, without running the program, with the same value and the same text.
#[cfg(feature = "durable")]
#[tokio::test]
async fn a_durable_run_keeps_a_completion_handed_on_as_text() {
    use dsh_tools::durable::{DurableRun, JournalStore, SqliteJournal};
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn JournalStore> =
        Arc::new(SqliteJournal::open(dir.path().join("journal.db")).unwrap());
    let ones = JsonText::from_value(&Value::from(vec![1; 200_000]));
    let text = ones.as_str().to_owned();
    let (registry, runs) = registry("typescript", Script::Return(ones));
    let call =
        || run_code(CancellationToken::new()).durable(DurableRun::new(store.clone(), "dense"));
    let first = registry.execute(call()).await;
    assert_eq!(
        first.value().unwrap()["resultJson"].as_str(),
        Some(text.as_str())
    );
    assert_eq!(first.text(), format!("log\n{text}"));
    let again = registry.execute(call()).await;
    assert_eq!(again.value(), first.value());
    assert_eq!(again.content(), first.content());
    // The second answer came from the journal: the program ran once.
    assert_eq!(runs.lock().unwrap().len(), 1);
}
