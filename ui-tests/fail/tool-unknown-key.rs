use dsh_tools::tool;

/// Read a file.
#[tool(timout_ms = 5_000, concurrent)]
async fn read(path: String) -> String {
    path
}

fn main() {}
