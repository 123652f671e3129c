//! Python on Monty: the worker process that serves the pool, and the interpreter thread of the
//! host the benchmarks measure it against.

pub(super) mod inline;
pub(super) mod worker;

#[doc(hidden)]
pub use worker::{WorkerAllocator, worker_main};
