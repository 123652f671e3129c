use dsh_tools::{ToolDefinition, tool};

/// Count to a number, slowly.
#[tool(task)]
async fn count_up(to: u32) -> u32 {
    to
}

/// Count down, said explicitly not to be a task.
#[tool(task = false, read_only)]
async fn count_down(from: u32) -> u32 {
    from
}

/// Runs the case.
pub(crate) fn main() {
    assert!(ToolDefinition::from_tool(CountUpTool).supports_tasks());
    assert!(!ToolDefinition::from_tool(CountDownTool).supports_tasks());
}
