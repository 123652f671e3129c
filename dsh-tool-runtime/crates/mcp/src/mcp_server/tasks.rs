//! Long calls as MCP tasks: the `io.modelcontextprotocol/tasks` extension on rmcp's model and
//! dispatch. rmcp answers `tasks/*` only to clients that declared the extension and refuses a
//! task to a `tools/call` that did not; this file keeps the tasks.
//!
//! The store is ours rather than rmcp's `TaskManager`, which measures a task's TTL on the system
//! clock and only when some request arrives: here each task has one timer on tokio's clock (it
//! expires with nobody polling, and tests pause time instead of sleeping), and the number of
//! live tasks is bounded.

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use parking_lot::Mutex;
use rmcp::model::{
    CallToolResponse, CallToolResult, ContentBlock, CreateTaskResult, DetailedTask, GetTaskResult,
    InputRequest, InputRequests, InputResponses, JsonObject, Task, TaskPayload, TaskStatus,
};
use rmcp::service::RequestContext;
use rmcp::task_manager::current_timestamp;
use rmcp::{ErrorData, RoleServer};
use serde_json::Value;
use tokio::sync::broadcast::error::RecvError;
use tokio::sync::{mpsc, oneshot};
use tokio::time::{Instant, sleep_until};
use tokio_util::sync::CancellationToken;
use tokio_util::task::AbortOnDropHandle;

use super::client::InputAsk;
use super::results::{mcp_result, progress_of, server_failure};
use crate::call::ToolCall;
use crate::durable::Principal;
use crate::events::ToolEvent;
use crate::registry::Registry;
use crate::result::ToolResult;
use crate::scope::AgentId;

/// How [`crate::ServeExt::serve_mcp`](crate::ServeExt::serve_mcp) keeps tasks: calls of `run_code` and
/// of tools that opt in (`#[tool(task)]`,
/// [`ToolDefinition::supports_tasks`](crate::ToolDefinition::supports_tasks)) from a client that
/// declares the `io.modelcontextprotocol/tasks` extension. Such a `tools/call` is answered at
/// once with a task (`resultType: "task"`); `tasks/get` reports its status, with the call's
/// progress as `statusMessage`, and its result once done; `tasks/cancel` cancels the call's
/// signal (a program's process is killed). Under OAuth ([`McpHttpAuth::OAuth`](super::McpHttpAuth))
/// a task belongs to the token subject (`sub` of its issuer) that started it: another
/// subject's `tasks/get`, `tasks/update` or `tasks/cancel` is answered as for an unknown task.
/// Otherwise tasks belong to the server, not to the HTTP connection or session that started
/// them: any authenticated client that knows a task's id (a random UUID) can poll or cancel
/// it.
///
/// Kept results are bounded in count ([`max_live`](Self::max_live)), in bytes
/// ([`max_result_bytes`](Self::max_result_bytes)) and per principal
/// ([`max_per_session`](Self::max_per_session)), so that one client cannot hold the server's
/// memory or every task slot for a TTL.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct McpTaskLimits {
    /// How long a task lives, from its creation (at least 1 ms; default 5 minutes, sent as
    /// `ttlMs`). A finished task's result is kept until then; a task still working then has its
    /// call cancelled and ends `failed` ("task expired"), kept one more TTL so a poller learns
    /// it. Past that, `tasks/get` answers `-32602` (unknown task).
    pub ttl: Duration,
    /// Tasks live at once, working or keeping a result (at least 1; default 64). A call that
    /// would make one more is answered with an `isError` result saying so, and runs not.
    pub max_live: usize,
    /// The polling interval suggested to clients (`pollIntervalMs`; default 1 s).
    pub poll_interval: Duration,
    /// Bytes of results kept at once, all tasks together, each measured as its JSON text
    /// (default 64 MiB). A result that would go past it is dropped when its call ends: the
    /// task ends `failed` with an error (`-32603`, `data.code` `"TASK_RESULT_BUDGET"`) saying
    /// so and how large the result was. The call itself ran.
    pub max_result_bytes: usize,
    /// Tasks one principal may have live at once (at least 1; default 16, of
    /// [`max_live`](Self::max_live)): a call past it is answered with an `isError` result
    /// saying so, and runs not. The principal is the OAuth subject under OAuth (however many
    /// sessions it opens), else the MCP session; stateless (2026-07-28) requests without OAuth
    /// share one principal, the holders of the server's bearer token, so together they get one
    /// share.
    pub max_per_session: usize,
}

