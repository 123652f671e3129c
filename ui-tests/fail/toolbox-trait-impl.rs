use dsh_tools::{tool, toolbox};

struct Files;

trait Reader {
    async fn read(&self, path: String) -> String;
}

#[toolbox]
impl Reader for Files {
    /// Read a file.
    #[tool]
    async fn read(&self, path: String) -> String {
        path
    }
}

fn main() {}
