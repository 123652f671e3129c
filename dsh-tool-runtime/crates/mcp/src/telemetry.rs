//! The MCP spans of every request and notification, as the client sends them and as the
//! server serves them, and the trace context carried in a request's `params._meta`.
//!
//! Names and attributes follow the MCP conventions of [`SEMCONV`](dsh_tool_runtime::telemetry::SEMCONV): a span is
//! named `{mcp.method.name}`, or `{mcp.method.name} {gen_ai.tool.name}` for `tools/call`.

use rmcp::model::MetaObject;
use rmcp::model::{ClientNotification, ConstString, ServerNotification};
use serde_json::Value;
use tracing::Span;
use tracing::field::Empty;

use dsh_tool_runtime::telemetry::{OTHER_ERROR, propagator};

/// `mcp.method.name` of a tool call.
pub(crate) const TOOLS_CALL: &str = "tools/call";

/// `error.type` of a `tools/call` answered with `isError: true`, as the MCP conventions say.
pub(crate) const TOOL_ERROR: &str = "tool_error";

/// `network.transport` of a stdio connection.
pub(crate) const PIPE: &str = "pipe";

/// `network.transport` of a streamable HTTP connection.
pub(crate) const TCP: &str = "tcp";

/// `network.protocol.name` of a streamable HTTP connection.
const HTTP: &str = "http";

/// A span's name: the method, and the tool it calls when there is one.
fn span_name(method: &str, tool: Option<&str>) -> String {
    match tool {
        Some(tool) => format!("{method} {tool}"),
        None => method.to_owned(),
    }
}

/// `gen_ai.operation.name`: `execute_tool` for a tool call, unset otherwise (the conventions
/// say it SHOULD NOT be set for other methods).
fn operation(tool: Option<&str>) -> Option<&'static str> {
    tool.map(|_| "execute_tool")
}

/// Records the prompt a `prompts/get` is about: `gen_ai.prompt.name`, and the span's name
/// `prompts/get {gen_ai.prompt.name}` as the conventions name it.
pub(crate) fn record_prompt(span: &Span, method: &str, prompt: &str) {
    if span.is_disabled() {
        return;
    }
    span.record("gen_ai.prompt.name", prompt);
    span.record("otel.name", span_name(method, Some(prompt)).as_str());
}

/// Records the resource a request is about (`resources/read`, `resources/subscribe`,
/// `resources/unsubscribe`) as `mcp.resource.uri`; the span's name leaves it out, as the
/// conventions advise by default (a URI is no low-cardinality name).
pub(crate) fn record_resource(span: &Span, uri: &str) {
    if span.is_disabled() {
        return;
    }
    span.record("mcp.resource.uri", uri);
}

/// The method of a notification the client sends.
pub(crate) fn notification_method(notification: &ClientNotification) -> &str {
    match notification {
        ClientNotification::CancelledNotification(n) => n.method.as_str(),
        ClientNotification::ProgressNotification(n) => n.method.as_str(),
        ClientNotification::InitializedNotification(n) => n.method.as_str(),
        ClientNotification::RootsListChangedNotification(n) => n.method.as_str(),
        ClientNotification::CustomNotification(n) => n.method.as_str(),
        // A kind rmcp adds later: the conventions' fallback value.
        _ => OTHER_ERROR,
    }
}

/// The method of a notification the server sends.
pub(crate) fn server_notification_method(notification: &ServerNotification) -> &str {
    match notification {
        ServerNotification::CancelledNotification(n) => n.method.as_str(),
        ServerNotification::ProgressNotification(n) => n.method.as_str(),
        ServerNotification::LoggingMessageNotification(n) => n.method.as_str(),
        ServerNotification::ResourceUpdatedNotification(n) => n.method.as_str(),
        ServerNotification::ResourceListChangedNotification(n) => n.method.as_str(),
        ServerNotification::ToolListChangedNotification(n) => n.method.as_str(),
        ServerNotification::PromptListChangedNotification(n) => n.method.as_str(),
        ServerNotification::SubscriptionsAcknowledgedNotification(n) => n.method.as_str(),
        ServerNotification::TaskStatusNotification(n) => n.method.as_str(),
        ServerNotification::CustomNotification(n) => n.method.as_str(),
        // A kind rmcp adds later: the conventions' fallback value.
        #[allow(unreachable_patterns)]
        _ => OTHER_ERROR,
    }
}

