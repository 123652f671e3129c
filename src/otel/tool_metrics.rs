//! The histogram of tool call durations, recorded from the calls' `execute_tool` spans.

use std::time::Instant;

use opentelemetry::KeyValue;
use opentelemetry::metrics::{Histogram, Meter};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing_subscriber::layer::Context;
use tracing_subscriber::registry::LookupSpan;

/// The histogram of tool call durations, in seconds, as the GenAI conventions name it
/// ([`SEMCONV`](crate::telemetry::SEMCONV), "Generative AI tool metrics").
pub const TOOL_DURATION: &str = "gen_ai.execute_tool.duration";

/// The explicit bucket boundaries (seconds) the conventions advise for [`TOOL_DURATION`].
pub const TOOL_DURATION_BOUNDARIES: [f64; 14] = [
    0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92,
];

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
