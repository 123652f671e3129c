//! A call that crosses MCP is one trace: the client's `tools/call` span carries its context in
//! `params._meta`, the server's span is its child. OpenTelemetry spans collected in memory.

use std::sync::{Arc, Mutex};

use dsh_tools::mcp::{McpServer, McpTransport};
use dsh_tools::{Registry, ToolDefinition, ToolError};
use opentelemetry::trace::{SpanKind, Status, TracerProvider as _};
use opentelemetry::{KeyValue, Value};
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::trace::{SdkTracerProvider, SpanData, SpanExporter};
use serde_json::json;
use tracing_subscriber::layer::SubscriberExt;

use crate::common::{call, mirror};
use dsh_tools::prelude::*;

/// Keeps every exported span.
#[derive(Clone, Debug, Default)]
struct Collected(Arc<Mutex<Vec<SpanData>>>);

impl SpanExporter for Collected {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        self.0.lock().unwrap().extend(batch);
        Ok(())
    }
}

impl Collected {
    fn one(&self, name: &str, kind: SpanKind) -> SpanData {
        let spans = self.0.lock().unwrap();
        let found: Vec<&SpanData> = spans
            .iter()
            .filter(|span| span.name == name && span.span_kind == kind)
            .collect();
        assert_eq!(found.len(), 1, "one {kind:?} span {name}: {spans:#?}");
        found[0].clone()
    }
}

fn attribute(span: &SpanData, key: &str) -> Option<String> {
    span.attributes
        .iter()
        .find(|KeyValue { key: name, .. }| name.as_str() == key)
        .map(|KeyValue { value, .. }| match value {
            Value::String(text) => text.to_string(),
            other => other.to_string(),
        })
}

fn failing() -> ToolDefinition {
    ToolDefinition::builder("fails")
        .description("Always fails.")
        .parameters(json!({"type": "object"}))
        .handler(|_args, _exec| async { Err(ToolError::new("boom")) })
        .build()
        .expect("valid definition")
}