/// `mcp.resource.uri` of a notification the server sends: the conventions require it on
/// `notifications/resources/updated`.
fn resource_uri(notification: &ServerNotification) -> Option<&str> {
    match notification {
        ServerNotification::ResourceUpdatedNotification(n) => Some(n.params.uri.as_str()),
        _ => None,
    }
}

/// The method of a request the server sends its client.
fn request_method(request: &rmcp::model::ServerRequest) -> &str {
    use rmcp::model::ServerRequest;
    match request {
        ServerRequest::PingRequest(r) => r.method.as_str(),
        ServerRequest::CreateMessageRequest(r) => r.method.as_str(),
        ServerRequest::ListRootsRequest(r) => r.method.as_str(),
        ServerRequest::ElicitRequest(r) => r.method.as_str(),
        ServerRequest::CustomRequest(r) => r.method.as_str(),
        // A kind rmcp adds later: the conventions' fallback value.
        #[allow(unreachable_patterns)]
        _ => OTHER_ERROR,
    }
}

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
        otel.status_message = Empty,
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

/// How a request reached the server, for its span.
#[cfg(feature = "server")]
pub(crate) struct Served<'a> {
    /// `jsonrpc.request.id`; `None` for a notification.
    pub(crate) request_id: Option<String>,
    pub(crate) protocol_version: Option<String>,
    /// `mcp.session.id`: the `Mcp-Session-Id` of a streamable HTTP session.
    pub(crate) session: Option<&'a str>,
    /// `pipe` for stdio, `tcp` for HTTP.
    pub(crate) transport: &'static str,
    /// `network.protocol.version` of an HTTP request (`1.1`, `2`).
    pub(crate) http_version: Option<&'static str>,
}

/// The `SERVER` span of a request or notification `method` served here.
#[cfg(feature = "server")]
pub(crate) fn server_span(method: &str, tool: Option<&str>, served: &Served<'_>) -> Span {
    tracing::info_span!(
        "mcp_server",
        otel.name = span_name(method, tool),
        otel.kind = "server",
        otel.status_code = Empty,
        otel.status_message = Empty,
        mcp.method.name = method,
        gen_ai.operation.name = operation(tool),
        gen_ai.tool.name = tool,
        gen_ai.prompt.name = Empty,
        jsonrpc.request.id = served.request_id.as_deref(),
        mcp.resource.uri = Empty,
        mcp.protocol.version = served.protocol_version.as_deref(),
        mcp.session.id = served.session,
        network.transport = served.transport,
        network.protocol.name = served.http_version.map(|_| HTTP),
        network.protocol.version = served.http_version,
        error.type = Empty,
        rpc.response.status_code = Empty,
    )
}

/// The session a served call's requests to its client (sampling, elicitation, roots) go over,
/// for their `CLIENT` spans: the conventions have the side that sends a request report it as
/// a client, whichever role it has.
#[cfg(feature = "server")]
#[derive(Clone, Debug, Default)]
pub(crate) struct Outbound {
    pub(crate) protocol_version: Option<String>,
    /// `mcp.session.id`: the `Mcp-Session-Id` of a streamable HTTP session.
    pub(crate) session: Option<String>,
    /// `pipe` for stdio, `tcp` for HTTP.
    pub(crate) transport: &'static str,
    /// `network.protocol.version` over HTTP.
    pub(crate) http_version: Option<&'static str>,
}

#[cfg(feature = "server")]
impl Outbound {
    /// The session of the request `context` (an HTTP request's `Parts` are in its extensions;
    /// a request without them came over stdio).
    pub(crate) fn of(context: &rmcp::service::RequestContext<rmcp::RoleServer>) -> Self {
        let parts = context.extensions.get::<http::request::Parts>();
        Outbound {
            protocol_version: context
                .protocol_version()
                .map(|version| version.to_string())
                .or_else(|| {
                    context
                        .peer
                        .peer_info()
                        .map(|info| info.protocol_version.to_string())
                }),
            session: parts
                .and_then(|parts| parts.headers.get("mcp-session-id"))
                .and_then(|value| value.to_str().ok())
                .map(str::to_owned),
            transport: if parts.is_some() { TCP } else { PIPE },
            http_version: parts.and_then(|parts| http_version(parts.version)),
        }
    }
}

