//! The dispatch bridge: binding calls of a program become nested pipeline calls.
//!
//! The calls of one run form one lane of the shared scheduler ([`crate::schedule`]):
//! parallel-safe calls overlap up to `max_parallel_sub_calls`, an exclusive call runs alone, and
//! commits run in submission order. When the run settles, queued calls are abandoned and calls in
//! flight are drained, so every started sub-call settles exactly once before `run_code` returns.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;

use serde_json::Value;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use crate::call::ToolCall;
use crate::call::ToolExec;
use crate::code_runtime::{BindingCall, BindingDispatch, BindingError, Lane};
use crate::events::ToolEvent;
use crate::hooks::Park;
use crate::registry::Registry;
use crate::result::{AdditionalContext, ContentBlock, ContextSource, ToolResult};
use crate::schedule::{Schedule, Sink, Unstarted};

type ReplySender = oneshot::Sender<Result<Value, BindingError>>;

/// One binding call waiting for its turn.
type Submission = (ToolCall, (ReplySender, String, String));

/// The lane of one `run_code` run.
pub(crate) struct Bridge {
    registry: Registry,
    outer: ToolExec,
    run_signal: CancellationToken,
    max_parallel: usize,
    sender: mpsc::UnboundedSender<Submission>,
    receiver: Arc<Mutex<Option<mpsc::UnboundedReceiver<Submission>>>>,
    submitted: Arc<AtomicU64>,
    /// Cancelled when `run_code`'s future goes away: a lane driven in place then stops as a
    /// spawned one does when its future is dropped.
    abandoned: CancellationToken,
}

fn over(name: &str, what: &str) -> BindingError {
    BindingError::new(format!(
        "run_code run is over (run_code settled); {name} {what}"
    ))
}

impl Bridge {
    pub(crate) fn new(
        registry: Registry,
        outer: ToolExec,
        run_signal: CancellationToken,
        max_parallel: usize,
    ) -> Self {
        let (sender, receiver) = mpsc::unbounded_channel();
        Bridge {
            registry,
            outer,
            run_signal,
            max_parallel: max_parallel.max(1),
            sender,
            receiver: Arc::new(Mutex::new(Some(receiver))),
            submitted: Arc::new(AtomicU64::new(0)),
            abandoned: CancellationToken::new(),
        }
    }

    /// How many binding calls the program made through this lane.
    pub(crate) fn submitted(&self) -> u64 {
        self.submitted.load(Ordering::SeqCst)
    }

    /// The callback the code runtime calls for every binding call.
    pub(crate) fn dispatcher(&self) -> BindingDispatch {
        let sender = self.sender.clone();
        let signal = self.run_signal.clone();
        let submitted = self.submitted.clone();
        let outer = self.outer.clone();
        Arc::new(move |binding: BindingCall| {
            let sender = sender.clone();
            let signal = signal.clone();
            let submitted = submitted.clone();
            let outer = outer.clone();
            Box::pin(async move {
                if signal.is_cancelled() {
                    return Err(over(&binding.name, "not dispatched"));
                }
                let n = submitted.fetch_add(1, Ordering::SeqCst) + 1;
                let mut call = ToolCall::new(
                    format!("{}:code:{n}", outer.call_id()),
                    binding.name.clone(),
                    binding.args,
                )
                .with_parent(outer.call_id(), outer.root_call_id())
                .with_client(outer.client().clone())
                .with_signal(signal);
                call.agent = outer.agent().cloned();
                if let Some(slot) = binding.park {
                    call.extensions.insert::<Arc<dyn Park>>(Arc::new(slot));
                }
                // The lane runs calls on a task of its own: the program's fan-out reads as a
                // tree under `run_code`'s span only with the parent named.
                call.trace_parent = Some(outer.span().clone());
                let (reply, answer) = oneshot::channel();
                let ticket = (reply, call.call_id.clone(), call.name.clone());
                if sender.send((call, ticket)).is_err() {
                    return Err(over(&binding.name, "not dispatched"));
                }
                answer
                    .await
                    .unwrap_or_else(|_| Err(over(&binding.name, "tool call abandoned")))
            })
        })
    }

