use dsh_tools::tool_type;

#[tool_type]
fn helper() {}

#[tool_type(serde = "x")]
struct Wrong {
    field: u32,
}

fn main() {}
