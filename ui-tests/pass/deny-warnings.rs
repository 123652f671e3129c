//! Expansions are warning-free, including for public items under `missing_docs`.
#![deny(warnings, missing_docs, unused_qualifications)]

use std::sync::Arc;

use dsh_tools::{tool, toolbox, ToolDefinition, ToolError, ToolExec};

/// Read a file.
#[tool(concurrency_safe, timeout_ms = 1_000, deny_unknown)]
pub async fn read(
    /// The path.
    #[arg(length(min = 1), pattern = "^/")]
    path: String,
    #[arg(default = 1, range(min = 1, max = 10))] offset: u32,
    limit: Option<u32>,
    exec: &ToolExec,
) -> Result<String, ToolError> {
    let _ = (offset, limit, exec);
    Ok(path)
}

/// A toolbox.
pub struct Files;

#[toolbox]
impl Files {
    /// Count files.
    #[tool]
    pub async fn count(&self) -> u32 {
        0
    }
}

fn main() {
    let _ = ToolDefinition::from_tool(ReadTool);
    let _ = Arc::new(Files).tools();
}
