//! Durable `run_code` runs on [Restate](https://restate.dev): a run is one invocation of the
//! handler `DurableRuns/run`, and each binding call of its program is one journaled step
//! (`ctx.run`) of that invocation. When the deployment serving the invocation dies, Restate
//! retries the invocation on a deployment that is up: the program runs again from its start,
//! the calls already made are answered from Restate's journal, in order, and the program
//! continues live from the first call the journal does not hold. Restate's journal and retries
//! are the whole mechanism; no other store or coordination is involved.
//!
//! The rules of durable runs hold as they do with a [`JournalStore`](super::JournalStore):
//! - a call whose tool or canonical arguments differ from the journaled step at its place ends
//!   the run as `replay-diverged`, naming both calls;
//! - a call to a tool that is neither read-only nor idempotent is journaled as started before it
//!   runs; a retried invocation that finds it started but not finished answers the program
//!   with [`OUTCOME_UNKNOWN`] instead of running it again. A read-only
//!   or idempotent call cut off that way runs again;
//! - a call whose pre-execute hook answers `Ask` does not run: the step is journaled as asked,
//!   and the run waits on a Restate awakeable, recorded with the call (tool, canonical
//!   arguments cut to 2 KB, reason) in the virtual object [`APPROVALS`] under the run's key.
//!   Its handler `pending` (shared) shows the waiting call ([`PendingApproval`], without the
//!   awakeable); `approve` (`{"continuation": …}`) and `deny` (`{"continuation": …,
//!   "reason": …}`) take a continuation for that call signed with the deployment's secret
//!   ([`ContinuationSecret::sign_for_owner`](super::ContinuationSecret::sign_for_owner),
//!   [`crate::DurableExt::set_continuation_secret`]) and resolve the awakeable; a
//!   forged, expired, used or mismatched one is refused (403, `CONTINUATION_REFUSED`). Restate
//!   suspends the waiting invocation (after the service's inactivity timeout), so no process
//!   holds it; the decision resumes it by replay. Approved, the call runs; denied, the program
//!   reads a failure with code `DENIED` and the reason.
//!
//! The invocation's input is the `run_code` arguments (`{"code": …, "description": …}`) and,
//! optionally, `"run_id"`: the run's key in [`APPROVALS`] (1 to 256 bytes, no control
//! characters; without it, the invocation id, which `/DurableRuns/run/send` answers with). Its
//! output is `run_code`'s (`{"logs": […], "result": …}`). A run that fails ends the invocation
//! with a terminal error (Restate does not retry it) whose message is `CODE: message`.
//!
//! Setup: start `restate-server`, serve the deployment with [`serve_deployment`], register it
//! with the server's admin API (`POST /deployments` with `{"uri": "http://host:port"}`), then
//! invoke through the ingress: `POST /DurableRuns/run` (or `/DurableRuns/run/send` with an
//! `idempotency-key` header to start it and attach later). Several processes serving the same
//! registry behind one address are one deployment.
//!
//! Who may call it: whoever reaches the deployment's port may register it with a Restate
//! server and run any program over every tool, so off loopback the deployment requires
//! Restate's request identity ([`DeploymentOptions::identity_keys`]): the server signs each
//! request with its private key and the deployment checks the signature. Whoever reaches the
//! Restate server's ingress may start runs and answer approvals, and whoever reaches its admin
//! API may read and kill every invocation: keep both where only the deployment's users reach.

mod deployment;

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use futures::FutureExt;
use futures::future::BoxFuture;
use restate_sdk::prelude::*;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::sync::mpsc;

use super::approvals::object::{DurableApprovals, DurableApprovalsClient};
pub use super::approvals::{APPROVALS, PendingApproval};
use super::approvals::{Decision, Pending};
use super::steps::{MakeCall, StepReply, StepRequest};
use super::{CallOutcome, Durability, OUTCOME_UNKNOWN};
use crate::call::ToolCall;
use crate::code_runtime::BindingError;
use crate::code_runtime::ParkSlot;
use crate::error::ErrorCode;
use crate::events::ToolEvent;
use crate::registry::{RUN_CODE, Registry};
pub use deployment::{DeploymentError, DeploymentOptions, serve_deployment};

/// The Restate service name of durable runs.
pub const SERVICE: &str = "DurableRuns";

/// The handler that runs one program: `POST /DurableRuns/run` on the ingress.
pub const HANDLER: &str = "run";

