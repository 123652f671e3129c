//! The MCP conventions' histograms, recorded from the MCP spans of both sides and the events
//! that end their sessions.

use std::time::Instant;

use opentelemetry::KeyValue;
use opentelemetry::metrics::{Histogram, Meter};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing_subscriber::layer::Context;
use tracing_subscriber::registry::LookupSpan;

/// The histogram of MCP requests and notifications as the client sends them, in seconds: from
/// sent to answered (to written, for a notification), as the MCP conventions of
/// [`SEMCONV`](crate::telemetry::SEMCONV) name it.
pub const MCP_CLIENT_DURATION: &str = "mcp.client.operation.duration";

/// The histogram of MCP requests and notifications as the server handles them, in seconds:
/// from received to answered, likewise.
pub const MCP_SERVER_DURATION: &str = "mcp.server.operation.duration";

/// The bucket boundaries (seconds) of [`MCP_CLIENT_DURATION`] and [`MCP_SERVER_DURATION`],
/// 10 ms to 5 min: the conventions advise none, and the SDK's default ones are shaped for
/// milliseconds.
pub const MCP_DURATION_BOUNDARIES: [f64; 14] = [
    0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0,
];

/// The attributes of the MCP histograms, taken from the request's span when it has them: the
/// conventions' operation attributes (`gen_ai.prompt.name` on `prompts/get`), the status and,
/// on the client, the server's address. The session and the request id are left out, as the
/// conventions do: one series per session or request would grow without bound.
pub const MCP_DURATION_ATTRIBUTES: [&str; 12] = [
    "mcp.method.name",
    "gen_ai.operation.name",
    "gen_ai.tool.name",
    "gen_ai.prompt.name",
    "error.type",
    "rpc.response.status_code",
    "mcp.protocol.version",
    "network.transport",
    "network.protocol.name",
    "network.protocol.version",
    "server.address",
    "server.port",
];

/// The histogram of MCP sessions as the client sees them, in seconds: from the connection's
/// start to its end, as the MCP conventions of [`SEMCONV`](crate::telemetry::SEMCONV) name it.
/// A session counts once it is established: an `initialize` answered (a 2025-era server, stdio
/// or streamable HTTP) or, over stdio, any request answered (a 2026-07-28 server has no
/// `initialize`, but its pipe is one session). A 2026-07-28 exchange over streamable HTTP is no
/// session (each request stands alone, with no `Mcp-Session-Id`) and is not recorded.
pub const MCP_CLIENT_SESSION_DURATION: &str = "mcp.client.session.duration";

/// The histogram of MCP sessions as the server sees them, in seconds: from the session's
/// handler made (the stdio process serving, the streamable HTTP session opened) to its drop
/// (stdin ended, the HTTP session closed or expired), counted as for
/// [`MCP_CLIENT_SESSION_DURATION`].
pub const MCP_SERVER_SESSION_DURATION: &str = "mcp.server.session.duration";

/// The attributes of the session histograms, those of the conventions' list the session
/// knows: `server.address` and `server.port` on the client over HTTP,
/// `network.protocol.version` on the server over HTTP. The end is not classified: no
/// `error.type`.
pub const MCP_SESSION_ATTRIBUTES: [&str; 6] = [
    "mcp.protocol.version",
    "network.transport",
    "network.protocol.name",
    "network.protocol.version",
    "server.address",
    "server.port",
];

/// Records [`MCP_CLIENT_DURATION`] and [`MCP_SERVER_DURATION`] for every MCP request and
/// notification: the time from its `CLIENT` or `SERVER` span's creation to its close, with the
/// span's [`MCP_DURATION_ATTRIBUTES`]; and [`MCP_CLIENT_SESSION_DURATION`] and
/// [`MCP_SERVER_SESSION_DURATION`] for every session, from the event the runtime emits as it
/// ends, with its [`MCP_SESSION_ATTRIBUTES`]. The runtime emits nothing for them but the spans
/// and events; a host with its own [`MeterProvider`](opentelemetry::metrics::MeterProvider)
/// makes one with [`McpDurationLayer::new`].
pub struct McpDurationLayer {
    client: Histogram<f64>,
    server: Histogram<f64>,
    client_session: Histogram<f64>,
    server_session: Histogram<f64>,
}

impl std::fmt::Debug for McpDurationLayer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpDurationLayer").finish_non_exhaustive()
    }
}