impl Default for McpTaskLimits {
    fn default() -> Self {
        McpTaskLimits {
            ttl: Duration::from_millis(rmcp::task_manager::DEFAULT_TASK_TTL_MS),
            max_live: 64,
            poll_interval: Duration::from_millis(rmcp::task_manager::DEFAULT_POLL_INTERVAL_MS),
            max_result_bytes: 64 << 20,
            max_per_session: 16,
        }
    }
}

impl McpTaskLimits {
    /// Sets [`McpTaskLimits::ttl`] (below 1 ms counts as 1 ms).
    pub fn ttl(mut self, ttl: Duration) -> Self {
        self.ttl = ttl.max(Duration::from_millis(1));
        self
    }

    /// Sets [`McpTaskLimits::max_live`] (0 counts as 1).
    pub fn max_live(mut self, tasks: usize) -> Self {
        self.max_live = tasks.max(1);
        self
    }

    /// Sets [`McpTaskLimits::poll_interval`].
    pub fn poll_interval(mut self, interval: Duration) -> Self {
        self.poll_interval = interval;
        self
    }

    /// Sets [`McpTaskLimits::max_result_bytes`].
    pub fn max_result_bytes(mut self, bytes: usize) -> Self {
        self.max_result_bytes = bytes;
        self
    }

    /// Sets [`McpTaskLimits::max_per_session`] (0 counts as 1).
    pub fn max_per_session(mut self, tasks: usize) -> Self {
        self.max_per_session = tasks.max(1);
        self
    }
}

/// The tasks of one server, shared by all its sessions, as one principal sees them. Cheap to
/// clone.
#[derive(Clone)]
pub(crate) struct Tasks {
    shared: Arc<Shared>,
    /// Whose share new tasks count against.
    principal: Principal,
    /// Whether the tasks it starts are its own: hidden from every other principal.
    owns: bool,
}

struct Shared {
    limits: McpTaskLimits,
    entries: Mutex<HashMap<String, Entry>>,
    /// The bytes of the results kept in `entries`; changed only under its lock.
    kept_bytes: AtomicUsize,
}

struct Entry {
    /// The principal whose share it counts against.
    principal: Principal,
    /// Set when only that principal may see it.
    owned: bool,
    /// The size of the kept result, counted in [`Shared::kept_bytes`].
    result_bytes: usize,
    task: Task,
    payload: TaskPayload,
    /// The call's signal: `tasks/cancel` and expiry cancel it.
    signal: CancellationToken,
    cancel_requested: bool,
    /// Runs the call, then ends the entry; dropping the entry (the server gone) stops it.
    driver: Option<AbortOnDropHandle<()>>,
    /// The call's requests for its client not yet answered through `tasks/update`, by key.
    open: Vec<(String, InputRequest, oneshot::Sender<Value>)>,
    /// The last number given to a request whose tool chose no key (`input-N`): never reused
    /// over the task's life.
    asked: u64,
}

/// A running task's way to report: its `statusMessage`.
pub(crate) struct TaskStatusSink {
    id: String,
    shared: Weak<Shared>,
}

impl TaskStatusSink {
    /// Sets the task's `statusMessage` while it works.
    pub(crate) fn set(&self, message: String) {
        if let Some(shared) = self.shared.upgrade()
            && let Some(entry) = shared.entries.lock().get_mut(&self.id)
            && entry.payload == TaskPayload::Working
        {
            entry.task.status_message = Some(message);
            entry.task.last_updated_at = current_timestamp();
        }
    }
}

/// How a task's call ended: with a result (the tool's own errors included, which complete the
/// task with `isError`), or with a failure of the server (SEP-2663's protocol-level error) that
/// ends the task `failed` with that error and no result.
pub(crate) enum TaskOutcome {
    Result(CallToolResult),
    Failed(ErrorData),
}

impl From<CallToolResult> for TaskOutcome {
    fn from(result: CallToolResult) -> Self {
        TaskOutcome::Result(result)
    }
}

/// How a task's call ended, as the driver saw it.
enum Settled {
    Finished(TaskOutcome),
    Expired,
}

impl Tasks {
    pub(crate) fn new(limits: McpTaskLimits) -> Tasks {
        Tasks {
            shared: Arc::new(Shared {
                limits,
                entries: Mutex::new(HashMap::new()),
                kept_bytes: AtomicUsize::new(0),
            }),
            principal: Principal::mcp_session(""),
            owns: false,
        }
    }

