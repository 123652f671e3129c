//! Expansions are warning-free, including for public items under `missing_docs` (this is a
//! public module of a library, so the lint sees them).
#![deny(warnings, missing_docs, unused_qualifications)]

use std::sync::Arc;

use dsh_tools::{tool, toolbox, ToolDefinition, ToolError, ToolExec};

/// Read a file.
#[tool(concurrency_safe, timeout_ms = 1_000, allow_unknown)]
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

/// An error type of the crate's own, converted through its `From`.
pub struct Overdrawn;

impl From<Overdrawn> for ToolError {
    fn from(_: Overdrawn) -> Self {
        ToolError::new("insufficient funds").with_code("E_FUNDS")
    }
}

/// Withdraw from an account holding 100.
#[tool]
pub async fn withdraw(amount: u64) -> Result<u64, Overdrawn> {
    100_u64.checked_sub(amount).ok_or(Overdrawn)
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

/// Erases every tool of the module.
pub fn definitions() -> Vec<ToolDefinition> {
    let mut all = vec![
        ToolDefinition::from_tool(ReadTool),
        ToolDefinition::from_tool(WithdrawTool),
    ];
    all.extend(Arc::new(Files).tools());
    all
}
