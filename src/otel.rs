//! OpenTelemetry export of the spans every call emits (feature `otel`).
//!
//! The library emits `tracing` spans only ([`crate::telemetry`] lists their names and
//! attributes). This module turns them into OpenTelemetry spans with `tracing-opentelemetry`,
//! exports them over OTLP/HTTP (protobuf) on a batch thread, and installs the W3C Trace Context
//! propagation that MCP requests carry in `params._meta`. The command line's `--otlp-endpoint`
//! uses it; a Rust host wires the same:
//!
//! ```no_run
//! use tracing_subscriber::layer::SubscriberExt;
//!
//! // Exported to OTEL_EXPORTER_OTLP_ENDPOINT (or _TRACES_ENDPOINT) when `None`.
//! let otlp = dsh_tools::otel::Otlp::new(Some("http://127.0.0.1:6006"), "my-agent")?;
//! dsh_tools::otel::install_propagator();
//! let subscriber = tracing_subscriber::registry().with(otlp.layer());
//! tracing::subscriber::set_global_default(subscriber)?;
//! // ... run calls; dropping `otlp` flushes the spans still queued.
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! The standard variables apply: `OTEL_EXPORTER_OTLP_ENDPOINT`,
//! `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`, `OTEL_EXPORTER_OTLP_HEADERS`,
//! `OTEL_EXPORTER_OTLP_TIMEOUT`, `OTEL_SERVICE_NAME`, `OTEL_RESOURCE_ATTRIBUTES` and the batch
//! processor's `OTEL_BSP_*`. The exporter speaks plain HTTP (no TLS): point it at a collector on
//! the host or the local network.

use std::collections::HashMap;

use opentelemetry::propagation::TextMapPropagator;
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::{SpanExporter, WithExportConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::{SdkTracer, SdkTracerProvider};
use tracing::Span;
use tracing_opentelemetry::OpenTelemetrySpanExt;

use dsh_tool_runtime::telemetry::Propagator;

/// The OTLP/HTTP path of traces, appended to a base endpoint as `OTEL_EXPORTER_OTLP_ENDPOINT`'s
/// is (OTLP exporter specification, "Endpoint URLs for OTLP/HTTP").
const TRACES_PATH: &str = "/v1/traces";

/// Why the exporter could not be built (an endpoint that is not a URL, most often).
#[derive(Debug)]
pub struct OtlpError(String);

impl std::fmt::Display for OtlpError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "OTLP exporter: {}", self.0)
    }
}

impl std::error::Error for OtlpError {}

/// An OTLP/HTTP exporter of spans on a batch thread. Dropping it flushes the spans still
/// queued and stops the thread.
pub struct Otlp {
    provider: SdkTracerProvider,
}

impl Otlp {
    /// An exporter to `endpoint`, a base URL such as `http://127.0.0.1:4318` (the traces path
    /// `/v1/traces` is appended, as for `OTEL_EXPORTER_OTLP_ENDPOINT`); with `None`, the
    /// standard variables decide (`http://localhost:4318` without them). `service_name` names
    /// the process unless `OTEL_SERVICE_NAME` does.
    ///
    /// # Errors
    /// [`OtlpError`] when the endpoint does not parse or the HTTP client cannot be built.
    pub fn new(endpoint: Option<&str>, service_name: &str) -> Result<Self, OtlpError> {
        let mut builder = SpanExporter::builder().with_http();
        if let Some(endpoint) = endpoint {
            builder = builder.with_endpoint(traces_url(endpoint));
        }
        let exporter = builder
            .build()
            .map_err(|error| OtlpError(error.to_string()))?;
        let resource = if std::env::var_os("OTEL_SERVICE_NAME").is_some() {
            Resource::builder().build()
        } else {
            Resource::builder()
                .with_service_name(service_name.to_owned())
                .build()
        };
        let provider = SdkTracerProvider::builder()
            .with_batch_exporter(exporter)
            .with_resource(resource)
            .build();
        Ok(Otlp { provider })
    }

    /// Whether the standard variables name an endpoint (`OTEL_EXPORTER_OTLP_ENDPOINT` or
    /// `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`, non-empty).
    pub fn configured_by_env() -> bool {
        [
            "OTEL_EXPORTER_OTLP_ENDPOINT",
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
        ]
        .iter()
        .any(|name| std::env::var_os(name).is_some_and(|value| !value.is_empty()))
    }

    /// The `tracing` layer that records spans into this exporter.
    pub fn layer<S>(&self) -> tracing_opentelemetry::OpenTelemetryLayer<S, SdkTracer>
    where
        S: tracing::Subscriber + for<'span> tracing_subscriber::registry::LookupSpan<'span>,
    {
        tracing_opentelemetry::layer().with_tracer(self.provider.tracer("dsh-tools"))
    }
}

impl Drop for Otlp {
    fn drop(&mut self) {
        // Nothing is left to report a failed flush to: the process is ending.
        let _ = self.provider.shutdown();
    }
}

/// A base endpoint with the traces path; an endpoint that already ends with it is kept.
fn traces_url(endpoint: &str) -> String {
    let base = endpoint.trim_end_matches('/');
    if base.ends_with(TRACES_PATH) {
        base.to_owned()
    } else {
        format!("{base}{TRACES_PATH}")
    }
}

/// W3C Trace Context (`traceparent`, `tracestate`) through `tracing-opentelemetry`: what MCP
/// requests carry in `params._meta`.
#[derive(Default)]
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
    use super::traces_url;

    #[test]
    fn a_base_endpoint_gets_the_traces_path() {
        assert_eq!(
            traces_url("http://127.0.0.1:6006"),
            "http://127.0.0.1:6006/v1/traces"
        );
        assert_eq!(
            traces_url("http://127.0.0.1:6006/"),
            "http://127.0.0.1:6006/v1/traces"
        );
        assert_eq!(
            traces_url("http://collector:4318/v1/traces"),
            "http://collector:4318/v1/traces"
        );
    }
}
