//! Spans read back from a subscriber: the notifications' of both sides and the attributes of
//! requests about a prompt or a resource, as the MCP conventions of
//! [`SEMCONV`](dsh_tool_runtime::telemetry::SEMCONV) name them, and the trace context carried in
//! a notification's `_meta` both ways.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, Once};

use dsh_tool_runtime::telemetry::{Propagator, set_propagator};
use rmcp::model::{ClientJsonRpcMessage, GetMeta, ServerJsonRpcMessage};
use serde_json::json;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing_subscriber::layer::{Context, Layer, SubscriberExt};

#[cfg(feature = "server")]
use super::server::outbound_notification;
use super::*;

/// The `traceparent` of a span whose tracing id is `id`, as the test propagator writes it.
fn traceparent(id: u64) -> String {
    format!("00-{:032x}-{id:016x}-01", 7)
}

/// Writes [`traceparent`] and notes every context it is asked to set as a parent (the id of
/// the span, and the `traceparent` read), per thread: each test has a subscriber of its
/// own, whose span ids start again at 1.
struct Noting;

thread_local! {
    static PARENTS: RefCell<Vec<(u64, String)>> = const { RefCell::new(Vec::new()) };
}

impl Propagator for Noting {
    fn inject(&self, span: &Span, set: &mut dyn FnMut(&str, String)) {
        if let Some(id) = span.id() {
            set("traceparent", traceparent(id.into_u64()));
        }
    }
    fn set_parent(&self, span: &Span, get: &dyn Fn(&str) -> Option<String>) {
        if let (Some(id), Some(parent)) = (span.id(), get("traceparent")) {
            PARENTS.with_borrow_mut(|parents| parents.push((id.into_u64(), parent)));
        }
    }
}

/// One span: its tracing id and its fields as text.
#[derive(Clone, Debug)]
struct Seen {
    id: u64,
    /// The tracing id of its parent span, given or current.
    parent: Option<u64>,
    fields: BTreeMap<String, String>,
}

impl Seen {
    fn field(&self, name: &str) -> Option<&str> {
        self.fields.get(name).map(String::as_str)
    }
}

#[derive(Clone, Default)]
struct Spans(Arc<Mutex<Vec<Seen>>>);

struct Fields<'a>(&'a mut BTreeMap<String, String>);

impl Visit for Fields<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_owned(), value.to_owned());
    }
    fn record_i64(&mut self, field: &Field, value: i64) {
        self.0.insert(field.name().to_owned(), value.to_string());
    }
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0.insert(field.name().to_owned(), format!("{value:?}"));
    }
}

impl<S: tracing::Subscriber> Layer<S> for Spans {
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, context: Context<'_, S>) {
        let mut fields = BTreeMap::new();
        attrs.record(&mut Fields(&mut fields));
        let parent = match attrs.parent() {
            Some(parent) => Some(parent.into_u64()),
            None if attrs.is_contextual() => context.current_span().id().map(Id::into_u64),
            None => None,
        };
        self.0.lock().unwrap().push(Seen {
            id: id.into_u64(),
            parent,
            fields,
        });
    }
    fn on_record(&self, id: &Id, values: &Record<'_>, _: Context<'_, S>) {
        let mut spans = self.0.lock().unwrap();
        if let Some(span) = spans.iter_mut().rev().find(|span| span.id == id.into_u64()) {
            values.record(&mut Fields(&mut span.fields));
        }
    }
}

impl Spans {
    /// Spans seen on this thread until the guard drops, with the test propagator.
    fn install() -> (Spans, tracing::subscriber::DefaultGuard) {
        static PROPAGATOR: Once = Once::new();
        PROPAGATOR.call_once(|| assert!(set_propagator(Noting)));
        let spans = Spans::default();
        let subscriber = tracing_subscriber::registry().with(spans.clone());
        (spans, tracing::subscriber::set_default(subscriber))
    }

