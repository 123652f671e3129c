use dsh_tools::tool;

/// Run a program.
#[tool]
async fn run_code(code: String) -> String {
    code
}

fn main() {}
