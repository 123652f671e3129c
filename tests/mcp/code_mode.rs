//! MCP tools in code mode: the servers' SDK text type-checks like the generator's own, and
//! TypeScript and Python programs call MCP tools through `run_code`.

use crate::mcp_support;

use std::sync::Arc;

use dsh_tools::code::{Budgets, CodeRuntime, SubprocessConfig, SubprocessRuntime};
use dsh_tools::prelude::*;
use dsh_tools::sdk::Language;
use dsh_tools::{Mode, Registry, ToolCall};
use serde_json::{Value, json};

async fn registry_with_servers(
    tools: &mcp_support::Tools,
) -> (Registry, Vec<dsh_tools::mcp::McpHandle>) {
    let registry = Registry::new();
    let mut handles = vec![
        registry
            .add_mcp_server(tools.everything("everything"))
            .await
            .unwrap(),
    ];
    handles.push(registry.add_mcp_server(tools.time("time")).await.unwrap());
    (registry, handles)
}

async fn runtime(python: bool) -> Arc<dyn CodeRuntime> {
    let config = SubprocessConfig {
        budgets: Budgets {
            compute_ms: 20_000,
            max_wall_ms: 60_000,
            ..Budgets::default()
        },
        ..Default::default()
    };
    if python {
        Arc::new(SubprocessRuntime::python(config).await.expect("python3"))
    } else {
        Arc::new(SubprocessRuntime::typescript(config).await.expect("node"))
    }
}

/// The SDK text of real servers' tools (dashed names, draft-07 `$schema`s, output schemas with
/// `$defs`) passes `tsc --strict` and `mypy --strict` via `.ci/typecheck-sdk.sh`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_sdks_type_check() {
    let tools = require_tools!();
    let (registry, handles) = registry_with_servers(tools).await;
    let dir = std::env::temp_dir().join(format!("dsh-mcp-sdk-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let typescript = registry.sdk(None, Language::TypeScript);
    let python = registry.sdk(None, Language::Python);
    assert!(
        typescript.contains("\"mcp__everything__get-sum\""),
        "{typescript}"
    );
    assert!(python.contains("mcp__time__get_current_time"), "{python}");
    std::fs::write(dir.join("mcp_servers.ts"), &typescript).unwrap();
    std::fs::write(dir.join("mcp_servers.py"), &python).unwrap();
    let status = std::process::Command::new("bash")
        .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/.ci/typecheck-sdk.sh"))
        .arg(&dir)
        .status()
        .expect("bash runs");
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        status.success(),
        "MCP server SDKs do not type-check (tsc/mypy output above)"
    );
    for handle in handles {
        handle.disconnect().await;
    }
}

async fn run(registry: &Registry, code: &str) -> Value {
    let result = registry
        .execute(ToolCall::new(
            "run",
            "run_code",
            json!({"code": code, "description": "Calls MCP tools"}),
        ))
        .await;
    result
        .value()
        .unwrap_or_else(|| panic!("run_code failed: {result:?}"))
        .clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_typescript_program_calls_mcp_tools() {
    let tools = require_tools!();
    let (registry, handles) = registry_with_servers(tools).await;
    registry.set_code_runtime(runtime(false).await);
    registry.set_mode(Mode::Code);
    let value = run(
        &registry,
        r#"
        const [sum, now] = await Promise.all([
          tools["mcp__everything__get-sum"]({ a: 19, b: 23 }),
          tools.mcp__time__get_current_time({ timezone: "UTC" }),
        ]);
        let refused = "";
        try {
          await tools["mcp__everything__get-sum"]({ a: "x" });
        } catch (error) {
          refused = String(error);
        }
        return { sum: sum.content[0].text, zone: now.structuredContent.timezone, refused };
        "#,
    )
    .await;
    let output = value.to_string();
    assert!(output.contains("42"), "{output}");
    assert!(output.contains("UTC"), "{output}");
    assert!(output.contains("invalid arguments"), "{output}");
    for handle in handles {
        handle.disconnect().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_python_program_calls_mcp_tools() {
    let tools = require_tools!();
    let (registry, handles) = registry_with_servers(tools).await;
    registry.set_code_runtime(runtime(true).await);
    registry.set_mode(Mode::Code);
    let value = run(
        &registry,
        r#"
import asyncio
echo, now = await asyncio.gather(
    tools["mcp__everything__echo"]({"message": "from python"}),
    tools.mcp__time__get_current_time({"timezone": "UTC"}),
)
return {"echo": echo["content"][0]["text"], "zone": now["structuredContent"]["timezone"]}
"#,
    )
    .await;
    let output = value.to_string();
    assert!(output.contains("Echo: from python"), "{output}");
    assert!(output.contains("UTC"), "{output}");
    for handle in handles {
        handle.disconnect().await;
    }
}
