//! Reproducer: over MCP without OAuth, a durable run's continuation is bound to whatever
//! `Mcp-Session-Id` header a 2026-07-28 request carries, issued by the server or not, and the
//! continuation's readable claims name it (`"to":"mcp-session:<id>"`). So any holder of the
//! bearer token who sees the `requestState` answers it by sending the header it names: the
//! binding keeps nobody out.
//! README (Security model): "Without OAuth the principal is the `Mcp-Session-Id` the server
//! issued to a stateful client; the binding keeps one session's continuation from another
//! session".
#![cfg(all(feature = "durable", feature = "mcp-server"))]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use dsh_tools::code::{SubprocessConfig, SubprocessRuntime};
use dsh_tools::durable::{JournalStore, SqliteJournal};
use dsh_tools::hooks::PreDecision;
use dsh_tools::mcp::{McpServeOptions, McpTransport};
use dsh_tools::serde_json::{Value, json};
use dsh_tools::{Mode, Registry, ToolError, tool};

static RAN: AtomicUsize = AtomicUsize::new(0);

/// Appends a line (asks first).
#[tool]
async fn append_line(line: String) -> Result<String, ToolError> {
    RAN.fetch_add(1, Ordering::SeqCst);
    Ok(format!("appended {line}"))
}

/// One 2026-07-28 `tools/call`, with `session` as its `Mcp-Session-Id` header.
async fn call(url: &str, token: &str, session: &str, id: u64, mut params: Value) -> Value {
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "repro", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}}},
    });
    let body = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params});
    let text = reqwest::Client::new()
        .post(url)
        .header("authorization", format!("Bearer {token}"))
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "tools/call")
        .header("mcp-name", "run_code")
        .header("mcp-session-id", session)
        .body(body.to_string())
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    text.lines()
        .filter_map(|line| line.strip_prefix("data:"))
        .find_map(|data| serde_json::from_str(data.trim()).ok())
        .or_else(|| serde_json::from_str(&text).ok())
        .unwrap_or_else(|| panic!("no answer in {text:?}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "reproduces: the continuation's principal is a client-chosen, readable header value"]
async fn another_client_cannot_answer_by_copying_the_session_header() {
    let dir = tempfile::tempdir().unwrap();
    let registry = Registry::new();
    registry.register(AppendLineTool).unwrap();
    registry.on_pre_execute(|call, next| async move {
        if call.name == "append_line" {
            PreDecision::Ask {
                reason: Some("appends".into()),
            }
        } else {
            next.run().await
        }
    });
    let runtime = SubprocessRuntime::typescript(SubprocessConfig::default())
        .await
        .unwrap();
    registry.set_code_runtime(Arc::new(runtime));
    registry.set_mode(Mode::Code);
    let store: Arc<dyn JournalStore> =
        Arc::new(SqliteJournal::open(dir.path().join("runs.db")).unwrap());
    let transport = McpTransport::http(McpTransport::DEFAULT_HTTP_ADDR)
        .await
        .unwrap();
    let url = format!("http://{}/mcp", transport.local_addr().unwrap());
    let token = transport.bearer_token().unwrap().to_owned();
    let served = registry.clone();
    let options = McpServeOptions::default().journal(store);
    let server = tokio::spawn(async move { served.serve_mcp_with(None, transport, options).await });

    let program = "return await tools.append_line({line: 'alice'})";
    let args = json!({"name": "run_code", "arguments": {"code": program, "description": "d"}});
    // Alice's client: a session id the server never issued is taken as her identity.
    let parked = call(&url, &token, "alice-session", 1, args.clone()).await;
    let state = parked["result"]["requestState"]
        .as_str()
        .expect("parked")
        .to_owned();
    // Bob's client (same bearer token) sees the state, reads the principal from its claims...
    let claims = state.split('.').nth(1).unwrap();
    let engine = |c: u8| match c {
        b'A'..=b'Z' => c - b'A',
        b'a'..=b'z' => c - b'a' + 26,
        b'0'..=b'9' => c - b'0' + 52,
        b'-' => 62,
        _ => 63,
    };
    let bits: Vec<u8> = claims.bytes().map(engine).collect();
    let mut decoded = Vec::new();
    for chunk in bits.chunks(4) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, b)| n | (u32::from(*b) << (18 - 6 * i)));
        decoded.extend_from_slice(&n.to_be_bytes()[1..chunk.len()]);
    }
    let claims: Value = serde_json::from_slice(&decoded).unwrap();
    let session = claims["to"]
        .as_str()
        .unwrap()
        .strip_prefix("mcp-session:")
        .unwrap()
        .to_owned();
    // ...and answers it as that "session".
    let mut retry = args;
    retry["requestState"] = json!(state);
    retry["inputResponses"] = json!({"approval": {"action": "accept", "content": {}}});
    let answer = call(&url, &token, &session, 2, retry).await;
    server.abort();
    assert_eq!(
        RAN.load(Ordering::SeqCst),
        0,
        "another client approved Alice's call by copying the principal out of the state: {answer}"
    );
}
