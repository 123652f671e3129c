//! The dispatch bridge (REFERENCE §4.3): binding calls of a program become nested pipeline calls.
//!
//! Calls start strictly in submission order on one lane: parallel-safe calls overlap up to
//! `max_parallel_sub_calls`; an exclusive call waits for the pool to drain, runs alone and holds
//! its barrier until it has committed. Pre-execute and guards run one call at a time, commits
//! (post-execute, `finalize_content`, observers) run in submission order. When the run settles,
//! queued calls are abandoned and calls in flight are drained, so every started sub-call settles
//! exactly once before `run_code` returns.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use serde_json::Value;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::code_runtime::{BindingCall, BindingDispatch, BindingError};
use crate::events::ToolEvent;
use crate::exec::{ToolExec, lock};
use crate::execute::DispatchedCall;
use crate::registry::{Registry, ToolCall};
use crate::result::{AdditionalContext, ContentBlock, ContextSource, ToolResult};
use crate::scheduler::ExecutionMode;

type Reply = oneshot::Sender<Result<Value, BindingError>>;

/// One binding call waiting for its turn.
struct Submission {
    call: ToolCall,
    reply: Reply,
}

/// The lane of one `run_code` run.
pub(crate) struct Bridge {
    registry: Registry,
    outer: ToolExec,
    run_signal: CancellationToken,
    max_parallel: usize,
    sender: mpsc::UnboundedSender<Submission>,
    receiver: Mutex<Option<mpsc::UnboundedReceiver<Submission>>>,
    submitted: Arc<AtomicU64>,
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
            receiver: Mutex::new(Some(receiver)),
            submitted: Arc::new(AtomicU64::new(0)),
        }
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
                .with_signal(signal);
                call.agent = outer.agent().cloned();
                let (reply, answer) = oneshot::channel();
                if sender.send(Submission { call, reply }).is_err() {
                    return Err(over(&binding.name, "not dispatched"));
                }
                answer
                    .await
                    .unwrap_or_else(|_| Err(over(&binding.name, "tool call abandoned")))
            })
        })
    }

    /// Runs the lane until the run has settled and every started call has committed.
    pub(crate) async fn drive(&self) {
        let Some(mut receiver) = lock(&self.receiver).take() else {
            return;
        };
        let mut queue: VecDeque<Submission> = VecDeque::new();
        let mut running: JoinSet<(usize, DispatchedCall)> = JoinSet::new();
        let mut done: BTreeMap<usize, DispatchedCall> = BTreeMap::new();
        let mut replies: HashMap<usize, (Reply, String, String)> = HashMap::new();
        let mut started = 0;
        let mut committed = 0;
        let mut barrier: Option<usize> = None;
        let mut settled = false;
        loop {
            // Once the run settles nothing new starts, whichever branch woke the loop.
            if self.run_signal.is_cancelled() && !settled {
                settled = true;
                queue.clear();
            }
            while !settled && barrier.is_none() {
                let Some(front) = queue.front() else { break };
                let exclusive =
                    self.registry.execution_mode(&front.call) == ExecutionMode::Exclusive;
                if exclusive && committed < started {
                    break;
                }
                if !exclusive && running.len() >= self.max_parallel {
                    break;
                }
                let Some(Submission { call, reply }) = queue.pop_front() else {
                    break;
                };
                let seq = started;
                started += 1;
                if exclusive {
                    barrier = Some(seq);
                }
                self.registry.publish(|| ToolEvent::CodeDispatchStart {
                    parent: self.outer.call_id().to_owned(),
                    call_id: call.call_id.clone(),
                    name: call.name.clone(),
                });
                replies.insert(seq, (reply, call.call_id.clone(), call.name.clone()));
                let prepared = self.registry.prepare(call).await;
                let registry = self.registry.clone();
                running.spawn(async move { (seq, registry.dispatch(prepared).await) });
            }
            if settled && running.is_empty() {
                break;
            }
            tokio::select! {
                submission = receiver.recv(), if !settled => match submission {
                    Some(submission) => queue.push_back(submission),
                    None => settled = true,
                },
                joined = running.join_next(), if !running.is_empty() => {
                    match joined {
                        Some(Ok((seq, dispatched))) => {
                            done.insert(seq, dispatched);
                        }
                        // Dispatch contains panics; only a runtime shutdown lands here.
                        Some(Err(join_error)) => tracing::error!("code-mode sub-call task failed: {join_error}"),
                        None => {}
                    }
                    while let Some(dispatched) = done.remove(&committed) {
                        let result = self.registry.commit(dispatched).await;
                        if let Some((reply, call_id, name)) = replies.remove(&committed) {
                            self.settle(&result, reply, call_id, name);
                        }
                        if barrier == Some(committed) {
                            barrier = None;
                        }
                        committed += 1;
                    }
                }
                _ = self.run_signal.cancelled(), if !settled => {
                    settled = true;
                    // Queued calls are abandoned: their programs' promises reject.
                    queue.clear();
                }
            }
        }
    }

    /// Carries a committed sub-result over to the outer call and answers the program.
    fn settle(&self, result: &ToolResult, reply: Reply, call_id: String, name: String) {
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
