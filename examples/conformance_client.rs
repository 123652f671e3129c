//! A small MCP client on `McpServer::http`, in the shape the official MCP conformance suite
//! drives clients: it is started with the server's URL as its last argument and the scenario's
//! name in `MCP_CONFORMANCE_SCENARIO`.
//!
//! ```sh
//! cargo build --example conformance_client
//! conformance client --command target/debug/examples/conformance_client --scenario tools_call
//! ```
//!
//! It connects (`server/discover`, else `initialize`, then `tools/list`), makes the calls the
//! scenario expects (the list in the suite's context when it gives one, the tools a scenario
//! names, else every tool the client kept from the list), prints each result and exits: 0 when
//! every call succeeded, 1 otherwise. A
//! server that asks the person (elicitation) gets an accepting answer with no values of its
//! own: the client fills in the requested schema's defaults.
//!
//! The `auth/*` scenarios put the server behind OAuth. The client logs in with the
//! authorization code flow through `McpLoopbackAuthorizer`, whose printed URL a stand-in browser
//! follows (the suite's authorization endpoint approves at once and redirects to the loopback
//! listener), or with client credentials; the suite's `MCP_CONFORMANCE_CONTEXT` gives the
//! pre-registered client, if any.

use dsh_tools::client::Elicitation;
use dsh_tools::mcp::{McpClientCredentials, McpLoopbackAuthorizer, McpOAuthLogin, McpServer};
use dsh_tools::prelude::*;
use dsh_tools::serde_json::{Value, json};
use dsh_tools::{Registry, ToolCall};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let url = std::env::args()
        .next_back()
        .filter(|url| url.starts_with("http"))
        .ok_or("usage: conformance_client URL (the server's streamable HTTP URL)")?;
    let scenario = std::env::var("MCP_CONFORMANCE_SCENARIO").unwrap_or_default();
    let registry = Registry::new();
    // The suite bounds each scenario (`--timeout`); on a loaded machine connecting may take
    // longer than the default bound.
    let mut config = McpServer::http("conformance", url)
        .connect_timeout_ms(CONNECT_BOUND_MS)
        .on_elicitation(|_request| async { Elicitation::Accept(Default::default()) });
    if scenario.starts_with("auth/") {
        config = authenticated(config, &scenario).await?;
    }
    let server = registry.add_mcp_server(config).await?;
    // The tools the client kept from the server's list (a tool the client refuses, such as one
    // with an invalid `x-mcp-header`, is not among them).
    let prefix = dsh_tools::mcp::mcp_tool_name(server.server(), "");
    let listed: Vec<String> = server
        .tools()
        .iter()
        .filter_map(|name| name.strip_prefix(&prefix).map(str::to_owned))
        .collect();
    let calls = calls(&registry, server.server(), &scenario, &listed);
    let mut failed = false;
    for (n, (raw, arguments)) in calls.into_iter().enumerate() {
        let name = dsh_tools::mcp::mcp_tool_name(server.server(), &raw);
        let result = registry
            .execute(ToolCall::new(format!("call-{n}"), name, arguments))
            .await;
        println!("{raw}: {}", result.text());
        failed |= result.is_error();
    }
    server.disconnect().await;
    if failed {
        std::process::exit(1);
    }
    Ok(())
}

