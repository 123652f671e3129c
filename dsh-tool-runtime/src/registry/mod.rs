//! The registry: registration of tools, hooks and guards, and the entry point of every call. Where
//! a registration lands and what a scope sees: one global [`Layer`] plus one per agent scope
//! ([`AgentScope`]). A scope sees global tools, then its ancestors' tools (nearer shadowing
//! farther), filtered by every restriction ([`Filter`]) on its chain, then its own tools, which
//! shadow inherited names and are exempt from restrictions.

mod agent_scope;
mod error;
mod filter;
mod handle;
mod layers;
mod mode;
mod schemas;
mod state;

use std::collections::BTreeSet;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::RwLock;

use tokio::sync::broadcast;

use crate::agent_id::AgentId;
use crate::definition::ToolDefinition;
use crate::events::{EventSender, EventSource, Tap, ToolEvent};
use crate::hooks::{
    ApprovalOutcome, ApprovalRequest, DispatchContext, ExecNext, Guard, PostDecision, PostNext,
    PreDecision, PreNext, ResultObserver, ToolCallView, into_approver, into_execute_wrapper,
    into_post_execute, into_pre_execute,
};
use crate::result::ToolResult;

pub use agent_scope::AgentScope;
pub use error::RegisterError;
pub use filter::Filter;
pub use handle::Handle;
pub use layers::Layer;
pub use mode::Mode;
pub use schemas::{DialectSchema, ToolSchema};
pub use state::{State, read, write};

/// The name of the code-mode transport tool, reserved in every scope.
pub const RUN_CODE: &str = "run_code";

#[derive(Debug)]
pub struct Inner {
    pub state: RwLock<State>,
    next_id: AtomicU64,
    pub events: EventSender,
    /// Whether call spans carry arguments and results (`set_span_content`).
    pub span_content: std::sync::atomic::AtomicBool,
}

/// What a scope in a non-native mode shows a model (its tools and the system text's sections,
/// in order), as code mode computes it; `Err` carries code mode's refusal. Code mode sets it in
/// the registry's [`slot`](Registry::slot) when a code runtime is set; the provider layer reads
/// it.
pub type ModelViewFn = dyn Fn(&Registry, Option<&AgentId>) -> Result<(Vec<ToolSchema>, Vec<String>), String>
    + Send
    + Sync;

/// The registry's [`ModelViewFn`], if code mode set one.
#[derive(Default)]
pub struct ModelViews(RwLock<Option<Arc<ModelViewFn>>>);

impl std::fmt::Debug for ModelViews {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The view is a closure.
        f.debug_tuple("ModelViews")
            .field(&self.0.read().is_some())
            .finish()
    }
}

impl ModelViews {
    /// The view code mode set, if any.
    pub fn get(&self) -> Option<Arc<ModelViewFn>> {
        self.0.read().clone()
    }

    /// Sets the view (once per registry is enough; a later one replaces it).
    pub fn set(&self, view: Arc<ModelViewFn>) {
        *self.0.write() = Some(view);
    }
}

/// The names of the live MCP servers bridged into a registry (unique per registry), kept in
/// its [`slot`](Registry::slot): a pre-execute `Ask` names the server a tool comes from.
#[derive(Debug, Default)]
pub struct McpServers(pub parking_lot::Mutex<std::collections::HashSet<String>>);

/// The tool registry: layers of tools, hooks and guards, and the pipeline that runs calls.
///
/// Cheap to clone (one `Arc`); every clone is the same registry.
#[derive(Clone)]
pub struct Registry {
    pub inner: Arc<Inner>,
}

impl Default for Registry {
    fn default() -> Self {
        Registry::new()
    }
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registry").finish_non_exhaustive()
    }
}

impl Registry {
    /// An empty registry in [`Mode::Native`].
    pub fn new() -> Self {
        let events = EventSender::new(1024);
        Registry {
            inner: Arc::new(Inner {
                state: RwLock::new(State::default()),
                next_id: AtomicU64::new(1),
                events,
                span_content: std::sync::atomic::AtomicBool::new(false),
            }),
        }
    }