    /// The one span named `name`.
    fn one(&self, name: &str) -> Seen {
        let spans = self.0.lock().unwrap();
        let found: Vec<&Seen> = spans
            .iter()
            .filter(|span| span.field("otel.name") == Some(name))
            .collect();
        assert_eq!(found.len(), 1, "one {name} span: {spans:?}");
        found[0].clone()
    }
}

/// The parent context the test propagator was asked to set on span `id`.
fn parent_of(id: u64) -> Option<String> {
    PARENTS.with_borrow(|parents| {
        parents
            .iter()
            .rev()
            .find(|(span, _)| *span == id)
            .map(|(_, parent)| parent.clone())
    })
}

/// A streamable HTTP connection's spans, its session `s-1` agreed on `2025-11-25`.
fn http_connection() -> ClientSpans {
    let session = SessionCell::default();
    *session.lock() = Some(Arc::from("s-1"));
    let mut spans = ClientSpans::new(
        ClientPeer::http("up", "http://127.0.0.1:8931/mcp"),
        Some(session),
    );
    spans.protocol_version = Some("2025-11-25".to_owned());
    spans
}

const REMOTE: &str = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";

fn from_server(json: serde_json::Value) -> ServerJsonRpcMessage {
    serde_json::from_value(json).unwrap()
}

#[test]
fn a_notification_the_client_reads_is_a_server_span_under_the_context_in_its_meta() {
    let (spans, _guard) = Spans::install();
    let mut connection = http_connection();
    connection.received(&from_server(json!({"jsonrpc": "2.0",
        "method": "notifications/progress",
        "params": {"progressToken": 1, "progress": 2, "_meta": {"traceparent": REMOTE}}})));
    let span = spans.one("notifications/progress");
    let expected = [
        ("otel.kind", "server"),
        ("mcp.method.name", "notifications/progress"),
        ("mcp.protocol.version", "2025-11-25"),
        ("mcp.session.id", "s-1"),
        ("network.transport", "tcp"),
        ("network.protocol.name", "http"),
        ("dsh.mcp.server", "up"),
    ];
    for (key, value) in expected {
        assert_eq!(span.field(key), Some(value), "{key}: {span:?}");
    }
    // A notification has no id; only tool calls are GenAI operations.
    for key in [
        "jsonrpc.request.id",
        "gen_ai.operation.name",
        "error.type",
        "mcp.resource.uri",
    ] {
        assert_eq!(span.field(key), None, "{key}: {span:?}");
    }
    assert_eq!(parent_of(span.id).as_deref(), Some(REMOTE));
}

#[test]
fn list_changes_and_log_messages_the_client_reads_are_spans_too() {
    let (spans, _guard) = Spans::install();
    let mut connection = ClientSpans::new(ClientPeer::stdio("local"), None);
    connection.received(&from_server(
        json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}),
    ));
    connection.received(&from_server(json!({"jsonrpc": "2.0",
        "method": "notifications/message", "params": {"level": "info", "data": "x"}})));
    connection.received(&from_server(json!({"jsonrpc": "2.0",
        "method": "notifications/resources/updated", "params": {"uri": "file:///a.txt"}})));
    for name in [
        "notifications/tools/list_changed",
        "notifications/message",
        "notifications/resources/updated",
    ] {
        let span = spans.one(name);
        assert_eq!(span.field("otel.kind"), Some("server"));
        assert_eq!(span.field("mcp.method.name"), Some(name));
        assert_eq!(span.field("network.transport"), Some("pipe"));
        assert_eq!(span.field("network.protocol.name"), None);
        // Before `initialize` is answered there is no version, and stdio has no session.
        assert_eq!(span.field("mcp.protocol.version"), None);
        assert_eq!(span.field("mcp.session.id"), None);
        // No `_meta` context: the span stays where it is.
        assert_eq!(parent_of(span.id), None);
    }
    let updated = spans.one("notifications/resources/updated");
    assert_eq!(updated.field("mcp.resource.uri"), Some("file:///a.txt"));
}

