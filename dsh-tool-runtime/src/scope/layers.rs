//! The layers of registrations (one global, one per agent) and how a call's view is resolved
//! from them.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use super::{AgentId, Filter, Mode};
use crate::definition::ToolDefinition;
use crate::guards::Guard;
use crate::hooks::{Approver, ExecuteWrapper, PostExecuteHook, PreExecuteHook, ResultObserver};
use crate::registry::{Changes, RUN_CODE};

#[derive(Default)]
pub(crate) struct Layer {
    pub(crate) tools: BTreeMap<String, (u64, ToolDefinition)>,
    pub(crate) restrictions: Vec<(u64, Filter)>,
    pub(crate) guards: Vec<(u64, Guard)>,
    pub(crate) pre: Vec<(u64, PreExecuteHook)>,
    pub(crate) wrappers: Vec<(u64, ExecuteWrapper)>,
    pub(crate) post: Vec<(u64, PostExecuteHook)>,
    pub(crate) observers: Vec<(u64, ResultObserver)>,
    pub(crate) mode: Option<(u64, Mode)>,
}

impl Layer {
    pub(crate) fn remove(&mut self, id: u64) -> bool {
        let before = self.len();
        self.tools.retain(|_, (entry, _)| *entry != id);
        self.restrictions.retain(|(entry, _)| *entry != id);
        self.guards.retain(|(entry, _)| *entry != id);
        self.pre.retain(|(entry, _)| *entry != id);
        self.wrappers.retain(|(entry, _)| *entry != id);
        self.post.retain(|(entry, _)| *entry != id);
        self.observers.retain(|(entry, _)| *entry != id);
        if self.mode.is_some_and(|(entry, _)| entry == id) {
            self.mode = None;
        }
        self.len() != before
    }

    fn len(&self) -> usize {
        self.tools.len()
            + self.restrictions.len()
            + self.guards.len()
            + self.pre.len()
            + self.wrappers.len()
            + self.post.len()
            + self.observers.len()
            + usize::from(self.mode.is_some())
    }
}

#[derive(Default)]
pub(crate) struct State {
    pub(crate) global: Layer,
    pub(crate) agents: HashMap<AgentId, Layer>,
    pub(crate) parents: HashMap<AgentId, AgentId>,
    pub(crate) default_mode: Mode,
    pub(crate) approver: Option<Approver>,
    /// The mounted code runtime and the `run_code` definition bound to it.
    #[cfg(feature = "code-mode")]
    pub(crate) code_runtime: Option<Arc<dyn crate::code_runtime::CodeRuntime>>,
    #[cfg(feature = "code-mode")]
    pub(crate) run_code: Option<ToolDefinition>,
    /// Bumped on every write, so watchers (the MCP server's `list_changed`) learn of changes.
    pub(crate) changes: Changes,
    /// SDK presentation settings (progressive disclosure).
    #[cfg(feature = "code-mode")]
    pub(crate) disclosure: crate::code_mode::disclosure::Settings,
}

impl State {
    /// The agent's chain, farthest ancestor first, the agent itself last.
    pub(crate) fn chain(&self, agent: &AgentId) -> Vec<AgentId> {
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
    pub(crate) fn layers<'a>(&'a self, agent: Option<&AgentId>) -> Vec<&'a Layer> {
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
    pub(crate) fn inherited(&self, agent: &AgentId) -> BTreeMap<&str, &ToolDefinition> {
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
    /// layers: it resolves in non-native scopes once a code runtime is mounted.
    pub(crate) fn resolve(&self, name: &str, agent: Option<&AgentId>) -> Option<ToolDefinition> {
        if name == RUN_CODE {
            #[cfg(feature = "code-mode")]
            if self.mode(agent) != Mode::Native {
                return self.run_code.clone();
            }
            return None;
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
    pub(crate) fn visible(&self, agent: Option<&AgentId>) -> Vec<ToolDefinition> {
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
    pub(crate) fn mode(&self, agent: Option<&AgentId>) -> Mode {
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
