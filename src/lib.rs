//! dsh-tools: typed tools for LLM agents.
//!
//! Write an ordinary `async fn`, put [`#[tool]`](macro@tool) on it, register it in a [`Registry`],
//! and every call runs through one pipeline. See the README for a first crate, the guide under
//! `docs/guide/` for each area, and `ARCHITECTURE.md` for where each part lives.
//!
//! The crate root holds what a tool author and an agent loop touch first: the macros and the
//! [`Tool`] trait they implement, a [`ToolDefinition`], the [`Registry`] and its [`AgentScope`]s,
//! a [`ToolCall`] and its [`ToolResult`], the [`ToolExec`] context and [`ToolError`] of a body,
//! and the serde and schemars re-exports the derives need. The modules hold one area each:
//! - [`hooks`]: the pipeline's extension points (pre-execute, execute wrappers, post-execute,
//!   approvals, a tool's own render and presentation hooks);
//! - [`result`]: content blocks, failures, error codes and additional contexts;
//! - [`client`]: what a call asks the client that made it (log messages, sampling, elicitation);
//! - [`definition`]: type-erased definitions, their builder, annotations and schemas;
//! - [`registry`]: registration handles and errors, scope filters, batch options;
//! - [`dialect`] (provider schema forms), [`sdk`] (the generated SDK text), `code` (code mode and
//!   its runtimes, feature `code-mode`), `durable` (journaled runs that resume), `mcp` (MCP
//!   client and server, feature `mcp`),
//!   [`guards`], [`events`] and [`presentation`].

// The facade re-exports; it has no `unsafe` of its own.
#![forbid(unsafe_code)]
#![warn(missing_docs)]
// docs.rs marks each feature-gated item with the feature it needs.
#![cfg_attr(docsrs, feature(doc_cfg))]

pub use dsh_tool_macros::{tool, tool_type, toolbox};
pub use dsh_tool_runtime::{
    AgentId, AgentScope, CancellationToken, Mode, Registry, Tool, ToolCall, ToolDefinition,
    ToolError, ToolExec, ToolResult,
};

/// serde and schemars, re-exported so a tool author's own parameter and output types derive
/// through `dsh_tools` alone: `#[tool_type]` on the type does it in one line (by hand: derive
/// `dsh_tools::serde::Deserialize` etc. with `#[serde(crate = "dsh_tools::serde")]` and
/// `dsh_tools::schemars::JsonSchema` with `#[schemars(crate = "dsh_tools::schemars")]`).
pub use dsh_tool_runtime::__private::schemars;
pub use serde;
// The traits at the root, next to derives of the same names that are errors pointing to
// `#[tool_type]` (serde's and schemars' derives need `crate = …` attributes to work from here).
pub use dsh_tool_macros::{Deserialize, Serialize};
pub use json_schema_trait::JsonSchema;
pub use serde::de::Deserialize;
pub use serde::ser::Serialize;
/// serde_json, re-exported for building arguments (`dsh_tools::serde_json::json!`) and reading values.
pub use serde_json;

/// schemars' `JsonSchema` trait with the root's derive: schemars has no path to the trait alone,
/// and an explicit import shadows the glob's derive.
mod json_schema_trait {
    pub use crate::schemars::*;
    pub use dsh_tool_macros::JsonSchema;
}

/// The pipeline's extension points, registered on a [`Registry`] or an [`AgentScope`] as plain
/// closures: pre-execute hooks ([`Registry::on_pre_execute`], deciding with [`PreDecision`]
/// after an optional [`PreNext::run`]), execute wrappers ([`Registry::on_execute`]),
/// post-execute hooks ([`Registry::on_post_execute`]), approvals ([`Registry::set_approver`]),
/// and the render and presentation hooks a [`Tool`] declares.
///
/// [`PreDecision`]: hooks::PreDecision
/// [`PreNext::run`]: hooks::PreNext::run
pub mod hooks {
    pub use dsh_tool_runtime::{
        ApprovalOutcome, ApprovalRequest, BoxFuture, DispatchContext, ExecNext,
        FinalizeContentHook, PostDecision, PostNext, PreDecision, PreNext, PresentResultHook,
        PresentationMetaHook, RenderHook, ToolCallView, default_render,
    };
}

