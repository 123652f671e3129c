//! The MCP spans of every request and notification, as the client sends them and as the
//! server serves them, and the trace context carried in a request's `params._meta`.
//!
//! Names and attributes follow the MCP conventions of [`SEMCONV`](dsh_tool_runtime::telemetry::SEMCONV): a span is
//! named `{mcp.method.name}`, or `{mcp.method.name} {gen_ai.tool.name}` for `tools/call`.

use rmcp::model::MetaObject;
use rmcp::model::{ClientNotification, ConstString, ServerNotification};
use serde_json::Value;
use tracing::Span;

use dsh_tool_runtime::telemetry::{OTHER_ERROR, propagator};

#[cfg(feature = "server")]
mod acknowledgement;
mod client;
#[cfg(test)]
mod read_back;
#[cfg(feature = "server")]
mod server;
mod session;

#[cfg(feature = "server")]
pub(crate) use acknowledgement::Acknowledgements;
pub(crate) use client::{ClientPeer, ClientSpans, SessionCell, client_span, record_session};
#[cfg(feature = "server")]
pub(crate) use server::{
    Outbound, Served, http_version, notify, notify_listener, outbound_span, server_span,
};
#[cfg(feature = "server")]
pub(crate) use session::Session;

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
    span.record("otel.status_description", message);
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
