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
use std::future::Future;
use std::sync::Arc;

use futures::future::BoxFuture;
use serde::{Deserialize, Serialize};
use serde_json::Value;

#[doc(hidden)]
pub use replay::Replay;

pub use continuation::{
    CONTINUATION_REFUSED, ContinuationError, ContinuationSecret, DEFAULT_CONTINUATION_TTL,
    Principal, continuation_run,
};
pub use host::runs_command;
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

/// How one call ended, as journaled: its value, or its failure's message and code.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum CallOutcome {
    /// The call succeeded with this value.
    Ok {
        /// The value the program read.
        value: Value,
    },
    /// The call failed.
    Err {
        /// The failure text.
        message: String,
        /// The failure's code, if it had one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        code: Option<String>,
    },
}

/// Where one journaled call stands.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum EntryState {
    /// Started; its outcome was never recorded (the host stopped while it ran).
    Started,
    /// Finished: the program was answered with `outcome`.
    Finished {
        /// What the program read.
        outcome: CallOutcome,
    },
    /// A pre-execute `Ask` parked the run at this call.
    Parked {
        /// The hook's reason.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
    /// Approved after a park: the call runs when the run resumes.
    Approved,
    /// Finished, then reverted by a rollback.
    Reverted {
        /// What the program had read.
        outcome: CallOutcome,
        /// How the revert call ended.
        revert: CallOutcome,
    },
}

/// One journaled binding call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JournalEntry {
    /// The call's place in the run, from 0, in the order the program made its calls.
    pub seq: u64,
    /// `namespace.name`, e.g. `tools.append_line`.
    pub tool: String,
    /// The arguments as canonical JSON: compact, object keys deep-sorted (UTF-16 order).
    pub args: String,
    /// Where it stands.
    pub state: EntryState,
}

/// Where a run stands.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum RunStatus {
    /// Running, or cut off while it ran (nothing tells the two apart: resume it).
    Running,
    /// Waiting at an approval.
    Parked {
        /// The call that waits.
        seq: u64,
        /// Its tool, `namespace.name`.
        tool: String,
        /// Its canonical arguments.
        args: String,
        /// The hook's reason.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
    /// Ended: the `run_code` output or failure, returned again to whoever resumes it.
    Finished {
        /// The output (`{logs, result}`) or the failure.
        outcome: CallOutcome,
    },
    /// Rolled back: its completed calls were reverted.
    RolledBack,
}

/// A run as the store keeps it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunRecord {
    /// The run's id.
    pub run_id: String,
    /// The `run_code` arguments (`code`, `description`): what a resume runs again.
    pub program: Value,
    /// Where it stands.
    pub status: RunStatus,
    /// Last change, ms since the Unix epoch.
    pub updated_ms: u64,
}

