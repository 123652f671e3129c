use dsh_tools::{ToolDefinition, tool};

/// Show a file's first line.
#[tool(read_only, idempotent, open_world = false, title = "Peek at a file")]
async fn peek(path: String) -> String {
    path
}

/// Replace a file's content.
#[tool(destructive, idempotent = true, read_only = false)]
async fn overwrite(path: String) -> String {
    path
}

/// Runs the case.
pub(crate) fn main() {
    let peek = ToolDefinition::from_tool(PeekTool);
    let hints = peek.annotations().unwrap();
    assert_eq!(hints.title.as_deref(), Some("Peek at a file"));
    assert_eq!(hints.read_only_hint, Some(true));
    assert_eq!(hints.destructive_hint, None);
    assert_eq!(hints.open_world_hint, Some(false));
    let overwrite = ToolDefinition::from_tool(OverwriteTool);
    assert_eq!(
        overwrite.annotations().unwrap().destructive_hint,
        Some(true)
    );
    assert_eq!(overwrite.annotations().unwrap().read_only_hint, Some(false));
}
