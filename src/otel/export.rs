//! The OTLP/HTTP exporter of spans and metrics: where it sends, how long exit waits for it,
//! and the report of its first failed export.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use opentelemetry::metrics::MeterProvider as _;
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::{MetricExporter, SpanExporter, WithExportConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::metrics::data::ResourceMetrics;
use opentelemetry_sdk::metrics::exporter::PushMetricExporter;
use opentelemetry_sdk::metrics::{SdkMeterProvider, Temporality};
use opentelemetry_sdk::trace::{SdkTracer, SdkTracerProvider, SpanData};

use super::{McpDurationLayer, ToolDurationLayer};

/// The OTLP/HTTP path of traces, appended to a base endpoint as `OTEL_EXPORTER_OTLP_ENDPOINT`'s
/// is (OTLP exporter specification, "Endpoint URLs for OTLP/HTTP").
pub(super) const TRACES_PATH: &str = "/v1/traces";

/// The OTLP/HTTP path of metrics, likewise.
pub(super) const METRICS_PATH: &str = "/v1/metrics";

/// The base endpoint the exporter sends to when neither an endpoint nor a variable names one.
const DEFAULT_ENDPOINT: &str = "http://localhost:4318";

/// Why the exporter could not be built: an endpoint that is not a URL, most often, named as the
/// exporter names it (`endpoint` for the one passed to [`Otlp::new`], else the variable it read,
/// such as `OTEL_EXPORTER_OTLP_ENDPOINT`), or an empty endpoint passed to [`Otlp::new`].
#[derive(Debug)]
pub struct OtlpError(String);

impl std::fmt::Display for OtlpError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "OTLP exporter: {}", self.0)
    }
}

impl std::error::Error for OtlpError {}

/// An OTLP/HTTP exporter of spans on a batch thread, and of the [`TOOL_DURATION`](super::TOOL_DURATION) histogram
/// on a periodic one. Dropping it flushes the spans still queued and the metrics not sent yet,
/// and stops both threads.
pub struct Otlp {
    provider: SdkTracerProvider,
    meters: Option<SdkMeterProvider>,
    /// How long dropping waits for the spans still queued: [`export_bound`].
    flush_bound: Duration,
}

impl std::fmt::Debug for Otlp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Otlp")
            .field("metrics", &self.meters.is_some())
            .finish_non_exhaustive()
    }
}

