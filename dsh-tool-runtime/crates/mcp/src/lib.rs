//! MCP for dsh-tools, the Model Context Protocol (revisions 2025-11-25 and 2026-07-28).
//!
//! What it holds:
//! - [`mcp`]: the client that bridges an MCP server's tools into a registry, over stdio or
//!   streamable HTTP, with OAuth 2.1 (feature `oauth`) ([`McpExt`], [`ScopeMcpExt`]);
//! - [`mcp_server`] (feature `server`): a registry served over stdio or streamable HTTP, with
//!   tasks, approvals of durable runs and OAuth 2.1 as a protected resource ([`ServeExt`]);
//! - the spans and trace context the MCP semantic conventions name.
//!
//! It depends on the core, `dsh-tool-runtime`, and for serving on `dsh-tool-code-mode`; the
//! `dsh-tools` facade re-exports its curated API. Depend on `dsh-tools` instead.
// docs.rs marks each feature-gated item with the feature it needs.
#![cfg_attr(docsrs, feature(doc_cfg))]

// The core's modules under the paths this crate's code names them by.
#[cfg(all(unix, feature = "oauth"))]
use dsh_tool_code_mode::private_file;
#[cfg(feature = "server")]
use dsh_tool_code_mode::{accept, code_mode, durable};
use dsh_tool_runtime::*;

pub mod mcp;
#[cfg(feature = "server")]
pub mod mcp_server;
mod telemetry;
#[cfg(feature = "server")]
mod traced;

pub use mcp::{McpExt, ScopeMcpExt};
#[cfg(feature = "server")]
pub use mcp_server::ServeExt;

/// Keeps the extension traits implemented by the core types they extend alone.
pub(crate) mod sealed {
    /// Implemented for [`Registry`](dsh_tool_runtime::Registry) and
    /// [`AgentScope`](dsh_tool_runtime::AgentScope) only.
    pub trait Sealed {}
    impl Sealed for dsh_tool_runtime::Registry {}
    impl Sealed for dsh_tool_runtime::AgentScope {}
}
