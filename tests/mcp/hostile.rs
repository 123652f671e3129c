//! MCP servers that attack their client (tests/mcp_servers/hostile_server.py, standard library
//! only): a schema and an answer nested a million deep, a 32 MiB answer, a stderr flood with no
//! newline after a byte that is no UTF-8, 100,000 tools, endless pages, tool names that collide.
//! Each test runs in a child process (this binary, filtered to the test), so the resident
//! high-water mark it measures is the host's alone, and a global `tracing` subscriber there
//! sees the warnings.

use std::future::Future;
use std::process::Command;

use dsh_tools::mcp::{McpError, McpServer, ReconnectPolicy, mcp_tool_name};
use dsh_tools::{Registry, ToolCall, ToolDefinition};
use serde_json::json;
use tokio::sync::mpsc::UnboundedReceiver;

use crate::lifecycle::Capture;
use crate::mcp_support::WAIT;
use dsh_tools::prelude::*;

const CHILD: &str = "DSH_MCP_HOSTILE_CHILD";

/// Runs `body` in a child process (this test binary, filtered to `test`, on a runtime of its
/// own); fails when the child fails.
fn in_child<F: Future<Output = ()>>(test: &str, body: impl FnOnce() -> F) {
    if std::env::var_os(CHILD).is_some() {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap()
            .block_on(body());
        return;
    }
    let output = Command::new(std::env::current_exe().unwrap())
        .args([test, "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD, "1")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "the child process failed ({}):\n{stdout}\n{stderr}",
        output.status
    );
    // The filter matched the test itself, so the body really ran.
    assert!(stdout.contains("1 passed"), "{stdout}");
}

/// The hostile server in `mode`, named `name`, never reconnected.
fn hostile(name: &str, mode: &str) -> McpServer {
    let script = format!(
        "{}/tests/mcp_servers/hostile_server.py",
        env!("CARGO_MANIFEST_DIR")
    );
    McpServer::stdio(name, "python3", [script, mode.to_owned(), name.to_owned()])
        .reconnect(ReconnectPolicy::disabled())
}

/// This process's resident high-water mark, bytes.
fn peak_rss() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("VmHWM:")).unwrap();
    line["VmHWM:".len()..]
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse::<u64>()
        .unwrap()
        * 1024
}

/// Asserts the high-water mark grew by less than `limit` bytes since `before`.
fn assert_grew_less_than(before: u64, limit: u64, what: &str) {
    let grown = peak_rss().saturating_sub(before);
    assert!(
        grown < limit,
        "{what}: the host grew by {grown} bytes (limit {limit})"
    );
}

/// Every `tracing` event of this (child) process, as `field=value` text.
fn capture() -> UnboundedReceiver<String> {
    let (sender, lines) = tokio::sync::mpsc::unbounded_channel();
    tracing::subscriber::set_global_default(Capture(sender)).expect("the only subscriber");
    lines
}

/// The events captured so far.
fn captured(lines: &mut UnboundedReceiver<String>) -> Vec<String> {
    std::iter::from_fn(|| lines.try_recv().ok()).collect()
}

/// Waits for the first event holding `needle`.
async fn wait_for_line(lines: &mut UnboundedReceiver<String>, needle: &str) -> String {
    tokio::time::timeout(WAIT, async {
        while let Some(line) = lines.recv().await {
            if line.contains(needle) {
                return line;
            }
        }
        panic!("the event stream ended before {needle:?}");
    })
    .await
    .unwrap_or_else(|_| panic!("no event holding {needle:?} within {WAIT:?}"))
}

/// Connects a well-behaved server once and disconnects it, so what is measured after is the
/// hostile one's cost, not the first connection's (runtime threads, rmcp, the codec).
async fn warm_up(registry: &Registry) {
    let handle = registry
        .add_mcp_server(hostile("warm", "huge"))
        .await
        .unwrap();
    let small = registry.execute(call("warm", "mcp__warm__small")).await;
    assert_eq!(small.text(), "ok");
    handle.disconnect().await;
}

fn call(id: &str, name: &str) -> ToolCall {
    ToolCall::new(id, name, json!({}))
}

