//! The stages of one call.
//!
//! [`Registry::execute`] runs them back to back; the batch scheduler runs [`Registry::prepare`] in
//! model order, overlaps [`Registry::dispatch`], and commits with [`Registry::commit`] in model
//! order again.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use parking_lot::Mutex;
use std::time::Instant;

use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::call::ToolCall;
use crate::call::ToolExec;
use crate::call::approval::ClientApproval;
use crate::call::contain;
use crate::definition::{ToolDefinition, unknown_tool};
use crate::error::ErrorCode;
use crate::events::{ToolEvent, unix_ms};
use crate::guards::Guard;
use crate::hooks::{
    ApprovalOutcome, ApprovalRequest, BaseDispatch, DispatchContext, ExecNext, ExecuteWrapper,
    Park, PostDecision, PostExecuteHook, PostNext, PreDecision, PreExecuteHook, PreNext,
    ResultObserver, ToolCallView,
};
use crate::json::dismantle;
use crate::presentation::ResultView;
use crate::registry::State;
use crate::registry::{McpServers, RUN_CODE, Registry, read};
use crate::result::{ToolFailure, ToolResult, blocks_text};
use crate::scope::{Layer, Mode};
use crate::validate::{depth_violation, invalid_args};

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
    /// The call's `execute_tool` span (see [`crate::telemetry`]); it ends when the call commits.
    span: tracing::Span,
    /// Whether the span carries the result (`Registry::set_span_content`).
    span_content: bool,
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

    /// The first stages of a call: resolve, code-mode collapse, pre-cancel check, pre-execute
    /// hooks, approval and guards.
    pub async fn prepare(&self, mut call: ToolCall) -> PreparedCall {
        let started = Instant::now();
        // Arguments too deep to clone or drop recursively are refused before anything sees them;
        // hooks and observers then read `null` (an argument failure is a final result and wins over
        // a pre-cancelled signal).
        let too_deep = depth_violation(&call.arguments, "").map(|violation| {
            dismantle(std::mem::take(&mut call.arguments));
            invalid_args(&[violation])
        });
        let (definition, hooks, mode, approver) = {
            let state = read(&self.inner.state);
            (
                state.resolve(&call.name, call.agent.as_ref()),
                Hooks::collect(&state, &call),
                state.mode(call.agent.as_ref()),
                state.approver.clone(),
            )
        };
        let park = call.extensions.remove::<Arc<dyn Park>>();
        let trace_parent = call.trace_parent.take();
        let view = Arc::new(ToolCallView {
            root_call_id: call
                .root_call_id
                .clone()
                .unwrap_or_else(|| call.call_id.clone()),
            call_id: call.call_id,
            name: call.name,
            arguments: Arc::new(call.arguments),
            agent: call.agent,
            parent: call.parent,
            signal: call.signal,
            client: call.client,
        });
        let span_content = self.span_content();
        let span = crate::telemetry::call_span(
            &view,
            definition.as_ref().map(ToolDefinition::description),
            mode,
            trace_parent.as_ref(),
            span_content,
        );
        let exec = ToolExec::in_registry(
            view.clone(),
            self.inner.events.clone(),
            call.extensions,
            span.clone(),
        );
        let mut prepared = PreparedCall {
            finalizer: definition
                .clone()
                .filter(ToolDefinition::has_finalize_content),
            view,
            definition,
            exec,
            hooks,
            body_invoked: Arc::new(AtomicBool::new(false)),
            result_view: Arc::default(),
            started,
            stage: Stage::Dispatch,
            span,
            span_content,
        };
        let view = prepared.view.clone();
        if let Some(failure) = too_deep {
            prepared.stage = Stage::FinalResult(ToolResult::failure(failure));
            return prepared;
        }

        // Code-mode collapse: the model may only call `run_code` directly.
        if mode == Mode::Code
            && view.parent.is_none()
            && view.name != RUN_CODE
            && prepared.definition.is_some()
        {
            prepared.stage = Stage::FinalResult(if view.signal.is_cancelled() {
                aborted(false)
            } else {
                prepared.finalizer = None;
                ToolResult::coded_failure(
                    ErrorCode::UnknownTool,
                    format!(
                        "unknown tool \"{0}\": only `run_code` is callable directly — call `{0}` from inside a `run_code` program instead",
                        view.name
                    ),
                )
            });
            return prepared;
        }
        // `run_code` in a code mode without a mounted runtime: say what is missing, not that the
        // tool does not exist.
        if prepared.definition.is_none() && view.name == RUN_CODE && mode != Mode::Native {
            prepared.finalizer = None;
            prepared.stage = Stage::FinalResult(ToolResult::coded_failure(
                ErrorCode::UnknownTool,
                format!(
                    "tool \"{RUN_CODE}\" requires a code runtime: mode \"{mode}\" has none mounted — mount one with Registry::set_code_runtime or set the mode to native"
                ),
            ));
            return prepared;
        }
        if view.signal.is_cancelled() {
            prepared.stage = Stage::FinalResult(aborted(false));
            return prepared;
        }
        self.publish(|| ToolEvent::Call {
            call_id: view.call_id.clone(),
            root_call_id: view.root_call_id.clone(),
            name: view.name.clone(),
            arguments: view.arguments.clone(),
            agent: view.agent.clone(),
            parent: view.parent.clone(),
            view: prepared
                .definition
                .as_ref()
                .and_then(|def| def.present_call(&view.arguments)),
            at_ms: unix_ms(),
        });

        let decision = if prepared.hooks.pre.is_empty() {
            PreDecision::Allow
        } else {
            let next = PreNext {
                hooks: Arc::from(prepared.hooks.pre.clone()),
                index: 0,
                view: view.clone(),
            };
            let stage = tracing::info_span!(parent: &prepared.span, "pre_execute", dsh.decision = tracing::field::Empty);
            let outcome = contain(async move { next.run().await })
                .instrument(stage.clone())
                .await;
            if let Ok(decision) = &outcome {
                stage.record(
                    "dsh.decision",
                    match decision {
                        PreDecision::Allow => "allow",
                        PreDecision::Deny { .. } => "deny",
                        PreDecision::Ask { .. } => "ask",
                    },
                );
            }
            match outcome {
                Ok(decision) => decision,
                Err(panic) => {
                    prepared.stage = Stage::FinalResult(stage_failure("pre-execute hook", &panic));
                    return prepared;
                }
            }
        };
        // Pre-execute and approval denials carry the reason only; a guard's carries the `DENIED`
        // code too, so programs and the model can tell it apart.
        // Nobody is asked about arguments the tool would refuse: they are refused first, and the
        // person is shown the arguments as the tool will read them.
        let decision = match decision {
            PreDecision::Ask { reason } => match prepared
                .definition
                .as_ref()
                .map(|definition| definition.validate_args(view.arguments.clone()))
            {
                Some(Err(invalid)) => {
                    prepared.stage = Stage::PostResult(ToolResult::failure(invalid));
                    return prepared;
                }
                Some(Ok(arguments)) => Asked::Ask { reason, arguments },
                None => Asked::Ask {
                    reason,
                    arguments: view.arguments.clone(),
                },
            },
            PreDecision::Allow => Asked::Allow,
            PreDecision::Deny { reason } => Asked::Deny { reason },
        };
        let denial = match decision {
            Asked::Allow => None,
            Asked::Deny { reason } => Some(ToolFailure::plain(reason)),
            // A durable run's call parks the run instead of asking now (unless it was approved
            // before the run resumed); the program never sees this denial.
            Asked::Ask { reason, .. } if park.is_some() => park
                .as_ref()
                .filter(|slot| !slot.ask(reason))
                .map(|_| ToolFailure::plain("the run parked for approval")),
            Asked::Ask { reason, arguments } => {
                let stage = tracing::info_span!(parent: &prepared.span, "approval", dsh.approval = tracing::field::Empty);
                let outcome = self
                    .ask(approver, &view, reason, arguments)
                    .instrument(stage.clone())
                    .await;
                stage.record(
                    "dsh.approval",
                    match &outcome {
                        Ok(None) => "allowed",
                        Ok(Some(_)) | Err(_) => "denied",
                    },
                );
                match outcome {
                    Ok(None) => None,
                    Ok(Some(denial)) => Some(denial),
                    Err(result) => {
                        prepared.stage = Stage::PostResult(result);
                        return prepared;
                    }
                }
            }
        };
        let denial = match denial {
            Some(reason) => Some(reason),
            None => {
                let mut found = None;
                for guard in &prepared.hooks.guards {
                    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| guard(&view))) {
                        Ok(None) => {}
                        Ok(Some(reason)) => {
                            found = Some(ToolFailure::coded(ErrorCode::Denied, reason));
                            break;
                        }
                        Err(payload) => {
                            let message = crate::call::panic_message(payload.as_ref());
                            prepared.stage = Stage::FinalResult(stage_failure("guard", &message));
                            return prepared;
                        }
                    }
                }
                found
            }
        };
        prepared.stage = match denial {
            // A denial is reported even if the caller cancelled meanwhile (denial > cancel).
            Some(failure) => Stage::PostResult(ToolResult::failure(failure)),
            None if view.signal.is_cancelled() => Stage::PostResult(aborted(false)),
            None => Stage::Dispatch,
        };
        prepared
    }

    /// Approval of an `Ask`: `Ok(None)` allows, `Ok(Some(denial))` denies (code `DENIED`, the
    /// message naming who refused), `Err(result)` is the cancellation result when approval was
    /// cancelled together with the caller.
    async fn ask(
        &self,
        approver: Option<crate::hooks::Approver>,
        view: &ToolCallView,
        reason: Option<String>,
        arguments: Arc<serde_json::Value>,
    ) -> Result<Option<ToolFailure>, ToolResult> {
        use super::approval::{DenialSource, denied};
        let name = &view.name;
        // The host's own approver comes first; without one, a call served over MCP asks the
        // person at the client.
        if approver.is_none() && view.client.is_connected() {
            let server = self.mcp_server_of(name);
            return match super::approval::ask_client(view, server.as_deref(), reason.as_deref())
                .await
            {
                ClientApproval::Allowed => Ok(None),
                ClientApproval::Denied(reason) => Ok(Some(denied(reason, DenialSource::Person))),
                // Nobody was asked: the denial is the missing approver's, not a person's.
                ClientApproval::Unaskable(reason) => {
                    Ok(Some(denied(reason, DenialSource::NoApprover)))
                }
                ClientApproval::CallerCancelled => Err(aborted(false)),
            };
        }
        let Some(approver) = approver else {
            let reason = reason.unwrap_or_else(|| {
                format!("tool \"{name}\" requires approval (not yet supported)")
            });
            return Ok(Some(denied(reason, DenialSource::NoApprover)));
        };
        let request = ApprovalRequest {
            agent: view.agent.clone(),
            tool_name: name.clone(),
            call_id: view.call_id.clone(),
            arguments,
            reason,
            annotations: self
                .get(name, view.agent.as_ref())
                .and_then(|definition| definition.annotations().cloned()),
            signal: view.signal.clone(),
        };
        let outcome = match contain(async move { approver(request).await }).await {
            Ok(outcome) => outcome,
            Err(panic) => {
                return Ok(Some(denied(
                    format!("approval for tool \"{name}\" failed: {panic}"),
                    DenialSource::Approver,
                )));
            }
        };
        let reason = match outcome {
            ApprovalOutcome::AllowedOnce => return Ok(None),
            ApprovalOutcome::Rejected => format!("the user rejected tool \"{name}\""),
            ApprovalOutcome::Cancelled if view.signal.is_cancelled() => return Err(aborted(false)),
            ApprovalOutcome::Cancelled => format!("approval for tool \"{name}\" was cancelled"),
            ApprovalOutcome::Unavailable => {
                format!("tool \"{name}\" requires approval, but no approval channel is available")
            }
        };
        Ok(Some(denied(reason, DenialSource::Approver)))
    }

    /// The bridged MCP server a tool name `mcp__<server>__<tool>` comes from, if any.
    fn mcp_server_of(&self, name: &str) -> Option<String> {
        let rest = name.strip_prefix("mcp__")?;
        self.slot::<McpServers>()
            .0
            .lock()
            .iter()
            .find(|server| {
                rest.strip_prefix(server.as_str())
                    .is_some_and(|tail| tail.starts_with("__"))
            })
            .cloned()
    }

    /// The middle stages of a call: execute wrappers around the body, normalization, deferred
    /// contexts. A started body is always awaited, never dropped (only a wrapper such as the
    /// timeout policy's grace may drop it).
    pub async fn dispatch(&self, mut prepared: PreparedCall) -> DispatchedCall {
        let stage = match std::mem::replace(&mut prepared.stage, Stage::Dispatch) {
            Stage::Dispatch => tracing::info_span!(parent: &prepared.span, "execute"),
            other => {
                prepared.stage = other;
                tracing::Span::none()
            }
        };
        self.run_stages(prepared).instrument(stage).await
    }

    async fn run_stages(&self, mut prepared: PreparedCall) -> DispatchedCall {
        match std::mem::replace(&mut prepared.stage, Stage::Dispatch) {
            Stage::PostResult(result) => {
                return DispatchedCall {
                    prepared,
                    result,
                    run_post: true,
                };
            }
            Stage::FinalResult(result) => {
                return DispatchedCall {
                    prepared,
                    result,
                    run_post: false,
                };
            }
            Stage::Dispatch => {}
        }
        let view = prepared.view.clone();
        let caller_signal = view.signal.clone();
        if prepared.hooks.wrappers.is_empty() {
            let invoked = prepared.body_invoked.clone();
            let mut result = self
                .run_body(
                    &view,
                    &prepared.exec,
                    &caller_signal,
                    caller_signal.clone(),
                    false,
                    &invoked,
                    &prepared.result_view,
                )
                .await;
            self.attach_deferred(&prepared, &mut result);
            return DispatchedCall {
                prepared,
                result,
                run_post: true,
            };
        }
        let registry = self.clone();
        let exec = prepared.exec.clone();
        let body_invoked = prepared.body_invoked.clone();
        let result_view = prepared.result_view.clone();
        let base_result: Arc<Mutex<Option<ToolResult>>> = Arc::default();
        let base_slot = base_result.clone();
        let base: BaseDispatch = Arc::new(move |signal: CancellationToken, replaced: bool| {
            let registry = registry.clone();
            let view = view.clone();
            let exec = exec.clone();
            let body_invoked = body_invoked.clone();
            let result_view = result_view.clone();
            let caller_signal = view.signal.clone();
            let base_slot = base_slot.clone();
            Box::pin(async move {
                let result = registry
                    .run_body(
                        &view,
                        &exec,
                        &caller_signal,
                        signal,
                        replaced,
                        &body_invoked,
                        &result_view,
                    )
                    .await;
                *base_slot.lock() = Some(result.clone());
                result
            })
        });
        let context = DispatchContext {
            view: prepared.view.clone(),
            timeout_ms: prepared
                .definition
                .as_ref()
                .and_then(ToolDefinition::timeout_ms),
        };
        let next = ExecNext {
            wrappers: Arc::from(prepared.hooks.wrappers.clone()),
            index: 0,
            context,
            signal: caller_signal.clone(),
            replaced: false,
            base,
        };
        let result = match contain(async move { next.run().await }).await {
            Ok(result) => result,
            Err(panic) => {
                let result = stage_failure("execute wrapper", &panic);
                return DispatchedCall {
                    prepared,
                    result,
                    run_post: false,
                };
            }
        };
        let mut result = self.trust(&prepared, result, base_result);
        self.attach_deferred(&prepared, &mut result);
        DispatchedCall {
            prepared,
            result,
            run_post: true,
        }
    }

    /// Deferred contexts go before the result's own; then a success of a cancelled caller becomes
    /// the cancellation result, keeping its contexts.
    fn attach_deferred(&self, prepared: &PreparedCall, result: &mut ToolResult) {
        let deferred = prepared.exec.take_deferred();
        if !deferred.is_empty() {
            let own = std::mem::take(result.additional_contexts_mut());
            *result.additional_contexts_mut() = deferred.into_iter().chain(own).collect();
        }
        if prepared.view.signal.is_cancelled() && !result.is_error() {
            let body_invoked = prepared.body_invoked.load(Ordering::SeqCst);
            *result = cancel_success(
                std::mem::replace(result, aborted(body_invoked)),
                body_invoked,
            );
        }
    }

    /// A success that did not come from this call's body was authored by a wrapper: re-validate
    /// and re-render it through the tool's output contract (its content is ignored).
    fn trust(
        &self,
        prepared: &PreparedCall,
        result: ToolResult,
        base: Arc<Mutex<Option<ToolResult>>>,
    ) -> ToolResult {
        let ToolResult::Success {
            value,
            content,
            meta,
            additional_contexts,
            concludes_turn,
        } = result
        else {
            return result;
        };
        let from_body = matches!(
            &*base.lock(),
            Some(ToolResult::Success { value: body_value, content: body_content, .. })
                if *body_value == value && *body_content == content
        );
        if !from_body {
            // The card describes the body's value, not the wrapper's.
            *prepared.result_view.lock() = None;
        }
        if from_body {
            return ToolResult::Success {
                value,
                content,
                meta,
                additional_contexts,
                concludes_turn,
            };
        }
        let Some(definition) = self.get(&prepared.view.name, prepared.view.agent.as_ref()) else {
            return ToolResult::failure(unknown_tool(
                &prepared.view.name,
                &self.tools(prepared.view.agent.as_ref()),
            ));
        };
        let top_level = prepared.view.parent.is_none();
        match definition.normalize_value(&prepared.view.arguments, value, top_level) {
            Ok(presented) => {
                *prepared.result_view.lock() = presented.view;
                ToolResult::Success {
                    value: presented.value,
                    content: presented.content,
                    meta: presented.meta,
                    additional_contexts,
                    concludes_turn,
                }
            }
            Err(failure) => ToolResult::failure(failure),
        }
    }

    /// The base of the wrapper chain: fuse signals, re-resolve, run the body, normalize. The
    /// success's result card goes to `result_view`.
    #[allow(clippy::too_many_arguments)] // one call site per wrapper path, all internal
    async fn run_body(
        &self,
        view: &ToolCallView,
        exec: &ToolExec,
        caller_signal: &CancellationToken,
        signal: CancellationToken,
        replaced: bool,
        body_invoked: &AtomicBool,
        result_view: &Mutex<Option<ResultView>>,
    ) -> ToolResult {
        if signal.is_cancelled() || (replaced && caller_signal.is_cancelled()) {
            return aborted(false);
        }
        let Some(definition) = self.get(&view.name, view.agent.as_ref()) else {
            return ToolResult::failure(unknown_tool(&view.name, &self.tools(view.agent.as_ref())));
        };
        // The body sees the caller's signal fused with whatever a wrapper installed; a body that
        // only observes it gets the installed signal itself.
        let (fused, forwarder) = if !replaced && definition.leaves_signal_alone() {
            (signal, None)
        } else {
            fuse(caller_signal, signal, replaced)
        };
        body_invoked.store(true, Ordering::SeqCst);
        let body_exec = exec.with_signal(fused.clone());
        let outcome = contain(definition.dispatch(view.arguments.clone(), body_exec)).await;
        if let Some(forwarder) = forwarder {
            forwarder.cancel();
        }
        *result_view.lock() = None;
        let result = match outcome {
            Ok(Ok(dispatched)) => {
                *result_view.lock() = dispatched.view;
                ToolResult::Success {
                    value: dispatched.value,
                    content: dispatched.content,
                    meta: dispatched.meta,
                    additional_contexts: Vec::new(),
                    concludes_turn: false,
                }
            }
            Ok(Err(failure)) => ToolResult::failure(failure),
            Err(panic) => ToolResult::coded_failure(
                ErrorCode::ToolPanicked,
                format!("tool \"{}\" panicked: {panic}", view.name),
            ),
        };
        if caller_signal.is_cancelled() {
            cancel_body_outcome(result)
        } else if fused.is_cancelled() {
            cancel_success(result, true)
        } else {
            result
        }
    }

    /// The last stages of a call: post-execute hooks, `finalize_content`, observers and the result
    /// event.
    pub async fn commit(&self, dispatched: DispatchedCall) -> ToolResult {
        let DispatchedCall {
            prepared,
            mut result,
            run_post,
        } = dispatched;
        let view = &prepared.view;
        if run_post {
            if !prepared.hooks.post.is_empty() {
                let stage = tracing::info_span!(parent: &prepared.span, "post_execute");
                result = self.post_execute(&prepared, result).instrument(stage).await;
            }
            // A success that commits after the caller cancelled reads as cancelled, hooks or not.
            if view.signal.is_cancelled() {
                result = cancel_success(result, prepared.body_invoked.load(Ordering::SeqCst));
            }
        }
        if let ToolResult::Success { concludes_turn, .. } = &mut result {
            *concludes_turn = prepared.exec.concluded();
        }
        if let Some(finalizer) = &prepared.finalizer {
            match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                finalizer.finalize_content(&prepared.exec, &result)
            })) {
                Ok(Some(content)) => *result.content_mut() = content,
                Ok(None) => {}
                Err(payload) => {
                    let message = crate::call::panic_message(payload.as_ref());
                    result = ToolResult::failure(ToolFailure::plain(format!(
                        "finalize_content failed: {message}"
                    )));
                }
            }
        }
        for observer in &prepared.hooks.observers {
            if let Err(payload) =
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| observer(view, &result)))
            {
                tracing::warn!(
                    "tool \"{}\" ({}): result observer failed: {}",
                    view.name,
                    view.call_id,
                    crate::call::panic_message(payload.as_ref())
                );
            }
        }
        crate::telemetry::record_result(&prepared.span, &result, prepared.span_content);
        // A failure has no result card: the UI shows its message on the pending card.
        let result_view = prepared.result_view.lock().take();
        self.publish(|| ToolEvent::Result {
            call_id: view.call_id.clone(),
            root_call_id: view.root_call_id.clone(),
            name: view.name.clone(),
            agent: view.agent.clone(),
            parent: view.parent.clone(),
            view: result_view.filter(|_| !result.is_error()),
            result: Arc::new(result.clone()),
            at_ms: unix_ms(),
            duration_ms: prepared.started.elapsed().as_secs_f64() * 1000.0,
        });
        result
    }

    async fn post_execute(&self, prepared: &PreparedCall, result: ToolResult) -> ToolResult {
        let view = &prepared.view;
        let current = Arc::new(result);
        let next = PostNext {
            hooks: Arc::from(prepared.hooks.post.clone()),
            index: 0,
            view: view.clone(),
            result: current.clone(),
        };
        let decision = match contain(async move { next.run().await }).await {
            Ok(decision) => decision,
            Err(panic) => return stage_failure("post-execute hook", &panic),
        };
        let result = Arc::unwrap_or_clone(current);
        match decision {
            PostDecision::Accept {
                content: Some(_),
                value: Some(_),
                ..
            } => ToolResult::failure(ToolFailure::plain(
                "tools/post-execute accept decision cannot replace both value and content",
            )),
            PostDecision::Accept { value: Some(_), .. } if result.is_error() => {
                ToolResult::failure(ToolFailure::plain(
                    "tools/post-execute cannot replace the value of a failed result",
                ))
            }
            PostDecision::Accept {
                value: Some(value),
                contexts,
                ..
            } => {
                *prepared.result_view.lock() = None;
                let Some(definition) = self.get(&view.name, view.agent.as_ref()) else {
                    return ToolResult::failure(unknown_tool(
                        &view.name,
                        &self.tools(view.agent.as_ref()),
                    ));
                };
                let mut existing = result.additional_contexts().to_vec();
                match definition.normalize_value(&view.arguments, value, view.parent.is_none()) {
                    Ok(presented) => {
                        existing.extend(contexts);
                        *prepared.result_view.lock() = presented.view;
                        ToolResult::Success {
                            value: presented.value,
                            content: presented.content,
                            meta: presented.meta,
                            additional_contexts: existing,
                            concludes_turn: false,
                        }
                    }
                    Err(failure) => ToolResult::failure(failure),
                }
            }
            PostDecision::Accept {
                content, contexts, ..
            } => {
                let mut result = result;
                if let Some(content) = content {
                    *result.content_mut() = content;
                }
                result.additional_contexts_mut().extend(contexts);
                result
            }
            PostDecision::Block { feedback, contexts } => {
                let message = if feedback.is_empty() {
                    "tool result blocked by post-execute policy".to_owned()
                } else {
                    blocks_text(&feedback)
                };
                ToolResult::Failure {
                    error: ToolFailure::plain(message),
                    content: feedback,
                    meta: None,
                    additional_contexts: contexts,
                }
            }
        }
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
