//! What `Registry::serve_mcp` answers at the protocol level, driven by 2026-07-28 requests
//! written by hand: a capability the client did not declare is the protocol's
//! `MissingRequiredClientCapabilityError` (-32021, HTTP 400); an unknown tool is `-32602`, not a
//! tool result; a resource read is "Resource not found" (-32602 with the URI); requests for the
//! client travel under the keys the tool chose, and one the client's retry leaves unanswered is
//! asked again; answers a first call brings answer the requests under their keys, extra keys
//! ignored; schemas are served as written; a server
//! without authentication on loopback serves its own loopback origins and refuses others.

use std::net::{Ipv4Addr, SocketAddr};
use std::time::Duration;

use dsh_tools::client::{Elicitation, ElicitationRequest, RootsRequest, SamplingRequest};
use dsh_tools::mcp::{McpHttpAuth, McpServeOptions, McpServer, McpTransport};
use dsh_tools::prelude::*;
use dsh_tools::result::ErrorCode;
use dsh_tools::{Registry, ToolDefinition, ToolError, ToolExec, tool, tool_type};
use serde_json::{Value, json};

/// A failure bound for the server to come up, never a pace.
const FAILURE_BOUND: Duration = Duration::from_secs(60);

/// Serves `registry` on loopback without authentication; the endpoint's URL.
async fn serve(registry: &Registry) -> String {
    let transport = McpTransport::http(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)))
        .await
        .expect("binds")
        .with_auth(McpHttpAuth::None);
    let addr = transport.local_addr().expect("an address");
    let registry = registry.clone();
    tokio::spawn(async move {
        registry
            .serve_mcp_with(None, transport, McpServeOptions::default())
            .await
    });
    format!("http://{addr}/mcp")
}

/// The per-request `_meta` of a 2026-07-28 client declaring `capabilities`.
fn meta(capabilities: Value) -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "protocol-test", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": capabilities,
    })
}

/// Posts one 2026-07-28 request (`method` with `params`, `_meta` added) with `origin` as its
/// `Origin` header if given; the HTTP status and the JSON-RPC answer (`Null` when the body has
/// none).
async fn post(url: &str, method: &str, mut params: Value, origin: Option<&str>) -> (u16, Value) {
    if params.get("_meta").is_none() {
        params["_meta"] = meta(json!({}));
    }
    let body = json!({"jsonrpc": "2.0", "id": 7, "method": method, "params": params});
    let mut request = reqwest::Client::new()
        .post(url)
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", method);
    if let Some(name) = body["params"]["name"]
        .as_str()
        .or(body["params"]["taskId"].as_str())
        .or(body["params"]["uri"].as_str())
    {
        request = request.header("mcp-name", name);
    }
    if let Some(origin) = origin {
        request = request.header("origin", origin);
    }
    let send = request.body(body.to_string()).send();
    let response = tokio::time::timeout(FAILURE_BOUND, send)
        .await
        .expect("answered within the failure bound")
        .expect("the server answers");
    let status = response.status().as_u16();
    let text = response.text().await.expect("a body");
    let answer = text
        .lines()
        .filter_map(|line| line.strip_prefix("data:"))
        .map(str::trim)
        .filter_map(|data| serde_json::from_str::<Value>(data).ok())
        .find(|message| message.get("id").is_some())
        .or_else(|| serde_json::from_str(&text).ok())
        .unwrap_or(Value::Null);
    (status, answer)
}

/// Asks the client's model to say hello.
#[tool]
async fn needs_sampling(exec: &ToolExec) -> Result<String, ToolError> {
    let reply = exec
        .sample(SamplingRequest::user_text("Say hello", 10))
        .await
        .map_err(|error| ToolError::new(error.to_string()))?;
    Ok(format!("{:?}", reply.content))
}

/// Lists the client's roots.
#[tool]
async fn needs_roots(exec: &ToolExec) -> Result<String, ToolError> {
    let roots = exec
        .list_roots(RootsRequest::new())
        .await
        .map_err(|error| ToolError::new(error.to_string()))?;
    Ok(format!("{roots:?}"))
}

