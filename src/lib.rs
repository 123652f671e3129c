//! dsh-tools: typed tools for LLM agents.
//!
//! Write an ordinary `async fn`, put [`#[tool]`](macro@tool) on it, register it in a [`Registry`],
//! and every call runs through one pipeline. See the README for a tour and `ARCHITECTURE.md` for
//! where each part lives.
//!
//! The crate root holds what a tool author and an agent loop use; the modules hold one area
//! each: [`dialect`] (provider schema forms), [`sdk`] (the generated SDK text), `code` (code
//! mode and its runtimes, feature `code-mode`), `mcp` (MCP client and server, feature `mcp`),
//! [`guards`], [`events`] and [`presentation`].

// docs.rs marks each feature-gated item with the feature it needs.
#![cfg_attr(docsrs, feature(doc_cfg))]

pub use dsh_tool_macros::{tool, tool_type, toolbox};
pub use dsh_tool_runtime::{
    AdditionalContext, AgentId, AgentScope, ApprovalOutcome, ApprovalRequest, Approver,
    BatchOptions, BoxFuture, CallView, CancellationToken, ContentBlock, ContextSource,
    DefinitionError, DialectSchema, DispatchContext, Dispatched, ErrorCode, ErrorInfo, ExecNext,
    ExecuteWrapper, ExecutionMode, Filter, FinalizeContentHook, Handle, Mode, PostDecision,
    PostExecuteHook, PostNext, PreDecision, PreExecuteHook, PreNext, PresentResultHook,
    PresentationMetaHook, RegisterError, Registry, RenderHook, ResultObserver, ResultView, Tool,
    ToolAnnotations, ToolArgs, ToolCall, ToolCallKind, ToolCallView, ToolDefinition,
    ToolDefinitionBuilder, ToolError, ToolExec, ToolFailure, ToolOutput, ToolResult, ToolSchema,
    default_render,
};

/// serde and schemars, re-exported so a tool author's own parameter and output types derive
/// through `dsh_tools` alone: `#[tool_type]` on the type does it in one line (by hand: add
/// `#[serde(crate = "dsh_tools::serde")]` and `#[schemars(crate = "dsh_tools::schemars")]`).
pub use dsh_tool_runtime::__private::schemars;
pub use schemars::JsonSchema;
pub use serde::{self, Deserialize, Serialize};
/// serde_json, re-exported for building arguments (`dsh_tools::serde_json::json!`) and reading values.
pub use serde_json;

/// Schema dialects: the forms providers accept for a tool's parameters schema.
pub mod dialect {
    pub use dsh_tool_runtime::DialectSchema;
    pub use dsh_tool_runtime::dialect::{
        Dialect, DialectError, DialectErrorKind, MAX_DEPTH, MAX_NODES, MAX_REF_TARGETS,
        normalize_strict_arguments, transform_tools,
    };
}

/// The SDK generator: byte-stable TypeScript and Python declarations of the tools.
pub mod sdk {
    pub use dsh_tool_runtime::sdk::{
        DescribeError, Disclosure, Language, MAX_SEARCH_RESULTS, ToolSpec, describe, index_section,
        prompt_section, python, render, search, section, typescript, write_if_changed,
    };
}

/// Code mode: the `run_code` transport, the code runtimes that run a program, their budgets and
/// sandbox.
#[cfg(feature = "code-mode")]
pub mod code {
    pub use dsh_tool_runtime::code_mode::{
        CodeModeError, ModelView, PromptSection, RunCodeConfig, language_of,
    };
    pub use dsh_tool_runtime::code_runtime::{
        BindingCall, BindingDispatch, BindingError, BindingNamespace, Budgets, CodeRunFailure,
        CodeRuntime, CodeRuntimeError, ErrorClass, FailureKind, Isolation, RunOutcome, RunRequest,
        Sandbox, SandboxStatus, SubprocessConfig, SubprocessRuntime, validate_namespaces,
    };
    #[cfg(feature = "embedded-js")]
    pub use dsh_tool_runtime::code_runtime::{EmbeddedConfig, EmbeddedRuntime};
}

/// MCP: tools of MCP servers bridged into a registry, and a registry served over MCP (feature
/// `mcp-server`).
#[cfg(feature = "mcp")]
pub mod mcp {
    pub use dsh_tool_runtime::mcp::{
        DEFAULT_MAX_LIST_BYTES, DEFAULT_MAX_LIST_PAGES, DEFAULT_MAX_TOOLS, MAX_SCHEMA_DEPTH,
        MAX_TOOL_NAME_LEN, MCP_DISCONNECTED, McpError, McpHandle, McpServer, ReconnectPolicy,
        is_valid_server_name, mcp_tool_name,
    };
    #[cfg(feature = "mcp-server")]
    pub use dsh_tool_runtime::mcp_server::{
        McpHttpLimits, McpServeError, McpServeOptions, McpTransport,
    };
}

/// Guards: the per-call guard check, the timeout policy and the repeat-call reminder.
pub mod guards {
    pub use dsh_tool_runtime::guards::{
        Guard, ReminderConfig, ReminderConfigError, RepeatCallReminder, TimeoutPolicy,
    };
}

/// Events published for every call, and the JSON-lines event log.
pub mod events {
    pub use dsh_tool_runtime::events::{
        EventLog, LogError, LoggedEvent, MAX_LOG_DEPTH, ReadLimits, ToolEvent, read_log,
        read_log_with,
    };
}

/// Presentation: call and result cards for a UI, and the replay page.
pub mod presentation {
    pub use dsh_tool_runtime::presentation::replay::{ReplayLimits, render_html, render_html_with};
    pub use dsh_tool_runtime::presentation::{
        FileDiff, FileLocation, ReadLine, SearchFile, SearchMatch, SearchShape,
    };
}

/// Every README snippet compiles (and runs where it can) as a doctest.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;

/// Items the code generated by `#[tool]` (and this crate's own tests) refer to. Not a public
/// API: it changes without notice.
#[doc(hidden)]
pub mod __private {
    pub use dsh_tool_runtime::__private::*;
}
