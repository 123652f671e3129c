use dsh_tools::tool;

/// Read a file.
#[tool(timeout_ms = 5_000)]
async fn read(path: String) -> String {
    path
}

fn main() {}
