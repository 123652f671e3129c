//! The registry's state: its layers of registrations (one global, one per agent), how a call's
//! view is resolved from them, the lock around them and the generation counter every write
//! through it bumps.

use std::collections::{BTreeMap, HashMap};

use parking_lot::{RwLock, RwLockReadGuard, RwLockWriteGuard};

use super::RUN_CODE;
use crate::agent_id::AgentId;
use crate::call::Extensions;
use crate::definition::ToolDefinition;
use crate::hooks::Approver;
use crate::registry::{Layer, Mode};

#[derive(Default)]
pub struct State {
    pub global: Layer,
    pub agents: HashMap<AgentId, Layer>,
    pub parents: HashMap<AgentId, AgentId>,
    pub default_mode: Mode,
    pub approver: Option<Approver>,
    /// The transport tool (`run_code`): served in non-native modes while one is mounted.
    pub transport: Option<ToolDefinition>,
    /// Bumped on every write, so watchers (the MCP server's `list_changed`) learn of changes.
    pub changes: Changes,
    /// What features keep per registry, one value per type: under the lock, written through
    /// [`write`] (the mounted code runtime, SDK disclosure settings), or shared handles made
    /// on first use by [`Registry::slot`](super::Registry::slot) (MCP servers, durable runs'
    /// settings).
    pub extensions: Extensions,
}

impl std::fmt::Debug for State {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The approver and the extensions hold closures and features' values.
        f.debug_struct("State")
            .field("global", &self.global)
            .field("agents", &self.agents)
            .field("parents", &self.parents)
            .field("default_mode", &self.default_mode)
            .field("transport", &self.transport)
            .finish_non_exhaustive()
    }
}

impl State {
    /// The agent's chain, farthest ancestor first, the agent itself last.
    pub fn chain(&self, agent: &AgentId) -> Vec<AgentId> {
        let mut chain = vec![agent.clone()];
        let mut current = agent;
        while let Some(parent) = self.parents.get(current) {
            // A cycle cannot be built through the public API; stop defensively anyway.
            if chain.contains(parent) {
                break;
            }
            chain.push(parent.clone());
            current = parent;
        }
        chain.reverse();
        chain
    }

    /// The layers that apply to a call for `agent`: global first, then the chain.
    pub fn layers<'a>(&'a self, agent: Option<&AgentId>) -> Vec<&'a Layer> {
        let mut layers = vec![&self.global];
        if let Some(agent) = agent {
            layers.extend(
                self.chain(agent)
                    .iter()
                    .filter_map(|id| self.agents.get(id)),
            );
        }
        layers
    }

    /// Inherited tools of `agent` (global, then ancestors; nearer shadows farther), before masks.
    pub fn inherited(&self, agent: &AgentId) -> BTreeMap<&str, &ToolDefinition> {
        let mut inherited: BTreeMap<&str, &ToolDefinition> = self
            .global
            .tools
            .iter()
            .map(|(name, (_, def))| (name.as_str(), def))
            .collect();
        let chain = self.chain(agent);
        for ancestor in &chain[..chain.len() - 1] {
            if let Some(layer) = self.agents.get(ancestor) {
                inherited.extend(
                    layer
                        .tools
                        .iter()
                        .map(|(name, (_, def))| (name.as_str(), def)),
                );
            }
        }
        inherited
    }

    fn admitted(&self, agent: &AgentId, name: &str) -> bool {
        self.chain(agent)
            .iter()
            .filter_map(|id| self.agents.get(id))
            .all(|layer| {
                layer
                    .restrictions
                    .iter()
                    .all(|(_, filter)| filter.admits(name))
            })
    }

    /// The definition `name` resolves to for `agent`, if visible. `run_code` lives outside the
    /// layers: it resolves in non-native scopes once a transport tool is mounted.
    pub fn resolve(&self, name: &str, agent: Option<&AgentId>) -> Option<ToolDefinition> {
        if name == RUN_CODE {
            return if self.mode(agent) == Mode::Native {
                None
            } else {
                self.transport.clone()
            };
        }
        let Some(agent) = agent else {
            return self.global.tools.get(name).map(|(_, def)| def.clone());
        };
        if let Some((_, def)) = self
            .agents
            .get(agent)
            .and_then(|layer| layer.tools.get(name))
        {
            return Some(def.clone());
        }
        let chain = self.chain(agent);
        let found = chain[..chain.len() - 1]
            .iter()
            .rev()
            .find_map(|id| self.agents.get(id).and_then(|layer| layer.tools.get(name)))
            .or_else(|| self.global.tools.get(name))
            .map(|(_, def)| def.clone())?;
        self.admitted(agent, name).then_some(found)
    }

    /// Every tool visible to `agent`, sorted by name.
    pub fn visible(&self, agent: Option<&AgentId>) -> Vec<ToolDefinition> {
        let Some(agent) = agent else {
            return self
                .global
                .tools
                .values()
                .map(|(_, def)| def.clone())
                .collect();
        };
        let mut visible: BTreeMap<&str, &ToolDefinition> = self
            .inherited(agent)
            .into_iter()
            .filter(|(name, _)| self.admitted(agent, name))
            .collect();
        if let Some(layer) = self.agents.get(agent) {
            visible.extend(
                layer
                    .tools
                    .iter()
                    .map(|(name, (_, def))| (name.as_str(), def)),
            );
        }
        visible.into_values().cloned().collect()
    }

    /// The mode in force for `agent`: nearest declaration on the chain, else the default.
    pub fn mode(&self, agent: Option<&AgentId>) -> Mode {
        agent
            .and_then(|agent| {
                self.chain(agent).iter().rev().find_map(|id| {
                    self.agents
                        .get(id)
                        .and_then(|layer| layer.mode.map(|(_, mode)| mode))
                })
            })
            .unwrap_or(self.default_mode)
    }
}

/// A generation counter that wakes its receivers on every registry write.
#[derive(Debug)]
pub struct Changes(pub(super) tokio::sync::watch::Sender<u64>);

impl Default for Changes {
    fn default() -> Self {
        Changes(tokio::sync::watch::Sender::new(0))
    }
}

impl Changes {
    /// A receiver woken after each later write.
    pub fn subscribe(&self) -> tokio::sync::watch::Receiver<u64> {
        self.0.subscribe()
    }

    /// The current generation: it differs after any write.
    pub fn generation(&self) -> u64 {
        *self.0.borrow()
    }
}

pub fn read(lock: &RwLock<State>) -> RwLockReadGuard<'_, State> {
    lock.read()
}

/// Takes the write lock and bumps the change generation.
pub fn write(lock: &RwLock<State>) -> RwLockWriteGuard<'_, State> {
    let state = lock.write();
    // Receivers read the state through the lock, so they see this write once it is released.
    state
        .changes
        .0
        .send_modify(|generation| *generation = generation.wrapping_add(1));
    state
}
