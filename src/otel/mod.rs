//! OpenTelemetry export of the spans every call emits (feature `otel`).
//!
//! The library emits `tracing` spans only, and an event as an MCP session ends
//! ([`crate::telemetry`] lists their names and attributes). This module turns them into OpenTelemetry spans with `tracing-opentelemetry`,
//! exports them over OTLP/HTTP (protobuf) on a batch thread, and installs the W3C Trace Context
//! propagation that MCP requests carry in `params._meta`. From the same spans it records the
//! histograms `gen_ai.execute_tool.duration` ([`ToolDurationLayer`]) and, for MCP,
//! `mcp.client.operation.duration` and `mcp.server.operation.duration`, and from the events that
//! end MCP sessions `mcp.client.session.duration` and `mcp.server.session.duration`
//! ([`McpDurationLayer`]),
//! exported as OTLP metrics next to the traces. The command line's `--otlp-endpoint` uses it;
//! a Rust host wires the same:
//!
//! ```no_run
//! use tracing_subscriber::Layer;
//! use tracing_subscriber::filter::filter_fn;
//! use tracing_subscriber::layer::SubscriberExt;
//!
//! // Exported to OTEL_EXPORTER_OTLP_ENDPOINT (or _TRACES_ENDPOINT) when `None`.
//! let otlp = dsh_tools::otel::Otlp::new(Some("http://127.0.0.1:6006"), "my-agent")?;
//! dsh_tools::otel::install_propagator();
//! let subscriber = tracing_subscriber::registry()
//!     .with(otlp.layer().with_filter(filter_fn(dsh_tools::otel::is_library_target)))
//!     .with(otlp.duration_layer())
//!     .with(otlp.mcp_duration_layer());
//! tracing::subscriber::set_global_default(subscriber)?;
//! // ... run calls; dropping `otlp` flushes the spans still queued.
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! The standard variables apply: `OTEL_EXPORTER_OTLP_ENDPOINT`,
//! `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`, `OTEL_EXPORTER_OTLP_METRICS_ENDPOINT`,
//! `OTEL_EXPORTER_OTLP_HEADERS`, `OTEL_EXPORTER_OTLP_TIMEOUT`, `OTEL_SERVICE_NAME`,
//! `OTEL_RESOURCE_ATTRIBUTES`, the batch processor's `OTEL_BSP_*`, the metric reader's
//! `OTEL_METRIC_EXPORT_INTERVAL` (milliseconds, 60000 by default; what is left is sent when the
//! exporter drops) and `OTEL_METRICS_EXPORTER=none`, which exports no metrics (a receiver that
//! takes traces only, such as Arize Phoenix, answers the metrics with 404). The exporter speaks
//! plain HTTP (no TLS): point it at a collector on the host or the local network.
//!
//! The first export that fails (no receiver listening, an answer other than success) is
//! reported once per process as a `WARN` event of target `dsh_tools::otel` with the URL sent to
//! and the cause; later failures are not (a receiver that is down fails every batch). The
//! command line prints it on stderr.
//!
//! Filter the layer to the spans you want exported ([`is_library_target`] keeps this
//! library's): the batch exporter's queue is bounded (`OTEL_BSP_MAX_QUEUE_SIZE`, 2048 spans)
//! and drops what does not fit, and some crates open a span for every step of their work (the
//! HTTP/2 stack one per frame), enough to crowd the calls' spans out of it.
//!
//! [`Otlp::layer`] leaves out what `tracing-opentelemetry` adds by default and the conventions
//! do not ask of these spans: source locations (`code.file.path`, `code.line.number`,
//! `code.module.name`), threads (`thread.id`, `thread.name`), busy and idle times (`busy_ns`,
//! `idle_ns`) and the `target` attribute.

use std::collections::HashMap;

use opentelemetry::propagation::TextMapPropagator;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use tracing::Span;
use tracing_opentelemetry::OpenTelemetrySpanExt;

use dsh_tool_runtime::telemetry::Propagator;

mod export;
mod mcp_metrics;
mod tool_metrics;

pub use export::{Otlp, OtlpError, is_library_target};
pub use mcp_metrics::{
    MCP_CLIENT_DURATION, MCP_CLIENT_SESSION_DURATION, MCP_DURATION_ATTRIBUTES,
    MCP_DURATION_BOUNDARIES, MCP_SERVER_DURATION, MCP_SERVER_SESSION_DURATION,
    MCP_SESSION_ATTRIBUTES, McpDurationLayer,
};
pub use tool_metrics::{TOOL_DURATION, TOOL_DURATION_BOUNDARIES, ToolDurationLayer};

/// W3C Trace Context (`traceparent`, `tracestate`) through `tracing-opentelemetry`: what MCP
/// requests carry in `params._meta`.
#[derive(Debug, Default)]
pub struct W3cPropagator(TraceContextPropagator);

impl Propagator for W3cPropagator {
    fn inject(&self, span: &Span, set: &mut dyn FnMut(&str, String)) {
        let mut carrier: HashMap<String, String> = HashMap::new();
        self.0.inject_context(&span.context(), &mut carrier);
        for (key, value) in carrier {
            set(&key, value);
        }
    }

