use dsh_tools::tool;

/// Read a file.
#[tool]
async fn read(path: &'static str, filter: impl Fn(&str) -> bool) -> bool {
    filter(path)
}

fn main() {}
