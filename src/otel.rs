//! OpenTelemetry export of the spans every call emits (feature `otel`).
//!
//! The library emits `tracing` spans only ([`crate::telemetry`] lists their names and
//! attributes). This module turns them into OpenTelemetry spans with `tracing-opentelemetry`,
//! exports them over OTLP/HTTP (protobuf) on a batch thread, and installs the W3C Trace Context
//! propagation that MCP requests carry in `params._meta`. From the same spans it records the
//! histograms `gen_ai.execute_tool.duration` ([`ToolDurationLayer`]) and, for MCP,
//! `mcp.client.operation.duration` and `mcp.server.operation.duration` ([`McpDurationLayer`]),
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
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use opentelemetry::KeyValue;
use opentelemetry::metrics::{Histogram, Meter, MeterProvider as _};
use opentelemetry::propagation::TextMapPropagator;
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::{MetricExporter, SpanExporter, WithExportConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::metrics::data::ResourceMetrics;
use opentelemetry_sdk::metrics::exporter::PushMetricExporter;
use opentelemetry_sdk::metrics::{SdkMeterProvider, Temporality};
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::{SdkTracer, SdkTracerProvider, SpanData};
use tracing::Span;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing_opentelemetry::OpenTelemetrySpanExt;
use tracing_subscriber::layer::Context;
use tracing_subscriber::registry::LookupSpan;

use dsh_tool_runtime::telemetry::Propagator;

/// The OTLP/HTTP path of traces, appended to a base endpoint as `OTEL_EXPORTER_OTLP_ENDPOINT`'s
/// is (OTLP exporter specification, "Endpoint URLs for OTLP/HTTP").
const TRACES_PATH: &str = "/v1/traces";

/// The OTLP/HTTP path of metrics, likewise.
const METRICS_PATH: &str = "/v1/metrics";

/// The base endpoint the exporter sends to when neither an endpoint nor a variable names one.
const DEFAULT_ENDPOINT: &str = "http://localhost:4318";

/// The histogram of tool call durations, in seconds, as the GenAI conventions name it
/// ([`SEMCONV`](crate::telemetry::SEMCONV), "Generative AI tool metrics").
pub const TOOL_DURATION: &str = "gen_ai.execute_tool.duration";

/// The explicit bucket boundaries (seconds) the conventions advise for [`TOOL_DURATION`].
pub const TOOL_DURATION_BOUNDARIES: [f64; 14] = [
    0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92,
];

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

/// An OTLP/HTTP exporter of spans on a batch thread, and of the [`TOOL_DURATION`] histogram
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

    /// The `tracing` layer that records [`TOOL_DURATION`] into this exporter's metrics; `None`
    /// when `OTEL_METRICS_EXPORTER` is `none`.
    pub fn duration_layer(&self) -> Option<ToolDurationLayer> {
        self.meters
            .as_ref()
            .map(|meters| ToolDurationLayer::new(&meters.meter("dsh-tools")))
    }

    /// The `tracing` layer that records [`MCP_CLIENT_DURATION`] and [`MCP_SERVER_DURATION`]
    /// into this exporter's metrics; `None` when `OTEL_METRICS_EXPORTER` is `none`.
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
fn resolved_url(
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
fn signal_url(endpoint: &str, path: &str) -> String {
    let base = endpoint.trim_end_matches('/');
    if base.ends_with(path) {
        base.to_owned()
    } else {
        format!("{base}{path}")
    }
}

/// Records [`TOOL_DURATION`] for every call: the time from its `execute_tool` span's creation to
/// its close, the span's own duration, as the conventions ask of a metric reported next to the
/// span. The runtime emits nothing for it but the span; a host with its own
/// [`MeterProvider`](opentelemetry::metrics::MeterProvider) makes one with
/// [`ToolDurationLayer::new`].
///
/// Attributes: `gen_ai.tool.name`, `gen_ai.tool.type`, `error.type` (the failure's code) when
/// the call failed, and `gen_ai.agent.name` (the agent scope) when it ran under one. A call
/// answered from a durable run's journal (`dsh.replayed`) ran earlier and is not recorded again.
pub struct ToolDurationLayer {
    histogram: Histogram<f64>,
}

impl std::fmt::Debug for ToolDurationLayer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolDurationLayer").finish_non_exhaustive()
    }
}

