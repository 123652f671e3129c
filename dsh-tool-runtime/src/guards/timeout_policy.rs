//! The timeout policy.

use std::time::Duration;

use futures::future::BoxFuture;
use serde_json::json;

use crate::error::ErrorCode;
use crate::hooks::{DispatchContext, ExecNext};
use crate::registry::{Handle, Registry};
use crate::result::ToolResult;

/// Enforces each tool's own `timeout_ms` as an execute wrapper.
///
/// For a tool that declares a timeout, the body gets a deadline signal (a child of the caller's
/// signal). If **this** deadline fired, the result is `TOOL_TIMEOUT`
/// (`tool call timed out after <ms>ms`), whatever the body returned; a caller cancel that came
/// first stays an ordinary cancel. Tools without a timeout are untouched.
///
/// Cancellation is cooperative: without a grace period a body that ignores its signal keeps the
/// call pending. With [`TimeoutPolicy::with_grace`], a body still running `grace` ms after its
/// deadline is dropped (Rust futures can be dropped safely) and the result is `TOOL_TIMEOUT` with
/// `meta = {"timeout": {"abandoned": true, "grace_ms": <grace>}}`.
#[derive(Debug, Clone, Copy, Default)]
pub struct TimeoutPolicy {
    grace_ms: Option<u64>,
}

impl TimeoutPolicy {
    /// The cooperative policy: wait for the body however long it takes after the deadline.
    pub fn new() -> Self {
        TimeoutPolicy { grace_ms: None }
    }

    /// Drop a body that is still running `grace_ms` after its deadline.
    pub fn with_grace(grace_ms: u64) -> Self {
        TimeoutPolicy {
            grace_ms: Some(grace_ms),
        }
    }

    /// Installs the policy as a global execute wrapper.
    pub fn install(self, registry: &Registry) -> Handle {
        registry.on_execute(self.wrapper())
    }

    /// The wrapper, for installing it in a scope or composing it by hand.
    pub fn wrapper(
        self,
    ) -> impl Fn(DispatchContext, ExecNext) -> BoxFuture<'static, ToolResult> + Send + Sync + 'static
    {
        move |context: DispatchContext, next: ExecNext| -> BoxFuture<'static, ToolResult> {
            Box::pin(async move {
                let Some(timeout_ms) = context.timeout_ms else {
                    return next.run().await;
                };
                let deadline = next.signal().child_token();
                let body = next.run_with_signal(deadline.clone());
                tokio::pin!(body);
                let timer = tokio::time::sleep(Duration::from_millis(timeout_ms));
                let mut fired = false;
                let result = tokio::select! {
                    result = &mut body => result,
                    // A caller that cancelled before the deadline gets an ordinary cancel: its body
                    // is awaited, never dropped, and the result is not a timeout.
                    _ = timer => if context.view.signal.is_cancelled() {
                        body.await
                    } else {
                        fired = true;
                        deadline.cancel();
                        match self.grace_ms {
                            None => body.await,
                            Some(grace_ms) => tokio::select! {
                                result = &mut body => result,
                                _ = tokio::time::sleep(Duration::from_millis(grace_ms)) => {
                                    return abandoned(timeout_ms, grace_ms);
                                }
                            },
                        }
                    },
                };
                if fired {
                    timeout_result(timeout_ms)
                } else {
                    result
                }
            })
        }
    }
}

fn timeout_result(timeout_ms: u64) -> ToolResult {
    ToolResult::coded_failure(
        ErrorCode::ToolTimeout,
        format!("tool call timed out after {timeout_ms}ms"),
    )
}

fn abandoned(timeout_ms: u64, grace_ms: u64) -> ToolResult {
    let mut result = timeout_result(timeout_ms);
    if let ToolResult::Failure { meta, .. } = &mut result {
        *meta = Some(json!({"timeout": {"abandoned": true, "grace_ms": grace_ms}}));
    }
    result
}
