//! Every signature shape, with `dsh-tools` as the only dependency.

use std::sync::Arc;

use dsh_tools::{ToolDefinition, ToolError, ToolExec, tool, toolbox};

/// Read a UTF-8 text file and return a window of its lines.
#[tool(concurrency_safe, timeout_ms = 5_000, deny_unknown)]
pub async fn read_file(
    /// Absolute path of the file.
    #[arg(length(min = 1), pattern = "^/")]
    path: String,
    /// First line to return, 1-based.
    #[arg(default = 1, range(min = 1))]
    offset: u64,
    /// Maximum number of lines.
    limit: Option<u32>,
    exec: ToolExec,
) -> Result<Vec<String>, ToolError> {
    let _ = (offset, limit, exec);
    Ok(vec![path])
}

/// Holds notes.
pub struct Notes {
    prefix: String,
}

#[toolbox]
impl Notes {
    /// Prefix a note.
    #[tool]
    pub async fn note(&self, text: String) -> String {
        format!("{}{text}", self.prefix)
    }
}

/// All tools of this crate.
pub fn definitions() -> Vec<ToolDefinition> {
    let mut definitions = vec![ToolDefinition::from_tool(ReadFileTool)];
    definitions.extend(
        Arc::new(Notes {
            prefix: String::new(),
        })
        .tools(),
    );
    definitions
}
