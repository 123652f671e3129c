//! Reproducers for the output contract as the README states it (section "Code mode").
#![cfg(feature = "code-mode")]

use std::sync::Arc;

use dsh_tools::code::{
    Budgets, CodeRuntime, FailureKind, RunRequest, SubprocessConfig, SubprocessRuntime,
};
use dsh_tools::serde_json::json;
use dsh_tools::{Mode, Registry, ToolCall};

async fn node(max_output_bytes: u64) -> SubprocessRuntime {
    let config = SubprocessConfig {
        budgets: Budgets {
            max_output_bytes,
            ..Budgets::default()
        },
        ..SubprocessConfig::default()
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

fn peak_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("VmHWM:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// Building the TypeScript runtime reads the whole Node.js executable (about 95 MiB on Debian)
/// into host memory to find its ELF loader (`sandbox.rs`, `elf_loader`: `std::fs::read`), so
/// the host's resident peak grows by the interpreter's size before any program runs — more
/// than any output bound the README states for a run. Run alone: `-- --ignored --exact
/// building_the_typescript_runtime_does_not_load_the_interpreter`.
#[tokio::test]
#[ignore = "reproduces: SubprocessRuntime::typescript reads the whole node binary into memory"]
async fn building_the_typescript_runtime_does_not_load_the_interpreter() {
    let before = peak_kib();
    let runtime = node(64 << 20).await;
    let grown_mib = (peak_kib() - before) / 1024;
    runtime.dispose().await;
    assert!(
        grown_mib < 32,
        "the host's peak grew by {grown_mib} MiB building the runtime"
    );
}