    /// The same tasks as `principal` sees them: its own share of task slots and, when it `owns`
    /// the tasks it starts (an OAuth subject), those of others hidden.
    pub(crate) fn of(&self, principal: Principal, owns: bool) -> Tasks {
        Tasks {
            shared: self.shared.clone(),
            principal,
            owns,
        }
    }

    /// The entry `id` when this principal may see it.
    fn visible<'a>(&self, entries: &'a HashMap<String, Entry>, id: &str) -> Option<&'a Entry> {
        entries
            .get(id)
            .filter(|entry| !entry.owned || entry.principal == self.principal)
    }

    /// Starts `operation` as a task whose call listens to `signal`, and answers with the task.
    /// The requests for its client that arrive on `asks` (a 2026-07-28 client's call) make
    /// the task `input_required` until `tasks/update` answers them.
    ///
    /// # Errors
    /// The message for the client when [`McpTaskLimits::max_live`] tasks are live already, or
    /// [`McpTaskLimits::max_per_session`] of this session's, or the random source for its id
    /// failed.
    pub(crate) fn spawn<F, Fut>(
        &self,
        signal: CancellationToken,
        asks: Option<mpsc::Receiver<InputAsk>>,
        operation: F,
    ) -> Result<CreateTaskResult, String>
    where
        F: FnOnce(TaskStatusSink) -> Fut,
        Fut: Future + Send + 'static,
        Fut::Output: Into<TaskOutcome>,
    {
        let limits = &self.shared.limits;
        let id = uuid_v4().map_err(|error| {
            format!("no task id: the operating system's random source failed: {error}")
        })?;
        let now = current_timestamp();
        let mut task = Task::new(id.clone(), TaskStatus::Working, now.clone(), now);
        task.ttl_ms = Some(limits.ttl.as_millis().try_into().unwrap_or(u64::MAX));
        task.poll_interval_ms = Some(
            limits
                .poll_interval
                .as_millis()
                .try_into()
                .unwrap_or(u64::MAX),
        );
        {
            let mut entries = self.shared.entries.lock();
            if entries.len() >= limits.max_live {
                return Err(format!(
                    "too many live tasks (limit {}): a task stays live while it works and keeps \
                     its result until its TTL of {} ms has passed; fetch results with \
                     tasks/get and retry later, or call without the tasks extension",
                    limits.max_live,
                    limits.ttl.as_millis()
                ));
            }
            let own = entries
                .values()
                .filter(|entry| entry.principal == self.principal)
                .count();
            if own >= limits.max_per_session {
                return Err(format!(
                    "too many live tasks for this client (limit {} of the server's {}): a \
                     task stays live while it works and keeps its result until its TTL of {} ms \
                     has passed; fetch results with tasks/get and retry later",
                    limits.max_per_session,
                    limits.max_live,
                    limits.ttl.as_millis()
                ));
            }
            entries.insert(
                id.clone(),
                Entry {
                    principal: self.principal.clone(),
                    owned: self.owns,
                    result_bytes: 0,
                    task: task.clone(),
                    payload: TaskPayload::Working,
                    signal: signal.clone(),
                    cancel_requested: false,
                    driver: None,
                    open: Vec::new(),
                    asked: 0,
                },
            );
        }
        let operation = operation(TaskStatusSink {
            id: id.clone(),
            shared: Arc::downgrade(&self.shared),
        });
        let operation = async move { operation.await.into() };
        let driver = tokio::spawn(drive(
            Arc::downgrade(&self.shared),
            id.clone(),
            limits.ttl,
            signal,
            asks,
            operation,
        ));
        if let Some(entry) = self.shared.entries.lock().get_mut(&id) {
            entry.driver = Some(AbortOnDropHandle::new(driver));
        }
        Ok(CreateTaskResult::new(task))
    }

    /// `tasks/get`: the task's state, with its result or error once it ended.
    ///
    /// # Errors
    /// `-32602` for a task that never was or whose TTL passed.
    pub(crate) fn get(&self, id: &str) -> Result<GetTaskResult, ErrorData> {
        let entries = self.shared.entries.lock();
        let entry = self.visible(&entries, id).ok_or_else(|| unknown(id))?;
        Ok(GetTaskResult::new(DetailedTask::new(
            entry.task.clone(),
            entry.payload.clone(),
        )))
    }

    /// `tasks/cancel`: cancels the call's signal; the task ends `cancelled` once the call
    /// settles as a failure (a call that completes anyway ends `completed`). An ended task is
    /// left as it is.
    ///
    /// # Errors
    /// `-32602` for a task that never was or whose TTL passed.
    pub(crate) fn cancel(&self, id: &str) -> Result<(), ErrorData> {
        let mut entries = self.shared.entries.lock();
        self.visible(&entries, id).ok_or_else(|| unknown(id))?;
        let entry = entries.get_mut(id).ok_or_else(|| unknown(id))?;
        if matches!(
            entry.payload,
            TaskPayload::Working | TaskPayload::InputRequired { .. }
        ) {
            entry.cancel_requested = true;
            entry.task.status_message = Some("cancelling".to_owned());
            entry.task.last_updated_at = current_timestamp();
            entry.signal.cancel();
        }
        Ok(())
    }
}

