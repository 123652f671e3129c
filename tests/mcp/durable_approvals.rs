//! Durable `run_code` calls served over MCP (`McpServeOptions::journal`): an approval parks the
//! run and reaches the person at the MCP host — the official Python client in both protocol
//! eras — and a 2026-07-28 client's retry resumes the run on another server that shares the
//! journal, as a replica on the same machine would. The `requestState` is a signed
//! continuation: a second client cannot forge one, replay a used one, use one issued to another
//! principal or by a server that does not share its runs.

use std::sync::{Arc, Mutex};

use crate::mcp_support;

use dsh_tools::durable::SqliteJournal;
use dsh_tools::hooks::PreDecision;
use dsh_tools::mcp::{McpServeOptions, McpTransport};
use dsh_tools::prelude::*;
use dsh_tools::{Mode, Registry};
use serde_json::{Value, json};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// The notes `write_note` wrote, in every registry of this binary (tests tell theirs apart by
/// the text).
static WRITTEN: Mutex<Vec<String>> = Mutex::new(Vec::new());

pub(crate) fn writes(text: &str) -> usize {
    WRITTEN
        .lock()
        .unwrap()
        .iter()
        .filter(|t| *t == text)
        .count()
}

/// Writes a note (asks first: the hook below).
#[dsh_tools::tool]
async fn write_note(text: String) -> String {
    WRITTEN.lock().unwrap().push(text.clone());
    format!("wrote {text}")
}

/// One server of the test: `write_note` behind an `Ask`, code mode on Node.js.
pub(crate) async fn replica() -> Registry {
    let registry = Registry::new();
    registry.register(WriteNoteTool).unwrap();
    registry.on_pre_execute(|view, next| async move {
        if view.name == "write_note" {
            PreDecision::Ask {
                reason: Some("writes a note".into()),
            }
        } else {
            next.run().await
        }
    });
    registry.set_code_runtime(super::approvals::node_runtime().await);
    registry.set_mode(Mode::Code);
    registry
}

/// Serves `registry` with its `run_code` calls journaled in `journal`, as the server `name`
/// sharing runs with `peers` (no name: a server of its own): the task, URL and token.
async fn serve_journaled(
    registry: &Registry,
    journal: &std::path::Path,
    name: Option<(&str, &[&str])>,
) -> (AbortOnDrop, String, String) {
    let transport = McpTransport::http(McpTransport::DEFAULT_HTTP_ADDR)
        .await
        .unwrap();
    let url = format!("http://{}/mcp", transport.local_addr().unwrap());
    let token = transport.bearer_token().unwrap().to_owned();
    let store = Arc::new(SqliteJournal::open(journal).expect("a journal"));
    let mut options = McpServeOptions::default().journal(store);
    if let Some((name, peers)) = name {
        options = options.journal_peers(name, peers.iter().copied());
    }
    let task = tokio::spawn({
        let registry = registry.clone();
        async move { registry.serve_mcp_with(None, transport, options).await }
    });
    (AbortOnDrop(task), url, token)
}

struct AbortOnDrop(tokio::task::JoinHandle<Result<(), dsh_tools::mcp::McpServeError>>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_client_answers_parked_durable_runs_in_both_eras() {
    let tools = require_tools!();
    let dir = tempfile::tempdir().unwrap();
    let registry = replica().await;
    let (_server, url, token) = serve_journaled(&registry, &dir.path().join("runs.db"), None).await;
    let output = tokio::process::Command::new(tools.python())
        .arg(format!("{ROOT}/tests/mcp_clients/python_approvals.py"))
        .args([&url, &token, "durable"])
        .output()
        .await
        .expect("python runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "python_approvals.py durable failed ({}):\nstdout:\n{stdout}\nstderr:\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    for line in ["durable legacy ok", "durable auto ok"] {
        assert!(stdout.contains(line), "{line} missing:\n{stdout}");
    }
}

/// A 2026-07-28 request without a session: `tools/call` with the per-request `_meta`.
pub(crate) fn call_request(id: u64, params: Value) -> Value {
    let mut params = params;
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "replica-test", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}}},
    });
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params})
}

