use dsh_tools::tool;

/// Copy a file.
#[tool]
async fn copy(#[arg(rename = "to")] from: String, to: String, #[arg(rename = "")] mode: u32) -> String {
    let _ = mode;
    from + &to
}

fn main() {}
