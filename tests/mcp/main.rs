//! The MCP bridge in one test binary: connection lifecycle, list handling, hostile servers, real
//! third-party servers, MCP tools in code mode and `dsh-tools serve` driven by real clients.

#[macro_use]
#[path = "../mcp_support/mod.rs"]
mod mcp_support;
#[cfg(feature = "cli")]
#[path = "../../src/bin/dsh-tools/toolset.rs"]
mod toolset;

#[cfg(feature = "mcp-server")]
mod approvals;
#[cfg(feature = "code-mode")]
mod code_mode;
#[cfg(all(feature = "mcp-server", feature = "durable"))]
mod durable_approvals;
mod hostile;
#[cfg(feature = "cli")]
mod http_access;
#[cfg(feature = "cli")]
mod http_limits;
#[cfg(feature = "cli")]
mod http_server;
#[cfg(all(feature = "mcp-server", feature = "durable"))]
mod legacy_durable_approvals;
mod lifecycle;
mod lists;
#[cfg(feature = "cli")]
mod oauth;
#[cfg(feature = "cli")]
mod oauth_principals;
#[cfg(feature = "mcp-server")]
mod protocol;
mod real_servers;
#[cfg(feature = "mcp-server")]
mod resumable_streams;
#[cfg(feature = "cli")]
mod serve;
#[cfg(all(feature = "mcp-server", feature = "durable"))]
mod session_principals;
mod standalone_stream;
#[cfg(all(feature = "cli", feature = "embedded-js"))]
mod task_shares;
#[cfg(feature = "mcp-server")]
mod tasks;
