use dsh_tools::{ToolDefinition, ToolError, ToolExec, tool};

/// Read a UTF-8 text file and return a window of its lines.
#[tool(concurrency_safe, timeout_ms = 5_000)]
pub(crate) async fn read_file(
    /// Absolute path of the file.
    path: String,
    /// First line to return, 1-based.
    #[arg(default = 1, range(min = 1))]
    offset: u64,
    /// Maximum number of lines.
    limit: Option<u32>,
    exec: ToolExec,
) -> Result<String, ToolError> {
    let _ = (offset, limit, exec.signal());
    Ok(path)
}

/// Runs the case.
pub(crate) fn main() {
    let _direct = read_file(String::new(), 1, None, ToolExec::detached("read_file"));
    let _args = ReadFileArgs {
        path: String::new(),
        offset: 1,
        limit: None,
    };
    let _definition = ToolDefinition::from_tool(ReadFileTool);
}
