//! One live MCP server: connecting, calling, watching the transport, reconnecting.
//!
//! This front holds what a connection is: the open transport ([`Conn`]) and the client side
//! that answers the server ([`Handler`]). Its parts:
//! - [`open`](mod@open): starting the transport and the lifecycle (`server/discover`, else
//!   `initialize`), and watching the transport until it closes;
//! - [`exit_grace`]: how long a stdio server is given to exit once its stdin closes;
//! - [`tools_list`]: every page of `tools/list`, within the server's caps;
//! - [`tools_call`]: one `tools/call`, settled by its answer, the transport, the caller or the
//!   timeout;
//! - [`errors`]: how a failed connect, request or call reads.

mod errors;
mod exit_grace;
mod open;
mod tools_call;
mod tools_list;

use std::sync::{Arc, Weak};

use parking_lot::Mutex;
use rmcp::model::{
    ClientCapabilities, ClientConfig, ElicitRequestParams, ElicitResult, ElicitationAction,
    ElicitationCapability, ErrorData, FormElicitationCapability, Implementation, ProtocolVersion,
};
use rmcp::service::{NotificationContext, RequestContext};
use rmcp::{ClientHandler, Peer, RoleClient};
use tokio_util::sync::CancellationToken;

use super::config::{McpServer, Transport};
use super::deadlines::Deadlines;
use super::elicitation::ElicitationHandler;
use super::progress::Link;
use crate::telemetry;

pub use errors::MCP_DISCONNECTED;
pub(crate) use errors::not_connected;
pub(crate) use open::open;
pub(crate) use tools_call::call_tool;
pub(crate) use tools_list::list_tools;

/// One open transport.
pub(crate) struct Conn {
    pub(crate) peer: Peer<RoleClient>,
    /// Cancelled when the transport is gone (or is being closed).
    pub(crate) closed: CancellationToken,
    /// Cancelled once the service has fully stopped (child reaped, streams closed).
    pub(crate) stopped: CancellationToken,
    pub(crate) pid: Option<u32>,
    /// The timeouts of the calls in flight.
    deadlines: Deadlines,
    /// The HTTP session, for the spans of its calls.
    session: telemetry::SessionCell,
}

/// The client side of a connection: list changes (progress is read by
/// [`ProgressTap`](super::progress::ProgressTap)) and the host's answers to elicitation requests.
pub(crate) struct Handler {
    pub(crate) link: Weak<Link>,
    pub(crate) elicitation: Option<ElicitationHandler>,
}

impl ClientHandler for Handler {
    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        if let Some(link) = self.link.upgrade() {
            link.list_changed.notify_one();
        }
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        match &self.elicitation {
            Some(handler) => Ok(handler.answer(request).await),
            None => Ok(ElicitResult::new(ElicitationAction::Decline)),
        }
    }

    fn get_info(&self) -> ClientConfig {
        let mut capabilities = ClientCapabilities::default();
        if self.elicitation.is_some() {
            capabilities.elicitation =
                Some(ElicitationCapability::new().with_form(FormElicitationCapability::default()));
        }
        let mut config = ClientConfig::new(
            capabilities,
            Implementation::new("dsh-tools", env!("CARGO_PKG_VERSION")),
        );
        // What `initialize` offers: the newest version with a handshake. 2026-07-28 is
        // negotiated by `server/discover` (`lifecycle`).
        config.protocol_version = ProtocolVersion::LATEST_WITH_INITIALIZE;
        config
    }
}

/// The server `config` names, as its spans name it.
fn span_peer(config: &McpServer) -> telemetry::ClientPeer {
    match &config.transport {
        Transport::Stdio { .. } => telemetry::ClientPeer::stdio(&config.name),
        Transport::Http { url } => telemetry::ClientPeer::http(&config.name, url),
    }
}

/// The pid of the child process, for diagnostics.
pub(crate) fn pid(conn: &Mutex<Option<Arc<Conn>>>) -> Option<u32> {
    conn.lock().as_ref().and_then(|conn| conn.pid)
}
