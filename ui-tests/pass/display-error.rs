use std::fmt;

use dsh_tools::{ToolDefinition, ToolError, tool};

#[derive(Debug)]
struct DiskFull;

impl fmt::Display for DiskFull {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("disk full")
    }
}

/// Write a file.
#[tool]
async fn write(text: String) -> Result<usize, DiskFull> {
    if text.is_empty() {
        Err(DiskFull)
    } else {
        Ok(text.len())
    }
}

/// Read a file through `std::io`.
#[tool]
async fn read(path: String) -> std::io::Result<String> {
    std::fs::read_to_string(path)
}

/// Parse a number, failing with a `String`.
#[tool]
async fn parse(text: String) -> core::result::Result<i64, String> {
    text.parse()
        .map_err(|err: std::num::ParseIntError| err.to_string())
}

/// An error without `Display`: its `From` alone makes it a tool's error.
struct Refused;

impl From<Refused> for ToolError {
    fn from(_: Refused) -> Self {
        ToolError::new("refused").with_code("E_REFUSED")
    }
}

/// Refuse, through `From`.
#[tool]
async fn refuse() -> Result<(), Refused> {
    Err(Refused)
}

/// Fail with an `anyhow::Error`, through `Display`.
#[tool]
async fn fail_anyhow() -> anyhow::Result<u8> {
    anyhow::bail!("nothing to read")
}

/// Fail with a boxed error, through `Display`.
#[tool]
async fn fail_boxed() -> Result<u8, Box<dyn std::error::Error + Send + Sync>> {
    Err("nothing to read".into())
}

/// Runs the case.
pub(crate) fn main() {
    let _ = ToolDefinition::from_tool(WriteTool);
    let _ = ToolDefinition::from_tool(ReadTool);
    let _ = ToolDefinition::from_tool(ParseTool);
    let _ = ToolDefinition::from_tool(RefuseTool);
    let _ = ToolDefinition::from_tool(FailAnyhowTool);
    let _ = ToolDefinition::from_tool(FailBoxedTool);
}
