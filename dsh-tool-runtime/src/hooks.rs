//! The execution pipeline's extension points.
//!
//! A call runs: resolve → pre-execute hooks (waterfall) → approval on `Ask` → guards → execute
//! wrappers around the body → normalization → post-execute hooks (waterfall) → `finalize_content`
//! → result observers. The stages themselves live in `pipeline/`; this module holds the
//! hook shapes and the `next` continuations of the two waterfalls and the wrapper chain.
//!
//! Every registration takes a plain closure (`Registry::on_pre_execute` and the rest); the
//! `into_*` functions here erase it into the shared, boxed form the layers store.

use std::future::Future;
use std::sync::Arc;

use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::agent_id::AgentId;
use crate::result::{AdditionalContext, ContentBlock, ToolResult};
use futures::future::BoxFuture;

pub use crate::call::ToolCallView;

/// A guard as stored: `Some(reason)` denies the call (see `Registry::guard`).
pub(crate) type Guard = Arc<dyn Fn(&ToolCallView) -> Option<String> + Send + Sync>;

/// A pre-execute decision.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum PreDecision {
    /// Go on to the guards and the body.
    Allow,
    /// Refuse; the model sees `Error: <reason>`.
    Deny {
        /// The reason shown to the model.
        reason: String,
    },
    /// Ask the approver set with `Registry::set_approver`; without one the call is denied.
    Ask {
        /// Why approval is needed (shown to the user; also the denial reason when nobody can ask).
        reason: Option<String>,
    },
}

/// A pre-execute hook as stored: sees the call, may call `next` to learn the downstream decision,
/// returns its own. Registered first = outermost.
pub type PreExecuteHook =
    Arc<dyn Fn(Arc<ToolCallView>, PreNext) -> BoxFuture<'static, PreDecision> + Send + Sync>;

/// Erases a pre-execute hook closure.
pub fn into_pre_execute<F, Fut>(hook: F) -> PreExecuteHook
where
    F: Fn(Arc<ToolCallView>, PreNext) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = PreDecision> + Send + 'static,
{
    Arc::new(move |view, next| Box::pin(hook(view, next)))
}

/// The rest of the pre-execute waterfall; its base decision is [`PreDecision::Allow`].
pub struct PreNext {
    pub hooks: Arc<[PreExecuteHook]>,
    pub index: usize,
    pub view: Arc<ToolCallView>,
}

impl std::fmt::Debug for PreNext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The hooks are closures.
        f.debug_struct("PreNext")
            .field("hooks", &self.hooks.len())
            .field("index", &self.index)
            .field("view", &self.view)
            .finish()
    }
}

impl PreNext {
    /// Runs the downstream hooks. A panic in one of them propagates to the pipeline, which turns
    /// it into an error result.
    pub fn run(self) -> BoxFuture<'static, PreDecision> {
        match self.hooks.get(self.index).cloned() {
            None => Box::pin(async { PreDecision::Allow }),
            Some(hook) => {
                let view = self.view.clone();
                hook(
                    view,
                    PreNext {
                        index: self.index + 1,
                        ..self
                    },
                )
            }
        }
    }
}

/// What an execute wrapper may change: the cancellation signal the body will observe (the
/// caller's signal is always fused back in).
#[derive(Debug, Clone)]
pub struct DispatchContext {
    /// The call.
    pub view: Arc<ToolCallView>,
    /// The tool's declared timeout in ms, if any.
    pub timeout_ms: Option<u64>,
}

/// An execute wrapper around the body as stored: calls `next.run()` to dispatch, or returns its
/// own result to short-circuit. A wrapper-authored success is re-validated against the output
/// schema and re-rendered; a wrapper-authored failure is kept as authored.
pub type ExecuteWrapper =
    Arc<dyn Fn(DispatchContext, ExecNext) -> BoxFuture<'static, ToolResult> + Send + Sync>;

