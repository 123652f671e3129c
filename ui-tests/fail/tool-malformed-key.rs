use dsh_tools::tool;

/// Read a file.
#[tool(name = read, timeout_ms = "5s", concurrency_safe = "yes", render(x), allow_unknown = true, args = "A")]
async fn read(path: String) -> String {
    path
}

fn main() {}
