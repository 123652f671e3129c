//! The channel from one call back to the client that made it: log messages, sampling,
//! elicitation and `roots/list` requests. Only a call served over MCP has a client behind it; every other call
//! gets [`ClientError::NoClient`] at once. Approvals that ask the person reach them the same way.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::result::ContentBlock;

/// Why a request to the call's client got no answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ClientError {
    /// The call has no client to ask: it was not made over MCP (a native call, a test's
    /// [`ToolExec::detached`](crate::ToolExec::detached)).
    #[error("this call has no client to ask (it was not made over MCP)")]
    NoClient,
    /// The client did not declare the capability (`sampling`, `elicitation`, `roots`), at
    /// `initialize` or in the request's `_meta`, so it cannot answer; nothing was sent. A call
    /// served over MCP 2026-07-28 that fails after this is answered with the protocol's
    /// `MissingRequiredClientCapabilityError` (-32021) naming the capability.
    #[error("the client does not support {0} (it did not declare the capability)")]
    Unsupported(&'static str),
    /// The request is not one the protocol can carry, for the reason given (e.g. an
    /// elicitation schema with a property that is not a primitive type).
    #[error("invalid client request: {0}")]
    Invalid(String),
    /// The client answered with an error, or the transport failed while waiting.
    #[error("the client request failed: {0}")]
    Failed(String),
    /// The call was cancelled while it waited for the client.
    #[error("the call was cancelled while waiting for the client")]
    Cancelled,
}

/// The severity of a log message, as MCP's `notifications/message` names them (the syslog
/// severities of RFC 5424), least severe first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogLevel {
    /// Detailed debugging information.
    Debug,
    /// Normal operational messages.
    Info,
    /// Normal but significant events.
    Notice,
    /// Warning conditions.
    Warning,
    /// Error conditions.
    Error,
    /// Critical conditions.
    Critical,
    /// Action must be taken immediately.
    Alert,
    /// The system is unusable.
    Emergency,
}

/// Who wrote a sampling message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// The user (the prompt).
    User,
    /// The model.
    Assistant,
}

/// One message of a [`SamplingRequest`]: a role and one content block (text, image or audio).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SamplingMessage {
    /// Who wrote it.
    pub role: Role,
    /// What it says.
    pub content: ContentBlock,
}

/// A request that the client's model complete a conversation (MCP `sampling/createMessage`).
/// The client may show it to the person and change or refuse it.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct SamplingRequest {
    /// The conversation so far, oldest first.
    pub messages: Vec<SamplingMessage>,
    /// The most tokens the client's model may generate.
    pub max_tokens: u32,
    /// A system prompt the client may use.
    pub system_prompt: Option<String>,
    /// Sampling temperature the client may use.
    pub temperature: Option<f32>,
    /// The key of this request in an MCP 2026-07-28 `input_required` result
    /// ([`SamplingRequest::input_key`]).
    pub input_key: Option<String>,
}

impl SamplingRequest {
    /// One user message of text, answered in at most `max_tokens` tokens.
    pub fn user_text(text: impl Into<String>, max_tokens: u32) -> Self {
        SamplingRequest {
            messages: vec![SamplingMessage {
                role: Role::User,
                content: ContentBlock::text(text),
            }],
            max_tokens,
            system_prompt: None,
            temperature: None,
            input_key: None,
        }
    }

    /// Names this request `key` in the `inputRequests` of an MCP 2026-07-28 `input_required`
    /// result, where the client answers it under the same key (SEP-2322). Without one, or
    /// when another request of the same round has the key, the server names it `input-N`.
    pub fn input_key(mut self, key: impl Into<String>) -> Self {
        self.input_key = Some(key.into());
        self
    }

    /// Sets [`SamplingRequest::system_prompt`].
    pub fn system_prompt(mut self, prompt: impl Into<String>) -> Self {
        self.system_prompt = Some(prompt.into());
        self
    }
}

/// The client's answer to a [`SamplingRequest`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct SamplingReply {
    /// Who wrote it (normally [`Role::Assistant`]).
    pub role: Role,
    /// What the model answered.
    pub content: ContentBlock,
    /// The model the client used, as the client names it.
    pub model: String,
    /// Why generation stopped (`endTurn`, `maxTokens`, `stopSequence`, or the client's own).
    pub stop_reason: Option<String>,
}

impl SamplingReply {
    /// The answer `content` written by `role` with `model`, stopped for `stop_reason`.
    pub fn new(
        role: Role,
        content: ContentBlock,
        model: impl Into<String>,
        stop_reason: Option<String>,
    ) -> Self {
        SamplingReply {
            role,
            content,
            model: model.into(),
            stop_reason,
        }
    }
}

