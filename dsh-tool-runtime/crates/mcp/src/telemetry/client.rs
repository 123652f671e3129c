//! The `CLIENT` spans of what an MCP client sends and the `SERVER` spans of what its server
//! sends it, kept by the connection's transport.

use rmcp::model::{ConstString, MetaObject};
use tracing::Span;
use tracing::field::Empty;

use super::session::Session;
use super::{
    HTTP, PIPE, TCP, extract, failed, inject, notification_method, operation, record_prompt,
    record_resource, request_method, resource_uri, server_notification_method, span_name,
};

/// The server a client's spans name: `network.transport`, and over HTTP `server.address`,
/// `server.port` and `network.protocol.name`.
#[derive(Clone, Debug)]
pub(crate) struct ClientPeer {
    /// The name the server was added under (`dsh.mcp.server`).
    pub(crate) server: String,
    /// `pipe` for stdio, `tcp` for HTTP.
    pub(crate) transport: &'static str,
    pub(crate) address: Option<String>,
    pub(crate) port: Option<u16>,
}

impl ClientPeer {
    /// The peer of a stdio server.
    pub(crate) fn stdio(server: &str) -> Self {
        ClientPeer {
            server: server.to_owned(),
            transport: PIPE,
            address: None,
            port: None,
        }
    }

    /// The peer of a streamable HTTP server at `url` (the port defaults to 80: the client
    /// speaks plain HTTP only).
    pub(crate) fn http(server: &str, url: &str) -> Self {
        let uri = url.parse::<http::Uri>().ok();
        ClientPeer {
            server: server.to_owned(),
            transport: TCP,
            address: uri.as_ref().and_then(|uri| uri.host()).map(|host| {
                host.trim_start_matches('[')
                    .trim_end_matches(']')
                    .to_owned()
            }),
            port: uri.map(|uri| uri.port_u16().unwrap_or(80)),
        }
    }
}

/// The `CLIENT` span of a request or notification `method` sent to `peer`; `tool` is the tool
/// of a `tools/call`, `protocol_version` the version agreed on (unset before `initialize` is
/// answered).
pub(crate) fn client_span(
    peer: &ClientPeer,
    method: &str,
    tool: Option<&str>,
    protocol_version: Option<&str>,
) -> Span {
    tracing::info_span!(
        "mcp_client",
        otel.name = span_name(method, tool),
        otel.kind = "client",
        otel.status_code = Empty,
        otel.status_description = Empty,
        mcp.method.name = method,
        gen_ai.operation.name = operation(tool),
        gen_ai.tool.name = tool,
        gen_ai.prompt.name = Empty,
        jsonrpc.request.id = Empty,
        mcp.resource.uri = Empty,
        mcp.protocol.version = protocol_version,
        mcp.session.id = Empty,
        network.transport = peer.transport,
        network.protocol.name = (peer.transport == TCP).then_some(HTTP),
        server.address = peer.address.as_deref(),
        // An int attribute: `tracing-opentelemetry` exports an `i64` as one.
        server.port = peer.port.map(i64::from),
        error.type = Empty,
        rpc.response.status_code = Empty,
        dsh.mcp.server = peer.server.as_str(),
    )
}

/// The `Mcp-Session-Id` of a streamable HTTP connection, as its HTTP client last saw it
/// (`mcp.session.id` of the client's spans).
pub(crate) type SessionCell = std::sync::Arc<parking_lot::Mutex<Option<std::sync::Arc<str>>>>;

/// Records `session`'s id as `mcp.session.id` on a client span, once there is one.
pub(crate) fn record_session(span: &Span, session: &SessionCell) {
    if span.is_disabled() {
        return;
    }
    if let Some(id) = session.lock().clone() {
        span.record("mcp.session.id", &*id);
    }
}

/// Most requests a client keeps spans open for: a server that never answers cannot grow the
/// map past it (the requests after go untraced until answers come).
const OPEN_SPANS: usize = 1024;

