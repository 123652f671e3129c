use dsh_tools::{tool, ToolExec};

/// Read a file.
#[tool(timeout_ms = 0)]
async fn read(path: String, exec: ToolExec) -> String {
    let _ = exec;
    path
}

/// Write a file.
#[tool(timeout_ms = -5)]
async fn write(path: String, exec: ToolExec) -> String {
    let _ = exec;
    path
}

fn main() {}
