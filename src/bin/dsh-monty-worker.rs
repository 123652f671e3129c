//! The worker program of the Python runtime on Monty (`EmbeddedRuntime::python`) and of the
//! pooled TypeScript runtime on QuickJS (`EmbeddedRuntime::javascript`): started and
//! sandboxed by the host's worker pool, it serves runs one after another, each in a fresh
//! interpreter. Not meant to be run by hand.
//!
//! A program of its own (not a re-executed host) because Monty's memory budget is enforced by
//! the executable's global allocator, which a library cannot impose on its host.

#![forbid(unsafe_code)]

#[global_allocator]
static ALLOCATOR: dsh_tools::__private::MontyWorkerAllocator =
    dsh_tools::__private::MontyWorkerAllocator;

fn main() {
    dsh_tools::__private::monty_worker_main()
}
