//! A small MCP client on `McpServer::http`, in the shape the official MCP conformance suite
//! drives clients: it is started with the server's URL as its last argument and the scenario's
//! name in `MCP_CONFORMANCE_SCENARIO`.
//!
//! ```sh
//! cargo build --example conformance_client
//! conformance client --command target/debug/examples/conformance_client --scenario tools_call
//! ```
//!
//! It connects (`server/discover`, else `initialize`, then `tools/list`), calls the tool the
//! scenario expects, prints the result and exits: 0 when every call succeeded, 1 otherwise. A
//! server that asks the person (elicitation) gets an accepting answer with no values of its
//! own: the client fills in the requested schema's defaults.
//!
//! The `auth/*` scenarios put the server behind OAuth. The client logs in with the
//! authorization code flow through `McpLoopbackAuthorizer`, whose printed URL a stand-in browser
//! follows (the suite's authorization endpoint approves at once and redirects to the loopback
//! listener), or with client credentials; the suite's `MCP_CONFORMANCE_CONTEXT` gives the
//! pre-registered client, if any. Then it calls every tool the server lists.

use dsh_tools::client::Elicitation;
use dsh_tools::mcp::{McpClientCredentials, McpLoopbackAuthorizer, McpOAuthLogin, McpServer};
use dsh_tools::serde_json::json;
use dsh_tools::{Registry, ToolCall};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let url = std::env::args()
        .next_back()
        .filter(|url| url.starts_with("http"))
        .ok_or("usage: conformance_client URL (the server's streamable HTTP URL)")?;
    let scenario = std::env::var("MCP_CONFORMANCE_SCENARIO").unwrap_or_default();
    let registry = Registry::new();
    let mut config = McpServer::http("conformance", url)
        .on_elicitation(|_request| async { Elicitation::Accept(Default::default()) });
    if scenario.starts_with("auth/") {
        config = authenticated(config, &scenario).await?;
    }
    let server = registry.add_mcp_server(config).await?;
    // Behind OAuth: every tool the server lists.
    let prefix = dsh_tools::mcp::mcp_tool_name(server.server(), "");
    let listed: Vec<String> = server
        .tools()
        .iter()
        .filter_map(|name| name.strip_prefix(&prefix).map(str::to_owned))
        .collect();
    // Which tool each scenario's server offers, and its arguments.
    let calls = match scenario.as_str() {
        "tools_call" => vec![("add_numbers", json!({"a": 5, "b": 3}))],
        "elicitation-sep1034-client-defaults" => {
            vec![("test_client_elicitation_defaults", json!({}))]
        }
        "sse-retry" => vec![("test_reconnection", json!({}))],
        auth if auth.starts_with("auth/") => listed
            .iter()
            .map(|name| (name.as_str(), json!({})))
            .collect(),
        _ => Vec::new(),
    };
    let mut failed = false;
    for (n, (raw, arguments)) in calls.into_iter().enumerate() {
        let name = dsh_tools::mcp::mcp_tool_name(server.server(), raw);
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

/// The client id the suite's authorization servers accept as a client ID metadata document.
const CLIENT_METADATA_URL: &str = "https://conformance-test.local/client-metadata.json";

/// `config` with the OAuth the scenario's server needs.
async fn authenticated(
    config: McpServer,
    scenario: &str,
) -> Result<McpServer, Box<dyn std::error::Error>> {
    let context: dsh_tools::serde_json::Value = std::env::var("MCP_CONFORMANCE_CONTEXT")
        .ok()
        .and_then(|text| dsh_tools::serde_json::from_str(&text).ok())
        .unwrap_or_default();
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
