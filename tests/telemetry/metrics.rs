//! The tool duration histogram (`gen_ai.execute_tool.duration`) exported over OTLP/HTTP to a
//! receiver on loopback, decoded from the protobuf it is sent as.
//!
//! Arize Phoenix, the receiver of the trace tests, takes traces only (it serves no
//! `/v1/metrics`), so the metrics go to an OTLP endpoint of the test's own.

use dsh_tools::otel::{Otlp, TOOL_DURATION, TOOL_DURATION_BOUNDARIES};
use dsh_tools::{Registry, ToolDefinition, ToolError};
use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use opentelemetry_proto::tonic::common::v1::{KeyValue, any_value};
use opentelemetry_proto::tonic::metrics::v1::metric::Data;
use opentelemetry_proto::tonic::metrics::v1::{HistogramDataPoint, Metric};
use prost::Message;
use serde_json::json;
use tracing_subscriber::layer::SubscriberExt;

use crate::common::{call, mirror};
use crate::otlp_support::receiver;

fn text(attributes: &[KeyValue], key: &str) -> Option<String> {
    attributes
        .iter()
        .find(|attribute| attribute.key == key)
        .and_then(|attribute| attribute.value.as_ref()?.value.as_ref())
        .map(|value| match value {
            any_value::Value::StringValue(text) => text.clone(),
            other => format!("{other:?}"),
        })
}

/// The data point whose `gen_ai.tool.name` is `tool`.
fn point<'a>(points: &'a [HistogramDataPoint], tool: &str) -> &'a HistogramDataPoint {
    let found: Vec<&HistogramDataPoint> = points
        .iter()
        .filter(|point| text(&point.attributes, "gen_ai.tool.name").as_deref() == Some(tool))
        .collect();
    assert_eq!(found.len(), 1, "one data point for {tool}: {points:#?}");
    found[0]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_calls_duration_is_exported_as_the_conventions_histogram() {
    let (address, mut received) = receiver().await;
    let otlp = Otlp::new(Some(&address), "metrics-test").unwrap();
    let layer = otlp
        .duration_layer()
        .expect("metrics are on without OTEL_METRICS_EXPORTER=none");
    let subscriber = tracing_subscriber::registry().with(layer);
    let guard = tracing::subscriber::set_default(subscriber);

    let registry = Registry::new();
    registry.register(mirror("echo")).unwrap();
    registry
        .register(
            ToolDefinition::builder("fails")
                .description("Always fails.")
                .parameters(json!({"type": "object"}))
                .handler(|_args, _exec| async { Err(ToolError::new("boom").with_code("BOOM")) })
                .build()
                .unwrap(),
        )
        .unwrap();
    let planner = registry.agent("planner");
    for id in ["c1", "c2"] {
        assert!(
            !registry
                .execute(call(id, "echo", json!({})))
                .await
                .is_error()
        );
    }
    assert!(
        registry
            .execute(call("c3", "fails", json!({})).with_agent(planner.id().clone()))
            .await
            .is_error()
    );
    // A call answered from a durable run's journal ran before: its span is not a duration. A
    // span named `execute_tool` outside the runtime is not a call.
    tracing::info_span!(
        target: "dsh_tool_runtime::telemetry",
        "execute_tool",
        gen_ai.tool.name = "echo",
        dsh.replayed = true,
    )
    .in_scope(|| {});
    tracing::info_span!("execute_tool", gen_ai.tool.name = "echo").in_scope(|| {});
    drop(guard);
    // Dropping the exporter sends what is left; its periodic thread does the blocking send.
    tokio::task::spawn_blocking(move || drop(otlp))
        .await
        .unwrap();

    let metrics = exported(&mut received);
    let durations: Vec<&Metric> = metrics
        .iter()
        .filter(|metric| metric.name == TOOL_DURATION)
        .collect();
    assert_eq!(durations.len(), 1, "{metrics:#?}");
    let metric = durations[0];
    assert_eq!(metric.name, "gen_ai.execute_tool.duration");
    assert_eq!(metric.unit, "s");
    let Some(Data::Histogram(histogram)) = &metric.data else {
        panic!("a histogram: {metric:#?}");
    };
    let points = &histogram.data_points;
    assert_eq!(points.len(), 2, "{points:#?}");

    let echo = point(points, "echo");
    // The two calls, not the replayed span nor the namesake.
    assert_eq!(echo.count, 2);
    assert_eq!(echo.explicit_bounds, TOOL_DURATION_BOUNDARIES);
    assert_eq!(echo.explicit_bounds[0], 0.01);
    assert_eq!(echo.explicit_bounds[13], 81.92);
    assert_eq!(
        text(&echo.attributes, "gen_ai.tool.type").as_deref(),
        Some("function")
    );
    assert_eq!(text(&echo.attributes, "error.type"), None);
    assert_eq!(text(&echo.attributes, "gen_ai.agent.name"), None);
    // Seconds: a call that returns its arguments takes far less than one.
    assert!(
        echo.sum.is_some_and(|sum| sum > 0.0 && sum < 2.0),
        "{echo:#?}"
    );

    let fails = point(points, "fails");
    assert_eq!(fails.count, 1);
    assert_eq!(
        text(&fails.attributes, "error.type").as_deref(),
        Some("BOOM")
    );
    assert_eq!(
        text(&fails.attributes, "gen_ai.agent.name").as_deref(),
        Some("planner")
    );
    assert_eq!(fails.attributes.len(), 4, "{:#?}", fails.attributes);
}

