use dsh_tools::tool;

/// Read a file.
#[tool]
async fn read(
    #[arg(rename = "p")]
    #[arg(rename = "filePath", range(min = 1, min = 2))]
    path: String,
) -> String {
    path
}

fn main() {}
