//! Typed extensions: what the host attaches to a call reaches the tool body, one value per type.

use crate::common;

use common::{call, text};
use dsh_tools::{Registry, ToolDefinition, ToolExec};
use serde_json::{Value, json};

#[derive(Clone)]
struct Tenant(&'static str);

#[derive(Clone)]
struct Attempt(u32);

fn tenant_tool() -> ToolDefinition {
    ToolDefinition::builder("tenant")
        .handler(|_, exec: ToolExec| async move {
            let tenant = exec.extension::<Tenant>().map(|tenant| tenant.0);
            let attempt = exec.extension::<Attempt>().map(|attempt| attempt.0);
            Ok::<Value, dsh_tools::ToolError>(json!({ "tenant": tenant, "attempt": attempt }))
        })
        .build()
        .unwrap()
}

/// The body reads each value by its type; a later value of one type replaces the earlier.
#[tokio::test]
async fn the_body_reads_what_the_host_attached() {
    let registry = Registry::new();
    registry.register(tenant_tool()).unwrap();
    let result = registry
        .execute(
            call("1", "tenant", json!({}))
                .with_extension(Tenant("old"))
                .with_extension(Attempt(2))
                .with_extension(Tenant("acme")),
        )
        .await;
    assert!(!result.is_error(), "{}", text(&result));
    assert_eq!(
        serde_json::from_str::<Value>(&text(&result)).unwrap(),
        json!({ "tenant": "acme", "attempt": 2 })
    );
}

/// A call without extensions, and a context made outside a registry, read none.
#[tokio::test]
async fn nothing_attached_reads_none() {
    let registry = Registry::new();
    registry.register(tenant_tool()).unwrap();
    let result = registry.execute(call("1", "tenant", json!({}))).await;
    assert_eq!(
        serde_json::from_str::<Value>(&text(&result)).unwrap(),
        json!({ "tenant": null, "attempt": null })
    );
    assert!(ToolExec::detached("tenant").extension::<Tenant>().is_none());
}