#[tokio::test]
async fn a_call_over_mcp_is_one_trace() {
    let (collected, provider, _guard) = collecting();
    dsh_tools::otel::install_propagator();

    let upstream = Registry::new();
    upstream.register(mirror("echo")).unwrap();
    upstream.register(failing()).unwrap();
    let transport = McpTransport::http(McpTransport::DEFAULT_HTTP_ADDR)
        .await
        .unwrap();
    let address = transport.local_addr().unwrap();
    let url = format!("http://{address}/mcp");
    let token = transport.bearer_token().unwrap().to_owned();
    let server = tokio::spawn({
        let upstream = upstream.clone();
        async move { upstream.serve_mcp(None, transport).await }
    });

    let client = Registry::new();
    let _bridge = client
        .add_mcp_server(
            McpServer::http("up", url).header("authorization", format!("Bearer {token}")),
        )
        .await
        .unwrap();
    let result = client
        .execute(call("c1", "mcp__up__echo", json!({"n": 7})))
        .await;
    assert!(!result.is_error(), "{result:?}");
    let failed = client
        .execute(call("c2", "mcp__up__fails", json!({})))
        .await;
    assert!(failed.is_error());
    server.abort();
    provider.force_flush().unwrap();

    let root = collected.one("execute_tool mcp__up__echo", SpanKind::Internal);
    let sent = collected.one("tools/call echo", SpanKind::Client);
    let served = collected.one("tools/call echo", SpanKind::Server);
    let body = collected.one("execute_tool echo", SpanKind::Internal);
    let trace = root.span_context.trace_id();
    for span in [&sent, &served, &body] {
        assert_eq!(span.span_context.trace_id(), trace, "{span:#?}");
    }
    // The server's span is the client's request span's child, across the wire.
    assert_eq!(served.parent_span_id, sent.span_context.span_id());
    assert!(served.parent_span_is_remote);
    assert_eq!(body.parent_span_id, served.span_context.span_id());

    for (span, kind) in [(&sent, "client"), (&served, "server")] {
        assert_eq!(
            attribute(span, "mcp.method.name").as_deref(),
            Some("tools/call"),
            "{kind}"
        );
        assert_eq!(
            attribute(span, "gen_ai.tool.name").as_deref(),
            Some("echo"),
            "{kind}"
        );
        assert_eq!(
            attribute(span, "gen_ai.operation.name").as_deref(),
            Some("execute_tool"),
            "{kind}"
        );
        assert!(attribute(span, "jsonrpc.request.id").is_some(), "{kind}");
        assert_eq!(attribute(span, "error.type"), None, "{kind}");
    }
    assert_eq!(
        attribute(&sent, "mcp.protocol.version"),
        attribute(&served, "mcp.protocol.version")
    );
    assert!(attribute(&sent, "mcp.protocol.version").is_some());
    assert_eq!(
        attribute(&sent, "network.transport").as_deref(),
        Some("tcp")
    );
    assert_eq!(attribute(&sent, "dsh.mcp.server").as_deref(), Some("up"));

    // The connection's other requests: a span on each side named by the method, the server's
    // the child of the client's (the client's trace context went in the request's `_meta`).
    for method in ["server/discover", "tools/list"] {
        let sent = collected.one(method, SpanKind::Client);
        let served = collected.one(method, SpanKind::Server);
        assert_eq!(
            served.parent_span_id,
            sent.span_context.span_id(),
            "{method}"
        );
        assert_eq!(served.span_context.trace_id(), sent.span_context.trace_id());
        for span in [&sent, &served] {
            assert_eq!(attribute(span, "mcp.method.name").as_deref(), Some(method));
            // Not a tool call: neither a tool nor a GenAI operation.
            assert_eq!(attribute(span, "gen_ai.operation.name"), None, "{method}");
            assert_eq!(attribute(span, "gen_ai.tool.name"), None, "{method}");
            assert_eq!(attribute(span, "error.type"), None, "{method}");
        }
        assert!(attribute(&sent, "jsonrpc.request.id").is_some(), "{method}");
        assert_eq!(
            attribute(&sent, "jsonrpc.request.id"),
            attribute(&served, "jsonrpc.request.id")
        );
    }
    let listed = collected.one("tools/list", SpanKind::Client);
    assert_eq!(
        attribute(&listed, "mcp.protocol.version"),
        attribute(
            &collected.one("tools/list", SpanKind::Server),
            "mcp.protocol.version"
        )
    );
    assert!(attribute(&listed, "mcp.protocol.version").is_some());
    // Where the client's spans say the server is (`server.port` an int), and how it was reached.
    for sent in [listed, collected.one("tools/call echo", SpanKind::Client)] {
        assert_eq!(
            attribute(&sent, "server.address").as_deref(),
            Some("127.0.0.1")
        );
        let port = sent
            .attributes
            .iter()
            .find(|attribute| attribute.key.as_str() == "server.port")
            .map(|attribute| attribute.value.clone());
        assert_eq!(port, Some(Value::I64(i64::from(address.port()))));
        assert_eq!(
            attribute(&sent, "network.transport").as_deref(),
            Some("tcp")
        );
        assert_eq!(
            attribute(&sent, "network.protocol.name").as_deref(),
            Some("http")
        );
    }
    for method in ["tools/list", "tools/call echo"] {
        let served = collected.one(method, SpanKind::Server);
        assert_eq!(
            attribute(&served, "network.transport").as_deref(),
            Some("tcp")
        );
        assert_eq!(
            attribute(&served, "network.protocol.name").as_deref(),
            Some("http")
        );
        assert_eq!(
            attribute(&served, "network.protocol.version").as_deref(),
            Some("1.1")
        );
    }

    // A tool error: `tool_error` on both sides, error status.
    let sent = collected.one("tools/call fails", SpanKind::Client);
    let served = collected.one("tools/call fails", SpanKind::Server);
    for span in [&sent, &served] {
        assert_eq!(attribute(span, "error.type").as_deref(), Some("tool_error"));
        assert!(matches!(span.status, Status::Error { .. }), "{span:#?}");
    }
}

/// A tool that reports its progress once before it answers.
fn progressing() -> ToolDefinition {
    ToolDefinition::builder("progressing")
        .description("Reports progress, then answers.")
        .parameters(json!({"type": "object"}))
        .handler(|_args, exec| async move {
            exec.report_progress(1.0, Some(2.0), Some("half".to_owned()));
            Ok(json!("done"))
        })
        .build()
        .expect("valid definition")
}

