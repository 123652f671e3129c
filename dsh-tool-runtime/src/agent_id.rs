//! The identity of an agent.

use std::fmt;
use std::sync::Arc;

/// The identity of an agent: the key of a scope layer. Serializes as its string.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
#[serde(transparent)]
pub struct AgentId(Arc<str>);

impl AgentId {
    /// An agent id from any string.
    pub fn new(id: impl AsRef<str>) -> Self {
        AgentId(Arc::from(id.as_ref()))
    }

    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for AgentId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "AgentId({:?})", &*self.0)
    }
}

impl fmt::Display for AgentId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}