/// Erases an execute wrapper closure.
pub fn into_execute_wrapper<F, Fut>(wrapper: F) -> ExecuteWrapper
where
    F: Fn(DispatchContext, ExecNext) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = ToolResult> + Send + 'static,
{
    Arc::new(move |context, next| Box::pin(wrapper(context, next)))
}

/// The body dispatch at the base of the wrapper chain: `(signal, replaced by a wrapper)`.
pub type BaseDispatch =
    Arc<dyn Fn(CancellationToken, bool) -> BoxFuture<'static, ToolResult> + Send + Sync>;

/// The rest of the wrapper chain; its base runs the body.
pub struct ExecNext {
    pub wrappers: Arc<[ExecuteWrapper]>,
    pub index: usize,
    pub context: DispatchContext,
    pub signal: CancellationToken,
    pub replaced: bool,
    pub base: BaseDispatch,
}

impl std::fmt::Debug for ExecNext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The wrappers and the base are closures.
        f.debug_struct("ExecNext")
            .field("wrappers", &self.wrappers.len())
            .field("index", &self.index)
            .field("context", &self.context)
            .field("signal", &self.signal)
            .field("replaced", &self.replaced)
            .finish_non_exhaustive()
    }
}

impl ExecNext {
    /// The signal the downstream chain would give the body if not replaced.
    pub fn signal(&self) -> &CancellationToken {
        &self.signal
    }

    /// Dispatches with the current signal.
    pub fn run(self) -> BoxFuture<'static, ToolResult> {
        let signal = self.signal.clone();
        let replaced = self.replaced;
        self.chain(signal, replaced)
    }

    /// Dispatches with a replacement signal (e.g. a deadline signal); the caller's signal is fused
    /// back in before the body runs.
    pub fn run_with_signal(self, signal: CancellationToken) -> BoxFuture<'static, ToolResult> {
        self.chain(signal, true)
    }

    fn chain(self, signal: CancellationToken, replaced: bool) -> BoxFuture<'static, ToolResult> {
        match self.wrappers.get(self.index).cloned() {
            None => (self.base)(signal, replaced),
            Some(wrapper) => {
                let context = self.context.clone();
                wrapper(
                    context,
                    ExecNext {
                        index: self.index + 1,
                        signal,
                        replaced,
                        ..self
                    },
                )
            }
        }
    }
}

/// A post-execute decision.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum PostDecision {
    /// Keep the result, optionally replacing its content or (successes only) its value, and add
    /// contexts after the existing ones. Replacing both content and value is an error.
    Accept {
        /// Replacement model content.
        content: Option<Vec<ContentBlock>>,
        /// Replacement canonical value: re-validated and re-rendered.
        value: Option<Value>,
        /// Contexts appended after the call's own.
        contexts: Vec<AdditionalContext>,
    },
    /// Turn the call into a failure whose content is exactly `feedback`; the body's deferred
    /// contexts are discarded, only `contexts` survive.
    Block {
        /// The content the model sees.
        feedback: Vec<ContentBlock>,
        /// The only contexts kept.
        contexts: Vec<AdditionalContext>,
    },
}

impl PostDecision {
    /// `Accept` with no change.
    pub fn accept() -> Self {
        PostDecision::Accept {
            content: None,
            value: None,
            contexts: Vec::new(),
        }
    }

    /// The decision's contexts, for hooks that add to them.
    pub fn contexts_mut(&mut self) -> &mut Vec<AdditionalContext> {
        match self {
            PostDecision::Accept { contexts, .. } | PostDecision::Block { contexts, .. } => {
                contexts
            }
        }
    }
}

/// A post-execute hook as stored: sees the call and its result so far, may call `next`.
pub type PostExecuteHook = Arc<
    dyn Fn(Arc<ToolCallView>, Arc<ToolResult>, PostNext) -> BoxFuture<'static, PostDecision>
        + Send
        + Sync,
>;

