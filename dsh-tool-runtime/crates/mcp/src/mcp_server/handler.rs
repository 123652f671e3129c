//! The rmcp `ServerHandler` over a registry scope: here a session's state and `tools/call`;
//! in `methods` the protocol's methods rmcp dispatches to; in `progress` a call's progress
//! forwarded to its client.

#![allow(deprecated)] // rmcp marks logging deprecated for the 2026 protocol; 2025-era clients use it

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use futures::future::BoxFuture;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ClientCapabilities,
    ContentBlock as McpContent, ProtocolVersion,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServiceExt};
use serde_json::Value;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::client::{LogFloor, McpClientPeer, ResponseStream, SessionLogLevel, log_level};
use super::durable;
use super::listing::Listing;
use super::results::{mcp_result, server_failure};
use super::rounds::{Asked, RoundCall, Rounds, Turn};
use super::tasks::{self, Tasks, task_outcome};
use super::{McpServeError, McpServeOptions};
use crate::call::{ClientChannel, ToolCall};
use crate::code_mode::CodeModeError;
use crate::durable::Principal;
use crate::registry::{Registry, read};
use crate::result::ToolResult;
use crate::scope::AgentId;
use crate::telemetry;

mod methods;
mod progress;

use progress::execute_with_progress;

/// Sends one list-changed notification; `false` once the client is gone.
type Notify = Box<dyn Fn() -> BoxFuture<'static, bool> + Send>;

/// One MCP session over a registry scope. Dropping it stops its `list_changed` watcher.
pub(crate) struct McpHandler {
    pub(super) registry: Registry,
    pub(super) scope: Option<AgentId>,
    options: Arc<McpServeOptions>,
    /// The server's tasks, shared by every session: a task outlives the session that started it.
    pub(super) tasks: Tasks,
    /// Shared by every session of one server, so call ids never repeat across sessions.
    calls: Arc<AtomicU64>,
    /// The level this session's client set with `logging/setLevel`.
    log_level: SessionLogLevel,
    /// Calls waiting for a 2026-07-28 client's answers, shared by every session of one server
    /// (a stateless client's retry may arrive on any).
    rounds: Arc<Rounds>,
    /// The scope's listing and the registry generation it was made at, shared by every
    /// session: rmcp asks for the `instructions` (`get_info`) and, at 2026-07-28, the called
    /// tool's schema (`get_tool`, for the `Mcp-Param-*` headers) on every request, and making
    /// the listing converts every tool's schema.
    listing: Arc<parking_lot::Mutex<Option<CachedListing>>>,
    /// Where `run_code` runs and its tasks are resolved, when on Restate.
    #[cfg(feature = "restate")]
    restate: Option<super::restate::Restate>,
    /// The issuers of continuations this server takes: its own name first, then its peers.
    issuers: Arc<Vec<String>>,
    /// The registry generation when this session last accepted a `subscriptions/listen`
    /// filter: rmcp acknowledges the stream before `listen` runs, and a change made in between
    /// (the client may change the list as soon as it reads the acknowledgement) is announced
    /// once the stream watches. The oldest pending one is kept: an extra notification is
    /// harmless, a missed one is not.
    listen_since: parking_lot::Mutex<Option<u64>>,
    stop: CancellationToken,
}

/// The scope's listing at one registry generation.
type CachedListing = (u64, Arc<Listing>);

/// A scope's listing, made again only after the registry changed: every request and every
/// `list_changed` watcher of a server reads the one copy.
struct Listings {
    registry: Registry,
    scope: Option<AgentId>,
    cached: Arc<parking_lot::Mutex<Option<CachedListing>>>,
}

impl Listings {
    /// The listing at the registry's current generation. It is made outside the lock, so a
    /// request never waits for another's; the generation is read first, so a listing made
    /// across a change is made again on the next read.
    fn get(&self) -> Result<Arc<Listing>, CodeModeError> {
        let generation = read(&self.registry.inner.state).changes.generation();
        if let Some((at, listing)) = &*self.cached.lock()
            && *at == generation
        {
            return Ok(Arc::clone(listing));
        }
        let listing = Arc::new(Listing::of(&self.registry, self.scope.as_ref())?);
        *self.cached.lock() = Some((generation, Arc::clone(&listing)));
        Ok(listing)
    }
}

