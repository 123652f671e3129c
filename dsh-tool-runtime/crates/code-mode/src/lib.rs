//! Code mode for dsh-tools: the model writes a program instead of single tool calls.
//!
//! What it holds:
//! - [`code_mode`]: `run_code`, the transport tool, and the model's view of a scope in code mode
//!   ([`CodeModeExt`], [`DisclosureExt`], [`ScopeDisclosureExt`]);
//! - [`code_runtime`]: the runtimes a program runs in (subprocess Node/Python under the OS
//!   sandbox; the embedded QuickJS and Monty are the crate `dsh-tool-engines`, which builds on
//!   the hidden `__engines` module), their budgets and the binding-call bridge;
//! - [`durable`]: durable runs, journaled in SQLite (feature `durable`) or run as Restate
//!   invocations (feature `restate`) ([`DurableExt`]).
//!
//! It depends on the core, `dsh-tool-runtime`, and is depended on by `dsh-tool-engines` (the
//! embedded runtimes), `dsh-tool-mcp` (serving code mode and approving durable runs over MCP)
//! and the `dsh-tools` facade, which re-exports its curated API. Depend on `dsh-tools` instead.
// docs.rs marks each feature-gated item with the feature it needs.
#![cfg_attr(docsrs, feature(doc_cfg))]

// The core's modules under the paths this crate's code names them by.
use dsh_tool_runtime::*;

#[doc(hidden)]
pub mod accept;
pub mod code_mode;
pub mod code_runtime;
pub mod durable;
#[cfg(unix)]
#[doc(hidden)]
pub mod private_file;

pub use code_mode::CodeModeExt;
pub use code_mode::disclosure::{DisclosureExt, ScopeDisclosureExt};
pub use durable::DurableCallExt;
pub use durable::run::DurableExt;

/// Keeps the extension traits implemented by the core types they extend alone.
pub(crate) mod sealed {
    /// Implemented for [`Registry`](dsh_tool_runtime::Registry) and
    /// [`AgentScope`](dsh_tool_runtime::AgentScope) only.
    pub trait Sealed {}
    impl Sealed for dsh_tool_runtime::Registry {}
    impl Sealed for dsh_tool_runtime::AgentScope {}
    impl Sealed for dsh_tool_runtime::ToolCall {}
}

/// Items the facade's tests and programs reach. Not a public API: it changes without notice.
#[doc(hidden)]
pub mod __private {
    // Internals the facade's integration tests drive directly.
    pub use crate::code_runtime::frame;
}

#[doc(hidden)]
pub use code_runtime::kit as __engines;
