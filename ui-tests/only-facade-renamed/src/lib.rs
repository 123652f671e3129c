//! `dsh-tools` renamed in the manifest, reached through `crate = renamed`.

use renamed::{ToolDefinition, tool};

/// Echo the text back.
#[tool(crate = renamed)]
pub async fn echo(#[arg(length(max = 100))] text: String, #[arg(default = 1)] times: u32) -> String {
    text.repeat(times as usize)
}

/// Echo, the crate path given as a string with a leading `::`.
#[tool(crate = "::renamed", allow_unknown)]
pub async fn echo_str(#[arg(length(max = 10))] text: String) -> String {
    text
}

/// The tools of this crate.
pub fn definitions() -> Vec<ToolDefinition> {
    vec![
        ToolDefinition::from_tool(EchoTool),
        ToolDefinition::from_tool(EchoStrTool),
    ]
}
