//! Where the CPU and memory budgets of a subprocess run are enforced: each usage sample of the
//! child's process tree is checked against them (`RLIMIT_CPU`, set in `process.rs`, only backs
//! the CPU budget up per process).

use super::ending::Ending;
use super::process::{self, Usage};
use super::{CodeRuntimeError, FailureKind};

/// The budgets of one run, shared by every code runtime's configuration. How each is measured
/// depends on where programs run: [`SubprocessConfig::budgets`](super::SubprocessConfig::budgets)
/// and `EmbeddedConfig::budgets` say it for theirs. Durations in ms.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Budgets {
    /// CPU time the program may use, in ms (default 60,000; at most 2,147,483,647). Time spent
    /// waiting on bindings is not charged. Overrun: `timeout`
    /// `compute budget exhausted (<compute_ms>ms of CPU time)`.
    pub compute_ms: u64,
    /// Wall-clock ceiling of a run in ms (default 600,000; at most 2,147,483,647). Overrun:
    /// `timeout` `wall-clock ceiling reached (<max_wall_ms>ms)`.
    pub max_wall_ms: u64,
    /// Cap on the JSON bytes of logs plus value or failure message (default 64 MiB; at least
    /// 4), counted by [`OutputLedger`](super::OutputLedger). Everything within it is handed
    /// back, a completion as compact JSON text ([`JsonText`](super::JsonText), about its bytes
    /// of host memory); anything past it — printed, returned or thrown — ends the run as
    /// `output-limit` `outer output exceeded <max_output_bytes> bytes`. The logs printed before
    /// are kept, with the longest prefix of the entry that overflowed that fits beside the
    /// message; when the logs leave less room than the message needs, the message itself is cut
    /// to the bytes left (REFERENCE §4.7's exact accounting: logs plus message never pass the
    /// cap), and when they leave less than the 2 bytes of an empty message (`""`), the last kept
    /// line is dropped to make room. The empty logs array `[]` costs 2 bytes, so the largest
    /// completion a run without output can return is `max_output_bytes − 2` bytes of JSON. Logs cost the host at most the cap plus 24 bytes per line (each a `String` in
    /// [`RunOutcome::logs`](super::RunOutcome::logs)): up to 9 × the cap for empty lines, 3
    /// bytes of it each.
    pub max_output_bytes: u64,
    /// Memory of the run in MiB (default 512): the process tree's resident memory for a child
    /// process, the interpreter's heap for an embedded interpreter. Overrun: `memory-limit`.
    pub max_memory_mb: u64,
    /// Binding calls a run may make (default 10,000), refused and unknown ones included. The
    /// call past it ends the run as `binding-limit`, its message naming the limit.
    pub max_binding_calls: u64,
    /// Runs of one runtime that may execute at once (default twice the machine's cores; at
    /// least 1). Further runs wait for a slot in arrival order.
    pub max_concurrent_runs: usize,
}

impl Default for Budgets {
    fn default() -> Self {
        Budgets {
            compute_ms: 60_000,
            max_wall_ms: 600_000,
            max_output_bytes: 64 << 20,
            max_memory_mb: 512,
            max_binding_calls: 10_000,
            max_concurrent_runs: std::thread::available_parallelism().map_or(2, |n| n.get()) * 2,
        }
    }
}

impl Budgets {
    /// Checks every budget is in range; a runtime's memory budget is at least `min_memory_mb`.
    ///
    /// # Errors
    ///
    /// [`CodeRuntimeError::InvalidConfig`] naming the first budget out of range.
    pub fn validate(&self, min_memory_mb: u64) -> Result<(), CodeRuntimeError> {
        let fail = |m: String| Err(CodeRuntimeError::InvalidConfig(m));
        let ms = 1..=i32::MAX as u64;
        if !ms.contains(&self.compute_ms) {
            return fail("config.budgets.compute_ms must be between 1 and 2147483647".to_owned());
        }
        if !ms.contains(&self.max_wall_ms) {
            return fail("config.budgets.max_wall_ms must be between 1 and 2147483647".to_owned());
        }
        if !(4..=(1 << 53) - 1).contains(&self.max_output_bytes) {
            return fail(
                "config.budgets.max_output_bytes must be a safe integer of at least 4".to_owned(),
            );
        }
        if !(min_memory_mb..=1 << 20).contains(&self.max_memory_mb) {
            return fail(format!(
                "config.budgets.max_memory_mb must be between {min_memory_mb} and 1048576"
            ));
        }
        if !(1..=tokio::sync::Semaphore::MAX_PERMITS).contains(&self.max_concurrent_runs) {
            return fail("config.budgets.max_concurrent_runs must be positive".to_owned());
        }
        Ok(())
    }
}

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