impl Tasks {
    /// `tasks/update`: answers the task's open requests named in `responses` (others are
    /// ignored); the task works again once none is open (SEP-2663: a client may answer one at
    /// a time).
    ///
    /// # Errors
    /// `-32602` for a task that never was or whose TTL passed.
    pub(crate) fn update(&self, id: &str, mut responses: InputResponses) -> Result<(), ErrorData> {
        let mut entries = self.shared.entries.lock();
        self.visible(&entries, id).ok_or_else(|| unknown(id))?;
        let entry = entries.get_mut(id).ok_or_else(|| unknown(id))?;
        let mut open = Vec::new();
        for (key, request, reply) in entry.open.drain(..) {
            match responses.remove(&key) {
                // The call may have ended meanwhile; then nobody needs the answer.
                Some(answer) => {
                    let _ = reply.send(answer);
                }
                None => open.push((key, request, reply)),
            }
        }
        entry.open = open;
        if let TaskPayload::InputRequired { .. } = entry.payload {
            entry.payload = input_payload(&entry.open);
            entry.task.status = entry.payload.status();
            entry.task.last_updated_at = current_timestamp();
        }
        Ok(())
    }
}

/// `input_required` with the open requests, or `working` when none is.
fn input_payload(open: &[(String, InputRequest, oneshot::Sender<Value>)]) -> TaskPayload {
    if open.is_empty() {
        return TaskPayload::Working;
    }
    let input_requests: InputRequests = open
        .iter()
        .map(|(key, request, _)| (key.clone(), request.clone()))
        .collect();
    TaskPayload::InputRequired { input_requests }
}

/// Makes the task wait for its client's answer to `ask`, under the key its tool chose (unless
/// another request of the task had it) or `input-N`.
fn ask(shared: &Weak<Shared>, id: &str, ask: InputAsk) {
    let Some(shared) = shared.upgrade() else {
        return;
    };
    let mut entries = shared.entries.lock();
    let Some(entry) = entries.get_mut(id) else {
        return;
    };
    if !matches!(
        entry.payload,
        TaskPayload::Working | TaskPayload::InputRequired { .. }
    ) {
        return;
    }
    let taken = |entry: &Entry, key: &str| entry.open.iter().any(|(open, ..)| open == key);
    let key = match ask.key {
        Some(key) if !taken(entry, &key) => key,
        _ => loop {
            entry.asked += 1;
            let key = format!("input-{}", entry.asked);
            if !taken(entry, &key) {
                break key;
            }
        },
    };
    entry.open.push((key, ask.request, ask.reply));
    entry.payload = input_payload(&entry.open);
    entry.task.status = entry.payload.status();
    entry.task.status_message = None;
    entry.task.last_updated_at = current_timestamp();
}

