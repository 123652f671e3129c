//! The core of the runtime in one test binary: registry, pipeline, scopes, guards, scheduler,
//! the dispatch of `#[tool]` tools, output validation, the event log, and which public types are
//! `Send`, `Sync` and `'static`.

#[path = "../common/mod.rs"]
mod common;

mod correctness_validation;
mod event_log;
mod extensions;
mod guards;
mod macro_dispatch;
mod pipeline;
mod registry;
mod scheduler;
mod scopes;
mod send_sync;