impl Drop for McpHandler {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

impl McpHandler {
    /// The first session of a server.
    ///
    /// # Errors
    /// [`McpServeError::InvalidRestate`] when the Restate settings cannot be used.
    pub(crate) fn new(
        registry: Registry,
        scope: Option<AgentId>,
        options: McpServeOptions,
    ) -> Result<Self, McpServeError> {
        #[cfg(feature = "restate")]
        let restate = match &options.restate {
            Some(_) if options.journal.is_some() => {
                return Err(McpServeError::InvalidRestate(
                    "a journal and Restate both make run_code durable: choose one".to_owned(),
                ));
            }
            Some(urls) => Some(
                super::restate::Restate::new(urls.clone(), options.tasks.poll_interval)
                    .map_err(McpServeError::InvalidRestate)?,
            ),
            None => None,
        };
        let name = options
            .journal_name
            .clone()
            .or_else(super::rounds::random_handle)
            .ok_or_else(|| {
                McpServeError::Transport("no random bytes for the server's name".to_owned())
            })?;
        let issuers = std::iter::once(name)
            .chain(options.journal_peers.iter().cloned())
            .collect();
        Ok(McpHandler {
            registry,
            scope,
            issuers: Arc::new(issuers),
            tasks: Tasks::new(options.tasks.clone()),
            options: Arc::new(options),
            calls: Arc::new(AtomicU64::new(1)),
            rounds: Arc::default(),
            listing: Arc::default(),
            log_level: SessionLogLevel::default(),
            #[cfg(feature = "restate")]
            restate,
            listen_since: parking_lot::Mutex::default(),
            stop: CancellationToken::new(),
        })
    }

    /// Another session of the same server (streamable HTTP makes one per client).
    pub(crate) fn session(&self) -> Self {
        McpHandler {
            registry: self.registry.clone(),
            scope: self.scope.clone(),
            options: self.options.clone(),
            calls: self.calls.clone(),
            tasks: self.tasks.clone(),
            rounds: self.rounds.clone(),
            listing: self.listing.clone(),
            log_level: SessionLogLevel::default(),
            #[cfg(feature = "restate")]
            restate: self.restate.clone(),
            issuers: self.issuers.clone(),
            listen_since: parking_lot::Mutex::default(),
            stop: CancellationToken::new(),
        }
    }

    /// Who sends the request through `context`, and whether that is a person of their own: the
    /// subject of its OAuth access token (`true`: the HTTP gate put it there), else its MCP
    /// session (`Mcp-Session-Id`: one this server issued and still has, since the HTTP face
    /// answers 404 to a request naming any other), or — a request without a session (stdio, a
    /// 2026-07-28 stateless request) — the clients holding this server's credentials.
    fn principal(&self, context: &RequestContext<RoleServer>) -> (Principal, bool) {
        let parts = context.extensions.get::<::http::request::Parts>();
        if let Some(subject) = parts.and_then(|parts| parts.extensions.get::<Principal>()) {
            return (subject.clone(), true);
        }
        let session = parts
            .and_then(|parts| parts.headers.get("mcp-session-id"))
            .and_then(|value| value.to_str().ok());
        (Principal::mcp_session(session.unwrap_or("")), false)
    }

    /// Who answers a parked run through `context`, for this server: its
    /// [`principal`](Self::principal).
    fn answerer(&self, context: &RequestContext<RoleServer>) -> durable::Answerer<'_> {
        durable::Answerer {
            principal: self.principal(context).0,
            name: &self.issuers[0],
            issuers: &self.issuers,
        }
    }

    /// The server's tasks as the sender of the request through `context` sees them: its share,
    /// and under OAuth only its own.
    pub(super) fn tasks_of(&self, context: &RequestContext<RoleServer>) -> Tasks {
        let (principal, owns) = self.principal(context);
        self.tasks.of(principal, owns)
    }

    /// The owner a task started through `context` gets, when tasks have owners (an OAuth
    /// subject): a task id on Restate is tagged for it.
    #[cfg(feature = "restate")]
    fn task_owner(&self, context: &RequestContext<RoleServer>) -> Option<Principal> {
        let (principal, owns) = self.principal(context);
        owns.then_some(principal)
    }

    /// The Restate that resolves the task `id`, when it is an invocation of a server on
    /// Restate.
    #[cfg(feature = "restate")]
    fn restate_task(&self, id: &str) -> Option<&super::restate::Restate> {
        self.restate
            .as_ref()
            .filter(|_| super::restate::Restate::owns(id))
    }