/// What a call ends with beyond [`ToolResult`] itself: model-facing content blocks, a failure and
/// its error code, and the additional contexts appended after a step.
pub mod result {
    pub use dsh_tool_runtime::{
        AdditionalContext, ContentBlock, ContextSource, ErrorCode, ErrorInfo, ResourceContents,
        ToolFailure,
    };
}

/// The way from a call back to the client that made it, as a body reaches it through
/// [`ToolExec`] ([`ToolExec::log`], [`ToolExec::sample`], [`ToolExec::elicit`],
/// [`ToolExec::list_roots`],
/// [`ToolExec::client`]) and hooks through [`hooks::ToolCallView::client`]. Only a call served
/// over MCP has a client; any other gets [`client::ClientError::NoClient`] at once.
pub mod client {
    pub use dsh_tool_runtime::{
        ClientChannel, ClientError, Elicitation, ElicitationRequest, LogLevel, Role, Root,
        RootsRequest, SamplingMessage, SamplingReply, SamplingRequest,
    };
}

/// Tool definitions beyond [`ToolDefinition`] itself: the builder of a hand-written definition and
/// its errors, behaviour annotations, the provider-neutral schema, and the traits a [`Tool`]'s
/// arguments and output implement.
pub mod definition {
    pub use dsh_tool_runtime::{
        DefinitionError, Dispatched, ToolAnnotations, ToolArgs, ToolDefinitionBuilder, ToolOutput,
        ToolSchema,
    };
}

/// What registering in and running through a [`Registry`] takes and returns beyond the root types:
/// the [`Handle`](registry::Handle) of a registration and its errors, the filter that restricts a
/// scope, and the options and classification of a batch.
pub mod registry {
    pub use dsh_tool_runtime::{BatchOptions, ExecutionMode, Filter, Handle, RegisterError};
}

/// Schema dialects: the forms providers accept for a tool's parameters schema.
pub mod dialect {
    pub use dsh_tool_runtime::DialectSchema;
    pub use dsh_tool_runtime::dialect::{
        Dialect, DialectError, DialectErrorKind, MAX_DEPTH, MAX_NODES, MAX_REF_TARGETS,
        normalize_strict_arguments, transform_tools,
    };
}

