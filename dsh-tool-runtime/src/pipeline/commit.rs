//! The last stages of a call: post-execute hooks, `finalize_content`, observers and the result
//! event.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use tracing::Instrument;

use super::{DispatchedCall, PreparedCall, cancel_success, stage_failure};
use crate::contain::contain;
use crate::definition::unknown_tool;
use crate::events::{ToolEvent, unix_ms};
use crate::hooks::{PostDecision, PostNext};
use crate::registry::Registry;
use crate::result::{ToolFailure, ToolResult, blocks_text};

impl Registry {
    /// The last stages of a call: post-execute hooks, `finalize_content`, observers and the result
    /// event.
    pub fn commit(&self, dispatched: DispatchedCall) -> impl Future<Output = ToolResult> + '_ {
        // A plain fn taken apart before the `async` block: an `async fn` would hold the call
        // twice (its argument, then the parts) across the post-execute hooks' await.
        let DispatchedCall {
            prepared,
            mut result,
            run_post,
        } = dispatched;
        async move {
            let view = &prepared.view;
            if run_post {
                if !prepared.hooks.post.is_empty() {
                    let stage = tracing::info_span!(parent: prepared.span(), "post_execute");
                    result = self.post_execute(&prepared, result).instrument(stage).await;
                }
                // A success that commits after the caller cancelled reads as cancelled, hooks or
                // not.
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
                        let message = crate::contain::panic_message(payload.as_ref());
                        result = ToolResult::failure(ToolFailure::plain(format!(
                            "finalize_content failed: {message}"
                        )));
                    }
                }
            }
            for observer in &prepared.hooks.observers {
                if let Err(payload) = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    observer(view, &result)
                })) {
                    tracing::warn!(
                        "tool \"{}\" ({}): result observer failed: {}",
                        view.name,
                        view.call_id,
                        crate::contain::panic_message(payload.as_ref())
                    );
                }
            }
            crate::telemetry::record_result(prepared.span(), &result, prepared.span_content);
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
