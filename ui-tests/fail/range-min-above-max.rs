use dsh_tools::tool;

/// List lines.
#[tool]
async fn list(#[arg(range(min = 10, max = 1))] limit: u32) -> u32 {
    limit
}

fn main() {}
