use super::*;
use crate::ToolExec;
use crate::definition::ToolDefinition;
use rmcp::ServerHandler;
use rmcp::model::SubscriptionFilter;

fn tool(name: &str) -> ToolDefinition {
    ToolDefinition::builder(name)
        .description("Answers.")
        .handler(|_arguments: Value, _exec: ToolExec| async { Ok(Value::Null) })
        .build()
        .unwrap()
}

/// rmcp asks for the listing on every request (`get_info`, and at 2026-07-28 `get_tool` for
/// the `Mcp-Param-*` headers): a session reads the one its server made, until the registry
/// changes.
#[test]
fn the_listing_is_made_once_per_registry_change() {
    let registry = Registry::new();
    registry.register(tool("first")).unwrap();
    let server = McpHandler::new(registry.clone(), None, McpServeOptions::default()).unwrap();
    let session = server.session();
    let listing = server.listing().unwrap();
    assert!(Arc::ptr_eq(&listing, &session.listing().unwrap()));
    assert!(session.get_tool("second").is_none());

    let second = registry.register(tool("second")).unwrap();
    assert!(session.get_tool("second").is_some());
    assert!(!Arc::ptr_eq(&listing, &server.listing().unwrap()));
    second.unregister();
    assert!(server.get_tool("second").is_none());
    assert!(session.get_tool("first").is_some());
}

/// A tool added after the server accepted a `subscriptions/listen` filter (so after rmcp
/// acknowledged the stream to the client) but before the stream watched the registry is
/// announced as soon as it does; a stream accepted with nothing changed since says
/// nothing until a change.
#[tokio::test]
async fn a_change_between_the_acknowledgement_and_the_watch_is_announced() {
    let registry = Registry::new();
    registry.register(tool("first")).unwrap();
    let session = McpHandler::new(registry.clone(), None, McpServeOptions::default()).unwrap();
    let mut filter = SubscriptionFilter::new();
    filter.tools_list_changed = Some(true);
    let sent = Arc::new(AtomicU64::new(0));
    let watch = |since| {
        let sent = sent.clone();
        let stop = CancellationToken::new();
        let changes = session.list_changes(stop.clone(), since);
        let watching = tokio::spawn(changes(Box::new(move || {
            sent.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            Box::pin(async { false })
        })));
        (stop, watching)
    };

    session.accepted_subscription_filter(&filter);
    registry.register(tool("second")).unwrap();
    let since = session.listen_since.lock().take();
    let (_stop, watching) = watch(since);
    // The watcher ends at its first notification (the sink is gone); a minute only to fail.
    tokio::time::timeout(std::time::Duration::from_secs(60), watching)
        .await
        .expect("the missed change is announced")
        .unwrap();
    assert_eq!(sent.load(std::sync::atomic::Ordering::SeqCst), 1);

    session.accepted_subscription_filter(&filter);
    let since = session.listen_since.lock().take();
    let (stop, watching) = watch(since);
    tokio::task::yield_now().await;
    stop.cancel();
    watching.await.unwrap();
    assert_eq!(
        sent.load(std::sync::atomic::Ordering::SeqCst),
        1,
        "nothing changed"
    );
}

#[test]
fn a_missing_capability_error_names_the_capability() {
    let error = missing_capability_error(
        ClientCapabilities::builder().enable_sampling().build(),
        "sampling",
    );
    assert_eq!(
        error.message,
        "Missing required client capability: sampling"
    );
    assert!(error.data.unwrap()["requiredCapabilities"]["sampling"].is_object());
    let error = missing_capability_error(
        ClientCapabilities::builder().enable_tasks().build(),
        "extension io.modelcontextprotocol/tasks",
    );
    assert_eq!(
        error.message,
        "Missing required client capability: extension io.modelcontextprotocol/tasks"
    );
    assert!(
        error.data.unwrap()["requiredCapabilities"]["extensions"]["io.modelcontextprotocol/tasks"]
            .is_object()
    );
}
