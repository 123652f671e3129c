//! What the command line's OTLP export tells its user and what it sends: a failed export is
//! reported once, an endpoint that cannot be used is refused naming where it came from, and
//! the spans carry the conventions' attributes without the exporter's own extras.

use std::process::Stdio;

use dsh_tools::otel::{MCP_SERVER_DURATION, TOOL_DURATION};
use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

use crate::otlp_support::receiver;

const BIN: &str = env!("CARGO_BIN_EXE_dsh-tools");
const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// The endpoint variables, removed from every run so the runner's own cannot interfere.
const ENDPOINT_VARIABLES: [&str; 3] = [
    "OTEL_EXPORTER_OTLP_ENDPOINT",
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT",
];

/// Runs `call file_stats` with `args` before it and the environment `env`; its exit code and
/// stderr.
fn call(args: &[&str], env: &[(&str, &str)]) -> (Option<i32>, String) {
    let mut command = std::process::Command::new(BIN);
    for variable in ENDPOINT_VARIABLES {
        command.env_remove(variable);
    }
    let output = command
        .args(args)
        .args(["--builtin", "repo", "--root", ROOT])
        .args(["call", "file_stats", r#"{"path": "Cargo.toml"}"#])
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .output()
        .expect("dsh-tools runs");
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// A loopback endpoint nothing listens on: a port just bound and released.
fn closed_endpoint() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    format!("http://{}", listener.local_addr().unwrap())
}

/// Traces and metrics both fail to reach the endpoint: one line says so, with the URL and the
/// cause, and the call itself succeeds.
#[test]
fn a_failed_export_is_reported_once_with_its_endpoint_and_cause() {
    let endpoint = closed_endpoint();
    let (code, stderr) = call(&["--otlp-endpoint", &endpoint], &[]);
    assert_eq!(code, Some(0), "{stderr}");
    let reports: Vec<&str> = stderr
        .lines()
        .filter(|line| line.contains("OTLP export failed"))
        .collect();
    assert_eq!(reports.len(), 1, "{stderr}");
    let report = reports[0];
    assert!(report.starts_with("dsh-tools: warning: "), "{report}");
    assert!(
        report.contains(&format!("endpoint={endpoint}/v1/")),
        "{report}"
    );
    assert!(report.contains("error="), "{report}");
}

/// An endpoint variable that is not a URL is refused before anything runs, naming the
/// variable, not the flag that was not given.
#[test]
fn an_endpoint_variable_that_is_not_a_url_is_named() {
    for variable in [
        "OTEL_EXPORTER_OTLP_ENDPOINT",
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    ] {
        let (code, stderr) = call(&[], &[(variable, "not a url")]);
        assert_eq!(code, Some(1), "{stderr}");
        assert!(stderr.starts_with("error: OTLP exporter: "), "{stderr}");
        assert!(stderr.contains(&format!("{variable}: ")), "{stderr}");
        assert!(!stderr.contains("--otlp-endpoint"), "{stderr}");
    }
}

/// An empty `--otlp-endpoint` is a usage error, not an export to nowhere.
#[test]
fn an_empty_endpoint_flag_is_refused() {
    let (code, stderr) = call(&["--otlp-endpoint", ""], &[]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("--otlp-endpoint"), "{stderr}");
}

/// What `tracing-opentelemetry` adds by default and the conventions do not ask of these spans.
const NOISE: [&str; 10] = [
    "code.file.path",
    "code.line.number",
    "code.module.name",
    "thread.id",
    "thread.name",
    "busy_ns",
    "idle_ns",
    "target",
    "otel.status_code",
    "otel.status_description",
];

/// A session of `serve` over stdio exports the runtime's spans only, none of rmcp's own, and
/// no span or span event carries the exporter's extras; its requests are timed in the MCP
/// server histogram beside the tool's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_command_lines_spans_are_the_runtimes_without_extras() {
    let (endpoint, mut received) = receiver().await;
    let mut command = tokio::process::Command::new(BIN);
    for variable in ENDPOINT_VARIABLES {
        command.env_remove(variable);
    }
    let mut child = command
        .args(["--otlp-endpoint", &endpoint])
        .args(["--builtin", "repo", "--root", ROOT, "serve"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let messages = [
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"}}}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
            "name": "file_stats", "arguments": {"path": "Cargo.toml"}}}),
        json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {
            "name": "file_stats", "arguments": {"path": 5}}}),
    ];
    for message in messages {
        stdin
            .write_all(format!("{message}\n").as_bytes())
            .await
            .unwrap();
    }
    // Both calls' answers, then end of input.
    let mut answered = 0;
    while answered < 2 {
        let line = lines
            .next_line()
            .await
            .unwrap()
            .expect("the calls' answers");
        let message: Value = serde_json::from_str(&line).unwrap();
        if message["id"] == 2 || message["id"] == 3 {
            answered += 1;
        }
    }
    drop(stdin);
    let output = child.wait_with_output().await.unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let mut spans: Vec<Span> = Vec::new();
    let mut metrics: Vec<String> = Vec::new();
    while let Ok((path, body)) = received.try_recv() {
        if path == "/v1/metrics" {
            let request = ExportMetricsServiceRequest::decode(body).expect("OTLP metrics");
            metrics.extend(
                request
                    .resource_metrics
                    .into_iter()
                    .flat_map(|resource| resource.scope_metrics)
                    .flat_map(|scope| scope.metrics)
                    .map(|metric| metric.name),
            );
        } else if path == "/v1/traces" {
            let request = ExportTraceServiceRequest::decode(body).expect("OTLP traces");
            spans.extend(
                request
                    .resource_spans
                    .into_iter()
                    .flat_map(|resource| resource.scope_spans)
                    .flat_map(|scope| scope.spans),
            );
        }
    }
    assert!(
        metrics.iter().any(|name| name == TOOL_DURATION),
        "{metrics:?}"
    );
    assert!(
        metrics.iter().any(|name| name == MCP_SERVER_DURATION),
        "{metrics:?}"
    );
    let names: Vec<&str> = spans.iter().map(|span| span.name.as_str()).collect();
    assert!(names.contains(&"tools/call file_stats"), "{names:?}");
    assert!(names.contains(&"execute_tool file_stats"), "{names:?}");
    assert!(!names.contains(&"serve_inner"), "{names:?}");
    // A failed call's status is the exporter's own (code and description), not an attribute.
    let failed = spans
        .iter()
        .find(|span| {
            span.name == "execute_tool file_stats"
                && span.status.as_ref().is_some_and(|status| status.code == 2)
        })
        .unwrap_or_else(|| panic!("the failed call's span has status ERROR: {spans:#?}"));
    let message = &failed.status.as_ref().unwrap().message;
    assert!(message.contains("path"), "{message:?}");
    for span in &spans {
        let keys = span
            .attributes
            .iter()
            .chain(span.events.iter().flat_map(|event| &event.attributes))
            .map(|attribute| attribute.key.as_str());
        for key in keys {
            assert!(!NOISE.contains(&key), "{key} on {}: {span:#?}", span.name);
        }
    }
}