/// Runs one task's call until it settles or its TTL passes, records the outcome, and removes
/// the task when its retention ends; meanwhile the call's requests for its client (`asks`)
/// wait in the task.
async fn drive(
    shared: Weak<Shared>,
    id: String,
    ttl: Duration,
    signal: CancellationToken,
    mut asks: Option<mpsc::Receiver<InputAsk>>,
    operation: impl Future<Output = TaskOutcome>,
) {
    let expires = Instant::now() + ttl;
    tokio::pin!(operation);
    let retained_until = loop {
        let next_ask = async {
            match asks.as_mut() {
                Some(asks) => asks.recv().await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            result = &mut operation => {
                settle(&shared, &id, Settled::Finished(result));
                break expires;
            }
            received = next_ask => match received {
                Some(request) => ask(&shared, &id, request),
                None => asks = None,
            },
            () = sleep_until(expires) => {
                settle(&shared, &id, Settled::Expired);
                signal.cancel();
                // The call settles through its signal (a program's process is killed); its
                // result is no one's any more.
                operation.await;
                break expires + ttl;
            }
        }
    };
    sleep_until(retained_until).await;
    if let Some(shared) = shared.upgrade() {
        // Dropped outside the lock: the entry holds this driver's own handle.
        let entry = {
            let mut entries = shared.entries.lock();
            let entry = entries.remove(&id);
            if let Some(entry) = &entry {
                shared
                    .kept_bytes
                    .fetch_sub(entry.result_bytes, Ordering::Relaxed);
            }
            entry
        };
        drop(entry);
    }
}

fn settle(shared: &Weak<Shared>, id: &str, settled: Settled) {
    let Some(shared) = shared.upgrade() else {
        return;
    };
    let mut entries = shared.entries.lock();
    let Some(entry) = entries.get_mut(id) else {
        return;
    };
    // Requests still open fail: their call is over.
    entry.open.clear();
    entry.payload = match settled {
        Settled::Finished(TaskOutcome::Result(result))
            if entry.cancel_requested && result.is_error == Some(true) =>
        {
            TaskPayload::Cancelled
        }
        Settled::Finished(TaskOutcome::Failed(_)) if entry.cancel_requested => {
            TaskPayload::Cancelled
        }
        Settled::Finished(TaskOutcome::Failed(error)) => TaskPayload::Failed {
            error: object(&error),
        },
        Settled::Finished(TaskOutcome::Result(result)) => {
            let bytes = usize::try_from(crate::json::serialized_len(&result)).unwrap_or(usize::MAX);
            let budget = shared.limits.max_result_bytes;
            let kept = shared.kept_bytes.load(Ordering::Relaxed);
            if bytes > budget.saturating_sub(kept) {
                TaskPayload::Failed {
                    error: object(&result_dropped(bytes, budget)),
                }
            } else {
                shared.kept_bytes.fetch_add(bytes, Ordering::Relaxed);
                entry.result_bytes = bytes;
                TaskPayload::Completed {
                    result: object(&result),
                }
            }
        }
        Settled::Expired => TaskPayload::Failed {
            error: object(&ErrorData::internal_error(
                format!(
                    "task expired: its TTL of {} ms passed before it finished; its call was \
                     cancelled",
                    entry.task.ttl_ms.unwrap_or_default()
                ),
                None,
            )),
        },
    };
    entry.task.status = entry.payload.status();
    entry.task.status_message = None;
    entry.task.last_updated_at = current_timestamp();
}

/// The error of a task whose result went past [`McpTaskLimits::max_result_bytes`].
fn result_dropped(bytes: usize, budget: usize) -> ErrorData {
    ErrorData::internal_error(
        format!(
            "task result dropped: its {bytes} bytes would put the task results this server \
             keeps past their budget of {budget} bytes; the call ran, but its result is lost: \
             fetch other results with tasks/get so their room frees up sooner, or call \
             without the tasks extension"
        ),
        Some(serde_json::json!({
            "code": "TASK_RESULT_BUDGET",
            "resultBytes": bytes,
            "budgetBytes": budget,
        })),
    )
}

pub(super) fn object(value: &impl serde::Serialize) -> JsonObject {
    match serde_json::to_value(value) {
        Ok(serde_json::Value::Object(map)) => map,
        _ => JsonObject::new(),
    }
}

pub(super) fn unknown(id: &str) -> ErrorData {
    ErrorData::invalid_params(
        format!("unknown task \"{id}\": no such task, or its TTL has passed"),
        None,
    )
}

/// A random (version 4) UUID from the operating system's CSPRNG: a task id others cannot guess.
pub(super) fn uuid_v4() -> Result<String, getrandom::Error> {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes)?;
    bytes[6] = (bytes[6] & 0x0f) | 0x40;
    bytes[8] = (bytes[8] & 0x3f) | 0x80;
    let hex: String = bytes.iter().map(|byte| format!("{byte:02x}")).collect();
    Ok(format!(
        "{}-{}-{}-{}-{}",
        &hex[..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..]
    ))
}

/// Whether `tools/call` of `name` in `scope` becomes a task: the tool supports it and the
/// request's client declared the extension (per request, or at `initialize`).
pub(super) fn runs_as_task(
    registry: &Registry,
    scope: Option<&AgentId>,
    name: &str,
    context: &RequestContext<RoleServer>,
) -> bool {
    context
        .client_capabilities()
        .is_some_and(|capabilities| capabilities.supports_tasks())
        && registry
            .get(name, scope)
            .is_some_and(|definition| definition.supports_tasks())
}

