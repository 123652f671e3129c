//! The MCP conventions' histograms (`mcp.client.operation.duration`,
//! `mcp.server.operation.duration`) of a session over streamable HTTP, exported over OTLP/HTTP
//! to a receiver on loopback and decoded from the protobuf they are sent as.

use dsh_tools::mcp::{McpServer, McpTransport};
use dsh_tools::otel::{
    MCP_CLIENT_DURATION, MCP_CLIENT_SESSION_DURATION, MCP_DURATION_BOUNDARIES, MCP_SERVER_DURATION,
    MCP_SERVER_SESSION_DURATION, Otlp,
};
use dsh_tools::{Registry, ToolDefinition, ToolError};
use hyper::body::Bytes;
use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value;
use opentelemetry_proto::tonic::metrics::v1::HistogramDataPoint;
use opentelemetry_proto::tonic::metrics::v1::metric::Data;
use prost::Message;
use serde_json::json;
use std::collections::BTreeMap;
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender, unbounded_channel};
use tracing_subscriber::layer::SubscriberExt;

use crate::common::{call, mirror};
use crate::mcp_support::{self, WAIT};
use crate::otlp_support::receiver;
use crate::require_tools;
use dsh_tools::prelude::*;

/// A data point's attributes as text.
fn attributes(point: &HistogramDataPoint) -> BTreeMap<String, String> {
    point
        .attributes
        .iter()
        .map(|attribute| {
            let value = match attribute
                .value
                .as_ref()
                .and_then(|value| value.value.as_ref())
            {
                Some(Value::StringValue(text)) => text.clone(),
                Some(Value::IntValue(number)) => number.to_string(),
                other => format!("{other:?}"),
            };
            (attribute.key.clone(), value)
        })
        .collect()
}

/// The data points of histogram `name` whose attributes include `with`.
fn points<'a>(
    histograms: &'a BTreeMap<String, Vec<HistogramDataPoint>>,
    name: &str,
    with: &[(&str, &str)],
) -> Vec<&'a HistogramDataPoint> {
    histograms
        .get(name)
        .map(Vec::as_slice)
        .unwrap_or_default()
        .iter()
        .filter(|point| {
            let attributes = attributes(point);
            with.iter()
                .all(|(key, value)| attributes.get(*key).map(String::as_str) == Some(*value))
        })
        .collect()
}

/// The histograms the receiver was sent, by name (every one in seconds).
fn histograms(
    received: &mut UnboundedReceiver<(String, Bytes)>,
) -> BTreeMap<String, Vec<HistogramDataPoint>> {
    let mut histograms: BTreeMap<String, Vec<HistogramDataPoint>> = BTreeMap::new();
    while let Ok((path, body)) = received.try_recv() {
        if path != "/v1/metrics" {
            continue;
        }
        let request = ExportMetricsServiceRequest::decode(body).expect("OTLP metrics");
        let metrics = request
            .resource_metrics
            .into_iter()
            .flat_map(|resource| resource.scope_metrics)
            .flat_map(|scope| scope.metrics);
        for metric in metrics {
            assert_eq!(metric.unit, "s", "{}", metric.name);
            if let Some(Data::Histogram(histogram)) = metric.data {
                histograms
                    .entry(metric.name)
                    .or_default()
                    .extend(histogram.data_points);
            }
        }
    }
    histograms
}

