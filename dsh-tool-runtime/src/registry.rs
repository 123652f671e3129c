//! The registry (SPEC §2): registration, lookup, schemas, execution.

use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::definition::ToolDefinition;
use crate::scope::AgentId;

/// The tool registry.
#[derive(Clone, Default)]
pub struct Registry {}

/// Why a registration was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RegisterError {
    /// The name is reserved.
    #[error(
        "tool name \"run_code\" is reserved for the Code Mode presentation transport and cannot be registered or shadowed"
    )]
    Reserved,
}

/// A handle to one registration.
#[derive(Debug)]
pub struct ToolHandle {}

/// One tool call as the model made it.
#[derive(Debug, Clone)]
pub struct ToolCall {
    /// Call id.
    pub call_id: String,
    /// Tool name.
    pub name: String,
    /// Arguments.
    pub arguments: Value,
    /// Agent.
    pub agent: Option<AgentId>,
    /// Signal.
    pub signal: CancellationToken,
}

impl Registry {
    /// Registers a tool.
    pub fn register(&self, _definition: ToolDefinition) -> Result<ToolHandle, RegisterError> {
        Ok(ToolHandle {})
    }
}
