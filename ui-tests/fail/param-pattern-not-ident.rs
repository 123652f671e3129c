use dsh_tools::tool;

/// Add two numbers.
#[tool]
async fn add((a, b): (i64, i64), _: String) -> i64 {
    a + b
}

fn main() {}