/// A notification is a span on both sides too: the server's `notifications/progress` is a
/// `CLIENT` span under its `tools/call` span, its context in the notification's `_meta`, and
/// the client's a `SERVER` span, that span's child: one trace from the client's call.
#[tokio::test]
async fn a_progress_notification_is_a_span_on_each_side_of_one_trace() {
    let (collected, provider, _guard) = collecting();
    dsh_tools::otel::install_propagator();

    let upstream = Registry::new();
    upstream.register(progressing()).unwrap();
    let transport = McpTransport::http(McpTransport::DEFAULT_HTTP_ADDR)
        .await
        .unwrap();
    let url = format!("http://{}/mcp", transport.local_addr().unwrap());
    let token = transport.bearer_token().unwrap().to_owned();
    let server = tokio::spawn({
        let upstream = upstream.clone();
        async move { upstream.serve_mcp(None, transport).await }
    });
    let client = Registry::new();
    let _bridge = client
        .add_mcp_server(
            McpServer::http("up", url).header("authorization", format!("Bearer {token}")),
        )
        .await
        .unwrap();
    // The notification comes on the call's stream before its answer.
    let result = client
        .execute(call("c1", "mcp__up__progressing", json!({})))
        .await;
    assert!(!result.is_error(), "{result:?}");
    server.abort();
    provider.force_flush().unwrap();

    let root = collected.one("execute_tool mcp__up__progressing", SpanKind::Internal);
    let served = collected.one("tools/call progressing", SpanKind::Server);
    let sent = collected.one("notifications/progress", SpanKind::Client);
    let read = collected.one("notifications/progress", SpanKind::Server);
    assert_eq!(sent.parent_span_id, served.span_context.span_id());
    assert_eq!(read.parent_span_id, sent.span_context.span_id());
    assert!(read.parent_span_is_remote);
    for span in [&served, &sent, &read] {
        assert_eq!(
            span.span_context.trace_id(),
            root.span_context.trace_id(),
            "{span:#?}"
        );
    }
    for (span, side) in [(&sent, "server"), (&read, "client")] {
        assert_eq!(
            attribute(span, "mcp.method.name").as_deref(),
            Some("notifications/progress"),
            "{side}"
        );
        assert_eq!(
            attribute(span, "network.transport").as_deref(),
            Some("tcp"),
            "{side}"
        );
        assert_eq!(
            attribute(span, "mcp.protocol.version"),
            attribute(&served, "mcp.protocol.version"),
            "{side}"
        );
        // A notification has no id, and is no tool call.
        assert_eq!(attribute(span, "jsonrpc.request.id"), None, "{side}");
        assert_eq!(attribute(span, "gen_ai.operation.name"), None, "{side}");
        assert_eq!(attribute(span, "error.type"), None, "{side}");
    }
    assert!(attribute(&sent, "mcp.protocol.version").is_some());
    assert_eq!(attribute(&read, "dsh.mcp.server").as_deref(), Some("up"));
}

/// What a client puts in `_meta` only chooses the trace its calls join: a malformed
/// `traceparent` (or `tracestate`) is ignored and the span starts a trace of its own.
#[test]
fn a_malformed_traceparent_is_ignored() {
    use dsh_tools::telemetry::Propagator;

    let (collected, provider, _guard) = collecting();
    let propagator = dsh_tools::otel::W3cPropagator::default();
    let long = "x".repeat(1 << 16);
    for (name, traceparent, tracestate) in [
        ("garbage", "not-a-traceparent", None),
        (
            "zero",
            "00-00000000000000000000000000000000-0000000000000000-01",
            None,
        ),
        ("huge", long.as_str(), Some(long.as_str())),
    ] {
        let span = tracing::info_span!("served", otel.name = name);
        propagator.set_parent(&span, &|key| match key {
            "traceparent" => Some(traceparent.to_owned()),
            "tracestate" => tracestate.map(str::to_owned),
            _ => None,
        });
        drop(span);
    }
    let valid = tracing::info_span!("served", otel.name = "valid");
    propagator.set_parent(&valid, &|key| {
        (key == "traceparent")
            .then(|| "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01".to_owned())
    });
    drop(valid);
    provider.force_flush().unwrap();
    for name in ["garbage", "zero", "huge"] {
        let span = collected.one(name, SpanKind::Internal);
        assert_eq!(
            span.parent_span_id,
            opentelemetry::trace::SpanId::INVALID,
            "{name}"
        );
        assert!(span.span_context.is_valid(), "{name}");
    }
    let span = collected.one("valid", SpanKind::Internal);
    assert_eq!(
        span.span_context.trace_id().to_string(),
        "4bf92f3577b34da6a3ce929d0e0e4736"
    );
    assert_eq!(span.parent_span_id.to_string(), "00f067aa0ba902b7");
    assert!(span.parent_span_is_remote);
}

