use dsh_tools::tool;

/// Read a file.
#[tool]
async fn read(
    #[arg(range(min = 1))] path: String,
    #[arg(length(max = 3), pattern = "^a")] limit: u32,
) -> String {
    let _ = limit;
    path
}

fn main() {}
