//! The embedded code runtimes of dsh-tools: [`EmbeddedRuntime`] runs TypeScript on QuickJS and
//! (feature `python`) Python on Monty, each program in a fresh interpreter with no ambient
//! authority, on a thread of the host or in a pool of sandboxed worker processes.
//!
//! What it holds:
//! - [`EmbeddedRuntime`] and its [`EmbeddedConfig`] (`runtime.rs`, `config.rs`), and a run on an
//!   interpreter thread of the host (`driver.rs`);
//! - the engines: QuickJS through rquickjs (`quickjs/`) and Monty (`monty/`);
//! - with feature `python`, the worker pool of the host (`pool/`), the worker program's side
//!   (`worker/`, entered from the `dsh-monty-worker` program) and the rings in shared memory
//!   both speak over (`ring.rs`).
//!
//! This is the one crate of the workspace that allows `unsafe` beyond the process and sandbox
//! calls of `dsh-tool-code-mode`: the QuickJS engine's raw API, the rings' shared memory, the
//! worker's allocator and the descriptors its channel is handed. Each module that needs it
//! allows `unsafe_code` for itself, and every block carries its SAFETY note.
//!
//! It depends on the core, `dsh-tool-runtime`, and on `dsh-tool-code-mode`, whose
//! [`CodeRuntime`](dsh_tool_code_mode::code_runtime::CodeRuntime) contract it implements and
//! whose run session (binding calls, budgets, the frame protocol, the watch of a child process)
//! it shares. The `dsh-tools` facade re-exports it under features `embedded-js` and
//! `embedded-python`. Depend on `dsh-tools` instead.
// docs.rs marks each feature-gated item with the feature it needs.
#![cfg_attr(docsrs, feature(doc_cfg))]

mod config;
mod driver;
#[cfg(feature = "python")]
mod monty;
#[cfg(feature = "python")]
mod pool;
mod quickjs;
#[cfg(feature = "python")]
mod ring;
mod runtime;
#[cfg(feature = "python")]
mod worker;

pub use config::EmbeddedConfig;
pub use runtime::EmbeddedRuntime;

/// Items the facade's programs reach. Not a public API: it changes without notice.
#[doc(hidden)]
pub mod __private {
    // The `dsh-monty-worker` program's entry point and allocator.
    #[cfg(feature = "python")]
    pub use crate::worker::{
        WorkerAllocator as MontyWorkerAllocator, worker_main as monty_worker_main,
    };
}