    fn set_parent(&self, span: &Span, get: &dyn Fn(&str) -> Option<String>) {
        let carrier: HashMap<String, String> = self
            .0
            .fields()
            .filter_map(|key| get(key).map(|value| (key.to_owned(), value)))
            .collect();
        // A span created without the OpenTelemetry layer has no context to set.
        let _ = span.set_parent(self.0.extract(&carrier));
    }
}

/// Installs [`W3cPropagator`] for the process (see
/// [`telemetry::set_propagator`](crate::telemetry::set_propagator)); `false` when a
/// propagator is installed already.
pub fn install_propagator() -> bool {
    dsh_tool_runtime::telemetry::set_propagator(W3cPropagator::default())
}

#[cfg(test)]
mod tests {
    use super::export::{METRICS_PATH, TRACES_PATH, resolved_url, signal_url};
    use super::{
        MCP_CLIENT_DURATION, MCP_CLIENT_SESSION_DURATION, MCP_DURATION_ATTRIBUTES,
        MCP_SERVER_DURATION, MCP_SERVER_SESSION_DURATION, MCP_SESSION_ATTRIBUTES, Otlp,
        TOOL_DURATION,
    };
    use dsh_tool_runtime::telemetry::otlp_flush_bound as bound_of;
    use std::time::Duration;

    /// Exit waits for the last spans as long as the exporter may take to send them: longer
    /// than one export's timeout, which the SDK's own 5 s bound was not (a receiver slow to
    /// take the last batch lost it).
    #[test]
    fn exit_waits_as_long_as_the_exporter_may_take() {
        let some = |text: &str| Some(text.to_owned());
        // The exporter's default timeout is 10 s.
        assert_eq!(bound_of(None, None), Duration::from_secs(20));
        assert_eq!(bound_of(None, some("120000")), Duration::from_secs(240));
        // The signal's own variable first, as the exporter reads them; one that does not
        // parse is skipped.
        assert_eq!(
            bound_of(some("3000"), some("120000")),
            Duration::from_secs(6)
        );
        assert_eq!(
            bound_of(some("soon"), some("7000")),
            Duration::from_secs(14)
        );
        // The exporter's own default, doubled.
        assert_eq!(
            bound_of(None, None),
            opentelemetry_otlp::OTEL_EXPORTER_OTLP_TIMEOUT_DEFAULT * 2
        );
    }

    /// The metric names of the conventions' version named in `SEMCONV`.
    #[test]
    fn the_histograms_are_named_as_the_conventions_do() {
        assert_eq!(TOOL_DURATION, "gen_ai.execute_tool.duration");
        assert_eq!(MCP_CLIENT_DURATION, "mcp.client.operation.duration");
        assert_eq!(MCP_SERVER_DURATION, "mcp.server.operation.duration");
        assert_eq!(
            MCP_DURATION_ATTRIBUTES,
            [
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
            ]
        );
    }

    /// The session histograms and their attributes, as the MCP conventions of `SEMCONV` name
    /// them (`error.type`, which they also list, is not recorded: a session's end is not
    /// classified).
    #[test]
    fn the_session_histograms_are_named_as_the_conventions_do() {
        assert_eq!(MCP_CLIENT_SESSION_DURATION, "mcp.client.session.duration");
        assert_eq!(MCP_SERVER_SESSION_DURATION, "mcp.server.session.duration");
        assert_eq!(
            MCP_SESSION_ATTRIBUTES,
            [
                "mcp.protocol.version",
                "network.transport",
                "network.protocol.name",
                "network.protocol.version",
                "server.address",
                "server.port",
            ]
        );
    }

    #[test]
    fn an_empty_endpoint_is_refused() {
        for empty in ["", " "] {
            let error = Otlp::new(Some(empty), "test").expect_err("refused");
            assert_eq!(error.to_string(), "OTLP exporter: the endpoint is empty");
        }
    }

    #[test]
    fn the_reported_url_is_the_one_the_exporter_resolves() {
        let some = |text: &str| Some(text.to_owned());
        assert_eq!(
            resolved_url(Some("http://a:1"), some("http://b:2/t"), None, TRACES_PATH),
            "http://a:1/v1/traces"
        );
        assert_eq!(
            resolved_url(None, some("http://b:2/t"), some("http://c:3"), TRACES_PATH),
            "http://b:2/t"
        );
        assert_eq!(
            resolved_url(None, None, some("http://c:3/"), METRICS_PATH),
            "http://c:3/v1/metrics"
        );
        assert_eq!(
            resolved_url(None, None, None, TRACES_PATH),
            "http://localhost:4318/v1/traces"
        );
    }

    #[test]
    fn a_base_endpoint_gets_the_signal_path() {
        assert_eq!(
            signal_url("http://127.0.0.1:6006", TRACES_PATH),
            "http://127.0.0.1:6006/v1/traces"
        );
        assert_eq!(
            signal_url("http://127.0.0.1:6006/", TRACES_PATH),
            "http://127.0.0.1:6006/v1/traces"
        );
        assert_eq!(
            signal_url("http://collector:4318/v1/traces", TRACES_PATH),
            "http://collector:4318/v1/traces"
        );
        assert_eq!(
            signal_url("http://127.0.0.1:4318", METRICS_PATH),
            "http://127.0.0.1:4318/v1/metrics"
        );
    }
}