/// The name every step of a run carries in Restate's journal. One name for all: a resumed
/// program that makes another call is caught by the check of the step's content (and ends as
/// diverged) rather than by Restate's own name check (which would retry for ever).
const STEP_NAME: &str = "binding-call";

/// What a step holds in Restate's journal.
#[derive(Serialize, Deserialize)]
#[serde(tag = "step", rename_all = "snake_case")]
enum StepRecord {
    /// A call that is not idempotent, about to run.
    Started { tool: String, args: String },
    /// A call that ran, and what the program read.
    Finished {
        tool: String,
        args: String,
        outcome: CallOutcome,
    },
    /// A call whose pre-execute hook asked for approval: it did not run, and the run waits for
    /// a decision.
    Asked {
        tool: String,
        args: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
}

impl StepRecord {
    /// What the program reads from a `finished` step; a `started` one holds no outcome yet,
    /// and an `asked` one is answered by its decision, never read here.
    fn into_outcome(self) -> CallOutcome {
        match self {
            StepRecord::Finished { outcome, .. } => outcome,
            StepRecord::Started { tool, .. } | StepRecord::Asked { tool, .. } => CallOutcome::Err {
                message: format!("the outcome of {tool} is unknown"),
                code: Some(OUTCOME_UNKNOWN.to_owned()),
            },
        }
    }

    /// The divergence message when this journaled step is not the call `tool(args)` at `seq`
    /// expected as a result step (`finished` or `asked`) or a `started` one.
    fn diverges(&self, seq: u64, tool: &str, args: &str, finished: bool) -> Option<String> {
        let (journaled_tool, journaled_args, is_finished) = match self {
            StepRecord::Started { tool, args } => (tool, args, false),
            StepRecord::Finished { tool, args, .. } | StepRecord::Asked { tool, args, .. } => {
                (tool, args, true)
            }
        };
        (journaled_tool != tool || journaled_args != args || is_finished != finished).then(|| {
            format!(
                "call #{seq} diverged from the journal: journaled {journaled_tool}({}), now \
                 {tool}({}); the program must make the same calls in the same order when it \
                 runs again (no branching on clocks or randomness)",
                super::replay::shown(journaled_args),
                super::replay::shown(args)
            )
        })
    }
}

/// The service, in a module of its own: the macro also generates clients for it, which are not
/// part of this crate's documented API.
#[allow(missing_docs)]
mod service {
    use super::*;

    pub(super) struct DurableRuns {
        pub(super) registry: Registry,
    }

    #[restate_sdk::service(name = "DurableRuns")]
    impl DurableRuns {
        #[handler(name = "run")]
        async fn run(&self, ctx: Context<'_>, program: Json<Value>) -> HandlerResult<Json<Value>> {
            let mut program = program.into_inner();
            let key = run_key(&ctx, &mut program)?;
            let (sender, mut requests) = mpsc::unbounded_channel();
            let mut call = ToolCall::new(ctx.invocation_id(), RUN_CODE, program);
            call.extensions.insert(Durability::Steps(sender));
            let mut run = self.registry.execute(call).boxed();
            // One step at a time, in the order the program made its calls: Restate journals a
            // step when it is first polled, so this order is the journal's on every attempt.
            let mut queued: VecDeque<StepRequest> = VecDeque::new();
            let mut current: Option<BoxFuture<'_, Result<Stepped, TerminalError>>> = None;
            let mut diverged = false;
            let result = loop {
                if current.is_none() && !diverged {
                    current = queued
                        .pop_front()
                        .map(|request| step(&ctx, &self.registry, &key, request).boxed());
                }
                tokio::select! {
                    result = &mut run => break result,
                    // After a divergence no call becomes a step: dropped, it fails, and the
                    // program is being ended anyway.
                    Some(request) = requests.recv() => if !diverged {
                        queued.push_back(request);
                    },
                    done = async {
                        match current.as_mut() {
                            Some(step) => step.await,
                            None => std::future::pending().await,
                        }
                    }, if current.is_some() => {
                        current = None;
                        if done? == Stepped::Diverged {
                            diverged = true;
                            queued.clear();
                        }
                    }
                }
            };
            if diverged {
                drain(&ctx).await?;
            }
            match result.error() {
                None => Ok(Json(result.value().cloned().unwrap_or(Value::Null))),
                Some(failure) => {
                    let code = failure
                        .info
                        .as_ref()
                        .map_or("ERROR", |info| info.code.as_str());
                    Err(TerminalError::new(format!("{code}: {}", failure.message)).into())
                }
            }
        }
    }
}

use service::DurableRuns;

/// The run's key, under which [`APPROVALS`] holds its approval: the input's `run_id` (taken out
/// of it: the rest are the `run_code` arguments) when there is one, else the invocation id,
/// which `/DurableRuns/run/send` answers with. Errors: a `run_id` that is not a string of 1 to
/// 256 bytes without control characters.
fn run_key(ctx: &Context<'_>, program: &mut Value) -> Result<String, TerminalError> {
    let given = program
        .as_object_mut()
        .and_then(|input| input.remove("run_id"));
    match given {
        None => Ok(ctx.invocation_id().to_owned()),
        Some(Value::String(id))
            if !id.is_empty() && id.len() <= 256 && !id.chars().any(char::is_control) =>
        {
            Ok(id)
        }
        Some(_) => Err(TerminalError::new_with_code(
            400,
            "run_id: expected a string of 1 to 256 bytes without control characters",
        )),
    }
}

/// How a step went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stepped {
    /// The program was answered.
    Answered,
    /// The journal holds another call at its place: the run ends.
    Diverged,
}