/// A schema and an answer nested a million levels deep (2 MB each): measured by a byte scan and
/// cut, never parsed. The schema's tool is skipped, its siblings register; the answer fails its
/// call with a clear error. Parsed on a growing stack, the host passed 2 GiB.
#[test]
fn a_million_deep_schema_and_answer_cost_the_host_little() {
    in_child(
        "hostile::a_million_deep_schema_and_answer_cost_the_host_little",
        || async {
            let registry = Registry::new();
            warm_up(&registry).await;
            let before = peak_rss();
            let handle = registry
                .add_mcp_server(hostile("deep", "deep"))
                .await
                .expect("a million-deep schema does not fail the server");
            assert_eq!(
                handle.tools(),
                ["mcp__deep__shallow", "mcp__deep__deep_answer"]
            );
            assert_grew_less_than(before, 16 << 20, "a million-deep schema");
            let answer = registry.execute(call("1", "mcp__deep__deep_answer")).await;
            assert!(answer.is_error(), "{answer:?}");
            assert!(
                answer
                    .text()
                    .contains("the server's answer is nested deeper than 100 levels"),
                "{}",
                answer.text()
            );
            assert_grew_less_than(before, 16 << 20, "a million-deep answer");
            // The connection goes on.
            let shallow = registry.execute(call("2", "mcp__deep__shallow")).await;
            assert_eq!(shallow.text(), "ok");
            handle.disconnect().await;
        },
    );
}

/// A 32 MiB answer past a 1 MiB message limit fails its call at once, saying why, and is read
/// past without being held.
#[test]
fn a_huge_answer_fails_its_call_and_is_never_held() {
    in_child(
        "hostile::a_huge_answer_fails_its_call_and_is_never_held",
        || async {
            let registry = Registry::new();
            let handle = registry
                .add_mcp_server(hostile("huge", "huge").max_message_bytes(1 << 20))
                .await
                .unwrap();
            let before = peak_rss();
            let answer = registry.execute(call("1", "mcp__huge__huge")).await;
            assert!(answer.is_error(), "{answer:?}");
            assert!(
                answer.text().contains("at most 1048576 bytes are read"),
                "{}",
                answer.text()
            );
            assert_grew_less_than(before, 16 << 20, "a 32 MiB answer");
            let small = registry.execute(call("2", "mcp__huge__small")).await;
            assert_eq!(small.text(), "ok");
            handle.disconnect().await;
        },
    );
}

/// A line with a byte that is no UTF-8, then 64 MiB without a newline on stderr: logged
/// lossily, cut at 8 KiB, and the pipe drained on, so the server's later writes (1 MiB each,
/// more than a pipe holds) go through and its calls answer.
#[test]
fn a_stderr_flood_is_cut_and_drained_to_the_end() {
    in_child(
        "hostile::a_stderr_flood_is_cut_and_drained_to_the_end",
        || async {
            let mut lines = capture();
            let registry = Registry::new();
            warm_up(&registry).await;
            let before = peak_rss();
            let handle = registry
                .add_mcp_server(hostile("noisy", "stderr"))
                .await
                .expect("the server starts once its stderr is drained");
            let bad = wait_for_line(&mut lines, "stderr: bad").await;
            assert!(bad.contains("stderr: bad \u{fffd} byte"), "{bad}");
            let flood = wait_for_line(&mut lines, "stderr: zzz").await;
            let kept = format!("stderr: {}", "z".repeat(8 * 1024));
            assert!(
                flood.contains(&format!(
                    "{kept} [… {} more bytes dropped]",
                    (64 << 20) - 8 * 1024
                )),
                "{}",
                &flood[flood.len().saturating_sub(200)..]
            );
            assert_grew_less_than(before, 4 << 20, "a 64 MiB stderr line");
            for id in ["1", "2"] {
                let logged = registry.execute(call(id, "mcp__noisy__log")).await;
                assert_eq!(logged.text(), "logged", "{logged:?}");
                wait_for_line(&mut lines, "stderr: yyy").await;
            }
            handle.disconnect().await;
        },
    );
}

