//! Durable `run_code` runs: every binding call of a run is journaled, so a run cut off (the host
//! crashed or restarted, an `Ask` parked it) resumes by running the program again and answering
//! its calls from the journal, in order, until the journal is used up; from there it runs live.
//!
//! The journal is kept by a [`JournalStore`] (run id + sequence number; async, so a store on
//! another machine fits the same seam). [`SqliteJournal`] (feature `durable`) is the embedded
//! one: one SQLite file, safe for several processes on one machine.
//!
//! A run is made durable by [`crate::DurableCallExt::durable`](crate::DurableCallExt::durable) on its `run_code`
//! call. The replay itself lives in the run session every code runtime shares, so Node, CPython,
//! QuickJS and Monty runs are all durable without code of their own:
//! - a call whose tool or canonical arguments (deep-sorted keys, compact) differ from the
//!   journaled one at its sequence number ends the run as
//!   [`FailureKind::ReplayDiverged`](crate::code_runtime::FailureKind::ReplayDiverged), naming
//!   both calls; nothing after it executes;
//! - a live call is journaled as started before it runs and as finished before the program
//!   sees its outcome; a call of a read-only tool (or of `sdk`) only as finished, as it changes
//!   nothing and, cut off, runs again;
//! - a call journaled as started but never finished runs again only if its tool is read-only or
//!   idempotent (its annotations say so); otherwise the program gets a failure with code
//!   [`OUTCOME_UNKNOWN`] (it may have happened);
//! - a pre-execute `Ask` parks the run: the interpreter ends, the run's status says which call
//!   waits and why, and [`crate::DurableExt::approve_run`](crate::DurableExt::approve_run) /
//!   [`crate::DurableExt::deny_run`](crate::DurableExt::deny_run) resume it later, from any process, with a
//!   signed continuation ([`crate::DurableExt::parked_run`](crate::DurableExt::parked_run)) that names the
//!   waiting call, its arguments and who it was shown to, and is used once;
//! - a run resumes in the agent scope it started in: its program is journaled with its agent
//!   and mode, a decision or resume restores the agent, and running it again under another
//!   agent is refused ([`JournalError::ScopeMismatch`]); any mode that offers `run_code`
//!   resumes it;
//! - [`crate::DurableExt::rollback_run`](crate::DurableExt::rollback_run) reverts a parked or failed run's
//!   completed calls in reverse order with each tool's declared revert tool
//!   ([`crate::DurableExt::set_revert`](crate::DurableExt::set_revert)), each reversal journaled; a
//!   state-changing call whose outcome is unknown is reported, not reverted, and keeps the run
//!   from being marked rolled back unless its revert is asked for
//!   ([`crate::DurableExt::rollback_run_reverting_unknown`](crate::DurableExt::rollback_run_reverting_unknown));
//! - a run's journaled calls are bounded ([`DurableRun::with_max_run_bytes`]): past the bound
//!   the run ends as
//!   [`FailureKind::JournalLimit`](crate::code_runtime::FailureKind::JournalLimit).

#[cfg(feature = "restate")]
#[doc(hidden)]
pub mod approvals;
#[doc(hidden)]
pub mod continuation;
mod host;
mod journal;
#[doc(hidden)]
pub mod replay;
#[cfg(feature = "restate")]
#[cfg_attr(docsrs, doc(cfg(feature = "restate")))]
pub mod restate;
#[doc(hidden)]
pub mod run;
#[cfg(feature = "durable")]
mod sqlite;
#[cfg(feature = "restate")]
#[doc(hidden)]
pub mod steps;

use std::fmt;
use std::sync::Arc;

#[doc(hidden)]
pub use replay::Replay;

pub use continuation::{
    CONTINUATION_REFUSED, ContinuationError, ContinuationSecret, DEFAULT_CONTINUATION_TTL,
    Principal, continuation_run,
};
pub use host::runs_command;
#[cfg(feature = "durable")]
#[doc(hidden)]
pub use journal::program_differs;
pub use journal::{
    CallOutcome, Claim, EntryState, JournalEntry, JournalError, JournalStore, RunRecord, RunStatus,
};
pub use run::{ParkedRun, RevertReport};
#[cfg(feature = "durable")]
pub use sqlite::{DEFAULT_BUSY_TIMEOUT, DEFAULT_MAX_FILE_BYTES, OpenMode, SqliteJournal};

/// The code a program reads on a call that was started before the run was cut off and whose
/// tool is neither read-only nor idempotent: it may or may not have happened.
pub const OUTCOME_UNKNOWN: &str = "OUTCOME_UNKNOWN";

/// The error code of a `run_code` result whose run parked at an approval.
pub const RUN_PARKED: &str = "RUN_PARKED";

/// The error code a program reads when the journal could not record its call.
pub const JOURNAL_FAILED: &str = "JOURNAL_FAILED";

/// The error code of a call (or a `run_code` call) the journal could not record because
/// another connection held the journal file locked past the busy timeout
/// ([`JournalError::Locked`]); nothing was recorded, so trying again later is safe.
pub const JOURNAL_BUSY: &str = "JOURNAL_BUSY";

