//! How a run ends ([`Ending`]) and becomes a [`RunOutcome`], the same on every code runtime:
//! the texts of the host's own failures (abort, wall clock, budgets, a worker's exit) and the
//! output ledger's last say over a completion.
//!
//! What stays a property of one transport: only a child process has output of its own outside the
//! frames (its stdout and stderr, split into log entries by [`Lines`](super::ledger::Lines), each
//! cut at the frame limit); a pooled worker's own output is the worker's, and an interpreter
//! thread has none.

use super::frame::Completion;
use super::ledger::{OutputLedger, failure_outcome};
use super::sandbox::SandboxStatus;
use super::value_text::JsonText;
use super::{CodeRunFailure, FailureKind, RunOutcome};

/// How a run ended, before the output ledger has had its say.
#[derive(Debug)]
pub enum Ending {
    /// The program returned this value, as compact JSON text (`None`: nothing).
    Done(Option<JsonText>),
    /// A typed failure: the program's own (`exception`, `invalid-output`) or the host's.
    Fail(FailureKind, String),
    /// The output cap was exceeded; the diagnostic (already cut to fit).
    Overflow(String),
}

impl From<Completion> for Ending {
    fn from(completion: Completion) -> Self {
        match completion {
            Completion::Value(value) => Ending::Done(value),
            Completion::Failure { kind, message } => Ending::Fail(kind, message),
        }
    }
}

impl Ending {
    /// `abort` `run aborted`: the request's signal was cancelled mid-run.
    pub fn aborted() -> Self {
        Ending::Fail(FailureKind::Abort, "run aborted".to_owned())
    }

    /// `abort` `runtime disposed`.
    pub fn disposed() -> Self {
        Ending::Fail(FailureKind::Abort, "runtime disposed".to_owned())
    }

    /// `timeout` `wall-clock ceiling reached (<ms>ms)`.
    pub fn wall(max_wall_ms: u64) -> Self {
        Ending::Fail(
            FailureKind::Timeout,
            format!("wall-clock ceiling reached ({max_wall_ms}ms)"),
        )
    }

    /// `timeout` `compute budget exhausted (<ms>ms of CPU time)`.
    pub fn compute(compute_ms: u64) -> Self {
        Ending::Fail(
            FailureKind::Timeout,
            format!("compute budget exhausted ({compute_ms}ms of CPU time)"),
        )
    }

    /// `memory-limit` `memory limit reached (<mb> MiB)`: the interpreter's allocator refused.
    pub fn allocator_limit(max_memory_mb: u64) -> Self {
        Ending::Fail(
            FailureKind::MemoryLimit,
            format!("memory limit reached ({max_memory_mb} MiB)"),
        )
    }

    /// `binding-limit` `binding call limit reached (<n> calls)`.
    pub fn call_limit(max_binding_calls: u64) -> Self {
        Ending::Fail(
            FailureKind::BindingLimit,
            format!("binding call limit reached ({max_binding_calls} calls)"),
        )
    }

    /// `worker-exit` with `message`.
    pub fn worker_exit(message: impl Into<String>) -> Self {
        Ending::Fail(FailureKind::WorkerExit, message.into())
    }

    /// The outcome: a value that does not fit after the logs ends as `output-limit`, a failure's
    /// message goes through the ledger like any output, and `sandbox` is reported whatever the
    /// ending.
    pub fn into_outcome(
        self,
        ledger: &mut OutputLedger,
        mut logs: Vec<String>,
        sandbox: Option<SandboxStatus>,
    ) -> RunOutcome {
        let overflow = |logs, message| RunOutcome {
            value: None,
            logs,
            error: Some(CodeRunFailure {
                kind: FailureKind::OutputLimit,
                message,
            }),
            sandbox: None,
        };
        let outcome = match self {
            Ending::Done(Some(value)) if !ledger.fits_text(&value) => {
                let message = ledger.overflow_message(&mut logs);
                overflow(logs, message)
            }
            Ending::Done(value) => RunOutcome {
                value,
                logs,
                error: None,
                sandbox: None,
            },
            Ending::Fail(kind, message) => failure_outcome(ledger, logs, kind, message),
            Ending::Overflow(message) => overflow(logs, message),
        };
        RunOutcome { sandbox, ..outcome }
    }
}

/// The outcome of a run that ends before it has a process or an interpreter; its message still
/// has to fit the output cap (`max_output_bytes`).
pub fn early_outcome(max_output_bytes: u64, kind: FailureKind, message: String) -> RunOutcome {
    let mut ledger = OutputLedger::new(max_output_bytes);
    failure_outcome(&mut ledger, Vec::new(), kind, message)
}
