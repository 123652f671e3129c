//! The registry (SPEC §2, §5): tool layers, registration, visibility, schemas.
//!
//! One global layer plus one layer per agent scope. A scope sees global tools, then its ancestors'
//! tools (nearer shadowing farther), filtered by every restriction on its chain, then its own tools,
//! which shadow inherited names and are exempt from restrictions (REFERENCE §2.4).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock, Weak};

use serde::Serialize;
use serde_json::Value;
use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;

use crate::definition::ToolDefinition;
use crate::dialect::{Dialect, DialectError};
use crate::events::ToolEvent;
use crate::pipeline::{
    Approver, ExecuteWrapper, Guard, PostExecuteHook, PreExecuteHook, ResultObserver,
};
use crate::scope::AgentId;

/// The name of the code-mode transport tool, reserved in every scope.
pub const RUN_CODE: &str = "run_code";

/// How a scope presents tools to the model (SPEC §8).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// Every visible tool as a native tool schema.
    #[default]
    Native,
    /// Only `run_code`; other tools are reached from inside programs.
    Code,
    /// Native schemas plus `run_code`.
    Both,
}

impl std::fmt::Display for Mode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Mode::Native => "native",
            Mode::Code => "code",
            Mode::Both => "both",
        })
    }
}

/// A visibility mask for an agent scope (`restrict`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Filter {
    /// Only these inherited tools stay visible; tools registered later are excluded.
    Allow(BTreeSet<String>),
    /// These inherited tools are hidden; tools registered later stay visible.
    Deny(BTreeSet<String>),
}

impl Filter {
    /// An allow-list.
    pub fn allow<I: IntoIterator<Item = S>, S: Into<String>>(names: I) -> Self {
        Filter::Allow(names.into_iter().map(Into::into).collect())
    }

    /// A deny-list.
    pub fn deny<I: IntoIterator<Item = S>, S: Into<String>>(names: I) -> Self {
        Filter::Deny(names.into_iter().map(Into::into).collect())
    }

    fn names(&self) -> &BTreeSet<String> {
        match self {
            Filter::Allow(names) | Filter::Deny(names) => names,
        }
    }

    fn admits(&self, name: &str) -> bool {
        match self {
            Filter::Allow(names) => names.contains(name),
            Filter::Deny(names) => !names.contains(name),
        }
    }
}

/// Why a registration, restriction or presentation change was refused. Messages follow
/// REFERENCE §1.3 and §2.4.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RegisterError {
    /// `run_code` is reserved for the code-mode transport.
    #[error(
        "tool name \"run_code\" is reserved for the Code Mode presentation transport and cannot be registered or shadowed"
    )]
    Reserved,
    /// The name is taken in the global layer.
    #[error(
        "tool \"{0}\" is already registered (for a per-agent variant, register it in that agent's scope instead)"
    )]
    DuplicateGlobal(String),
    /// The name is taken in this agent's layer.
    #[error("tool \"{0}\" is already registered in this scope")]
    DuplicateScoped(String),
    /// A declared timeout of 0 ms.
    #[error("tool \"{0}\" timeout_ms must be a positive finite number")]
    InvalidTimeout(String),
    /// An empty filter.
    #[error("restrict() with an empty filter is a no-op; name at least one tool")]
    EmptyFilter,
    /// A filter naming `run_code`.
    #[error("restrict() cannot name \"run_code\": it is outside tool filtering")]
    RestrictRunCode,
    /// A filter naming tools the scope does not inherit.
    #[error("restrict() names unknown global tool(s) {unknown}; known global tools: {known}")]
    UnknownInFilter {
        /// The offending names, quoted and comma-separated.
        unknown: String,
        /// The restrictable names, sorted, comma-separated, or `(none)`.
        known: String,
    },
    /// A second `present_as` in one scope.
    #[error(
        "present_as(\"{new}\") conflicts with \"{old}\" already declared for this scope; remove the earlier declaration first"
    )]
    ModeConflict {
        /// The mode asked for.
        new: Mode,
        /// The mode already declared.
        old: Mode,
    },
}

/// What `schemas()` returns for one tool: only name, description and parameters ever reach the
/// model (REFERENCE §1.2).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ToolSchema {
    /// Tool name.
    pub name: String,
    /// Description.
    pub description: String,
    /// Parameters schema.
    pub parameters: Value,
}

