use dsh_tools::tool;

/// Look like an MCP tool.
#[tool(name = "mcp__files__read")]
async fn read(path: String) -> String {
    path
}

fn main() {}
