//! A first look: register a few real tools over this repository's files, print their schemas,
//! and run a handful of calls through the registry — including one with invalid arguments.
//!
//! ```text
//! cargo run --example quickstart
//! ```

#[path = "../src/bin/dsh-tools/toolset.rs"]
mod toolset;

use dsh_tools::{Registry, ToolCall, ToolResult};
use serde_json::json;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let registry = Registry::new();
    registry.register_all(toolset::definitions(root))?;

    println!("=== Tool schemas (what a model is sent) ===");
    println!("{}", serde_json::to_string_pretty(&registry.schemas(None))?);

    let calls = [
        (
            "list the crates' manifests",
            "list_files",
            json!({"suffix": "Cargo.toml"}),
        ),
        (
            "read the README's first lines",
            "read_file",
            json!({"path": "README.md", "limit": 5}),
        ),
        (
            "find the #[tool] attribute's entry point",
            "grep",
            json!({"pattern": "pub fn tool\\(", "dir": "dsh-tool-macros"}),
        ),
        (
            "stat the runtime crate",
            "file_stats",
            json!({"path": "dsh-tool-runtime"}),
        ),
        (
            "invalid arguments: wrong types and a missing path",
            "read_file",
            json!({"offset": 0, "limit": "ten"}),
        ),
        (
            "a path outside the root",
            "read_file",
            json!({"path": "../secrets"}),
        ),
        ("a tool that does not exist", "delete_everything", json!({})),
    ];
    for (index, (what, name, arguments)) in calls.into_iter().enumerate() {
        println!("\n=== {what}: {name} {arguments} ===");
        let result = registry
            .execute(ToolCall::new(format!("call-{index}"), name, arguments))
            .await;
        match &result {
            ToolResult::Success { .. } => println!("ok:\n{}", result.text()),
            ToolResult::Failure { error, .. } => {
                let code = error.info.as_ref().map_or("-", |info| info.code.as_str());
                println!("error (code {code}):\n{}", result.text());
            }
        }
    }
    Ok(())
}