/// Starts `call` (listening to `signal`) on `registry` in `scope` as a task: the task at once,
/// or an `isError` result when no task can be made. The call's requests for its client arrive
/// on `asks` (a 2026-07-28 client's: the task waits in `input_required` for `tasks/update`).
pub(super) fn start_task(
    tasks: &Tasks,
    registry: &Registry,
    scope: Option<AgentId>,
    call: ToolCall,
    signal: CancellationToken,
    asks: Option<mpsc::Receiver<InputAsk>>,
) -> CallToolResponse {
    let registry = registry.clone();
    let started = tasks.spawn(signal, asks, move |status| async move {
        let name = call.name.clone();
        let result = execute_reporting(&registry, call, &status).await;
        task_outcome(&registry, scope.as_ref(), &name, &result)
    });
    match started {
        Ok(task) => CallToolResponse::Task(task),
        Err(message) => CallToolResult::error(vec![ContentBlock::text(message)]).into(),
    }
}

/// A task's call's result as the task ends: a failure of the server (a tool's
/// [`ErrorCode::Internal`](crate::error::ErrorCode::Internal), or a body that panicked,
/// [`ErrorCode::ToolPanicked`](crate::error::ErrorCode::ToolPanicked)) ends the task
/// `failed` with `-32603`, the failure's message and its code as `data.code` (SEP-2663
/// reserves `failed` for such errors); any other result, a tool's own error included,
/// completes the task.
pub(super) fn task_outcome(
    registry: &Registry,
    scope: Option<&AgentId>,
    name: &str,
    result: &ToolResult,
) -> TaskOutcome {
    match server_failure(result, true) {
        Some(error) => TaskOutcome::Failed(error),
        None => TaskOutcome::Result(mcp_result(registry, scope, name, result)),
    }
}

/// Runs `call`, mirroring its progress into the task's `statusMessage`.
async fn execute_reporting(
    registry: &Registry,
    call: ToolCall,
    status: &TaskStatusSink,
) -> ToolResult {
    let call_id = call.call_id.clone();
    let mut events = registry.subscribe();
    let execution = registry.execute(call);
    tokio::pin!(execution);
    let report = |event: &ToolEvent| {
        if let Some((progress, total, message)) = progress_of(event, &call_id) {
            status.set(match (message, progress, total) {
                (Some(message), ..) => message,
                (None, Some(progress), Some(total)) => format!("{progress}/{total}"),
                (None, Some(progress), None) => format!("{progress}"),
                (None, None, _) => "working".to_owned(),
            });
        }
    };
    loop {
        tokio::select! {
            biased;
            result = &mut execution => break result,
            event = events.recv() => match event {
                Ok(event) => report(&event),
                Err(RecvError::Lagged(_)) => {}
                Err(RecvError::Closed) => break execution.await,
            },
        }
    }
}

#[cfg(test)]
#[path = "tasks_budget_tests.rs"]
mod budget_tests;

#[cfg(test)]
mod tests {
    //! The store on tokio's paused clock: each `sleep` below moves virtual time to just past a
    //! deadline, and every task woken by then runs before the test goes on.

    use super::*;
    use rmcp::model::ErrorCode;
    use tokio::time::sleep;

    const TTL: Duration = Duration::from_millis(1_000);
    const MS: Duration = Duration::from_millis(1);

    fn tasks(max_live: usize) -> Tasks {
        Tasks::new(McpTaskLimits::default().ttl(TTL).max_live(max_live))
    }

    fn text(text: &str) -> CallToolResult {
        CallToolResult::success(vec![ContentBlock::text(text.to_owned())])
    }

    /// A call that settles as a failure once its signal is cancelled, as the pipeline does.
    fn until_cancelled(signal: &CancellationToken) -> impl Future<Output = CallToolResult> + use<> {
        let signal = signal.clone();
        async move {
            signal.cancelled().await;
            CallToolResult::error(vec![ContentBlock::text("cancelled".to_owned())])
        }
    }

    fn status(tasks: &Tasks, id: &str) -> TaskStatus {
        tasks.get(id).unwrap().task.status()
    }

    fn assert_unknown(tasks: &Tasks, id: &str) {
        let error = tasks.get(id).unwrap_err();
        assert_eq!(error.code, ErrorCode::INVALID_PARAMS);
        assert!(error.message.contains("unknown task"), "{error:?}");
    }

