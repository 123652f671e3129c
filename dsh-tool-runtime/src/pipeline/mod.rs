//! The stages of one call.
//!
//! [`Registry::execute`] runs them back to back; the batch scheduler runs [`Registry::prepare`] in
//! model order, overlaps [`Registry::dispatch`], and commits with [`Registry::commit`] in model
//! order again. One file per step (`prepare.rs`, `dispatch.rs`, `commit.rs`); this one holds
//! what a call carries from one step to the next and the outcomes more than one step ends with.

mod commit;
mod dispatch;
mod prepare;

use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use parking_lot::Mutex;
use std::time::Instant;

use tokio_util::sync::CancellationToken;

use crate::call::ToolCall;
use crate::call::ToolExec;
use crate::cards::ResultView;
use crate::definition::ToolDefinition;
use crate::error::ErrorCode;
use crate::hooks::{
    ExecuteWrapper, Guard, PostExecuteHook, PreExecuteHook, ResultObserver, ToolCallView,
};
use crate::registry::Layer;
use crate::registry::Registry;
use crate::registry::State;
use crate::result::{ToolFailure, ToolResult};

/// Hooks that apply to one call, in registration order, snapshotted when the call starts.
#[derive(Default)]
struct Hooks {
    pre: Vec<PreExecuteHook>,
    guards: Vec<Guard>,
    wrappers: Vec<ExecuteWrapper>,
    post: Vec<PostExecuteHook>,
    observers: Vec<ResultObserver>,
}

/// Merges one hook kind across layers in registration order (ids are global and increasing).
fn merged<T: Clone>(layers: &[&Layer], pick: impl Fn(&Layer) -> &Vec<(u64, T)>) -> Vec<T> {
    let mut all: Vec<(u64, T)> = Vec::new();
    for layer in layers {
        all.extend(pick(layer).iter().cloned());
    }
    if layers.len() > 1 {
        all.sort_by_key(|(id, _)| *id);
    }
    all.into_iter().map(|(_, item)| item).collect()
}

impl Hooks {
    fn collect(state: &State, call: &ToolCall) -> Self {
        if call.agent.is_none() {
            let global = &state.global;
            return Hooks {
                pre: global.pre.iter().map(|(_, hook)| hook.clone()).collect(),
                guards: global
                    .guards
                    .iter()
                    .map(|(_, guard)| guard.clone())
                    .collect(),
                wrappers: global
                    .wrappers
                    .iter()
                    .map(|(_, wrapper)| wrapper.clone())
                    .collect(),
                post: global.post.iter().map(|(_, hook)| hook.clone()).collect(),
                observers: global
                    .observers
                    .iter()
                    .map(|(_, observer)| observer.clone())
                    .collect(),
            };
        }
        let layers = state.layers(call.agent.as_ref());
        // Guards: global first, then the scope chain from the farthest ancestor (layer order).
        let guards = layers
            .iter()
            .flat_map(|layer| layer.guards.iter().map(|(_, guard)| guard.clone()))
            .collect();
        Hooks {
            pre: merged(&layers, |layer| &layer.pre),
            guards,
            wrappers: merged(&layers, |layer| &layer.wrappers),
            post: merged(&layers, |layer| &layer.post),
            observers: merged(&layers, |layer| &layer.observers),
        }
    }
}

/// A pre-execute decision, with the validated arguments an `Ask` shows.
enum Asked {
    Allow,
    Deny {
        reason: String,
    },
    Ask {
        reason: Option<String>,
        arguments: Arc<serde_json::Value>,
    },
}

/// A call between stages.
pub struct PreparedCall {
    view: Arc<ToolCallView>,
    definition: Option<ToolDefinition>,
    /// `finalize_content` is captured when the call starts.
    finalizer: Option<ToolDefinition>,
    exec: ToolExec,
    hooks: Hooks,
    body_invoked: Arc<AtomicBool>,
    /// The card of the last body run's success; cleared when its value is replaced.
    result_view: Arc<Mutex<Option<ResultView>>>,
    /// When the call entered the pipeline, for the result event's `duration_ms`.
    started: Instant,
    stage: Stage,
    /// Whether the span carries the result (`Registry::set_span_content`).
    span_content: bool,
}