/// The error code of a call (or a `run_code` call) refused because the journal file holds its
/// bound of bytes ([`JournalError::Full`]); the call did not run.
pub const JOURNAL_FULL: &str = "JOURNAL_FULL";

/// The default bound of the bytes one run's journaled calls may hold (tool name, canonical
/// arguments and recorded state of each, as stored): 32 MiB. See
/// [`DurableRun::with_max_run_bytes`].
pub const DEFAULT_MAX_RUN_BYTES: u64 = 32 << 20;

/// A run made durable: the store that journals it and the run's id (any non-empty text of at
/// most 256 bytes, chosen by the caller; the same id resumes the same run).
#[derive(Clone)]
pub struct DurableRun {
    /// Where the run's journal lives.
    pub store: Arc<dyn JournalStore>,
    /// The run's id: the handle of a parked run.
    pub run_id: String,
    max_run_bytes: u64,
}

impl DurableRun {
    /// The run `run_id` journaled in `store`, its journal bounded by
    /// [`DEFAULT_MAX_RUN_BYTES`].
    pub fn new(store: Arc<dyn JournalStore>, run_id: impl Into<String>) -> Self {
        DurableRun {
            store,
            run_id: run_id.into(),
            max_run_bytes: DEFAULT_MAX_RUN_BYTES,
        }
    }

    /// Bounds the bytes the run's journaled calls may hold (each call's tool name, canonical
    /// arguments and recorded state, as stored). A call whose arguments would pass the bound
    /// is not made; a call whose outcome would pass it is not recorded (it stays started, its
    /// outcome unknown). Either ends the run as
    /// [`FailureKind::JournalLimit`](crate::code_runtime::FailureKind::JournalLimit), as
    /// `max_binding_calls` ends it as `binding-limit`.
    #[must_use]
    pub fn with_max_run_bytes(mut self, bytes: u64) -> Self {
        self.max_run_bytes = bytes;
        self
    }

    /// The bound of the run's journaled bytes.
    pub fn max_run_bytes(&self) -> u64 {
        self.max_run_bytes
    }

    /// The id checked: non-empty, at most 256 bytes, no control characters.
    #[doc(hidden)]
    pub fn checked_id(&self) -> Result<&str, JournalError> {
        let id = self.run_id.as_str();
        if id.is_empty() || id.len() > 256 || id.chars().any(char::is_control) {
            return Err(JournalError::InvalidRunId(id.chars().take(64).collect()));
        }
        Ok(id)
    }
}

impl fmt::Debug for DurableRun {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DurableRun")
            .field("run_id", &self.run_id)
            .field("max_run_bytes", &self.max_run_bytes)
            .finish_non_exhaustive()
    }
}

/// What makes a `run_code` call durable.
#[derive(Debug, Clone)]
#[doc(hidden)]
pub enum Durability {
    /// Journaled in a [`JournalStore`].
    Journal(DurableRun),
    /// Each binding call is a journaled step of the Restate invocation that runs the program.
    #[cfg(feature = "restate")]
    Steps(steps::StepSender),
}

/// A registry's settings of durable runs, kept in its [`slot`](crate::Registry::slot).
#[derive(Debug)]
#[doc(hidden)]
pub struct DurableSettings {
    /// Each tool's revert tool, for rollbacks (`set_revert`).
    #[doc(hidden)]
    pub reverts: parking_lot::Mutex<std::collections::HashMap<String, String>>,
    /// How long the continuations of parked runs stay valid, ms (`set_continuation_ttl`).
    #[doc(hidden)]
    pub continuation_ttl_ms: std::sync::atomic::AtomicU64,
    /// The secret of the continuations of runs on Restate (`set_continuation_secret`).
    #[cfg(feature = "restate")]
    #[doc(hidden)]
    pub continuation_secret: parking_lot::Mutex<Option<ContinuationSecret>>,
}

impl Default for DurableSettings {
    fn default() -> Self {
        DurableSettings {
            reverts: parking_lot::Mutex::default(),
            continuation_ttl_ms: std::sync::atomic::AtomicU64::new(
                u64::try_from(DEFAULT_CONTINUATION_TTL.as_millis()).unwrap_or(u64::MAX),
            ),
            #[cfg(feature = "restate")]
            continuation_secret: parking_lot::Mutex::new(None),
        }
    }
}

/// Durable runs on a call. Implemented for [`ToolCall`](crate::ToolCall) only;
/// `dsh_tools::prelude` brings it into scope.
pub trait DurableCallExt: crate::sealed::Sealed {
    /// Makes a `run_code` call durable: its binding calls are journaled in `run.store` under
    /// `run.run_id`, and calling it again with the same run id resumes the run from its journal
    /// (or returns its stored result once it has ended). Ignored by every other tool.
    #[must_use]
    fn durable(self, run: DurableRun) -> Self;
}

impl DurableCallExt for crate::ToolCall {
    fn durable(mut self, run: DurableRun) -> Self {
        self.extensions.insert(Durability::Journal(run));
        self
    }
}
