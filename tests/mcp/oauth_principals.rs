//! Under OAuth, decisions over MCP belong to the token's subject (`sub` of its issuer), not to
//! whoever else holds a valid token for the same server: a parked durable run is approved or
//! denied, and a task polled or cancelled, only by the subject it was started for; each subject
//! gets its own share of the task slots, with or without a session. Two tokens of different
//! subjects from the tests' authorization server (oauth2-mock-server) play the two people.

use std::sync::Arc;

use dsh_tools::durable::SqliteJournal;
use dsh_tools::mcp::{McpHttpAuth, McpOAuthResource, McpServeOptions, McpTaskLimits, McpTransport};
use serde_json::{Value, json};

use crate::durable_approvals::{call_request, replica, writes};
use crate::http_server::FAILURE_BOUND;
use crate::mcp_support;
use crate::oauth::AuthorizationServer;
use dsh_tools::prelude::*;

/// A program whose one call asks.
const PROGRAM: &str = r#"
const written = await tools.write_note({ text: "subject's note" });
return { written };
"#;

/// Posts one 2026-07-28 JSON-RPC request with `token`; its JSON-RPC answer.
async fn post(url: &str, token: &str, body: &Value) -> Value {
    let params = &body["params"];
    let name = params["name"].as_str().or(params["taskId"].as_str());
    let mut request = reqwest::Client::new()
        .post(url)
        .header("authorization", format!("Bearer {token}"))
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", body["method"].as_str().unwrap_or_default());
    if let Some(name) = name {
        request = request.header("mcp-name", name);
    }
    let send = request.body(body.to_string()).send();
    let response = tokio::time::timeout(FAILURE_BOUND, send)
        .await
        .expect("answered within the failure bound")
        .expect("the server answers");
    let status = response.status();
    let text = response.text().await.expect("a body");
    assert!(status.is_success(), "{status}: {text}");
    text.lines()
        .filter_map(|line| line.strip_prefix("data:"))
        .map(str::trim)
        .filter_map(|data| serde_json::from_str::<Value>(data).ok())
        .find(|message| message.get("id").is_some())
        .or_else(|| serde_json::from_str(&text).ok())
        .unwrap_or_else(|| panic!("no JSON-RPC answer in {text:?}"))
}

/// A 2026-07-28 request of `method` declaring the tasks extension.
fn task_request(id: u64, method: &str, mut params: Value) -> Value {
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "subject-test", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {
            "extensions": {"io.modelcontextprotocol/tasks": {}}
        },
    });
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn decisions_and_tasks_belong_to_the_tokens_subject() {
    let _tools = require_tools!();
    let Some(mut issuer) = AuthorizationServer::start() else {
        eprintln!("SKIPPED: the OAuth authorization server is unavailable");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let registry = replica().await;
    let transport = McpTransport::http(McpTransport::DEFAULT_HTTP_ADDR)
        .await
        .unwrap();
    let url = format!("http://{}/mcp", transport.local_addr().unwrap());
    let transport = transport.with_auth(McpHttpAuth::OAuth(McpOAuthResource::new(
        &issuer.issuer,
        &url,
    )));
    let store = Arc::new(SqliteJournal::open(dir.path().join("runs.db")).unwrap());
    let options = McpServeOptions::default()
        .journal(store)
        .task_limits(McpTaskLimits::default().max_per_session(1));
    let server = tokio::spawn({
        let registry = registry.clone();
        async move { registry.serve_mcp_with(None, transport, options).await }
    });
    let alice = issuer.token(json!({"aud": url, "sub": "alice"}), 3600);
    let mallory = issuer.token(json!({"aud": url, "sub": "mallory"}), 3600);

    // Alice's run parks; its continuation is bound to her.
    let args = json!({"name": "run_code", "arguments": {"code": PROGRAM, "description": "Note"}});
    let parked = post(&url, &alice, &call_request(1, args.clone())).await;
    assert_eq!(parked["result"]["resultType"], "input_required", "{parked}");
    let state = parked["result"]["requestState"].as_str().unwrap();
    let retry = |id: u64, answer: Value| {
        let mut retry = args.clone();
        retry["requestState"] = json!(state);
        retry["inputResponses"] = json!({ "approval": answer });
        call_request(id, retry)
    };
    let accept = json!({"action": "accept", "content": {}});

    // Mallory, with a valid token of his own, neither approves nor denies it.
    for (id, answer) in [(2, accept.clone()), (3, json!({"action": "decline"}))] {
        let refused = post(&url, &mallory, &retry(id, answer)).await;
        let message = refused["error"]["message"].as_str().unwrap_or_default();
        assert!(
            message.contains("CONTINUATION_REFUSED") && message.contains("issued to someone else"),
            "{refused}"
        );
    }
    assert_eq!(writes("subject's note"), 0, "nothing ran");
    // Alice decides it.
    let done = post(&url, &alice, &retry(4, accept)).await;
    assert!(done["result"]["isError"] != json!(true), "{done}");
    assert_eq!(writes("subject's note"), 1);

    // Alice's task: Mallory cannot poll, cancel or answer it; Alice can.
    let quick =
        json!({"name": "run_code", "arguments": {"code": "return 1;", "description": "One"}});
    let created = post(&url, &alice, &task_request(5, "tools/call", quick.clone())).await;
    assert_eq!(created["result"]["resultType"], "task", "{created}");
    let task = json!({"taskId": created["result"]["taskId"]});
    for (id, method) in [(6, "tasks/get"), (7, "tasks/cancel")] {
        let refused = post(&url, &mallory, &task_request(id, method, task.clone())).await;
        assert_eq!(refused["error"]["code"], -32602, "{method}: {refused}");
    }
    let mut update = task.clone();
    update["inputResponses"] = json!({});
    let refused = post(&url, &mallory, &task_request(8, "tasks/update", update)).await;
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
    let polled = post(&url, &alice, &task_request(9, "tasks/get", task)).await;
    assert!(polled.get("result").is_some(), "{polled}");

    // Alice's share (one task) is taken by her first, with no session: her next stateless call
    // is refused, while Mallory still gets a task of his own.
    let refused = post(&url, &alice, &task_request(10, "tools/call", quick.clone())).await;
    let text = refused["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or("");
    assert!(
        text.starts_with("too many live tasks for this client (limit 1"),
        "{refused}"
    );
    let other = post(&url, &mallory, &task_request(11, "tools/call", quick)).await;
    assert_eq!(other["result"]["resultType"], "task", "{other}");
    server.abort();
}
