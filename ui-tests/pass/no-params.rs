use dsh_tools::{tool, ToolDefinition};

/// Report the current time.
#[tool]
async fn now() -> u64 {
    0
}

fn main() {
    let _args = NowArgs {};
    let _definition = ToolDefinition::from_tool(NowTool);
}
