use dsh_tools::{tool, tool_type};

/// Read a file.
#[tool(deny_unknown)]
async fn read(path: String) -> String {
    path
}

/// Read a file, whatever else is sent.
#[tool(deny_unknown, allow_unknown)]
async fn read_loose(path: String) -> String {
    path
}

/// Read a file, open in vain.
#[tool(deny_unknown = false)]
async fn read_open(path: String) -> String {
    path
}

#[tool_type]
struct Query {
    text: String,
}

/// Search.
#[tool(deny_unknown = true)]
async fn search(#[args] query: Query) -> String {
    query.text
}

#[tool_type(deny_unknown)]
struct Filter {
    limit: u32,
}

fn main() {}