/// One tool's schema in a [`Dialect`], from [`Registry::schemas_for`].
#[derive(Debug, Clone, PartialEq)]
pub struct DialectSchema {
    /// Tool name.
    pub name: String,
    /// Description.
    pub description: String,
    /// The parameters in the dialect's form, or why they cannot be expressed in it.
    pub parameters: Result<Value, DialectError>,
    /// The parameters as derived or given, for a fallback.
    pub original: Value,
}

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
    fn remove(&mut self, id: u64) -> bool {
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
    pub(crate) approver: Option<Arc<dyn Approver>>,
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

/// A generation counter that wakes its receivers on every registry write.
pub(crate) struct Changes(tokio::sync::watch::Sender<u64>);

impl Default for Changes {
    fn default() -> Self {
        Changes(tokio::sync::watch::Sender::new(0))
    }
}

impl Changes {
    /// A receiver woken after each later write.
    #[cfg_attr(not(feature = "mcp-server"), allow(dead_code))]
    pub(crate) fn subscribe(&self) -> tokio::sync::watch::Receiver<u64> {
        self.0.subscribe()
    }
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
    fn inherited(&self, agent: &AgentId) -> BTreeMap<&str, &ToolDefinition> {
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

pub(crate) struct Inner {
    pub(crate) state: RwLock<State>,
    next_id: AtomicU64,
    pub(crate) events: broadcast::Sender<ToolEvent>,
    /// Names of the live MCP servers bridged into this registry (unique per registry).
    #[cfg(feature = "mcp")]
    pub(crate) mcp_servers: std::sync::Mutex<std::collections::HashSet<String>>,
}

/// The tool registry: layers of tools, hooks and guards, and the pipeline that runs calls.
///
/// Cheap to clone (one `Arc`); every clone is the same registry.
#[derive(Clone)]
pub struct Registry {
    pub(crate) inner: Arc<Inner>,
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

/// A registration (tool, hook, guard, restriction or mode): [`Handle::unregister`] removes it.
/// Dropping the handle keeps the registration.
#[derive(Debug, Clone)]
pub struct Handle {
    registry: Weak<Inner>,
    agent: Option<AgentId>,
    id: u64,
}

/// The handle `register` returns.
pub type ToolHandle = Handle;

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

pub(crate) fn read(lock: &RwLock<State>) -> std::sync::RwLockReadGuard<'_, State> {
    lock.read()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

pub(crate) fn write(lock: &RwLock<State>) -> std::sync::RwLockWriteGuard<'_, State> {
    let state = lock
        .write()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    // Receivers read the state through the lock, so they see this write once it is released.
    state
        .changes
        .0
        .send_modify(|generation| *generation = generation.wrapping_add(1));
    state
}

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
        }
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

impl Registry {
    /// An empty registry in [`Mode::Native`].
    pub fn new() -> Self {
        let (events, _) = broadcast::channel(1024);
        Registry {
            inner: Arc::new(Inner {
                state: RwLock::new(State::default()),
                next_id: AtomicU64::new(1),
                events,
                #[cfg(feature = "mcp")]
                mcp_servers: Default::default(),
            }),
        }
    }

    fn next_id(&self) -> u64 {
        self.inner.next_id.fetch_add(1, Ordering::Relaxed)
    }

    fn handle(&self, agent: Option<AgentId>, id: u64) -> Handle {
        Handle {
            registry: Arc::downgrade(&self.inner),
            agent,
            id,
        }
    }

    /// Registers a tool in the global layer.
    ///
    /// # Errors
    /// [`RegisterError::Reserved`] for `run_code`, [`RegisterError::DuplicateGlobal`],
    /// [`RegisterError::InvalidTimeout`] for a 0 ms timeout.
    pub fn register(&self, definition: ToolDefinition) -> Result<Handle, RegisterError> {
        self.register_in(None, definition)
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

    pub(crate) fn register_in(
        &self,
        agent: Option<&AgentId>,
        definition: ToolDefinition,
    ) -> Result<Handle, RegisterError> {
        let mut handles = self.register_batch(agent, vec![definition])?;
        Ok(handles.remove(0))
    }

    /// REFERENCE §1.3's checks in order (timeout, reserved name, duplicates) for every definition,
    /// then one insertion of all of them under one lock.
    fn register_batch(
        &self,
        agent: Option<&AgentId>,
        definitions: Vec<ToolDefinition>,
    ) -> Result<Vec<Handle>, RegisterError> {
        for definition in &definitions {
            if definition.timeout_ms() == Some(0) {
                return Err(RegisterError::InvalidTimeout(definition.name().to_owned()));
            }
            if definition.name() == RUN_CODE {
                return Err(RegisterError::Reserved);
            }
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

    pub(crate) fn add<T>(
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

    /// `{name, description, parameters}` of every tool visible to `scope`, sorted by name (Rust
    /// `str` order), parameters in [`Dialect::Portable`] form (a schema Portable cannot handle is
    /// passed through as given rather than dropping the tool).
    pub fn schemas(&self, scope: Option<&AgentId>) -> Vec<ToolSchema> {
        self.schemas_for(scope, Dialect::Portable)
            .into_iter()
            .map(|schema| ToolSchema {
                name: schema.name,
                description: schema.description,
                parameters: schema.parameters.unwrap_or(schema.original),
            })
            .collect()
    }

    /// Every visible tool's parameters in `dialect`'s wire form, sorted by name. Errors are per
    /// tool: a tool whose schema cannot be expressed (e.g. a free-form map under
    /// [`Dialect::OpenAiStrict`]) carries its [`DialectError`] and its original schema, so the
    /// caller can send that one tool in another dialect (non-strict) without failing the others.
    pub fn schemas_for(&self, scope: Option<&AgentId>, dialect: Dialect) -> Vec<DialectSchema> {
        self.tools(scope)
            .into_iter()
            .map(|def| DialectSchema {
                name: def.name().to_owned(),
                description: def.description().to_owned(),
                parameters: dialect.transform(def.parameters()),
                original: def.parameters().clone(),
            })
            .collect()
    }

    /// Adds a global guard.
    pub fn guard(
        &self,
        guard: impl Fn(&crate::pipeline::ToolCallView) -> Option<String> + Send + Sync + 'static,
    ) -> Handle {
        self.add(None, |layer| &mut layer.guards, Arc::new(guard) as Guard)
    }

    /// Adds a global pre-execute hook (sees every call).
    pub fn on_pre_execute(&self, hook: PreExecuteHook) -> Handle {
        self.add(None, |layer| &mut layer.pre, hook)
    }

    /// Adds a global execute wrapper.
    pub fn on_execute(&self, wrapper: ExecuteWrapper) -> Handle {
        self.add(None, |layer| &mut layer.wrappers, wrapper)
    }

    /// Adds a global post-execute hook.
    pub fn on_post_execute(&self, hook: PostExecuteHook) -> Handle {
        self.add(None, |layer| &mut layer.post, hook)
    }

    /// Adds a global result observer.
    pub fn on_result(
        &self,
        observer: impl Fn(&crate::pipeline::ToolCallView, &crate::ToolResult) + Send + Sync + 'static,
    ) -> Handle {
        self.add(
            None,
            |layer| &mut layer.observers,
            Arc::new(observer) as ResultObserver,
        )
    }

    /// Sets the approver that answers `Ask` decisions (replacing any earlier one).
    pub fn set_approver(&self, approver: impl Approver) {
        write(&self.inner.state).approver = Some(Arc::new(approver));
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

    /// A scope for `agent` (created on first use, no parent).
    pub fn agent(&self, id: impl AsRef<str>) -> AgentScope {
        AgentScope {
            registry: self.clone(),
            id: AgentId::new(id),
        }
    }

    /// A scope for `agent` whose parent is `parent`: it inherits the parent's tools, restrictions,
    /// guards, hooks and mode.
    pub fn agent_with_parent(&self, id: impl AsRef<str>, parent: &AgentScope) -> AgentScope {
        let id = AgentId::new(id);
        let mut state = write(&self.inner.state);
        // Refuse to build a cycle: a parent whose chain contains the child is ignored.
        if !state.chain(&parent.id).contains(&id) {
            state.parents.insert(id.clone(), parent.id.clone());
        }
        drop(state);
        AgentScope {
            registry: self.clone(),
            id,
        }
    }

    /// The names `agent` may restrict: inherited ones (global and ancestors'), sorted.
    fn restrictable(&self, agent: &AgentId) -> BTreeSet<String> {
        read(&self.inner.state)
            .inherited(agent)
            .keys()
            .map(|name| (*name).to_owned())
            .collect()
    }
}

/// An agent's scope: registrations made through it apply to this agent and its descendants.
#[derive(Clone, Debug)]
pub struct AgentScope {
    registry: Registry,
    id: AgentId,
}

impl AgentScope {
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

    /// Adds a guard for this agent's (and descendants') calls.
    pub fn guard(
        &self,
        guard: impl Fn(&crate::pipeline::ToolCallView) -> Option<String> + Send + Sync + 'static,
    ) -> Handle {
        self.registry.add(
            Some(&self.id),
            |layer| &mut layer.guards,
            Arc::new(guard) as Guard,
        )
    }

    /// Adds a pre-execute hook for this agent's (and descendants') calls.
    pub fn on_pre_execute(&self, hook: PreExecuteHook) -> Handle {
        self.registry
            .add(Some(&self.id), |layer| &mut layer.pre, hook)
    }

    /// Adds an execute wrapper for this agent's (and descendants') calls.
    pub fn on_execute(&self, wrapper: ExecuteWrapper) -> Handle {
        self.registry
            .add(Some(&self.id), |layer| &mut layer.wrappers, wrapper)
    }

    /// Adds a post-execute hook for this agent's (and descendants') calls.
    pub fn on_post_execute(&self, hook: PostExecuteHook) -> Handle {
        self.registry
            .add(Some(&self.id), |layer| &mut layer.post, hook)
    }

    /// Adds a result observer for this agent's (and descendants') calls.
    pub fn on_result(
        &self,
        observer: impl Fn(&crate::pipeline::ToolCallView, &crate::ToolResult) + Send + Sync + 'static,
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
