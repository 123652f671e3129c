//! Long calls as MCP tasks: the `io.modelcontextprotocol/tasks` extension on rmcp's model and
//! dispatch. rmcp answers `tasks/*` only to clients that declared the extension and refuses a
//! task to a `tools/call` that did not; this file keeps the tasks.
//!
//! The store is ours rather than rmcp's `TaskManager`, which measures a task's TTL on the system
//! clock and only when some request arrives: here each task has one timer on tokio's clock (it
//! expires with nobody polling, and tests pause time instead of sleeping), and the number of
//! live tasks is bounded.
//!
//! Here the store and its operations; in `lifecycle` how one task runs, asks and settles; in
//! `calls` how a `tools/call` becomes a task.

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::AtomicUsize;
use std::sync::{Arc, Weak};
use std::time::Duration;

use parking_lot::Mutex;
use rmcp::ErrorData;
use rmcp::model::{
    CallToolResult, CreateTaskResult, DetailedTask, GetTaskResult, InputRequest, InputResponses,
    JsonObject, Task, TaskPayload, TaskStatus,
};
use rmcp::task_manager::current_timestamp;
use serde_json::Value;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;
use tokio_util::task::AbortOnDropHandle;

use super::client::InputAsk;
use crate::durable::Principal;

mod calls;
mod lifecycle;

pub(super) use calls::{runs_as_task, start_task, task_outcome};
use lifecycle::{drive, input_payload};

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

#[cfg(test)]
#[path = "tasks_budget_tests.rs"]
mod budget_tests;

#[cfg(test)]
mod tests;
