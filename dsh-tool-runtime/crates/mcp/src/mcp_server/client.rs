//! The client of a served call, as the call's [`ClientChannel`](crate::ClientChannel) reaches
//! it: rmcp's peer of the session, what the client declared at `initialize`, and the log level it
//! set.

#![allow(deprecated)] // rmcp marks sampling and logging deprecated for the 2026 protocol; they are
// how 2025-era clients (every one that declares the capability) are reached.

use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use parking_lot::Mutex;
use rmcp::model::{
    ClientCapabilities, ClientResult, CreateMessageRequest, CreateMessageRequestParams,
    CreateMessageResult, ElicitRequest, ElicitRequestParams, ElicitResult, ElicitationAction,
    GetMeta, InputRequest, ListRootsRequest, ListRootsResult, LoggingLevel,
    LoggingMessageNotificationParam, Notification, ServerNotification, ServerRequest,
};
use rmcp::service::{PeerRequestOptions, ServiceError};
use rmcp::transport::streamable_http_server::session::local::LocalSessionHandle;
use rmcp::{Peer, RoleServer};
use serde_json::{Map, Value, json};
use tokio::sync::{Notify, mpsc, oneshot};
use tracing::Instrument;

use crate::call::client_channel::ClientPeer;
use crate::call::{
    ClientError, Elicitation, ElicitationRequest, LogLevel, Role, Root, RootsRequest,
    SamplingReply, SamplingRequest,
};
use crate::result::ContentBlock;
use crate::telemetry::{Outbound, failed, inject, notify, outbound_span};

/// The lowest level a session's client wants to hear (`logging/setLevel`); `None` until it
/// sets one, when every message is sent.
pub(crate) type SessionLogLevel = Arc<Mutex<Option<LogLevel>>>;

/// Which log messages a served call may send its client.
pub(crate) enum LogFloor {
    /// A 2025 session: those at or above the level `logging/setLevel` set (all until then).
    Session(SessionLogLevel),
    /// A 2026-07-28 request: those at or above the request's `_meta` `logLevel`; none when it
    /// names none (SEP-2575: a server sends no log message the request did not ask for).
    Request(Option<LogLevel>),
}

/// One served call's way back to its client.
pub(crate) struct McpClientPeer {
    pub(crate) peer: Peer<RoleServer>,
    pub(crate) level: LogFloor,
    /// What the client declared: at `initialize` (2025 sessions) or in this request's `_meta`
    /// (2026-07-28).
    pub(crate) capabilities: Option<ClientCapabilities>,
    /// On a 2026-07-28 request, where requests for the client go: the protocol forbids
    /// server-to-client requests there, so each becomes an `input_required` round of the call
    /// (`super::rounds`). `None` on 2025 sessions, which send them as requests.
    pub(crate) rounds: Option<mpsc::Sender<InputAsk>>,
    /// The first capability the call needed and the client had not declared, if any.
    pub(crate) missing: Arc<Mutex<Option<&'static str>>>,
    /// The session the requests to the client go over, for their spans.
    pub(crate) outbound: Outbound,
    /// The resumable stream the call's answer goes on, on a stateful HTTP session.
    pub(crate) stream: Option<ResponseStream>,
}

/// The server-sent-events stream of one request on a stateful HTTP session, which the server
/// may end before its answer for the client to resume with `Last-Event-ID` (SEP-1699). rmcp
/// keeps the stream's events and replays those after the client's last on resumption; the
/// HTTP layer (`super::http`) puts one in the request's extensions and tells `resumed` when
/// the client resumes it.
#[derive(Clone)]
pub(crate) struct ResponseStream {
    pub(crate) session: LocalSessionHandle,
    /// rmcp's number of the request's stream in its session (the `N` of its event ids `i/N`).
    pub(crate) http_request_id: u64,
    pub(crate) resumed: Arc<Notify>,
}

/// One request for the client, to be carried by an `input_required` result; the client's
/// answer (its raw result object) comes back through `reply`.
pub(crate) struct InputAsk {
    /// The key the tool chose for it, if any.
    pub(crate) key: Option<String>,
    pub(crate) request: InputRequest,
    pub(crate) reply: oneshot::Sender<Value>,
}

