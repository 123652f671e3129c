//! `dsh-tools` renamed in the manifest, reached through `crate = renamed`.

use renamed::{ToolDefinition, tool, tool_type};

/// How to echo, derived through the renamed facade.
#[tool_type(crate = renamed)]
pub struct Echo {
    /// The text.
    pub text: String,
}

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

/// Echo a structured value back.
#[tool(crate = renamed)]
pub async fn echo_value(echo: Echo) -> Echo {
    echo
}

/// The tools of this crate.
pub fn definitions() -> Vec<ToolDefinition> {
    vec![
        ToolDefinition::from_tool(EchoTool),
        ToolDefinition::from_tool(EchoStrTool),
        ToolDefinition::from_tool(EchoValueTool),
    ]
}