    /// Runs the lane on the shared scheduler until the run has settled and every started call
    /// has committed. Queued calls are abandoned when the run settles (their promises reject);
    /// dropping this future abandons them too, while started calls still run to completion and
    /// commit on the lane's own task (see [`crate::schedule`]). Returns at once when the runtime
    /// took the lane ([`Bridge::lane`]); that lane is abandoned through
    /// [`abandon_on_drop`](Bridge::abandon_on_drop) instead.
    pub(crate) async fn drive(&self) {
        let Some(receiver) = self.receiver.lock().take() else {
            return;
        };
        self.schedule(receiver).run().await;
    }

    /// The lane, offered to the code runtime: one that takes it runs the schedule, calls
    /// included, on its interpreter's thread ([`Schedule::run_in_place`]); `drive` then has
    /// nothing to do.
    pub(crate) fn lane(&self) -> Lane {
        let receiver = Arc::clone(&self.receiver);
        let parts = (
            self.registry.clone(),
            self.outer.clone(),
            self.run_signal.clone(),
            self.max_parallel,
            self.abandoned.clone(),
        );
        Lane::new(self.run_signal.clone(), move || {
            let receiver = receiver.lock().take()?;
            let (registry, outer, run_signal, max_parallel, abandoned) = parts.clone();
            let schedule = lane_schedule(registry, outer, run_signal, max_parallel, receiver);
            Some(Box::pin(async move {
                schedule.run_in_place(abandoned).await;
            }))
        })
    }

    /// Abandons a lane driven in place when the returned guard is dropped: hold it for as long
    /// as `run_code` runs.
    pub(crate) fn abandon_on_drop(&self) -> tokio_util::sync::DropGuard {
        self.abandoned.clone().drop_guard()
    }

    fn schedule(&self, receiver: mpsc::UnboundedReceiver<Submission>) -> Schedule<Settle> {
        lane_schedule(
            self.registry.clone(),
            self.outer.clone(),
            self.run_signal.clone(),
            self.max_parallel,
            receiver,
        )
    }
}

/// The schedule of one run's lane: it stops with the run, and abandons what it has not started.
fn lane_schedule(
    registry: Registry,
    outer: ToolExec,
    run_signal: CancellationToken,
    max_parallel: usize,
    receiver: mpsc::UnboundedReceiver<Submission>,
) -> Schedule<Settle> {
    let settle = Settle {
        registry: registry.clone(),
        outer,
    };
    Schedule::new(
        registry,
        max_parallel,
        run_signal,
        Unstarted::Abandon,
        settle,
    )
    .submissions(receiver)
}

/// Where the lane's committed sub-results go: back to the outer call and the program.
struct Settle {
    registry: Registry,
    outer: ToolExec,
}

impl Sink for Settle {
    /// The program's reply channel, the sub-call's id and its tool name.
    type Ticket = (ReplySender, String, String);

    fn starting(&mut self, call: &ToolCall) {
        self.registry.publish(|| ToolEvent::CodeDispatchStart {
            parent: self.outer.call_id().to_owned(),
            call_id: call.call_id.clone(),
            name: call.name.clone(),
        });
    }

    fn committed(&mut self, _seq: usize, (reply, call_id, name): Self::Ticket, result: ToolResult) {
        self.settle(&result, reply, call_id, name);
    }
}

