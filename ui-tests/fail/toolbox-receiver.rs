use dsh_tools::{tool, toolbox};

struct Files;

#[toolbox]
impl Files {
    /// Write a file.
    #[tool]
    async fn write(&mut self, path: String) -> String {
        path
    }

    /// Consume the toolbox.
    #[tool]
    async fn close(self) {}

    /// A tool without state.
    #[tool]
    async fn version() -> u32 {
        1
    }
}

fn main() {}
