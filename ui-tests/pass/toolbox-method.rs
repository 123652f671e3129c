use std::sync::Arc;

use dsh_tools::{ToolDefinition, tool, toolbox};

struct Notes {
    prefix: String,
}

#[toolbox]
impl Notes {
    /// Prefix a note.
    #[tool(concurrency_safe)]
    async fn note(&self, text: String) -> String {
        format!("{}{text}", self.prefix)
    }

    /// Count notes.
    #[dsh_tools::tool(name = "count-notes")]
    pub(crate) async fn count(&self) -> u32 {
        self.prefix.len() as u32
    }

    fn helper(&self) -> usize {
        self.prefix.len()
    }
}

/// Runs the case.
pub(crate) fn main() {
    let notes = Arc::new(Notes {
        prefix: "- ".into(),
    });
    let _ = notes.helper();
    let _definitions: Vec<ToolDefinition> = notes.tools();
}
