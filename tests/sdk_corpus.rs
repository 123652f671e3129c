//! Renders the SDK of every real tool definition in the corpus (MCP `tools/list` captures and the
//! BFCL sample) in both languages. Skips, saying so, when the corpus is absent. The rendered text
//! is type-checked by `.ci/typecheck-sdk.sh`; here: every tool is present, nothing degrades
//! wholesale, and the output is stable.

use std::path::{Path, PathBuf};

use dsh_tools::sdk::{self, Language, ToolSpec};
use serde_json::Value;

fn corpus() -> Option<PathBuf> {
    let dir = std::env::var_os("DSH_CORPUS").map_or_else(
        || PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared/corpus"),
        PathBuf::from,
    );
    if dir.join("mcp-tools").is_dir() {
        Some(dir)
    } else {
        eprintln!(
            "skipped: corpus not found at {} (set DSH_CORPUS)",
            dir.display()
        );
        None
    }
}

/// (source, tools) per MCP capture, schemas verbatim.
fn mcp_sources(dir: &Path) -> Vec<(String, Vec<ToolSpec>)> {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(dir.join("mcp-tools"))
        .expect("list mcp-tools")
        .map(|e| e.expect("entry").path())
        .filter(|p| {
            let name = p.file_name().and_then(|n| n.to_str()).unwrap_or_default();
            name.ends_with(".json") && !name.ends_with(".initialize.json")
        })
        .collect();
    paths.sort();
    paths
        .into_iter()
        .map(|path| {
            let response: Value =
                serde_json::from_str(&std::fs::read_to_string(&path).expect("read")).expect("json");
            let tools = response["result"]["tools"]
                .as_array()
                .expect("tools")
                .iter()
                .map(|tool| {
                    ToolSpec::new(
                        tool["name"].as_str().expect("name"),
                        tool["description"].as_str().unwrap_or_default(),
                        tool["inputSchema"].clone(),
                        tool.get("outputSchema")
                            .cloned()
                            .unwrap_or(Value::Bool(true)),
                    )
                })
                .collect();
            (path.display().to_string(), tools)
        })
        .collect()
}

/// The BFCL sample with its dialect left as is: unknown `type` names must degrade locally.
fn bfcl(dir: &Path) -> Vec<ToolSpec> {
    std::fs::read_to_string(dir.join("bfcl/functions_sample.jsonl"))
        .expect("read bfcl")
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|line| {
            let record: Value = serde_json::from_str(line).expect("json line");
            let f = &record["function"];
            ToolSpec::new(
                f["name"].as_str().expect("name"),
                f["description"].as_str().unwrap_or_default(),
                f["parameters"].clone(),
                f.get("response").cloned().unwrap_or(Value::Bool(true)),
            )
        })
        .collect()
}

#[test]
fn every_corpus_tool_renders_in_both_languages() {
    let Some(dir) = corpus() else { return };
    let mut sources = mcp_sources(&dir);
    sources.push(("bfcl".to_owned(), bfcl(&dir)));
    let mut total = 0;
    for (source, tools) in &sources {
        total += tools.len();
        let typescript = sdk::typescript(tools);
        let python = sdk::python(tools);
        for tool in tools {
            let key = if tool
                .name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_')
            {
                format!("\n  {}: ", tool.name)
            } else {
                format!(
                    "\n  {}: ",
                    serde_json::to_string(&tool.name).expect("quote")
                )
            };
            assert!(
                typescript.contains(&key),
                "{source}: {} missing from TypeScript",
                tool.name
            );
            // No tool degrades wholesale: an object schema keeps its object type.
            let member = &typescript[typescript.find(&key).expect("key") + key.len()..];
            if tool
                .parameters
                .get("properties")
                .is_some_and(|p| p.as_object().is_some_and(|m| !m.is_empty()))
            {
                assert!(
                    !member.starts_with("unknown"),
                    "{source}: {} degraded",
                    tool.name
                );
            }
            let quoted = serde_json::to_string(&tool.name).expect("quote");
            assert!(
                python.contains(&format!("async def {}(", tool.name))
                    || python.contains(&format!("# tools[{quoted}](")),
                "{source}: {} missing from Python",
                tool.name
            );
        }
        let mut reversed = tools.clone();
        reversed.reverse();
        assert_eq!(
            sdk::typescript(&reversed),
            typescript,
            "{source}: order-dependent"
        );
        assert_eq!(sdk::python(&reversed), python, "{source}: order-dependent");
    }
    assert!(total > 250, "read the whole corpus ({total} tools)");
}

#[test]
fn corpus_constructs_map_to_named_types_and_unions() {
    let Some(dir) = corpus() else { return };
    let sources = mcp_sources(&dir);
    let find = |suffix: &str| {
        sources
            .iter()
            .find(|(source, _)| source.ends_with(suffix))
            .map(|(_, tools)| tools.clone())
            .expect("capture present")
    };
    // Notion: `$defs` + `$ref` become named types; `oneOf` a union.
    let notion = sdk::render(Language::TypeScript, &find("notion-mcp-server.json"));
    assert!(
        notion.contains("\ntype APIMovePageMovePageParentRequest = "),
        "{notion}"
    );
    // mcp-server-time: pydantic `$defs` in the output schema.
    let time = sdk::render(Language::Python, &find("mcp-server-time.json"));
    assert!(time.contains("source: ConvertTimeTimeResult"), "{time}");
    // mcp-server-git: `anyOf [string, null]` is an optional union.
    let git = sdk::render(Language::TypeScript, &find("mcp-server-git.json"));
    assert!(git.contains("string | null"), "{git}");
}