/// 100,000 tools keep the first 1,000, endless pages the tools of the first 100, and a byte cap
/// cuts between tools: each with a warning naming the cap. A page longer than the byte cap is
/// refused unparsed.
#[test]
fn long_and_endless_tool_lists_are_cut_with_a_warning() {
    in_child(
        "hostile::long_and_endless_tool_lists_are_cut_with_a_warning",
        || async {
            let mut lines = capture();
            let registry = Registry::new();
            warm_up(&registry).await;
            // One page longer than the byte cap is refused before it is parsed.
            let before = peak_rss();
            let refused = registry
                .add_mcp_server(hostile("page", "many").max_list_bytes(1 << 20))
                .await
                .unwrap_err();
            assert!(matches!(refused, McpError::List { .. }), "{refused:?}");
            assert!(
                refused.to_string().contains(
                    "tools/list answer is 8477830 bytes long; at most 1048576 bytes are read"
                ),
                "{refused}"
            );
            assert_grew_less_than(before, 32 << 20, "a refused 8 MB page");

            let before = peak_rss();
            let many = registry
                .add_mcp_server(hostile("many", "many"))
                .await
                .unwrap();
            assert_eq!(many.tools().len(), 1_000);
            assert_eq!(many.tools()[999], "mcp__many__t999");
            assert_grew_less_than(before, 256 << 20, "100,000 tools");
            let warned = captured(&mut lines);
            assert!(
                warned.iter().any(|line| line
                    .contains("tool list cut: more than 1000 tools; the first 1000 are kept")
                    && line.contains("server=many")),
                "{warned:?}"
            );

            let endless = registry
                .add_mcp_server(hostile("endless", "endless"))
                .await
                .unwrap();
            assert_eq!(endless.tools().len(), 100);
            assert_eq!(endless.tools()[99], "mcp__endless__p99");
            let warned = captured(&mut lines);
            assert!(
                warned.iter().any(|line| line.contains(
                    "tool list cut: more than 100 pages; the tools of the first 100 are kept"
                )),
                "{warned:?}"
            );

            let bytes = registry
                .add_mcp_server(hostile("bytes", "endless").max_list_bytes(1_000))
                .await
                .unwrap();
            // Each entry is some 70 bytes of compact JSON.
            let kept = bytes.tools().len();
            assert!((5..=20).contains(&kept), "{kept}");
            let warned = captured(&mut lines);
            assert!(
                warned.iter().any(|line| line.contains(&format!(
                    "tool list cut: the tools listed pass 1000 bytes; the first {kept}"
                ))),
                "{warned:?}"
            );

            for handle in [many, endless, bytes] {
                handle.disconnect().await;
            }
        },
    );
}

/// A raw name spelled like another tool's hashed name gets a name of its own, a second tool
/// of one name and a tool whose name a foreign tool holds are skipped alone, with a warning;
/// server names that would make names ambiguous are refused.
#[test]
fn colliding_names_skip_only_that_tool() {
    in_child("hostile::colliding_names_skip_only_that_tool", || async {
        let mut lines = capture();
        let registry = Registry::new();
        let squatter = ToolDefinition::builder("mcp__names__good")
            .handler(|_, _| async { Ok(json!("mine")) })
            .build()
            .unwrap();
        registry.register(squatter).unwrap();
        let handle = registry
            .add_mcp_server(hostile("names", "lookalike"))
            .await
            .expect("colliding names do not fail the server");
        let dotted = mcp_tool_name("names", "admin.reset");
        let lookalike_raw = dotted.strip_prefix("mcp__names__").unwrap();
        let lookalike = mcp_tool_name("names", lookalike_raw);
        assert_ne!(lookalike, dotted);
        assert_eq!(
            handle.tools(),
            [dotted, lookalike, "mcp__names__twice".to_owned()]
        );
        let warned = captured(&mut lines);
        for needle in [
            r#"skipping tool "twice": the list already has a tool named mcp__names__twice"#,
            r#"skipping tool mcp__names__good: tool "mcp__names__good" is already registered"#,
        ] {
            assert!(
                warned.iter().any(|line| line.contains(needle)),
                "{needle} in {warned:?}"
            );
        }
        let foreign = registry.execute(call("1", "mcp__names__good")).await;
        assert_eq!(foreign.value(), Some(&json!("mine")));
        handle.disconnect().await;
        for name in ["a__b", "a_", "_"] {
            let refused = registry
                .add_mcp_server(hostile(name, "lookalike"))
                .await
                .unwrap_err();
            assert_eq!(refused, McpError::InvalidName(name.to_owned()));
        }
    });
}

/// A stdio server that answers `server/discover` only after rmcp's fallback has sent
/// `initialize` (a loaded 2025-era server): the late answer breaks that `initialize`, and the
/// server is started again with `initialize` alone, so its tools register. The wait is rmcp's
/// own fallback; the server answers on the event, not a clock.
#[test]
fn a_late_answer_to_the_discover_probe_starts_the_server_again() {
    in_child(
        "hostile::a_late_answer_to_the_discover_probe_starts_the_server_again",
        || async {
            let registry = Registry::new();
            registry
                .add_mcp_server(hostile("late", "late_discover"))
                .await
                .expect("started again with initialize alone");
            let result = registry
                .execute(call("1", &mcp_tool_name("late", "late_discover")))
                .await;
            assert!(!result.is_error(), "{result:?}");
        },
    );
}
