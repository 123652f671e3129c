//! The registry the provider tests drive, and helpers to read what the layer built.

use std::sync::Arc;

use dsh_tools::code::{
    CodeRunFailure, CodeRuntime, CodeRuntimeError, FailureKind, Isolation, RunOutcome, RunRequest,
};
use dsh_tools::guards::TimeoutPolicy;
use dsh_tools::hooks::BoxFuture;
use dsh_tools::prelude::*;
use dsh_tools::provider::Message;
use dsh_tools::result::{AdditionalContext, ContentBlock};
use dsh_tools::{Registry, ToolDefinition, ToolError, ToolExec};
use serde_json::{Value, json};

/// One pixel of PNG, base64.
pub(crate) const PIXEL: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==";

/// Tools covering every result shape: `add` (parallel-safe arithmetic), `search` (an optional
/// parameter, so strict nulls matter), `snapshot` (an image), `note` (an additional context),
/// `labels` (a free-form map: no strict form), `fail` (the body fails), `stop` (concludes the turn).
pub(crate) fn registry() -> Registry {
    let registry = Registry::new();
    TimeoutPolicy::new().install(&registry);
    let tools = [
        add(),
        ToolDefinition::builder("search")
            .description("Searches the notes.")
            .parameters(json!({"type": "object", "properties": {
                "query": {"type": "string"}, "limit": {"type": "integer", "minimum": 1}},
                "required": ["query"], "additionalProperties": false}))
            .concurrency_safe()
            .handler(|args: Value, _| async move {
                Ok(json!({"query": args["query"], "limit_given": args.get("limit").is_some()}))
            }),
        ToolDefinition::builder("snapshot")
            .description("Takes a screenshot.")
            .parameters(json!({"type": "object", "properties": {}}))
            .handler(|_, _| async { Ok(json!("ok")) })
            .render(|_, _| {
                vec![
                    ContentBlock::text("a screenshot"),
                    ContentBlock::Image {
                        media_type: "image/png".into(),
                        data: PIXEL.into(),
                    },
                ]
            }),
        ToolDefinition::builder("note")
            .description("Takes a note.")
            .parameters(json!({"type": "object", "properties": {"text": {"type": "string"}}}))
            .handler(|_, exec: ToolExec| async move {
                exec.defer_context(AdditionalContext::text(
                    "tool",
                    "remember: the note was taken",
                ));
                Ok(json!("noted"))
            }),
        ToolDefinition::builder("labels")
            .description("Sets labels.")
            .parameters(json!({"type": "object", "properties": {
                "labels": {"type": "object", "additionalProperties": {"type": "string"}}}}))
            .handler(|_, _| async { Ok(json!("set")) }),
        ToolDefinition::builder("fail")
            .description("Always fails.")
            .parameters(json!({"type": "object", "properties": {}}))
            .handler(|_, _| async { Err(ToolError::new("disk full")) }),
        ToolDefinition::builder("stop")
            .description("Ends the turn.")
            .parameters(json!({"type": "object", "properties": {}}))
            .handler(|_, exec: ToolExec| async move {
                exec.conclude_turn();
                Ok(json!("stopping"))
            }),
    ];
    for tool in tools {
        registry
            .register(tool.build().expect("a valid definition"))
            .expect("registered");
    }
    registry
}

/// A code runtime that is only presented, never run (the tools-out tests need its language).
pub(crate) struct Presented;

impl CodeRuntime for Presented {
    fn language(&self) -> &'static str {
        "typescript"
    }

    fn isolation(&self) -> Isolation {
        Isolation::WorkerThread
    }

    fn run(&self, _request: RunRequest) -> BoxFuture<'_, Result<RunOutcome, CodeRuntimeError>> {
        Box::pin(async {
            Ok(RunOutcome {
                value: None,
                sandbox: None,
                logs: Vec::new(),
                error: Some(CodeRunFailure {
                    kind: FailureKind::Exception,
                    message: "presented only".into(),
                }),
            })
        })
    }

    fn dispose(&self) -> BoxFuture<'_, ()> {
        Box::pin(async {})
    }
}

/// Mounts [`Presented`].
pub(crate) fn with_code_runtime(registry: &Registry) {
    registry.set_code_runtime(Arc::new(Presented));
}

/// A step's messages as the JSON they serialize to.
pub(crate) fn values(messages: &[Message]) -> Vec<Value> {
    messages.iter().map(Message::to_value).collect()
}

/// The value at `pointer`, or a panic naming it and the document.
pub(crate) fn at<'a>(value: &'a Value, pointer: &str) -> &'a Value {
    value
        .pointer(pointer)
        .unwrap_or_else(|| panic!("no {pointer} in {value:#}"))
}

/// `add`: parallel-safe arithmetic on two integers.
pub(crate) fn add() -> dsh_tools::definition::ToolDefinitionBuilder {
    ToolDefinition::builder("add")
        .description("Adds two integers.")
        .parameters(json!({"type": "object", "properties": {
            "a": {"type": "integer"}, "b": {"type": "integer"}}, "required": ["a", "b"]}))
        .concurrency_safe()
        .handler(|args: Value, _| async move {
            Ok(json!(
                args["a"].as_i64().unwrap_or(0) + args["b"].as_i64().unwrap_or(0)
            ))
        })
}