#[cfg(feature = "server")]
impl Outbound {
    /// The session of the notification `context` (see [`Outbound::of`]).
    pub(crate) fn of_notification(
        context: &rmcp::service::NotificationContext<rmcp::RoleServer>,
    ) -> Self {
        let parts = context.extensions.get::<http::request::Parts>();
        Outbound {
            protocol_version: context
                .peer
                .peer_info()
                .map(|info| info.protocol_version.to_string()),
            session: parts
                .and_then(|parts| parts.headers.get("mcp-session-id"))
                .and_then(|value| value.to_str().ok())
                .map(str::to_owned),
            transport: if parts.is_some() { TCP } else { PIPE },
            http_version: parts.and_then(|parts| http_version(parts.version)),
        }
    }
}

/// The `CLIENT` span of a request `method` the server sends its client during a call (under
/// the call's span); its trace context goes in the request's `_meta`.
#[cfg(feature = "server")]
pub(crate) fn outbound_span(method: &str, outbound: &Outbound) -> Span {
    tracing::info_span!(
        "mcp_client",
        otel.name = method,
        otel.kind = "client",
        otel.status_code = Empty,
        otel.status_message = Empty,
        mcp.method.name = method,
        jsonrpc.request.id = Empty,
        mcp.resource.uri = Empty,
        mcp.protocol.version = outbound.protocol_version.as_deref(),
        mcp.session.id = outbound.session.as_deref(),
        network.transport = outbound.transport,
        network.protocol.name = outbound.http_version.map(|_| HTTP),
        network.protocol.version = outbound.http_version,
        error.type = Empty,
        rpc.response.status_code = Empty,
    )
}

/// The `CLIENT` span of a notification the server sends its client (`notifications/progress`,
/// `notifications/message`, `notifications/tools/list_changed`, …), under the current span; its
/// trace context goes in the notification's `_meta`. It ends once the notification is handed
/// to the transport: nothing answers a notification.
#[cfg(feature = "server")]
pub(crate) fn outbound_notification(
    notification: &mut ServerNotification,
    outbound: &Outbound,
) -> Span {
    use rmcp::model::GetMeta;
    let span = outbound_span(server_notification_method(notification), outbound);
    if span.is_disabled() {
        return span;
    }
    if let Some(uri) = resource_uri(notification) {
        span.record("mcp.resource.uri", uri);
    }
    inject(&span, &mut notification.get_meta_mut().0);
    span
}

/// Sends `notification` to the client through `peer` in its [`outbound_notification`] span.
///
/// # Errors
/// rmcp's, when the client is gone.
#[cfg(feature = "server")]
pub(crate) async fn notify(
    peer: &rmcp::Peer<rmcp::RoleServer>,
    outbound: &Outbound,
    mut notification: ServerNotification,
) -> Result<(), rmcp::ServiceError> {
    use tracing::Instrument;
    let span = outbound_notification(&mut notification, outbound);
    peer.send_notification(notification).instrument(span).await
}

/// Sends `notification` on a `subscriptions/listen` stream in its [`outbound_notification`]
/// span.
///
/// # Errors
/// rmcp's, when the stream ended or did not ask for it.
#[cfg(feature = "server")]
pub(crate) async fn notify_listener(
    sink: &rmcp::service::SubscriptionSink,
    outbound: &Outbound,
    mut notification: ServerNotification,
) -> Result<(), rmcp::service::SubscriptionSendError> {
    use tracing::Instrument;
    let span = outbound_notification(&mut notification, outbound);
    sink.send(notification).instrument(span).await
}

/// `network.protocol.version` of an HTTP version, as the conventions write it.
#[cfg(feature = "server")]
pub(crate) fn http_version(version: http::Version) -> Option<&'static str> {
    Some(match version {
        http::Version::HTTP_09 => "0.9",
        http::Version::HTTP_10 => "1.0",
        http::Version::HTTP_11 => "1.1",
        http::Version::HTTP_2 => "2",
        http::Version::HTTP_3 => "3",
        _ => return None,
    })
}

