//! A durable `run_code` call from start to end (open the run, replay, record how it ended), and
//! what a registry does with a stored run: approve, deny, roll back.
//!
//! This file holds [`DurableExt`] and what its methods return; the run's start and end are in
//! `lifecycle.rs`, the decisions on a parked run in `decisions.rs`, rollbacks in `rollback.rs`.

mod decisions;
mod lifecycle;
mod rollback;

pub use lifecycle::{
    Begun, begin, finish, idempotent_tools, program_scope_text, publisher, read_only_tools,
};

use std::sync::Arc;

use serde_json::Value;

use super::continuation::{Claims, ContinuationSecret, Presenter};
use super::{
    CallOutcome, Claim, DurableRun, JournalEntry, JournalError, JournalStore, Principal, RunRecord,
    RunStatus,
};
use crate::registry::Registry;
use crate::result::ToolResult;

/// A parked run as the person deciding sees it, with the continuation that decides exactly
/// this call ([`crate::DurableExt::parked_run`]).
#[derive(Debug, Clone, PartialEq)]
pub struct ParkedRun {
    /// The run.
    pub run_id: String,
    /// The call it waits at.
    pub seq: u64,
    /// Its tool, `namespace.name`.
    pub tool: String,
    /// Its arguments (what is approved).
    pub arguments: Value,
    /// The hook's reason.
    pub reason: Option<String>,
    /// The signed continuation for this call, shown to `principal`: pass it to
    /// [`crate::DurableExt::approve_run`] / [`crate::DurableExt::deny_run`]. Used once; expires.
    pub continuation: String,
}

/// Who decides, and what they were shown: the principal and the issuers whose continuations
/// are taken.
#[derive(Debug)]
pub struct Decider<'a> {
    pub principal: &'a Principal,
    pub issuers: &'a [String],
    /// Names the refusal's source in a denial.
    pub source: crate::call::approval::DenialSource,
}

/// The claims of a continuation, its tag checked against `store`'s secret (nothing else), and
/// that secret (the claims' principal is checked with it).
fn continuation_claims(
    store: &Arc<dyn JournalStore>,
    continuation: &str,
) -> Result<(Claims, ContinuationSecret), JournalError> {
    let secret = store.continuation_secret()?;
    Ok((secret.open(continuation)?, secret))
}

/// One call a rollback reverted.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct RevertReport {
    /// The reverted call's place in the run.
    pub seq: u64,
    /// Its tool, `namespace.name`.
    pub tool: String,
    /// The tool that reverted it (or would have: empty when it has none).
    pub revert: String,
    /// How the revert call ended. For a call whose outcome is unknown and whose revert was not
    /// run: an error with code [`OUTCOME_UNKNOWN`](super::OUTCOME_UNKNOWN).
    pub outcome: CallOutcome,
    /// The call was journaled as started and never finished (the run was cut off while it
    /// ran): it may or may not have happened. Its revert runs only when asked for
    /// ([`crate::DurableExt::rollback_run_reverting_unknown`]); otherwise it stays in place and the run
    /// is not rolled back.
    #[serde(default)]
    pub outcome_unknown: bool,
}

/// Durable runs on a registry (SPEC §14): settings, and the decisions on a parked run (approve,
/// deny, resume, roll back). Implemented for [`Registry`] only; `dsh_tools::prelude` brings it
/// into scope.
pub trait DurableExt: crate::sealed::Sealed {
    /// Declares `revert_tool` the inverse of `tool`: a rollback of a durable run calls it for
    /// each completed call of `tool`, with arguments `{"arguments": <the call's arguments>,
    /// "result": <its value>}`. Replaces an earlier declaration for `tool`. A tool without one
    /// is not reverted (read-only tools need none).
    fn set_revert(&self, tool: impl Into<String>, revert_tool: impl Into<String>);

    /// How long the continuations this registry issues stay valid (default
    /// [`DEFAULT_CONTINUATION_TTL`](super::DEFAULT_CONTINUATION_TTL); zero issues continuations
    /// that are expired at once). A continuation presented past its expiry is refused
    /// ([`ContinuationError::Expired`]) and the run stays parked: ask for a new one.
    fn set_continuation_ttl(&self, ttl: std::time::Duration);

    /// Sets the secret the approvals of this registry's runs on Restate are checked with
    /// (`DurableApprovals/<key>/approve` and `deny` take only continuations signed with it; see
    /// [`crate::durable::restate`]). A journal keeps its own secret
    /// ([`JournalStore::continuation_secret`]); this one is for Restate deployments, which have
    /// no journal file. Every deployment of one Restate service, and whoever issues
    /// continuations for its runs, must hold the same secret.
    #[cfg(feature = "restate")]
    #[cfg_attr(docsrs, doc(cfg(feature = "restate")))]
    fn set_continuation_secret(&self, secret: super::ContinuationSecret);