    /// The registry's value of type `T`, made with `T::default()` on first use: where a
    /// feature (MCP servers, durable runs' settings) keeps its state, so the registry has no
    /// field of its own for it.
    pub fn slot<T: Default + Send + Sync + 'static>(&self) -> Arc<T> {
        if let Some(slot) = read(&self.inner.state).extensions.get::<Arc<T>>() {
            return Arc::clone(slot);
        }
        // Made without bumping the change generation: a slot's first use changes nothing the
        // registry serves.
        Arc::clone(
            self.inner
                .state
                .write()
                .extensions
                .get_or_default::<Arc<T>>(),
        )
    }

    pub fn next_id(&self) -> u64 {
        self.inner.next_id.fetch_add(1, Ordering::Relaxed)
    }

    pub fn handle(&self, agent: Option<AgentId>, id: u64) -> Handle {
        Handle {
            registry: Arc::downgrade(&self.inner),
            agent,
            id,
        }
    }

    /// Registers a tool in the global layer: a [`ToolDefinition`], or anything that is a tool
    /// (the `<Name>Tool` struct `#[tool]` generates).
    ///
    /// # Errors
    /// [`RegisterError::Reserved`] for `run_code`, [`RegisterError::DuplicateGlobal`],
    /// [`RegisterError::InvalidTimeout`] for a 0 ms timeout.
    pub fn register(&self, definition: impl Into<ToolDefinition>) -> Result<Handle, RegisterError> {
        self.register_in(None, definition.into())
    }

    /// Registers several tools in the global layer, all or nothing: when one of them cannot be
    /// registered (or two share a name), none is and the first error is returned.
    ///
    /// # Errors
    /// As [`Registry::register`].
    pub fn register_all(
        &self,
        definitions: impl IntoIterator<Item = ToolDefinition>,
    ) -> Result<Vec<Handle>, RegisterError> {
        self.register_batch(None, definitions.into_iter().collect())
    }

    pub fn register_in(
        &self,
        agent: Option<&AgentId>,
        definition: ToolDefinition,
    ) -> Result<Handle, RegisterError> {
        let mut handles = self.register_batch(agent, vec![definition])?;
        Ok(handles.remove(0))
    }

    /// The registration checks in DSH's order (timeout, reserved name, duplicates) for every
    /// definition, then one insertion of all of them under one lock.
    fn register_batch(
        &self,
        agent: Option<&AgentId>,
        definitions: Vec<ToolDefinition>,
    ) -> Result<Vec<Handle>, RegisterError> {
        for definition in &definitions {
            definition_error(definition)?;
        }
        let mut state = write(&self.inner.state);
        let layer = match agent {
            None => &mut state.global,
            Some(agent) => state.agents.entry(agent.clone()).or_default(),
        };
        let mut batch = std::collections::HashSet::new();
        for definition in &definitions {
            let name = definition.name();
            if layer.tools.contains_key(name) || !batch.insert(name) {
                return Err(match agent {
                    None => RegisterError::DuplicateGlobal(name.to_owned()),
                    Some(_) => RegisterError::DuplicateScoped(name.to_owned()),
                });
            }
        }
        let mut ids = Vec::with_capacity(definitions.len());
        for definition in definitions {
            let id = self.next_id();
            ids.push(id);
            layer
                .tools
                .insert(definition.name().to_owned(), (id, definition));
        }
        drop(state);
        Ok(ids
            .into_iter()
            .map(|id| self.handle(agent.cloned(), id))
            .collect())
    }

    /// Replaces the tools registered under `old` with `definitions` in one write, so a reader
    /// sees the old set or the new one, never part of each (an MCP server's re-sync). A
    /// definition that cannot be registered is skipped and comes back with its error; the
    /// others register.
    pub fn replace_tools(
        &self,
        agent: Option<&AgentId>,
        old: &[Handle],
        definitions: Vec<ToolDefinition>,
    ) -> Replaced {
        let mut state = write(&self.inner.state);
        let layer = match agent {
            None => &mut state.global,
            Some(agent) => state.agents.entry(agent.clone()).or_default(),
        };
        for handle in old {
            layer.remove(handle.id);
        }
        let (mut ids, mut refused) = (Vec::new(), Vec::new());
        for definition in definitions {
            let name = definition.name().to_owned();
            let checked = definition_error(&definition).and_then(|()| {
                if layer.tools.contains_key(&name) {
                    Err(match agent {
                        None => RegisterError::DuplicateGlobal(name.clone()),
                        Some(_) => RegisterError::DuplicateScoped(name.clone()),
                    })
                } else {
                    Ok(())
                }
            });
            match checked {
                Ok(()) => {
                    let id = self.next_id();
                    layer.tools.insert(name.clone(), (id, definition));
                    ids.push((name, id));
                }
                Err(error) => refused.push((name, error)),
            }
        }
        drop(state);
        let registered = ids
            .into_iter()
            .map(|(name, id)| (name, self.handle(agent.cloned(), id)))
            .collect();
        Replaced {
            registered,
            refused,
        }
    }

    pub fn add<T>(
        &self,
        agent: Option<&AgentId>,
        pick: impl FnOnce(&mut Layer) -> &mut Vec<(u64, T)>,
        item: T,
    ) -> Handle {
        let id = self.next_id();
        let mut state = write(&self.inner.state);
        let layer = match agent {
            None => &mut state.global,
            Some(agent) => state.agents.entry(agent.clone()).or_default(),
        };
        pick(layer).push((id, item));
        drop(state);
        self.handle(agent.cloned(), id)
    }

    /// The definition `name` resolves to in `scope` (`None` = global), if visible.
    pub fn get(&self, name: &str, scope: Option<&AgentId>) -> Option<ToolDefinition> {
        read(&self.inner.state).resolve(name, scope)
    }

    /// Every tool visible to `scope`, sorted by name.
    pub fn tools(&self, scope: Option<&AgentId>) -> Vec<ToolDefinition> {
        read(&self.inner.state).visible(scope)
    }

    /// Adds a global guard: `guard(view)` returning `Some(reason)` denies the call. Guards run
    /// after an `Allow`, global ones first, then the scope chain from the farthest ancestor; a
    /// denial is final (no hook can override it). A panic fails the call.
    pub fn guard(
        &self,
        guard: impl Fn(&ToolCallView) -> Option<String> + Send + Sync + 'static,
    ) -> Handle {
        self.add(None, |layer| &mut layer.guards, Arc::new(guard) as Guard)
    }

    /// Adds a global pre-execute hook (sees every call): `hook(view, next)` returns the decision,
    /// awaiting `next.run()` first when it wants the downstream hooks' one. Registered first =
    /// outermost.
    pub fn on_pre_execute<F, Fut>(&self, hook: F) -> Handle
    where
        F: Fn(Arc<ToolCallView>, PreNext) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = PreDecision> + Send + 'static,
    {
        self.add(None, |layer| &mut layer.pre, into_pre_execute(hook))
    }

    /// Adds a global execute wrapper: `wrapper(context, next)` dispatches with `next.run()` (or
    /// `next.run_with_signal(..)`), or returns its own result to short-circuit.
    pub fn on_execute<F, Fut>(&self, wrapper: F) -> Handle
    where
        F: Fn(DispatchContext, ExecNext) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = ToolResult> + Send + 'static,
    {
        self.add(
            None,
            |layer| &mut layer.wrappers,
            into_execute_wrapper(wrapper),
        )
    }

    /// Adds a global post-execute hook: `hook(view, result, next)` returns the decision, awaiting
    /// `next.run()` first when it wants the downstream hooks' one.
    pub fn on_post_execute<F, Fut>(&self, hook: F) -> Handle
    where
        F: Fn(Arc<ToolCallView>, Arc<ToolResult>, PostNext) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = PostDecision> + Send + 'static,
    {
        self.add(None, |layer| &mut layer.post, into_post_execute(hook))
    }

    /// Adds a global result observer: sees every final result. A panic is contained and logged.
    pub fn on_result(
        &self,
        observer: impl Fn(&ToolCallView, &ToolResult) + Send + Sync + 'static,
    ) -> Handle {
        self.add(
            None,
            |layer| &mut layer.observers,
            Arc::new(observer) as ResultObserver,
        )
    }

    /// Sets the approver that answers `Ask` decisions, e.g. by prompting the user (replacing any
    /// earlier one). It should answer [`ApprovalOutcome::Cancelled`] once the request's signal
    /// fires; a panic denies the call.
    pub fn set_approver<F, Fut>(&self, approver: F)
    where
        F: Fn(ApprovalRequest) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = ApprovalOutcome> + Send + 'static,
    {
        write(&self.inner.state).approver = Some(into_approver(approver));
    }

    /// Whether each call's span carries its arguments (`gen_ai.tool.call.arguments`) and its
    /// result (`gen_ai.tool.call.result`) as JSON text; off by default, as the GenAI conventions
    /// make them opt-in: they can hold secrets, and whoever reads the traces reads them too.
    /// See [`telemetry`](crate::telemetry).
    pub fn set_span_content(&self, record: bool) {
        self.inner.span_content.store(record, Ordering::Relaxed);
    }

    pub fn span_content(&self) -> bool {
        self.inner.span_content.load(Ordering::Relaxed)
    }

    /// Sets the default presentation mode for scopes that declare none.
    pub fn set_mode(&self, mode: Mode) {
        write(&self.inner.state).default_mode = mode;
    }

    /// The mode in force for `scope`.
    pub fn mode(&self, scope: Option<&AgentId>) -> Mode {
        read(&self.inner.state).mode(scope)
    }

    /// Subscribes to [`ToolEvent`]s. A slow subscriber that falls more than 1,024 events behind
    /// misses the oldest (tokio broadcast semantics).
    pub fn subscribe(&self) -> broadcast::Receiver<ToolEvent> {
        self.inner.events.subscribe()
    }

    /// A queue of every event from now on, lossless up to 16,384 waiting events:
    /// what an [`EventLog`](crate::events::EventLog) writes.
    pub fn tap_events(&self) -> Tap {
        self.inner.events.tap()
    }

    /// A scope for `agent` (created on first use, no parent).
    pub fn agent(&self, id: impl AsRef<str>) -> AgentScope {
        AgentScope::new(self.clone(), AgentId::new(id))
    }

    /// A scope for `agent` whose parent is `parent`: it inherits the parent's tools, restrictions,
    /// guards, hooks and mode.
    pub fn agent_with_parent(&self, id: impl AsRef<str>, parent: &AgentScope) -> AgentScope {
        let id = AgentId::new(id);
        let mut state = write(&self.inner.state);
        // Refuse to build a cycle: a parent whose chain contains the child is ignored.
        if !state.chain(parent.id()).contains(&id) {
            state.parents.insert(id.clone(), parent.id().clone());
        }
        drop(state);
        AgentScope::new(self.clone(), id)
    }

    /// The names `agent` may restrict: inherited ones (global and ancestors'), sorted.
    pub fn restrictable(&self, agent: &AgentId) -> BTreeSet<String> {
        read(&self.inner.state)
            .inherited(agent)
            .keys()
            .map(|name| (*name).to_owned())
            .collect()
    }

    /// Sends the event `event` builds to the event subscribers, building it only when there is
    /// one.
    pub fn publish(&self, event: impl FnOnce() -> ToolEvent) {
        self.inner.events.publish(event);
    }
}

