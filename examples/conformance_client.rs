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

use dsh_tools::client::Elicitation;
use dsh_tools::mcp::McpServer;
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
    let server = registry
        .add_mcp_server(
            McpServer::http("conformance", url)
                .on_elicitation(|_request| async { Elicitation::Accept(Default::default()) }),
        )
        .await?;
    // Which tool each scenario's server offers, and its arguments.
    let calls = match scenario.as_str() {
        "tools_call" => vec![("add_numbers", json!({"a": 5, "b": 3}))],
        "elicitation-sep1034-client-defaults" => {
            vec![("test_client_elicitation_defaults", json!({}))]
        }
        "sse-retry" => vec![("test_reconnection", json!({}))],
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
