use dsh_tools::{tool, toolbox};

struct Files;

#[toolbox]
impl Files {
    /// Read a file.
    #[tool]
    #[tool(name = "read2")]
    async fn read(&self, path: String) -> String {
        path
    }
}

fn main() {}
