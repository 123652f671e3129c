use dsh_tools::{ToolDefinition, ToolError, tool};

/// Forget everything.
#[tool]
async fn forget() {}

/// Forget one key.
#[tool]
async fn forget_key(key: String) -> () {
    let _ = key;
}

/// Forget, or fail.
#[tool]
async fn try_forget() -> Result<(), ToolError> {
    Ok(())
}

/// Runs the case.
pub(crate) fn main() {
    let _ = ToolDefinition::from_tool(ForgetTool);
    let _ = ToolDefinition::from_tool(ForgetKeyTool);
    let _ = ToolDefinition::from_tool(TryForgetTool);
}
