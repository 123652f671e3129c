//! MCP servers as tool sources: `--mcp`, `--mcp-http` and `--config` (`mcpServers` JSON).

use dsh_tools::Registry;

use crate::args::Sources;

/// Connects every MCP server the sources name and registers its tools.
pub async fn add(_registry: &Registry, sources: &Sources) -> Result<(), String> {
    if sources.mcp.is_empty() && sources.mcp_http.is_empty() && sources.config.is_none() {
        return Ok(());
    }
    Err("MCP servers as tool sources need the MCP client of this crate".to_owned())
}
