use dsh_tools::tool;

/// Delete a file.
#[tool(destructive = "yes", title = "")]
async fn delete(path: String) -> String {
    path
}

fn main() {}