impl ToolDurationLayer {
    /// The histogram [`TOOL_DURATION`] (unit `s`, boundaries [`TOOL_DURATION_BOUNDARIES`]) of
    /// `meter`.
    pub fn new(meter: &Meter) -> Self {
        let histogram = meter
            .f64_histogram(TOOL_DURATION)
            .with_unit("s")
            .with_description("The duration of a single tool execution.")
            .with_boundaries(TOOL_DURATION_BOUNDARIES.to_vec())
            .build();
        ToolDurationLayer { histogram }
    }
}

/// What the layer keeps of one `execute_tool` span until it closes.
struct ToolTiming {
    started: Instant,
    tool: Option<String>,
    tool_type: Option<String>,
    error: Option<String>,
    agent: Option<String>,
    replayed: bool,
}

impl Visit for ToolTiming {
    fn record_str(&mut self, field: &Field, value: &str) {
        let slot = match field.name() {
            "gen_ai.tool.name" => &mut self.tool,
            "gen_ai.tool.type" => &mut self.tool_type,
            "error.type" => &mut self.error,
            "dsh.agent.id" => &mut self.agent,
            _ => return,
        };
        *slot = Some(value.to_owned());
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        if field.name() == "dsh.replayed" {
            self.replayed = value;
        }
    }

    fn record_debug(&mut self, _field: &Field, _value: &dyn std::fmt::Debug) {}
}

/// Whether a span is a call's `execute_tool` span (the runtime's, not a namesake elsewhere).
fn is_call_span(metadata: &tracing::Metadata<'_>) -> bool {
    metadata.name() == "execute_tool" && metadata.target().starts_with("dsh_tool_runtime")
}

impl<S> tracing_subscriber::Layer<S> for ToolDurationLayer
where
    S: tracing::Subscriber + for<'span> LookupSpan<'span>,
{
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        if !is_call_span(attrs.metadata()) {
            return;
        }
        let Some(span) = ctx.span(id) else { return };
        let mut timing = ToolTiming {
            started: Instant::now(),
            tool: None,
            tool_type: None,
            error: None,
            agent: None,
            replayed: false,
        };
        attrs.record(&mut timing);
        span.extensions_mut().insert(timing);
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(id) else { return };
        if let Some(timing) = span.extensions_mut().get_mut::<ToolTiming>() {
            values.record(timing);
        }
    }

    fn on_close(&self, id: Id, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(&id) else { return };
        let Some(timing) = span.extensions_mut().remove::<ToolTiming>() else {
            return;
        };
        if timing.replayed {
            return;
        }
        let Some(tool) = timing.tool else { return };
        let mut attributes = vec![KeyValue::new("gen_ai.tool.name", tool)];
        let optional = [
            ("gen_ai.tool.type", timing.tool_type),
            ("error.type", timing.error),
            ("gen_ai.agent.name", timing.agent),
        ];
        for (key, value) in optional {
            if let Some(value) = value {
                attributes.push(KeyValue::new(key, value));
            }
        }
        self.histogram
            .record(timing.started.elapsed().as_secs_f64(), &attributes);
    }
}

/// Records [`MCP_CLIENT_DURATION`] and [`MCP_SERVER_DURATION`] for every MCP request and
/// notification: the time from its `CLIENT` or `SERVER` span's creation to its close, with the
/// span's [`MCP_DURATION_ATTRIBUTES`]. The runtime emits nothing for it but the spans; a host
/// with its own [`MeterProvider`](opentelemetry::metrics::MeterProvider) makes one with
/// [`McpDurationLayer::new`].
pub struct McpDurationLayer {
    client: Histogram<f64>,
    server: Histogram<f64>,
}

impl std::fmt::Debug for McpDurationLayer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpDurationLayer").finish_non_exhaustive()
    }
}

impl McpDurationLayer {
    /// The two histograms (unit `s`, boundaries [`MCP_DURATION_BOUNDARIES`]) of `meter`.
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
}

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
    use super::{
        MCP_CLIENT_DURATION, MCP_DURATION_ATTRIBUTES, MCP_SERVER_DURATION, METRICS_PATH, Otlp,
        TOOL_DURATION, TRACES_PATH, resolved_url, signal_url,
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
