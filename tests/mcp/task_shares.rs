//! `dsh-tools serve --http --max-tasks-per-client N`: each client (an MCP session, or the
//! subject of an OAuth access token) gets N task slots of its own. A client past its share is
//! refused while another still gets tasks; under OAuth one subject can neither see nor cancel
//! another's task. Tasks are `run_code` calls of the embedded runtime: a finished task keeps
//! its slot for its TTL, so no program needs to be held running.

use std::io::{Read, Write};

use serde_json::{Value, json};

use crate::http_server::{Answer, Server};
use crate::oauth::AuthorizationServer;

/// The flags every server here runs with: code mode on the embedded runtime, one task a client.
const FLAGS: [&str; 6] = [
    "--mode",
    "code",
    "--runtime",
    "embedded",
    "--max-tasks-per-client",
    "1",
];

/// A quick program: its task finishes at once and keeps its slot for the TTL.
fn quick_call(id: u64) -> Value {
    json!({
        "jsonrpc": "2.0",
        "id": id,
        "method": "tools/call",
        "params": {"name": "run_code", "arguments": {"code": "return 1;", "description": "One"}},
    })
}

/// The JSON-RPC answer in `answer`'s body (plain JSON or an event stream).
fn rpc(answer: &Answer) -> Value {
    assert_eq!(answer.status, 200, "{answer:?}");
    answer
        .body
        .lines()
        .filter_map(|line| line.strip_prefix("data:"))
        .filter_map(|data| serde_json::from_str::<Value>(data.trim()).ok())
        .find(|message| message.get("id").is_some())
        .or_else(|| serde_json::from_str(&answer.body).ok())
        .unwrap_or_else(|| panic!("no JSON-RPC answer in {answer:?}"))
}

/// The text of a refused call's `isError` result.
fn refusal(answer: &Value) -> &str {
    assert_eq!(answer["result"]["isError"], true, "{answer}");
    answer["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
}

/// An initialized MCP session declaring the tasks extension: the headers its requests carry.
fn session(server: &Server) -> String {
    let initialize = json!({
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {"extensions": {"io.modelcontextprotocol/tasks": {}}},
            "clientInfo": {"name": "share-test", "version": "1"},
        },
    });
    let initialized = server.request("POST", None, &initialize.to_string());
    assert_eq!(initialized.status, 200, "{initialized:?}");
    let id = initialized.session_id();
    let notified = server.request(
        "POST",
        Some(&id),
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
    );
    assert!(notified.status < 300, "{notified:?}");
    id
}

/// Without OAuth each MCP session is a client: a session past its one task is refused, naming
/// the flag's limit, while another session still gets its own task.
#[test]
fn each_session_gets_the_task_share_the_flag_sets() {
    let server = Server::start(&FLAGS, None);
    let (first, second) = (session(&server), session(&server));
    let created = rpc(&server.request("POST", Some(&first), &quick_call(2).to_string()));
    assert_eq!(created["result"]["resultType"], "task", "{created}");
    let refused = rpc(&server.request("POST", Some(&first), &quick_call(3).to_string()));
    assert!(
        refusal(&refused).starts_with("too many live tasks for this client (limit 1 of"),
        "{refused}"
    );
    let other = rpc(&server.request("POST", Some(&second), &quick_call(4).to_string()));
    assert_eq!(other["result"]["resultType"], "task", "{other}");
}

/// A 2026-07-28 stateless request declaring the tasks extension, sent with `token`.
fn stateless(server: &Server, token: &str, id: u64, method: &str, mut params: Value) -> Value {
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "share-test", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {
            "extensions": {"io.modelcontextprotocol/tasks": {}}
        },
    });
    let name = params["name"].as_str().or(params["taskId"].as_str());
    let name = name.map(|name| format!("mcp-name: {name}\r\n"));
    let body = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).to_string();
    let head = format!(
        "POST /mcp HTTP/1.1\r\nhost: {}\r\naccept: application/json, text/event-stream\r\n\
         content-type: application/json\r\nmcp-protocol-version: 2026-07-28\r\n\
         mcp-method: {method}\r\n{}authorization: Bearer {token}\r\ncontent-length: {}\r\n\
         connection: close\r\n\r\n",
        server.addr,
        name.unwrap_or_default(),
        body.len()
    );
    let mut stream = server.connect();
    stream.write_all(head.as_bytes()).unwrap();
    stream.write_all(body.as_bytes()).unwrap();
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).unwrap();
    rpc(&Answer::parse(&raw))
}

/// Under OAuth the client is the token's subject, with or without a session: Alice's stateless
/// requests take her one slot and no more, Mallory's own task is still created, and Mallory's
/// `tasks/get` and `tasks/cancel` of Alice's task are answered as for an unknown task while
/// Alice polls it.
#[test]
fn under_oauth_each_subject_gets_its_share_and_only_its_tasks() {
    let Some(mut issuer) = AuthorizationServer::start() else {
        eprintln!("SKIPPED: the OAuth authorization server is unavailable");
        return;
    };
    let (server, resource) = crate::oauth::protected_server_with(&issuer.issuer, &FLAGS);
    let claims = |sub: &str| json!({"aud": resource, "sub": sub, "scope": "tools.read"});
    let alice = issuer.token(claims("alice"), 3600);
    let mallory = issuer.token(claims("mallory"), 3600);
    let call = quick_call(0)["params"].clone();

    let created = stateless(&server, &alice, 1, "tools/call", call.clone());
    assert_eq!(created["result"]["resultType"], "task", "{created}");
    let refused = stateless(&server, &alice, 2, "tools/call", call.clone());
    assert!(
        refusal(&refused).starts_with("too many live tasks for this client (limit 1 of"),
        "{refused}"
    );
    let other = stateless(&server, &mallory, 3, "tools/call", call);
    assert_eq!(other["result"]["resultType"], "task", "{other}");

    let task = json!({"taskId": created["result"]["taskId"]});
    for (id, method) in [(4, "tasks/get"), (5, "tasks/cancel")] {
        let answer = stateless(&server, &mallory, id, method, task.clone());
        assert_eq!(answer["error"]["code"], -32602, "{method}: {answer}");
    }
    let polled = stateless(&server, &alice, 6, "tasks/get", task);
    assert!(polled.get("result").is_some(), "{polled}");
}

/// The share is at least one task: 0 is a usage error naming the flag.
#[test]
fn a_share_of_no_tasks_is_refused() {
    let output = Server::command(&["--max-tasks-per-client", "0"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("--max-tasks-per-client"), "{stderr}");
}
