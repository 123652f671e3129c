use dsh_tools::tool;

/// Read a file.
#[tool(presentation_meta = read_meta)]
async fn read(path: String) -> String {
    path
}

// Returns text where a JSON value is expected.
fn read_meta(args: &ReadArgs, output: &String) -> String {
    format!("{}: {output}", args.path)
}

fn main() {}
