//! The session's side of a durable run on Restate: each binding call goes, in the order the
//! program made it, to the handler invocation that runs the program, which makes it a journaled
//! step (run live, or answered from Restate's journal on a retried invocation).

use std::collections::HashSet;
use std::sync::Arc;

use parking_lot::Mutex;
use serde_json::Value;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

pub(crate) use crate::code_runtime::MakeCall;
use crate::code_runtime::{Admission, BindingError, CallFuture, RunJournal};
use crate::events::ToolEvent;

/// Where a run's binding calls go: the handler invocation running it.
pub type StepSender = mpsc::UnboundedSender<StepRequest>;

/// One binding call, for the handler to make a journaled step of.
pub struct StepRequest {
    /// The call's place in the run, from 0.
    pub seq: u64,
    /// `namespace.name`.
    pub tool: String,
    /// The arguments as canonical JSON (compact, keys deep-sorted).
    pub args: String,
    /// Whether the call may run again when a cut-off attempt left its outcome unknown.
    pub idempotent: bool,
    /// The call itself; not made at all when the journal answers it.
    pub call: MakeCall,
    /// How the step ended.
    pub reply: oneshot::Sender<StepReply>,
}

impl std::fmt::Debug for StepRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The call is a closure.
        f.debug_struct("StepRequest")
            .field("seq", &self.seq)
            .field("tool", &self.tool)
            .field("args", &self.args)
            .field("idempotent", &self.idempotent)
            .finish_non_exhaustive()
    }
}

/// How a step ended.
#[derive(Debug)]
pub enum StepReply {
    /// The program reads `result`; `replayed` when it came from the journal, `unknown` when a
    /// cut-off attempt left the outcome of a call that is not idempotent unknown.
    Answer {
        result: Result<Value, BindingError>,
        replayed: bool,
        unknown: bool,
    },
    /// The journal holds another call at this place: the run ends with this message.
    Diverged(String),
}

/// The steps of one run, shared by its session and `run_code`.
pub struct Steps {
    sender: StepSender,
    /// The `run_code` call id (the Restate invocation id): the run's id in events.
    run_id: String,
    idempotent: HashSet<String>,
    publish: Arc<dyn Fn(ToolEvent) + Send + Sync>,
    /// The run's own signal: a divergence ends the run through it.
    run_signal: CancellationToken,
    diverged: Mutex<Option<String>>,
    /// The `run_code` call's span: calls answered from Restate's journal get spans under it.
    span: tracing::Span,
}

impl std::fmt::Debug for Steps {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The publisher is a closure.
        f.debug_struct("Steps")
            .field("run_id", &self.run_id)
            .field("idempotent", &self.idempotent)
            .finish_non_exhaustive()
    }
}

impl Steps {
    pub fn new(
        sender: StepSender,
        run_id: String,
        idempotent: HashSet<String>,
        publish: Arc<dyn Fn(ToolEvent) + Send + Sync>,
        run_signal: CancellationToken,
        span: tracing::Span,
    ) -> Self {
        Steps {
            sender,
            run_id,
            idempotent,
            publish,
            run_signal,
            diverged: Mutex::new(None),
            span,
        }
    }

    /// The call number `seq` to `tool` with `args`, made by `call`: sent to the handler now, so
    /// the steps are journaled in the order the program made its calls.
    pub fn call(
        self: &Arc<Self>,
        seq: u64,
        tool: String,
        args: &Value,
        call: MakeCall,
    ) -> CallFuture {
        let (reply, answer) = oneshot::channel();
        let request = StepRequest {
            seq,
            idempotent: self.idempotent.contains(&tool),
            tool: tool.clone(),
            args: crate::json::compact(args, true),
            call,
            reply,
        };
        let sent = self.sender.send(request).is_ok();
        let steps = Arc::clone(self);
        Box::pin(async move {
            let gone = || BindingError::new("the Restate invocation running this program ended");
            if !sent {
                return Err(gone());
            }
            match answer.await {
                Ok(StepReply::Answer {
                    result,
                    replayed,
                    unknown,
                }) => {
                    if replayed || unknown {
                        // `tool` is `namespace.name`: the span names the tool as the registry
                        // does, the call id as a journal replay's.
                        crate::telemetry::replayed_call(
                            &steps.span,
                            tool.split_once('.').map_or(tool.as_str(), |(_, name)| name),
                            &format!("{}:journal:{seq}", steps.run_id),
                            result
                                .as_ref()
                                .map(|_| ())
                                .map_err(|error| error.code.as_deref()),
                        );
                        (steps.publish)(ToolEvent::DurableReplayed {
                            parent: steps.run_id.clone(),
                            run_id: steps.run_id.clone(),
                            seq,
                            name: tool,
                            is_error: result.is_err(),
                            outcome_unknown: unknown,
                        });
                    }
                    result
                }
                Ok(StepReply::Diverged(message)) => {
                    (steps.publish)(ToolEvent::DurableDiverged {
                        parent: steps.run_id.clone(),
                        run_id: steps.run_id.clone(),
                        seq,
                        message: message.clone(),
                    });
                    steps.diverged.lock().get_or_insert(message);
                    steps.run_signal.cancel();
                    std::future::pending().await
                }
                Err(_) => Err(gone()),
            }
        })
    }

    /// The divergence that ended the run, if one did.
    pub fn diverged(&self) -> Option<String> {
        self.diverged.lock().clone()
    }
}

impl RunJournal for Steps {
    fn admit(self: Arc<Self>, seq: u64, tool: String, args: &Value, call: MakeCall) -> Admission {
        Admission::Run(self.call(seq, tool, args, call))
    }
}