#[test]
fn a_notification_the_client_sends_carries_its_spans_context_in_its_meta() {
    let (spans, _guard) = Spans::install();
    let mut connection = http_connection();
    let mut message: ClientJsonRpcMessage = serde_json::from_value(json!({"jsonrpc": "2.0",
        "method": "notifications/cancelled", "params": {"requestId": 4}}))
    .unwrap();
    connection.sent(&mut message);
    let span = spans.one("notifications/cancelled");
    let expected = [
        ("otel.kind", "client"),
        ("mcp.method.name", "notifications/cancelled"),
        ("mcp.protocol.version", "2025-11-25"),
        ("mcp.session.id", "s-1"),
        ("network.transport", "tcp"),
        ("network.protocol.name", "http"),
        ("server.address", "127.0.0.1"),
        ("server.port", "8931"),
        ("dsh.mcp.server", "up"),
    ];
    for (key, value) in expected {
        assert_eq!(span.field(key), Some(value), "{key}: {span:?}");
    }
    assert_eq!(span.field("jsonrpc.request.id"), None);
    let ClientJsonRpcMessage::Notification(notification) = &message else {
        panic!("a notification: {message:?}");
    };
    assert_eq!(
        notification.notification.get_meta().0.get("traceparent"),
        Some(&Value::String(traceparent(span.id)))
    );
    // On the wire, in `params._meta`.
    let wire = serde_json::to_value(&message).unwrap();
    assert_eq!(wire["params"]["_meta"]["traceparent"], traceparent(span.id));
    assert_eq!(wire["params"]["requestId"], 4);
}

