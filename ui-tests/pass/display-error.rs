use std::fmt;

use dsh_tools::{ToolDefinition, tool};

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

/// Runs the case.
pub fn main() {
    let _ = ToolDefinition::from_tool(WriteTool);
    let _ = ToolDefinition::from_tool(ReadTool);
    let _ = ToolDefinition::from_tool(ParseTool);
}