/// The calls the scenario expects, each a tool's name on the wire and its arguments: the
/// scenario's own list when its context gives one (`toolCalls`), the calls a scenario names,
/// else every tool the client kept, with its required arguments.
fn calls(
    registry: &Registry,
    server: &str,
    scenario: &str,
    listed: &[String],
) -> Vec<(String, Value)> {
    let context = context();
    if let Some(calls) = context["toolCalls"].as_array() {
        return calls
            .iter()
            .filter_map(|call| {
                let name = call["name"].as_str()?.to_owned();
                Some((name, call["arguments"].clone()))
            })
            .collect();
    }
    let call = |name: &str, arguments: Value| vec![(name.to_owned(), arguments)];
    match scenario {
        "tools_call" => call("add_numbers", json!({"a": 5, "b": 3})),
        "elicitation-sep1034-client-defaults" => {
            call("test_client_elicitation_defaults", json!({}))
        }
        "sse-retry" => call("test_reconnection", json!({})),
        // Hands the schema the client holds for the focal tool back to the server, which
        // compares it with what it sent.
        "json-schema-2020-12-preservation" => {
            let focal = dsh_tools::mcp::mcp_tool_name(server, "json_schema_2020_12_tool");
            let schema = registry
                .get(&focal, None)
                .map(|tool| tool.parameters().clone())
                .unwrap_or_default();
            call("json_schema_echo", json!({"schema": schema}))
        }
        // Only lists: its tool's schema points at a URL the client must not fetch.
        "json-schema-ref-no-deref" => Vec::new(),
        _ => listed
            .iter()
            .map(|name| {
                let tool = registry.get(&dsh_tools::mcp::mcp_tool_name(server, name), None);
                let arguments = tool
                    .map(|tool| required_arguments(tool.parameters()))
                    .unwrap_or_else(|| json!({}));
                (name.clone(), arguments)
            })
            .collect(),
    }
}

/// Arguments that fill in every required property of `schema` with a value of its type (the
/// first of an `enum`), for a tool the scenario only needs called.
fn required_arguments(schema: &Value) -> Value {
    let mut arguments = dsh_tools::serde_json::Map::new();
    let required = schema["required"].as_array().into_iter().flatten();
    for name in required.filter_map(Value::as_str) {
        let property = &schema["properties"][name];
        let value = match (property["enum"].get(0), property["type"].as_str()) {
            (Some(first), _) => first.clone(),
            (None, Some("integer" | "number")) => json!(1),
            (None, Some("boolean")) => json!(false),
            (None, Some("object")) => json!({}),
            (None, Some("array")) => json!([]),
            (None, _) => json!("x"),
        };
        arguments.insert(name.to_owned(), value);
    }
    Value::Object(arguments)
}

/// The suite's `MCP_CONFORMANCE_CONTEXT` (JSON), `null` when there is none.
fn context() -> Value {
    std::env::var("MCP_CONFORMANCE_CONTEXT")
        .ok()
        .and_then(|text| dsh_tools::serde_json::from_str(&text).ok())
        .unwrap_or_default()
}

/// How long connecting may take: a failure bound for a machine under load.
const CONNECT_BOUND_MS: u64 = 600_000;

/// The client id the suite's authorization servers accept as a client ID metadata document.
const CLIENT_METADATA_URL: &str = "https://conformance-test.local/client-metadata.json";

/// `config` with the OAuth the scenario's server needs.
async fn authenticated(
    config: McpServer,
    scenario: &str,
) -> Result<McpServer, Box<dyn std::error::Error>> {
    let context = context();
    let client_id = context["client_id"].as_str();
    let client_secret = context["client_secret"].as_str();
    if scenario.starts_with("auth/client-credentials")
        && let (Some(id), Some(secret)) = (client_id, client_secret)
    {
        return Ok(config.client_credentials(McpClientCredentials::new(id, secret)));
    }
    // The stand-in browser: follows the printed URL to the loopback listener.
    let authorizer = McpLoopbackAuthorizer::bind()?.notice(|url| {
        let url = url.to_owned();
        tokio::spawn(async move {
            if let Err(error) = reqwest::get(&url).await {
                eprintln!("the browser could not follow {url}: {error}");
            }
        });
    });
    let mut login = McpOAuthLogin::new(authorizer)
        .client_name("dsh-tools conformance client")
        .client_metadata_url(CLIENT_METADATA_URL);
    if let Some(id) = client_id {
        login = login.client_id(id);
        if let Some(secret) = client_secret {
            login = login.client_secret(secret);
        }
    }
    Ok(config.oauth_login(login))
}
