//! A `tools/call` as a task: whether it becomes one, starting it, and how its result ends the
//! task.

use rmcp::RoleServer;
use rmcp::model::{CallToolResponse, CallToolResult, ContentBlock};
use rmcp::service::RequestContext;
use tokio::sync::broadcast::error::RecvError;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::{TaskOutcome, TaskStatusSink, Tasks};
use crate::call::ToolCall;
use crate::events::ToolEvent;
use crate::mcp_server::client::InputAsk;
use crate::mcp_server::results::{mcp_result, progress_of, server_failure};
use crate::registry::Registry;
use crate::result::ToolResult;
use crate::scope::AgentId;

/// Whether `tools/call` of `name` in `scope` becomes a task: the tool supports it and the
/// request's client declared the extension (per request, or at `initialize`).
pub(crate) fn runs_as_task(
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
pub(crate) fn start_task(
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
pub(crate) fn task_outcome(
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
