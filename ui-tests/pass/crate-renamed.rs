extern crate dsh_tools as renamed;

use renamed::ToolDefinition;

/// Echo the text back.
#[renamed::tool(crate = renamed, deny_unknown)]
async fn echo(#[arg(length(max = 10))] text: String) -> String {
    text
}

/// Echo with the path as a string.
#[renamed::tool(crate = "::renamed")]
async fn echo_str(text: String) -> String {
    text
}

fn main() {
    let _ = ToolDefinition::from_tool(EchoTool);
    let _ = ToolDefinition::from_tool(EchoStrTool);
}
