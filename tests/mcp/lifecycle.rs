//! The lifecycle of bridged MCP servers: `list_changed` re-syncs, progress events, timeouts,
//! cancellation, `isError`, and surviving a server killed mid-call over stdio and over HTTP. Real
//! servers only: server-everything and our own on `mcp==2.3.0`.

use crate::mcp_support;

use std::process::Stdio;

use dsh_tools::events::ToolEvent;
use dsh_tools::mcp::{MCP_DISCONNECTED, McpServer};
use dsh_tools::prelude::*;
use dsh_tools::result::ErrorCode;
use dsh_tools::{CancellationToken, Registry, ToolCall, ToolResult};
use mcp_support::{kill, quick_reconnect, wait_for, wait_for_generation};
use serde_json::json;
use tokio::io::AsyncBufReadExt;

fn call(id: &str, name: &str, arguments: serde_json::Value) -> ToolCall {
    ToolCall::new(id, name, arguments)
}

fn code(result: &ToolResult) -> Option<String> {
    result.error_code().map(|code| code.to_string())
}

/// Waits for the first progress event of `call_id`.
async fn first_progress(events: &mut tokio::sync::broadcast::Receiver<ToolEvent>, call_id: &str) {
    wait_for(events, |event| match event {
        ToolEvent::Progress { call_id: id, .. } if id == call_id => Some(()),
        _ => None,
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_changed_resyncs_into_a_new_generation() {
    let tools = require_tools!();
    let registry = Registry::new();
    let mut events = registry.subscribe();
    let handle = registry
        .add_mcp_server(tools.ours("ours", &[]))
        .await
        .unwrap();
    let (first, listed) = wait_for_generation(&mut events, "ours", 0).await;
    assert_eq!(first, 1);
    assert!(
        listed.contains(&"mcp__ours__add_tool".to_owned()),
        "{listed:?}"
    );
    assert!(registry.get("mcp__ours__late", None).is_none());

    let added = registry
        .execute(call("1", "mcp__ours__add_tool", json!({"name": "late"})))
        .await;
    assert!(!added.is_error(), "{added:?}");
    let (second, listed) = wait_for_generation(&mut events, "ours", first).await;
    assert!(listed.contains(&"mcp__ours__late".to_owned()), "{listed:?}");
    assert_eq!(handle.generation(), second);
    let late = registry
        .execute(call("2", "mcp__ours__late", json!({"text": "hi"})))
        .await;
    assert_eq!(late.text(), "late: hi");

    let removed = registry
        .execute(call("3", "mcp__ours__remove_tool", json!({"name": "late"})))
        .await;
    assert!(!removed.is_error(), "{removed:?}");
    let (_, listed) = wait_for_generation(&mut events, "ours", second).await;
    assert!(!listed.contains(&"mcp__ours__late".to_owned()));
    assert!(registry.get("mcp__ours__late", None).is_none());
    handle.disconnect().await;
}

/// A 20 MiB answer arrives whole (rmcp alone reads at most 16 MiB a line); an answer past the
/// 64 MiB line limit fails its call at once, saying why, instead of at the call timeout (an hour
/// here, past the failure bound), and the server stays usable.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn long_answers_arrive_and_too_long_ones_fail_at_once() {
    let tools = require_tools!();
    let registry = Registry::new();
    let handle = registry
        .add_mcp_server(tools.ours("ours", &[]).call_timeout_ms(3_600_000))
        .await
        .unwrap();
    let bound = std::time::Duration::from_secs(300);
    let long = tokio::time::timeout(
        bound,
        registry.execute(call("l1", "mcp__ours__big", json!({"mib": 20}))),
    )
    .await
    .expect("the 20 MiB answer arrives");
    assert_eq!(long.text().len(), 20 << 20, "{:?}", long.error());
    let too_long = tokio::time::timeout(
        bound,
        registry.execute(call("l2", "mcp__ours__big", json!({"mib": 65}))),
    )
    .await
    .expect("the call fails without waiting for its timeout");
    let message = too_long.error().expect("a failure").message.clone();
    assert!(
        message.contains("at most 67108864 bytes are read"),
        "{message}"
    );
    let after = registry
        .execute(call("l3", "mcp__ours__big", json!({"mib": 0})))
        .await;
    assert!(!after.is_error(), "{after:?}");
    handle.disconnect().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn progress_notifications_become_events() {
    let tools = require_tools!();
    let registry = Registry::new();
    let handle = registry
        .add_mcp_server(tools.ours("ours", &[]))
        .await
        .unwrap();
    let mut events = registry.subscribe();
    let result = registry
        .execute(call("p1", "mcp__ours__progress", json!({"steps": 3})))
        .await;
    assert_eq!(result.text(), "finished 3 steps");
    // Progress is published as the transport is read, so all of it is out before the answer.
    let mut seen = Vec::new();
    while let Ok(event) = events.try_recv() {
        if let ToolEvent::Progress {
            call_id,
            progress,
            total,
            message,
        } = event
        {
            assert_eq!(call_id, "p1");
            seen.push((progress, total, message));
        }
    }
    assert_eq!(
        seen,
        (1..=3)
            .map(|step| (
                f64::from(step),
                Some(3.0),
                Some(format!("step {step} of 3"))
            ))
            .collect::<Vec<_>>()
    );
    handle.disconnect().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_tool_times_out_and_the_server_stays_usable() {
    let tools = require_tools!();
    let registry = Registry::new();
    let handle = registry
        .add_mcp_server(tools.ours("ours", &[]).call_timeout_ms(300))
        .await
        .unwrap();
    let result = registry
        .execute(call("1", "mcp__ours__slow", json!({"seconds": 3600})))
        .await;
    assert_eq!(
        result.error_code(),
        Some(ErrorCode::ToolTimeout),
        "{result:?}"
    );
    assert_eq!(
        result.error().unwrap().message,
        "tool call timed out after 300ms"
    );
    let quick = registry
        .execute(call("2", "mcp__ours__slow", json!({"seconds": 0})))
        .await;
    assert_eq!(quick.text(), "slept 0.0s");
    handle.disconnect().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn is_error_results_are_failures() {
    let tools = require_tools!();
    let registry = Registry::new();
    let handle = registry
        .add_mcp_server(tools.ours("ours", &[]))
        .await
        .unwrap();
    let result = registry
        .execute(call(
            "1",
            "mcp__ours__fail",
            json!({"message": "the disk is on fire"}),
        ))
        .await;
    assert!(result.is_error(), "{result:?}");
    assert!(result.value().is_none());
    assert!(
        result
            .error()
            .unwrap()
            .message
            .contains("the disk is on fire"),
        "{result:?}"
    );
    assert!(result.text().starts_with("Error: "));
    handle.disconnect().await;
}

/// server-everything ignores `notifications/cancelled`: the call still settles at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelled_calls_settle_as_aborted() {
    let tools = require_tools!();
    let registry = Registry::new();
    let handle = registry
        .add_mcp_server(tools.everything("everything"))
        .await
        .unwrap();
    let mut events = registry.subscribe();
    let signal = CancellationToken::new();
    let running = tokio::spawn({
        let registry = registry.clone();
        let signal = signal.clone();
        async move {
            registry
                .execute(
                    call(
                        "long",
                        "mcp__everything__trigger-long-running-operation",
                        json!({"duration": 3600, "steps": 3600}),
                    )
                    .with_signal(signal),
                )
                .await
        }
    });
    first_progress(&mut events, "long").await;
    signal.cancel();
    let result = tokio::time::timeout(mcp_support::WAIT, running)
        .await
        .expect("the cancelled call settles without waiting for the server")
        .unwrap();
    assert_eq!(result.error_code(), Some(ErrorCode::Aborted), "{result:?}");
    let echo = registry
        .execute(call(
            "after",
            "mcp__everything__echo",
            json!({"message": "still here"}),
        ))
        .await;
    assert_eq!(echo.text(), "Echo: still here");
    handle.disconnect().await;
}

/// Starts a call of the long-running tool, waits until the server reports progress, kills the
/// server, and checks the call fails with `MCP_DISCONNECTED` (not with the 60 s call timeout).
async fn kill_mid_call(registry: &Registry, server: &str, kill_server: impl FnOnce()) {
    let mut events = registry.subscribe();
    let name = format!("mcp__{server}__trigger-long-running-operation");
    let running = tokio::spawn({
        let registry = registry.clone();
        async move {
            registry
                .execute(call(
                    "doomed",
                    &name,
                    json!({"duration": 3600, "steps": 3600}),
                ))
                .await
        }
    });
    first_progress(&mut events, "doomed").await;
    kill_server();
    let result = tokio::time::timeout(mcp_support::WAIT, running)
        .await
        .expect("the call settles")
        .unwrap();
    assert_eq!(
        code(&result).as_deref(),
        Some(MCP_DISCONNECTED),
        "{result:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stdio_server_killed_mid_call_fails_the_call_then_reconnects() {
    let tools = require_tools!();
    let registry = Registry::new();
    let mut events = registry.subscribe();
    let handle = registry
        .add_mcp_server(tools.everything("everything"))
        .await
        .unwrap();
    let (first, _) = wait_for_generation(&mut events, "everything", 0).await;
    let pid = handle.process_id().unwrap();
    kill_mid_call(&registry, "everything", || kill(pid)).await;
    // server-everything may also announce list changes of its own; wait for the sync that
    // follows the reconnect (a new process).
    let mut seen = first;
    loop {
        let (generation, listed) = wait_for_generation(&mut events, "everything", seen).await;
        seen = generation;
        if handle.process_id().is_some_and(|now| now != pid) {
            assert!(listed.contains(&"mcp__everything__echo".to_owned()));
            break;
        }
    }
    let echo = registry
        .execute(call(
            "again",
            "mcp__everything__echo",
            json!({"message": "back"}),
        ))
        .await;
    assert_eq!(echo.text(), "Echo: back");
    handle.disconnect().await;
}

/// server-everything in streamable-HTTP mode on `port` (it binds every interface, so the port is
/// random and the process is killed when the test ends). Returns once it listens.
async fn start_http_everything(tools: &mcp_support::Tools, port: u16) -> tokio::process::Child {
    let mut child = tokio::process::Command::new(tools.bin("mcp-server-everything"))
        .arg("streamableHttp")
        .env("PORT", port.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("server-everything starts");
    let mut lines = tokio::io::BufReader::new(child.stderr.take().unwrap()).lines();
    let listening = tokio::time::timeout(mcp_support::WAIT, async {
        while let Ok(Some(line)) = lines.next_line().await {
            if line.contains("listening on port") {
                return true;
            }
        }
        false
    })
    .await;
    assert_eq!(
        listening,
        Ok(true),
        "server-everything did not start listening"
    );
    // Keep draining stderr so the server never blocks on a full pipe.
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    child
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_http_server_killed_mid_call_fails_the_call_then_reconnects() {
    let tools = require_tools!();
    let port = mcp_support::free_port();
    let mut server = start_http_everything(tools, port).await;
    let registry = Registry::new();
    let mut events = registry.subscribe();
    let handle = registry
        .add_mcp_server(
            McpServer::http("web", format!("http://127.0.0.1:{port}/mcp"))
                .reconnect(quick_reconnect()),
        )
        .await
        .expect("connects over HTTP");
    let (first, _) = wait_for_generation(&mut events, "web", 0).await;
    let echo = registry
        .execute(call("1", "mcp__web__echo", json!({"message": "over http"})))
        .await;
    assert_eq!(echo.text(), "Echo: over http");
    assert_eq!(first, 1);
    let pid = server.id().unwrap();
    kill_mid_call(&registry, "web", || kill(pid)).await;
    let _ = server.wait().await;
    // Only a new connection can sync now: the old one is closed and the server is down until
    // it restarts below.
    let mut after = registry.subscribe();
    let mut restarted = start_http_everything(tools, port).await;
    let (_, listed) = wait_for_generation(&mut after, "web", 0).await;
    assert!(listed.contains(&"mcp__web__echo".to_owned()));
    let echo = registry
        .execute(call(
            "2",
            "mcp__web__echo",
            json!({"message": "back over http"}),
        ))
        .await;
    assert_eq!(echo.text(), "Echo: back over http");
    handle.disconnect().await;
    let _ = restarted.kill().await;
}

/// Collects every `tracing` event as `field=value` text.
pub(crate) struct Capture(pub(crate) tokio::sync::mpsc::UnboundedSender<String>);

struct Fields(String);

impl tracing::field::Visit for Fields {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        self.0.push_str(&format!("{}={:?} ", field.name(), value));
    }
}

impl tracing::Subscriber for Capture {
    fn enabled(&self, _: &tracing::Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        tracing::span::Id::from_u64(1)
    }
    fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}
    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
    fn event(&self, event: &tracing::Event<'_>) {
        let mut fields = Fields(String::new());
        event.record(&mut fields);
        let _ = self.0.send(fields.0);
    }
    fn enter(&self, _: &tracing::span::Id) {}
    fn exit(&self, _: &tracing::span::Id) {}
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_stderr_goes_to_tracing() {
    let tools = require_tools!();
    let (sender, mut lines) = tokio::sync::mpsc::unbounded_channel();
    tracing::subscriber::set_global_default(Capture(sender)).expect("the only subscriber");
    let registry = Registry::new();
    let handle = registry
        .add_mcp_server(tools.ours("ours", &[]))
        .await
        .unwrap();
    let marker = "stderr-marker-7f3a";
    let result = registry
        .execute(call("1", "mcp__ours__shout", json!({"text": marker})))
        .await;
    assert_eq!(result.text(), "written");
    let seen = tokio::time::timeout(mcp_support::WAIT, async {
        while let Some(line) = lines.recv().await {
            if line.contains(marker) && line.contains("server=ours") {
                return line;
            }
        }
        String::new()
    })
    .await
    .expect("the stderr line reaches tracing");
    assert!(seen.contains("stderr: stderr-marker-7f3a"), "{seen}");
    handle.disconnect().await;
}
