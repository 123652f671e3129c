use dsh_tools::{tool, toolbox};

struct Files;

#[toolbox]
impl Files {
    /// Read a file.
    #[tool]
    async fn read(&self, path: String) -> String {
        path
    }

    /// Read a file again.
    #[tool(name = "read")]
    async fn read_again(&self, path: String) -> String {
        path
    }
}

fn main() {}
