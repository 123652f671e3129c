//! The third-party corpus: real MCP servers' `tools/list` answers and the BFCL function sample.
//! Shared by the tests, benches and examples that need real schemas. Located through `DSH_CORPUS`
//! (default `../shared/corpus` beside the repository).
#![allow(dead_code)]

use std::path::{Path, PathBuf};

use dsh_tools::__private::bfcl_to_json_schema;
use dsh_tools::sdk::ToolSpec;
use serde_json::Value;

/// One tool definition of the corpus.
#[derive(Debug, Clone)]
pub(crate) struct CorpusTool {
    /// Where it came from: the MCP capture's file stem, or `bfcl`.
    pub source: String,
    /// Tool name.
    pub name: String,
    /// Description.
    pub description: String,
    /// Parameters schema (BFCL's dialect already mapped to JSON Schema).
    pub parameters: Value,
    /// Output schema; `true` (any JSON) when the tool declares none.
    pub output: Value,
}

impl CorpusTool {
    /// The SDK generator's view of the tool.
    pub(crate) fn spec(&self) -> ToolSpec {
        ToolSpec::new(
            &self.name,
            &self.description,
            self.parameters.clone(),
            self.output.clone(),
        )
    }
}

/// The corpus directory, whether or not it exists.
pub(crate) fn dir() -> PathBuf {
    std::env::var_os("DSH_CORPUS")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/corpus"))
}

/// Every tool of the corpus: MCP captures sorted by file name, then the BFCL sample in file
/// order. `None`, after saying so on stderr, when the corpus is absent.
pub(crate) fn tools() -> Option<Vec<CorpusTool>> {
    let dir = dir();
    let mcp = dir.join("mcp-tools");
    if !mcp.is_dir() {
        eprintln!(
            "skipped: corpus not found at {} (set DSH_CORPUS)",
            dir.display()
        );
        return None;
    }
    let mut files: Vec<PathBuf> = std::fs::read_dir(&mcp)
        .expect("readable corpus directory")
        .filter_map(|entry| entry.ok().map(|entry| entry.path()))
        .filter(|path| {
            let name = path
                .file_name()
                .and_then(|name| name.to_str())
                .unwrap_or_default();
            name.ends_with(".json") && !name.ends_with(".initialize.json")
        })
        .collect();
    files.sort();
    let mut tools = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).expect("readable capture");
        let response: Value = serde_json::from_str(&text).expect("capture is JSON");
        let source = file
            .file_stem()
            .and_then(|stem| stem.to_str())
            .unwrap_or_default()
            .to_owned();
        for tool in response
            .pointer("/result/tools")
            .and_then(Value::as_array)
            .expect("a tools/list result")
        {
            tools.push(CorpusTool {
                source: source.clone(),
                name: tool["name"].as_str().unwrap_or_default().to_owned(),
                description: tool["description"].as_str().unwrap_or_default().to_owned(),
                parameters: tool
                    .get("inputSchema")
                    .cloned()
                    .unwrap_or(Value::Bool(true)),
                output: tool
                    .get("outputSchema")
                    .cloned()
                    .unwrap_or(Value::Bool(true)),
            });
        }
    }
    let bfcl = std::fs::read_to_string(dir.join("bfcl/functions_sample.jsonl"))
        .expect("readable BFCL sample");
    for line in bfcl.lines().filter(|line| !line.trim().is_empty()) {
        let record: Value = serde_json::from_str(line).expect("BFCL line is JSON");
        let function = &record["function"];
        tools.push(CorpusTool {
            source: "bfcl".to_owned(),
            name: function["name"].as_str().unwrap_or_default().to_owned(),
            description: function["description"]
                .as_str()
                .unwrap_or_default()
                .to_owned(),
            parameters: bfcl_to_json_schema(&function["parameters"]),
            output: function
                .get("response")
                .map_or(Value::Bool(true), bfcl_to_json_schema),
        });
    }
    Some(tools)
}
