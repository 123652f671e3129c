//! How one task runs: its call driven until it settles or its TTL passes, the call's requests
//! for its client waiting in the task, and the outcome recorded.

use std::future::Future;
use std::sync::Weak;
use std::sync::atomic::Ordering;
use std::time::Duration;

use rmcp::ErrorData;
use rmcp::model::{InputRequest, InputRequests, TaskPayload};
use rmcp::task_manager::current_timestamp;
use serde_json::Value;
use tokio::sync::{mpsc, oneshot};
use tokio::time::{Instant, sleep_until};
use tokio_util::sync::CancellationToken;

use super::{Entry, Settled, Shared, TaskOutcome, object};
use crate::mcp_server::client::InputAsk;

/// `input_required` with the open requests, or `working` when none is.
pub(super) fn input_payload(
    open: &[(String, InputRequest, oneshot::Sender<Value>)],
) -> TaskPayload {
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
pub(super) async fn drive(
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

/// The error of a task whose result went past
/// [`McpTaskLimits::max_result_bytes`](super::McpTaskLimits::max_result_bytes).
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