/// A journal that cannot be used. Run ids and paths are shown quoted with their control
/// characters escaped (`\u{1b}`, `\r`), so an error line never carries a terminal sequence.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum JournalError {
    /// The file or connection failed (I/O, locking, a full disk); the text is the store's.
    #[error("journal: {0}")]
    Store(String),
    /// The file is not a journal this version can read: not SQLite, damaged, another
    /// application's database, or a newer schema. Never reused silently.
    #[error("journal: {0}")]
    Unusable(String),
    /// No journal exists at this path (and the store was asked not to create one).
    #[error("no journal at {0:?}")]
    Missing(String),
    /// A stored record could not be decoded.
    #[error("journal: damaged record: {0}")]
    Corrupt(String),
    /// No run with this id.
    #[error("journal: no run {0:?}")]
    UnknownRun(String),
    /// The id is empty, longer than 256 bytes or holds control characters.
    #[error("journal: invalid run id {0:?}: expected 1 to 256 bytes without control characters")]
    InvalidRunId(String),
    /// The run exists with another program: a run id names one program (its code and
    /// language; the description is not part of it).
    #[error("journal: run {run_id:?} was started with another program: {differs}")]
    ProgramMismatch {
        /// The run.
        run_id: String,
        /// What differs, e.g. `its code differs (line 2)`.
        differs: String,
    },
    /// Another live process runs the run now (it claimed it): one process at a time makes a
    /// run's calls.
    #[error("journal: run {run_id:?} is being run by process {pid}")]
    Busy {
        /// The run.
        run_id: String,
        /// The process that holds it.
        pid: u32,
    },
    /// This registry cannot resume the run: a tool the journal names is missing, or the code
    /// runtime runs another language. Nothing was recorded.
    #[error("journal: run {run_id:?} cannot be resumed here: {problem}")]
    Unresumable {
        /// The run.
        run_id: String,
        /// What is missing, e.g. `it calls tools.append_line, which the tools here do not have`.
        problem: String,
    },
    /// A rollback would leave completed state-changing calls in place: their tools have no
    /// revert tool. Nothing was reverted.
    #[error("journal: run {run_id:?}: no revert tool for {calls}; nothing was reverted")]
    NoRevert {
        /// The run.
        run_id: String,
        /// The calls, e.g. `tools.append_line (call #0)`.
        calls: String,
    },
    /// A continuation was refused ([`CONTINUATION_REFUSED`]); the run stays parked.
    #[error("journal: {0}")]
    Continuation(#[from] ContinuationError),
    /// The run was started in another agent scope than the one running it again: a run
    /// resumes only where it started.
    #[error("journal: run {run_id:?} was started in scope {journaled}, not {now}; resume it there")]
    ScopeMismatch {
        /// The run.
        run_id: String,
        /// The scope (and mode) it was started in, e.g. `agent "support" (mode code)`.
        journaled: String,
        /// The scope (and mode) of the attempt.
        now: String,
    },
    /// Another connection (a `sqlite3` shell, a backup, another process's long write) held the
    /// journal file locked for longer than the busy timeout; nothing was recorded. Code
    /// [`JOURNAL_BUSY`] where a call reads it.
    #[error(
        "journal: the file stayed locked by another connection for more than {timeout_ms} ms; \
         nothing was recorded, try again once it is released"
    )]
    Locked {
        /// The busy timeout that passed, in milliseconds.
        timeout_ms: u64,
    },
    /// The journal file holds its bound of bytes: a new run or a new call is refused (runs
    /// under way still record how they end). Code [`JOURNAL_FULL`] where a call reads it.
    #[error(
        "journal: the file is full ({used_bytes} of {max_bytes} bytes in use); roll back or \
         delete finished runs, or raise the bound"
    )]
    Full {
        /// The bytes in use.
        used_bytes: u64,
        /// The bound.
        max_bytes: u64,
    },
    /// The run is not in a state that allows this (approve a run that is not parked, …).
    #[error("journal: run {run_id:?} {problem}")]
    WrongState {
        /// The run.
        run_id: String,
        /// What is wrong, e.g. `is not parked`.
        problem: String,
    },
}