impl McpClientPeer {
    /// Sends `request` (`method`) to the client in a `CLIENT` span, its trace context in the
    /// request's `_meta`, and waits for the answer.
    async fn ask(
        &self,
        method: &str,
        mut request: ServerRequest,
    ) -> Result<ClientResult, ClientError> {
        let span = outbound_span(method, &self.outbound);
        inject(&span, &mut request.get_meta_mut().0);
        let answer = async {
            let handle = self
                .peer
                .send_cancellable_request(request, PeerRequestOptions::no_options())
                .await?;
            tracing::Span::current().record("jsonrpc.request.id", handle.id.to_string().as_str());
            handle.await_response().await
        }
        .instrument(span.clone())
        .await;
        answer.map_err(|error| {
            match &error {
                ServiceError::McpError(data) => {
                    failed(&span, None, Some(data.code.0), &data.message);
                }
                other => failed(&span, None, None, &other.to_string()),
            }
            ClientError::Failed(error.to_string())
        })
    }

    fn declared(&self, pick: impl Fn(&ClientCapabilities) -> bool) -> bool {
        self.capabilities.as_ref().is_some_and(pick)
    }

    /// Sends `request` as an `input_required` round and waits for the client's answer.
    async fn round(
        &self,
        rounds: &mpsc::Sender<InputAsk>,
        key: Option<String>,
        request: Value,
    ) -> Result<Value, ClientError> {
        let request: InputRequest = serde_json::from_value(request)
            .map_err(|error| ClientError::Invalid(error.to_string()))?;
        let (reply, answer) = oneshot::channel();
        let gone = || ClientError::Failed("the client did not answer the input request".into());
        rounds
            .send(InputAsk {
                key,
                request,
                reply,
            })
            .await
            .map_err(|_| gone())?;
        answer.await.map_err(|_| gone())
    }
}