/// What [`Registry::replace_tools`] did: the tools registered (name, handle) and the ones
/// refused (name, why).
#[derive(Debug)]
pub struct Replaced {
    pub registered: Vec<(String, Handle)>,
    pub refused: Vec<(String, RegisterError)>,
}

/// Why `definition` cannot be registered anywhere: a 0 ms timeout or the reserved name.
fn definition_error(definition: &ToolDefinition) -> Result<(), RegisterError> {
    if definition.timeout_ms() == Some(0) {
        return Err(RegisterError::InvalidTimeout(definition.name().to_owned()));
    }
    if definition.name() == RUN_CODE {
        return Err(RegisterError::Reserved);
    }
    Ok(())
}

impl EventSource for Registry {
    fn tap_events(&self) -> Tap {
        Registry::tap_events(self)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::Value;

    use super::*;
    use crate::call::ToolExec;

    fn tool(name: &str) -> ToolDefinition {
        ToolDefinition::builder(name)
            .handler(|_args: Value, _exec: ToolExec| async { Ok(Value::Null) })
            .build()
            .unwrap()
    }

    fn names(registry: &Registry) -> Vec<String> {
        registry
            .tools(None)
            .iter()
            .map(|def| def.name().to_owned())
            .collect()
    }

    /// Every registry write bumps the change generation once, so one bump means no reader could
    /// have seen a state between the old tools and the new ones.
    #[test]
    fn replacing_tools_is_one_write_and_skips_only_what_cannot_register() {
        let registry = Registry::new();
        let old = registry.register_all(["a", "b"].map(tool)).unwrap();
        let other = registry.register(tool("c")).unwrap();
        let before = read(&registry.inner.state).changes.generation();
        let Replaced {
            registered,
            refused,
        } = registry.replace_tools(
            None,
            &old,
            vec![tool("b"), tool("c"), tool(RUN_CODE), tool("d")],
        );
        assert_eq!(read(&registry.inner.state).changes.generation(), before + 1);
        let registered: Vec<&str> = registered.iter().map(|(name, _)| name.as_str()).collect();
        assert_eq!(registered, ["b", "d"]);
        assert!(
            matches!(
                refused.as_slice(),
                [(c, RegisterError::DuplicateGlobal(_)), (r, RegisterError::Reserved)]
                    if c == "c" && r == RUN_CODE
            ),
            "{refused:?}"
        );
        assert_eq!(names(&registry), ["b", "c", "d"]);
        assert!(!old[0].unregister(), "the replaced registrations are gone");
        assert!(other.unregister(), "a registration outside the set stays");
    }
}