/// Posts one JSON-RPC request and returns its response object (the answer comes as JSON or as
/// one SSE event).
async fn post(url: &str, token: &str, body: &Value) -> Value {
    let response = reqwest::Client::new()
        .post(url)
        .header("authorization", format!("Bearer {token}"))
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", body["method"].as_str().unwrap_or_default())
        .header(
            "mcp-name",
            body["params"]["name"].as_str().unwrap_or_default(),
        )
        .body(body.to_string())
        .send()
        .await
        .expect("the server answers");
    let status = response.status();
    let text = response.text().await.expect("a body");
    assert!(status.is_success(), "{status}: {text}");
    let json = text
        .lines()
        .filter_map(|line| line.strip_prefix("data:"))
        .map(str::trim)
        .filter(|data| !data.is_empty())
        .find_map(|data| serde_json::from_str::<Value>(data).ok())
        .or_else(|| serde_json::from_str(&text).ok())
        .unwrap_or_else(|| panic!("no JSON-RPC answer in {text:?}"));
    assert!(json.get("id").is_some(), "{json}");
    json
}

const PROGRAM: &str = r#"
try {
  const written = await tools.write_note({ text: "across replicas" });
  return { written };
} catch (error) {
  return { refused: String(error) };
}
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_parked_run_resumes_on_another_server_sharing_the_journal() {
    let _tools = require_tools!();
    let dir = tempfile::tempdir().unwrap();
    let journal = dir.path().join("runs.db");
    let first = replica().await;
    let second = replica().await;
    let (_a, url_a, token_a) = serve_journaled(&first, &journal, Some(("a", &["b"]))).await;
    let (_b, url_b, token_b) = serve_journaled(&second, &journal, Some(("b", &["a"]))).await;

    // Server A: the program's call asks, so the run parks and A answers `input_required`.
    let args = json!({"name": "run_code", "arguments": {"code": PROGRAM, "description": "Write"}});
    let parked = post(&url_a, &token_a, &call_request(1, args.clone())).await;
    let result = &parked["result"];
    assert_eq!(result["resultType"], "input_required", "{parked}");
    let state = result["requestState"].as_str().expect("a requestState");
    assert!(state.starts_with("dshc1."), "{state}");
    let request = &result["inputRequests"]["approval"];
    assert_eq!(request["method"], "elicitation/create", "{request}");
    let message = request["params"]["message"].as_str().unwrap();
    assert!(
        message.contains("Allow tool \"tools.write_note\" to run?")
            && message.contains("Reason: writes a note")
            && message.contains("across replicas"),
        "{message}"
    );
    assert_eq!(writes("across replicas"), 0, "nothing ran yet");

    // Server B takes the retry: the journal alone resumes the run there.
    let mut retry = args.clone();
    retry["requestState"] = json!(state);
    retry["inputResponses"] = json!({"approval": {"action": "accept", "content": {}}});
    let done = post(&url_b, &token_b, &call_request(2, retry.clone())).await;
    let text = done["result"]["content"][0]["text"].as_str().unwrap_or("");
    assert!(
        done["result"]["isError"] != json!(true) && text.contains("wrote across replicas"),
        "{done}"
    );
    assert_eq!(writes("across replicas"), 1);

    // The same answer again: the continuation was used, so the retry is refused.
    let again = post(&url_a, &token_a, &call_request(3, retry)).await;
    assert!(
        again["error"]["message"]
            .as_str()
            .is_some_and(|message| message.contains("CONTINUATION_REFUSED")
                && message.contains("used already")),
        "{again}"
    );

    // Declined on the other server: the program reads the denial; the tool never runs.
    let parked = post(&url_b, &token_b, &call_request(4, args.clone())).await;
    let state = parked["result"]["requestState"]
        .as_str()
        .unwrap()
        .to_owned();
    let mut retry = args;
    retry["requestState"] = json!(state);
    retry["inputResponses"] = json!({"approval": {"action": "decline"}});
    let refused = post(&url_a, &token_a, &call_request(5, retry)).await;
    let text = refused["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or("");
    assert!(
        text.contains("refused")
            && text.contains("the user rejected tool")
            && text.contains("denied by the person at the MCP client"),
        "{refused}"
    );
    assert_eq!(writes("across replicas"), 1);

    // A handle no run has.
    let unknown = json!({
        "name": "run_code",
        "arguments": {"code": PROGRAM},
        "requestState": "run:0123456789abcdef0123456789abcdef",
        "inputResponses": {"approval": {"action": "accept", "content": {}}},
    });
    let unknown = post(&url_b, &token_b, &call_request(6, unknown)).await;
    assert!(unknown.get("error").is_some(), "{unknown}");
}

/// A host with an approver of its own decides its durable runs' `Ask`s itself: the person at
/// the MCP client, who would accept, is never asked, and the approver's no stands.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_hosts_approver_decides_served_durable_runs_not_the_client() {
    let _tools = require_tools!();
    let dir = tempfile::tempdir().unwrap();
    let registry = replica().await;
    registry.set_approver(|_| async { dsh_tools::hooks::ApprovalOutcome::Rejected });
    let (_server, url, token) = serve_journaled(&registry, &dir.path().join("runs.db"), None).await;
    let program = PROGRAM.replace("across replicas", "host says no");
    let args = json!({"name": "run_code", "arguments": {"code": program, "description": "Write"}});
    let answer = post(&url, &token, &call_request(1, args)).await;
    let result = &answer["result"];
    assert_ne!(result["resultType"], "input_required", "{answer}");
    let text = result["content"][0]["text"].as_str().unwrap_or("");
    assert!(
        text.contains("refused") && text.contains("denied by the approver"),
        "{answer}"
    );
    assert_eq!(writes("host says no"), 0);
}

