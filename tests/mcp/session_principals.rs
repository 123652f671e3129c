//! Who may answer a `requestState` over MCP without OAuth: the principal the call was asked
//! by — the `Mcp-Session-Id` this server issued, never a header value a client makes up
//! (answered 404), and never readable from a durable run's continuation. A second client
//! holding the same bearer token cannot answer the first client's `requestState`, neither by
//! sending no session nor by copying a header; a non-durable call's handle is bound the same
//! way, and to the arguments the person was asked about.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use dsh_tools::code::{SubprocessConfig, SubprocessRuntime};
use dsh_tools::durable::{JournalStore, SqliteJournal};
use dsh_tools::hooks::PreDecision;
use dsh_tools::mcp::{McpServeError, McpServeOptions, McpTransport};
use dsh_tools::prelude::*;
use dsh_tools::{Mode, Registry, ToolDefinition, ToolError, tool};
use serde_json::{Value, json};

static RAN: AtomicUsize = AtomicUsize::new(0);

/// The lines `write_line` wrote (the non-durable test's tool).
static WRITTEN: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());

/// Writes a line (asks first).
#[tool]
async fn write_line(line: String) -> Result<String, ToolError> {
    WRITTEN.lock().unwrap().push(line.clone());
    Ok(format!("wrote {line}"))
}

/// Appends a line (asks first).
#[tool]
async fn append_line(line: String) -> Result<String, ToolError> {
    RAN.fetch_add(1, Ordering::SeqCst);
    Ok(format!("appended {line}"))
}

/// A registry over `tool` whose pre-execute hook asks before every call of `asked`.
pub(crate) fn asking_registry(tool: impl Into<ToolDefinition>, asked: &'static str) -> Registry {
    let registry = Registry::new();
    registry.register(tool).unwrap();
    registry.on_pre_execute(move |call, next| async move {
        if call.name == asked {
            PreDecision::Ask {
                reason: Some(format!("{asked} asks first")),
            }
        } else {
            next.run().await
        }
    });
    registry
}

/// `registry` served over streamable HTTP on loopback with `options`: its URL, bearer token
/// and the serving task.
pub(crate) async fn serve_http(
    registry: &Registry,
    options: McpServeOptions,
) -> (
    String,
    String,
    tokio::task::JoinHandle<Result<(), McpServeError>>,
) {
    let transport = McpTransport::http(McpTransport::DEFAULT_HTTP_ADDR)
        .await
        .unwrap();
    let url = format!("http://{}/mcp", transport.local_addr().unwrap());
    let token = transport.bearer_token().unwrap().to_owned();
    let served = registry.clone();
    let server = tokio::spawn(async move { served.serve_mcp_with(None, transport, options).await });
    (url, token, server)
}

/// `registry` in code mode with a TypeScript subprocess runtime, its runs journaled in a SQLite
/// journal in `dir`: the journal.
pub(crate) async fn journaled_code_mode(
    registry: &Registry,
    dir: &std::path::Path,
) -> Arc<dyn JournalStore> {
    let runtime = SubprocessRuntime::typescript(SubprocessConfig::default())
        .await
        .unwrap();
    registry.set_code_runtime(Arc::new(runtime));
    registry.set_mode(Mode::Code);
    Arc::new(SqliteJournal::open(dir.join("runs.db")).unwrap())
}

/// One 2026-07-28 `tools/call` of `run_code`, with `session` (if any) as its `Mcp-Session-Id`
/// header: the HTTP status and the JSON-RPC answer (none for a refused request).
async fn call(
    url: &str,
    token: &str,
    session: Option<&str>,
    id: u64,
    params: Value,
) -> (u16, Option<Value>) {
    call_tool(url, token, "run_code", session, id, params).await
}

/// One 2026-07-28 `tools/call` of `tool` ([`call`]).
async fn call_tool(
    url: &str,
    token: &str,
    tool: &str,
    session: Option<&str>,
    id: u64,
    mut params: Value,
) -> (u16, Option<Value>) {
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "principals", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}}},
    });
    let body = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params});
    let mut request = reqwest::Client::new()
        .post(url)
        .header("authorization", format!("Bearer {token}"))
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "tools/call")
        .header("mcp-name", tool);
    if let Some(session) = session {
        request = request.header("mcp-session-id", session);
    }
    let response = request.body(body.to_string()).send().await.unwrap();
    let status = response.status().as_u16();
    let text = response.text().await.unwrap();
    let answer = text
        .lines()
        .filter_map(|line| line.strip_prefix("data:"))
        .find_map(|data| serde_json::from_str(data.trim()).ok())
        .or_else(|| serde_json::from_str(&text).ok());
    (status, answer)
}

/// A 2025-11-25 session opened with `initialize`: the id the server issued.
async fn open_session(url: &str, token: &str) -> String {
    let body = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "principals", "version": "1"},
    }});
    let response = reqwest::Client::new()
        .post(url)
        .header("authorization", format!("Bearer {token}"))
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json")
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 200);
    response.headers()["mcp-session-id"]
        .to_str()
        .unwrap()
        .to_owned()
}

