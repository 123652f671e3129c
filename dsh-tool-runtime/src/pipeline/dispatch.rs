//! The middle stages of a call: execute wrappers around the body, the body, normalization and
//! deferred contexts.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use parking_lot::Mutex;

use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use super::{
    DispatchedCall, PreparedCall, Stage, aborted, cancel_body_outcome, cancel_success, fuse,
    stage_failure,
};
use crate::call::ToolExec;
use crate::cards::ResultView;
use crate::contain::contain;
use crate::definition::{ToolDefinition, unknown_tool};
use crate::error::ErrorCode;
use crate::hooks::{BaseDispatch, DispatchContext, ExecNext, ToolCallView};
use crate::registry::Registry;
use crate::result::ToolResult;

impl Registry {
    /// The middle stages of a call: execute wrappers around the body, normalization, deferred
    /// contexts. A started body is always awaited, never dropped (only a wrapper such as the
    /// timeout policy's grace may drop it).
    #[allow(clippy::manual_async_fn)] // an `async fn` holds the call twice, see below
    pub fn dispatch(
        &self,
        mut prepared: PreparedCall,
    ) -> impl Future<Output = DispatchedCall> + '_ {
        // A plain fn returning an `async` block, which holds the call once where an `async fn`
        // holds it twice (its argument, then the local it is moved into).
        async move {
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
                // A subscriber takes the call's span: the stages run again, boxed, inside their
                // `execute` span. With none, they run right here, in this one future: no stage
                // span, no wrapper entering one at every poll, no second future holding the call.
                Stage::Dispatch if !prepared.span().is_disabled() => {
                    let stage = tracing::info_span!(parent: prepared.span(), "execute");
                    prepared.stage = Stage::InSpan;
                    return Box::pin(self.dispatch(prepared)).instrument(stage).await;
                }
                Stage::Dispatch | Stage::InSpan => {}
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
}