/// Replays the rest of the journal after a divergence, so the invocation can end. A
/// divergence is found while Restate replays the journal; the invocation's output written
/// then would sit where the journal holds a step, which Restate takes for a non-deterministic
/// handler and retries for ever. Each step of the journal is read back (its closure not run),
/// until a closure runs: the journal is used up, and the terminal error after it is final.
async fn drain(ctx: &Context<'_>) -> Result<(), TerminalError> {
    loop {
        let past_the_journal = Arc::new(AtomicBool::new(false));
        let here = past_the_journal.clone();
        ctx.run(move || async move {
            here.store(true, Ordering::SeqCst);
            Ok(Json(Value::Null))
        })
        .name(STEP_NAME)
        .await?;
        if past_the_journal.load(Ordering::SeqCst) {
            return Ok(());
        }
    }
}

/// What one attempt at a call left in the journal.
struct Attempted {
    /// The journaled result step: `finished` or `asked`.
    record: StepRecord,
    /// Whether the result step ran in this attempt (not answered from the journal).
    ran: bool,
    /// Whether a cut-off attempt left the outcome unknown.
    unknown: bool,
}

/// Makes `request` journaled steps and replies with what the program reads: `started` (for a
/// call that is not idempotent), then the call's result. A pre-execute `Ask` is journaled as
/// `asked`; the run then waits on an awakeable recorded in [`APPROVALS`] under `run`, and an
/// approval makes the call again, approved (`started`, result). Errors: Restate's terminal
/// error for a step (the invocation was cancelled).
async fn step(
    ctx: &Context<'_>,
    registry: &Registry,
    run: &str,
    request: StepRequest,
) -> Result<Stepped, TerminalError> {
    let StepRequest {
        seq,
        tool,
        args,
        idempotent,
        call,
        reply,
    } = request;
    let attempt = |approved| attempt(ctx, seq, &tool, &args, idempotent, &call, approved);
    let answered = async {
        let first = match attempt(false).await? {
            Ok(attempted) => attempted,
            Err(message) => return Ok::<_, TerminalError>(Err(message)),
        };
        let StepRecord::Asked { reason, .. } = first.record else {
            return Ok(Ok((first.record.into_outcome(), first.ran, first.unknown)));
        };
        if first.ran {
            registry.publish(|| ToolEvent::DurableParked {
                parent: ctx.invocation_id().to_owned(),
                run_id: run.to_owned(),
                seq,
                name: tool.clone(),
                reason: reason.clone(),
            });
        }
        let decision = ask(ctx, run, seq, &tool, &args, reason).await?;
        registry.publish(|| ToolEvent::DurableDecided {
            run_id: run.to_owned(),
            seq,
            name: tool.clone(),
            approved: decision == Decision::Approved,
            reason: match &decision {
                Decision::Denied { reason } => Some(reason.clone()),
                Decision::Approved => None,
            },
        });
        Ok(match decision {
            Decision::Approved => attempt(true)
                .await?
                .map(|again| (again.record.into_outcome(), again.ran, again.unknown)),
            Decision::Denied { reason } => Ok((
                CallOutcome::Err {
                    message: reason,
                    code: Some(ErrorCode::Denied.as_str().to_owned()),
                },
                first.ran,
                false,
            )),
        })
    };
    let (outcome, ran, unknown) = match answered.await? {
        Ok(answered) => answered,
        Err(message) => {
            let _ = reply.send(StepReply::Diverged(message));
            return Ok(Stepped::Diverged);
        }
    };
    let result: Result<Value, BindingError> = outcome.to_result();
    let unknown = unknown
        || result
            .as_ref()
            .err()
            .is_some_and(|error| error.code.as_deref() == Some(OUTCOME_UNKNOWN));
    let _ = reply.send(StepReply::Answer {
        result,
        replayed: !ran,
        unknown,
    });
    Ok(Stepped::Answered)
}

