//! The code runtimes in one test binary: the subprocess runtimes, their sandbox, the protocol
//! frames, TypeScript type stripping against the reference, and what every backend shares.
//! (`code_runtime_embedded`, `code_runtime_monty` and `code_runtime_host_memory` measure or
//! signal the whole process and stay binaries of their own.)

#[path = "../code_runtime_support/mod.rs"]
mod code_runtime_support;

#[cfg(all(feature = "embedded-js", feature = "embedded-python"))]
mod backends;
mod frames;
mod sandbox;
mod strip_differential;
mod subprocess;
