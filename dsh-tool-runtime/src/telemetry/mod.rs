//! Spans for every call, named and attributed as the OpenTelemetry GenAI semantic conventions
//! say for tool execution ([`SEMCONV`]).
//!
//! The runtime emits [`tracing`] spans only; a host turns them into OpenTelemetry spans with
//! `tracing-opentelemetry` (the `otel` feature of the facade does it for the command line).
//! With no subscriber installed a span costs one disabled-callsite check.
//!
//! Every call is one span named `execute_tool` (exported as `execute_tool {gen_ai.tool.name}`
//! through the `otel.name` field, kind `INTERNAL`) with:
//!
//! | attribute | value |
//! | --- | --- |
//! | `gen_ai.operation.name` | `execute_tool` |
//! | `gen_ai.tool.name` | the tool name as called |
//! | `gen_ai.tool.call.id` | the call id |
//! | `gen_ai.tool.type` | `function` (`extension` for a tool bridged from an MCP server), when the tool exists |
//! | `gen_ai.tool.description` | the tool's description, when the tool exists |
//! | `error.type` | the failure's error code (`INVALID_ARGS`, …), `_OTHER` for an uncoded one |
//! | `gen_ai.tool.call.arguments` | the arguments as JSON text, only with [`Registry::set_span_content`](crate::Registry::set_span_content) |
//! | `gen_ai.tool.call.result` | the value (or the failure's message) as JSON text, likewise |
//! | `dsh.agent.id` | the agent scope, when there is one |
//! | `dsh.mode` | the scope's mode (`native`, `code`, `both`) |
//! | `dsh.parent_call.id` | the enclosing `run_code` call of a binding call |
//! | `dsh.replayed` | `true` for a binding call answered from a durable run's journal (a `JournalStore`'s, or Restate's on a retried invocation); such a call has no stage spans and is not counted in `gen_ai.execute_tool.duration` |
//!
//! A failed call also sets the span's status to error (`otel.status_code`). The stages are child
//! spans: `pre_execute` (with `dsh.decision`: `allow`, `deny` or `ask`), `approval` (with
//! `dsh.approval`: `allowed` or `denied`), `execute` (wrappers and the body) and `post_execute`.
//! A `run_code` call's span also carries `dsh.code.language`, `dsh.code.max_parallel_sub_calls`,
//! `dsh.code.binding_calls`, `dsh.code.outcome` (`ok` or the failure kind) and the runtime's
//! budgets (`dsh.code.budget.compute_ms`, `.max_wall_ms`, `.max_memory_mb`, `.max_output_bytes`,
//! `.max_binding_calls`), and is the parent of one span per binding call of its program.
//!
//! Over MCP (feature `mcp`, `mcp-server`) every request and notification the client sends is a
//! `CLIENT` span, and every one the server handles a `SERVER` span: `initialize`,
//! `server/discover`, `ping`, `tools/list`, `tools/call`, `tasks/get`, `tasks/update`,
//! `tasks/cancel`, `subscriptions/listen`, `logging/setLevel`, the prompt, resource and skill
//! methods, `notifications/initialized`, `notifications/cancelled`, … A span is named
//! `{mcp.method.name}`, or `tools/call {gen_ai.tool.name}` for a tool call, and carries, as the
//! MCP conventions say:
//!
//! | attribute | value |
//! | --- | --- |
//! | `mcp.method.name` | the JSON-RPC method |
//! | `gen_ai.tool.name`, `gen_ai.operation.name` | the tool and `execute_tool`, for `tools/call` only |
//! | `jsonrpc.request.id` | the request's id (not on a notification) |
//! | `mcp.protocol.version` | the version agreed on (`initialize`) or named in the request's `_meta` |
//! | `mcp.session.id` | the streamable HTTP session (`Mcp-Session-Id`), when there is one |
//! | `network.transport` | `pipe` (stdio) or `tcp` (HTTP) |
//! | `network.protocol.name` | `http`, over HTTP |
//! | `network.protocol.version` | the HTTP version (`1.1`, `2`), on the server |
//! | `server.address`, `server.port` | the server's host and port (an int), on the client over HTTP |
//! | `error.type` | the JSON-RPC error code, or `tool_error` for a `tools/call` result with `isError` |
//! | `rpc.response.status_code` | the JSON-RPC error code |
//! | `dsh.mcp.server` | the name the server was added under, on the client |
//!
//! The requests that go the other way are spans too, kind given by who sends: a served call's
//! requests to a 2025-era client (`sampling/createMessage`, `elicitation/create`,
//! `roots/list`) are `CLIENT` spans under the call, with the session's `mcp.session.id`,
//! `mcp.protocol.version` and network attributes, and their trace context in the request's
//! `_meta`; a request a server sends the client is a `SERVER` span of the connection, the child
//! of the context in its `_meta`, closed by the client's answer.
//!
//! A failed request also sets the error status, its message the JSON-RPC error's. The
//! trace context crosses in every request's `params._meta` (`traceparent`, `tracestate`)
//! through the [`Propagator`] the host installs with [`set_propagator`], so the server's span is
//! the client's span's child; without one nothing is injected or extracted. The server's
//! handler runs in the request's span: a `tools/call`'s `execute_tool` span is its child. The
//! client's `tools/call` span is made by the call, under its `execute_tool` span; the client's
//! other requests are spans of the connection, under whatever span is current when rmcp writes
//! them.