/// The store of durable runs: one record per run and its journaled calls, keyed by run id and
/// sequence number. Several hosts may share one store; a method's future resolves once what it
/// wrote is durable to the store's own standard (see each store's docs).
///
/// Every method takes `&self` and returns a boxed future so the trait is object safe and a store
/// that talks to a server fits as well as an embedded one.
pub trait JournalStore: Send + Sync {
    /// The run `run_id`, created with `program` (the `run_code` arguments) and status
    /// [`RunStatus::Running`] when it does not exist yet. Errors: [`JournalError::ProgramMismatch`]
    /// when it exists with another program, and the store's own.
    fn open_run<'a>(
        &'a self,
        run_id: &'a str,
        program: &'a Value,
    ) -> BoxFuture<'a, Result<RunRecord, JournalError>>;

    /// The run `run_id`, if there is one.
    fn run<'a>(&'a self, run_id: &'a str)
    -> BoxFuture<'a, Result<Option<RunRecord>, JournalError>>;

    /// Every run, most recently changed first.
    fn runs(&self) -> BoxFuture<'_, Result<Vec<RunRecord>, JournalError>>;

    /// Sets the status of run `run_id`. Errors: [`JournalError::UnknownRun`].
    fn set_status<'a>(
        &'a self,
        run_id: &'a str,
        status: &'a RunStatus,
    ) -> BoxFuture<'a, Result<(), JournalError>>;

    /// The journaled calls of `run_id`, by sequence number.
    fn entries<'a>(
        &'a self,
        run_id: &'a str,
    ) -> BoxFuture<'a, Result<Vec<JournalEntry>, JournalError>>;

    /// Records `entry` (replacing the one with its sequence number).
    fn put<'a>(
        &'a self,
        run_id: &'a str,
        entry: &'a JournalEntry,
    ) -> BoxFuture<'a, Result<(), JournalError>>;

    /// Records `entry` as [`put`](Self::put) does, except that the future may resolve before
    /// the write is durable: the store then makes it durable before (or in the same commit
    /// as) anything this store writes after it — the run's next call, its status — and soon
    /// without them. A write that fails then fails the store's next operation instead; an
    /// entry that cannot be stored is lost, and a resumed run reads what was stored before it.
    ///
    /// A live call's outcome is recorded so: until the run's next record, nothing outside the
    /// run has acted on it, and a run cut off before it is stored resumes with the call's
    /// outcome unknown, exactly as when cut off while the call ran. By default the same as
    /// `put`.
    fn put_deferred<'a>(
        &'a self,
        run_id: &'a str,
        entry: &'a JournalEntry,
    ) -> BoxFuture<'a, Result<(), JournalError>> {
        self.put(run_id, entry)
    }

    /// Resolves once every record [`put_deferred`](Self::put_deferred) kept for run `run_id`
    /// is durable. A call of a read-only tool waits for it before it runs: it writes no record
    /// of its own to carry the outcome before it, and a host cut off while it runs must still
    /// find that outcome. The default has nothing to wait for (the default `put_deferred`
    /// writes at once).
    ///
    /// Errors: the store's own, when it cannot write what it kept.
    fn settle<'a>(&'a self, run_id: &'a str) -> BoxFuture<'a, Result<(), JournalError>> {
        let _ = run_id;
        Box::pin(std::future::ready(Ok(())))
    }

    /// Makes this process the owner of run `run_id` until [`release`](Self::release): one
    /// owner at a time replays a run and makes its live calls. Returns the claim's number (its
    /// handle for `release`). A claim whose owner is gone (the process ended) is taken over;
    /// every claim, even two in one process, is exclusive.
    ///
    /// Errors: [`JournalError::Busy`] while another claim's owner lives, and the store's own.
    fn claim<'a>(&'a self, run_id: &'a str) -> BoxFuture<'a, Result<u64, JournalError>>;

    /// Ends the claim `claim` of run `run_id` (nothing when it is not the current claim).
    fn release<'a>(
        &'a self,
        run_id: &'a str,
        claim: u64,
    ) -> BoxFuture<'a, Result<(), JournalError>>;

    /// The secret this store's continuations are signed with
    /// ([`ContinuationSecret`]; [`SqliteJournal`] keeps it in a file beside the journal).
    /// Without one, no parked run of the store can be approved or denied.
    ///
    /// # Errors
    /// The store's own; by default [`JournalError::Unusable`] (the store keeps no secret).
    fn continuation_secret(&self) -> Result<ContinuationSecret, JournalError> {
        Err(JournalError::Unusable(
            "this journal keeps no continuation secret, so its runs cannot be approved".to_owned(),
        ))
    }
}

/// A claim on a run ([`JournalStore::claim`]), released when it is dropped (on a spawned task
/// of the current tokio runtime) unless released before.
#[doc(hidden)]
pub struct Claim {
    store: Arc<dyn JournalStore>,
    run_id: String,
    claim: Option<u64>,
}

impl fmt::Debug for Claim {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The store is any `JournalStore`.
        f.debug_struct("Claim")
            .field("run_id", &self.run_id)
            .field("claim", &self.claim)
            .finish_non_exhaustive()
    }
}

impl Claim {
    /// Claims `run_id` in `store`.
    #[doc(hidden)]
    pub async fn take(store: &Arc<dyn JournalStore>, run_id: &str) -> Result<Self, JournalError> {
        let claim = store.claim(run_id).await?;
        Ok(Claim {
            store: Arc::clone(store),
            run_id: run_id.to_owned(),
            claim: Some(claim),
        })
    }

