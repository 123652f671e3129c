use dsh_tools::tool;

#[tool(descripton = "Read a file.")]
async fn read(path: String) -> String {
    path
}

fn main() {}
