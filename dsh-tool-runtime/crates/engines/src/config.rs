//! [`EmbeddedConfig`]: the budgets and options of an [`EmbeddedRuntime`](crate::EmbeddedRuntime),
//! read by the runtime, the interpreter threads and the worker pool.

use dsh_tool_code_mode::code_runtime::{Budgets, CodeRuntimeError};

/// Budgets and options of an [`EmbeddedRuntime`](crate::EmbeddedRuntime).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EmbeddedConfig {
    /// The run's budgets. Here `compute_ms` is the interpreter's CPU time: in the host, checked
    /// by the interpreter's interrupt hook, so an overrun ends within a few ms; in a worker
    /// pool, the worker's CPU time sampled every 10 ms. `max_wall_ms` counts from the moment
    /// the interpreter starts. `max_memory_mb` (at least 4) is the interpreter's heap, held by
    /// its allocator: the first refused allocation ends the run even if the program catches
    /// the error, as `memory-limit` `memory limit reached (<max_memory_mb> MiB)`. Runs past
    /// `max_concurrent_runs` wait without holding a thread; for the worker pools it is also the
    /// most worker processes serving runs at once.
    pub budgets: Budgets,
    /// Worker pools only ([`EmbeddedRuntime::python`](crate::EmbeddedRuntime::python),
    /// [`EmbeddedRuntime::javascript`](crate::EmbeddedRuntime::javascript)): worker processes
    /// the pool keeps started and idle, waiting for a run (default 2, at most
    /// `max_concurrent_runs`). A worker whose run completed (with a value
    /// or a program error) goes back on top, so the next run reuses it, while at most one more
    /// than this is idle; otherwise it is ended. A worker whose run ended by a limit, a crash,
    /// cancellation or disposal is always ended and replaced. With 0, only the last warm worker
    /// is kept. At most `max_concurrent_runs` workers serve runs at once.
    pub python_idle_workers: usize,
    /// Worker pools only: the worker program (`dsh-monty-worker`, built from this crate's
    /// facade; it serves both languages).
    /// Default: `$DSH_MONTY_WORKER`, else `dsh-monty-worker` next to the running executable or
    /// in its parent directory (where Cargo puts it for tests, benches and examples).
    pub python_worker: Option<std::path::PathBuf>,
}

impl Default for EmbeddedConfig {
    fn default() -> Self {
        EmbeddedConfig {
            budgets: Budgets::default(),
            python_idle_workers: 2,
            python_worker: None,
        }
    }
}

impl EmbeddedConfig {
    /// Checks the budgets: `max_memory_mb` at least 4.
    ///
    /// # Errors
    ///
    /// [`CodeRuntimeError::InvalidConfig`] naming the first field out of range.
    pub(crate) fn validate(&self) -> Result<(), CodeRuntimeError> {
        self.budgets.validate(4)
    }
}