use std::sync::OnceLock;

use serde_json::Value;
use tracing::Span;
use tracing::field::Empty;

use crate::hooks::ToolCallView;
use crate::registry::Mode;
use crate::result::ToolResult;

/// The version of the OpenTelemetry GenAI semantic conventions the spans follow: the
/// `semantic-conventions-genai` repository, release `v0.1.0` (status Development), for the
/// `execute_tool` span, the MCP spans and the `gen_ai.execute_tool.duration` histogram (recorded
/// from the `execute_tool` spans by the facade's `otel` feature).
pub const SEMCONV: &str = "semantic-conventions-genai v0.1.0";

/// How long a process exporting spans over OTLP may take to send its last ones as it exits:
/// twice one export's timeout (an export in flight, then the last batch), that timeout read as
/// the OTLP exporter reads it: milliseconds in the signal's own variable (`signal`, e.g.
/// `OTEL_EXPORTER_OTLP_TRACES_TIMEOUT`), else in `OTEL_EXPORTER_OTLP_TIMEOUT` (`general`), else
/// 10 s. A value that does not parse is skipped. Used as a bound only: the exit waits until the
/// spans are sent.
#[doc(hidden)]
pub fn otlp_flush_bound(signal: Option<String>, general: Option<String>) -> std::time::Duration {
    let one = [signal, general]
        .into_iter()
        .find_map(|millis| millis?.parse::<u64>().ok())
        .map_or(
            std::time::Duration::from_secs(10),
            std::time::Duration::from_millis,
        );
    one.saturating_mul(2)
}

/// `error.type` of a failure that carries no code, as the conventions name the fallback.
#[doc(hidden)]
pub const OTHER_ERROR: &str = "_OTHER";

/// Carries a span's trace context across a process boundary as W3C Trace Context entries
/// (`traceparent`, `tracestate`). The runtime has no OpenTelemetry dependency: a host that
/// exports spans with `tracing-opentelemetry` installs one (the facade's `otel` feature has
/// `dsh_tools::otel::W3cPropagator`).
pub trait Propagator: Send + Sync + 'static {
    /// The entries of `span`'s context, each given to `set` (none when it has no context).
    fn inject(&self, span: &Span, set: &mut dyn FnMut(&str, String));
    /// Makes `span` a child of the remote context whose entries `get` reads, before `span`
    /// has children; entries that do not parse leave it as it is.
    fn set_parent(&self, span: &Span, get: &dyn Fn(&str) -> Option<String>);
}

static PROPAGATOR: OnceLock<Box<dyn Propagator>> = OnceLock::new();

/// Installs the process's [`Propagator`]: MCP requests carry trace context from then on.
/// `false` (and `propagator` is dropped) when one is installed already.
pub fn set_propagator(propagator: impl Propagator) -> bool {
    PROPAGATOR.set(Box::new(propagator)).is_ok()
}

/// The installed propagator, if any.
pub fn propagator() -> Option<&'static dyn Propagator> {
    PROPAGATOR.get().map(|boxed| &**boxed)
}

/// The span of one call, its parent given or (for `None`) the caller's current span.
#[doc(hidden)]
#[inline]
pub fn call_span(
    view: &ToolCallView,
    description: Option<&str>,
    mode: Mode,
    parent: Option<&Span>,
    content: bool,
) -> Span {
    // The span macro's own first check, inlined into the caller: with no subscriber (or none
    // taking INFO) a call makes no call to build a span nobody takes.
    if !tracing::level_enabled!(tracing::Level::INFO) {
        return Span::none();
    }
    open_call_span(view, description, mode, parent, content)
}

