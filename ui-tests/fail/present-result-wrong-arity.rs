use dsh_tools::{presentation::ResultView, tool, ToolResult};

/// Read a file.
#[tool(present_result = present_read)]
async fn read(path: String) -> String {
    path
}

// Takes the whole result instead of the typed output and the meta.
fn present_read(args: &ReadArgs, result: &ToolResult) -> Option<ResultView> {
    let _ = (args, result);
    None
}

fn main() {}