/// Asks a name and the roots at once, each under a key of its own.
#[tool]
async fn named_inputs(exec: &ToolExec) -> Result<String, ToolError> {
    let form = ElicitationRequest::new(
        "What is your name?",
        json!({"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}),
    )
    .input_key("user_name");
    let (name, roots) = tokio::join!(
        exec.elicit(form),
        exec.list_roots(RootsRequest::new().input_key("client_roots")),
    );
    let name = match name.map_err(|error| ToolError::new(error.to_string()))? {
        Elicitation::Accept(content) => content["name"].as_str().unwrap_or_default().to_owned(),
        other => format!("{other:?}"),
    };
    let roots = roots.map_err(|error| ToolError::new(error.to_string()))?;
    Ok(format!("{name} in {}", roots[0].uri))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_capability_the_client_did_not_declare_is_error_32021_with_status_400() {
    let registry = Registry::new();
    registry.register(NeedsSamplingTool).unwrap();
    registry.register(NeedsRootsTool).unwrap();
    let url = serve(&registry).await;
    for (tool, capability) in [("needs_sampling", "sampling"), ("needs_roots", "roots")] {
        let (status, answer) = post(&url, "tools/call", json!({"name": tool}), None).await;
        assert_eq!(status, 400, "{tool}: {answer}");
        assert_eq!(answer["error"]["code"], -32021, "{tool}: {answer}");
        assert!(
            answer["error"]["data"]["requiredCapabilities"][capability].is_object(),
            "{tool}: {answer}"
        );
        assert_eq!(
            answer["error"]["message"],
            format!("Missing required client capability: {capability}"),
            "{tool}: {answer}"
        );
        // Declared, the same call asks the client (an `input_required` round) instead.
        let params = json!({"name": tool, "_meta": meta(json!({capability: {}}))});
        let (status, answer) = post(&url, "tools/call", params, None).await;
        assert_eq!(status, 200, "{tool}: {answer}");
        assert_eq!(
            answer["result"]["resultType"], "input_required",
            "{tool}: {answer}"
        );
    }
}

/// A job that runs only as a task; counts its runs in `runs`.
fn task_only(runs: std::sync::Arc<std::sync::atomic::AtomicUsize>) -> ToolDefinition {
    ToolDefinition::builder("task_only")
        .task_required()
        .handler(move |_: Value, _: ToolExec| {
            runs.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            async { Ok(json!("ran")) }
        })
        .build()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_only_tool_refuses_a_client_without_tasks_before_it_runs() {
    let runs = std::sync::Arc::default();
    let registry = Registry::new();
    registry
        .register(task_only(std::sync::Arc::clone(&runs)))
        .unwrap();
    let url = serve(&registry).await;
    let (status, answer) = post(&url, "tools/call", json!({"name": "task_only"}), None).await;
    assert_eq!(status, 400, "{answer}");
    assert_eq!(answer["error"]["code"], -32021, "{answer}");
    let required = &answer["error"]["data"]["requiredCapabilities"];
    assert!(
        required["extensions"]["io.modelcontextprotocol/tasks"].is_object(),
        "{answer}"
    );
    assert_eq!(runs.load(std::sync::atomic::Ordering::SeqCst), 0);
    // Declaring the extension, the call becomes a task.
    let capabilities = meta(json!({"extensions": {"io.modelcontextprotocol/tasks": {}}}));
    let params = json!({"name": "task_only", "_meta": capabilities});
    let (status, answer) = post(&url, "tools/call", params, None).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["result"]["resultType"], "task", "{answer}");
}

/// Asks a name before its task exists, then works on as a task.
fn name_then_task() -> ToolDefinition {
    ToolDefinition::builder("name_then_task")
        .input_before_task()
        .handler(|_: Value, exec: ToolExec| async move {
            let form = ElicitationRequest::new(
                "What is your name?",
                json!({"type": "object", "properties": {"name": {"type": "string"}}}),
            )
            .input_key("user_name");
            match exec.elicit(form).await {
                Ok(Elicitation::Accept(content)) => Ok(json!(format!(
                    "done for {}",
                    content["name"].as_str().unwrap_or_default()
                ))),
                other => Err(ToolError::new(format!("{other:?}"))),
            }
        })
        .build()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_that_asks_before_its_task_gets_rounds_then_the_task() {
    let registry = Registry::new();
    registry.register(name_then_task()).unwrap();
    let url = serve(&registry).await;
    let capabilities = meta(json!({
        "elicitation": {},
        "extensions": {"io.modelcontextprotocol/tasks": {}},
    }));
    let params = json!({"name": "name_then_task", "_meta": capabilities});
    let (_, first) = post(&url, "tools/call", params, None).await;
    assert_eq!(first["result"]["resultType"], "input_required", "{first}");
    assert!(first["result"].get("taskId").is_none(), "{first}");
    assert!(first["result"]["inputRequests"]["user_name"].is_object());
    let params = json!({
        "name": "name_then_task",
        "_meta": capabilities,
        "requestState": first["result"]["requestState"],
        "inputResponses": {"user_name": {"action": "accept", "content": {"name": "Ada"}}},
    });
    let (_, second) = post(&url, "tools/call", params, None).await;
    assert_eq!(second["result"]["resultType"], "task", "{second}");
    assert!(second["result"].get("requestState").is_none(), "{second}");
    let id = second["result"]["taskId"].clone();
    // Waits for the task to complete; the bound only fails the test.
    let deadline = tokio::time::Instant::now() + FAILURE_BOUND;
    let done = loop {
        let params = json!({"taskId": id, "_meta": capabilities});
        let (_, got) = post(&url, "tasks/get", params, None).await;
        if got["result"]["status"] == "completed" {
            break got;
        }
        assert_eq!(got["result"]["status"], "working", "{got}");
        assert!(tokio::time::Instant::now() < deadline, "{got}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(
        done["result"]["result"]["content"][0]["text"], "done for Ada",
        "{done}"
    );
}

/// Always panics.
#[tool(task)]
async fn panicking_job() -> String {
    panic!("the job exploded")
}

/// Always fails with its own error.
#[tool(task)]
async fn failing_job() -> Result<String, ToolError> {
    Err(ToolError::new("the job failed"))
}

/// Starts `name` as a task for a client declaring the extension and polls it (the bound only
/// fails the test) until it ends; the `tasks/get` result.
async fn task_end(url: &str, name: &str) -> Value {
    let capabilities = meta(json!({"extensions": {"io.modelcontextprotocol/tasks": {}}}));
    let params = json!({"name": name, "_meta": capabilities});
    let (_, created) = post(url, "tools/call", params, None).await;
    assert_eq!(created["result"]["resultType"], "task", "{created}");
    let id = created["result"]["taskId"].clone();
    let deadline = tokio::time::Instant::now() + FAILURE_BOUND;
    loop {
        let params = json!({"taskId": id, "_meta": capabilities});
        let (_, got) = post(url, "tasks/get", params, None).await;
        if got["result"]["status"] != "working" {
            return got["result"].clone();
        }
        assert!(tokio::time::Instant::now() < deadline, "{got}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panicking_task_fails_with_a_protocol_error_and_a_tool_error_completes() {
    let registry = Registry::new();
    registry.register(PanickingJobTool).unwrap();
    registry.register(FailingJobTool).unwrap();
    let url = serve(&registry).await;
    let failed = task_end(&url, "panicking_job").await;
    assert_eq!(failed["status"], "failed", "{failed}");
    assert_eq!(failed["error"]["code"], -32603, "{failed}");
    assert_eq!(failed["error"]["data"]["code"], "TOOL_PANICKED", "{failed}");
    assert_eq!(
        failed["error"]["message"], "tool \"panicking_job\" panicked: the job exploded",
        "{failed}"
    );
    assert!(failed.get("result").is_none(), "{failed}");
    // A tool's own error is no protocol error: its task completes with `isError`.
    let completed = task_end(&url, "failing_job").await;
    assert_eq!(completed["status"], "completed", "{completed}");
    assert_eq!(completed["result"]["isError"], true, "{completed}");
    assert!(completed.get("error").is_none(), "{completed}");
    // Not as a task, the panic is the call's `isError` result, as before.
    let (_, plain) = post(&url, "tools/call", json!({"name": "panicking_job"}), None).await;
    assert_eq!(plain["result"]["isError"], true, "{plain}");
    assert_eq!(
        plain["result"]["content"][0]["text"],
        "Error: tool \"panicking_job\" panicked: the job exploded",
        "{plain}"
    );
}

/// Fails as a failure of the server, not with an answer of its own.
#[tool(task)]
async fn broken_store_job() -> Result<String, ToolError> {
    Err(ToolError::coded(ErrorCode::Internal, "the store is down"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_internal_error_fails_the_task_and_is_a_protocol_error_for_a_plain_call() {
    let registry = Registry::new();
    registry.register(BrokenStoreJobTool).unwrap();
    let url = serve(&registry).await;
    let failed = task_end(&url, "broken_store_job").await;
    assert_eq!(failed["status"], "failed", "{failed}");
    assert_eq!(failed["error"]["code"], -32603, "{failed}");
    assert_eq!(failed["error"]["message"], "the store is down", "{failed}");
    assert_eq!(
        failed["error"]["data"]["code"], "INTERNAL_ERROR",
        "{failed}"
    );
    assert!(failed.get("result").is_none(), "{failed}");
    // Not as a task, the call is answered with the same protocol error, not a tool result.
    let (_, plain) = post(
        &url,
        "tools/call",
        json!({"name": "broken_store_job"}),
        None,
    )
    .await;
    assert_eq!(plain["error"]["code"], -32603, "{plain}");
    assert_eq!(plain["error"]["message"], "the store is down", "{plain}");
    assert_eq!(plain["error"]["data"]["code"], "INTERNAL_ERROR", "{plain}");
    assert!(plain.get("result").is_none(), "{plain}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_tool_is_invalid_params_not_a_tool_result() {
    let registry = Registry::new();
    registry.register(NeedsSamplingTool).unwrap();
    let url = serve(&registry).await;
    let (_, answer) = post(&url, "tools/call", json!({"name": "no_such_tool"}), None).await;
    assert_eq!(answer["error"]["code"], -32602, "{answer}");
    assert!(answer.get("result").is_none(), "{answer}");
    assert!(
        answer["error"]["message"]
            .as_str()
            .is_some_and(|message| message.contains("no_such_tool")),
        "{answer}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_for_the_client_use_the_tools_keys_and_unanswered_ones_are_asked_again() {
    let registry = Registry::new();
    registry.register(NamedInputsTool).unwrap();
    let url = serve(&registry).await;
    let capabilities = meta(json!({"elicitation": {}, "roots": {}}));
    let params = json!({"name": "named_inputs", "_meta": capabilities});
    let (_, first) = post(&url, "tools/call", params, None).await;
    let requests = &first["result"]["inputRequests"];
    assert_eq!(
        requests["user_name"]["method"], "elicitation/create",
        "{first}"
    );
    assert_eq!(requests["client_roots"]["method"], "roots/list", "{first}");
    let state = first["result"]["requestState"].clone();

    // Only the name: the roots are asked again, under the same key.
    let params = json!({
        "name": "named_inputs",
        "_meta": capabilities,
        "requestState": state,
        "inputResponses": {"user_name": {"action": "accept", "content": {"name": "Ada"}}},
    });
    let (_, second) = post(&url, "tools/call", params, None).await;
    let requests = second["result"]["inputRequests"]
        .as_object()
        .unwrap_or_else(|| panic!("asked again: {second}"));
    assert_eq!(
        requests.keys().collect::<Vec<_>>(),
        ["client_roots"],
        "{second}"
    );
    let params = json!({
        "name": "named_inputs",
        "_meta": capabilities,
        "requestState": second["result"]["requestState"],
        "inputResponses": {"client_roots": {"roots": [{"uri": "file:///work"}]}},
    });
    let (_, done) = post(&url, "tools/call", params, None).await;
    assert_eq!(
        done["result"]["content"][0]["text"], "Ada in file:///work",
        "{done}"
    );
}

/// A tool server serves no resources: reading one is the 2026-07-28 "Resource not found"
/// (SEP-2164: -32602 with the URI in the data), never a method the server lacks or an empty
/// `contents`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resource_read_is_resource_not_found_with_its_uri() {
    let registry = Registry::new();
    registry.register(NeedsSamplingTool).unwrap();
    let url = serve(&registry).await;
    let uri = "test://nonexistent-resource";
    let (_, answer) = post(&url, "resources/read", json!({"uri": uri}), None).await;
    assert_eq!(answer["error"]["code"], -32602, "{answer}");
    assert_eq!(answer["error"]["message"], "Resource not found", "{answer}");
    assert_eq!(answer["error"]["data"]["uri"], uri, "{answer}");
    assert!(answer.get("result").is_none(), "{answer}");
}

/// A first call may bring the answers it already has (SEP-2322): those under the keys the tool
/// asks with answer its requests at once, keys nobody asked under are ignored, and an answer
/// that is not a result of its request's kind answers nothing, so that request is asked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn answers_a_first_call_brings_answer_the_tools_requests_and_extra_keys_are_ignored() {
    let registry = Registry::new();
    registry.register(NamedInputsTool).unwrap();
    let url = serve(&registry).await;
    let capabilities = meta(json!({"elicitation": {}, "roots": {}}));
    let params = json!({
        "name": "named_inputs",
        "_meta": capabilities,
        "inputResponses": {
            "user_name": {"action": "accept", "content": {"name": "Ada"}},
            "client_roots": {"roots": [{"uri": "file:///work"}]},
            "unknown_extra_key": {"action": "accept", "content": {"foo": "bar"}},
        },
    });
    let (_, done) = post(&url, "tools/call", params, None).await;
    assert_eq!(
        done["result"]["content"][0]["text"], "Ada in file:///work",
        "{done}"
    );

    let params = json!({
        "name": "named_inputs",
        "_meta": capabilities,
        "inputResponses": {
            "user_name": 12345,
            "client_roots": {"roots": [{"uri": "file:///work"}]},
        },
    });
    let (_, asked) = post(&url, "tools/call", params, None).await;
    let requests = asked["result"]["inputRequests"]
        .as_object()
        .unwrap_or_else(|| panic!("asked: {asked}"));
    assert_eq!(
        requests.keys().collect::<Vec<_>>(),
        ["user_name"],
        "{asked}"
    );
}

/// JSON Schema 2020-12 with every keyword an inlining dialect would lose.
fn written_schema() -> Value {
    json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "$defs": {"address": {
            "$anchor": "addressDef",
            "type": "object",
            "properties": {"city": {"type": "string"}},
        }},
        "properties": {
            "address": {"$ref": "#/$defs/address"},
            "phone": {"type": "string"},
            "email": {"type": "string"},
            "contactMethod": {"type": "string", "enum": ["phone", "email"]},
        },
        "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
        "if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
        "then": {"required": ["phone"]},
        "else": {"required": ["email"]},
        "additionalProperties": false,
    })
}

/// A place.
#[tool_type]
struct Place {
    city: String,
}

/// Takes two places (its derived schema has `$defs` and `$ref`s).
#[tool]
async fn route(from: Place, to: Place) -> String {
    format!("{} to {}", from.city, to.city)
}

/// The `inputSchema` of every tool `url` lists at 2026-07-28, by name.
async fn listed_schemas(url: &str) -> serde_json::Map<String, Value> {
    let (_, answer) = post(url, "tools/list", json!({}), None).await;
    answer["result"]["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("a tool list: {answer}"))
        .iter()
        .map(|tool| {
            let name = tool["name"].as_str().unwrap_or_default().to_owned();
            (name, tool["inputSchema"].clone())
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn schemas_are_served_as_written_by_hand_derived_and_reserved_from_upstream() {
    let upstream = Registry::new();
    let written = ToolDefinition::builder("contact")
        .description("Takes a contact")
        .parameters(written_schema())
        .handler(|_: Value, _: ToolExec| async { Ok(json!("ok")) })
        .build()
        .unwrap();
    upstream.register(written).unwrap();
    upstream.register(RouteTool).unwrap();
    let upstream_url = serve(&upstream).await;
    let schemas = listed_schemas(&upstream_url).await;
    assert_eq!(schemas["contact"], written_schema());
    let derived = &schemas["route"];
    assert_eq!(derived, ToolDefinition::from_tool(RouteTool).parameters());
    assert!(derived["$defs"]["Place"].is_object(), "{derived}");
    assert_eq!(derived["properties"]["from"]["$ref"], "#/$defs/Place");

    // Re-served: a registry that reaches the upstream server serves its tools unchanged.
    let registry = Registry::new();
    let handle = registry
        .add_mcp_server(McpServer::http("up", upstream_url))
        .await
        .expect("connects");
    let url = serve(&registry).await;
    let schemas = listed_schemas(&url).await;
    assert_eq!(schemas["mcp__up__contact"], written_schema());
    assert_eq!(&schemas["mcp__up__route"], derived);
    handle.disconnect().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_auth_on_loopback_its_own_loopback_origins_pass_and_others_are_refused() {
    let registry = Registry::new();
    registry.register(RouteTool).unwrap();
    let url = serve(&registry).await;
    let port = url
        .trim_end_matches("/mcp")
        .rsplit(':')
        .next()
        .unwrap()
        .to_owned();
    for host in ["localhost", "127.0.0.1", "[::1]"] {
        let origin = format!("http://{host}:{port}");
        let (status, answer) = post(&url, "tools/list", json!({}), Some(&origin)).await;
        assert_eq!(status, 200, "{origin}: {answer}");
    }
    let other_port = if port == "1" { "2" } else { "1" };
    for origin in [
        "http://evil.example".to_owned(),
        format!("http://evil.example:{port}"),
        format!("http://localhost:{other_port}"),
        format!("https://localhost:{port}"),
    ] {
        let (status, _) = post(&url, "tools/list", json!({}), Some(&origin)).await;
        assert_eq!(status, 403, "{origin}");
    }
}