/// [`call_span`] past its level check.
fn open_call_span(
    view: &ToolCallView,
    description: Option<&str>,
    mode: Mode,
    parent: Option<&Span>,
    content: bool,
) -> Span {
    // Every field below is an expression the macro evaluates only for a span a subscriber
    // takes: with none, making the span is one level check.
    macro_rules! call_span {
        ($($parent:tt)*) => {
            tracing::info_span!(
                $($parent)*
                "execute_tool",
                otel.name = format!("execute_tool {}", view.name),
                otel.kind = "internal",
                otel.status_code = Empty,
                otel.status_description = Empty,
                gen_ai.operation.name = "execute_tool",
                gen_ai.tool.name = view.name.as_str(),
                gen_ai.tool.call.id = view.call_id.as_str(),
                gen_ai.tool.type = tool_type(view, description),
                gen_ai.tool.description = description,
                gen_ai.tool.call.arguments = Empty,
                gen_ai.tool.call.result = Empty,
                error.type = Empty,
                dsh.agent.id = view.agent.as_ref().map(|agent| agent.as_str()),
                dsh.mode = mode.as_str(),
                dsh.parent_call.id = view.parent.as_deref(),
                dsh.replayed = Empty,
                dsh.code.language = Empty,
                dsh.code.max_parallel_sub_calls = Empty,
                dsh.code.binding_calls = Empty,
                dsh.code.outcome = Empty,
                dsh.code.budget.compute_ms = Empty,
                dsh.code.budget.max_wall_ms = Empty,
                dsh.code.budget.max_memory_mb = Empty,
                dsh.code.budget.max_output_bytes = Empty,
                dsh.code.budget.max_binding_calls = Empty,
            )
        };
    }
    let span = match parent {
        Some(parent) => call_span!(parent: parent,),
        None => call_span!(),
    };
    if content && !span.is_disabled() {
        span.record(
            "gen_ai.tool.call.arguments",
            json_text(&view.arguments).as_str(),
        );
    }
    span
}

/// The `gen_ai.tool.type` of a call: only a tool that exists has a type (the conventions'
/// values name what the tool is, and a name nothing is registered under is none of them).
fn tool_type(view: &ToolCallView, description: Option<&str>) -> Option<&'static str> {
    description.map(|_| {
        if view.name.starts_with("mcp__") {
            "extension"
        } else {
            "function"
        }
    })
}

/// Records how the call ended on its span.
#[doc(hidden)]
#[inline]
pub fn record_result(span: &Span, result: &ToolResult, content: bool) {
    // Inlined down to this check, so a call with no subscriber does not make the call.
    if !span.is_disabled() {
        record_ended(span, result, content);
    }
}

/// [`record_result`] on a span a subscriber took.
fn record_ended(span: &Span, result: &ToolResult, content: bool) {
    match result {
        ToolResult::Success { value, .. } => {
            if content {
                span.record("gen_ai.tool.call.result", json_text(value).as_str());
            }
        }
        ToolResult::Failure { error, .. } => {
            let code = error
                .info
                .as_ref()
                .map_or(OTHER_ERROR, |info| info.code.as_str());
            span.record("error.type", code);
            span.record("otel.status_code", "error");
            span.record("otel.status_description", error.message.as_str());
            if content {
                span.record(
                    "gen_ai.tool.call.result",
                    json_text(&Value::from(error.message.as_str())).as_str(),
                );
            }
        }
    }
}

/// A binding call of a durable run answered from its journal: a span of its own, marked
/// replayed, under the run's span.
#[doc(hidden)]
pub fn replayed_call(parent: &Span, name: &str, call_id: &str, outcome: Result<(), Option<&str>>) {
    let span = tracing::info_span!(
        parent: parent,
        "execute_tool",
        otel.name = format!("execute_tool {name}"),
        otel.kind = "internal",
        otel.status_code = Empty,
        gen_ai.operation.name = "execute_tool",
        gen_ai.tool.name = name,
        gen_ai.tool.call.id = call_id,
        gen_ai.tool.type = "function",
        error.type = Empty,
        dsh.replayed = true,
    );
    if let Err(code) = outcome {
        span.record("error.type", code.unwrap_or(OTHER_ERROR));
        span.record("otel.status_code", "error");
    }
}

/// A value as compact JSON text.
fn json_text(value: &Value) -> String {
    serde_json::to_string(value).unwrap_or_default()
}
