//! SDK generator speed: rendering 1,000 tools built from the corpus's real schemas (MCP
//! `tools/list` captures and the BFCL sample, cycled with numbered names), per language.
//! Goal: under 50 ms per language. Run: `cargo bench --bench sdk`.
//! Without the corpus (`DSH_CORPUS`, default `../shared/corpus`) a small built-in set is cycled.

use std::path::PathBuf;
use std::sync::OnceLock;

use dsh_tools::sdk::{self, Language, ToolSpec};
use serde_json::{Value, json};

fn main() {
    divan::main();
}

const TOOLS: usize = 1_000;

fn corpus_specs() -> Vec<ToolSpec> {
    let dir = std::env::var_os("DSH_CORPUS").map_or_else(
        || PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared/corpus"),
        PathBuf::from,
    );
    let mut specs = Vec::new();
    let mut paths: Vec<PathBuf> = std::fs::read_dir(dir.join("mcp-tools"))
        .map(|entries| entries.filter_map(|e| e.ok().map(|e| e.path())).collect())
        .unwrap_or_default();
    paths.retain(|p| {
        let name = p.file_name().and_then(|n| n.to_str()).unwrap_or_default();
        name.ends_with(".json") && !name.ends_with(".initialize.json")
    });
    paths.sort();
    for path in paths {
        let Ok(text) = std::fs::read_to_string(&path) else {
            continue;
        };
        let Ok(response) = serde_json::from_str::<Value>(&text) else {
            continue;
        };
        for tool in response["result"]["tools"].as_array().into_iter().flatten() {
            specs.push(ToolSpec::new(
                tool["name"].as_str().unwrap_or_default(),
                tool["description"].as_str().unwrap_or_default(),
                tool["inputSchema"].clone(),
                tool.get("outputSchema")
                    .cloned()
                    .unwrap_or(Value::Bool(true)),
            ));
        }
    }
    let bfcl = std::fs::read_to_string(dir.join("bfcl/functions_sample.jsonl")).unwrap_or_default();
    for line in bfcl.lines() {
        let Ok(record) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        let f = &record["function"];
        specs.push(ToolSpec::new(
            f["name"].as_str().unwrap_or_default(),
            f["description"].as_str().unwrap_or_default(),
            f["parameters"].clone(),
            json!(true),
        ));
    }
    if specs.is_empty() {
        eprintln!(
            "corpus not found at {}: cycling a built-in set",
            dir.display()
        );
        specs.push(ToolSpec::new(
            "search",
            "Searches.",
            json!({"type": "object", "properties": {"q": {"type": "string"}, "limit": {"type": "integer"}}, "required": ["q"]}),
            json!({"type": "array", "items": {"type": "object", "properties": {"title": {"type": "string"}}}}),
        ));
    }
    specs
}

/// 1,000 specs cycled from the corpus, each renamed `<name>_<n>` so all are distinct.
fn thousand() -> &'static [ToolSpec] {
    static SPECS: OnceLock<Vec<ToolSpec>> = OnceLock::new();
    SPECS.get_or_init(|| {
        let base = corpus_specs();
        (0..TOOLS)
            .map(|n| {
                let mut spec = base[n % base.len()].clone();
                spec.name = format!("{}_{n}", spec.name);
                spec
            })
            .collect()
    })
}

#[divan::bench(args = [Language::TypeScript, Language::Python])]
fn render_1000_tools(bencher: divan::Bencher, language: Language) {
    let specs = thousand();
    bencher.bench(|| sdk::render(divan::black_box(language), divan::black_box(specs)));
}