impl PreparedCall {
    /// The call's `execute_tool` span (see [`crate::telemetry`]), held by its context alone: a
    /// second handle here would grow every stage's future by a span; it ends when the call
    /// commits.
    fn span(&self) -> &tracing::Span {
        self.exec.span()
    }
}

impl std::fmt::Debug for PreparedCall {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The hooks and the definitions' handlers are closures.
        f.debug_struct("PreparedCall")
            .field("view", &self.view)
            .field("exec", &self.exec)
            .field("started", &self.started)
            .finish_non_exhaustive()
    }
}

enum Stage {
    /// Run wrappers and the body next.
    Dispatch,
    /// Run wrappers and the body now: their `execute` span is entered.
    InSpan,
    /// Skip dispatch, still run post-execute (denials).
    PostResult(ToolResult),
    /// Skip post-execute (pipeline failures, pre-aborted calls).
    FinalResult(ToolResult),
}

/// A call whose body (if any) has settled, waiting to be committed.
#[derive(Debug)]
pub struct DispatchedCall {
    prepared: PreparedCall,
    result: ToolResult,
    run_post: bool,
}

fn aborted(body_invoked: bool) -> ToolResult {
    if body_invoked {
        ToolResult::coded_failure(ErrorCode::Aborted, "tool call aborted")
    } else {
        ToolResult::coded_failure(
            ErrorCode::AbortedBeforeDispatch,
            "tool call aborted before dispatch",
        )
    }
}

fn stage_failure(stage: &str, message: &str) -> ToolResult {
    ToolResult::failure(ToolFailure::plain(format!("{stage} failed: {message}")))
}

/// Replaces a success by the cancellation result, keeping its contexts.
fn cancel_success(result: ToolResult, body_invoked: bool) -> ToolResult {
    if result.is_error() {
        return result;
    }
    let mut replaced = aborted(body_invoked);
    *replaced.additional_contexts_mut() = result.additional_contexts().to_vec();
    replaced
}

/// A body's outcome once its caller cancelled: a failure without a code of its own (the
/// `Err(ToolError::new("cancelled"))` a body returns when it notices its signal, any uncoded
/// error) reads `ABORTED` as a success does, so a cancelled call has one code whatever its body
/// returned; a coded failure is more specific and stays.
fn cancel_body_outcome(result: ToolResult) -> ToolResult {
    match result.error() {
        // A body that panicked once its caller had cancelled reads as cancelled too.
        Some(failure)
            if failure
                .code()
                .is_some_and(|code| code != ErrorCode::ToolPanicked) =>
        {
            result
        }
        _ => aborted(true),
    }
}

impl Registry {
    /// Runs one call through the whole pipeline. Always returns exactly one result (also
    /// published to observers and subscribers); never panics because a hook or body did.
    pub async fn execute(&self, call: ToolCall) -> ToolResult {
        let prepared = self.prepare(call).await;
        let dispatched = self.dispatch(prepared).await;
        self.commit(dispatched).await
    }
}

/// A signal cancelled when either `caller_signal` or `installed` is. Without a replacement
/// `installed` is the caller's own signal and no task is needed; otherwise a small forwarder
/// task runs until the body settles.
fn fuse(
    caller_signal: &CancellationToken,
    installed: CancellationToken,
    replaced: bool,
) -> (CancellationToken, Option<CancellationToken>) {
    // The body gets a child, never the caller's own signal: cancelling it must not reach the
    // caller (or a batch's other calls).
    if !replaced {
        return (installed.child_token(), None);
    }
    let fused = installed.child_token();
    let stop = CancellationToken::new();
    let (caller_signal, target, stop_signal) = (caller_signal.clone(), fused.clone(), stop.clone());
    if caller_signal.is_cancelled() {
        fused.cancel();
        return (fused, None);
    }
    tokio::spawn(async move {
        tokio::select! {
            _ = caller_signal.cancelled() => target.cancel(),
            _ = stop_signal.cancelled() => {}
        }
    });
    (fused, Some(stop))
}
