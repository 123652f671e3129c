//! The handle of one registration.

use std::sync::Weak;

use super::{Inner, write};
use crate::agent_id::AgentId;

/// A registration (tool, hook, guard, restriction or mode): [`Handle::unregister`] removes it.
/// Dropping the handle keeps the registration.
#[derive(Debug, Clone)]
pub struct Handle {
    pub(super) registry: Weak<Inner>,
    pub(super) agent: Option<AgentId>,
    pub(super) id: u64,
}

impl Handle {
    /// Removes the registration. Returns `false` if it was already removed (or the registry is
    /// gone).
    pub fn unregister(&self) -> bool {
        let Some(inner) = self.registry.upgrade() else {
            return false;
        };
        let mut state = write(&inner.state);
        match &self.agent {
            None => state.global.remove(self.id),
            Some(agent) => state
                .agents
                .get_mut(agent)
                .is_some_and(|layer| layer.remove(self.id)),
        }
    }
}