/// A program whose two calls each ask.
const TWO_NOTES: &str = r#"
const one = await tools.write_note({ text: "retry one" });
const two = await tools.write_note({ text: "retry two" });
return { one, two };
"#;

/// The error message of a refused retry.
fn refused_message(answer: &Value) -> String {
    answer["error"]["message"]
        .as_str()
        .unwrap_or_else(|| panic!("not refused: {answer}"))
        .to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_state_is_unforgeable_single_use_and_bound_to_who_it_was_shown_to() {
    let _tools = require_tools!();
    let dir = tempfile::tempdir().unwrap();
    let journal = dir.path().join("runs.db");
    let registry = replica().await;
    let (_a, url, token) = serve_journaled(&registry, &journal, None).await;
    let args = json!({"name": "run_code", "arguments": {"code": TWO_NOTES, "description": "Two"}});
    let parked = post(&url, &token, &call_request(1, args.clone())).await;
    let state = parked["result"]["requestState"]
        .as_str()
        .unwrap()
        .to_owned();
    let accept = json!({"approval": {"action": "accept", "content": {}}});
    let retry = |id: u64, state: &str| {
        let mut retry = args.clone();
        retry["requestState"] = json!(state);
        retry["inputResponses"] = accept.clone();
        call_request(id, retry)
    };

    // A second client forges a state: made up, or this one with a byte changed.
    let mut altered = state.clone();
    let last = altered.pop().unwrap();
    altered.push(if last == 'A' { 'B' } else { 'A' });
    for (n, forged) in ["dshc1.e30.AAAA", altered.as_str()].into_iter().enumerate() {
        let message = refused_message(&post(&url, &token, &retry(10 + n as u64, forged)).await);
        assert!(
            message.contains("CONTINUATION_REFUSED") && message.contains("not valid"),
            "{message}"
        );
    }
    // The journal's owner's continuation (as `runs show` prints it) was shown to the local
    // owner, not to this client.
    let store = Arc::new(SqliteJournal::open(&journal).unwrap());
    let runs = dsh_tools::durable::JournalStore::runs(store.as_ref())
        .await
        .unwrap();
    let run = dsh_tools::durable::DurableRun::new(store.clone(), runs[0].run_id.clone());
    let local = registry.parked_run(&run).await.unwrap().continuation;
    let message = refused_message(&post(&url, &token, &retry(12, &local)).await);
    assert!(message.contains("issued to someone else"), "{message}");
    // A server that does not share its runs refuses this server's state.
    let stranger = replica().await;
    let (_b, url_b, token_b) = serve_journaled(&stranger, &journal, None).await;
    let message = refused_message(&post(&url_b, &token_b, &retry(13, &state)).await);
    assert!(
        message.contains("whose runs are not resumed here"),
        "{message}"
    );
    assert_eq!(writes("retry one"), 0, "nothing ran");
    // The valid state under another tool's name is not the call that was shown.
    let mut renamed = retry(17, &state);
    renamed["params"]["name"] = json!("write_note");
    let message = refused_message(&post(&url, &token, &renamed).await);
    assert!(message.contains("retry that call"), "{message}");
    assert_eq!(writes("retry one"), 0, "nothing ran");

    // The answer runs call #0; the run parks at #1 with a state of its own.
    let next = post(&url, &token, &retry(14, &state)).await;
    assert_eq!(next["result"]["resultType"], "input_required", "{next}");
    let second = next["result"]["requestState"].as_str().unwrap().to_owned();
    assert_ne!(second, state);
    assert_eq!(writes("retry one"), 1);

    // The same retry again (a proxy retrying a timed-out request) approves nothing.
    let message = refused_message(&post(&url, &token, &retry(15, &state)).await);
    assert!(message.contains("used already"), "{message}");
    assert_eq!(writes("retry two"), 0, "the next call was not approved");

    let done = post(&url, &token, &retry(16, &second)).await;
    assert!(done["result"]["isError"] != json!(true), "{done}");
    assert_eq!(writes("retry two"), 1);
}

/// A program whose one call asks, for the expiry test.
const LATE_NOTE: &str = r#"
const written = await tools.write_note({ text: "late note" });
return { written };
"#;

/// A continuation that expired before its person answered decides nothing, but its holder
/// sending it again without an answer is asked again: a fresh continuation for the same
/// waiting call, which then decides it. Someone else's continuation (the journal owner's) is
/// not renewed for this client, and the expired one stays refused after the renewal.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_continuation_is_renewed_for_its_holder_only() {
    let _tools = require_tools!();
    let dir = tempfile::tempdir().unwrap();
    let journal = dir.path().join("runs.db");
    let registry = replica().await;
    registry.set_continuation_ttl(std::time::Duration::ZERO);
    let (_a, url, token) = serve_journaled(&registry, &journal, None).await;
    let args = json!({"name": "run_code", "arguments": {"code": LATE_NOTE, "description": "Late"}});
    let parked = post(&url, &token, &call_request(1, args.clone())).await;
    let expired = parked["result"]["requestState"]
        .as_str()
        .unwrap()
        .to_owned();
    let retry = |id: u64, state: &str, answer: Option<Value>| {
        let mut retry = args.clone();
        retry["requestState"] = json!(state);
        if let Some(answer) = answer {
            retry["inputResponses"] = json!({ "approval": answer });
        }
        call_request(id, retry)
    };
    let accept = json!({"action": "accept", "content": {}});
    let message =
        refused_message(&post(&url, &token, &retry(2, &expired, Some(accept.clone()))).await);
    assert!(
        message.contains("has expired") && message.contains("no inputResponses"),
        "{message}"
    );
    registry.set_continuation_ttl(dsh_tools::durable::DEFAULT_CONTINUATION_TTL);

    // The journal owner's continuation is no one's to renew over MCP.
    let store = Arc::new(SqliteJournal::open(&journal).unwrap());
    let runs = dsh_tools::durable::JournalStore::runs(store.as_ref())
        .await
        .unwrap();
    let run = dsh_tools::durable::DurableRun::new(store.clone(), runs[0].run_id.clone());
    let local = registry.parked_run(&run).await.unwrap().continuation;
    let message = refused_message(&post(&url, &token, &retry(3, &local, None)).await);
    assert!(message.contains("issued to someone else"), "{message}");

    // Its holder asks again: the same call, a new continuation.
    let again = post(&url, &token, &retry(4, &expired, None)).await;
    assert_eq!(again["result"]["resultType"], "input_required", "{again}");
    let fresh = again["result"]["requestState"].as_str().unwrap().to_owned();
    assert_ne!(fresh, expired);
    let shown = again["result"]["inputRequests"]["approval"]["params"]["message"]
        .as_str()
        .unwrap_or_default();
    assert!(shown.contains("late note"), "{again}");
    let message =
        refused_message(&post(&url, &token, &retry(5, &expired, Some(accept.clone()))).await);
    assert!(message.contains("has expired"), "{message}");
    assert_eq!(writes("late note"), 0, "nothing ran");

    let done = post(&url, &token, &retry(6, &fresh, Some(accept))).await;
    assert!(done["result"]["isError"] != json!(true), "{done}");
    assert_eq!(writes("late note"), 1);
    // Decided: the expired one renews nothing any more.
    let message = refused_message(&post(&url, &token, &retry(7, &expired, None)).await);
    assert!(message.contains("CONTINUATION_REFUSED"), "{message}");
}