/// Erases a post-execute hook closure.
pub fn into_post_execute<F, Fut>(hook: F) -> PostExecuteHook
where
    F: Fn(Arc<ToolCallView>, Arc<ToolResult>, PostNext) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = PostDecision> + Send + 'static,
{
    Arc::new(move |view, result, next| Box::pin(hook(view, result, next)))
}

/// The rest of the post-execute waterfall; its base decision is [`PostDecision::accept`].
pub struct PostNext {
    pub hooks: Arc<[PostExecuteHook]>,
    pub index: usize,
    pub view: Arc<ToolCallView>,
    pub result: Arc<ToolResult>,
}

impl std::fmt::Debug for PostNext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The hooks are closures.
        f.debug_struct("PostNext")
            .field("hooks", &self.hooks.len())
            .field("index", &self.index)
            .field("view", &self.view)
            .field("result", &self.result)
            .finish()
    }
}

impl PostNext {
    /// Runs the downstream hooks.
    pub fn run(self) -> BoxFuture<'static, PostDecision> {
        match self.hooks.get(self.index).cloned() {
            None => Box::pin(async { PostDecision::accept() }),
            Some(hook) => {
                let view = self.view.clone();
                let result = self.result.clone();
                hook(
                    view,
                    result,
                    PostNext {
                        index: self.index + 1,
                        ..self
                    },
                )
            }
        }
    }
}

/// A result observer as stored: sees every final result. A panic is contained and logged.
pub type ResultObserver = Arc<dyn Fn(&ToolCallView, &ToolResult) + Send + Sync>;

/// An approval request for a call whose pre-execute decision was `Ask`: what the person
/// deciding should be shown. It reaches the registry's approver
/// ([`Registry::set_approver`](crate::Registry::set_approver)) for every call, with or without an
/// agent, and only once the arguments are valid (invalid ones are refused with `INVALID_ARGS`
/// before anyone is asked).
#[derive(Debug, Clone)]
pub struct ApprovalRequest {
    /// The agent the call runs for; `None` for a call made on the registry itself.
    pub agent: Option<AgentId>,
    /// The tool name.
    pub tool_name: String,
    /// The call id.
    pub call_id: String,
    /// The arguments as the tool will read them (validated against its parameters schema and
    /// constraints): what is approved.
    pub arguments: Arc<Value>,
    /// Why approval is needed.
    pub reason: Option<String>,
    /// The tool's behaviour hints and title as declared (by `#[tool(destructive, …)]`, or by
    /// the MCP server it comes from), so the person deciding can tell a destructive call from a
    /// harmless one; `None` when the tool declares none.
    pub annotations: Option<crate::annotations::ToolAnnotations>,
    /// The caller's signal: an approver should give up when it fires.
    pub signal: CancellationToken,
}

/// What an approver answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ApprovalOutcome {
    /// Run this call.
    AllowedOnce,
    /// The user said no.
    Rejected,
    /// The request was cancelled.
    Cancelled,
    /// No approval channel could be reached.
    Unavailable,
}

/// The approver as stored: answers `Ask` decisions, e.g. by prompting the user.
pub type Approver =
    Arc<dyn Fn(ApprovalRequest) -> BoxFuture<'static, ApprovalOutcome> + Send + Sync>;

/// Erases an approver closure.
pub fn into_approver<F, Fut>(approver: F) -> Approver
where
    F: Fn(ApprovalRequest) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = ApprovalOutcome> + Send + 'static,
{
    Arc::new(move |request| Box::pin(approver(request)))
}

/// Where a nested call's pre-execute `Ask` goes when its transport can park the run it belongs
/// to (a durable run's binding call), carried in the call's extensions as `Arc<dyn Park>`: when
/// the registry has no approver, or its approver answers [`ApprovalOutcome::Unavailable`]. An
/// approver's other answers decide the call as they do outside a durable run.
pub trait Park: Send + Sync {
    /// `true` when the call was approved ahead (it runs); otherwise the park and its reason
    /// are recorded and the call does not run.
    fn ask(&self, reason: Option<String>) -> bool;
}
