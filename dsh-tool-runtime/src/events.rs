//! Events published for every call (SPEC §10).
//!
//! Subscribe with [`Registry::subscribe`](crate::Registry::subscribe). Every call publishes at most
//! one [`ToolEvent::Call`] (none when it is refused before any hook runs) and exactly one
//! [`ToolEvent::Result`].

use std::sync::Arc;

use serde_json::Value;

use crate::presentation::{CallView, ResultView};
use crate::result::ToolResult;
use crate::scope::AgentId;

mod log;
pub use log::EventLog;

/// One pipeline event. Serializes as an object tagged by `"event"` (`call`, `result`,
/// `code_dispatch_start`, `code_dispatch`, `progress`, `tools_changed`).
#[derive(Debug, Clone, serde::Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum ToolEvent {
    /// A call passed entry checks and is about to run its pre-execute hooks.
    Call {
        /// Call id.
        call_id: String,
        /// Tool name.
        name: String,
        /// Arguments as received.
        arguments: Arc<Value>,
        /// The agent, if any.
        agent: Option<AgentId>,
        /// The enclosing transport call for sub-calls.
        parent: Option<String>,
        /// The tool's pending-state card.
        view: Option<CallView>,
    },
    /// A call's final result (exactly one per call).
    Result {
        /// Call id.
        call_id: String,
        /// Tool name.
        name: String,
        /// The agent, if any.
        agent: Option<AgentId>,
        /// The enclosing transport call for sub-calls.
        parent: Option<String>,
        /// The result, shared with the caller.
        result: Arc<ToolResult>,
        /// The tool's completed-state card.
        view: Option<ResultView>,
    },
    /// A code-mode program started a binding call (a nested call of `run_code`).
    CodeDispatchStart {
        /// The `run_code` call id.
        parent: String,
        /// The sub-call id, `<parent>:code:<n>`.
        call_id: String,
        /// Tool name.
        name: String,
    },
    /// A code-mode binding call settled.
    CodeDispatch {
        /// The `run_code` call id.
        parent: String,
        /// The sub-call id.
        call_id: String,
        /// Tool name.
        name: String,
        /// `true` when the sub-call failed.
        is_error: bool,
    },
    /// A running call reported progress (MCP `notifications/progress`).
    Progress {
        /// The call id.
        call_id: String,
        /// Progress so far (increases with every report).
        progress: f64,
        /// The total, when known.
        total: Option<f64>,
        /// A human-readable status line.
        message: Option<String>,
    },
    /// A tool source replaced its set of tools (an MCP server's `tools/list` re-sync).
    ToolsChanged {
        /// The source, e.g. the MCP server name.
        source: String,
        /// The generation now live (1 for the first list; increases with every sync).
        generation: u64,
        /// The public names registered in that generation, in list order (empty after a
        /// rolled-back sync).
        tools: Vec<String>,
    },
}
