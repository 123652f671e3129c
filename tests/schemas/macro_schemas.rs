//! Pins the parameters and output schemas `#[tool]` derives: descriptions from doc comments,
//! defaults, constraints, `Option` as not required with `T`'s own schema, renames, the root closed
//! by default and open with `allow_unknown`, and nested types.

use std::collections::BTreeMap;

use dsh_tools::{ToolDefinition, ToolError, ToolExec, tool};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// Read a UTF-8 text file and return a window of its lines.
#[tool(concurrency_safe, timeout_ms = 5_000)]
async fn read_file(
    /// Absolute path of the file.
    #[arg(length(min = 1, max = 4096), pattern = "^/")]
    path: String,
    /// First line to return, 1-based.
    #[arg(default = 1, range(min = 1))]
    offset: u64,
    /// Maximum number of lines.
    #[arg(range(min = 1, max = 2000))]
    limit: Option<u32>,
    exec: ToolExec,
) -> Result<String, ToolError> {
    let _ = exec;
    Ok(format!("{path}{offset}{limit:?}"))
}

#[derive(Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
enum Mode {
    /// Match the whole word.
    Word,
    Regex,
}

#[derive(Serialize, JsonSchema)]
struct Match {
    /// 1-based line number.
    line: u64,
    text: String,
}

#[derive(Serialize, JsonSchema)]
struct SearchOutput {
    matches: Vec<Match>,
    per_file: BTreeMap<String, u32>,
    truncated: bool,
}

/// Search files.
#[tool(allow_unknown)]
async fn search(
    /// What to look for.
    query: String,
    /// How to match.
    mode: Option<Mode>,
    #[arg(rename = "maxResults", default = 50, range(min = 1, max = 500))] max_results: u32,
    #[arg(description = "Globs to include.", length(max = 8))] include: Vec<String>,
) -> SearchOutput {
    let _ = (query, mode, max_results, include);
    SearchOutput {
        matches: Vec::new(),
        per_file: BTreeMap::new(),
        truncated: false,
    }
}

fn schemas(definition: &ToolDefinition) -> Value {
    json!({
        "name": definition.name(),
        "description": definition.description(),
        "parameters": definition.parameters(),
        "output": definition.output_schema(),
    })
}

#[test]
fn read_file_schemas() {
    insta::assert_json_snapshot!(schemas(&ToolDefinition::from_tool(ReadFileTool)));
}

#[test]
fn search_schemas() {
    insta::assert_json_snapshot!(schemas(&ToolDefinition::from_tool(SearchTool)));
}