/// Over a streamable HTTP session (a 2025-era server, which answers `initialize` with an
/// `Mcp-Session-Id`), every client span of the connection names the session.
#[tokio::test]
async fn a_sessions_client_spans_name_the_session() {
    let Some(tools) = crate::mcp_support::tools() else {
        return;
    };
    let (collected, provider, _guard) = collecting();

    let (port, _server) = everything_over_http(tools).await;

    let client = Registry::new();
    let _bridge = client
        .add_mcp_server(McpServer::http(
            "everything",
            format!("http://127.0.0.1:{port}/mcp"),
        ))
        .await
        .unwrap();
    let result = client
        .execute(call(
            "c1",
            "mcp__everything__echo",
            json!({"message": "hi"}),
        ))
        .await;
    assert!(!result.is_error(), "{result:?}");
    provider.force_flush().unwrap();

    let initialize = collected.one("initialize", SpanKind::Client);
    let session = attribute(&initialize, "mcp.session.id").expect("the session of initialize");
    assert!(!session.is_empty());
    let version = attribute(&initialize, "mcp.protocol.version").expect("the version agreed");
    assert_eq!(
        attribute(
            &collected.one("tools/list", SpanKind::Client),
            "mcp.protocol.version"
        ),
        Some(version)
    );
    for name in ["notifications/initialized", "tools/list", "tools/call echo"] {
        let span = collected.one(name, SpanKind::Client);
        assert_eq!(
            attribute(&span, "mcp.session.id").as_deref(),
            Some(session.as_str()),
            "{name}"
        );
        assert_eq!(
            attribute(&span, "dsh.mcp.server").as_deref(),
            Some("everything")
        );
    }
    // A notification has no request id.
    assert_eq!(
        attribute(
            &collected.one("notifications/initialized", SpanKind::Client),
            "jsonrpc.request.id"
        ),
        None
    );
}

/// A 2025-era client opens a streamable HTTP session with `initialize`: the server's spans of
/// its later requests and notifications name the session, and `initialize`'s the version agreed.
#[tokio::test]
async fn a_served_sessions_spans_name_the_session() {
    use rmcp::model::CallToolRequestParams;
    use rmcp::service::{ClientLifecycleMode, ClientServiceExt};
    use rmcp::transport::StreamableHttpClientTransport;
    use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;

    let (collected, provider, _guard) = collecting();

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
    let called = running
        .peer()
        .call_tool(CallToolRequestParams::new("echo"))
        .await
        .unwrap();
    assert_ne!(called.is_error, Some(true), "{called:?}");
    let _ = running.cancel().await;
    server.abort();
    provider.force_flush().unwrap();

    let initialize = collected.one("initialize", SpanKind::Server);
    let version = attribute(&initialize, "mcp.protocol.version").expect("the version agreed");
    let listed = collected.one("tools/list", SpanKind::Server);
    let session = attribute(&listed, "mcp.session.id").expect("the session");
    assert!(!session.is_empty());
    for name in ["notifications/initialized", "tools/call echo"] {
        let span = collected.one(name, SpanKind::Server);
        assert_eq!(
            attribute(&span, "mcp.session.id").as_deref(),
            Some(session.as_str()),
            "{name}"
        );
        assert_eq!(
            attribute(&span, "mcp.protocol.version").as_deref(),
            Some(version.as_str()),
            "{name}"
        );
    }
    assert_eq!(
        attribute(
            &collected.one("notifications/initialized", SpanKind::Server),
            "jsonrpc.request.id"
        ),
        None
    );
}