    /// The secret of [`set_continuation_secret`](Self::set_continuation_secret), if set.
    #[cfg(feature = "restate")]
    #[doc(hidden)]
    fn continuation_secret(&self) -> Option<super::ContinuationSecret>;

    /// The continuation TTL ([`set_continuation_ttl`](Self::set_continuation_ttl)).
    #[doc(hidden)]
    fn continuation_ttl(&self) -> std::time::Duration;

    /// The call the parked run `run` waits at, with a continuation for it shown to the local
    /// owner ([`Principal::local`]): what a host shows the person before
    /// [`approve_run`](Self::approve_run) or [`deny_run`](Self::deny_run).
    ///
    /// # Errors
    /// [`JournalError::UnknownRun`], [`JournalError::WrongState`] when it is not parked, and the
    /// store's own (its secret included).
    fn parked_run(
        &self,
        run: &DurableRun,
    ) -> impl std::future::Future<Output = Result<ParkedRun, JournalError>> + Send;

    /// The parked run `run` with a continuation shown to `principal` by issuer `by`.
    #[doc(hidden)]
    fn issue(
        &self,
        run: &DurableRun,
        principal: &Principal,
        by: &str,
    ) -> impl std::future::Future<Output = Result<ParkedRun, JournalError>> + Send;

    /// A new continuation, shown to the same principal by `by`, for the call `continuation`
    /// names, which may have expired: its tag must verify, it must have been shown to
    /// `presenter`'s principal by one of its issuers, and the run must still wait at that call
    /// with the arguments shown. Nothing is decided: the old continuation stays refused once
    /// expired, and the new one decides the same call once.
    #[doc(hidden)]
    fn renew(
        &self,
        store: &Arc<dyn JournalStore>,
        continuation: &str,
        presenter: &Presenter<'_>,
        by: &str,
    ) -> impl std::future::Future<Output = Result<ParkedRun, JournalError>> + Send;

    /// Approves the call a parked run waits at and resumes the run: its program runs again (in
    /// this process, with this registry's tools and runtime, in the scope it started in),
    /// replays the journal, runs the approved call and goes on live. `continuation` is the one
    /// [`parked_run`](Self::parked_run) issued to the local owner for that call, in `store`.
    /// Returns `run_code`'s result (which may be parked again).
    ///
    /// Nothing is recorded unless the continuation holds and this registry can resume the run:
    /// it has every tool the journal names and a code runtime of the program's language.
    ///
    /// # Errors
    /// [`JournalError::Continuation`] (code [`CONTINUATION_REFUSED`](super::CONTINUATION_REFUSED))
    /// for a continuation that is forged, expired, another principal's, used, or for a call the
    /// run no longer waits at; [`JournalError::UnknownRun`], [`JournalError::Unresumable`] when
    /// this registry cannot resume it, [`JournalError::Busy`] while another process holds it,
    /// and the store's own. The run stays parked on every error.
    fn approve_run(
        &self,
        store: Arc<dyn JournalStore>,
        continuation: &str,
    ) -> impl std::future::Future<Output = Result<ToolResult, JournalError>> + Send;

    /// Denies the call a parked run waits at with `reason` and resumes the run: the program's
    /// waiting call fails with `reason` (code `DENIED`, naming the run's owner as its source) and
    /// the program goes on. Continuation, checks and errors as
    /// [`approve_run`](Self::approve_run).
    fn deny_run(
        &self,
        store: Arc<dyn JournalStore>,
        continuation: &str,
        reason: impl Into<String> + Send,
    ) -> impl std::future::Future<Output = Result<ToolResult, JournalError>> + Send;

    /// Runs `run` again from its journal (a run cut off by a crash; a finished run returns its
    /// stored result). Errors: [`JournalError::UnknownRun`], [`JournalError::Unresumable`] when
    /// this registry lacks a tool the journal names or a code runtime of the program's
    /// language, and the store's own. A run another process holds ends with a failed result
    /// naming that process.
    fn resume_run(
        &self,
        run: DurableRun,
    ) -> impl std::future::Future<Output = Result<ToolResult, JournalError>> + Send;

    /// Why this registry cannot resume the run `record` with `entries`, if it cannot.
    #[doc(hidden)]
    fn unresumable(&self, record: &RunRecord, entries: &[JournalEntry]) -> Option<String>;

