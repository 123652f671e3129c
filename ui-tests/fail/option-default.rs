use dsh_tools::tool;

/// List lines.
#[tool]
async fn list(#[arg(default = Some(10))] limit: Option<u32>) -> u32 {
    limit.unwrap_or(0)
}

fn main() {}
