use dsh_tools::{ToolDefinition, tool};

/// Report the current time.
#[tool]
async fn now() -> u64 {
    0
}

/// Runs the case.
pub(crate) fn main() {
    let _args = NowArgs {};
    let _definition = ToolDefinition::from_tool(NowTool);
}
