use dsh_tools::tool;

/// Delete a file.
#[tool(read_only, destructive)]
async fn delete(path: String) -> String {
    path
}

fn main() {}
