//! Which public types are `Send`, `Sync` and `'static`, checked when this binary compiles (as
//! tokio's `tests/async_send_sync.rs` does): an agent loop moves registries, calls and results
//! across tasks and threads, so losing one of these bounds is a breaking change. Nothing here
//! runs; each check is a closure that is only type-checked.

use dsh_tools::definition::{
    DefinitionError, Dispatched, ToolAnnotations, ToolDefinitionBuilder, ToolSchema,
};
use dsh_tools::events::{EventLog, ToolEvent};
use dsh_tools::guards::{RepeatCallReminder, TimeoutPolicy};
use dsh_tools::hooks::{
    ApprovalOutcome, ApprovalRequest, DispatchContext, ExecNext, PostDecision, PostNext,
    PreDecision, PreNext, ToolCallView,
};
use dsh_tools::prelude::*;
use dsh_tools::presentation::{CallView, ResultView};
use dsh_tools::registry::{BatchOptions, ExecutionMode, Filter, Handle, RegisterError};
use dsh_tools::result::{
    AdditionalContext, ContentBlock, ContextSource, ErrorCode, ErrorInfo, ToolFailure,
};
use dsh_tools::{
    AgentId, AgentScope, CancellationToken, Mode, Registry, ToolCall, ToolDefinition, ToolError,
    ToolExec, ToolResult,
};

fn send_sync_static<T: Send + Sync + 'static>() {}

fn send<T: Send>(_: &T) {}

fn send_static<T: Send + 'static>(_: &T) {}

/// Shared across threads and moved into spawned tasks.
const _: fn() = || {
    send_sync_static::<Registry>();
    send_sync_static::<AgentScope>();
    send_sync_static::<AgentId>();
    send_sync_static::<Mode>();
    send_sync_static::<ToolCall>();
    send_sync_static::<ToolResult>();
    send_sync_static::<ToolError>();
    send_sync_static::<ToolExec>();
    send_sync_static::<ToolDefinition>();
    send_sync_static::<CancellationToken>();
    send_sync_static::<ToolDefinitionBuilder>();
    send_sync_static::<DefinitionError>();
    send_sync_static::<Dispatched>();
    send_sync_static::<ToolAnnotations>();
    send_sync_static::<ToolSchema>();
    send_sync_static::<Handle>();
    send_sync_static::<RegisterError>();
    send_sync_static::<Filter>();
    send_sync_static::<BatchOptions>();
    send_sync_static::<ExecutionMode>();
    send_sync_static::<ContentBlock>();
    send_sync_static::<ErrorCode>();
    send_sync_static::<ErrorInfo>();
    send_sync_static::<ToolFailure>();
    send_sync_static::<AdditionalContext>();
    send_sync_static::<ContextSource>();
    send_sync_static::<ToolCallView>();
    send_sync_static::<PreDecision>();
    send_sync_static::<PreNext>();
    send_sync_static::<DispatchContext>();
    send_sync_static::<ExecNext>();
    send_sync_static::<PostDecision>();
    send_sync_static::<PostNext>();
    send_sync_static::<ApprovalRequest>();
    send_sync_static::<ApprovalOutcome>();
    send_sync_static::<TimeoutPolicy>();
    send_sync_static::<RepeatCallReminder>();
    send_sync_static::<ToolEvent>();
    send_sync_static::<EventLog>();
    send_sync_static::<CallView>();
    send_sync_static::<ResultView>();
};

/// The errors fit `Box<dyn Error + Send + Sync>` (and `anyhow`).
const _: fn() = || {
    fn error<E: std::error::Error + Send + Sync + 'static>() {}
    error::<ToolError>();
    error::<RegisterError>();
    error::<DefinitionError>();
};

/// The registry's futures are `Send`, so a multi-threaded runtime can drive them; moved into an
/// `async move` block with an owned registry they are `'static` too, as `tokio::spawn` needs.
const _: fn(Registry, ToolCall, PreNext, PostNext, ExecNext) = |registry, call, pre, post, exec| {
    send(&registry.execute(call.clone()));
    send(&registry.execute_batch(None, vec![call.clone()], BatchOptions::default()));
    let owned = registry.clone();
    send_static(&async move { owned.execute(call).await });
    send_static(&async move {
        registry
            .execute_batch(None, Vec::new(), BatchOptions::default())
            .await
    });
    send_static(&pre.run());
    send_static(&post.run());
    send_static(&exec.run());
};

#[cfg(feature = "code-mode")]
const _: fn() = || {
    use dsh_tools::code::{RunCodeConfig, SubprocessConfig, SubprocessRuntime};
    send_sync_static::<RunCodeConfig>();
    send_sync_static::<SubprocessConfig>();
    send_sync_static::<SubprocessRuntime>();
};

#[cfg(feature = "mcp")]
const _: fn(Registry, dsh_tools::mcp::McpServer) = |registry, server| {
    use dsh_tools::mcp::{McpError, McpHandle, McpServer};
    send_sync_static::<McpServer>();
    send_sync_static::<McpHandle>();
    send_sync_static::<McpError>();
    send_static(&async move { registry.add_mcp_server(server).await });
};

#[cfg(feature = "mcp-server")]
const _: fn(Registry, dsh_tools::mcp::McpTransport) = |registry, transport| {
    send_sync_static::<dsh_tools::mcp::McpHttpAuth>();
    send_static(&async move { registry.serve_mcp(None, transport).await });
};