/// A request for input from the person behind the client (MCP `elicitation/create`, form
/// mode, protocol 2025-06-18 on).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct ElicitationRequest {
    /// What the person is asked, shown by the client.
    pub message: String,
    /// The JSON Schema of the answer: `{"type": "object", "properties": {…}}` whose properties
    /// are primitive (string, number, integer, boolean, or an enum of strings, single- or
    /// multi-select), optionally with `default`s and `required`.
    pub requested_schema: Value,
    /// The key of this request in an MCP 2026-07-28 `input_required` result
    /// ([`ElicitationRequest::input_key`]).
    pub input_key: Option<String>,
}

impl ElicitationRequest {
    /// Asks `message`, the answer shaped by `requested_schema`.
    pub fn new(message: impl Into<String>, requested_schema: Value) -> Self {
        ElicitationRequest {
            message: message.into(),
            requested_schema,
            input_key: None,
        }
    }

    /// Names this request `key` in the `inputRequests` of an MCP 2026-07-28 `input_required`
    /// result, where the client answers it under the same key (SEP-2322). Without one, or
    /// when another request of the same round has the key, the server names it `input-N`.
    pub fn input_key(mut self, key: impl Into<String>) -> Self {
        self.input_key = Some(key.into());
        self
    }
}

/// A request for the client's roots (MCP `roots/list`): the directories or files the person
/// shared with the client, which bound what a tool should touch.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct RootsRequest {
    /// The key of this request in an MCP 2026-07-28 `input_required` result
    /// ([`RootsRequest::input_key`]).
    pub input_key: Option<String>,
}

impl RootsRequest {
    /// Asks for every root.
    pub fn new() -> Self {
        RootsRequest::default()
    }

    /// Names this request `key` in the `inputRequests` of an MCP 2026-07-28 `input_required`
    /// result, where the client answers it under the same key (SEP-2322). Without one, or
    /// when another request of the same round has the key, the server names it `input-N`.
    pub fn input_key(mut self, key: impl Into<String>) -> Self {
        self.input_key = Some(key.into());
        self
    }
}

/// One root the client shares (MCP `Root`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Root {
    /// Where it is: a `file://` URI.
    pub uri: String,
    /// A name for people, when the client gives one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

impl Root {
    /// A root at `uri` (a `file://` URI), named `name` when the client gives one.
    pub fn new(uri: impl Into<String>, name: Option<String>) -> Self {
        Root {
            uri: uri.into(),
            name,
        }
    }
}

/// What the person did with an [`ElicitationRequest`].
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Elicitation {
    /// Answered, with the values of the requested properties.
    Accept(Map<String, Value>),
    /// Said no.
    Decline,
    /// Dismissed the request without choosing.
    Cancel,
}

/// What a transport that serves calls provides to reach its client.
pub trait ClientPeer: Send + Sync {
    /// `true` when the client declared the `sampling` capability.
    fn can_sample(&self) -> bool;
    /// `true` when the client declared the `elicitation` capability.
    fn can_elicit(&self) -> bool;
    /// `true` when the client declared the `roots` capability.
    fn can_list_roots(&self) -> bool;
    /// Notes that the call needed `capability`, which the client did not declare.
    fn missing(&self, capability: &'static str);
    /// Sends a log message (dropped when below the level the client set).
    fn log(&self, level: LogLevel, data: Value) -> BoxFuture<'_, Result<(), ClientError>>;
    /// Sends a sampling request and waits for its answer.
    fn sample(&self, request: SamplingRequest)
    -> BoxFuture<'_, Result<SamplingReply, ClientError>>;
    /// Sends an elicitation request and waits for its answer.
    fn elicit(
        &self,
        request: ElicitationRequest,
    ) -> BoxFuture<'_, Result<Elicitation, ClientError>>;
    /// Sends a `roots/list` request and waits for its answer.
    fn list_roots(&self, request: RootsRequest) -> BoxFuture<'_, Result<Vec<Root>, ClientError>>;
    /// Ends the stream that carries the call's answer, telling the client to reconnect after
    /// `retry`, and waits until it has resumed that stream; `false` at once when the call's
    /// answer travels no resumable stream. The default has none.
    fn close_stream(&self, retry: Duration) -> BoxFuture<'_, Result<bool, ClientError>> {
        let _ = retry;
        Box::pin(async { Ok(false) })
    }
}

/// The way from one call to the client that made it, if any. Cheap to clone; carried by
/// [`ToolCall::client`](crate::ToolCall::client) into the call's
/// [`ToolCallView`](crate::ToolCallView) (where hooks and approvers see it) and
/// [`ToolExec`](crate::ToolExec) (where the body uses it). The default has no client.
#[derive(Clone, Default)]
pub struct ClientChannel {
    peer: Option<Arc<dyn ClientPeer>>,
}

impl fmt::Debug for ClientChannel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClientChannel")
            .field("connected", &self.is_connected())
            .field("can_sample", &self.can_sample())
            .field("can_elicit", &self.can_elicit())
            .field("can_list_roots", &self.can_list_roots())
            .finish()
    }
}

impl ClientChannel {
    /// A channel to the client `peer` reaches (a transport that serves calls makes one).
    pub fn new(peer: Arc<dyn ClientPeer>) -> Self {
        ClientChannel { peer: Some(peer) }
    }

