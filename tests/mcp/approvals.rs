//! A pre-execute `Ask` in a served call reaches the person at the MCP host, driven by the
//! official Python MCP SDK client (`tests/mcp_clients/python_approvals.py`) in both protocol
//! eras: native calls, a proxied MCP server's tool, and binding calls inside a `run_code`
//! program; accepted, declined, cancelled, and a client that cannot be asked.

use std::sync::Arc;

use crate::mcp_support;

use dsh_tools::client::{Elicitation, ElicitationRequest};
use dsh_tools::code::{Budgets, SubprocessConfig, SubprocessRuntime};
use dsh_tools::hooks::{ApprovalOutcome, PreDecision};
use dsh_tools::mcp::{McpServer, McpTransport};
use dsh_tools::prelude::*;
use dsh_tools::{AgentId, Mode, Registry, ToolCall};
use serde_json::json;

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
    registry.set_code_runtime(node_runtime().await);
    registry.set_mode(Mode::Both);
    registry
}

/// A TypeScript runtime whose budgets leave a program time to wait for a person's answer.
pub(crate) async fn node_runtime() -> Arc<SubprocessRuntime> {
    let config = SubprocessConfig {
        budgets: Budgets {
            compute_ms: 20_000,
            max_wall_ms: 120_000,
            ..Budgets::default()
        },
        ..Default::default()
    };
    Arc::new(SubprocessRuntime::typescript(config).await.expect("node"))
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

/// Our client negotiates the newest era each server offers: 2026-07-28 with our own server and
/// the Python SDK's, 2025-11-25 with server-everything (TypeScript SDK), which has no
/// `server/discover`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn our_client_negotiates_the_newest_era_each_server_offers() {
    let tools = require_tools!();
    let (_server, url, token, _registry) = serve(plain_registry(), None).await;
    let client = Registry::new();
    let ours = client
        .add_mcp_server(
            McpServer::http("ours", url).header("authorization", format!("Bearer {token}")),
        )
        .await
        .unwrap();
    let time = client.add_mcp_server(tools.time("time")).await.unwrap();
    let everything = client
        .add_mcp_server(tools.everything("everything"))
        .await
        .unwrap();
    let version = |handle: &dsh_tools::mcp::McpHandle| {
        handle
            .peer()
            .unwrap()
            .peer_info()
            .unwrap()
            .protocol_version
            .to_string()
    };
    assert_eq!(version(&ours), "2026-07-28");
    assert_eq!(version(&time), "2026-07-28");
    assert_eq!(version(&everything), "2025-11-25");
    // Each still answers a call.
    let sum = client
        .execute(ToolCall::new(
            "1",
            "mcp__everything__get-sum",
            json!({"a": 2, "b": 3}),
        ))
        .await;
    assert!(
        sum.text().contains("The sum of 2 and 3 is 5"),
        "{}",
        sum.text()
    );
    let note = client
        .execute(ToolCall::new(
            "2",
            "mcp__ours__write_note",
            json!({"text": "x"}),
        ))
        .await;
    assert_eq!(note.text(), "wrote x");
    for handle in [ours, time, everything] {
        handle.disconnect().await;
    }
}

/// Our client answers a 2026-07-28 server's approval (an `input_required` round) through
/// `McpServer::on_elicitation`; the served host's own approver, once installed, decides instead
/// and the person is no longer asked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn our_client_answers_approvals_and_the_hosts_approver_comes_first() {
    let registry = plain_registry();
    registry.on_pre_execute(|_, _| async {
        PreDecision::Ask {
            reason: Some("asks first".into()),
        }
    });
    // Served for an agent, so the host's approver has one to route the request through.
    let (_server, url, token, served) = serve(registry, Some(AgentId::new("host"))).await;
    let asked = Arc::new(std::sync::Mutex::new(Vec::new()));
    let client = Registry::new();
    let handle = client
        .add_mcp_server(
            McpServer::http("ours", url)
                .header("authorization", format!("Bearer {token}"))
                .on_elicitation({
                    let asked = asked.clone();
                    move |request: ElicitationRequest| {
                        asked.lock().unwrap().push(request.message);
                        async { Elicitation::Accept(Default::default()) }
                    }
                }),
        )
        .await
        .unwrap();
    let note = client
        .execute(ToolCall::new(
            "1",
            "mcp__ours__write_note",
            json!({"text": "y"}),
        ))
        .await;
    assert_eq!(note.text(), "wrote y");
    assert_eq!(
        *asked.lock().unwrap(),
        ["Allow tool \"write_note\" to run?\nReason: asks first\nArguments: {\"text\":\"y\"}"]
    );

    served.set_approver(|_| async { ApprovalOutcome::Rejected });
    let refused = client
        .execute(ToolCall::new(
            "2",
            "mcp__ours__write_note",
            json!({"text": "z"}),
        ))
        .await;
    assert!(
        refused.text().contains("the user rejected tool"),
        "{}",
        refused.text()
    );
    assert_eq!(
        asked.lock().unwrap().len(),
        1,
        "the person was not asked again"
    );
    handle.disconnect().await;
}

fn plain_registry() -> Registry {
    let registry = Registry::new();
    registry.register(WriteNoteTool).unwrap();
    registry
}

/// Serves `registry` over streamable HTTP on loopback: the server task, its URL and token.
async fn serve(
    registry: Registry,
    scope: Option<AgentId>,
) -> (AbortOnDrop, String, String, Registry) {
    let transport = McpTransport::http(McpTransport::DEFAULT_HTTP_ADDR)
        .await
        .unwrap();
    let url = format!("http://{}/mcp", transport.local_addr().unwrap());
    let token = transport.bearer_token().unwrap().to_owned();
    let task = tokio::spawn({
        let registry = registry.clone();
        async move { registry.serve_mcp(scope, transport).await }
    });
    (AbortOnDrop(task), url, token, registry)
}

/// Stops a served registry when the test ends, however it ends.
struct AbortOnDrop(tokio::task::JoinHandle<Result<(), dsh_tools::mcp::McpServeError>>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}
