//! The first stages of a call: resolve, code-mode collapse, pre-cancel check, pre-execute hooks,
//! approval and guards.

use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use std::time::Instant;

use tracing::Instrument;

use super::{Asked, Hooks, PreparedCall, Stage, aborted, stage_failure};
use crate::call::ToolCall;
use crate::call::ToolExec;
use crate::call::approval::ClientApproval;
use crate::contain::contain;
use crate::definition::ToolDefinition;
use crate::error::ErrorCode;
use crate::events::{ToolEvent, unix_ms};
use crate::hooks::{ApprovalOutcome, ApprovalRequest, Park, PreDecision, PreNext, ToolCallView};
use crate::json::dismantle;
use crate::registry::Mode;
use crate::registry::{McpServers, RUN_CODE, Registry, read};
use crate::result::{ToolFailure, ToolResult};
use crate::validate::{depth_violation, invalid_args};

impl Registry {
    /// The first stages of a call: resolve, code-mode collapse, pre-cancel check, pre-execute
    /// hooks, approval and guards.
    #[allow(clippy::manual_async_fn)] // an `async fn` holds the call twice, see below
    pub fn prepare(&self, mut call: ToolCall) -> impl Future<Output = PreparedCall> + '_ {
        // A plain fn returning an `async` block: the block borrows the call where it was
        // captured, where an `async fn` would hold it twice (its argument, then the local it is
        // moved into) across every await.
        async move {
            let started = Instant::now();
            // Arguments too deep to clone or drop recursively are refused before anything sees
            // them; hooks and observers then read `null` (an argument failure is a final result
            // and wins over a pre-cancelled signal).
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
            // The span goes straight into the context, its only holder: a local (or the parent's)
            // would stay in this future across every await.
            let exec = ToolExec::in_registry(
                view.clone(),
                self.inner.events.clone(),
                call.extensions,
                crate::telemetry::call_span(
                    &view,
                    definition.as_ref().map(ToolDefinition::description),
                    mode,
                    call.trace_parent.take().as_ref(),
                    span_content,
                ),
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
            // `run_code` in a code mode without a mounted runtime: say what is missing, not that
            // the tool does not exist.
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
                let stage = tracing::info_span!(parent: prepared.span(), "pre_execute", dsh.decision = tracing::field::Empty);
                let outcome = contain(async move { next.run().await })
                    .instrument(stage.clone())
                    .await;
                // A disabled span looks the field up all the same: skipped without a subscriber.
                if let Ok(decision) = &outcome
                    && !stage.is_disabled()
                {
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
                        prepared.stage =
                            Stage::FinalResult(stage_failure("pre-execute hook", &panic));
                        return prepared;
                    }
                }
            };
            // Pre-execute and approval denials carry the reason only; a guard's carries the
            // `DENIED` code too, so programs and the model can tell it apart.
            // Nobody is asked about arguments the tool would refuse: they are refused first, and
            // the person is shown the arguments as the tool will read them.
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
                // Without an approver of the host's, a durable run's call parks the run instead of
                // asking now (unless it was approved before the run resumed); the program never
                // sees this denial.
                Asked::Ask { reason, .. } if approver.is_none() && park.is_some() => {
                    park.as_deref().and_then(|slot| parked(slot, reason))
                }
                Asked::Ask { reason, arguments } => {
                    let stage = tracing::info_span!(parent: prepared.span(), "approval", dsh.approval = tracing::field::Empty);
                    let outcome = self
                        .ask(approver, park.as_deref(), &view, reason, arguments)
                        .instrument(stage.clone())
                        .await;
                    if !stage.is_disabled() {
                        stage.record(
                            "dsh.approval",
                            match &outcome {
                                Ok(None) => "allowed",
                                Ok(Some(_)) | Err(_) => "denied",
                            },
                        );
                    }
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
                        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                            guard(&view)
                        })) {
                            Ok(None) => {}
                            Ok(Some(reason)) => {
                                found = Some(ToolFailure::coded(ErrorCode::Denied, reason));
                                break;
                            }
                            Err(payload) => {
                                let message = crate::contain::panic_message(payload.as_ref());
                                prepared.stage =
                                    Stage::FinalResult(stage_failure("guard", &message));
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
    }

    /// Approval of an `Ask`: `Ok(None)` allows, `Ok(Some(denial))` denies (code `DENIED`, the
    /// message naming who refused), `Err(result)` is the cancellation result when approval was
    /// cancelled together with the caller. In a durable run (`park`), an approver that answers
    /// `Unavailable` parks the run instead of denying the call.
    async fn ask(
        &self,
        approver: Option<crate::hooks::Approver>,
        park: Option<&dyn Park>,
        view: &ToolCallView,
        reason: Option<String>,
        arguments: Arc<serde_json::Value>,
    ) -> Result<Option<ToolFailure>, ToolResult> {
        use crate::call::approval::{DenialSource, denied};
        let name = &view.name;
        // The host's own approver comes first; without one, a call served over MCP asks the
        // person at the client.
        if approver.is_none() && view.client.is_connected() {
            let server = self.mcp_server_of(name);
            return match crate::call::approval::ask_client(
                view,
                server.as_deref(),
                reason.as_deref(),
            )
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
        let park = park.map(|slot| (slot, reason.clone()));
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
            ApprovalOutcome::Unavailable => match park {
                Some((slot, reason)) => return Ok(parked(slot, reason)),
                None => format!(
                    "tool \"{name}\" requires approval, but no approval channel is available"
                ),
            },
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
}

/// A durable run's `Ask` handed to its park slot: `None` when the call was approved before the
/// run resumed (it runs), else the denial the run's own transport turns into a parked run.
fn parked(slot: &dyn Park, reason: Option<String>) -> Option<ToolFailure> {
    (!slot.ask(reason)).then(|| ToolFailure::plain("the run parked for approval"))
}