/// The claims of a continuation (`dshc1.<claims>.<tag>`), decoded from base64url.
fn claims_of(state: &str) -> Value {
    let claims = state.split('.').nth(1).unwrap();
    let sextet = |c: u8| match c {
        b'A'..=b'Z' => c - b'A',
        b'a'..=b'z' => c - b'a' + 26,
        b'0'..=b'9' => c - b'0' + 52,
        b'-' => 62,
        _ => 63,
    };
    let bits: Vec<u8> = claims.bytes().map(sextet).collect();
    let mut decoded = Vec::new();
    for chunk in bits.chunks(4) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, b)| n | (u32::from(*b) << (18 - 6 * i)));
        decoded.extend_from_slice(&n.to_be_bytes()[1..chunk.len()]);
    }
    serde_json::from_slice(&decoded).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_an_issued_session_binds_a_continuation_and_its_claims_hide_it() {
    let dir = tempfile::tempdir().unwrap();
    let registry = asking_registry(AppendLineTool, "append_line");
    let store = journaled_code_mode(&registry, dir.path()).await;
    let (url, token, server) =
        serve_http(&registry, McpServeOptions::default().journal(store)).await;

    let program = "return await tools.append_line({line: 'alice'})";
    let args = json!({"name": "run_code", "arguments": {"code": program, "description": "d"}});

    // A session id the server never issued is no identity: the request is refused.
    let (status, answer) = call(&url, &token, Some("alice-session"), 1, args.clone()).await;
    assert_eq!(status, 404, "{answer:?}");

    // Alice's session, issued by the server.
    let session = open_session(&url, &token).await;
    let (status, parked) = call(&url, &token, Some(&session), 2, args.clone()).await;
    assert_eq!(status, 200);
    let parked = parked.unwrap();
    let state = parked["result"]["requestState"]
        .as_str()
        .unwrap_or_else(|| panic!("parked: {parked}"))
        .to_owned();
    // The claims name the principal by a keyed digest only.
    let claims = claims_of(&state).to_string();
    assert!(
        !claims.contains(&session) && !claims.contains("mcp-session"),
        "{claims}"
    );

    let mut retry = args;
    retry["requestState"] = json!(state);
    retry["inputResponses"] = json!({"approval": {"action": "accept", "content": {}}});
    // Bob holds the bearer token and the state: without Alice's session he is refused...
    let (_, answer) = call(&url, &token, None, 3, retry.clone()).await;
    let answer = answer.unwrap().to_string();
    assert!(answer.contains("CONTINUATION_REFUSED"), "{answer}");
    // ...and a made-up session (say, one a client guessed from the claims) is no session.
    let (status, _) = call(&url, &token, Some("alice-session"), 4, retry.clone()).await;
    assert_eq!(status, 404);
    assert_eq!(
        RAN.load(Ordering::SeqCst),
        0,
        "another client approved Alice's call"
    );

    // Alice's own answer, in her session, decides it.
    let (_, answer) = call(&url, &token, Some(&session), 5, retry).await;
    server.abort();
    let answer = answer.unwrap();
    assert_eq!(RAN.load(Ordering::SeqCst), 1, "{answer}");
    assert!(answer.to_string().contains("appended alice"), "{answer}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_non_durable_request_state_answers_only_its_asker_and_its_arguments() {
    let registry = asking_registry(WriteLineTool, "write_line");
    let (url, token, server) = serve_http(&registry, McpServeOptions::default()).await;
    let written = || WRITTEN.lock().unwrap().clone();

    let session = open_session(&url, &token).await;
    let args = json!({"name": "write_line", "arguments": {"line": "shown"}});
    let (_, asked) = call_tool(&url, &token, "write_line", Some(&session), 1, args.clone()).await;
    let asked = asked.unwrap();
    let result = &asked["result"];
    let state = result["requestState"]
        .as_str()
        .unwrap_or_else(|| panic!("asked: {asked}"))
        .to_owned();
    let key = result["inputRequests"]
        .as_object()
        .and_then(|requests| requests.keys().next().cloned())
        .unwrap_or_else(|| panic!("asked: {asked}"));
    let mut retry = args;
    retry["requestState"] = json!(state);
    retry["inputResponses"] = json!({ key: {"action": "accept", "content": {}} });

    // Another holder of the bearer token, without Alice's session, is refused.
    let (_, answer) = call_tool(&url, &token, "write_line", None, 2, retry.clone()).await;
    let answer = answer.unwrap().to_string();
    assert!(answer.contains("CONTINUATION_REFUSED"), "{answer}");
    // Alice's retry with other arguments than she was asked about is refused too.
    let mut changed = retry.clone();
    changed["arguments"] = json!({"line": "never shown"});
    let (_, answer) = call_tool(&url, &token, "write_line", Some(&session), 3, changed).await;
    let answer = answer.unwrap().to_string();
    assert!(
        answer.contains("CONTINUATION_REFUSED") && answer.contains("other arguments"),
        "{answer}"
    );
    assert!(written().is_empty(), "{:?}", written());

    // The call kept waiting: her own retry, as asked, runs it with the arguments shown.
    let (_, answer) = call_tool(&url, &token, "write_line", Some(&session), 4, retry).await;
    server.abort();
    let answer = answer.unwrap();
    assert_eq!(written(), ["shown"], "{answer}");
    assert!(answer.to_string().contains("wrote shown"), "{answer}");
}
