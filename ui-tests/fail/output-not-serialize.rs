use dsh_tools::tool;

struct Contents(String);

/// Read a file.
#[tool]
async fn read(path: String) -> Result<Contents, String> {
    Ok(Contents(path))
}

/// Write a file.
#[tool]
async fn write(path: String) -> Contents {
    Contents(path)
}

fn main() {}