    #[tokio::test(start_paused = true)]
    async fn a_result_is_kept_until_the_ttl_then_forgotten() {
        let tasks = tasks(4);
        let created = tasks
            .spawn(CancellationToken::new(), None, |_| async { text("done") })
            .unwrap();
        assert_eq!(created.task.status, TaskStatus::Working);
        assert_eq!(created.task.ttl_ms, Some(1_000));
        assert_eq!(created.task.poll_interval_ms, Some(1_000));
        let id = created.task.task_id;
        assert_eq!(id.len(), 36, "{id}");

        sleep(TTL - MS).await;
        let got = tasks.get(&id).unwrap().task;
        match got.payload {
            TaskPayload::Completed { result } => {
                assert_eq!(result["content"][0]["text"], "done", "{result:?}");
            }
            other => panic!("not completed: {other:?}"),
        }
        // A second poll reads the same result.
        assert_eq!(status(&tasks, &id), TaskStatus::Completed);

        sleep(2 * MS).await;
        assert_unknown(&tasks, &id);
    }

    #[tokio::test(start_paused = true)]
    async fn a_task_working_past_its_ttl_fails_and_its_call_is_cancelled() {
        let tasks = tasks(4);
        let signal = CancellationToken::new();
        let call = until_cancelled(&signal);
        let id = tasks
            .spawn(signal.clone(), None, |_| call)
            .unwrap()
            .task
            .task_id;

        sleep(TTL - MS).await;
        assert_eq!(status(&tasks, &id), TaskStatus::Working);
        assert!(!signal.is_cancelled());

        sleep(2 * MS).await;
        assert!(signal.is_cancelled());
        match tasks.get(&id).unwrap().task.payload {
            TaskPayload::Failed { error } => {
                let message = error["message"].as_str().unwrap();
                assert!(message.starts_with("task expired"), "{message}");
            }
            other => panic!("not failed: {other:?}"),
        }

        // Kept one more TTL, so a poller learns why.
        sleep(TTL - 2 * MS).await;
        assert_eq!(status(&tasks, &id), TaskStatus::Failed);
        sleep(2 * MS).await;
        assert_unknown(&tasks, &id);
    }