/// A client and a server in this process, each request timed on both sides with the
/// attributes the conventions give the histograms, and no session or request id among them.
#[tokio::test]
async fn every_mcp_request_is_timed_on_both_sides() {
    let (address, mut received) = receiver().await;
    let otlp = Otlp::new(Some(&address), "mcp-metrics-test").unwrap();
    let layer = otlp
        .mcp_duration_layer()
        .expect("metrics are on without OTEL_METRICS_EXPORTER=none");
    let guard = tracing::subscriber::set_default(tracing_subscriber::registry().with(layer));

    let upstream = Registry::new();
    upstream.register(mirror("echo")).unwrap();
    upstream
        .register(
            ToolDefinition::builder("fails")
                .description("Always fails.")
                .parameters(json!({"type": "object"}))
                .handler(|_args, _exec| async { Err(ToolError::new("boom")) })
                .build()
                .unwrap(),
        )
        .unwrap();
    let transport = McpTransport::http(McpTransport::DEFAULT_HTTP_ADDR)
        .await
        .unwrap();
    let port = transport.local_addr().unwrap().port();
    let url = format!("http://127.0.0.1:{port}/mcp");
    let token = transport.bearer_token().unwrap().to_owned();
    let server = tokio::spawn({
        let upstream = upstream.clone();
        async move { upstream.serve_mcp(None, transport).await }
    });
    let client = Registry::new();
    let bridge = client
        .add_mcp_server(
            McpServer::http("up", url).header("authorization", format!("Bearer {token}")),
        )
        .await
        .unwrap();
    let result = client
        .execute(call("c1", "mcp__up__echo", json!({"n": 7})))
        .await;
    assert!(!result.is_error(), "{result:?}");
    assert!(
        client
            .execute(call("c2", "mcp__up__fails", json!({})))
            .await
            .is_error()
    );
    drop(bridge);
    server.abort();
    drop(guard);
    // Dropping the exporter sends what is left; its periodic thread does the blocking send.
    tokio::task::spawn_blocking(move || drop(otlp))
        .await
        .unwrap();

    let histograms = histograms(&mut received);

    let port = port.to_string();
    let sent = points(
        &histograms,
        MCP_CLIENT_DURATION,
        &[
            ("mcp.method.name", "tools/call"),
            ("gen_ai.tool.name", "echo"),
        ],
    );
    assert_eq!(sent.len(), 1, "{histograms:#?}");
    assert_eq!(sent[0].count, 1);
    assert_eq!(sent[0].explicit_bounds, MCP_DURATION_BOUNDARIES);
    let mut expected: BTreeMap<String, String> = [
        ("mcp.method.name", "tools/call"),
        ("gen_ai.operation.name", "execute_tool"),
        ("gen_ai.tool.name", "echo"),
        ("network.transport", "tcp"),
        ("network.protocol.name", "http"),
        ("server.address", "127.0.0.1"),
        ("server.port", port.as_str()),
    ]
    .into_iter()
    .map(|(key, value)| (key.to_owned(), value.to_owned()))
    .collect();
    let mut got = attributes(sent[0]);
    assert!(got.remove("mcp.protocol.version").is_some(), "{got:?}");
    assert_eq!(got, expected);

    let served = points(
        &histograms,
        MCP_SERVER_DURATION,
        &[
            ("mcp.method.name", "tools/call"),
            ("gen_ai.tool.name", "echo"),
        ],
    );
    assert_eq!(served.len(), 1, "{histograms:#?}");
    assert_eq!(served[0].count, 1);
    expected.remove("server.address");
    expected.remove("server.port");
    let mut got = attributes(served[0]);
    assert!(got.remove("mcp.protocol.version").is_some(), "{got:?}");
    assert!(got.remove("network.protocol.version").is_some(), "{got:?}");
    assert_eq!(got, expected);

    // The failed call is its own series on both sides, with the conventions' error type.
    for histogram in [MCP_CLIENT_DURATION, MCP_SERVER_DURATION] {
        let failed = points(
            &histograms,
            histogram,
            &[("gen_ai.tool.name", "fails"), ("error.type", "tool_error")],
        );
        assert_eq!(failed.len(), 1, "{histogram}: {histograms:#?}");
    }
    // The session's other requests are timed too, and no series is per session or request.
    for histogram in [MCP_CLIENT_DURATION, MCP_SERVER_DURATION] {
        let methods: std::collections::BTreeSet<String> = points(&histograms, histogram, &[])
            .into_iter()
            .filter_map(|point| attributes(point).remove("mcp.method.name"))
            .collect();
        assert!(methods.contains("tools/list"), "{histogram}: {methods:?}");
    }
    for point in histograms.values().flatten() {
        let attributes = attributes(point);
        assert!(!attributes.contains_key("mcp.session.id"), "{attributes:?}");
        assert!(
            !attributes.contains_key("jsonrpc.request.id"),
            "{attributes:?}"
        );
    }
}

