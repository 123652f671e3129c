use dsh_tools::{tool, toolbox};

#[tool]
struct Read;

#[toolbox]
fn free() {}

fn main() {}
