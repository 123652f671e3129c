use dsh_tools::tool;

struct Path(String);

/// Read a file.
#[tool]
async fn read(path: Path) -> String {
    path.0
}

fn main() {}
