//! `dsh-tools` renamed in the manifest, reached through `crate = renamed`.

use renamed::{ToolDefinition, tool};

/// Echo the text back.
#[tool(crate = renamed)]
pub async fn echo(#[arg(length(max = 100))] text: String, #[arg(default = 1)] times: u32) -> String {
    text.repeat(times as usize)
}

/// The tool of this crate.
pub fn definition() -> ToolDefinition {
    ToolDefinition::from_tool(EchoTool)
}
