//! MCP servers as tool sources, on the `rmcp` client.
//!
//! [`crate::McpExt::add_mcp_server`] connects to a server, lists every page of `tools/list` and
//! registers each tool as `mcp__<server>__<raw>` ([`mcp_tool_name`]). From then on the tools go
//! through the whole pipeline like any other: arguments are validated client-side against the
//! server's input schema (draft-07 and 2020-12; `$schema` is never fetched), results become
//! `{content, structuredContent?}` (validated against the tool's `outputSchema`), `isError`
//! becomes a failure, `readOnlyHint` makes a tool parallel-safe.
//!
//! Lifecycle: `notifications/tools/list_changed` re-syncs into a new generation
//! ([`ToolEvent::ToolsChanged`](crate::events::ToolEvent::ToolsChanged)); when the transport
//! closes, calls in flight fail at once with code [`MCP_DISCONNECTED`] and the bridge reconnects
//! with backoff ([`ReconnectPolicy`]); each call has a timeout (`TOOL_TIMEOUT`, default 60 s);
//! cancelling a call sends `notifications/cancelled` and settles it as `ABORTED` at once;
//! progress notifications become [`ToolEvent::Progress`](crate::events::ToolEvent::Progress).

mod answers;
mod bridge;
mod config;
mod connection;
mod deadlines;
mod elicitation;
mod http;
mod names;
#[cfg(feature = "oauth")]
mod oauth;
mod progress;
mod results;
mod schema;
mod stderr;
mod stdio;

use std::sync::Arc;

use tokio::sync::Notify;

pub use config::{
    DEFAULT_MAX_LIST_BYTES, DEFAULT_MAX_LIST_PAGES, DEFAULT_MAX_TOOLS, McpError, McpServer,
    ReconnectPolicy,
};
pub use connection::MCP_DISCONNECTED;
pub use names::{MAX_TOOL_NAME_LEN, is_valid_server_name, mcp_tool_name};
#[cfg(feature = "oauth")]
#[cfg_attr(docsrs, doc(cfg(feature = "oauth")))]
pub use oauth::{
    McpAuthorizeError, McpAuthorizer, McpClientCredentials, McpLoopbackAuthorizer, McpOAuthLogin,
};
/// The MCP implementation the bridge runs on (pinned `=3.11.0`), for the types of
/// [`McpHandle::peer`].
pub use rmcp;
pub use schema::MAX_SCHEMA_DEPTH;

use crate::registry::{McpServers, Registry};
use crate::scope::AgentId;
use crate::scope::AgentScope;

/// A bridged MCP server. [`McpHandle::disconnect`] closes the transport and unregisters its
/// tools; dropping the handle keeps the server connected (like every registry handle).
#[derive(Clone)]
pub struct McpHandle {
    bridge: Arc<bridge::Bridge>,
}

impl std::fmt::Debug for McpHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpHandle")
            .field("server", &self.bridge.server())
            .finish_non_exhaustive()
    }
}

impl McpHandle {
    /// The server name.
    pub fn server(&self) -> &str {
        self.bridge.server()
    }

    /// The public names of the tools registered now, in the server's list order.
    pub fn tools(&self) -> Vec<String> {
        self.bridge.tool_names()
    }

    /// The number of the live generation (1 after the first sync, +1 per sync).
    pub fn generation(&self) -> u64 {
        self.bridge.generation()
    }

    /// `true` while a transport is open.
    pub fn is_connected(&self) -> bool {
        self.bridge.current().is_some()
    }

    /// The rmcp peer of the current connection, for the requests the bridge does not make
    /// itself (resources, prompts, completions); `None` while disconnected. A call made
    /// through it bypasses the registry: no argument validation, pipeline, timeout, progress
    /// events or result rendering. It goes away with its connection: after a reconnect, ask
    /// again.
    pub fn peer(&self) -> Option<rmcp::Peer<rmcp::RoleClient>> {
        self.bridge.current().map(|conn| conn.peer.clone())
    }

    /// The process id of a stdio server's current child process.
    pub fn process_id(&self) -> Option<u32> {
        connection::pid(&self.bridge.conn)
    }

    /// Stops reconnecting, closes the transport (a stdio child is stopped), fails the calls in
    /// flight with `MCP_DISCONNECTED`, and unregisters the server's tools. Idempotent.
    pub async fn disconnect(&self) {
        self.bridge.disconnect().await;
        let registry = &self.bridge.link.registry;
        registry
            .slot::<McpServers>()
            .0
            .lock()
            .remove(self.bridge.server());
    }
}

async fn add(
    registry: &Registry,
    agent: Option<AgentId>,
    server: McpServer,
) -> Result<McpHandle, McpError> {
    let name = server.name.clone();
    if !is_valid_server_name(&name) {
        return Err(McpError::InvalidName(name));
    }
    if !registry.slot::<McpServers>().0.lock().insert(name.clone()) {
        return Err(McpError::DuplicateServer(name));
    }
    let link = Arc::new(progress::Link {
        registry: registry.clone(),
        progress: Default::default(),
        list_changed: Notify::new(),
    });
    let bridge = bridge::Bridge::new(server, link, agent);
    match bridge.start().await {
        Ok(()) => Ok(McpHandle { bridge }),
        Err(err) => {
            bridge.shutdown.cancel();
            registry.slot::<McpServers>().0.lock().remove(&name);
            Err(err)
        }
    }
}

/// MCP servers' tools bridged into a registry's global layer. Implemented for [`Registry`]
/// only; `dsh_tools::prelude` brings it into scope.
pub trait McpExt: crate::sealed::Sealed {
    /// Connects to an MCP server and registers its tools in the global layer.
    ///
    /// A listed tool that cannot be registered (malformed, a public name an earlier tool of the
    /// list or a foreign tool already has) is skipped with a warning; its siblings register. A
    /// list past the server's caps ([`McpServer::max_tools`], [`McpServer::max_list_bytes`],
    /// [`McpServer::max_list_pages`]) is cut there, with a warning.
    ///
    /// # Errors
    /// [`McpError`]: an invalid or duplicate server name, a failed connect or `initialize`, a
    /// timeout, or a failed `tools/list`. On error nothing stays registered and the server is
    /// stopped.
    fn add_mcp_server(
        &self,
        server: McpServer,
    ) -> impl std::future::Future<Output = Result<McpHandle, McpError>> + Send;
}

impl McpExt for Registry {
    async fn add_mcp_server(&self, server: McpServer) -> Result<McpHandle, McpError> {
        add(self, None, server).await
    }
}

/// MCP servers' tools bridged into an agent scope. Implemented for [`AgentScope`] only;
/// `dsh_tools::prelude` brings it into scope.
pub trait ScopeMcpExt: crate::sealed::Sealed {
    /// Connects to an MCP server and registers its tools for this agent (and descendants)
    /// only.
    ///
    /// # Errors
    /// As [`crate::McpExt::add_mcp_server`].
    fn add_mcp_server(
        &self,
        server: McpServer,
    ) -> impl std::future::Future<Output = Result<McpHandle, McpError>> + Send;
}

impl ScopeMcpExt for AgentScope {
    async fn add_mcp_server(&self, server: McpServer) -> Result<McpHandle, McpError> {
        add(self.registry(), Some(self.id().clone()), server).await
    }
}
