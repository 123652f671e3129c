use dsh_tools::tool;

struct Files;

impl Files {
    /// Read a file.
    #[tool]
    async fn read(&self, path: String) -> String {
        path
    }
}

fn main() {}
