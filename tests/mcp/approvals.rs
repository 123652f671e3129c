//! A pre-execute `Ask` in a served call reaches the person at the MCP host, driven by the
//! official Python MCP SDK client (`tests/mcp_clients/python_approvals.py`) in both protocol
//! eras: native calls, a proxied MCP server's tool, and binding calls inside a `run_code`
//! program; accepted, declined, cancelled, and a client that cannot be asked.

use std::sync::Arc;

use crate::mcp_support;

use dsh_tools::code::{Budgets, SubprocessConfig, SubprocessRuntime};
use dsh_tools::hooks::PreDecision;
use dsh_tools::mcp::McpTransport;
use dsh_tools::{Mode, Registry};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// Writes a note (the approval tests' tool that asks first).
#[dsh_tools::tool]
async fn write_note(text: String) -> String {
    format!("wrote {text}")
}

/// The served registry: `write_note` and a real MCP server's `echo`, both behind an `Ask`, in
/// both modes so they are callable natively and from a program.
async fn served(tools: &mcp_support::Tools) -> Registry {
    let registry = Registry::new();
    registry.register(WriteNoteTool).unwrap();
    registry
        .add_mcp_server(tools.everything("everything"))
        .await
        .unwrap();
    registry.on_pre_execute(|view, next| async move {
        match view.name.as_str() {
            "write_note" => PreDecision::Ask {
                reason: Some("writes a note".into()),
            },
            "mcp__everything__echo" => PreDecision::Ask { reason: None },
            _ => next.run().await,
        }
    });
    let config = SubprocessConfig {
        budgets: Budgets {
            compute_ms: 20_000,
            max_wall_ms: 120_000,
            ..Budgets::default()
        },
        ..Default::default()
    };
    registry.set_code_runtime(Arc::new(
        SubprocessRuntime::typescript(config).await.expect("node"),
    ));
    registry.set_mode(Mode::Both);
    registry
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_client_answers_approvals_in_both_eras() {
    let tools = require_tools!();
    let registry = served(tools).await;
    let transport = McpTransport::http(McpTransport::DEFAULT_HTTP_ADDR)
        .await
        .unwrap();
    let url = format!("http://{}/mcp", transport.local_addr().unwrap());
    let token = transport.bearer_token().unwrap().to_owned();
    let server = tokio::spawn({
        let registry = registry.clone();
        async move { registry.serve_mcp(None, transport).await }
    });
    let output = tokio::process::Command::new(tools.python())
        .arg(format!("{ROOT}/tests/mcp_clients/python_approvals.py"))
        .args([&url, &token])
        .output()
        .await
        .expect("python runs");
    server.abort();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "python_approvals.py failed ({}):\nstdout:\n{stdout}\nstderr:\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    for line in [
        "legacy ok",
        "auto ok",
        "legacy without elicitation ok",
        "auto without elicitation ok",
    ] {
        assert!(stdout.contains(line), "{line} missing:\n{stdout}");
    }
}