impl McpDurationLayer {
    /// The four histograms (unit `s`, boundaries [`MCP_DURATION_BOUNDARIES`]) of `meter`.
    pub fn new(meter: &Meter) -> Self {
        let histogram = |name: &'static str, description: &'static str| {
            meter
                .f64_histogram(name)
                .with_unit("s")
                .with_description(description)
                .with_boundaries(MCP_DURATION_BOUNDARIES.to_vec())
                .build()
        };
        McpDurationLayer {
            client: histogram(
                MCP_CLIENT_DURATION,
                "The duration of the MCP request or notification as observed on the sender.",
            ),
            server: histogram(
                MCP_SERVER_DURATION,
                "The duration of the MCP request or notification as observed on the receiver.",
            ),
            client_session: histogram(
                MCP_CLIENT_SESSION_DURATION,
                "The duration of the MCP session as observed on the MCP client.",
            ),
            server_session: histogram(
                MCP_SERVER_SESSION_DURATION,
                "The duration of the MCP session as observed on the MCP server.",
            ),
        }
    }
}

/// What the layer keeps of one MCP span until it closes.
struct McpTiming {
    started: Instant,
    client: bool,
    attributes: Vec<KeyValue>,
}

impl McpTiming {
    fn set(&mut self, field: &Field, value: opentelemetry::Value) {
        let Some(key) = MCP_DURATION_ATTRIBUTES
            .iter()
            .find(|key| **key == field.name())
        else {
            return;
        };
        match self
            .attributes
            .iter_mut()
            .find(|kv| kv.key.as_str() == *key)
        {
            Some(slot) => slot.value = value,
            None => self.attributes.push(KeyValue::new(*key, value)),
        }
    }
}

impl Visit for McpTiming {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.set(field, value.to_owned().into());
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        self.set(field, value.into());
    }

    fn record_debug(&mut self, _field: &Field, _value: &dyn std::fmt::Debug) {}
}

/// What the event that ends a session says: its length (`duration`, seconds) and attributes.
#[derive(Default)]
struct SessionEnd {
    duration: Option<f64>,
    attributes: Vec<KeyValue>,
}

impl SessionEnd {
    fn set(&mut self, field: &Field, value: opentelemetry::Value) {
        if let Some(key) = MCP_SESSION_ATTRIBUTES
            .iter()
            .find(|key| **key == field.name())
        {
            self.attributes.push(KeyValue::new(*key, value));
        }
    }
}

impl Visit for SessionEnd {
    fn record_f64(&mut self, field: &Field, value: f64) {
        if field.name() == "duration" {
            self.duration = Some(value);
        }
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        self.set(field, value.to_owned().into());
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        self.set(field, value.into());
    }

    fn record_debug(&mut self, _field: &Field, _value: &dyn std::fmt::Debug) {}
}

/// Whether a span is the runtime's span of an MCP request or notification, and on which side.
fn mcp_side(metadata: &tracing::Metadata<'_>) -> Option<bool> {
    if !metadata.target().starts_with("dsh_tool_mcp") {
        return None;
    }
    match metadata.name() {
        "mcp_client" => Some(true),
        "mcp_server" => Some(false),
        _ => None,
    }
}

impl<S> tracing_subscriber::Layer<S> for McpDurationLayer
where
    S: tracing::Subscriber + for<'span> LookupSpan<'span>,
{
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let Some(client) = mcp_side(attrs.metadata()) else {
            return;
        };
        let Some(span) = ctx.span(id) else { return };
        let mut timing = McpTiming {
            started: Instant::now(),
            client,
            attributes: Vec::new(),
        };
        attrs.record(&mut timing);
        span.extensions_mut().insert(timing);
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(id) else { return };
        if let Some(timing) = span.extensions_mut().get_mut::<McpTiming>() {
            values.record(timing);
        }
    }

    fn on_close(&self, id: Id, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(&id) else { return };
        let Some(timing) = span.extensions_mut().remove::<McpTiming>() else {
            return;
        };
        let histogram = if timing.client {
            &self.client
        } else {
            &self.server
        };
        histogram.record(timing.started.elapsed().as_secs_f64(), &timing.attributes);
    }

    fn on_event(&self, event: &tracing::Event<'_>, _ctx: Context<'_, S>) {
        let metadata = event.metadata();
        if !metadata.target().starts_with("dsh_tool_mcp") {
            return;
        }
        let histogram = match metadata.name() {
            "mcp_client_session" => &self.client_session,
            "mcp_server_session" => &self.server_session,
            _ => return,
        };
        let mut end = SessionEnd::default();
        event.record(&mut end);
        if let Some(duration) = end.duration {
            histogram.record(duration, &end.attributes);
        }
    }
}