impl ClientPeer for McpClientPeer {
    fn close_stream(&self, retry: Duration) -> BoxFuture<'_, Result<bool, ClientError>> {
        Box::pin(async move {
            let Some(stream) = &self.stream else {
                return Ok(false);
            };
            stream
                .session
                .close_sse_stream(stream.http_request_id, Some(retry))
                .await
                .map_err(|error| ClientError::Failed(format!("closing the stream: {error}")))?;
            // A resumption that came first left its permit: this returns at once.
            stream.resumed.notified().await;
            Ok(true)
        })
    }

    fn can_sample(&self) -> bool {
        self.declared(|capabilities| capabilities.sampling.is_some())
    }

    fn can_elicit(&self) -> bool {
        self.declared(|capabilities| capabilities.elicitation.is_some())
    }

    fn can_list_roots(&self) -> bool {
        self.declared(|capabilities| capabilities.roots.is_some())
    }

    fn missing(&self, capability: &'static str) {
        self.missing.lock().get_or_insert(capability);
    }

    fn log(&self, level: LogLevel, data: Value) -> BoxFuture<'_, Result<(), ClientError>> {
        Box::pin(async move {
            let heard = match &self.level {
                LogFloor::Session(floor) => floor.lock().is_none_or(|floor| level >= floor),
                LogFloor::Request(floor) => floor.is_some_and(|floor| level >= floor),
            };
            if !heard {
                return Ok(());
            }
            let params = LoggingMessageNotificationParam::new(logging_level(level), data);
            let notification =
                ServerNotification::LoggingMessageNotification(Notification::new(params));
            notify(&self.peer, &self.outbound, notification)
                .await
                .map_err(|error| ClientError::Failed(error.to_string()))
        })
    }

    fn sample(
        &self,
        request: SamplingRequest,
    ) -> BoxFuture<'_, Result<SamplingReply, ClientError>> {
        Box::pin(async move {
            let key = request.input_key.clone();
            let params: CreateMessageRequestParams =
                serde_json::from_value(wire_sampling(&request))
                    .map_err(|error| ClientError::Invalid(error.to_string()))?;
            let answer = match &self.rounds {
                Some(rounds) => {
                    let request = json!({ "method": "sampling/createMessage", "params": params });
                    let answer = self.round(rounds, key, request).await?;
                    serde_json::from_value::<CreateMessageResult>(answer).map_err(|error| {
                        ClientError::Failed(format!("the client's sampling answer: {error}"))
                    })?
                }
                None => {
                    // What rmcp's `create_message` checks before sending.
                    if (params.tools.is_some() || params.tool_choice.is_some())
                        && !self.peer.supports_sampling_tools()
                    {
                        return Err(ClientError::Invalid(
                            "tools or toolChoice provided but the client does not support \
                             sampling tools"
                                .into(),
                        ));
                    }
                    params.validate().map_err(ClientError::Invalid)?;
                    let request =
                        ServerRequest::CreateMessageRequest(CreateMessageRequest::new(params));
                    match self.ask("sampling/createMessage", request).await? {
                        ClientResult::CreateMessageResult(result) => *result,
                        _ => return Err(unexpected()),
                    }
                }
            };
            sampling_reply(answer)
        })
    }

    fn elicit(
        &self,
        request: ElicitationRequest,
    ) -> BoxFuture<'_, Result<Elicitation, ClientError>> {
        Box::pin(async move {
            let key = request.input_key.clone();
            let params: ElicitRequestParams = serde_json::from_value(json!({
                "mode": "form",
                "message": request.message,
                "requestedSchema": request.requested_schema,
            }))
            .map_err(|error| ClientError::Invalid(format!("elicitation schema: {error}")))?;
            let answer = match &self.rounds {
                Some(rounds) => {
                    let request = json!({ "method": "elicitation/create", "params": params });
                    let answer = self.round(rounds, key, request).await?;
                    serde_json::from_value::<ElicitResult>(answer).map_err(|error| {
                        ClientError::Failed(format!("the client's elicitation answer: {error}"))
                    })?
                }
                None => {
                    let request = ServerRequest::ElicitRequest(ElicitRequest::new(params));
                    match self.ask("elicitation/create", request).await? {
                        ClientResult::ElicitResult(result) => result,
                        _ => return Err(unexpected()),
                    }
                }
            };
            Ok(match answer.action {
                ElicitationAction::Accept => Elicitation::Accept(match answer.content {
                    Some(Value::Object(values)) => values,
                    Some(other) => {
                        return Err(ClientError::Failed(format!(
                            "the client accepted with content that is not an object: {other}"
                        )));
                    }
                    None => Map::new(),
                }),
                ElicitationAction::Decline => Elicitation::Decline,
                ElicitationAction::Cancel => Elicitation::Cancel,
                // An action of a later protocol is not an answer: the request was not accepted.
                _ => Elicitation::Cancel,
            })
        })
    }

    fn list_roots(&self, request: RootsRequest) -> BoxFuture<'_, Result<Vec<Root>, ClientError>> {
        Box::pin(async move {
            let answer = match &self.rounds {
                Some(rounds) => {
                    let ask = json!({ "method": "roots/list", "params": {} });
                    let answer = self.round(rounds, request.input_key, ask).await?;
                    serde_json::from_value::<ListRootsResult>(answer).map_err(|error| {
                        ClientError::Failed(format!("the client's roots answer: {error}"))
                    })?
                }
                None => {
                    let request = ServerRequest::ListRootsRequest(ListRootsRequest::default());
                    match self.ask("roots/list", request).await? {
                        ClientResult::ListRootsResult(result) => result,
                        _ => return Err(unexpected()),
                    }
                }
            };
            Ok(answer
                .roots
                .into_iter()
                .map(|root| Root::new(root.uri, root.name))
                .collect())
        })
    }
}

/// An answer of another kind than the request's.
fn unexpected() -> ClientError {
    ClientError::Failed(ServiceError::UnexpectedResponse.to_string())
}

/// rmcp's level of ours (the same eight syslog severities).
pub(crate) fn logging_level(level: LogLevel) -> LoggingLevel {
    match level {
        LogLevel::Debug => LoggingLevel::Debug,
        LogLevel::Info => LoggingLevel::Info,
        LogLevel::Notice => LoggingLevel::Notice,
        LogLevel::Warning => LoggingLevel::Warning,
        LogLevel::Error => LoggingLevel::Error,
        LogLevel::Critical => LoggingLevel::Critical,
        LogLevel::Alert => LoggingLevel::Alert,
        LogLevel::Emergency => LoggingLevel::Emergency,
    }
}