    /// `true` when a client is behind the call (it was made over MCP).
    pub fn is_connected(&self) -> bool {
        self.peer.is_some()
    }

    /// `true` when the client can answer [`ClientChannel::sample`].
    pub fn can_sample(&self) -> bool {
        self.peer.as_ref().is_some_and(|peer| peer.can_sample())
    }

    /// `true` when the client can answer [`ClientChannel::elicit`].
    pub fn can_elicit(&self) -> bool {
        self.peer.as_ref().is_some_and(|peer| peer.can_elicit())
    }

    /// `true` when the client can answer [`ClientChannel::list_roots`].
    pub fn can_list_roots(&self) -> bool {
        self.peer.as_ref().is_some_and(|peer| peer.can_list_roots())
    }

    /// Sends a log message (`data`: any JSON, usually a string) to the client
    /// (`notifications/message`); one below the level the client set with `logging/setLevel`
    /// is dropped and counts as sent.
    ///
    /// # Errors
    /// [`ClientError::NoClient`] without a client; [`ClientError::Failed`] when the transport
    /// is gone.
    pub async fn log(&self, level: LogLevel, data: impl Into<Value>) -> Result<(), ClientError> {
        self.peer()?.log(level, data.into()).await
    }

    /// Asks the client's model to complete `request` (`sampling/createMessage`) and waits for
    /// the answer, for as long as the client takes: bound it with the call's signal or
    /// timeout ([`ToolExec::sample`](crate::ToolExec::sample) does the first).
    ///
    /// # Errors
    /// [`ClientError::NoClient`], [`ClientError::Unsupported`] (`"sampling"`) at once without
    /// sending; [`ClientError::Invalid`] for a request the protocol cannot carry;
    /// [`ClientError::Failed`] when the client answers with an error.
    pub async fn sample(&self, request: SamplingRequest) -> Result<SamplingReply, ClientError> {
        let peer = self.peer()?;
        if !peer.can_sample() {
            peer.missing("sampling");
            return Err(ClientError::Unsupported("sampling"));
        }
        peer.sample(request).await
    }

    /// Asks the person behind the client for input (`elicitation/create`) and waits for the
    /// answer, for as long as they take: bound it with the call's signal or timeout
    /// ([`ToolExec::elicit`](crate::ToolExec::elicit) does the first).
    ///
    /// # Errors
    /// [`ClientError::NoClient`], [`ClientError::Unsupported`] (`"elicitation"`) at once
    /// without sending; [`ClientError::Invalid`] for a schema the protocol cannot carry;
    /// [`ClientError::Failed`] when the client answers with an error.
    pub async fn elicit(&self, request: ElicitationRequest) -> Result<Elicitation, ClientError> {
        let peer = self.peer()?;
        if !peer.can_elicit() {
            peer.missing("elicitation");
            return Err(ClientError::Unsupported("elicitation"));
        }
        peer.elicit(request).await
    }

    /// Asks the client for its roots (`roots/list`) and waits for the answer, for as long as
    /// the client takes: bound it with the call's signal or timeout
    /// ([`ToolExec::list_roots`](crate::ToolExec::list_roots) does the first).
    ///
    /// # Errors
    /// [`ClientError::NoClient`], [`ClientError::Unsupported`] (`"roots"`) at once without
    /// sending; [`ClientError::Failed`] when the client answers with an error or with
    /// something that is not a list of roots.
    pub async fn list_roots(&self, request: RootsRequest) -> Result<Vec<Root>, ClientError> {
        let peer = self.peer()?;
        if !peer.can_list_roots() {
            peer.missing("roots");
            return Err(ClientError::Unsupported("roots"));
        }
        peer.list_roots(request).await
    }

    /// Ends the server-sent-events stream that carries this call's answer before the answer
    /// is ready, with `retry` as the time the client should wait before it reconnects, and
    /// waits until the client has resumed the stream (an HTTP GET with `Last-Event-ID`, MCP's
    /// SSE polling of SEP-1699); the answer then goes on the resumed stream. A server does
    /// this to free a connection during a long call. It waits for as long as the client
    /// takes: bound it with the call's signal or timeout
    /// ([`ToolExec::close_stream`](crate::ToolExec::close_stream) does the first).
    ///
    /// Returns `false` at once, closing nothing, when the answer travels no resumable stream:
    /// over stdio, as a JSON response, or on a request outside a session (stateless 2026-07-28
    /// requests have no stream to resume).
    ///
    /// # Errors
    /// [`ClientError::NoClient`] without a client; [`ClientError::Failed`] when the session is
    /// gone.
    pub async fn close_stream(&self, retry: Duration) -> Result<bool, ClientError> {
        self.peer()?.close_stream(retry).await
    }

    fn peer(&self) -> Result<&Arc<dyn ClientPeer>, ClientError> {
        self.peer.as_ref().ok_or(ClientError::NoClient)
    }
}