/// Tells which side's session ended (`client`, `server`), from the event the runtime emits as it
/// ends: the tests wait for it before the metrics are sent.
struct SessionEnds(UnboundedSender<&'static str>);

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for SessionEnds {
    fn on_event(&self, event: &tracing::Event<'_>, _: tracing_subscriber::layer::Context<'_, S>) {
        let side = match event.metadata().name() {
            "mcp_client_session" => "client",
            "mcp_server_session" => "server",
            _ => return,
        };
        let _ = self.0.send(side);
    }
}

/// The one data point of session histogram `name`, its attributes as text and its bounds
/// checked.
fn one_session(
    histograms: &BTreeMap<String, Vec<HistogramDataPoint>>,
    name: &str,
) -> BTreeMap<String, String> {
    let sessions = points(histograms, name, &[]);
    assert_eq!(sessions.len(), 1, "{histograms:#?}");
    assert_eq!(sessions[0].count, 1);
    assert_eq!(sessions[0].explicit_bounds, MCP_DURATION_BOUNDARIES);
    attributes(sessions[0])
}

/// A 2025-era client's streamable HTTP session (`initialize`, then the session closed) is
/// timed by the server when the session ends, with the conventions' attributes.
#[tokio::test]
async fn a_served_http_session_is_timed_when_it_closes() {
    use rmcp::service::{ClientLifecycleMode, ClientServiceExt};
    use rmcp::transport::StreamableHttpClientTransport;
    use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;

    let (address, mut received) = receiver().await;
    let otlp = Otlp::new(Some(&address), "mcp-session-test").unwrap();
    let (ended, mut ends) = unbounded_channel();
    let guard = tracing::subscriber::set_default(
        tracing_subscriber::registry()
            .with(otlp.mcp_duration_layer().expect("metrics are on"))
            .with(SessionEnds(ended)),
    );
    let upstream = Registry::new();
    upstream.register(mirror("echo")).unwrap();
    let transport = McpTransport::http(McpTransport::DEFAULT_HTTP_ADDR)
        .await
        .unwrap();
    let url = format!("http://{}/mcp", transport.local_addr().unwrap());
    let token = transport.bearer_token().unwrap().to_owned();
    let server = tokio::spawn({
        let upstream = upstream.clone();
        async move { upstream.serve_mcp(None, transport).await }
    });
    let client = StreamableHttpClientTransport::from_config(
        StreamableHttpClientTransportConfig::with_uri(url).auth_header(token),
    );
    let running = ().serve_with_lifecycle(client, ClientLifecycleMode::Initialize).await.unwrap();
    running.peer().list_tools(None).await.unwrap();
    // Closing the client deletes the session: the server's handler of it is dropped.
    let _ = running.cancel().await;
    let side = tokio::time::timeout(WAIT, ends.recv())
        .await
        .expect("the session ends")
        .unwrap();
    assert_eq!(side, "server");
    server.abort();
    drop(guard);
    tokio::task::spawn_blocking(move || drop(otlp))
        .await
        .unwrap();

    let histograms = histograms(&mut received);
    let mut got = one_session(&histograms, MCP_SERVER_SESSION_DURATION);
    let version = got
        .remove("mcp.protocol.version")
        .expect("the version agreed");
    assert!(version.starts_with("2025-"), "{version}");
    let expected: BTreeMap<String, String> = [
        ("network.transport", "tcp"),
        ("network.protocol.name", "http"),
        ("network.protocol.version", "1.1"),
    ]
    .into_iter()
    .map(|(key, value)| (key.to_owned(), value.to_owned()))
    .collect();
    assert_eq!(got, expected);
    // rmcp's own client emits nothing.
    assert!(points(&histograms, MCP_CLIENT_SESSION_DURATION, &[]).is_empty());
}

/// A client's stdio session is timed when it disconnects: with the pinned server, a 2026-07-28
/// one, which has no `initialize` (its pipe is the session).
#[tokio::test]
async fn a_client_stdio_session_is_timed_when_it_disconnects() {
    let tools = require_tools!();
    let (address, mut received) = receiver().await;
    let otlp = Otlp::new(Some(&address), "mcp-session-test").unwrap();
    let (ended, mut ends) = unbounded_channel();
    let guard = tracing::subscriber::set_default(
        tracing_subscriber::registry()
            .with(otlp.mcp_duration_layer().expect("metrics are on"))
            .with(SessionEnds(ended)),
    );
    let client = Registry::new();
    let handle = client.add_mcp_server(tools.ours("up", &[])).await.unwrap();
    handle.disconnect().await;
    let side = tokio::time::timeout(WAIT, ends.recv())
        .await
        .expect("the session ends")
        .unwrap();
    assert_eq!(side, "client");
    drop(guard);
    tokio::task::spawn_blocking(move || drop(otlp))
        .await
        .unwrap();

    let histograms = histograms(&mut received);
    let got = one_session(&histograms, MCP_CLIENT_SESSION_DURATION);
    assert_eq!(
        got,
        BTreeMap::from([
            ("mcp.protocol.version".to_owned(), "2026-07-28".to_owned()),
            ("network.transport".to_owned(), "pipe".to_owned()),
        ])
    );
}
