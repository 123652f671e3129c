use dsh_tools::tool;

/// Read a file.
#[tool]
async fn read(#[arg(descripton = "Path.", min = 1)] path: String) -> String {
    path
}

fn main() {}