impl Settle {
    /// Carries a committed sub-result over to the outer call and answers the program.
    fn settle(&self, result: &ToolResult, reply: ReplySender, call_id: String, name: String) {
        if let ToolResult::Success {
            content,
            concludes_turn,
            ..
        } = result
        {
            if content
                .iter()
                .any(|block| matches!(block, ContentBlock::Image { .. }))
            {
                self.outer.defer_context(AdditionalContext {
                    content: content.clone(),
                    source: ContextSource {
                        kind: "plugin".into(),
                        name: Some("tools-code-mode".into()),
                        summary: Some(name.clone()),
                    },
                });
            }
            if *concludes_turn {
                self.outer.conclude_turn();
            }
        }
        for context in result.additional_contexts() {
            self.outer.defer_context(context.clone());
        }
        self.registry.publish(|| ToolEvent::CodeDispatch {
            parent: self.outer.call_id().to_owned(),
            call_id,
            name,
            is_error: result.is_error(),
        });
        let answer = match result {
            ToolResult::Success { value, .. } => Ok(value.clone()),
            ToolResult::Failure { error, .. } => {
                let failure = BindingError::new(error.message.clone());
                Err(match &error.info {
                    Some(info) => failure.with_code(info.code.clone()),
                    None => failure,
                })
            }
        };
        // The program may be gone already; nobody is left to tell.
        let _ = reply.send(answer);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    use serde_json::{Value, json};
    use tokio::sync::{Notify, mpsc};
    use tokio_util::sync::CancellationToken;

    use super::Bridge;
    use crate::code_runtime::BindingCall;
    use crate::{Registry, ToolDefinition, ToolExec};

    /// A failure bound only: every wait below ends on an event long before it.
    const BOUND: Duration = Duration::from_secs(60);

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn dropping_the_lane_lets_started_calls_commit_and_abandons_queued_ones() {
        let registry = Registry::new();
        let (started, mut starts) = mpsc::unbounded_channel::<String>();
        let release = Arc::new(Notify::new());
        let bodies = Arc::new(AtomicUsize::new(0));
        let gate = {
            let release = release.clone();
            let bodies = bodies.clone();
            ToolDefinition::builder("gate")
                .concurrency_safe()
                .handler(move |args: Value, _exec: ToolExec| {
                    let (started, release, bodies) =
                        (started.clone(), release.clone(), bodies.clone());
                    async move {
                        bodies.fetch_add(1, Ordering::SeqCst);
                        let _ = started.send(args["label"].as_str().unwrap_or("").to_owned());
                        release.notified().await;
                        Ok(args["label"].clone())
                    }
                })
                .build()
                .unwrap()
        };
        registry.register(gate).unwrap();
        let (observed, mut results) = mpsc::unbounded_channel::<(String, bool)>();
        registry.on_result(move |view, result| {
            let _ = observed.send((view.call_id.clone(), result.is_error()));
        });
        let outer = ToolExec::detached("run_code");
        let bridge = Bridge::new(registry, outer, CancellationToken::new(), 1);
        let dispatch = bridge.dispatcher();
        let binding = |label: &str| {
            BindingCall::new(
                "tools",
                "gate",
                json!({"label": label}),
                CancellationToken::new(),
            )
        };
        let a = tokio::spawn(dispatch(binding("a")));
        let b = tokio::spawn(dispatch(binding("b")));
        // Either call may reach the lane first; the other one queues behind it (one slot).
        let started_label = tokio::select! {
            () = bridge.drive() => panic!("the lane ended while a call was blocked"),
            label = starts.recv() => label.expect("a call started"),
        };
        let (started_call, queued_call) = if started_label == "a" { (a, b) } else { (b, a) };
        // The lane's future is gone; its started call must still finish and commit.
        drop(bridge);
        let queued = tokio::time::timeout(BOUND, queued_call)
            .await
            .unwrap()
            .unwrap();
        let error = queued.expect_err("the queued call is abandoned");
        assert!(error.message.contains("run_code run is over"), "{error:?}");
        release.notify_one();
        let started = tokio::time::timeout(BOUND, started_call)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(
            started,
            Ok(json!(started_label)),
            "the started call ran to completion"
        );
        let committed = tokio::time::timeout(BOUND, results.recv()).await.unwrap();
        assert_eq!(committed, Some(("test:code:1".to_owned(), false)));
        assert_eq!(
            bodies.load(Ordering::SeqCst),
            1,
            "the queued call never ran"
        );
    }
}
