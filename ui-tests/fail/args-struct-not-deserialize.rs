use dsh_tools::tool;

struct ReadArgs {
    path: String,
}

/// Read a file.
#[tool]
async fn read(#[args] args: ReadArgs) -> String {
    args.path
}

fn main() {}
