use dsh_tools::tool;

struct ToolExec;

/// Read a file.
#[tool]
async fn read(path: String, exec: ToolExec) -> String {
    let _ = exec;
    path
}

fn main() {}
