//! Tool lists, as a sync reads them: every page, one malformed tool never takes its siblings down,
//! nor does a repeated or taken name (that tool alone is skipped), hostile depth is refused per
//! tool; results: structured content checked against `outputSchema`, rendering of mixed blocks.
//! Served by a bare JSON-RPC server of ours (tests/mcp_servers/raw_list_server.py), because the
//! official SDKs refuse to send such lists; the real servers are covered by the other MCP tests.

use crate::mcp_support;

use dsh_tools::mcp::{McpServer, ReconnectPolicy, mcp_tool_name};
use dsh_tools::prelude::*;
use dsh_tools::result::{ContentBlock, ErrorCode};
use dsh_tools::{Registry, ToolCall, ToolDefinition};
use serde_json::{Value, json};

fn call(id: &str, name: &str, arguments: Value) -> ToolCall {
    ToolCall::new(id, name, arguments)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_page_is_registered_and_raw_names_go_on_the_wire() {
    let tools = require_tools!();
    let registry = Registry::new();
    let handle = registry
        .add_mcp_server(tools.raw_lists("raw", "paged"))
        .await
        .unwrap();
    let dotted = mcp_tool_name("raw", "admin.reset");
    assert!(dotted.starts_with("mcp__raw__admin_reset_"), "{dotted}");
    assert_eq!(
        handle.tools(),
        [
            "mcp__raw__first".to_owned(),
            dotted.clone(),
            "mcp__raw__admin_reset".to_owned(),
            "mcp__raw__second".to_owned(),
            "mcp__raw__third".to_owned(),
            "mcp__raw__bad_structured".to_owned(),
            "mcp__raw__mixed".to_owned(),
        ]
    );
    let echoed = registry
        .execute(call("1", &dotted, json!({"text": "x"})))
        .await;
    assert_eq!(
        echoed.text(),
        r#"{"arguments": {"text": "x"}, "tool": "admin.reset"}"#
    );
    // Non-object arguments reach the server as `{}`.
    let coerced = registry
        .execute(call("2", "mcp__raw__third", Value::Null))
        .await;
    assert_eq!(coerced.text(), r#"{"arguments": {}, "tool": "third"}"#);
    handle.disconnect().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_tools_are_skipped_and_their_siblings_register() {
    let tools = require_tools!();
    let registry = Registry::new();
    let handle = registry
        .add_mcp_server(tools.raw_lists("raw", "malformed"))
        .await
        .expect("one bad tool does not fail the server");
    assert_eq!(
        handle.tools(),
        [
            "mcp__raw__good_one".to_owned(),
            "mcp__raw__good_two".to_owned()
        ]
    );
    let result = registry
        .execute(call("1", "mcp__raw__good_two", json!({"text": "ok"})))
        .await;
    assert!(!result.is_error(), "{result:?}");
    handle.disconnect().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_depth_is_refused_for_that_tool_only() {
    let tools = require_tools!();
    let registry = Registry::new();
    let handle = registry
        .add_mcp_server(tools.raw_lists("raw", "deep"))
        .await
        .expect("a 5,000-deep schema does not fail the server");
    assert_eq!(handle.tools(), ["mcp__raw__shallow".to_owned()]);
    handle.disconnect().await;
}

/// Starts raw_list_server.py in `mode` over streamable HTTP (`--sse`: SSE answers) and returns
/// the child (killed on drop) and its URL, once it listens.
async fn raw_lists_over_http(
    tools: &mcp_support::Tools,
    mode: &str,
    sse: bool,
) -> (tokio::process::Child, String) {
    use tokio::io::AsyncBufReadExt;
    let script = format!(
        "{}/tests/mcp_servers/raw_list_server.py",
        env!("CARGO_MANIFEST_DIR")
    );
    let mut command = tokio::process::Command::new(tools.python());
    command.args([script.as_str(), mode, "--http"]);
    if sse {
        command.arg("--sse");
    }
    let mut child = command
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let mut lines = tokio::io::BufReader::new(stdout).lines();
    let first = tokio::time::timeout(mcp_support::WAIT, lines.next_line())
        .await
        .expect("the server prints its port")
        .unwrap()
        .unwrap();
    let port = first.strip_prefix("PORT ").expect("PORT <n>");
    (child, format!("http://127.0.0.1:{port}/mcp"))
}

/// Issue 11 (hostile input from an MCP server) over streamable HTTP: a 5,000-deep schema in a JSON
/// answer to `tools/list` skips that one tool instead of failing the whole list.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_depth_over_http_json_is_refused_for_that_tool_only() {
    let tools = require_tools!();
    let (_server, url) = raw_lists_over_http(tools, "deep", false).await;
    let registry = Registry::new();
    let handle = registry
        .add_mcp_server(McpServer::http("raw", url).reconnect(ReconnectPolicy::disabled()))
        .await
        .expect("a 5,000-deep schema does not fail the server");
    assert_eq!(handle.tools(), ["mcp__raw__shallow".to_owned()]);
    let result = registry
        .execute(call("1", "mcp__raw__shallow", json!({"text": "ok"})))
        .await;
    assert!(!result.is_error(), "{result:?}");
    handle.disconnect().await;
}

/// The same list answered as an SSE event.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_depth_over_http_sse_is_refused_for_that_tool_only() {
    let tools = require_tools!();
    let (_server, url) = raw_lists_over_http(tools, "deep", true).await;
    let registry = Registry::new();
    let handle = registry
        .add_mcp_server(McpServer::http("raw", url).reconnect(ReconnectPolicy::disabled()))
        .await
        .expect("a 5,000-deep schema does not fail the server");
    assert_eq!(handle.tools(), ["mcp__raw__shallow".to_owned()]);
    handle.disconnect().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_list_naming_a_tool_twice_keeps_the_first() {
    let tools = require_tools!();
    let registry = Registry::new();
    let handle = registry
        .add_mcp_server(tools.raw_lists("raw", "duplicate"))
        .await
        .expect("a repeated name does not fail the server");
    assert_eq!(handle.tools(), ["mcp__raw__twice".to_owned()]);
    handle.disconnect().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_foreign_tool_in_the_namespace_skips_that_tool_only() {
    let tools = require_tools!();
    let registry = Registry::new();
    let squatter = ToolDefinition::builder("mcp__raw__second")
        .handler(|_, _| async { Ok(json!("mine")) })
        .build()
        .unwrap();
    registry.register(squatter).unwrap();
    let handle = registry
        .add_mcp_server(tools.raw_lists("raw", "paged"))
        .await
        .expect("a taken name does not fail the server");
    assert!(!handle.tools().contains(&"mcp__raw__second".to_owned()));
    assert_eq!(handle.tools().len(), 6, "{:?}", handle.tools());
    // The squatter untouched.
    let foreign = registry
        .execute(call("1", "mcp__raw__second", json!({})))
        .await;
    assert_eq!(foreign.value(), Some(&json!("mine")));
    handle.disconnect().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn structured_content_is_checked_and_blocks_render() {
    let tools = require_tools!();
    let registry = Registry::new();
    let handle = registry
        .add_mcp_server(tools.raw_lists("raw", "paged"))
        .await
        .unwrap();
    let bad = registry
        .execute(call("1", "mcp__raw__bad_structured", json!({})))
        .await;
    assert_eq!(
        bad.error_code(),
        Some(ErrorCode::InvalidToolOutput),
        "{bad:?}"
    );
    let mixed = registry
        .execute(call("2", "mcp__raw__mixed", json!({})))
        .await;
    assert_eq!(
        mixed.content(),
        [
            ContentBlock::text("line one\nline two"),
            ContentBlock::Image {
                media_type: "image/png".into(),
                data: "iVBORw0KGgo=".into()
            },
            ContentBlock::text(
                "Resource link: notes (file:///notes.txt)\n[embedded resource mem://a]\ninline"
            ),
        ]
    );
    assert_eq!(
        mixed.value().unwrap()["content"].as_array().unwrap().len(),
        5
    );
    handle.disconnect().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resyncs_skip_duplicates_and_taken_names_alone() {
    let tools = require_tools!();
    let registry = Registry::new();
    let mut events = registry.subscribe();
    let handle = registry
        .add_mcp_server(tools.raw_lists("raw", "resync"))
        .await
        .unwrap();
    let (first, listed) = mcp_support::wait_for_generation(&mut events, "raw", 0).await;
    assert_eq!(listed.len(), 3);

    // The list naming `x` twice registers it once; the next list is the next generation.
    let triggered = registry
        .execute(call("1", "mcp__raw__dupe_trigger", json!({})))
        .await;
    assert!(!triggered.is_error(), "{triggered:?}");
    let (second, listed) = mcp_support::wait_for_generation(&mut events, "raw", first).await;
    assert_eq!(second, first + 1);
    assert_eq!(listed, ["mcp__raw__a", "mcp__raw__x"]);
    let (third, listed) = mcp_support::wait_for_generation(&mut events, "raw", second).await;
    assert_eq!(
        listed,
        [
            "mcp__raw__a",
            "mcp__raw__after",
            "mcp__raw__conflict_trigger"
        ]
    );

    // A foreign tool holds a name of the next list: that tool alone is skipped.
    let squatter = ToolDefinition::builder("mcp__raw__squatted")
        .handler(|_, _| async { Ok(json!("mine")) })
        .build()
        .unwrap();
    registry.register(squatter).unwrap();
    let triggered = registry
        .execute(call("2", "mcp__raw__conflict_trigger", json!({})))
        .await;
    assert!(!triggered.is_error(), "{triggered:?}");
    let (_, listed) = mcp_support::wait_for_generation(&mut events, "raw", third).await;
    assert_eq!(listed, ["mcp__raw__a"]);
    assert_eq!(handle.tools(), ["mcp__raw__a"]);
    let foreign = registry
        .execute(call("3", "mcp__raw__squatted", json!({})))
        .await;
    assert_eq!(foreign.value(), Some(&json!("mine")));
    handle.disconnect().await;
}
