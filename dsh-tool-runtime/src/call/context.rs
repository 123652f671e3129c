//! The execution context a tool body receives.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use parking_lot::Mutex;

use tokio_util::sync::CancellationToken;

use crate::hooks::ToolCallView;
use crate::result::AdditionalContext;
use crate::scope::AgentId;

/// The call context handed to a tool body: cancellation signal, ids, the agent, deferred contexts.
///
/// Cheap to clone (one `Arc`). A `#[tool]` fn receives it by declaring a parameter of type
/// `ToolExec` or `&ToolExec`.
#[derive(Clone, Debug)]
pub struct ToolExec {
    inner: Arc<ExecInner>,
    signal: CancellationToken,
}

#[derive(Debug)]
struct ExecInner {
    view: Arc<ToolCallView>,
    deferred: Mutex<Vec<AdditionalContext>>,
    concluded: AtomicBool,
    /// The journal of a durable `run_code` call.
    #[cfg(feature = "code-mode")]
    durable: Option<crate::durable::DurableRun>,
}

impl ToolExec {
    /// A context for one call, from its view.
    pub fn new(view: Arc<ToolCallView>) -> Self {
        let signal = view.signal.clone();
        ToolExec {
            inner: Arc::new(ExecInner {
                view,
                deferred: Mutex::new(Vec::new()),
                concluded: AtomicBool::new(false),
                #[cfg(feature = "code-mode")]
                durable: None,
            }),
            signal,
        }
    }

    /// The same context carrying the journal of a durable `run_code` call.
    #[cfg(feature = "code-mode")]
    pub(crate) fn with_durable(
        view: Arc<ToolCallView>,
        durable: crate::durable::DurableRun,
    ) -> Self {
        let signal = view.signal.clone();
        ToolExec {
            inner: Arc::new(ExecInner {
                view,
                deferred: Mutex::new(Vec::new()),
                concluded: AtomicBool::new(false),
                durable: Some(durable),
            }),
            signal,
        }
    }

    /// The journal of a durable `run_code` call.
    #[cfg(feature = "code-mode")]
    pub(crate) fn durable(&self) -> Option<&crate::durable::DurableRun> {
        self.inner.durable.as_ref()
    }

    /// A context for calling a tool fn directly in tests: call id `test`, no agent, a fresh signal.
    pub fn detached(tool_name: impl Into<String>) -> Self {
        ToolExec::new(Arc::new(ToolCallView {
            call_id: "test".to_owned(),
            root_call_id: "test".to_owned(),
            name: tool_name.into(),
            arguments: Arc::new(serde_json::Value::Null),
            agent: None,
            parent: None,
            signal: CancellationToken::new(),
        }))
    }

    /// The cancellation signal. A body must observe it and settle once its owned work is quiescent.
    pub fn signal(&self) -> &CancellationToken {
        &self.signal
    }

    /// The id of this call (`<outer>:code:<n>` for calls made from a code-mode program).
    pub fn call_id(&self) -> &str {
        &self.inner.view.call_id
    }

    /// The id of the top-level call this call descends from (equal to `call_id` for roots).
    pub fn root_call_id(&self) -> &str {
        &self.inner.view.root_call_id
    }

    /// The name of the tool being called.
    pub fn tool_name(&self) -> &str {
        &self.inner.view.name
    }

    /// The agent the call runs for, if any.
    pub fn agent(&self) -> Option<&AgentId> {
        self.inner.view.agent.as_ref()
    }

    /// `true` for a sub-call made by a transport such as `run_code`.
    pub fn is_nested(&self) -> bool {
        self.inner.view.parent.is_some()
    }

    /// Attaches a user-role context to this call's own final result (never injected immediately;
    /// kept in call order; discarded if a post-execute hook blocks the result).
    pub fn defer_context(&self, context: AdditionalContext) {
        self.inner.deferred.lock().push(context);
    }

    /// Asks the agent loop to end the turn after this batch; honoured only if the call's final
    /// outcome is a success.
    pub fn conclude_turn(&self) {
        self.inner.concluded.store(true, Ordering::SeqCst);
    }

    pub(crate) fn take_deferred(&self) -> Vec<AdditionalContext> {
        std::mem::take(&mut *self.inner.deferred.lock())
    }

    pub(crate) fn concluded(&self) -> bool {
        self.inner.concluded.load(Ordering::SeqCst)
    }

    /// The same call with another signal; deferred contexts and `conclude_turn` stay shared.
    pub(crate) fn with_signal(&self, signal: CancellationToken) -> ToolExec {
        ToolExec {
            inner: self.inner.clone(),
            signal,
        }
    }
}