/// Kills the child process when dropped.
struct Killed(std::process::Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Spans exported to memory through the OpenTelemetry layer, for this thread until the guard
/// drops.
fn collecting() -> (
    Collected,
    SdkTracerProvider,
    tracing::subscriber::DefaultGuard,
) {
    let collected = Collected::default();
    let provider = SdkTracerProvider::builder()
        .with_simple_exporter(collected.clone())
        .build();
    let subscriber = tracing_subscriber::registry()
        .with(tracing_opentelemetry::layer().with_tracer(provider.tracer("test")));
    let guard = tracing::subscriber::set_default(subscriber);
    (collected, provider, guard)
}

/// server-everything over streamable HTTP on a free port, once that port accepts connections
/// (bounded: a server that never listens fails the test); killed when the guard drops.
async fn everything_over_http(tools: &crate::mcp_support::Tools) -> (u16, Killed) {
    let port = crate::mcp_support::free_port();
    let server = std::process::Command::new(tools.bin("mcp-server-everything"))
        .arg("streamableHttp")
        .env("PORT", port.to_string())
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("server-everything starts");
    let server = Killed(server);
    // Waits for the server's port to accept connections (bounded: a server that never listens
    // fails the test).
    let listening = async {
        while tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_err()
        {
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    };
    tokio::time::timeout(std::time::Duration::from_secs(60), listening)
        .await
        .expect("server-everything listens");
    (port, server)
}

/// A 2025-era client that lists one root and keeps the `_meta` of the request that asked.
#[derive(Clone, Default)]
struct RootsClient(Arc<Mutex<Option<rmcp::model::RequestMetaObject>>>);

#[allow(deprecated)] // roots are how 2025-era clients are asked for theirs
impl rmcp::ClientHandler for RootsClient {
    async fn list_roots(
        &self,
        context: rmcp::service::RequestContext<rmcp::RoleClient>,
    ) -> Result<rmcp::model::ListRootsResult, rmcp::ErrorData> {
        *self.0.lock().unwrap() = Some(context.meta.clone());
        Ok(rmcp::model::ListRootsResult::new(vec![
            rmcp::model::Root::new("file:///work"),
        ]))
    }

    fn get_info(&self) -> rmcp::model::ClientConfig {
        let capabilities = rmcp::model::ClientCapabilities::builder()
            .enable_roots()
            .build();
        rmcp::model::ClientConfig::new(
            capabilities,
            rmcp::model::Implementation::new("roots-test", "1"),
        )
    }
}

/// A served call that asks its 2025-era client for its roots: the request is a `CLIENT` span
/// under the call (the conventions have the side that sends a request report it as a client),
/// named and attributed as they say, and its trace context reaches the client in the
/// request's `_meta`.
#[tokio::test]
async fn a_servers_request_to_its_client_is_a_client_span() {
    use dsh_tools::client::RootsRequest;
    use rmcp::model::CallToolRequestParams;
    use rmcp::service::{ClientLifecycleMode, ClientServiceExt};
    use rmcp::transport::StreamableHttpClientTransport;
    use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;

    let (collected, provider, _guard) = collecting();
    dsh_tools::otel::install_propagator();

    let upstream = Registry::new();
    upstream
        .register(
            ToolDefinition::builder("roots")
                .description("Counts the client's roots.")
                .parameters(json!({"type": "object"}))
                .handler(|_args, exec| async move {
                    let roots = exec
                        .list_roots(RootsRequest::new())
                        .await
                        .map_err(|error| ToolError::new(error.to_string()))?;
                    Ok(json!(roots.len()))
                })
                .build()
                .unwrap(),
        )
        .unwrap();
    let transport = McpTransport::http(McpTransport::DEFAULT_HTTP_ADDR)
        .await
        .unwrap();
    let url = format!("http://{}/mcp", transport.local_addr().unwrap());
    let token = transport.bearer_token().unwrap().to_owned();
    let server = tokio::spawn({
        let upstream = upstream.clone();
        async move { upstream.serve_mcp(None, transport).await }
    });

    let asked = RootsClient::default();
    let client = StreamableHttpClientTransport::from_config(
        StreamableHttpClientTransportConfig::with_uri(url).auth_header(token),
    );
    let running = asked
        .clone()
        .serve_with_lifecycle(client, ClientLifecycleMode::Initialize)
        .await
        .unwrap();
    let called = running
        .peer()
        .call_tool(CallToolRequestParams::new("roots"))
        .await
        .unwrap();
    assert_ne!(called.is_error, Some(true), "{called:?}");
    let _ = running.cancel().await;
    server.abort();
    provider.force_flush().unwrap();

    let served = collected.one("tools/call roots", SpanKind::Server);
    let request = collected.one("roots/list", SpanKind::Client);
    assert_eq!(
        request.span_context.trace_id(),
        served.span_context.trace_id()
    );
    // Under the call: its chain of parents reaches the call's span.
    let spans = collected.0.lock().unwrap().clone();
    let mut chain = Vec::new();
    let mut parent = request.parent_span_id;
    while let Some(span) = spans
        .iter()
        .find(|span| span.span_context.span_id() == parent)
    {
        chain.push(span.name.to_string());
        parent = span.parent_span_id;
    }
    let at = |name: &str| chain.iter().position(|link| link == name);
    assert!(
        at("execute_tool roots") < at("tools/call roots") && at("execute_tool roots").is_some(),
        "{chain:?}"
    );
    for (key, value) in [
        ("mcp.method.name", "roots/list"),
        ("network.transport", "tcp"),
        ("network.protocol.name", "http"),
        ("network.protocol.version", "1.1"),
    ] {
        assert_eq!(attribute(&request, key).as_deref(), Some(value), "{key}");
    }
    for key in ["mcp.session.id", "mcp.protocol.version"] {
        assert_eq!(attribute(&request, key), attribute(&served, key), "{key}");
        assert!(attribute(&request, key).is_some(), "{key}");
    }
    assert!(attribute(&request, "jsonrpc.request.id").is_some());
    // The client got the request's context: its `traceparent` names the request's span.
    let meta = asked
        .0
        .lock()
        .unwrap()
        .clone()
        .expect("the client was asked");
    let traceparent = meta.get_traceparent().expect("a traceparent");
    assert!(
        traceparent.contains(&request.span_context.span_id().to_string()),
        "{traceparent}"
    );
}

/// Our client answering a server's request (here an elicitation of server-everything, over a
/// 2025-era session) reports it as a `SERVER` span, as the conventions have the side that
/// receives a request do, named and attributed like its own requests' spans.
#[tokio::test]
async fn a_request_our_client_answers_is_a_server_span() {
    use dsh_tools::client::{Elicitation, ElicitationRequest};

    let Some(tools) = crate::mcp_support::tools() else {
        return;
    };
    let (collected, provider, _guard) = collecting();

    let (port, _server) = everything_over_http(tools).await;

    let client = Registry::new();
    let _bridge = client
        .add_mcp_server(
            McpServer::http("everything", format!("http://127.0.0.1:{port}/mcp"))
                .on_elicitation(|_: ElicitationRequest| async { Elicitation::Decline }),
        )
        .await
        .unwrap();
    let result = client
        .execute(call(
            "c1",
            "mcp__everything__trigger-elicitation-request",
            json!({}),
        ))
        .await;
    assert!(!result.is_error(), "{result:?}");
    provider.force_flush().unwrap();

    let answered = collected.one("elicitation/create", SpanKind::Server);
    let sent = collected.one("tools/call trigger-elicitation-request", SpanKind::Client);
    for (key, value) in [
        ("mcp.method.name", "elicitation/create"),
        ("network.transport", "tcp"),
        ("network.protocol.name", "http"),
        ("dsh.mcp.server", "everything"),
    ] {
        assert_eq!(attribute(&answered, key).as_deref(), Some(value), "{key}");
    }
    for key in ["mcp.session.id", "mcp.protocol.version"] {
        assert!(attribute(&answered, key).is_some(), "{key}");
        assert_eq!(attribute(&answered, key), attribute(&sent, key), "{key}");
    }
    assert!(attribute(&answered, "jsonrpc.request.id").is_some());
}
