//! The spans of every call: attribute names and values as the GenAI conventions name them
//! (`dsh_tools::telemetry::SEMCONV`), stage child spans, code-mode trees.

#[path = "../common/mod.rs"]
mod common;

mod capture;
#[cfg(feature = "cli")]
mod cli_export;
#[cfg(all(feature = "otel", feature = "mcp-server"))]
mod mcp_metrics;
#[cfg(all(feature = "otel", feature = "mcp-server"))]
#[path = "../mcp_support/mod.rs"]
mod mcp_support;
#[cfg(all(feature = "otel", feature = "mcp-server"))]
mod mcp_trace;
#[cfg(feature = "otel")]
mod metrics;
#[cfg(feature = "otel")]
#[path = "../otlp_support/mod.rs"]
mod otlp_support;
#[cfg(feature = "cli")]
mod phoenix;
mod spans;
