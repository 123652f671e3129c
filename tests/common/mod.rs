//! Tools shared by the integration tests, written without the macro so the runtime is tested on
//! its own.
#![allow(dead_code)]

use std::time::Duration;

use dsh_tools::{ToolDefinition, ToolError, ToolExec};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// Arguments of [`Echo`].
#[derive(Debug, Deserialize, Serialize, JsonSchema)]
pub(crate) struct EchoArgs {
    /// Text to echo.
    pub text: String,
    /// Times to repeat it.
    pub times: Option<u32>,
    /// Labels.
    #[serde(default)]
    pub labels: Vec<String>,
}

/// A typed tool: echoes `text` `times` times.
pub(crate) struct Echo;

impl dsh_tools::Tool for Echo {
    type Args = EchoArgs;
    type Output = String;
    const NAME: &'static str = "echo";
    const DESCRIPTION: &'static str = "Echo the text.";

    async fn call(&self, args: EchoArgs, _exec: ToolExec) -> Result<String, ToolError> {
        if args.text == "fail" {
            return Err(ToolError::new("disk full").with_code("ENOSPC"));
        }
        if args.text == "panic" {
            panic!("echo exploded");
        }
        Ok(args.text.repeat(args.times.unwrap_or(1) as usize))
    }

    fn is_concurrency_safe(args: &EchoArgs) -> bool {
        args.text != "exclusive"
    }
}

/// A dynamic tool named `name` whose handler returns its arguments; parallel-safe.
pub(crate) fn mirror(name: &str) -> ToolDefinition {
    ToolDefinition::builder(name)
        .description("Return the arguments.")
        .parameters(json!({"type": "object", "properties": {"n": {"type": "integer"}}}))
        .concurrency_safe()
        .handler(|args: Value, _exec| async move { Ok(args) })
        .build()
        .expect("valid definition")
}

/// A dynamic tool that sleeps `ms` (argument) cooperatively, then returns `"slept"`.
pub(crate) fn sleeper(name: &str, parallel: bool) -> ToolDefinition {
    let builder = ToolDefinition::builder(name)
        .description("Sleep.")
        .parameters(json!({"type": "object", "properties": {"ms": {"type": "integer"}}, "required": ["ms"]}))
        .handler(|args: Value, exec: ToolExec| async move {
            let ms = args["ms"].as_u64().unwrap_or(0);
            tokio::select! {
                _ = tokio::time::sleep(Duration::from_millis(ms)) => Ok(json!("slept")),
                _ = exec.signal().cancelled() => Err(ToolError::new("sleep cancelled")),
            }
        });
    let builder = if parallel {
        builder.concurrency_safe()
    } else {
        builder
    };
    builder.build().expect("valid definition")
}

/// A call with a fresh signal.
pub(crate) fn call(id: &str, name: &str, arguments: Value) -> dsh_tools::ToolCall {
    dsh_tools::ToolCall::new(id, name, arguments)
}

/// The text of a result's content.
pub(crate) fn text(result: &dsh_tools::ToolResult) -> String {
    result.text()
}

/// A signal cancelled once `started` is notified (by a body or hook that has begun): a call is
/// cancelled at a known point, never after a guessed delay.
pub(crate) fn cancel_on(
    started: &std::sync::Arc<tokio::sync::Notify>,
) -> tokio_util::sync::CancellationToken {
    let signal = tokio_util::sync::CancellationToken::new();
    let canceller = signal.clone();
    let started = started.clone();
    tokio::spawn(async move {
        started.notified().await;
        canceller.cancel();
    });
    signal
}
