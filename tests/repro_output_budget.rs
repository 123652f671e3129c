//! Reproducers for the output contract as the README states it (section "Code mode").
#![cfg(feature = "code-mode")]

use std::sync::Arc;

use dsh_tools::code::{
    Budgets, CodeRuntime, FailureKind, RunRequest, SubprocessConfig, SubprocessRuntime,
};
use dsh_tools::serde_json::json;
use dsh_tools::{Mode, Registry, ToolCall};

async fn node(max_output_bytes: u64) -> SubprocessRuntime {
    let mut config = SubprocessConfig::default();
    config.budgets = Budgets {
        max_output_bytes,
        ..Budgets::default()
    };
    SubprocessRuntime::typescript(config).await.expect("node")
}

/// README: "when the kept logs leave less room than the message needs, the message is cut to
/// the bytes left (the exact accounting of DSH: logs plus message never pass the budget)".
/// With 0 or 1 bytes left the message is cut to `""`, which still costs 2 bytes.
#[tokio::test]
#[ignore = "reproduces: logs plus the cut output-limit message pass the budget by up to 2 bytes"]
async fn logs_plus_message_never_pass_the_budget() {
    for cap in [7u64, 8] {
        let runtime = node(cap).await;
        let outcome = runtime
            .run(RunRequest::new(
                "for (let i = 0; i < 3; i++) console.log(''); return 1",
            ))
            .await
            .unwrap();
        let error = outcome.error.clone().expect("a failure");
        assert_eq!(error.kind, FailureKind::OutputLimit);
        // What the caller gets: the logs array plus the failure message, as compact JSON.
        let charged =
            json!(outcome.logs).to_string().len() + json!(error.message).to_string().len();
        assert!(
            charged as u64 <= cap,
            "cap {cap}: logs {:?} + message {:?} = {charged} bytes",
            outcome.logs,
            error.message
        );
        runtime.dispose().await;
    }
}

/// README: "A completion nested deeper than 4,096 levels ends as `invalid-output`." Through
/// `run_code` (the API the README shows), one nested 256 levels is refused by the registry's own
/// output check instead: `INVALID_TOOL_OUTPUT`, `"value" is nested deeper than 256 levels`.
#[tokio::test]
#[ignore = "reproduces: run_code refuses completions nested 256..=4096 deep as INVALID_TOOL_OUTPUT"]
async fn run_code_returns_a_completion_nested_within_the_documented_depth() {
    let registry = Registry::new();
    registry.set_code_runtime(Arc::new(node(64 << 20).await));
    registry.set_mode(Mode::Code);
    let program = "let v = 1; for (let i = 0; i < 1000; i++) v = [v]; return v";
    let result = registry
        .execute(ToolCall::new(
            "c1",
            "run_code",
            json!({"code": program, "description": "deep"}),
        ))
        .await;
    assert!(
        result.error_code().is_none(),
        "{:?}: {}",
        result.error_code(),
        result.text()
    );
}
