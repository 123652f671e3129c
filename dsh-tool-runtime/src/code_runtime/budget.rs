//! Where the CPU and memory budgets of a subprocess run are enforced: each usage sample of the
//! child's process tree is checked against them (`RLIMIT_CPU`, set in `process.rs`, only backs
//! the CPU budget up per process).

use super::FailureKind;
use super::process::{self, Usage};
use super::session::Ending;

/// The CPU (`compute_ms`) and resident-memory (`max_memory_mb`) budgets of one run.
pub(crate) struct TreeBudget {
    /// CPU time the worker had used before the run (a reused warm worker's start-up is free).
    cpu_base_ms: u64,
    compute_ms: u64,
    max_memory_mb: u64,
}

impl TreeBudget {
    /// The budgets of a run on the worker `pid`, charged from now.
    pub(crate) fn start(pid: i32, compute_ms: u64, max_memory_mb: u64) -> Self {
        TreeBudget {
            cpu_base_ms: process::cpu_time_ms(pid).unwrap_or(0),
            compute_ms,
            max_memory_mb,
        }
    }

    /// The failure a usage sample ends the run with, if it overruns a budget.
    pub(crate) fn overrun(&self, usage: &Usage) -> Option<Ending> {
        if usage.cpu_ms.saturating_sub(self.cpu_base_ms) >= self.compute_ms {
            return Some(Ending::compute(self.compute_ms));
        }
        if usage.rss_bytes > self.max_memory_mb << 20 {
            return Some(Ending::Fail(
                FailureKind::MemoryLimit,
                format!(
                    "memory budget exhausted ({} MiB resident of {} MiB, peak {} MiB)",
                    usage.rss_bytes >> 20,
                    self.max_memory_mb,
                    usage.peak_rss_bytes.max(usage.rss_bytes) >> 20,
                ),
            ));
        }
        None
    }
}