/// The model APIs' last mile: a scope's tools as OpenAI (Chat Completions, Responses),
/// Anthropic or Gemini tool entries, the calls of their responses and streams, and the next
/// request's messages from the results (see the guide's "Providers and the agent loop").
pub mod provider {
    pub use dsh_tool_provider::provider::{
        AnthropicStream, Message, OpenAiChatStream, ParsedCall, ParsedResponse, Provider,
        ProviderError, ProviderTools, Step, StreamError, StreamLimits, StrictReport, ToolLoop,
    };
    #[cfg(feature = "rig")]
    #[cfg_attr(docsrs, doc(cfg(feature = "rig")))]
    pub use dsh_tool_provider::provider::{RigTools, rig_agent, rig_core};
    #[cfg(feature = "async-openai")]
    #[cfg_attr(docsrs, doc(cfg(feature = "async-openai")))]
    pub use dsh_tool_provider::provider::{TypedStep, async_openai_types};
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
#[cfg_attr(docsrs, doc(cfg(feature = "code-mode")))]
pub mod code {
    pub use dsh_tool_code_mode::code_mode::{
        CodeModeError, ModelView, PromptSection, RunCodeConfig, language_of,
    };
    pub use dsh_tool_code_mode::code_runtime::{
        BindingCall, BindingDispatch, BindingError, BindingNamespace, Budgets, CodeRunFailure,
        CodeRuntime, CodeRuntimeError, ErrorClass, FailureKind, Isolation, JsonText, RunOutcome,
        RunRequest, Sandbox, SandboxStatus, SubprocessConfig, SubprocessRuntime,
        validate_namespaces,
    };
    #[cfg(feature = "embedded-js")]
    #[cfg_attr(docsrs, doc(cfg(feature = "embedded-js")))]
    pub use dsh_tool_engines::{EmbeddedConfig, EmbeddedRuntime};
}

/// Durable `run_code` runs: a journal of every binding call, so a run cut off by a crash or
/// parked at an approval resumes where it was ([`prelude::DurableCallExt::durable`]). The SQLite journal needs
/// feature `durable`; runs on Restate (`durable::restate`) need feature `restate`.
#[cfg(feature = "code-mode")]
#[cfg_attr(docsrs, doc(cfg(feature = "code-mode")))]
pub mod durable {
    #[cfg(feature = "restate")]
    #[cfg_attr(docsrs, doc(cfg(feature = "restate")))]
    pub use dsh_tool_code_mode::durable::restate;
    pub use dsh_tool_code_mode::durable::{
        CONTINUATION_REFUSED, CallOutcome, ContinuationError, ContinuationSecret,
        DEFAULT_CONTINUATION_TTL, DEFAULT_MAX_RUN_BYTES, DurableRun, EntryState, JOURNAL_BUSY,
        JOURNAL_FAILED, JOURNAL_FULL, JournalEntry, JournalError, JournalStore, OUTCOME_UNKNOWN,
        ParkedRun, Principal, RUN_PARKED, RevertReport, RunRecord, RunStatus, continuation_run,
        runs_command,
    };
    #[cfg(feature = "durable")]
    #[cfg_attr(docsrs, doc(cfg(feature = "durable")))]
    pub use dsh_tool_code_mode::durable::{
        DEFAULT_BUSY_TIMEOUT, DEFAULT_MAX_FILE_BYTES, OpenMode, SqliteJournal,
    };
}

/// MCP: tools of MCP servers bridged into a registry, and a registry served over MCP (feature
/// `mcp-server`).
#[cfg(feature = "mcp")]
#[cfg_attr(docsrs, doc(cfg(feature = "mcp")))]
pub mod mcp {
    pub use dsh_tool_mcp::mcp::{
        DEFAULT_MAX_LIST_BYTES, DEFAULT_MAX_LIST_PAGES, DEFAULT_MAX_TOOLS, MAX_SCHEMA_DEPTH,
        MAX_TOOL_NAME_LEN, MCP_DISCONNECTED, McpError, McpHandle, McpServer, ReconnectPolicy,
        is_valid_server_name, mcp_tool_name,
    };
    #[cfg(all(feature = "mcp-server", feature = "restate"))]
    #[cfg_attr(docsrs, doc(cfg(all(feature = "mcp-server", feature = "restate"))))]
    pub use dsh_tool_mcp::mcp_server::McpRestate;
    #[cfg(feature = "mcp-server")]
    #[cfg_attr(docsrs, doc(cfg(feature = "mcp-server")))]
    pub use dsh_tool_mcp::mcp_server::{
        McpHttpAuth, McpHttpLimits, McpServeError, McpServeOptions, McpTaskLimits, McpTransport,
    };
    #[cfg(feature = "oauth")]
    #[cfg_attr(docsrs, doc(cfg(feature = "oauth")))]
    pub use dsh_tool_mcp::{
        mcp::{
            McpAuthorizeError, McpAuthorizer, McpClientCredentials, McpLoopbackAuthorizer,
            McpOAuthLogin,
        },
        mcp_server::McpOAuthResource,
    };
}

/// Guards: the per-call guard check, the timeout policy and the repeat-call reminder.
pub mod guards {
    pub use dsh_tool_runtime::guards::{
        ReminderConfig, ReminderConfigError, RepeatCallReminder, TimeoutPolicy,
    };
}

/// Events published for every call, and the JSON-lines event log.
pub mod events {
    pub use dsh_tool_runtime::events::{
        EventLog, EventSource, LogError, LoggedEvent, MAX_LOG_DEPTH, ReadLimits, ToolEvent,
        read_log, read_log_with,
    };
}

#[doc(inline)]
pub use dsh_tool_runtime::telemetry;

#[cfg(feature = "otel")]
#[cfg_attr(docsrs, doc(cfg(feature = "otel")))]
pub mod otel;

/// Presentation: call and result cards for a UI, and the replay page.
pub mod presentation {
    pub use dsh_tool_runtime::presentation::replay::{ReplayLimits, render_html, render_html_with};
    pub use dsh_tool_runtime::presentation::{
        CallView, FileDiff, FileLocation, ReadLine, ResultView, SearchFile, SearchMatch,
        SearchShape, ToolCallKind,
    };
}

/// Every README snippet compiles (and runs where it can) as a doctest.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;

/// The guide's chapters compile as doctests too, each under the features its introduction names
/// (the index, `docs/guide/README.md`, lists them).
#[cfg(doctest)]
mod guide {
    #[doc = include_str!("../docs/guide/01-tools.md")]
    struct Tools;
    #[doc = include_str!("../docs/guide/02-pipeline.md")]
    struct Pipeline;
    #[doc = include_str!("../docs/guide/03-scopes-scheduler.md")]
    struct ScopesScheduler;
    #[cfg(feature = "code-mode")]
    #[doc = include_str!("../docs/guide/04-code-mode.md")]
    struct CodeMode;
    #[cfg(all(feature = "durable", feature = "restate"))]
    #[doc = include_str!("../docs/guide/05-durable.md")]
    struct Durable;
    #[cfg(all(feature = "mcp-server", feature = "oauth"))]
    #[doc = include_str!("../docs/guide/06-mcp.md")]
    struct Mcp;
    #[doc = include_str!("../docs/guide/07-providers.md")]
    struct Providers;
    #[cfg(feature = "otel")]
    #[doc = include_str!("../docs/guide/08-telemetry.md")]
    struct Telemetry;
    #[doc = include_str!("../docs/guide/09-event-logs-replay.md")]
    struct EventLogsReplay;
    #[doc = include_str!("../docs/guide/10-cli.md")]
    struct Cli;
    #[doc = include_str!("../docs/guide/11-security.md")]
    struct Security;
    #[doc = include_str!("../docs/guide/12-conformance.md")]
    struct Conformance;
}

/// Items the code generated by `#[tool]` (and this crate's own tests) refer to. Not a public
/// API: it changes without notice.
#[doc(hidden)]
pub mod __private {
    #[cfg(feature = "code-mode")]
    pub use dsh_tool_code_mode::__private::*;
    #[cfg(feature = "embedded-python")]
    pub use dsh_tool_engines::__private::*;
    pub use dsh_tool_runtime::__private::*;
}

/// The extension traits through which code mode, durable runs and MCP add their methods to
/// [`Registry`] and [`AgentScope`]: `use dsh_tools::prelude::*;` brings each one the enabled
/// features provide into scope.
pub mod prelude {
    #[cfg(feature = "code-mode")]
    #[cfg_attr(docsrs, doc(cfg(feature = "code-mode")))]
    pub use dsh_tool_code_mode::{
        CodeModeExt, DisclosureExt, DurableCallExt, DurableExt, ScopeDisclosureExt,
    };
    #[cfg(feature = "mcp-server")]
    #[cfg_attr(docsrs, doc(cfg(feature = "mcp-server")))]
    pub use dsh_tool_mcp::ServeExt;
    #[cfg(feature = "mcp")]
    #[cfg_attr(docsrs, doc(cfg(feature = "mcp")))]
    pub use dsh_tool_mcp::{McpExt, ScopeMcpExt};
}
