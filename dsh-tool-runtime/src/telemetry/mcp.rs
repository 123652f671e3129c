//! The MCP spans of `tools/call`, as the client sends it and as the server serves it, and the
//! trace context carried in the request's `params._meta`.

use rmcp::model::MetaObject;
use serde_json::Value;
use tracing::Span;
use tracing::field::Empty;

use super::{OTHER_ERROR, propagator};

/// `mcp.method.name` of a tool call.
const TOOLS_CALL: &str = "tools/call";

/// `error.type` of a `tools/call` answered with `isError: true`, as the MCP conventions say.
pub(crate) const TOOL_ERROR: &str = "tool_error";

/// The `CLIENT` span of a `tools/call` to `server` (the name it was bridged under);
/// `transport` is `network.transport` (`pipe` for stdio, `tcp` for HTTP).
#[cfg(feature = "mcp")]
pub(crate) fn client_span(
    tool: &str,
    server: &str,
    protocol_version: Option<String>,
    transport: &'static str,
) -> Span {
    tracing::info_span!(
        "mcp_client",
        otel.name = format!("{TOOLS_CALL} {tool}"),
        otel.kind = "client",
        otel.status_code = Empty,
        otel.status_message = Empty,
        mcp.method.name = TOOLS_CALL,
        gen_ai.operation.name = "execute_tool",
        gen_ai.tool.name = tool,
        jsonrpc.request.id = Empty,
        mcp.protocol.version = protocol_version,
        network.transport = transport,
        error.type = Empty,
        rpc.response.status_code = Empty,
        dsh.mcp.server = server,
    )
}

/// The `SERVER` span of a `tools/call` served here.
#[cfg(feature = "mcp-server")]
pub(crate) fn server_span(
    tool: &str,
    request_id: &str,
    protocol_version: Option<String>,
    session: Option<&str>,
) -> Span {
    tracing::info_span!(
        "mcp_server",
        otel.name = format!("{TOOLS_CALL} {tool}"),
        otel.kind = "server",
        otel.status_code = Empty,
        otel.status_message = Empty,
        mcp.method.name = TOOLS_CALL,
        gen_ai.operation.name = "execute_tool",
        gen_ai.tool.name = tool,
        jsonrpc.request.id = request_id,
        mcp.protocol.version = protocol_version,
        mcp.session.id = session,
        error.type = Empty,
        rpc.response.status_code = Empty,
    )
}

/// Writes `span`'s trace context into a request's `_meta` (nothing without a propagator).
#[cfg(feature = "mcp")]
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
#[cfg(feature = "mcp-server")]
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