/// Writes `span`'s trace context into a request's `_meta` (nothing without a propagator).
pub(crate) fn inject(span: &Span, meta: &mut MetaObject) {
    if span.is_disabled() {
        return;
    }
    if let Some(propagator) = propagator() {
        propagator.inject(span, &mut |key, value| {
            meta.0.insert(key.to_owned(), Value::String(value));
        });
    }
}

/// Makes `span` a child of the trace context in a request's `_meta`, when it has one.
pub(crate) fn extract(span: &Span, meta: &MetaObject) {
    if span.is_disabled() || meta.get_traceparent().is_none() {
        return;
    }
    if let Some(propagator) = propagator() {
        propagator.set_parent(span, &|key| {
            meta.0.get(key).and_then(Value::as_str).map(str::to_owned)
        });
    }
}

/// Records a failed request: `error.type` (a JSON-RPC error code also as
/// `rpc.response.status_code`) and the error status.
pub(crate) fn failed(span: &Span, error_type: Option<&str>, rpc_code: Option<i32>, message: &str) {
    if span.is_disabled() {
        return;
    }
    let rpc_code = rpc_code.map(|code| code.to_string());
    if let Some(code) = &rpc_code {
        span.record("rpc.response.status_code", code.as_str());
    }
    span.record(
        "error.type",
        error_type.or(rpc_code.as_deref()).unwrap_or(OTHER_ERROR),
    );
    span.record("otel.status_code", "error");
    span.record("otel.status_message", message);
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
    protocol_version: Option<String>,
    open: std::collections::HashMap<rmcp::model::RequestId, Span>,
    /// The `SERVER` spans of the server's requests to this client (sampling, elicitation,
    /// roots), closed by the client's answer.
    serving: std::collections::HashMap<rmcp::model::RequestId, Span>,
}

