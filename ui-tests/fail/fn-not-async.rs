use dsh_tools::tool;

/// Read a file.
#[tool]
fn read(path: String) -> String {
    path
}

fn main() {}