    pub(crate) async fn serve_stdio(self) -> Result<(), McpServeError> {
        // The client is gone once stdin ends: the open `subscriptions/listen` streams stop then.
        let ended = self.stop.clone();
        let running = crate::traced::Traced::new(self, telemetry::PIPE)
            .serve(super::stdio::transport(ended))
            .await
            .map_err(|error| McpServeError::Handshake(error.to_string()))?;
        running
            .waiting()
            .await
            .map_err(|error| McpServeError::Transport(error.to_string()))?;
        Ok(())
    }

    /// The server `instructions` (the code-only rule in code mode).
    fn instructions(&self) -> Option<String> {
        self.listing().ok()?.instructions.clone()
    }

    /// Watches the registry until `stop` fires or `notify` fails, calling `notify` whenever the
    /// scope's listing changes, and once at the start when the registry changed since
    /// generation `since`.
    fn list_changes(
        &self,
        stop: CancellationToken,
        since: Option<u64>,
    ) -> impl FnOnce(Notify) -> BoxFuture<'static, ()> {
        let listings = self.listings();
        move |notify| {
            let state = read(&listings.registry.inner.state);
            let mut changes = state.changes.subscribe();
            let missed = since.is_some_and(|since| since != state.changes.generation());
            drop(state);
            let mut last = listings.get().ok();
            Box::pin(async move {
                if missed && !notify().await {
                    return;
                }
                loop {
                    tokio::select! {
                        _ = stop.cancelled() => return,
                        changed = changes.changed() => if changed.is_err() { return },
                    }
                    let now = listings.get().ok();
                    if now != last {
                        last = now;
                        if !notify().await {
                            return;
                        }
                    }
                }
            })
        }
    }

    /// The scope's listing, made again only after the registry changed.
    fn listing(&self) -> Result<Arc<Listing>, ErrorData> {
        self.listings()
            .get()
            .map_err(|error| ErrorData::internal_error(error.to_string(), None))
    }

    /// The server's cache of the scope's listing, for a task that outlives this session.
    fn listings(&self) -> Listings {
        Listings {
            registry: self.registry.clone(),
            scope: self.scope.clone(),
            cached: Arc::clone(&self.listing),
        }
    }

    fn answer(&self, name: &str, turn: Turn) -> Result<CallToolResponse, ErrorData> {
        match turn {
            Turn::Done(result) => self.finished(name, &result),
            Turn::Input(input) => Ok(input.into()),
        }
    }

    fn answer_parked(
        &self,
        name: &str,
        parked: durable::Parked,
    ) -> Result<CallToolResponse, ErrorData> {
        match parked {
            durable::Parked::Done(result) => self.finished(name, &result),
            durable::Parked::Input(input) => Ok(input.into()),
        }
    }

    /// A settled call's answer: its result, or the protocol error (`-32603`) when the tool
    /// reported a failure of the server (MCP's tools answer "server errors" as protocol
    /// errors, not as `isError` results).
    fn finished(&self, name: &str, result: &ToolResult) -> Result<CallToolResponse, ErrorData> {
        match server_failure(result, false) {
            Some(error) => Err(error),
            None => Ok(self.mcp_result(name, result).into()),
        }
    }

    fn mcp_result(&self, name: &str, result: &ToolResult) -> CallToolResult {
        mcp_result(&self.registry, self.scope.as_ref(), name, result)
    }

    /// Makes the running `call`, whose requests the client has answered, a task: the answer
    /// is the task; its later requests wait in the task (SEP-2663's rounds-then-task
    /// composition).
    fn escalate(&self, tasks: &Tasks, name: &str, call: RoundCall) -> CallToolResponse {
        let (result, asks, signal) = call.into_task();
        let registry = self.registry.clone();
        let scope = self.scope.clone();
        let name = name.to_owned();
        let started = tasks.spawn(signal, Some(asks), move |_| async move {
            let result = result.await.unwrap_or_else(|error| {
                ToolResult::failure(crate::result::ToolFailure::plain(format!(
                    "the call's task failed: {error}"
                )))
            });
            task_outcome(&registry, scope.as_ref(), &name, &result)
        });
        match started {
            Ok(task) => CallToolResponse::Task(task),
            Err(message) => CallToolResult::error(vec![McpContent::text(message)]).into(),
        }
    }

    /// `tools/call`, inside its span.
    async fn serve_call(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let name = request.name.to_string();
        // A 2026-07-28 client's retry of a call that waited for its answers.
        if let Some(state) = request.request_state.as_deref() {
            if let (true, Some(journal)) = (durable::is_continuation(state), &self.options.journal)
            {
                // A continuation answers the `run_code` call that parked; under another name the
                // retry is not the call the person was shown.
                if name != crate::registry::RUN_CODE {
                    return Err(ErrorData::invalid_params(
                        format!(
                            "the requestState continues a parked `{}` run; retry that call, \
                             not \"{name}\"",
                            crate::registry::RUN_CODE
                        ),
                        None,
                    ));
                }
                let responses = request.input_responses.unwrap_or_default();
                let client = ClientChannel::new(Arc::new(McpClientPeer {
                    peer: context.peer.clone(),
                    level: LogFloor::Request(context.meta.log_level().map(log_level)),
                    capabilities: context.client_capabilities(),
                    rounds: None,
                    missing: Arc::default(),
                    outbound: telemetry::Outbound::of(&context),
                    stream: context.extensions.get::<ResponseStream>().cloned(),
                }));
                let answerer = self.answerer(&context);
                let parked = durable::resume_modern(
                    &self.registry,
                    &journal.0,
                    &client,
                    &answerer,
                    state,
                    responses,
                )
                .await
                .map_err(|message| ErrorData::invalid_params(message, None))?;
                return self.answer_parked(&name, parked);
            }
            let arguments = Value::Object(request.arguments.unwrap_or_default());
            let retry = Asked::new(self.principal(&context).0, &name, &arguments);
            let call = self
                .rounds
                .resume(state, &retry, request.input_responses.unwrap_or_default())
                .map_err(|message| ErrorData::invalid_params(message, None))?;
            if call.ready_for_task() {
                return Ok(self.escalate(&self.tasks_of(&context), &name, call));
            }
            let missing = Arc::clone(&call.missing);
            let turn = self.rounds.drive(call, context.ct.clone()).await;
            if let Turn::Done(result) = &turn {
                missing_capability(result, &missing)?;
            }
            return self.answer(&name, turn);
        }
        // An unknown tool is a protocol error (MCP 2025-06-18 on, "Error Handling": unknown
        // tools are -32602), not a tool result.
        let Some(definition) = self.registry.get(&name, self.scope.as_ref()) else {
            return Err(ErrorData::invalid_params(
                format!("Unknown tool: {name}"),
                Some(serde_json::json!({ "name": name })),
            ));
        };
        let tasks_declared = context
            .client_capabilities()
            .is_some_and(|capabilities| capabilities.supports_tasks());
        if definition.requires_task() && !tasks_declared {
            return Err(missing_capability_error(
                ClientCapabilities::builder().enable_tasks().build(),
                "extension io.modelcontextprotocol/tasks",
            ));
        }
        let n = self.calls.fetch_add(1, Ordering::Relaxed);
        let arguments = Value::Object(request.arguments.unwrap_or_default());
        // A task's call outlives this request: it runs with a signal of its own
        // (`tasks/cancel`), and its requests for its client wait in the task.
        let task = tasks::runs_as_task(&self.registry, self.scope.as_ref(), &name, &context);
        #[cfg(feature = "restate")]
        if let Some(restate) = &self.restate
            && name == crate::registry::RUN_CODE
            && self.registry.get(&name, self.scope.as_ref()).is_some()
        {
            return Ok(if task {
                match restate
                    .start(&arguments, self.task_owner(&context).as_ref())
                    .await
                {
                    Ok(id) => super::restate::created(id, self.options.tasks.poll_interval).into(),
                    Err(message) => CallToolResult::error(vec![McpContent::text(format!(
                        "Error: run_code on Restate: {message}"
                    ))])
                    .into(),
                }
            } else {
                restate.call(&arguments, &context.ct).await.into()
            });
        }
        // 2026-07-28 forbids requests to the client during a call: they become rounds, or in
        // a task the task's `input_required` state.
        let modern = context
            .protocol_version()
            .is_some_and(|version| version >= ProtocolVersion::V_2026_07_28);
        let (rounds, asks) = if modern {
            let (sender, receiver) = mpsc::channel(16);
            (Some(sender), Some(receiver))
        } else {
            (None, None)
        };
        // What a round's retry must match: made only for calls that can have rounds.
        let asked = modern.then(|| Asked::new(self.principal(&context).0, &name, &arguments));
        let missing = Arc::default();
        let level = if modern {
            LogFloor::Request(context.meta.log_level().map(log_level))
        } else {
            LogFloor::Session(self.log_level.clone())
        };
        let client = ClientChannel::new(Arc::new(McpClientPeer {
            peer: context.peer.clone(),
            level,
            capabilities: context.client_capabilities(),
            rounds,
            missing: Arc::clone(&missing),
            outbound: telemetry::Outbound::of(&context),
            // A task answers its request with the task: its stream is over by then.
            stream: (!task)
                .then(|| context.extensions.get::<ResponseStream>().cloned())
                .flatten(),
        }));
        let mut call =
            ToolCall::new(format!("mcp-{n}"), name.clone(), arguments).with_client(client.clone());
        // Under this request's span, also when the call runs on a task of its own.
        call.trace_parent = Some(tracing::Span::current());
        if let Some(agent) = &self.scope {
            call = call.with_agent(agent.clone());
        }
        // A call that asks for its input before its task exists runs in rounds first.
        let input_first = task && modern && definition.input_before_task();
        if task && !input_first {
            let signal = CancellationToken::new();
            return Ok(tasks::start_task(
                &self.tasks_of(&context),
                &self.registry,
                self.scope.clone(),
                call.with_signal(signal.clone()),
                signal,
                asks,
            ));
        }
        let (call, durable_id) = match &self.options.journal {
            Some(journal) => durable::make_durable(&journal.0, call),
            None => (call, None),
        };
        let journaled = self.options.journal.clone().zip(durable_id);
        let registry = self.registry.clone();
        let token = context.meta.get_progress_token();
        let peer = context.peer.clone();
        let outbound = telemetry::Outbound::of(&context);
        let run = move |call: ToolCall| async move {
            match token {
                Some(token) => execute_with_progress(registry, call, token, peer, outbound).await,
                None => registry.execute(call).await,
            }
        };
        let (Some(asks), Some(asked)) = (asks, asked) else {
            // rmcp cancels `context.ct` when the client sends `notifications/cancelled` for
            // this request; the pipeline then settles the call as cancelled.
            let mut result = run(call.with_signal(context.ct.clone())).await;
            if let Some((journal, id)) = &journaled {
                result =
                    durable::settle_legacy(&self.registry, &journal.0, &client, id, result).await;
            }
            return self.finished(&name, &result);
        };
        // The call outlives this request when it waits for its client, so it has a signal
        // and a task of its own.
        let signal = CancellationToken::new();
        let call = RoundCall::spawn(
            run(call.with_signal(signal.clone())),
            asked,
            asks,
            signal,
            Arc::clone(&missing),
        )
        .escalating(input_first)
        .offered(request.input_responses.unwrap_or_default());
        let turn = self.rounds.drive(call, context.ct.clone()).await;
        if let Turn::Done(result) = &turn {
            missing_capability(result, &missing)?;
        }
        match (turn, journaled) {
            (Turn::Done(result), Some((journal, id))) => {
                let answerer = self.answerer(&context);
                let parked = durable::answer_modern(
                    &self.registry,
                    &journal.0,
                    &client,
                    &answerer,
                    &id,
                    result,
                )
                .await;
                self.answer_parked(&name, parked)
            }
            (turn, _) => self.answer(&name, turn),
        }
    }
}

