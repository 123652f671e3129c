use dsh_tools::presentation::{CallView, ResultView};
use dsh_tools::result::ContentBlock;
use dsh_tools::{ToolDefinition, ToolExec, ToolResult, tool};

/// List a directory.
#[tool(
    name = "ls",
    concurrency_safe = is_shallow,
    render = render_listing,
    present_call = present_ls,
    present_result = present_ls_result,
    presentation_meta = listing_meta,
    finalize_content = finalize_ls,
    args = LsArguments,
)]
async fn list_dir(
    #[arg(description = "Directory to list.", rename = "dirPath", pattern = "^/")] dir: String,
    #[arg(default = false)] recursive: bool,
    #[arg(length(min = 1, max = 3))] exts: Option<Vec<String>>,
) -> Vec<String> {
    let _ = (recursive, exts);
    vec![dir]
}

fn is_shallow(args: &LsArguments) -> bool {
    !args.recursive
}

fn render_listing(_: &LsArguments, entries: &[String]) -> Vec<ContentBlock> {
    vec![ContentBlock::text(entries.join("\n"))]
}

fn present_ls(args: &LsArguments) -> Option<CallView> {
    let _ = args;
    None
}

fn present_ls_result(
    _: &LsArguments,
    entries: &[String],
    meta: Option<&serde_json::Value>,
) -> Result<ResultView, String> {
    let _ = (entries, meta);
    Err("no card".to_owned())
}

fn listing_meta(_: &LsArguments, entries: &[String]) -> serde_json::Value {
    serde_json::json!({ "count": entries.len() })
}

fn finalize_ls(_: &ToolExec, _: &ToolResult) -> Option<Vec<ContentBlock>> {
    None
}

/// Runs the case.
pub(crate) fn main() {
    let _ = ToolDefinition::from_tool(ListDirTool);
}