/// The `CLIENT` spans of what a connection sends, but for `tools/call`, whose span the call
/// makes itself ([`client_span`] in the call's task, so the pipeline's span is its parent):
/// opened as a request is written, with its trace context put in its `_meta`, and closed by its
/// answer. A notification's span ends as it is sent (nothing answers it). Kept by the
/// connection's transport, which sees every message in both directions.
pub(crate) struct ClientSpans {
    peer: ClientPeer,
    /// The session of an HTTP connection.
    session: Option<SessionCell>,
    /// `mcp.protocol.version`, from the answer to `initialize`.
    pub(super) protocol_version: Option<String>,
    open: std::collections::HashMap<rmcp::model::RequestId, Span>,
    /// The `SERVER` spans of the server's requests to this client (sampling, elicitation,
    /// roots), closed by the client's answer.
    serving: std::collections::HashMap<rmcp::model::RequestId, Span>,
    /// The connection's session, reported when the connection ends.
    lifetime: Session,
}

impl ClientSpans {
    pub(crate) fn new(peer: ClientPeer, session: Option<SessionCell>) -> Self {
        ClientSpans {
            lifetime: Session::start(peer.transport),
            peer,
            session,
            protocol_version: None,
            open: std::collections::HashMap::new(),
            serving: std::collections::HashMap::new(),
        }
    }

    /// A message being written to the server.
    pub(crate) fn sent(&mut self, message: &mut rmcp::model::ClientJsonRpcMessage) {
        use rmcp::model::{ClientJsonRpcMessage, ClientRequest, GetMeta};
        match message {
            ClientJsonRpcMessage::Request(request) => {
                if matches!(request.request, ClientRequest::CallToolRequest(_))
                    || self.open.len() >= OPEN_SPANS
                {
                    return;
                }
                // A 2026-07-28 request names its version in its own `_meta`; `initialize`'s is
                // the one its answer agrees on.
                let version = match &request.request {
                    ClientRequest::InitializeRequest(_) => None,
                    other => other
                        .get_meta()
                        .protocol_version()
                        .map(|version| version.to_string()),
                };
                // The version a 2026-07-28 request names is the session's, for the
                // notifications that follow (there is no `initialize` to agree on one).
                if version.is_some() {
                    self.protocol_version.clone_from(&version);
                }
                let span = client_span(
                    &self.peer,
                    request.request.method(),
                    None,
                    version.as_deref().or(self.protocol_version.as_deref()),
                );
                if span.is_disabled() {
                    return;
                }
                span.record("jsonrpc.request.id", request.id.to_string().as_str());
                match &request.request {
                    ClientRequest::GetPromptRequest(get) => {
                        record_prompt(&span, get.method.as_str(), &get.params.name);
                    }
                    ClientRequest::ReadResourceRequest(read) => {
                        record_resource(&span, &read.params.uri);
                    }
                    ClientRequest::SubscribeRequest(subscribe) => {
                        record_resource(&span, &subscribe.params.uri);
                    }
                    ClientRequest::UnsubscribeRequest(unsubscribe) => {
                        record_resource(&span, &unsubscribe.params.uri);
                    }
                    _ => {}
                }
                self.record_session(&span);
                inject(&span, &mut request.request.get_meta_mut().0);
                self.open.insert(request.id.clone(), span);
            }
            // Ends as it is written, its trace context in the notification's `_meta`.
            ClientJsonRpcMessage::Notification(notification) => {
                let span = client_span(
                    &self.peer,
                    notification_method(&notification.notification),
                    None,
                    self.protocol_version.as_deref(),
                );
                if span.is_disabled() {
                    return;
                }
                self.record_session(&span);
                inject(&span, &mut notification.notification.get_meta_mut().0);
            }
            // The answer to a request of the server closes its span.
            ClientJsonRpcMessage::Response(response) => {
                self.serving.remove(&response.id);
            }
            ClientJsonRpcMessage::Error(error) => {
                if let Some(span) = error.id.as_ref().and_then(|id| self.serving.remove(id)) {
                    failed(&span, None, Some(error.error.code.0), &error.error.message);
                }
            }
        }
    }

