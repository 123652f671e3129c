//! The `SERVER` spans of what `serve` is sent and the `CLIENT` spans of what it sends its
//! client (requests during a call, notifications).

use rmcp::model::ServerNotification;
use tracing::Span;
use tracing::field::Empty;

use super::{
    HTTP, PIPE, TCP, inject, operation, resource_uri, server_notification_method, span_name,
};

/// How a request reached the server, for its span.
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
pub(crate) fn server_span(method: &str, tool: Option<&str>, served: &Served<'_>) -> Span {
    tracing::info_span!(
        "mcp_server",
        otel.name = span_name(method, tool),
        otel.kind = "server",
        otel.status_code = Empty,
        otel.status_description = Empty,
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
pub(crate) fn outbound_span(method: &str, outbound: &Outbound) -> Span {
    tracing::info_span!(
        "mcp_client",
        otel.name = method,
        otel.kind = "client",
        otel.status_code = Empty,
        otel.status_description = Empty,
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