/// Our level of rmcp's.
pub(crate) fn log_level(level: LoggingLevel) -> LogLevel {
    match level {
        LoggingLevel::Debug => LogLevel::Debug,
        LoggingLevel::Info => LogLevel::Info,
        LoggingLevel::Notice => LogLevel::Notice,
        LoggingLevel::Warning => LogLevel::Warning,
        LoggingLevel::Error => LogLevel::Error,
        LoggingLevel::Critical => LogLevel::Critical,
        LoggingLevel::Alert => LogLevel::Alert,
        LoggingLevel::Emergency => LogLevel::Emergency,
    }
}

/// `sampling/createMessage` params as the MCP schema spells them.
fn wire_sampling(request: &SamplingRequest) -> Value {
    let messages: Vec<Value> = request
        .messages
        .iter()
        .map(|message| {
            json!({
                "role": match message.role { Role::User => "user", Role::Assistant => "assistant" },
                "content": wire_block(&message.content),
            })
        })
        .collect();
    let mut params = json!({ "messages": messages, "maxTokens": request.max_tokens });
    if let Some(prompt) = &request.system_prompt {
        params["systemPrompt"] = json!(prompt);
    }
    if let Some(temperature) = request.temperature {
        params["temperature"] = json!(temperature);
    }
    params
}

/// One content block as the MCP schema spells it.
pub(crate) fn wire_block(block: &ContentBlock) -> Value {
    match block {
        ContentBlock::Text { text } => json!({ "type": "text", "text": text }),
        ContentBlock::Image { media_type, data } => {
            json!({ "type": "image", "data": data, "mimeType": media_type })
        }
        ContentBlock::Audio { media_type, data } => {
            json!({ "type": "audio", "data": data, "mimeType": media_type })
        }
        ContentBlock::Resource {
            uri,
            media_type,
            contents,
        } => {
            let mut resource = json!({ "uri": uri });
            if let Some(media_type) = media_type {
                resource["mimeType"] = json!(media_type);
            }
            match contents {
                crate::result::ResourceContents::Text(text) => resource["text"] = json!(text),
                crate::result::ResourceContents::Blob(blob) => resource["blob"] = json!(blob),
            }
            json!({ "type": "resource", "resource": resource })
        }
        // A block kind this version has no MCP form for: its text.
        other => json!({
            "type": "text",
            "text": crate::result::blocks_text(std::slice::from_ref(other)),
        }),
    }
}

fn sampling_reply(answer: CreateMessageResult) -> Result<SamplingReply, ClientError> {
    let message = serde_json::to_value(&answer.message)
        .map_err(|error| ClientError::Failed(error.to_string()))?;
    let role = match message.get("role").and_then(Value::as_str) {
        Some("assistant") => Role::Assistant,
        _ => Role::User,
    };
    // One block, or the first of several (SEP-1577 allows a list).
    let block = match message.get("content") {
        Some(Value::Array(blocks)) => blocks.first().cloned(),
        other => other.cloned(),
    }
    .unwrap_or(Value::Null);
    let content = match block.get("type").and_then(Value::as_str) {
        Some("text") => ContentBlock::text(
            block
                .get("text")
                .and_then(Value::as_str)
                .unwrap_or_default(),
        ),
        Some(kind @ ("image" | "audio")) => {
            let media_type = block
                .get("mimeType")
                .and_then(Value::as_str)
                .unwrap_or("application/octet-stream")
                .to_owned();
            let data = block
                .get("data")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned();
            if kind == "image" {
                ContentBlock::Image { media_type, data }
            } else {
                ContentBlock::Audio { media_type, data }
            }
        }
        other => {
            return Err(ClientError::Failed(format!(
                "the client's sampling answer has content of type {other:?}, not text, image or audio"
            )));
        }
    };
    Ok(SamplingReply::new(
        role,
        content,
        answer.model,
        answer.stop_reason,
    ))
}