impl Otlp {
    /// An exporter to `endpoint`, a base URL such as `http://127.0.0.1:4318` (the traces path
    /// `/v1/traces` is appended, as for `OTEL_EXPORTER_OTLP_ENDPOINT`); with `None`, the
    /// standard variables decide (`http://localhost:4318` without them). `service_name` names
    /// the process unless `OTEL_SERVICE_NAME` does.
    ///
    /// # Errors
    /// [`OtlpError`] when `endpoint` is empty, when the endpoint (given or from a variable)
    /// does not parse, or when the HTTP client cannot be built.
    pub fn new(endpoint: Option<&str>, service_name: &str) -> Result<Self, OtlpError> {
        if endpoint.is_some_and(|endpoint| endpoint.trim().is_empty()) {
            return Err(OtlpError("the endpoint is empty".to_owned()));
        }
        let failed = Arc::new(AtomicBool::new(false));
        let mut builder = SpanExporter::builder().with_http();
        if let Some(endpoint) = endpoint {
            builder = builder.with_endpoint(signal_url(endpoint, TRACES_PATH));
        }
        let exporter = Reported {
            inner: builder
                .build()
                .map_err(|error| OtlpError(error.to_string()))?,
            url: export_url(endpoint, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", TRACES_PATH),
            failed: failed.clone(),
        };
        let resource = if std::env::var_os("OTEL_SERVICE_NAME").is_some() {
            Resource::builder().build()
        } else {
            Resource::builder()
                .with_service_name(service_name.to_owned())
                .build()
        };
        let provider = SdkTracerProvider::builder()
            .with_batch_exporter(exporter)
            .with_resource(resource.clone())
            .build();
        let meters = if metrics_disabled() {
            None
        } else {
            let mut builder = MetricExporter::builder().with_http();
            if let Some(endpoint) = endpoint {
                builder = builder.with_endpoint(signal_url(endpoint, METRICS_PATH));
            }
            let exporter = Reported {
                inner: builder
                    .build()
                    .map_err(|error| OtlpError(error.to_string()))?,
                url: export_url(
                    endpoint,
                    "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT",
                    METRICS_PATH,
                ),
                failed,
            };
            Some(
                SdkMeterProvider::builder()
                    .with_periodic_exporter(exporter)
                    .with_resource(resource)
                    .build(),
            )
        };
        Ok(Otlp {
            provider,
            meters,
            flush_bound: export_bound(TRACES_TIMEOUT),
        })
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

    /// The `tracing` layer that records spans into this exporter, without the source location,
    /// thread, busy/idle time and target attributes `tracing-opentelemetry` adds by default.
    /// It records every span it is given: filter it (`Layer::with_filter`, with
    /// [`is_library_target`] as the command line does) to leave out other crates' spans.
    pub fn layer<S>(&self) -> tracing_opentelemetry::OpenTelemetryLayer<S, SdkTracer>
    where
        S: tracing::Subscriber + for<'span> tracing_subscriber::registry::LookupSpan<'span>,
    {
        tracing_opentelemetry::layer()
            .with_location(false)
            .with_threads(false)
            .with_tracked_inactivity(false)
            .with_target(false)
            .with_tracer(self.provider.tracer("dsh-tools"))
    }

    /// The `tracing` layer that records [`TOOL_DURATION`](super::TOOL_DURATION) into this exporter's metrics; `None`
    /// when `OTEL_METRICS_EXPORTER` is `none`.
    pub fn duration_layer(&self) -> Option<ToolDurationLayer> {
        self.meters
            .as_ref()
            .map(|meters| ToolDurationLayer::new(&meters.meter("dsh-tools")))
    }

    /// The `tracing` layer that records [`MCP_CLIENT_DURATION`](super::MCP_CLIENT_DURATION) and [`MCP_SERVER_DURATION`](super::MCP_SERVER_DURATION),
    /// and the session histograms ([`McpDurationLayer`]), into this exporter's metrics; `None`
    /// when `OTEL_METRICS_EXPORTER` is `none`.
    pub fn mcp_duration_layer(&self) -> Option<McpDurationLayer> {
        self.meters
            .as_ref()
            .map(|meters| McpDurationLayer::new(&meters.meter("dsh-tools")))
    }
}

impl Drop for Otlp {
    fn drop(&mut self) {
        // Nothing is left to report a failed flush to: the process is ending. The SDK's own
        // bound (5 s) is shorter than one export may take (10 s by default): a receiver slow
        // to take the last batch lost it.
        let _ = self.provider.shutdown_with_timeout(self.flush_bound);
        if let Some(meters) = &self.meters {
            let _ = meters.shutdown();
        }
    }
}

/// Whether a span or event comes from this library (a `dsh_*` target): the filter for
/// [`Otlp::layer`] that exports the calls' spans and nothing of the crates below them (rmcp's
/// span around every session and its debug events holding whole requests and answers, the
/// HTTP/2 stack's span per frame).
pub fn is_library_target(metadata: &tracing::Metadata<'_>) -> bool {
    metadata.target().starts_with("dsh_")
}

/// The variable that bounds one export of spans, before `OTEL_EXPORTER_OTLP_TIMEOUT`.
const TRACES_TIMEOUT: &str = "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT";

/// How long the last spans may take to leave when the exporter shuts down: twice the time one
/// export may take (an export in flight, then the last batch), that time read as the OTLP
/// exporter reads it (milliseconds in `signal_timeout`, else in `OTEL_EXPORTER_OTLP_TIMEOUT`,
/// else 10 s). Shutting down returns as soon as the batches are sent: this only bounds a
/// receiver that does not answer.
fn export_bound(signal_timeout: &str) -> Duration {
    dsh_tool_runtime::telemetry::otlp_flush_bound(
        std::env::var(signal_timeout).ok(),
        std::env::var("OTEL_EXPORTER_OTLP_TIMEOUT").ok(),
    )
}

/// Whether `OTEL_METRICS_EXPORTER` turns metrics off (`none`, as the SDK configuration
/// specification names it).
fn metrics_disabled() -> bool {
    std::env::var("OTEL_METRICS_EXPORTER").is_ok_and(|value| value.trim() == "none")
}

/// The URL a signal's exporter sends to (see [`resolved_url`]), `signal_variable` the signal's
/// own endpoint variable.
fn export_url(endpoint: Option<&str>, signal_variable: &str, path: &str) -> String {
    let set = |name: &str| std::env::var(name).ok().filter(|value| !value.is_empty());
    resolved_url(
        endpoint,
        set(signal_variable),
        set("OTEL_EXPORTER_OTLP_ENDPOINT"),
        path,
    )
}

/// `endpoint` with the signal's `path`, else the signal's own variable (`signal`) as it is,
/// else `OTEL_EXPORTER_OTLP_ENDPOINT` (`general`) with `path`, else the default with `path`:
/// what the OTLP exporter specification resolves.
pub(super) fn resolved_url(
    endpoint: Option<&str>,
    signal: Option<String>,
    general: Option<String>,
    path: &str,
) -> String {
    if let Some(endpoint) = endpoint {
        return signal_url(endpoint, path);
    }
    if let Some(url) = signal {
        return url;
    }
    let base = general.unwrap_or_else(|| DEFAULT_ENDPOINT.to_owned());
    format!("{}{path}", base.strip_suffix('/').unwrap_or(&base))
}

/// An exporter that reports its first failed export, unless another of the process's
/// exporters sharing `failed` reported one already.
#[derive(Debug)]
struct Reported<E> {
    inner: E,
    /// Where `inner` sends, for the report.
    url: String,
    failed: Arc<AtomicBool>,
}

impl<E> Reported<E> {
    fn report(&self, result: &OTelSdkResult) {
        if let Err(error) = result
            && !self.failed.swap(true, Ordering::Relaxed)
        {
            tracing::warn!(
                target: "dsh_tools::otel",
                endpoint = %self.url,
                error = %error,
                "OTLP export failed (later failures are not reported)"
            );
        }
    }
}

impl opentelemetry_sdk::trace::SpanExporter for Reported<SpanExporter> {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        let result = self.inner.export(batch).await;
        self.report(&result);
        result
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.inner.force_flush()
    }

    fn set_resource(&mut self, resource: &Resource) {
        self.inner.set_resource(resource);
    }
}

impl PushMetricExporter for Reported<MetricExporter> {
    async fn export(&self, metrics: &ResourceMetrics) -> OTelSdkResult {
        let result = self.inner.export(metrics).await;
        self.report(&result);
        result
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.inner.force_flush()
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }

    fn temporality(&self) -> Temporality {
        self.inner.temporality()
    }
}

/// A base endpoint with a signal's path; an endpoint that already ends with it is kept.
pub(super) fn signal_url(endpoint: &str, path: &str) -> String {
    let base = endpoint.trim_end_matches('/');
    if base.ends_with(path) {
        base.to_owned()
    } else {
        format!("{base}{path}")
    }
}