    /// Records the decision `continuation` carries (`denial`, or approval) as `decider`; returns
    /// the run to resume.
    #[doc(hidden)]
    fn decide(
        &self,
        store: &Arc<dyn JournalStore>,
        continuation: &str,
        decider: &Decider<'_>,
        denial: Option<String>,
    ) -> impl std::future::Future<Output = Result<DurableRun, JournalError>> + Send;

    /// Records `denial` (or approval) on the call of run `id` that `claims` names, once it is
    /// the call the run waits at with the arguments shown; returns the decided call's tool.
    #[doc(hidden)]
    fn record_decision(
        &self,
        run: &DurableRun,
        id: &str,
        claims: &Claims,
        denial: &Option<String>,
    ) -> impl std::future::Future<Output = Result<String, JournalError>> + Send;

    /// Rolls back the parked or failed run `run`: each completed call is reverted with its
    /// tool's revert tool ([`set_revert`](Self::set_revert)), newest first, and each reversal is
    /// journaled (the entry becomes [`EntryState::Reverted`]) before the next starts. Calls to
    /// read-only tools need no revert. A failed revert is reported (its report's outcome is an
    /// error), its call stays completed and the rollback goes on with the others; the run ends
    /// as [`RunStatus::RolledBack`] only when every revert succeeded, so rolling back again
    /// retries just the calls still in place.
    ///
    /// A call whose outcome is unknown (journaled as started, never finished: the run was cut
    /// off while it ran, so it may have happened; or answered with
    /// [`OUTCOME_UNKNOWN`](super::OUTCOME_UNKNOWN), as resuming such a run answers it) and whose
    /// tool is not read-only is not
    /// reverted: it is reported with [`RevertReport::outcome_unknown`] set and an error outcome
    /// with code [`OUTCOME_UNKNOWN`](super::OUTCOME_UNKNOWN), and the run is not marked rolled
    /// back. [`rollback_run_reverting_unknown`](Self::rollback_run_reverting_unknown) runs the
    /// revert tool for such calls as well.
    ///
    /// # Errors
    /// [`JournalError::NoRevert`] (nothing reverted) when a completed call's tool is not
    /// read-only and has no revert tool this registry has, [`JournalError::UnknownRun`],
    /// [`JournalError::WrongState`] for a run that succeeded, was rolled back already or is
    /// running, [`JournalError::Busy`] while another process holds it, and the store's own.
    fn rollback_run(
        &self,
        run: DurableRun,
    ) -> impl std::future::Future<Output = Result<Vec<RevertReport>, JournalError>> + Send;

    /// [`rollback_run`](Self::rollback_run), also running the revert tool for the calls numbered
    /// `unknown` whose outcome is unknown: whoever rolls back decides the call may have happened
    /// and its revert is safe to run either way. Their revert tool gets `{"arguments": <the
    /// call's arguments>, "outcome_unknown": true}` (no result: there is none to go by).
    ///
    /// # Errors
    /// As [`rollback_run`](Self::rollback_run); also [`JournalError::WrongState`] (nothing
    /// reverted) when a number in `unknown` is not a call of the run whose outcome is unknown,
    /// and [`JournalError::NoRevert`] when such a call's tool has no revert tool.
    fn rollback_run_reverting_unknown(
        &self,
        run: DurableRun,
        unknown: &[u64],
    ) -> impl std::future::Future<Output = Result<Vec<RevertReport>, JournalError>> + Send;

    /// Whether `tool` (`namespace.name`) is annotated read-only here.
    #[doc(hidden)]
    fn read_only(&self, tool: &str) -> bool;

    /// Reverts the completed calls of run `id` newest first (and the calls numbered `unknown`
    /// whose outcome is unknown) and marks it rolled back when nothing is left in place (the
    /// caller holds the run's claim).
    #[doc(hidden)]
    fn revert_calls(
        &self,
        run: &DurableRun,
        id: &str,
        unknown: &[u64],
    ) -> impl std::future::Future<Output = Result<Vec<RevertReport>, JournalError>> + Send;
}

impl DurableExt for Registry {
    fn set_revert(&self, tool: impl Into<String>, revert_tool: impl Into<String>) {
        self.slot::<super::DurableSettings>()
            .reverts
            .lock()
            .insert(tool.into(), revert_tool.into());
    }

