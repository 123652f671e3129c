use dsh_tools::tool;

#[tool]
async fn read(path: String) -> String {
    path
}

fn main() {}
