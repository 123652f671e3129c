//! A tool ends the server-sent-events stream of the request it answers before its answer
//! (`ToolExec::close_stream`, SEP-1699 polling): on a 2025 session the client sees the stream
//! end without the answer, resumes it with `Last-Event-ID`, and the answer comes on the
//! resumed stream; a stateless 2026-07-28 request has no stream to resume and is answered at
//! once.

use std::net::{Ipv4Addr, SocketAddr};
use std::time::Duration;

use dsh_tools::mcp::{McpHttpAuth, McpServeOptions, McpTransport};
use dsh_tools::prelude::*;
use dsh_tools::{Registry, ToolError, ToolExec, tool};
use serde_json::{Value, json};

/// A failure bound for each exchange, never a pace.
const FAILURE_BOUND: Duration = Duration::from_secs(60);

/// Ends its answer's stream, and once the client resumed it (or at once, without one)
/// answers whether it did.
#[tool]
async fn resumable(exec: &ToolExec) -> Result<String, ToolError> {
    let resumed = exec
        .close_stream(Duration::from_millis(50))
        .await
        .map_err(|error| ToolError::new(error.to_string()))?;
    Ok(format!("resumed: {resumed}"))
}

/// As [`resumable`], run as a task: its request was answered with the task.
#[tool(task)]
async fn resumable_job(exec: &ToolExec) -> Result<String, ToolError> {
    resumable(exec).await
}

async fn serve() -> String {
    let registry = Registry::new();
    registry.register(ResumableTool).unwrap();
    registry.register(ResumableJobTool).unwrap();
    let transport = McpTransport::http(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)))
        .await
        .expect("binds")
        .with_auth(McpHttpAuth::None);
    let addr = transport.local_addr().expect("an address");
    tokio::spawn(async move {
        registry
            .serve_mcp_with(None, transport, McpServeOptions::default())
            .await
    });
    format!("http://{addr}/mcp")
}

/// Sends `request` and reads its whole body (an SSE stream reads until the server ends it).
async fn exchange(request: reqwest::RequestBuilder) -> (reqwest::header::HeaderMap, String) {
    let exchange = async {
        let response = request.send().await.expect("the server answers");
        assert!(response.status().is_success(), "{response:?}");
        let headers = response.headers().clone();
        (headers, response.text().await.expect("a body"))
    };
    tokio::time::timeout(FAILURE_BOUND, exchange)
        .await
        .expect("answered within the failure bound")
}

/// The JSON-RPC messages of an SSE body.
fn messages(body: &str) -> Vec<Value> {
    body.lines()
        .filter_map(|line| line.strip_prefix("data:"))
        .filter_map(|data| serde_json::from_str::<Value>(data.trim()).ok())
        .filter(Value::is_object)
        .collect()
}

fn post(url: &str, session: Option<&str>, body: Value) -> reqwest::RequestBuilder {
    let mut request = reqwest::Client::new()
        .post(url)
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json")
        .header("mcp-protocol-version", "2025-11-25");
    if let Some(session) = session {
        request = request.header("mcp-session-id", session);
    }
    request.body(body.to_string())
}

/// Opens a 2025-11-25 session declaring the tasks extension; its id.
async fn session(url: &str) -> String {
    let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {"extensions": {"io.modelcontextprotocol/tasks": {}}},
        "clientInfo": {"name": "test", "version": "1"},
    }});
    let (headers, _) = exchange(post(url, None, initialize)).await;
    let session = headers["mcp-session-id"].to_str().unwrap().to_owned();
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    exchange(post(url, Some(&session), initialized)).await;
    session
}

/// The one JSON-RPC answer of a POST's body.
async fn answer(request: reqwest::RequestBuilder) -> Value {
    let (_, body) = exchange(request).await;
    messages(&body)
        .into_iter()
        .next()
        .or_else(|| serde_json::from_str(&body).ok())
        .unwrap_or_else(|| panic!("no answer: {body}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_closed_stream_is_resumed_with_last_event_id_and_carries_the_answer() {
    let url = serve().await;
    let session = session(&url).await;

    let call = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "resumable", "arguments": {}}});
    let (_, body) = exchange(post(&url, Some(&session), call)).await;
    // The stream ended without the answer, after an event telling the client when to come
    // back.
    assert!(messages(&body).is_empty(), "{body}");
    assert!(body.contains("retry: 50"), "{body}");
    let last = body
        .lines()
        .filter_map(|line| line.strip_prefix("id:"))
        .map(str::trim)
        .next_back()
        .expect("events with ids")
        .to_owned();

    let resume = reqwest::Client::new()
        .get(&url)
        .header("accept", "text/event-stream")
        .header("mcp-session-id", &session)
        .header("mcp-protocol-version", "2025-11-25")
        .header("last-event-id", &last);
    let (_, resumed) = exchange(resume).await;
    let answer = messages(&resumed)
        .into_iter()
        .find(|message| message["id"] == 2)
        .unwrap_or_else(|| panic!("no answer on the resumed stream: {resumed}"));
    assert_eq!(
        answer["result"]["content"][0]["text"], "resumed: true",
        "{answer}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stateless_request_has_no_stream_to_resume_and_is_answered_at_once() {
    let url = serve().await;
    let call = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {
        "name": "resumable",
        "arguments": {},
        "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {},
            "io.modelcontextprotocol/clientInfo": {"name": "test", "version": "1"},
        },
    }});
    let request = reqwest::Client::new()
        .post(&url)
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "tools/call")
        .header("mcp-name", "resumable")
        .body(call.to_string());
    let answer = answer(request).await;
    assert_eq!(
        answer["result"]["content"][0]["text"], "resumed: false",
        "{answer}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_has_no_stream_to_resume_its_request_was_answered_with_the_task() {
    let url = serve().await;
    let session = session(&url).await;
    let call = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "resumable_job", "arguments": {}}});
    let created = answer(post(&url, Some(&session), call)).await;
    let id = created["result"]["taskId"].clone();
    assert!(id.is_string(), "{created}");
    let deadline = tokio::time::Instant::now() + FAILURE_BOUND;
    let done = loop {
        let get = json!({"jsonrpc": "2.0", "id": 3, "method": "tasks/get",
            "params": {"taskId": id}});
        let got = answer(post(&url, Some(&session), get)).await;
        if got["result"]["status"] != "working" {
            break got;
        }
        assert!(tokio::time::Instant::now() < deadline, "{got}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(done["result"]["status"], "completed", "{done}");
    assert_eq!(
        done["result"]["result"]["content"][0]["text"], "resumed: false",
        "{done}"
    );
}
