use dsh_tools::tool;

/// Read a file.
#[tool(name = "read", concurrency_safe, name = "read_file")]
async fn read(path: String) -> String {
    path
}

fn main() {}