    fn set_continuation_ttl(&self, ttl: std::time::Duration) {
        let ms = u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX);
        self.slot::<super::DurableSettings>()
            .continuation_ttl_ms
            .store(ms, std::sync::atomic::Ordering::Relaxed);
    }

    #[cfg(feature = "restate")]
    #[cfg_attr(docsrs, doc(cfg(feature = "restate")))]
    fn set_continuation_secret(&self, secret: super::ContinuationSecret) {
        *self
            .slot::<super::DurableSettings>()
            .continuation_secret
            .lock() = Some(secret);
    }

    #[cfg(feature = "restate")]
    fn continuation_secret(&self) -> Option<super::ContinuationSecret> {
        self.slot::<super::DurableSettings>()
            .continuation_secret
            .lock()
            .clone()
    }

    fn continuation_ttl(&self) -> std::time::Duration {
        std::time::Duration::from_millis(
            self.slot::<super::DurableSettings>()
                .continuation_ttl_ms
                .load(std::sync::atomic::Ordering::Relaxed),
        )
    }

    async fn parked_run(&self, run: &DurableRun) -> Result<ParkedRun, JournalError> {
        self.issue(run, &Principal::local(), "").await
    }

    async fn issue(
        &self,
        run: &DurableRun,
        principal: &Principal,
        by: &str,
    ) -> Result<ParkedRun, JournalError> {
        decisions::issue(self, run, principal, by).await
    }

    async fn renew(
        &self,
        store: &Arc<dyn JournalStore>,
        continuation: &str,
        presenter: &Presenter<'_>,
        by: &str,
    ) -> Result<ParkedRun, JournalError> {
        decisions::renew(self, store, continuation, presenter, by).await
    }

    async fn approve_run(
        &self,
        store: Arc<dyn JournalStore>,
        continuation: &str,
    ) -> Result<ToolResult, JournalError> {
        decisions::approve_run(self, store, continuation).await
    }

    async fn deny_run(
        &self,
        store: Arc<dyn JournalStore>,
        continuation: &str,
        reason: impl Into<String> + Send,
    ) -> Result<ToolResult, JournalError> {
        decisions::deny_run(self, store, continuation, reason).await
    }

    async fn resume_run(&self, run: DurableRun) -> Result<ToolResult, JournalError> {
        decisions::resume_run(self, run).await
    }

    fn unresumable(&self, record: &RunRecord, entries: &[JournalEntry]) -> Option<String> {
        decisions::unresumable(self, record, entries)
    }

    async fn decide(
        &self,
        store: &Arc<dyn JournalStore>,
        continuation: &str,
        decider: &Decider<'_>,
        denial: Option<String>,
    ) -> Result<DurableRun, JournalError> {
        decisions::decide(self, store, continuation, decider, denial).await
    }

    async fn record_decision(
        &self,
        run: &DurableRun,
        id: &str,
        claims: &Claims,
        denial: &Option<String>,
    ) -> Result<String, JournalError> {
        decisions::record_decision(self, run, id, claims, denial).await
    }

    async fn rollback_run(&self, run: DurableRun) -> Result<Vec<RevertReport>, JournalError> {
        self.rollback_run_reverting_unknown(run, &[]).await
    }

    async fn rollback_run_reverting_unknown(
        &self,
        run: DurableRun,
        unknown: &[u64],
    ) -> Result<Vec<RevertReport>, JournalError> {
        let id = run.checked_id()?;
        let record = run
            .store
            .run(id)
            .await?
            .ok_or_else(|| JournalError::UnknownRun(id.to_owned()))?;
        match &record.status {
            RunStatus::Parked { .. } => {}
            RunStatus::Finished { outcome } if outcome.is_error() => {}
            RunStatus::Finished { .. } => return Err(wrong(id, "succeeded")),
            RunStatus::RolledBack => return Err(wrong(id, "was rolled back already")),
            RunStatus::Running => return Err(wrong(id, "is running (or was cut off: resume it)")),
        }
        Claim::hold(&run.store, id, self.revert_calls(&run, id, unknown)).await
    }

    fn read_only(&self, tool: &str) -> bool {
        tool.strip_prefix("tools.").is_some_and(|name| {
            self.get(name, None).is_some_and(|def| {
                def.annotations()
                    .is_some_and(|hints| hints.read_only_hint == Some(true))
            })
        }) || tool.starts_with("sdk.")
    }

    async fn revert_calls(
        &self,
        run: &DurableRun,
        id: &str,
        unknown: &[u64],
    ) -> Result<Vec<RevertReport>, JournalError> {
        rollback::revert_calls(self, run, id, unknown).await
    }
}

async fn parked(run: &DurableRun, id: &str) -> Result<RunRecord, JournalError> {
    run.store
        .run(id)
        .await?
        .ok_or_else(|| JournalError::UnknownRun(id.to_owned()))
}

fn wrong(id: &str, problem: &str) -> JournalError {
    JournalError::WrongState {
        run_id: id.to_owned(),
        problem: problem.to_owned(),
    }
}

#[cfg(all(test, feature = "durable"))]
mod tests;