    #[tokio::test(start_paused = true)]
    async fn cancel_fires_the_signal_and_the_task_ends_cancelled() {
        let tasks = tasks(4);
        let signal = CancellationToken::new();
        let call = until_cancelled(&signal);
        let id = tasks
            .spawn(signal.clone(), None, |_| call)
            .unwrap()
            .task
            .task_id;
        sleep(MS).await;
        assert_eq!(status(&tasks, &id), TaskStatus::Working);

        tasks.cancel(&id).unwrap();
        assert!(signal.is_cancelled());
        sleep(MS).await;
        assert_eq!(status(&tasks, &id), TaskStatus::Cancelled);

        // A finished task stays as it ended; an unknown one is an error.
        let done = tasks
            .spawn(CancellationToken::new(), None, |_| async { text("done") })
            .unwrap()
            .task
            .task_id;
        sleep(MS).await;
        tasks.cancel(&done).unwrap();
        assert_eq!(status(&tasks, &done), TaskStatus::Completed);
        assert_eq!(
            tasks.cancel("no-such-task").unwrap_err().code,
            ErrorCode::INVALID_PARAMS
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_failed_outcome_ends_the_task_failed_with_its_error_and_no_result() {
        let tasks = tasks(4);
        let failure = || {
            TaskOutcome::Failed(ErrorData::internal_error(
                "tool \"job\" panicked: boom",
                Some(serde_json::json!({"code": "TOOL_PANICKED"})),
            ))
        };
        let id = tasks
            .spawn(
                CancellationToken::new(),
                None,
                move |_| async move { failure() },
            )
            .unwrap()
            .task
            .task_id;
        sleep(MS).await;
        match tasks.get(&id).unwrap().task.payload {
            TaskPayload::Failed { error } => {
                assert_eq!(error["code"], ErrorCode::INTERNAL_ERROR.0);
                assert_eq!(error["data"]["code"], "TOOL_PANICKED");
                assert_eq!(error["message"], "tool \"job\" panicked: boom");
            }
            other => panic!("not failed: {other:?}"),
        }
        assert_eq!(tasks.shared.kept_bytes.load(Ordering::Relaxed), 0);

        // Once cancelled, a call that fails so ends cancelled, as an error result does.
        let signal = CancellationToken::new();
        let call = until_cancelled(&signal);
        let id = tasks
            .spawn(signal, None, move |_| async move {
                call.await;
                failure()
            })
            .unwrap()
            .task
            .task_id;
        tasks.cancel(&id).unwrap();
        sleep(MS).await;
        assert_eq!(status(&tasks, &id), TaskStatus::Cancelled);
    }

    /// A tool's `INTERNAL_ERROR` and a contained panic end a task `failed` (-32603, their code
    /// as `data.code`, no result); a tool's own error, coded or not, completes it with
    /// `isError`.
    #[test]
    fn a_server_failure_fails_the_task_and_a_tool_error_completes_it() {
        use crate::error::ErrorCode as Code;
        use crate::result::ToolFailure;
        let registry = Registry::new();
        let outcome = |failure: ToolFailure| {
            task_outcome(&registry, None, "job", &ToolResult::failure(failure))
        };
        for code in [Code::Internal, Code::ToolPanicked] {
            match outcome(ToolFailure::coded(code.clone(), "the store is down")) {
                TaskOutcome::Failed(error) => {
                    assert_eq!(error.code, ErrorCode::INTERNAL_ERROR);
                    assert_eq!(error.message, "the store is down");
                    assert_eq!(error.data.unwrap()["code"], code.as_str());
                }
                TaskOutcome::Result(result) => panic!("{code} completed: {result:?}"),
            }
        }
        for failure in [
            ToolFailure::plain("the job failed"),
            ToolFailure::coded(Code::Other("ENOSPC".to_owned()), "disk full"),
        ] {
            match outcome(failure) {
                TaskOutcome::Result(result) => assert_eq!(result.is_error, Some(true)),
                TaskOutcome::Failed(error) => panic!("a tool error failed the task: {error:?}"),
            }
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_call_that_completes_despite_cancel_ends_completed() {
        let tasks = tasks(4);
        let signal = CancellationToken::new();
        let observed = signal.clone();
        let id = tasks
            .spawn(signal, None, |_| async move {
                observed.cancelled().await;
                text("finished anyway")
            })
            .unwrap()
            .task
            .task_id;
        tasks.cancel(&id).unwrap();
        sleep(MS).await;
        assert_eq!(status(&tasks, &id), TaskStatus::Completed);
    }

    #[tokio::test(start_paused = true)]
    async fn progress_is_the_status_message_while_working() {
        let tasks = tasks(4);
        let (step, stepped) = tokio::sync::oneshot::channel::<()>();
        let id = tasks
            .spawn(CancellationToken::new(), None, |status| async move {
                status.set("read_file started".to_owned());
                let _ = stepped.await;
                status.set("read_file ok".to_owned());
                text("done")
            })
            .unwrap()
            .task
            .task_id;
        sleep(MS).await;
        let working = tasks.get(&id).unwrap().task.task;
        assert_eq!(working.status, TaskStatus::Working);
        assert_eq!(working.status_message.as_deref(), Some("read_file started"));

        step.send(()).unwrap();
        sleep(MS).await;
        let done = tasks.get(&id).unwrap().task.task;
        assert_eq!(done.status, TaskStatus::Completed);
        assert_eq!(done.status_message, None);
    }

    #[tokio::test(start_paused = true)]
    async fn the_live_bound_refuses_one_more_until_a_task_is_gone() {
        let tasks = tasks(2);
        let signals = [CancellationToken::new(), CancellationToken::new()];
        for signal in &signals {
            let call = until_cancelled(signal);
            tasks.spawn(signal.clone(), None, |_| call).unwrap();
        }
        let refused = tasks
            .spawn(CancellationToken::new(), None, |_| async { text("never") })
            .unwrap_err();
        assert!(
            refused.starts_with("too many live tasks (limit 2)"),
            "{refused}"
        );

        // Expired at one TTL, forgotten at two: then there is room again.
        sleep(2 * TTL + MS).await;
        assert!(signals.iter().all(CancellationToken::is_cancelled));
        tasks
            .spawn(CancellationToken::new(), None, |_| async { text("now") })
            .unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn dropping_the_server_stops_its_tasks() {
        let tasks = tasks(4);
        let (dropped, gone) = tokio::sync::oneshot::channel::<()>();
        struct Flag(Option<tokio::sync::oneshot::Sender<()>>);
        impl Drop for Flag {
            fn drop(&mut self) {
                let _ = self.0.take().map(|sender| sender.send(()));
            }
        }
        let flag = Flag(Some(dropped));
        tasks
            .spawn(CancellationToken::new(), None, |_| async move {
                let _flag = flag;
                std::future::pending::<CallToolResult>().await
            })
            .unwrap();
        sleep(MS).await;
        drop(tasks);
        gone.await.unwrap();
    }
}
