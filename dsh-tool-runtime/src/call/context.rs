//! The execution context a tool body receives.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use parking_lot::Mutex;
use serde_json::Value;

use tokio_util::sync::CancellationToken;

use super::{
    ClientChannel, ClientError, Elicitation, ElicitationRequest, Extensions, LogLevel, Root,
    RootsRequest, SamplingReply, SamplingRequest,
};
use crate::agent_id::AgentId;
use crate::call::ToolCallView;
use crate::events::{EventSender, ToolEvent};
use crate::result::AdditionalContext;

/// The call context handed to a tool body: cancellation signal, ids, the agent, deferred contexts,
/// progress reports, and the way back to the client that made the call (log messages, sampling,
/// elicitation; see [`ClientChannel`]).
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
    /// Where progress reports are published; none for a context made outside a registry.
    events: Option<EventSender>,
    /// What features attached to the call ([`ToolCall`](super::ToolCall)'s extensions).
    extensions: Extensions,
    /// The call's span (see [`crate::telemetry`]); disabled for a context made outside a
    /// registry.
    span: tracing::Span,
}

impl ToolExec {
    /// A context for one call, from its view (progress reports go nowhere: see
    /// [`ToolExec::report_progress`]).
    pub fn new(view: Arc<ToolCallView>) -> Self {
        ToolExec::build(view, None, Extensions::default(), tracing::Span::none())
    }

    /// The context of a call the registry runs: progress is published on its events; the
    /// call's extensions (a durable `run_code` call's journal) come along.
    pub fn in_registry(
        view: Arc<ToolCallView>,
        events: EventSender,
        extensions: Extensions,
        span: tracing::Span,
    ) -> Self {
        ToolExec::build(view, Some(events), extensions, span)
    }

    fn build(
        view: Arc<ToolCallView>,
        events: Option<EventSender>,
        extensions: Extensions,
        span: tracing::Span,
    ) -> Self {
        let signal = view.signal.clone();
        ToolExec {
            inner: Arc::new(ExecInner {
                view,
                deferred: Mutex::new(Vec::new()),
                concluded: AtomicBool::new(false),
                events,
                extensions,
                span,
            }),
            signal,
        }
    }

    /// The call's span: the parent of the spans of the calls it makes (binding calls).
    pub fn span(&self) -> &tracing::Span {
        &self.inner.span
    }

    /// The value of type `T` attached to the call
    /// ([`ToolCall::with_extension`](super::ToolCall::with_extension)); `None` when there is
    /// none, and always for a context made outside a registry.
    pub fn extension<T: Send + Sync + 'static>(&self) -> Option<&T> {
        self.inner.extensions.get()
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
            client: ClientChannel::default(),
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

    /// The way back to the client that made the call: what it can answer, and the requests
    /// themselves without the call's signal (the methods below race it).
    pub fn client(&self) -> &ClientChannel {
        &self.inner.view.client
    }

    /// Reports how far the call has got: `progress` (it must increase with every report, the
    /// MCP progress rule), out of `total` when known, with an optional status line. Published
    /// as [`ToolEvent::Progress`] to the registry's subscribers; a call served over MCP whose
    /// client sent a progress token gets it as `notifications/progress`. Nothing happens for a
    /// context made outside a registry ([`ToolExec::new`], [`ToolExec::detached`]).
    pub fn report_progress(&self, progress: f64, total: Option<f64>, message: Option<String>) {
        if let Some(events) = &self.inner.events {
            events.publish(|| ToolEvent::Progress {
                call_id: self.call_id().to_owned(),
                progress,
                total,
                message,
            });
        }
    }

    /// Sends a log message to the client ([`ClientChannel::log`]).
    ///
    /// # Errors
    /// As [`ClientChannel::log`]; [`ClientError::Cancelled`] when the call's signal fires first.
    pub async fn log(&self, level: LogLevel, data: impl Into<Value>) -> Result<(), ClientError> {
        let data = data.into();
        self.until_cancelled(self.client().log(level, data)).await
    }

    /// Asks the client's model to sample ([`ClientChannel::sample`]), until the call's signal
    /// fires.
    ///
    /// # Errors
    /// As [`ClientChannel::sample`]; [`ClientError::Cancelled`] when the call's signal fires
    /// first.
    pub async fn sample(&self, request: SamplingRequest) -> Result<SamplingReply, ClientError> {
        self.until_cancelled(self.client().sample(request)).await
    }

    /// Asks the person behind the client for input ([`ClientChannel::elicit`]), until the
    /// call's signal fires.
    ///
    /// # Errors
    /// As [`ClientChannel::elicit`]; [`ClientError::Cancelled`] when the call's signal fires
    /// first.
    pub async fn elicit(&self, request: ElicitationRequest) -> Result<Elicitation, ClientError> {
        self.until_cancelled(self.client().elicit(request)).await
    }

    /// Asks the client for its roots ([`ClientChannel::list_roots`]), until the call's signal
    /// fires.
    ///
    /// # Errors
    /// As [`ClientChannel::list_roots`]; [`ClientError::Cancelled`] when the call's signal
    /// fires first.
    pub async fn list_roots(&self, request: RootsRequest) -> Result<Vec<Root>, ClientError> {
        self.until_cancelled(self.client().list_roots(request))
            .await
    }

    /// Ends the stream carrying this call's answer and waits for the client to resume it
    /// ([`ClientChannel::close_stream`]), until the call's signal fires.
    ///
    /// # Errors
    /// As [`ClientChannel::close_stream`]; [`ClientError::Cancelled`] when the call's signal
    /// fires first.
    pub async fn close_stream(&self, retry: std::time::Duration) -> Result<bool, ClientError> {
        self.until_cancelled(self.client().close_stream(retry))
            .await
    }

    async fn until_cancelled<T>(
        &self,
        request: impl Future<Output = Result<T, ClientError>>,
    ) -> Result<T, ClientError> {
        tokio::select! {
            answer = request => answer,
            () = self.signal.cancelled() => Err(ClientError::Cancelled),
        }
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

    pub fn take_deferred(&self) -> Vec<AdditionalContext> {
        std::mem::take(&mut *self.inner.deferred.lock())
    }

    pub fn concluded(&self) -> bool {
        self.inner.concluded.load(Ordering::SeqCst)
    }

    /// The same call with another signal; deferred contexts and `conclude_turn` stay shared.
    pub fn with_signal(&self, signal: CancellationToken) -> ToolExec {
        ToolExec {
            inner: self.inner.clone(),
            signal,
        }
    }
}