    /// Records the connection's session on `span`, once there is one.
    fn record_session(&self, span: &Span) {
        if let Some(session) = &self.session {
            record_session(span, session);
        }
    }

    /// The `SERVER` span of a request (`request_id`) or notification the server sent this
    /// client: the conventions have the side that handles a message report it as a server,
    /// whichever role it has. The child of the trace context in `meta`.
    fn serving_span(&self, method: &str, request_id: Option<String>, meta: &MetaObject) -> Span {
        let span = tracing::info_span!(
            "mcp_server",
            otel.name = method,
            otel.kind = "server",
            otel.status_code = Empty,
            otel.status_description = Empty,
            mcp.method.name = method,
            jsonrpc.request.id = request_id.as_deref(),
            mcp.resource.uri = Empty,
            mcp.protocol.version = self.protocol_version.as_deref(),
            mcp.session.id = Empty,
            network.transport = self.peer.transport,
            network.protocol.name = (self.peer.transport == TCP).then_some(HTTP),
            error.type = Empty,
            rpc.response.status_code = Empty,
            dsh.mcp.server = self.peer.server.as_str(),
        );
        if !span.is_disabled() {
            self.record_session(&span);
            extract(&span, meta);
        }
        span
    }

    /// A message read from the server: the answer closes its request's span; a request of the
    /// server opens a `SERVER` span closed by this client's answer, and a notification is a
    /// `SERVER` span that ends as it is read.
    pub(crate) fn received(&mut self, message: &rmcp::model::ServerJsonRpcMessage) {
        use rmcp::model::{GetMeta, ServerJsonRpcMessage, ServerResult};
        match message {
            ServerJsonRpcMessage::Request(request) => {
                if self.serving.len() >= OPEN_SPANS {
                    return;
                }
                let span = self.serving_span(
                    request_method(&request.request),
                    Some(request.id.to_string()),
                    &request.request.get_meta().0,
                );
                if span.is_disabled() {
                    return;
                }
                self.serving.insert(request.id.clone(), span);
            }
            ServerJsonRpcMessage::Notification(notification) => {
                let notification = &notification.notification;
                let meta = notification.get_meta();
                let method = server_notification_method(notification);
                // A notification on a `subscriptions/listen` stream without a trace context
                // (rmcp's own acknowledgement of the stream, which a server over HTTP cannot
                // give one) is under the span of the listen request, so in its trace.
                let listen = match meta.0.get_traceparent() {
                    None => meta.subscription_id().and_then(|id| self.open.get(&id)),
                    Some(_) => None,
                };
                let span = match listen {
                    Some(listen) => listen.in_scope(|| self.serving_span(method, None, &meta.0)),
                    None => self.serving_span(method, None, &meta.0),
                };
                if let Some(uri) = resource_uri(notification) {
                    span.record("mcp.resource.uri", uri);
                }
            }
            ServerJsonRpcMessage::Response(response) => {
                let span = self.open.remove(&response.id);
                if let Some(span) = &span {
                    // The session of `initialize` comes with its answer.
                    self.record_session(span);
                }
                if let ServerResult::InitializeResult(result) = &response.result {
                    let version = result.protocol_version.to_string();
                    if let Some(span) = &span {
                        span.record("mcp.protocol.version", version.as_str());
                    }
                    self.lifetime.initialized(version.clone(), None);
                    self.protocol_version = Some(version);
                } else {
                    self.lifetime.exchanged(self.protocol_version.as_deref());
                }
            }
            ServerJsonRpcMessage::Error(error) => {
                if let Some(span) = error.id.as_ref().and_then(|id| self.open.remove(id)) {
                    failed(&span, None, Some(error.error.code.0), &error.error.message);
                }
            }
        }
    }
}

/// The connection ended: its session, if it had one, is reported.
impl Drop for ClientSpans {
    fn drop(&mut self) {
        self.lifetime
            .client_ended(self.peer.address.as_deref(), self.peer.port);
    }
}
