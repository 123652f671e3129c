//! The journal's vocabulary: how a call ended ([`CallOutcome`]), its entries and their states,
//! a run's record and status, the store that keeps them ([`JournalStore`]), the claim a
//! process holds on a run, and the errors.

use std::future::Future;
use std::sync::Arc;

use futures::future::BoxFuture;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{ContinuationError, ContinuationSecret, JOURNAL_BUSY, JOURNAL_FULL};

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
    pub(super) store: Arc<dyn JournalStore>,
    pub(super) run_id: String,
    claim: Option<u64>,
}

impl std::fmt::Debug for Claim {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
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
