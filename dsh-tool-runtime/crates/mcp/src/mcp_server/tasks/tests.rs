//! The store on tokio's paused clock: each `sleep` below moves virtual time to just past a
//! deadline, and every task woken by then runs before the test goes on.

use super::*;
use crate::registry::Registry;
use crate::result::ToolResult;
use rmcp::model::{ContentBlock, ErrorCode};
use std::sync::atomic::Ordering;
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
    let outcome =
        |failure: ToolFailure| task_outcome(&registry, None, "job", &ToolResult::failure(failure));
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
