use dsh_tools::tool;

/// Read a file.
#[tool(name = "read file")]
async fn read(path: String) -> String {
    path
}

/// A name longer than 64 characters.
#[tool]
async fn a_very_long_tool_name_that_no_provider_accepts_because_it_exceeds_sixty_four() {}

fn main() {}