/// The metrics of every request `received` holds, by name.
fn exported(
    received: &mut tokio::sync::mpsc::UnboundedReceiver<(String, hyper::body::Bytes)>,
) -> Vec<Metric> {
    let mut metrics = Vec::new();
    while let Ok((path, body)) = received.try_recv() {
        if path == "/v1/metrics" {
            let request = ExportMetricsServiceRequest::decode(body).expect("OTLP metrics");
            metrics.extend(
                request
                    .resource_metrics
                    .into_iter()
                    .flat_map(|resource| resource.scope_metrics)
                    .flat_map(|scope| scope.metrics),
            );
        }
    }
    metrics
}

/// Runs the command line's `call` of the built-in `file_stats`, exporting to `endpoint`, with
/// the environment `env`.
#[cfg(feature = "cli")]
async fn call_through_the_command_line(endpoint: &str, env: &[(&str, &str)]) {
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_dsh-tools"));
    command
        .args(["--otlp-endpoint", endpoint])
        .args(["--builtin", "repo", "--root", env!("CARGO_MANIFEST_DIR")])
        .args(["call", "file_stats", r#"{"path": "Cargo.toml"}"#])
        .envs(env.iter().copied())
        .stdin(std::process::Stdio::null());
    let output = command.output().await.expect("dsh-tools runs");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// `--otlp-endpoint` exports the histogram too: sent as the command line exits.
#[cfg(feature = "cli")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_command_lines_export_has_the_duration_histogram() {
    let (endpoint, mut received) = receiver().await;
    call_through_the_command_line(&endpoint, &[]).await;
    let metrics = exported(&mut received);
    let metric = metrics
        .iter()
        .find(|metric| metric.name == TOOL_DURATION)
        .unwrap_or_else(|| panic!("{metrics:#?}"));
    let Some(Data::Histogram(histogram)) = &metric.data else {
        panic!("a histogram: {metric:#?}");
    };
    assert_eq!(point(&histogram.data_points, "file_stats").count, 1);
}

/// `OTEL_METRICS_EXPORTER=none` sends the traces only.
#[cfg(feature = "cli")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_none_exports_no_metrics() {
    let (endpoint, mut received) = receiver().await;
    call_through_the_command_line(&endpoint, &[("OTEL_METRICS_EXPORTER", "none")]).await;
    let mut paths = Vec::new();
    while let Ok((path, _)) = received.try_recv() {
        paths.push(path);
    }
    assert!(paths.iter().any(|path| path == "/v1/traces"), "{paths:?}");
    assert!(!paths.iter().any(|path| path == "/v1/metrics"), "{paths:?}");
}
