//! An agent's scope: the handle registrations for one agent go through.

use std::future::Future;
use std::sync::Arc;

use super::{AgentId, Filter, Mode};
use crate::definition::ToolDefinition;
use crate::hooks::{
    DispatchContext, ExecNext, Guard, PostDecision, PostNext, PreDecision, PreNext, ResultObserver,
    ToolCallView, into_execute_wrapper, into_post_execute, into_pre_execute,
};
use crate::registry::{Handle, RUN_CODE, RegisterError, Registry, ToolSchema, write};
use crate::result::ToolResult;

/// An agent's scope: registrations made through it apply to this agent and its descendants.
#[derive(Clone, Debug)]
pub struct AgentScope {
    registry: Registry,
    id: AgentId,
}

impl AgentScope {
    pub fn new(registry: Registry, id: AgentId) -> Self {
        AgentScope { registry, id }
    }

    /// The agent id.
    pub fn id(&self) -> &AgentId {
        &self.id
    }

    /// The registry.
    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    /// Registers a tool only this agent (and its descendants) see; it shadows inherited tools of
    /// the same name and is exempt from restrictions.
    ///
    /// # Errors
    /// As [`Registry::register`], with [`RegisterError::DuplicateScoped`] for duplicates.
    pub fn register(&self, definition: ToolDefinition) -> Result<Handle, RegisterError> {
        self.registry.register_in(Some(&self.id), definition)
    }

    /// Masks inherited tools. Masks on the chain intersect.
    ///
    /// # Errors
    /// [`RegisterError::EmptyFilter`], [`RegisterError::RestrictRunCode`],
    /// [`RegisterError::UnknownInFilter`] (naming an unknown or an own tool).
    pub fn restrict(&self, filter: Filter) -> Result<Handle, RegisterError> {
        let names = filter.names();
        if names.is_empty() {
            return Err(RegisterError::EmptyFilter);
        }
        if names.contains(RUN_CODE) {
            return Err(RegisterError::RestrictRunCode);
        }
        let known = self.registry.restrictable(&self.id);
        let unknown: Vec<String> = names
            .iter()
            .filter(|name| !known.contains(*name))
            .map(|name| format!("\"{name}\""))
            .collect();
        if !unknown.is_empty() {
            let known = if known.is_empty() {
                "(none)".to_owned()
            } else {
                known.into_iter().collect::<Vec<_>>().join(", ")
            };
            return Err(RegisterError::UnknownInFilter {
                unknown: unknown.join(", "),
                known,
            });
        }
        Ok(self
            .registry
            .add(Some(&self.id), |layer| &mut layer.restrictions, filter))
    }

    /// Declares how this scope (and descendants that declare nothing) presents tools.
    ///
    /// # Errors
    /// [`RegisterError::ModeConflict`] when this scope already declared a mode.
    pub fn present_as(&self, mode: Mode) -> Result<Handle, RegisterError> {
        let id = self.registry.next_id();
        let mut state = write(&self.registry.inner.state);
        let layer = state.agents.entry(self.id.clone()).or_default();
        if let Some((_, old)) = layer.mode {
            return Err(RegisterError::ModeConflict { new: mode, old });
        }
        layer.mode = Some((id, mode));
        drop(state);
        Ok(self.registry.handle(Some(self.id.clone()), id))
    }

    /// Adds a guard for this agent's (and descendants') calls, as [`Registry::guard`].
    pub fn guard(
        &self,
        guard: impl Fn(&ToolCallView) -> Option<String> + Send + Sync + 'static,
    ) -> Handle {
        self.registry.add(
            Some(&self.id),
            |layer| &mut layer.guards,
            Arc::new(guard) as Guard,
        )
    }

    /// Adds a pre-execute hook for this agent's (and descendants') calls, as
    /// [`Registry::on_pre_execute`].
    pub fn on_pre_execute<F, Fut>(&self, hook: F) -> Handle
    where
        F: Fn(Arc<ToolCallView>, PreNext) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = PreDecision> + Send + 'static,
    {
        self.registry.add(
            Some(&self.id),
            |layer| &mut layer.pre,
            into_pre_execute(hook),
        )
    }

    /// Adds an execute wrapper for this agent's (and descendants') calls, as
    /// [`Registry::on_execute`].
    pub fn on_execute<F, Fut>(&self, wrapper: F) -> Handle
    where
        F: Fn(DispatchContext, ExecNext) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = ToolResult> + Send + 'static,
    {
        self.registry.add(
            Some(&self.id),
            |layer| &mut layer.wrappers,
            into_execute_wrapper(wrapper),
        )
    }

    /// Adds a post-execute hook for this agent's (and descendants') calls, as
    /// [`Registry::on_post_execute`].
    pub fn on_post_execute<F, Fut>(&self, hook: F) -> Handle
    where
        F: Fn(Arc<ToolCallView>, Arc<ToolResult>, PostNext) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = PostDecision> + Send + 'static,
    {
        self.registry.add(
            Some(&self.id),
            |layer| &mut layer.post,
            into_post_execute(hook),
        )
    }

    /// Adds a result observer for this agent's (and descendants') calls, as
    /// [`Registry::on_result`].
    pub fn on_result(
        &self,
        observer: impl Fn(&ToolCallView, &ToolResult) + Send + Sync + 'static,
    ) -> Handle {
        self.registry.add(
            Some(&self.id),
            |layer| &mut layer.observers,
            Arc::new(observer) as ResultObserver,
        )
    }

    /// The mode in force for this scope.
    pub fn mode(&self) -> Mode {
        self.registry.mode(Some(&self.id))
    }

    /// `{name, description, parameters}` of every tool this agent sees, sorted by name.
    pub fn schemas(&self) -> Vec<ToolSchema> {
        self.registry.schemas(Some(&self.id))
    }

    /// The definition `name` resolves to for this agent, if visible.
    pub fn get(&self, name: &str) -> Option<ToolDefinition> {
        self.registry.get(name, Some(&self.id))
    }
}
