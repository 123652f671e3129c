//! Python on Monty ([`EmbeddedRuntime::python`]). Monty runs in the worker processes of the
//! pool (`worker/`; the same program serves QuickJS when started with `quickjs`): one run
//! after another, each in a fresh interpreter (nothing but the heap's allocator,
//! `worker/alloc.rs`, outlives a run), speaking the subprocess runtimes' frame protocol with the
//! host over rings in shared memory (`worker/channel.rs`).
//!
//! The program cannot reach anything but the bindings: Monty has no filesystem, network,
//! environment or process access of its own, and every OS call it would delegate is refused by
//! the interpreter loop. The host trusts nothing a worker says: it polls CPU and memory,
//! enforces the wall-clock ceiling, counts binding calls and output, and kills the process when
//! a run ends any other way than by completing. The one thing the worker decides is the
//! allocator's hard limit, reported only through the exit status
//! [`monty_types::OOM_EXIT_CODE`], which no program can choose.
//!
//! The interpreter loop (`interpreter.rs`) is generic over its link to the host, so that the
//! in-process variant the benchmarks measure (`inline.rs`) runs the same code. `program.rs`
//! wraps the program into the source Monty runs; `values.rs` carries values between the
//! protocol's JSON and Monty.
//!
//! [`EmbeddedRuntime::python`]: crate::EmbeddedRuntime::python

pub(crate) mod inline;
pub(crate) mod interpreter;
mod program;
pub(crate) mod values;
