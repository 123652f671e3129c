use dsh_tools::{tool, ToolDefinition, ToolExec};

#[tool(name = "run_code", timout = 1)]
fn read(
    #[arg(default = Some(1))] limit: Option<u32>,
    exec: ToolExec,
    again: ToolExec,
) -> String {
    let _ = (limit, exec, again);
    String::new()
}

fn main() {
    // The fn and the generated names still exist: no error is reported below.
    let _direct: String = read(None, ToolExec::detached("t"), ToolExec::detached("t"));
    let _definition = ToolDefinition::from_tool(ReadTool);
    let _args: Option<ReadArgs> = None;
}
