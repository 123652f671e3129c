use std::collections::BTreeMap;

use dsh_tools::{ToolDefinition, tool};
use schemars::JsonSchema;
use serde::Serialize;

#[derive(Serialize, JsonSchema)]
struct Stats {
    lines: u64,
    words: BTreeMap<String, u64>,
}

/// Count lines.
#[tool]
async fn stats(text: String) -> Stats {
    Stats {
        lines: text.lines().count() as u64,
        words: BTreeMap::new(),
    }
}

/// Runs the case.
pub(crate) fn main() {
    let _ = ToolDefinition::from_tool(StatsTool);
}