#[test]
fn a_2026_sessions_notifications_name_the_version_its_requests_name() {
    let (spans, _guard) = Spans::install();
    let mut connection = ClientSpans::new(ClientPeer::stdio("local"), None);
    let mut listing: ClientJsonRpcMessage = serde_json::from_value(json!({"jsonrpc": "2.0",
        "id": 1, "method": "tools/list",
        "params": {"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}}}))
    .unwrap();
    connection.sent(&mut listing);
    connection.received(&from_server(
        json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}),
    ));
    let span = spans.one("notifications/tools/list_changed");
    assert_eq!(span.field("mcp.protocol.version"), Some("2026-07-28"));
}

fn from_client(json: serde_json::Value) -> ClientJsonRpcMessage {
    serde_json::from_value(json).unwrap()
}

#[test]
fn a_prompt_request_is_named_by_its_prompt_and_a_resource_request_names_its_uri() {
    let (spans, _guard) = Spans::install();
    let mut connection = http_connection();
    connection.sent(&mut from_client(json!({"jsonrpc": "2.0", "id": 3,
        "method": "prompts/get", "params": {"name": "greet"}})));
    let prompt = spans.one("prompts/get greet");
    let expected = [
        ("otel.kind", "client"),
        ("mcp.method.name", "prompts/get"),
        ("gen_ai.prompt.name", "greet"),
        ("jsonrpc.request.id", "3"),
    ];
    for (key, value) in expected {
        assert_eq!(prompt.field(key), Some(value), "{key}: {prompt:?}");
    }
    // A prompt is no tool call.
    for key in [
        "gen_ai.operation.name",
        "gen_ai.tool.name",
        "mcp.resource.uri",
    ] {
        assert_eq!(prompt.field(key), None, "{key}: {prompt:?}");
    }
    for (id, method) in [
        (4, "resources/read"),
        (5, "resources/subscribe"),
        (6, "resources/unsubscribe"),
    ] {
        connection.sent(&mut from_client(json!({"jsonrpc": "2.0", "id": id,
            "method": method, "params": {"uri": "file:///r.txt"}})));
        // The URI stays out of the name: it is no low-cardinality target.
        let span = spans.one(method);
        assert_eq!(span.field("mcp.method.name"), Some(method));
        assert_eq!(span.field("mcp.resource.uri"), Some("file:///r.txt"));
        assert_eq!(span.field("gen_ai.prompt.name"), None);
    }
}

#[cfg(feature = "server")]
#[test]
fn a_notification_the_server_sends_is_a_client_span_with_its_context_in_its_meta() {
    let (spans, _guard) = Spans::install();
    let outbound = Outbound {
        protocol_version: Some("2025-06-18".to_owned()),
        session: Some("s-2".to_owned()),
        transport: TCP,
        http_version: Some("1.1"),
    };
    let mut progress: ServerNotification = serde_json::from_value(json!({
        "method": "notifications/progress", "params": {"progressToken": 1, "progress": 1}}))
    .unwrap();
    let span = outbound_notification(&mut progress, &outbound);
    let id = span.id().unwrap().into_u64();
    drop(span);
    let seen = spans.one("notifications/progress");
    let expected = [
        ("otel.kind", "client"),
        ("mcp.method.name", "notifications/progress"),
        ("mcp.protocol.version", "2025-06-18"),
        ("mcp.session.id", "s-2"),
        ("network.transport", "tcp"),
        ("network.protocol.name", "http"),
        ("network.protocol.version", "1.1"),
    ];
    for (key, value) in expected {
        assert_eq!(seen.field(key), Some(value), "{key}: {seen:?}");
    }
    for key in ["jsonrpc.request.id", "gen_ai.operation.name", "error.type"] {
        assert_eq!(seen.field(key), None, "{key}: {seen:?}");
    }
    let wire = serde_json::to_value(&progress).unwrap();
    assert_eq!(wire["params"]["_meta"]["traceparent"], traceparent(id));
    assert_eq!(wire["params"]["progressToken"], 1);

    // Over stdio: no session, no HTTP; a list change has no params but its `_meta`.
    let stdio = Outbound {
        transport: PIPE,
        ..Outbound::default()
    };
    let mut changed: ServerNotification =
        serde_json::from_value(json!({"method": "notifications/tools/list_changed"})).unwrap();
    let span = outbound_notification(&mut changed, &stdio);
    let id = span.id().unwrap().into_u64();
    drop(span);
    let seen = spans.one("notifications/tools/list_changed");
    assert_eq!(seen.field("network.transport"), Some("pipe"));
    for key in [
        "mcp.session.id",
        "network.protocol.name",
        "network.protocol.version",
    ] {
        assert_eq!(seen.field(key), None, "{key}: {seen:?}");
    }
    let wire = serde_json::to_value(&changed).unwrap();
    assert_eq!(wire["params"]["_meta"]["traceparent"], traceparent(id));

    let mut updated: ServerNotification = serde_json::from_value(json!({
        "method": "notifications/resources/updated", "params": {"uri": "file:///b"}}))
    .unwrap();
    drop(outbound_notification(&mut updated, &stdio));
    let seen = spans.one("notifications/resources/updated");
    assert_eq!(seen.field("mcp.resource.uri"), Some("file:///b"));
}

/// rmcp acknowledges a `subscriptions/listen` stream itself, with no trace context over HTTP:
/// the client reads the acknowledgement as a `SERVER` span under its listen request's span.
#[test]
fn an_acknowledgement_without_a_context_is_under_the_clients_listen_span() {
    let (spans, _guard) = Spans::install();
    let mut connection = http_connection();
    connection.sent(&mut from_client(json!({"jsonrpc": "2.0", "id": 9,
        "method": "subscriptions/listen",
        "params": {"notifications": {"toolsListChanged": true},
            "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}}})));
    let listen = spans.one("subscriptions/listen");
    connection.received(&from_server(json!({"jsonrpc": "2.0",
        "method": "notifications/subscriptions/acknowledged",
        "params": {"notifications": {"toolsListChanged": true},
            "_meta": {"io.modelcontextprotocol/subscriptionId": 9}}})));
    let acknowledged = spans.one("notifications/subscriptions/acknowledged");
    assert_eq!(acknowledged.parent, Some(listen.id));
    let expected = [
        ("otel.kind", "server"),
        (
            "mcp.method.name",
            "notifications/subscriptions/acknowledged",
        ),
        ("mcp.protocol.version", "2026-07-28"),
        ("network.transport", "tcp"),
    ];
    for (key, value) in expected {
        assert_eq!(
            acknowledged.field(key),
            Some(value),
            "{key}: {acknowledged:?}"
        );
    }
    assert_eq!(parent_of(acknowledged.id), None);

    // With a context (a stdio server of ours gives one), the context is the parent.
    connection.sent(&mut from_client(json!({"jsonrpc": "2.0", "id": 10,
        "method": "subscriptions/listen",
        "params": {"notifications": {"toolsListChanged": true}}})));
    connection.received(&from_server(json!({"jsonrpc": "2.0",
        "method": "notifications/tools/list_changed",
        "params": {"_meta": {"io.modelcontextprotocol/subscriptionId": 10,
            "traceparent": REMOTE}}})));
    let changed = spans.one("notifications/tools/list_changed");
    assert_eq!(parent_of(changed.id).as_deref(), Some(REMOTE));
}

/// Over stdio the server's transport gives rmcp's acknowledgement a `CLIENT` span under the
/// listen request's trace context, and puts the span's context in its `_meta`.
#[cfg(feature = "server")]
#[test]
fn a_stdio_servers_acknowledgement_is_a_client_span_under_the_listen_requests_context() {
    use rmcp::model::RequestId;

    let (spans, _guard) = Spans::install();
    let mut acknowledgements = Acknowledgements::default();
    let listen: ClientJsonRpcMessage = from_client(json!({"jsonrpc": "2.0", "id": 9,
        "method": "subscriptions/listen",
        "params": {"notifications": {"toolsListChanged": true},
            "_meta": {"traceparent": REMOTE,
                "io.modelcontextprotocol/protocolVersion": "2026-07-28"}}}));
    let ClientJsonRpcMessage::Request(request) = &listen else {
        panic!("a request: {listen:?}");
    };
    let meta = request.request.get_meta();
    acknowledgements.listening(
        &request.id,
        &meta.0,
        meta.protocol_version().map(|version| version.to_string()),
    );
    let acknowledgement = || -> ServerNotification {
        serde_json::from_value(json!({"method": "notifications/subscriptions/acknowledged",
            "params": {"notifications": {"toolsListChanged": true},
                "_meta": {"io.modelcontextprotocol/subscriptionId": 9}}}))
        .unwrap()
    };
    // Another notification, or another stream's acknowledgement, is none of its business.
    let mut changed: ServerNotification =
        serde_json::from_value(json!({"method": "notifications/tools/list_changed"})).unwrap();
    assert!(acknowledgements.acknowledging(&mut changed).is_none());
    let mut other = acknowledgement();
    other
        .get_meta_mut()
        .set_subscription_id(RequestId::Number(8));
    assert!(acknowledgements.acknowledging(&mut other).is_none());

    let mut acknowledged = acknowledgement();
    let span = acknowledgements
        .acknowledging(&mut acknowledged)
        .expect("the stream's acknowledgement");
    let id = span.id().unwrap().into_u64();
    drop(span);
    let seen = spans.one("notifications/subscriptions/acknowledged");
    let expected = [
        ("otel.kind", "client"),
        (
            "mcp.method.name",
            "notifications/subscriptions/acknowledged",
        ),
        ("mcp.protocol.version", "2026-07-28"),
        ("network.transport", "pipe"),
    ];
    for (key, value) in expected {
        assert_eq!(seen.field(key), Some(value), "{key}: {seen:?}");
    }
    assert_eq!(parent_of(id).as_deref(), Some(REMOTE));
    let wire = serde_json::to_value(&acknowledged).unwrap();
    assert_eq!(wire["params"]["_meta"]["traceparent"], traceparent(id));
    assert_eq!(
        wire["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
        9
    );
    // Acknowledged once: the request is forgotten.
    assert!(
        acknowledgements
            .acknowledging(&mut acknowledgement())
            .is_none()
    );
}
