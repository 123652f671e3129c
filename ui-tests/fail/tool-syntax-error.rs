use dsh_tools::tool;

/// Read a file.
#[tool(name = )]
async fn read(path: String) -> String {
    path
}

fn main() {}
