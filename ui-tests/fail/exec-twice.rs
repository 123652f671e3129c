use dsh_tools::{tool, ToolExec};

/// Read a file.
#[tool]
async fn read(path: String, exec: ToolExec, again: &ToolExec) -> String {
    let _ = (exec, again);
    path
}

fn main() {}
