//! MCP tools from real servers: server-everything, server-filesystem and mcp-server-time over
//! stdio, installed at pinned versions by `.ci/install-tools.sh`.

use crate::mcp_support;

use dsh_tools::events::ToolEvent;
use dsh_tools::mcp::McpError;
use dsh_tools::prelude::*;
use dsh_tools::registry::ExecutionMode;
use dsh_tools::result::{ContentBlock, ErrorCode};
use dsh_tools::{Registry, ToolCall, ToolResult};
use serde_json::{Value, json};

fn call(id: &str, name: &str, arguments: Value) -> ToolCall {
    ToolCall::new(id, name, arguments)
}

fn value(result: &ToolResult) -> &Value {
    result
        .value()
        .unwrap_or_else(|| panic!("call failed: {result:?}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn everything_lists_and_calls_its_tools() {
    let tools = require_tools!();
    let registry = Registry::new();
    let handle = registry
        .add_mcp_server(tools.everything("everything"))
        .await
        .expect("server-everything connects");
    let names = handle.tools();
    for expected in [
        "mcp__everything__echo",
        "mcp__everything__get-sum",
        "mcp__everything__get-tiny-image",
        "mcp__everything__get-structured-content",
        "mcp__everything__trigger-long-running-operation",
    ] {
        assert!(
            names.iter().any(|name| name == expected),
            "{expected} in {names:?}"
        );
        assert!(registry.get(expected, None).is_some());
    }
    // server-everything announces list changes of its own right after connecting.
    assert!(handle.generation() >= 1);

    // The dashed raw name goes on the wire unchanged.
    let sum = registry
        .execute(call(
            "1",
            "mcp__everything__get-sum",
            json!({"a": 2, "b": 40}),
        ))
        .await;
    assert!(sum.text().contains("42"), "{sum:?}");
    assert_eq!(value(&sum)["content"][0]["type"], "text");

    let image = registry
        .execute(call("2", "mcp__everything__get-tiny-image", json!({})))
        .await;
    let images: Vec<&ContentBlock> = image
        .content()
        .iter()
        .filter(|block| matches!(block, ContentBlock::Image { .. }))
        .collect();
    assert_eq!(images.len(), 1, "{image:?}");
    let ContentBlock::Image { media_type, data } = images[0] else {
        unreachable!()
    };
    assert_eq!(media_type, "image/png");
    assert!(data.len() > 20);

    let weather = registry
        .execute(call(
            "3",
            "mcp__everything__get-structured-content",
            json!({"location": "Chicago"}),
        ))
        .await;
    let structured = &value(&weather)["structuredContent"];
    assert!(structured["temperature"].is_number(), "{weather:?}");
    assert!(structured["conditions"].is_string());
    // The definition's output schema carries the server's outputSchema, so the value above was
    // validated against it.
    let definition = registry
        .get("mcp__everything__get-structured-content", None)
        .unwrap();
    let output = definition.output_schema().unwrap();
    assert_eq!(
        output["properties"]["structuredContent"]["required"],
        json!(["temperature", "conditions", "humidity"])
    );
    assert_eq!(output["required"], json!(["content", "structuredContent"]));
    handle.disconnect().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_arguments_fail_client_side() {
    let tools = require_tools!();
    let registry = Registry::new();
    let handle = registry
        .add_mcp_server(tools.everything("everything"))
        .await
        .unwrap();
    let mut events = registry.subscribe();
    let result = registry
        .execute(call("1", "mcp__everything__get-sum", json!({"a": "two"})))
        .await;
    assert_eq!(
        result.error_code(),
        Some(ErrorCode::InvalidArgs),
        "{result:?}"
    );
    let message = &result.error().unwrap().message;
    assert!(message.starts_with("invalid arguments: "), "{message}");
    assert!(
        message.contains("missing required property \"b\""),
        "{message}"
    );
    assert!(message.contains("\"a\" must be a number"), "{message}");
    // Refused locally: no progress, and the enum of get-structured-content is checked too.
    let result = registry
        .execute(call(
            "2",
            "mcp__everything__get-structured-content",
            json!({"location": "Atlantis"}),
        ))
        .await;
    assert_eq!(
        result.error_code(),
        Some(ErrorCode::InvalidArgs),
        "{result:?}"
    );
    assert!(result.error().unwrap().message.contains("must be one of"));
    // Non-object arguments are coerced to `{}` (then fail for the missing properties).
    let result = registry
        .execute(call("3", "mcp__everything__get-sum", Value::Null))
        .await;
    let message = &result.error().unwrap().message;
    assert!(
        message.contains("missing required property \"a\""),
        "{message}"
    );
    let echo = registry
        .execute(call(
            "4",
            "mcp__everything__get-tiny-image",
            json!("stringly"),
        ))
        .await;
    assert!(!echo.is_error(), "{echo:?}");
    while let Ok(event) = events.try_recv() {
        assert!(
            !matches!(event, dsh_tools::events::ToolEvent::Progress { .. }),
            "{event:?}"
        );
    }
    handle.disconnect().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn annotations_are_kept_and_read_only_tools_run_in_parallel() {
    let tools = require_tools!();
    let registry = Registry::new();
    let handle = registry
        .add_mcp_server(tools.everything("everything"))
        .await
        .unwrap();
    let sum = registry.get("mcp__everything__get-sum", None).unwrap();
    let annotations = sum.annotations().expect("annotations kept");
    assert_eq!(annotations.read_only_hint, Some(true));
    assert_eq!(annotations.destructive_hint, Some(false));
    assert_eq!(annotations.idempotent_hint, Some(true));
    assert_eq!(annotations.open_world_hint, Some(false));
    assert_eq!(
        registry.execution_mode(&call(
            "1",
            "mcp__everything__get-sum",
            json!({"a": 1, "b": 2})
        )),
        ExecutionMode::Parallel
    );
    // One snapshot of the registry: the server may re-sync its list between two lookups.
    let exclusive: Vec<String> = registry
        .tools(None)
        .into_iter()
        .filter(|tool| {
            tool.name().starts_with("mcp__everything__")
                && tool.annotations().and_then(|a| a.read_only_hint) != Some(true)
        })
        .map(|tool| tool.name().to_owned())
        .collect();
    assert!(
        !exclusive.is_empty(),
        "server-everything has tools that are not read-only"
    );
    for name in exclusive {
        assert_eq!(
            registry.execution_mode(&call("2", &name, json!({}))),
            ExecutionMode::Exclusive,
            "{name}"
        );
    }
    handle.disconnect().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn filesystem_and_time_servers() {
    let tools = require_tools!();
    let dir = std::env::temp_dir().join(format!("dsh-mcp-fs-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("hello.txt"), "hello from disk").unwrap();
    let dir_text = dir.canonicalize().unwrap().display().to_string();
    let registry = Registry::new();
    let fs = registry
        .add_mcp_server(tools.filesystem("fs", &dir_text))
        .await
        .expect("server-filesystem connects");
    assert!(
        fs.tools()
            .iter()
            .any(|name| name == "mcp__fs__read_text_file"),
        "{:?}",
        fs.tools()
    );
    let read = registry
        .execute(call(
            "1",
            "mcp__fs__read_text_file",
            json!({"path": format!("{dir_text}/hello.txt")}),
        ))
        .await;
    assert!(read.text().contains("hello from disk"), "{read:?}");
    // Outside the allowed directory: the server answers `isError`, a failure result.
    let denied = registry
        .execute(call(
            "2",
            "mcp__fs__read_text_file",
            json!({"path": "/etc/hostname"}),
        ))
        .await;
    assert!(denied.is_error(), "{denied:?}");
    assert!(denied.value().is_none());

    let time = registry
        .add_mcp_server(tools.time("time"))
        .await
        .expect("mcp-server-time connects");
    assert!(
        time.tools()
            .iter()
            .any(|name| name == "mcp__time__get_current_time")
    );
    let now = registry
        .execute(call(
            "3",
            "mcp__time__get_current_time",
            json!({"timezone": "UTC"}),
        ))
        .await;
    assert!(now.text().contains("UTC"), "{now:?}");
    let converted = registry
        .execute(call(
            "4",
            "mcp__time__convert_time",
            json!({"source_timezone": "UTC", "time": "12:00", "target_timezone": "Asia/Tokyo"}),
        ))
        .await;
    assert!(converted.text().contains("21:00"), "{converted:?}");
    fs.disconnect().await;
    time.disconnect().await;
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn handles_disconnect_and_unregister_and_names_are_checked() {
    let tools = require_tools!();
    let registry = Registry::new();
    let handle = registry
        .add_mcp_server(tools.everything("everything"))
        .await
        .unwrap();
    let pid = handle.process_id().expect("a stdio child");
    assert_eq!(
        registry
            .add_mcp_server(tools.everything("everything"))
            .await
            .unwrap_err(),
        McpError::DuplicateServer("everything".into())
    );
    assert_eq!(
        registry
            .add_mcp_server(tools.everything("every.thing"))
            .await
            .unwrap_err(),
        McpError::InvalidName("every.thing".into())
    );
    // The live rmcp peer reaches what the bridge does not wrap (here, prompts).
    let peer = handle.peer().expect("a peer while connected");
    let prompts = peer.list_all_prompts().await.expect("prompts/list");
    assert!(!prompts.is_empty(), "server-everything lists prompts");
    let mut events = registry.subscribe();
    let before = handle.generation();
    handle.disconnect().await;
    assert!(handle.peer().is_none(), "no peer once disconnected");
    assert!(registry.get("mcp__everything__echo", None).is_none());
    // Observers see the tools go: a generation after the last one seen, with no tools (a
    // re-sync the server asked for may land in between, so skip generations that list tools).
    let generation = mcp_support::wait_for(&mut events, |event| match event {
        ToolEvent::ToolsChanged {
            source,
            generation,
            tools,
        } if source == "everything" && *generation > before && tools.is_empty() => {
            Some(*generation)
        }
        _ => None,
    })
    .await;
    assert!(generation > before);
    assert!(handle.tools().is_empty());
    assert!(!handle.is_connected());
    // The child is gone: signal 0 to its pid fails once it has been reaped.
    let alive = std::process::Command::new("kill")
        .args(["-0", &pid.to_string()])
        .status()
        .unwrap()
        .success();
    assert!(
        !alive,
        "server process {pid} still running after disconnect"
    );
    // The name is free again.
    let again = registry
        .add_mcp_server(tools.everything("everything"))
        .await
        .unwrap();
    again.disconnect().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agent_scopes_see_their_own_servers() {
    let tools = require_tools!();
    let registry = Registry::new();
    let agent = registry.agent("researcher");
    let handle = agent
        .add_mcp_server(tools.everything("everything"))
        .await
        .unwrap();
    assert!(agent.get("mcp__everything__echo").is_some());
    assert!(registry.get("mcp__everything__echo", None).is_none());
    let echo = registry
        .execute(
            call("1", "mcp__everything__echo", json!({"message": "scoped"}))
                .with_agent(agent.id().clone()),
        )
        .await;
    assert_eq!(echo.text(), "Echo: scoped");
    handle.disconnect().await;
    assert!(agent.get("mcp__everything__echo").is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_server_is_a_connect_error() {
    let registry = Registry::new();
    let err = registry
        .add_mcp_server(dsh_tools::mcp::McpServer::stdio(
            "nothing",
            "/nonexistent/mcp-server",
            Vec::<String>::new(),
        ))
        .await
        .unwrap_err();
    assert!(matches!(err, McpError::Connect { .. }), "{err:?}");
    assert!(registry.tools(None).is_empty());
}
