//! One tool call: what the model asked for ([`ToolCall`]), the context its body receives
//! ([`ToolExec`], `context.rs`) and the stages it runs through (`stages.rs`).

mod approval;
mod client_channel;
mod contain;
mod context;
mod stages;

use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::scope::AgentId;

#[cfg(feature = "mcp-server")]
pub(crate) use approval::approval_message;
#[cfg(feature = "code-mode")]
pub(crate) use approval::{DenialSource, denial_text};
#[cfg(feature = "mcp-server")]
pub(crate) use client_channel::ClientPeer;
pub use client_channel::{
    ClientChannel, ClientError, Elicitation, ElicitationRequest, LogLevel, Role, Root,
    RootsRequest, SamplingMessage, SamplingReply, SamplingRequest,
};
pub(crate) use contain::{contain, panic_message};
pub use context::ToolExec;
pub(crate) use stages::DispatchedCall;

/// One tool call as the model made it.
#[derive(Debug, Clone)]
pub struct ToolCall {
    /// The call id (from the model's tool-call block).
    pub call_id: String,
    /// The id of the top-level call; `None` for roots (defaults to `call_id`).
    pub root_call_id: Option<String>,
    /// The tool name.
    pub name: String,
    /// The arguments, parsed JSON of any shape (non-objects fail with `INVALID_ARGS`).
    pub arguments: Value,
    /// The agent the call runs for.
    pub agent: Option<AgentId>,
    /// The id of the enclosing transport call (`run_code`) for sub-calls.
    pub parent: Option<String>,
    /// The caller's cancellation signal.
    pub signal: CancellationToken,
    /// The way back to the client that made the call (none by default; a call served over MCP
    /// has one).
    pub client: ClientChannel,
    /// The journal of a durable `run_code` run ([`ToolCall::durable`]).
    #[cfg(feature = "code-mode")]
    pub(crate) durable: Option<crate::durable::Durability>,
    /// A durable run's binding call: where its `Ask` parks the run.
    pub(crate) park: Option<crate::hooks::ParkSlot>,
    /// The span this call's span goes under; `None`: the caller's current span.
    pub(crate) trace_parent: Option<tracing::Span>,
}

impl ToolCall {
    /// A top-level call with no agent and a fresh signal.
    pub fn new(call_id: impl Into<String>, name: impl Into<String>, arguments: Value) -> Self {
        ToolCall {
            call_id: call_id.into(),
            root_call_id: None,
            name: name.into(),
            arguments,
            agent: None,
            parent: None,
            signal: CancellationToken::new(),
            client: ClientChannel::default(),
            #[cfg(feature = "code-mode")]
            durable: None,
            park: None,
            trace_parent: None,
        }
    }

    /// Sets the channel to the client that made the call.
    pub fn with_client(mut self, client: ClientChannel) -> Self {
        self.client = client;
        self
    }

    /// Makes a `run_code` call durable: its binding calls are journaled in `run.store` under
    /// `run.run_id`, and calling it again with the same run id resumes the run from its journal
    /// (or returns its stored result once it has ended). Ignored by every other tool.
    #[cfg(feature = "code-mode")]
    #[cfg_attr(docsrs, doc(cfg(feature = "code-mode")))]
    #[must_use]
    pub fn durable(mut self, run: crate::durable::DurableRun) -> Self {
        self.durable = Some(crate::durable::Durability::Journal(run));
        self
    }

    /// Sets the agent.
    pub fn with_agent(mut self, agent: AgentId) -> Self {
        self.agent = Some(agent);
        self
    }

    /// Sets the cancellation signal.
    pub fn with_signal(mut self, signal: CancellationToken) -> Self {
        self.signal = signal;
        self
    }

    /// Marks the call as a sub-call of the transport call `parent`, under root `root_call_id`.
    pub fn with_parent(
        mut self,
        parent: impl Into<String>,
        root_call_id: impl Into<String>,
    ) -> Self {
        self.parent = Some(parent.into());
        self.root_call_id = Some(root_call_id.into());
        self
    }
}