/// Waits for the person's decision on the call `seq` that asked: an awakeable, recorded with
/// the call in [`APPROVALS`] under `run` (a one-way call, journaled like the awakeable, so a
/// replay neither records it twice nor waits on another). Restate suspends the invocation
/// while it waits; the decision resumes it. Errors: the invocation was cancelled, or the
/// awakeable rejected.
async fn ask(
    ctx: &Context<'_>,
    run: &str,
    seq: u64,
    tool: &str,
    args: &str,
    reason: Option<String>,
) -> Result<Decision, TerminalError> {
    let (awakeable, decision) = ctx.awakeable::<Json<Decision>>();
    ctx.object_client::<DurableApprovalsClient>(run)
        .park(Json(Pending::new(
            run,
            ctx.invocation_id(),
            awakeable,
            seq,
            tool,
            args,
            reason,
        )))
        .send();
    Ok(decision.await?.into_inner())
}

/// One attempt at the call: `started` (unless `idempotent`), then the call's result step,
/// made with a park slot `approved` or not. `Err` is a divergence from the journal.
async fn attempt(
    ctx: &Context<'_>,
    seq: u64,
    tool: &str,
    args: &str,
    idempotent: bool,
    call: &MakeCall,
    approved: bool,
) -> Result<Result<Attempted, String>, TerminalError> {
    // Whether the started step ran in this attempt: if it was answered from the journal and
    // the result step was not, an earlier attempt was cut off while the call ran.
    let started_here = Arc::new(AtomicBool::new(idempotent));
    if !idempotent {
        let (record_tool, record_args, here) =
            (tool.to_owned(), args.to_owned(), started_here.clone());
        let record = ctx
            .run(move || async move {
                here.store(true, Ordering::SeqCst);
                Ok(Json(StepRecord::Started {
                    tool: record_tool,
                    args: record_args,
                }))
            })
            .name(STEP_NAME)
            .await?
            .into_inner();
        if let Some(message) = record.diverges(seq, tool, args, false) {
            return Ok(Err(message));
        }
    }
    let ran_here = Arc::new(AtomicBool::new(false));
    let unknown_here = Arc::new(AtomicBool::new(false));
    let (record_tool, record_args, call) = (tool.to_owned(), args.to_owned(), Arc::clone(call));
    let (ran, unknown) = (ran_here.clone(), unknown_here.clone());
    let record = ctx
        .run(move || async move {
            ran.store(true, Ordering::SeqCst);
            if !started_here.load(Ordering::SeqCst) {
                unknown.store(true, Ordering::SeqCst);
                return Ok(Json(StepRecord::Finished {
                    outcome: CallOutcome::Err {
                        message: format!(
                            "the outcome of {record_tool} is unknown: the run was cut off while \
                             the call ran, and the tool is not idempotent, so it is not run again"
                        ),
                        code: Some(OUTCOME_UNKNOWN.to_owned()),
                    },
                    tool: record_tool,
                    args: record_args,
                }));
            }
            let slot = ParkSlot::new(approved);
            let result = call(slot.clone()).await;
            Ok(Json(match slot.parked() {
                // The `Ask` stopped the call before its body ran.
                Some(reason) => StepRecord::Asked {
                    tool: record_tool,
                    args: record_args,
                    reason,
                },
                None => StepRecord::Finished {
                    tool: record_tool,
                    args: record_args,
                    outcome: CallOutcome::of(&result),
                },
            }))
        })
        .name(STEP_NAME)
        .await?
        .into_inner();
    if let Some(message) = record.diverges(seq, tool, args, true) {
        return Ok(Err(message));
    }
    Ok(Ok(Attempted {
        record,
        ran: ran_here.load(Ordering::SeqCst),
        unknown: unknown_here.load(Ordering::SeqCst),
    }))
}
