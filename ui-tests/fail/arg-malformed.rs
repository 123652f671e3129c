use dsh_tools::tool;

/// Read a file.
#[tool]
async fn read(
    #[arg(range(min = "one"), length(), pattern = 5, default)] path: String,
    #[arg(length(min = -1, at = 2), rename)] text: String,
    #[arg = "x"] other: String,
) -> String {
    let _ = (text, other);
    path
}

fn main() {}
