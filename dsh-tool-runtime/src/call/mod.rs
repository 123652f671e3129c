//! One tool call: what the model asked for ([`ToolCall`]), what hooks see of it
//! ([`ToolCallView`]) and the context its body receives ([`ToolExec`], `context.rs`). The stages
//! it runs through are the [`pipeline`](crate::pipeline)'s.

pub mod approval;
pub mod client_channel;
mod context;
mod extensions;

use std::sync::Arc;

use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::agent_id::AgentId;

pub use crate::contain::{contain, panic_message};
pub use client_channel::{
    ClientChannel, ClientError, Elicitation, ElicitationRequest, LogLevel, Role, Root,
    RootsRequest, SamplingMessage, SamplingReply, SamplingRequest,
};
pub use context::ToolExec;
pub use extensions::Extensions;

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
    /// What features attach to the call (a durable run's journal, a binding call's park
    /// slot), handed on to its [`ToolExec`].
    pub extensions: Extensions,
    /// The span this call's span goes under; `None`: the caller's current span.
    pub trace_parent: Option<tracing::Span>,
}

/// What hooks, guards and observers see of a call: read-only.
#[derive(Debug, Clone)]
pub struct ToolCallView {
    /// The call id.
    pub call_id: String,
    /// The id of the top-level call (equal to `call_id` for roots).
    pub root_call_id: String,
    /// The tool name as the model wrote it.
    pub name: String,
    /// The arguments as received (shared, never copied per stage).
    pub arguments: Arc<Value>,
    /// The agent the call runs for.
    pub agent: Option<AgentId>,
    /// The id of the enclosing transport call (`run_code`) for sub-calls.
    pub parent: Option<String>,
    /// The caller's cancellation signal.
    pub signal: CancellationToken,
    /// The way back to the client that made the call (log, sample, elicit); without a client
    /// for calls not served over MCP.
    pub client: ClientChannel,
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
            extensions: Extensions::default(),
            trace_parent: None,
        }
    }

    /// Sets the channel to the client that made the call.
    pub fn with_client(mut self, client: ClientChannel) -> Self {
        self.client = client;
        self
    }

    /// Attaches `value` to the call, one value per type (a later value of the same type
    /// replaces it), in the manner of `http::Extensions`: the tool body reads it with
    /// [`ToolExec::extension`]. Only the host that builds the call sets them: the model's
    /// arguments cannot, and the binding calls of a `run_code` program do not inherit them.
    ///
    /// ```
    /// use dsh_tool_runtime::{ToolCall, ToolExec};
    ///
    /// #[derive(Clone)]
    /// struct Tenant(&'static str);
    ///
    /// let call = ToolCall::new("c1", "search", serde_json::json!({})).with_extension(Tenant("acme"));
    /// # let _ = call;
    /// // In the body: `exec.extension::<Tenant>()` is `Some(&Tenant("acme"))`.
    /// fn tenant(exec: &ToolExec) -> Option<&'static str> {
    ///     exec.extension::<Tenant>().map(|tenant| tenant.0)
    /// }
    /// # let _ = tenant;
    /// ```
    #[must_use]
    pub fn with_extension<T: Clone + Send + Sync + 'static>(mut self, value: T) -> Self {
        self.extensions.insert(value);
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