    /// Runs `work` while holding a claim on `run_id`, and releases the claim before returning
    /// on every path, so the next claim (this process's or another's) never meets a claim
    /// that is still being released in the background. `work`'s error wins over a failed
    /// release.
    #[doc(hidden)]
    pub async fn hold<T>(
        store: &Arc<dyn JournalStore>,
        run_id: &str,
        work: impl Future<Output = Result<T, JournalError>>,
    ) -> Result<T, JournalError> {
        let claim = Claim::take(store, run_id).await?;
        let result = work.await;
        let released = claim.release().await;
        let value = result?;
        released?;
        Ok(value)
    }

    /// Releases it now.
    #[doc(hidden)]
    pub async fn release(mut self) -> Result<(), JournalError> {
        match self.claim.take() {
            Some(claim) => self.store.release(&self.run_id, claim).await,
            None => Ok(()),
        }
    }
}

impl Drop for Claim {
    fn drop(&mut self) {
        // A run whose call was dropped (the caller went away) gives its claim up: without this
        // the run would stay claimed for the life of the process.
        if let (Some(claim), Ok(handle)) =
            (self.claim.take(), tokio::runtime::Handle::try_current())
        {
            let (store, run_id) = (Arc::clone(&self.store), std::mem::take(&mut self.run_id));
            handle.spawn(async move {
                let _ = store.release(&run_id, claim).await;
            });
        }
    }
}

impl JournalError {
    /// The error code a call reads for this error: [`JOURNAL_BUSY`], [`JOURNAL_FULL`], else
    /// `otherwise`.
    #[doc(hidden)]
    pub fn code_or<'a>(&self, otherwise: &'a str) -> &'a str {
        match self {
            JournalError::Locked { .. } => JOURNAL_BUSY,
            JournalError::Full { .. } => JOURNAL_FULL,
            _ => otherwise,
        }
    }
}

/// What makes `now` another program than `journaled` (both `run_code` arguments, with the
/// `language` a run records): its code or its language. The description is not part of a
/// program's identity.
#[cfg(feature = "durable")]
#[doc(hidden)]
pub fn program_differs(journaled: &Value, now: &Value) -> Option<String> {
    let language = |program: &Value| {
        program
            .get("language")
            .and_then(Value::as_str)
            .map(str::to_owned)
    };
    if let (Some(before), Some(after)) = (language(journaled), language(now))
        && before != after
    {
        return Some(format!(
            "its language differs (journaled {before}, now {after})"
        ));
    }
    let code = |program: &Value| program["code"].as_str().unwrap_or_default().to_owned();
    let (before, after) = (code(journaled), code(now));
    if before == after {
        return None;
    }
    let line = before
        .lines()
        .zip(after.lines())
        .position(|(a, b)| a != b)
        .unwrap_or_else(|| before.lines().count().min(after.lines().count()))
        + 1;
    Some(format!("its code differs from line {line} on"))
}

impl CallOutcome {
    /// The outcome of a binding call's result.
    #[doc(hidden)]
    pub fn of(result: &Result<Value, crate::code_runtime::BindingError>) -> Self {
        match result {
            Ok(value) => CallOutcome::Ok {
                value: value.clone(),
            },
            Err(error) => CallOutcome::Err {
                message: error.message.clone(),
                code: error.code.clone(),
            },
        }
    }

    /// The binding call's result again.
    #[doc(hidden)]
    pub fn to_result(&self) -> Result<Value, crate::code_runtime::BindingError> {
        match self {
            CallOutcome::Ok { value } => Ok(value.clone()),
            CallOutcome::Err { message, code } => {
                let error = crate::code_runtime::BindingError::new(message.clone());
                Err(match code {
                    Some(code) => error.with_code(code.clone()),
                    None => error,
                })
            }
        }
    }

    /// Whether it failed.
    pub fn is_error(&self) -> bool {
        matches!(self, CallOutcome::Err { .. })
    }
}
