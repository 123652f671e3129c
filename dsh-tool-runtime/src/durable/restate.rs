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
//!   or idempotent call cut off that way runs again.
//!
//! The invocation's input is the `run_code` arguments (`{"code": …, "description": …}`); its
//! output is `run_code`'s (`{"logs": […], "result": …}`). A run that fails ends the invocation
//! with a terminal error (Restate does not retry it) whose message is `CODE: message`.
//!
//! Setup: start `restate-server`, serve the deployment with [`serve_deployment`], register it
//! with the server's admin API (`POST /deployments` with `{"uri": "http://host:port"}`), then
//! invoke through the ingress: `POST /DurableRuns/run` (or `/DurableRuns/run/send` with an
//! `idempotency-key` header to start it and attach later). Several processes serving the same
//! registry behind one address are one deployment.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use futures::FutureExt;
use futures::future::BoxFuture;
use restate_sdk::prelude::*;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::sync::mpsc;

use super::steps::{StepReply, StepRequest};
use super::{CallOutcome, Durability, OUTCOME_UNKNOWN};
use crate::call::ToolCall;
use crate::code_runtime::BindingError;
use crate::registry::{RUN_CODE, Registry};

/// The Restate service name of durable runs.
pub const SERVICE: &str = "DurableRuns";

/// The handler that runs one program: `POST /DurableRuns/run` on the ingress.
pub const HANDLER: &str = "run";

/// The name every step of a run carries in Restate's journal. One name for all: a resumed
/// program that makes another call is caught by the check of the step's content (and ends as
/// diverged) rather than by Restate's own name check (which would retry for ever).
const STEP_NAME: &str = "binding-call";

/// Serves the Restate deployment of `registry`'s durable runs (the service [`SERVICE`] with
/// its handler [`HANDLER`]) over HTTP/2 on `addr`, until the process ends. The registry must
/// have a code runtime (`Registry::set_code_runtime`); each invocation runs its program with it.
///
/// Errors: the address cannot be bound (in use, not local, no permission).
///
/// ```no_run
/// # async fn serve(registry: dsh_tool_runtime::Registry) -> std::io::Result<()> {
/// dsh_tool_runtime::durable::restate::serve_deployment(registry, "127.0.0.1:9080".parse().unwrap())
///     .await
/// # }
/// ```
pub async fn serve_deployment(registry: Registry, addr: SocketAddr) -> std::io::Result<()> {
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let endpoint = Endpoint::builder().bind(DurableRuns { registry }).build();
    HttpServer::new(endpoint).serve(listener).await;
    Ok(())
}

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
}

impl StepRecord {
    /// What the program reads from a `finished` step; a `started` one holds no outcome yet.
    fn into_outcome(self) -> CallOutcome {
        match self {
            StepRecord::Finished { outcome, .. } => outcome,
            StepRecord::Started { tool, .. } => CallOutcome::Err {
                message: format!("the outcome of {tool} is unknown"),
                code: Some(OUTCOME_UNKNOWN.to_owned()),
            },
        }
    }

    /// The divergence message when this journaled step is not the call `tool(args)` at `seq`
    /// expected as a `finished` step (or a `started` one).
    fn diverges(&self, seq: u64, tool: &str, args: &str, finished: bool) -> Option<String> {
        let (journaled_tool, journaled_args, is_finished) = match self {
            StepRecord::Started { tool, args } => (tool, args, false),
            StepRecord::Finished { tool, args, .. } => (tool, args, true),
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
            let (sender, mut requests) = mpsc::unbounded_channel();
            let mut call = ToolCall::new(ctx.invocation_id(), RUN_CODE, program.into_inner());
            call.durable = Some(Durability::Steps(sender));
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
                        .map(|request| step(&ctx, request).boxed());
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

/// Makes `request` one journaled step (two for a call that is not idempotent: started, then
/// finished) and replies with what the program reads. Errors: Restate's terminal error for the
/// step (the invocation was cancelled).
async fn step(ctx: &Context<'_>, request: StepRequest) -> Result<Stepped, TerminalError> {
    let StepRequest {
        seq,
        tool,
        args,
        idempotent,
        call,
        reply,
    } = request;
    // Whether the started step ran in this attempt: if it was answered from the journal and
    // the finished step was not, an earlier attempt was cut off while the call ran.
    let started_here = Arc::new(AtomicBool::new(idempotent));
    if !idempotent {
        let (record_tool, record_args, here) = (tool.clone(), args.clone(), started_here.clone());
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
        if let Some(message) = record.diverges(seq, &tool, &args, false) {
            let _ = reply.send(StepReply::Diverged(message));
            return Ok(Stepped::Diverged);
        }
    }
    let ran_here = Arc::new(AtomicBool::new(false));
    let unknown_here = Arc::new(AtomicBool::new(false));
    let (record_tool, record_args) = (tool.clone(), args.clone());
    let (ran, unknown) = (ran_here.clone(), unknown_here.clone());
    let record = ctx
        .run(move || async move {
            ran.store(true, Ordering::SeqCst);
            let outcome = if started_here.load(Ordering::SeqCst) {
                CallOutcome::of(&call.await)
            } else {
                unknown.store(true, Ordering::SeqCst);
                CallOutcome::Err {
                    message: format!(
                        "the outcome of {record_tool} is unknown: the run was cut off while the \
                         call ran, and the tool is not idempotent, so it is not run again"
                    ),
                    code: Some(OUTCOME_UNKNOWN.to_owned()),
                }
            };
            Ok(Json(StepRecord::Finished {
                tool: record_tool,
                args: record_args,
                outcome,
            }))
        })
        .name(STEP_NAME)
        .await?
        .into_inner();
    let outcome = match record.diverges(seq, &tool, &args, true) {
        Some(message) => {
            let _ = reply.send(StepReply::Diverged(message));
            return Ok(Stepped::Diverged);
        }
        None => record.into_outcome(),
    };
    let result: Result<Value, BindingError> = outcome.to_result();
    let unknown = unknown_here.load(Ordering::SeqCst)
        || result
            .as_ref()
            .err()
            .is_some_and(|error| error.code.as_deref() == Some(OUTCOME_UNKNOWN));
    let _ = reply.send(StepReply::Answer {
        result,
        replayed: !ran_here.load(Ordering::SeqCst),
        unknown,
    });
    Ok(Stepped::Answered)
}
