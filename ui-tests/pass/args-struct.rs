use dsh_tools::{ToolDefinition, ToolExec, tool};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(Deserialize, Serialize, JsonSchema)]
struct Query {
    /// Text to find.
    text: String,
    #[serde(default)]
    limit: Option<u32>,
}

/// Search the index.
#[tool(concurrency_safe)]
async fn search(#[args] query: Query, exec: ToolExec) -> Vec<String> {
    let _ = exec;
    vec![query.text; query.limit.unwrap_or(1) as usize]
}

/// Runs the case.
pub(crate) fn main() {
    let _definition = ToolDefinition::from_tool(SearchTool);
}