/// A 2026-07-28 call that failed after needing a capability its client did not declare is
/// answered with the protocol's `MissingRequiredClientCapabilityError` (-32021, HTTP 400), whose
/// `requiredCapabilities` name it (SEP-2575 "Missing Required Capabilities").
fn missing_capability(
    result: &ToolResult,
    missing: &parking_lot::Mutex<Option<&'static str>>,
) -> Result<(), ErrorData> {
    let Some(capability) = *missing.lock() else {
        return Ok(());
    };
    if !result.is_error() {
        return Ok(());
    }
    let builder = ClientCapabilities::builder();
    let required = match capability {
        "sampling" => builder.enable_sampling().build(),
        "elicitation" => builder.enable_elicitation().build(),
        "roots" => builder.enable_roots().build(),
        _ => return Ok(()),
    };
    Err(missing_capability_error(required, capability))
}

/// A `MissingRequiredClientCapabilityError` (-32021, SEP-2575): `data.requiredCapabilities`
/// holds `required`, and the message names it too (`named`: `sampling`, `roots`,
/// `elicitation`, or an extension by its id), so a person reading only the message knows what
/// to declare.
fn missing_capability_error(required: ClientCapabilities, named: &str) -> ErrorData {
    let mut error = ErrorData::missing_required_client_capability(required);
    error.message = format!("{}: {named}", error.message).into();
    error
}

#[cfg(test)]
mod tests;