impl ClientSpans {
    pub(crate) fn new(peer: ClientPeer, session: Option<SessionCell>) -> Self {
        ClientSpans {
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
            otel.status_message = Empty,
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
                let span = self.serving_span(
                    server_notification_method(notification),
                    None,
                    &notification.get_meta().0,
                );
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
                    self.protocol_version = Some(version);
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

/// The names and values the MCP conventions of [`SEMCONV`](dsh_tool_runtime::telemetry::SEMCONV) give.
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_span_is_named_by_its_method_and_the_tool_it_calls() {
        assert_eq!(span_name("tools/call", Some("echo")), "tools/call echo");
        assert_eq!(span_name("tools/list", None), "tools/list");
        assert_eq!(
            span_name("notifications/initialized", None),
            "notifications/initialized"
        );
    }

    #[test]
    fn only_a_tool_call_is_a_genai_operation() {
        assert_eq!(operation(Some("echo")), Some("execute_tool"));
        assert_eq!(operation(None), None);
    }

    #[test]
    fn the_values_the_conventions_name() {
        assert_eq!(TOOL_ERROR, "tool_error");
        assert_eq!(PIPE, "pipe");
        assert_eq!(TCP, "tcp");
        assert_eq!(HTTP, "http");
        assert_eq!(OTHER_ERROR, "_OTHER");
    }

    #[test]
    fn a_tool_call_is_tools_call_and_notifications_are_named_as_sent() {
        assert_eq!(TOOLS_CALL, "tools/call");
        let initialized = ClientNotification::InitializedNotification(Default::default());
        assert_eq!(
            notification_method(&initialized),
            "notifications/initialized"
        );
    }

    #[test]
    fn an_http_server_is_its_host_and_port() {
        let peer = ClientPeer::http("up", "http://127.0.0.1:8931/mcp");
        assert_eq!(peer.transport, "tcp");
        assert_eq!(peer.address.as_deref(), Some("127.0.0.1"));
        assert_eq!(peer.port, Some(8931));
        // The default port of plain HTTP; an IPv6 host without its brackets.
        let peer = ClientPeer::http("up", "http://[::1]/mcp");
        assert_eq!(peer.address.as_deref(), Some("::1"));
        assert_eq!(peer.port, Some(80));
        let peer = ClientPeer::stdio("local");
        assert_eq!(peer.transport, "pipe");
        assert_eq!((peer.address, peer.port), (None, None));
    }

    /// Every notification a server sends is named by its method, the conventions' well-known
    /// values where they name one.
    #[test]
    fn server_notifications_are_named_as_the_conventions_list_them() {
        let named = |json: serde_json::Value| {
            let notification: ServerNotification = serde_json::from_value(json).unwrap();
            server_notification_method(&notification).to_owned()
        };
        for method in [
            "notifications/tools/list_changed",
            "notifications/prompts/list_changed",
            "notifications/resources/list_changed",
        ] {
            assert_eq!(named(serde_json::json!({ "method": method })), method);
        }
        let progress = serde_json::json!({"method": "notifications/progress",
            "params": {"progressToken": 1, "progress": 1}});
        assert_eq!(named(progress), "notifications/progress");
        let message = serde_json::json!({"method": "notifications/message",
            "params": {"level": "info", "data": "x"}});
        assert_eq!(named(message), "notifications/message");
        let updated = serde_json::json!({"method": "notifications/resources/updated",
            "params": {"uri": "file:///a"}});
        assert_eq!(named(updated), "notifications/resources/updated");
        let cancelled = serde_json::json!({"method": "notifications/cancelled",
            "params": {"requestId": 1}});
        assert_eq!(named(cancelled), "notifications/cancelled");
    }

    #[cfg(feature = "server")]
    #[test]
    fn http_versions_are_written_as_the_conventions_do() {
        assert_eq!(http_version(http::Version::HTTP_10), Some("1.0"));
        assert_eq!(http_version(http::Version::HTTP_11), Some("1.1"));
        assert_eq!(http_version(http::Version::HTTP_2), Some("2"));
        assert_eq!(http_version(http::Version::HTTP_3), Some("3"));
    }
}

/// Spans read back from a subscriber: the notifications' of both sides and the attributes of
/// requests about a prompt or a resource, as the MCP conventions of
/// [`SEMCONV`](dsh_tool_runtime::telemetry::SEMCONV) name them, and the trace context carried in
/// a notification's `_meta` both ways.
#[cfg(test)]
mod read_back {
    use std::cell::RefCell;
    use std::collections::BTreeMap;
    use std::sync::{Arc, Mutex, Once};

    use dsh_tool_runtime::telemetry::{Propagator, set_propagator};
    use rmcp::model::{ClientJsonRpcMessage, GetMeta, ServerJsonRpcMessage};
    use serde_json::json;
    use tracing::field::{Field, Visit};
    use tracing::span::{Attributes, Id, Record};
    use tracing_subscriber::layer::{Context, Layer, SubscriberExt};

    use super::*;

    /// The `traceparent` of a span whose tracing id is `id`, as the test propagator writes it.
    fn traceparent(id: u64) -> String {
        format!("00-{:032x}-{id:016x}-01", 7)
    }

    /// Writes [`traceparent`] and notes every context it is asked to set as a parent (the id of
    /// the span, and the `traceparent` read), per thread: each test has a subscriber of its
    /// own, whose span ids start again at 1.
    struct Noting;

    thread_local! {
        static PARENTS: RefCell<Vec<(u64, String)>> = const { RefCell::new(Vec::new()) };
    }

    impl Propagator for Noting {
        fn inject(&self, span: &Span, set: &mut dyn FnMut(&str, String)) {
            if let Some(id) = span.id() {
                set("traceparent", traceparent(id.into_u64()));
            }
        }
        fn set_parent(&self, span: &Span, get: &dyn Fn(&str) -> Option<String>) {
            if let (Some(id), Some(parent)) = (span.id(), get("traceparent")) {
                PARENTS.with_borrow_mut(|parents| parents.push((id.into_u64(), parent)));
            }
        }
    }

    /// One span: its tracing id and its fields as text.
    #[derive(Clone, Debug)]
    struct Seen {
        id: u64,
        fields: BTreeMap<String, String>,
    }

    impl Seen {
        fn field(&self, name: &str) -> Option<&str> {
            self.fields.get(name).map(String::as_str)
        }
    }

    #[derive(Clone, Default)]
    struct Spans(Arc<Mutex<Vec<Seen>>>);

    struct Fields<'a>(&'a mut BTreeMap<String, String>);

    impl Visit for Fields<'_> {
        fn record_str(&mut self, field: &Field, value: &str) {
            self.0.insert(field.name().to_owned(), value.to_owned());
        }
        fn record_i64(&mut self, field: &Field, value: i64) {
            self.0.insert(field.name().to_owned(), value.to_string());
        }
        fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
            self.0.insert(field.name().to_owned(), format!("{value:?}"));
        }
    }

    impl<S: tracing::Subscriber> Layer<S> for Spans {
        fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, _: Context<'_, S>) {
            let mut fields = BTreeMap::new();
            attrs.record(&mut Fields(&mut fields));
            self.0.lock().unwrap().push(Seen {
                id: id.into_u64(),
                fields,
            });
        }
        fn on_record(&self, id: &Id, values: &Record<'_>, _: Context<'_, S>) {
            let mut spans = self.0.lock().unwrap();
            if let Some(span) = spans.iter_mut().rev().find(|span| span.id == id.into_u64()) {
                values.record(&mut Fields(&mut span.fields));
            }
        }
    }

    impl Spans {
        /// Spans seen on this thread until the guard drops, with the test propagator.
        fn install() -> (Spans, tracing::subscriber::DefaultGuard) {
            static PROPAGATOR: Once = Once::new();
            PROPAGATOR.call_once(|| assert!(set_propagator(Noting)));
            let spans = Spans::default();
            let subscriber = tracing_subscriber::registry().with(spans.clone());
            (spans, tracing::subscriber::set_default(subscriber))
        }

        /// The one span named `name`.
        fn one(&self, name: &str) -> Seen {
            let spans = self.0.lock().unwrap();
            let found: Vec<&Seen> = spans
                .iter()
                .filter(|span| span.field("otel.name") == Some(name))
                .collect();
            assert_eq!(found.len(), 1, "one {name} span: {spans:?}");
            found[0].clone()
        }
    }

    /// The parent context the test propagator was asked to set on span `id`.
    fn parent_of(id: u64) -> Option<String> {
        PARENTS.with_borrow(|parents| {
            parents
                .iter()
                .rev()
                .find(|(span, _)| *span == id)
                .map(|(_, parent)| parent.clone())
        })
    }

    /// A streamable HTTP connection's spans, its session `s-1` agreed on `2025-11-25`.
    fn http_connection() -> ClientSpans {
        let session = SessionCell::default();
        *session.lock() = Some(Arc::from("s-1"));
        let mut spans = ClientSpans::new(
            ClientPeer::http("up", "http://127.0.0.1:8931/mcp"),
            Some(session),
        );
        spans.protocol_version = Some("2025-11-25".to_owned());
        spans
    }

    const REMOTE: &str = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";

    fn from_server(json: serde_json::Value) -> ServerJsonRpcMessage {
        serde_json::from_value(json).unwrap()
    }

    #[test]
    fn a_notification_the_client_reads_is_a_server_span_under_the_context_in_its_meta() {
        let (spans, _guard) = Spans::install();
        let mut connection = http_connection();
        connection.received(&from_server(json!({"jsonrpc": "2.0",
            "method": "notifications/progress",
            "params": {"progressToken": 1, "progress": 2, "_meta": {"traceparent": REMOTE}}})));
        let span = spans.one("notifications/progress");
        let expected = [
            ("otel.kind", "server"),
            ("mcp.method.name", "notifications/progress"),
            ("mcp.protocol.version", "2025-11-25"),
            ("mcp.session.id", "s-1"),
            ("network.transport", "tcp"),
            ("network.protocol.name", "http"),
            ("dsh.mcp.server", "up"),
        ];
        for (key, value) in expected {
            assert_eq!(span.field(key), Some(value), "{key}: {span:?}");
        }
        // A notification has no id; only tool calls are GenAI operations.
        for key in [
            "jsonrpc.request.id",
            "gen_ai.operation.name",
            "error.type",
            "mcp.resource.uri",
        ] {
            assert_eq!(span.field(key), None, "{key}: {span:?}");
        }
        assert_eq!(parent_of(span.id).as_deref(), Some(REMOTE));
    }

    #[test]
    fn list_changes_and_log_messages_the_client_reads_are_spans_too() {
        let (spans, _guard) = Spans::install();
        let mut connection = ClientSpans::new(ClientPeer::stdio("local"), None);
        connection.received(&from_server(
            json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}),
        ));
        connection.received(&from_server(json!({"jsonrpc": "2.0",
            "method": "notifications/message", "params": {"level": "info", "data": "x"}})));
        connection.received(&from_server(json!({"jsonrpc": "2.0",
            "method": "notifications/resources/updated", "params": {"uri": "file:///a.txt"}})));
        for name in [
            "notifications/tools/list_changed",
            "notifications/message",
            "notifications/resources/updated",
        ] {
            let span = spans.one(name);
            assert_eq!(span.field("otel.kind"), Some("server"));
            assert_eq!(span.field("mcp.method.name"), Some(name));
            assert_eq!(span.field("network.transport"), Some("pipe"));
            assert_eq!(span.field("network.protocol.name"), None);
            // Before `initialize` is answered there is no version, and stdio has no session.
            assert_eq!(span.field("mcp.protocol.version"), None);
            assert_eq!(span.field("mcp.session.id"), None);
            // No `_meta` context: the span stays where it is.
            assert_eq!(parent_of(span.id), None);
        }
        let updated = spans.one("notifications/resources/updated");
        assert_eq!(updated.field("mcp.resource.uri"), Some("file:///a.txt"));
    }

    #[test]
    fn a_notification_the_client_sends_carries_its_spans_context_in_its_meta() {
        let (spans, _guard) = Spans::install();
        let mut connection = http_connection();
        let mut message: ClientJsonRpcMessage = serde_json::from_value(json!({"jsonrpc": "2.0",
            "method": "notifications/cancelled", "params": {"requestId": 4}}))
        .unwrap();
        connection.sent(&mut message);
        let span = spans.one("notifications/cancelled");
        let expected = [
            ("otel.kind", "client"),
            ("mcp.method.name", "notifications/cancelled"),
            ("mcp.protocol.version", "2025-11-25"),
            ("mcp.session.id", "s-1"),
            ("network.transport", "tcp"),
            ("network.protocol.name", "http"),
            ("server.address", "127.0.0.1"),
            ("server.port", "8931"),
            ("dsh.mcp.server", "up"),
        ];
        for (key, value) in expected {
            assert_eq!(span.field(key), Some(value), "{key}: {span:?}");
        }
        assert_eq!(span.field("jsonrpc.request.id"), None);
        let ClientJsonRpcMessage::Notification(notification) = &message else {
            panic!("a notification: {message:?}");
        };
        assert_eq!(
            notification.notification.get_meta().0.get("traceparent"),
            Some(&Value::String(traceparent(span.id)))
        );
        // On the wire, in `params._meta`.
        let wire = serde_json::to_value(&message).unwrap();
        assert_eq!(wire["params"]["_meta"]["traceparent"], traceparent(span.id));
        assert_eq!(wire["params"]["requestId"], 4);
    }

    #[test]
    fn a_2026_sessions_notifications_name_the_version_its_requests_name() {
        let (spans, _guard) = Spans::install();
        let mut connection = ClientSpans::new(ClientPeer::stdio("local"), None);
        let mut listing: ClientJsonRpcMessage = serde_json::from_value(json!({"jsonrpc": "2.0",
            "id": 1, "method": "tools/list",
            "params": {"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}}}))
        .unwrap();
        connection.sent(&mut listing);
        connection.received(&from_server(
            json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}),
        ));
        let span = spans.one("notifications/tools/list_changed");
        assert_eq!(span.field("mcp.protocol.version"), Some("2026-07-28"));
    }

    fn from_client(json: serde_json::Value) -> ClientJsonRpcMessage {
        serde_json::from_value(json).unwrap()
    }

    #[test]
    fn a_prompt_request_is_named_by_its_prompt_and_a_resource_request_names_its_uri() {
        let (spans, _guard) = Spans::install();
        let mut connection = http_connection();
        connection.sent(&mut from_client(json!({"jsonrpc": "2.0", "id": 3,
            "method": "prompts/get", "params": {"name": "greet"}})));
        let prompt = spans.one("prompts/get greet");
        let expected = [
            ("otel.kind", "client"),
            ("mcp.method.name", "prompts/get"),
            ("gen_ai.prompt.name", "greet"),
            ("jsonrpc.request.id", "3"),
        ];
        for (key, value) in expected {
            assert_eq!(prompt.field(key), Some(value), "{key}: {prompt:?}");
        }
        // A prompt is no tool call.
        for key in [
            "gen_ai.operation.name",
            "gen_ai.tool.name",
            "mcp.resource.uri",
        ] {
            assert_eq!(prompt.field(key), None, "{key}: {prompt:?}");
        }
        for (id, method) in [
            (4, "resources/read"),
            (5, "resources/subscribe"),
            (6, "resources/unsubscribe"),
        ] {
            connection.sent(&mut from_client(json!({"jsonrpc": "2.0", "id": id,
                "method": method, "params": {"uri": "file:///r.txt"}})));
            // The URI stays out of the name: it is no low-cardinality target.
            let span = spans.one(method);
            assert_eq!(span.field("mcp.method.name"), Some(method));
            assert_eq!(span.field("mcp.resource.uri"), Some("file:///r.txt"));
            assert_eq!(span.field("gen_ai.prompt.name"), None);
        }
    }

    #[cfg(feature = "server")]
    #[test]
    fn a_notification_the_server_sends_is_a_client_span_with_its_context_in_its_meta() {
        let (spans, _guard) = Spans::install();
        let outbound = Outbound {
            protocol_version: Some("2025-06-18".to_owned()),
            session: Some("s-2".to_owned()),
            transport: TCP,
            http_version: Some("1.1"),
        };
        let mut progress: ServerNotification = serde_json::from_value(json!({
            "method": "notifications/progress", "params": {"progressToken": 1, "progress": 1}}))
        .unwrap();
        let span = outbound_notification(&mut progress, &outbound);
        let id = span.id().unwrap().into_u64();
        drop(span);
        let seen = spans.one("notifications/progress");
        let expected = [
            ("otel.kind", "client"),
            ("mcp.method.name", "notifications/progress"),
            ("mcp.protocol.version", "2025-06-18"),
            ("mcp.session.id", "s-2"),
            ("network.transport", "tcp"),
            ("network.protocol.name", "http"),
            ("network.protocol.version", "1.1"),
        ];
        for (key, value) in expected {
            assert_eq!(seen.field(key), Some(value), "{key}: {seen:?}");
        }
        for key in ["jsonrpc.request.id", "gen_ai.operation.name", "error.type"] {
            assert_eq!(seen.field(key), None, "{key}: {seen:?}");
        }
        let wire = serde_json::to_value(&progress).unwrap();
        assert_eq!(wire["params"]["_meta"]["traceparent"], traceparent(id));
        assert_eq!(wire["params"]["progressToken"], 1);

        // Over stdio: no session, no HTTP; a list change has no params but its `_meta`.
        let stdio = Outbound {
            transport: PIPE,
            ..Outbound::default()
        };
        let mut changed: ServerNotification =
            serde_json::from_value(json!({"method": "notifications/tools/list_changed"})).unwrap();
        let span = outbound_notification(&mut changed, &stdio);
        let id = span.id().unwrap().into_u64();
        drop(span);
        let seen = spans.one("notifications/tools/list_changed");
        assert_eq!(seen.field("network.transport"), Some("pipe"));
        for key in [
            "mcp.session.id",
            "network.protocol.name",
            "network.protocol.version",
        ] {
            assert_eq!(seen.field(key), None, "{key}: {seen:?}");
        }
        let wire = serde_json::to_value(&changed).unwrap();
        assert_eq!(wire["params"]["_meta"]["traceparent"], traceparent(id));

        let mut updated: ServerNotification = serde_json::from_value(json!({
            "method": "notifications/resources/updated", "params": {"uri": "file:///b"}}))
        .unwrap();
        drop(outbound_notification(&mut updated, &stdio));
        let seen = spans.one("notifications/resources/updated");
        assert_eq!(seen.field("mcp.resource.uri"), Some("file:///b"));
    }
}
