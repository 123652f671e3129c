//! A durable `run_code` call from start to end (open the run, replay, record how it ended), and
//! what a registry does with a stored run: approve, deny, roll back.

use std::collections::HashSet;
use std::sync::Arc;

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::DurableCallExt;
use super::continuation::{Claims, ContinuationSecret, Presenter, args_digest};
use super::{
    CallOutcome, Claim, ContinuationError, DurableRun, EntryState, JournalEntry, JournalError,
    JournalStore, Principal, RUN_PARKED, Replay, RunRecord, RunStatus,
};
use crate::call::{ToolCall, ToolExec};
use crate::code_runtime::FailureKind;
use crate::error::{ErrorCode, ToolError};
use crate::events::ToolEvent;
use crate::registry::{RUN_CODE, Registry, read};
use crate::result::ToolResult;
use crate::scope::AgentId;

/// How a durable `run_code` call starts.
#[derive(Debug)]
pub enum Begun {
    /// The run ended before (or waits at an approval): this is its result, nothing runs.
    Done(Result<Value, ToolError>),
    /// Run the program with this journal.
    Replay(Arc<Replay>),
}

fn journal_error(error: &JournalError) -> ToolError {
    match error.code_or("") {
        "" => ToolError::coded(ErrorCode::CodeRunFailed, error.to_string()),
        code => ToolError::new(error.to_string()).with_code(code),
    }
}

/// The key a journaled program records its language under, beside the `run_code` arguments.
const LANGUAGE: &str = "language";

/// Opens the durable run of `exec`'s `run_code` call with `args` (a program in `language`, the
/// code runtime's id): claims it for this process, then its stored result when it has ended,
/// the parked result again while it waits, else its journal to replay.
pub async fn begin(
    registry: &Registry,
    run: &DurableRun,
    args: &Value,
    language: &str,
    exec: &ToolExec,
    run_signal: CancellationToken,
) -> Result<Begun, ToolError> {
    let id = run.checked_id().map_err(|error| journal_error(&error))?;
    // Claimed before anything is read: two processes resuming one run never both replay it.
    let claim = Claim::take(&run.store, id)
        .await
        .map_err(|error| journal_error(&error))?;
    let scope = scope_of(registry, exec.agent());
    let (entries, done) = match open(run, id, args, language, &scope).await {
        Ok(opened) => opened,
        Err(error) => {
            // Released before the error returns: a retry must not meet this claim.
            let _ = claim.release().await;
            return Err(journal_error(&error));
        }
    };
    if let Some(result) = done {
        claim
            .release()
            .await
            .map_err(|error| journal_error(&error))?;
        return Ok(Begun::Done(result));
    }
    Ok(Begun::Replay(Arc::new(Replay::new(
        claim,
        exec,
        entries,
        super::replay::ToolKinds {
            idempotent: idempotent_tools(registry, exec),
            read_only: read_only_tools(registry, exec),
        },
        publisher(registry),
        run_signal,
        run.max_run_bytes(),
    ))))
}

/// Records the program of run `id` (or checks it against the journaled one) and reads its
/// journal: the run's result when it has ended or still waits at an approval, else marks it
/// running. The caller holds the run's claim.
async fn open(
    run: &DurableRun,
    id: &str,
    args: &Value,
    language: &str,
    scope: &Value,
) -> Result<(Vec<JournalEntry>, Option<Result<Value, ToolError>>), JournalError> {
    let mut program = args.clone();
    if let Value::Object(fields) = &mut program {
        fields.insert(LANGUAGE.to_owned(), Value::from(language));
        fields.insert(SCOPE.to_owned(), scope.clone());
    }
    let record = run.store.open_run(id, &program).await?;
    // A run journaled before scopes were recorded has none and resumes anywhere. The agent is
    // what decides which tools the program reaches; the mode is recorded for the person who
    // reads the run, and any mode that offers `run_code` resumes it.
    if let Some(journaled) = record.program.get(SCOPE)
        && journaled["agent"] != scope["agent"]
    {
        return Err(JournalError::ScopeMismatch {
            run_id: id.to_owned(),
            journaled: scope_text(journaled),
            now: scope_text(scope),
        });
    }
    let entries = run.store.entries(id).await?;
    let done = match &record.status {
        RunStatus::Finished { outcome } => Some(stored(outcome)),
        RunStatus::RolledBack => Some(Err(ToolError::coded(
            ErrorCode::CodeRunFailed,
            format!("durable run {id:?} was rolled back"),
        ))),
        RunStatus::Parked { seq, .. } => entries
            .iter()
            .any(|entry| entry.seq == *seq && matches!(entry.state, EntryState::Parked { .. }))
            .then(|| Err(parked_error(id, &record.status))),
        RunStatus::Running => None,
    };
    if done.is_none() {
        run.store.set_status(id, &RunStatus::Running).await?;
    }
    Ok((entries, done))
}

/// The key a journaled program records its agent scope and mode under.
const SCOPE: &str = "scope";

/// The agent scope and mode a call of `agent` runs in, as journaled:
/// `{"agent": <id or null>, "mode": "<mode>"}`.
fn scope_of(registry: &Registry, agent: Option<&AgentId>) -> Value {
    let mode = read(&registry.inner.state).mode(agent);
    json!({"agent": agent.map(AgentId::as_str), "mode": mode.to_string()})
}

/// A journaled scope as an error names it: `agent "support" (mode code)`, `the registry
/// (mode code)`.
fn scope_text(scope: &Value) -> String {
    let mode = scope["mode"].as_str().unwrap_or("unknown");
    match scope["agent"].as_str() {
        Some(agent) => format!("agent {agent:?} (mode {mode})"),
        None => format!("the registry (mode {mode})"),
    }
}

/// The agent scope and mode a run's journaled `program` records, as `runs show` prints them:
/// `agent "support" (mode code)`, `the registry (mode code)`, or that none was recorded (a run
/// journaled before scopes were, which resumes in any).
pub fn program_scope_text(program: &Value) -> String {
    match program.get(SCOPE) {
        Some(scope) => scope_text(scope),
        None => "not recorded (it resumes in any scope)".to_owned(),
    }
}

/// `namespace.name` of the binding calls that may run again when their outcome is unknown:
/// tools annotated read-only or idempotent, and the `sdk` namespace (it only reads
/// declarations).
pub fn idempotent_tools(registry: &Registry, exec: &ToolExec) -> HashSet<String> {
    registry
        .tools(exec.agent())
        .iter()
        .filter(|def| {
            def.annotations().is_some_and(|hints| {
                hints.read_only_hint == Some(true) || hints.idempotent_hint == Some(true)
            })
        })
        .map(|def| format!("tools.{}", def.name()))
        .chain(["sdk.describe".to_owned(), "sdk.search".to_owned()])
        .collect()
}

/// `namespace.name` of the binding calls that change nothing: tools annotated read-only, and
/// the `sdk` namespace. Such a call is journaled once, when it has finished: cut off before,
/// it runs again on resume, as its start journaled would have it, and a rollback has nothing
/// of it to revert.
pub fn read_only_tools(registry: &Registry, exec: &ToolExec) -> HashSet<String> {
    registry
        .tools(exec.agent())
        .iter()
        .filter(|def| {
            def.annotations()
                .is_some_and(|hints| hints.read_only_hint == Some(true))
        })
        .map(|def| format!("tools.{}", def.name()))
        .chain(["sdk.describe".to_owned(), "sdk.search".to_owned()])
        .collect()
}

/// Publishes a durable run's events on `registry`.
pub fn publisher(registry: &Registry) -> Arc<dyn Fn(ToolEvent) + Send + Sync> {
    let registry = registry.clone();
    Arc::new(move |event: ToolEvent| registry.publish(|| event))
}

/// Records how the durable run ended and returns `run_code`'s result: the parked result when it
/// parked; a run the caller cancelled or the runtime stopped (`abort`) stays resumable.
pub async fn finish(
    run: &DurableRun,
    replay: &Replay,
    failure: Option<(FailureKind, String)>,
    result: Result<Value, ToolError>,
) -> Result<Value, ToolError> {
    let id = run.run_id.as_str();
    if let Some(status) = replay.parked() {
        run.store
            .set_status(id, &status)
            .await
            .map_err(|error| journal_error(&error))?;
        replay
            .release()
            .await
            .map_err(|error| journal_error(&error))?;
        return Err(parked_error(id, &status));
    }
    // An outcome past the journal's bound ended the run through its signal: that, not the
    // cancellation, is how it ended.
    let (failure, result) = match replay.over_limit() {
        Some(message) => {
            let kind = FailureKind::JournalLimit;
            let error = ToolError::coded(
                ErrorCode::CodeRunFailed,
                format!("code run failed ({kind}): {message}"),
            );
            (Some((kind, message)), Err(error))
        }
        None => (failure, result),
    };
    let result = match (&failure, result) {
        (None, Ok(_)) if replay.unused() > 0 => Err(ToolError::coded(
            ErrorCode::CodeRunFailed,
            format!(
                "code run failed ({}): the program ended with {} journaled call(s) not made \
                 again; it must make the same calls in the same order when it runs again",
                FailureKind::ReplayDiverged,
                replay.unused()
            ),
        )),
        (_, result) => result,
    };
    let resumable = matches!(&failure, Some((FailureKind::Abort, _)))
        || result
            .as_ref()
            .err()
            .and_then(ToolError::code)
            .is_some_and(|code| code == ErrorCode::Aborted.as_str());
    if !resumable {
        let outcome = match &result {
            Ok(value) => CallOutcome::Ok {
                value: value.clone(),
            },
            Err(error) => CallOutcome::Err {
                message: error.message().to_owned(),
                code: error.code().map(str::to_owned),
            },
        };
        run.store
            .set_status(id, &RunStatus::Finished { outcome })
            .await
            .map_err(|error| journal_error(&error))?;
    }
    replay
        .release()
        .await
        .map_err(|error| journal_error(&error))?;
    result
}

fn stored(outcome: &CallOutcome) -> Result<Value, ToolError> {
    match outcome {
        CallOutcome::Ok { value } => Ok(value.clone()),
        CallOutcome::Err { message, code } => {
            let error = ToolError::new(message.clone());
            Err(match code {
                Some(code) => error.with_code(code.clone()),
                None => error,
            })
        }
    }
}

fn parked_error(id: &str, status: &RunStatus) -> ToolError {
    let RunStatus::Parked {
        seq, tool, reason, ..
    } = status
    else {
        return ToolError::new(format!("durable run {id:?} is not parked"));
    };
    let reason = reason.as_deref().unwrap_or("approval required");
    ToolError::new(format!(
        "durable run {id:?} parked at call #{seq} ({tool}): {reason}; approve or deny it \
         with a continuation of run {id:?}"
    ))
    .with_code(RUN_PARKED)
}

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
        let id = run.checked_id()?;
        let record = parked(run, id).await?;
        let RunStatus::Parked {
            seq,
            tool,
            args,
            reason,
        } = record.status
        else {
            return Err(wrong(id, "is not parked"));
        };
        let secret = run.store.continuation_secret()?;
        let claims = Claims::new(
            &secret,
            id,
            seq,
            &args,
            principal,
            by,
            self.continuation_ttl(),
        );
        Ok(ParkedRun {
            run_id: id.to_owned(),
            seq,
            tool,
            arguments: serde_json::from_str(&args).unwrap_or(Value::String(args)),
            reason,
            continuation: secret.sign(&claims),
        })
    }

    async fn renew(
        &self,
        store: &Arc<dyn JournalStore>,
        continuation: &str,
        presenter: &Presenter<'_>,
        by: &str,
    ) -> Result<ParkedRun, JournalError> {
        let (claims, secret) = continuation_claims(store, continuation)?;
        claims.check_holder(presenter, &secret)?;
        let run = DurableRun::new(store.clone(), claims.run.clone());
        let id = run.checked_id()?;
        let still_waiting = match parked(&run, id).await?.status {
            RunStatus::Parked { seq, args, .. } => {
                seq == claims.seq && args_digest(&args) == claims.args
            }
            _ => false,
        };
        if !still_waiting {
            return Err(ContinuationError::Mismatch {
                run_id: claims.run,
                seq: claims.seq,
            }
            .into());
        }
        self.issue(&run, presenter.principal, by).await
    }

    async fn approve_run(
        &self,
        store: Arc<dyn JournalStore>,
        continuation: &str,
    ) -> Result<ToolResult, JournalError> {
        let decider = Decider {
            principal: &Principal::local(),
            issuers: &[String::new()],
            source: crate::call::approval::DenialSource::Owner,
        };
        let run = self.decide(&store, continuation, &decider, None).await?;
        self.resume_run(run).await
    }

    async fn deny_run(
        &self,
        store: Arc<dyn JournalStore>,
        continuation: &str,
        reason: impl Into<String> + Send,
    ) -> Result<ToolResult, JournalError> {
        let decider = Decider {
            principal: &Principal::local(),
            issuers: &[String::new()],
            source: crate::call::approval::DenialSource::Owner,
        };
        let run = self
            .decide(&store, continuation, &decider, Some(reason.into()))
            .await?;
        self.resume_run(run).await
    }

    async fn resume_run(&self, run: DurableRun) -> Result<ToolResult, JournalError> {
        let id = run.checked_id()?.to_owned();
        let record = run
            .store
            .run(&id)
            .await?
            .ok_or_else(|| JournalError::UnknownRun(id.clone()))?;
        let entries = run.store.entries(&id).await?;
        if let Some(problem) = self.unresumable(&record, &entries) {
            return Err(JournalError::Unresumable {
                run_id: id,
                problem,
            });
        }
        // The language is the journal's note of the program, not a `run_code` argument.
        let mut program = record.program.clone();
        if let Value::Object(fields) = &mut program {
            fields.remove(LANGUAGE);
        }
        // The scope too: the run resumes where it started.
        let agent = program
            .get(SCOPE)
            .and_then(|scope| scope["agent"].as_str())
            .map(AgentId::new);
        if let Value::Object(fields) = &mut program {
            fields.remove(SCOPE);
        }
        let mut call = ToolCall::new(format!("resume-{id}"), RUN_CODE, program).durable(run);
        if let Some(agent) = agent {
            call = call.with_agent(agent);
        }
        Ok(self.execute(call).await)
    }

    fn unresumable(&self, record: &RunRecord, entries: &[JournalEntry]) -> Option<String> {
        let Some(runtime) = crate::code_runtime::mounted(&read(&self.inner.state)) else {
            return Some("no code runtime is mounted".to_owned());
        };
        if let Some(language) = record.program.get(LANGUAGE).and_then(Value::as_str)
            && language != runtime.language()
        {
            return Some(format!(
                "its program is {language}, the code runtime here runs {}",
                runtime.language()
            ));
        }
        // The tools are looked up in the scope the run resumes in: its journaled agent's.
        let agent = record
            .program
            .get(SCOPE)
            .and_then(|scope| scope["agent"].as_str())
            .map(AgentId::new);
        let missing: std::collections::BTreeSet<&str> = entries
            .iter()
            .map(|entry| entry.tool.as_str())
            .filter(|tool| match tool.strip_prefix("tools.") {
                Some(name) => self.get(name, agent.as_ref()).is_none(),
                None => !tool.starts_with("sdk."),
            })
            .collect();
        (!missing.is_empty()).then(|| {
            format!(
                "it calls {}, which the tools here do not have",
                missing.into_iter().collect::<Vec<_>>().join(", ")
            )
        })
    }

    async fn decide(
        &self,
        store: &Arc<dyn JournalStore>,
        continuation: &str,
        decider: &Decider<'_>,
        denial: Option<String>,
    ) -> Result<DurableRun, JournalError> {
        let (claims, secret) = continuation_claims(store, continuation)?;
        claims.check(
            &Presenter {
                principal: decider.principal,
                issuers: decider.issuers,
            },
            &secret,
        )?;
        let run = DurableRun::new(store.clone(), claims.run.clone());
        let id = run.checked_id()?;
        let denial =
            denial.map(|reason| crate::call::approval::denial_text(reason, decider.source));
        // Held while the decision is recorded: two processes deciding at once record one, and
        // the continuation is used once.
        let tool = Claim::hold(
            &run.store,
            id,
            self.record_decision(&run, id, &claims, &denial),
        )
        .await?;
        self.publish(|| ToolEvent::DurableDecided {
            run_id: id.to_owned(),
            seq: claims.seq,
            name: tool,
            approved: denial.is_none(),
            reason: denial.clone(),
        });
        Ok(run)
    }

    async fn record_decision(
        &self,
        run: &DurableRun,
        id: &str,
        claims: &Claims,
        denial: &Option<String>,
    ) -> Result<String, JournalError> {
        let record = parked(run, id).await?;
        let entries = run.store.entries(id).await?;
        let named = entries.iter().find(|entry| entry.seq == claims.seq);
        // Decided already: the call left its parked state (this continuation, or another for
        // the same call, was used).
        if named.is_some_and(|entry| !matches!(entry.state, EntryState::Parked { .. })) {
            return Err(ContinuationError::Used {
                run_id: id.to_owned(),
                seq: claims.seq,
            }
            .into());
        }
        let waiting = match &record.status {
            RunStatus::Parked { seq, args, .. } => {
                *seq == claims.seq && args_digest(args) == claims.args
            }
            _ => false,
        };
        let Some(entry) = named.filter(|entry| waiting && args_digest(&entry.args) == claims.args)
        else {
            return Err(ContinuationError::Mismatch {
                run_id: id.to_owned(),
                seq: claims.seq,
            }
            .into());
        };
        // Checked before anything is recorded: a decision this registry cannot act on would
        // leave the run failed for good instead of parked.
        if let Some(problem) = self.unresumable(&record, &entries) {
            return Err(JournalError::Unresumable {
                run_id: id.to_owned(),
                problem,
            });
        }
        let mut entry = entry.clone();
        entry.state = match denial {
            None => EntryState::Approved,
            Some(reason) => EntryState::Finished {
                outcome: CallOutcome::Err {
                    message: reason.clone(),
                    code: Some(ErrorCode::Denied.as_str().to_owned()),
                },
            },
        };
        run.store.put(id, &entry).await?;
        Ok(entry.tool)
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
        let reverts = self.slot::<super::DurableSettings>().reverts.lock().clone();
        let mut entries = run.store.entries(id).await?;
        entries.sort_by_key(|entry| std::cmp::Reverse(entry.seq));
        // A call cut off while it ran may have changed state, unless its tool only reads:
        // still journaled as started, or — once a resume replayed it — as failed with
        // `OUTCOME_UNKNOWN`, which says just that and nothing of whether it happened.
        let cut_off =
            |entry: &JournalEntry| outcome_unknown(&entry.state) && !self.read_only(&entry.tool);
        if let Some(seq) = unknown.iter().find(|seq| {
            !entries
                .iter()
                .any(|entry| entry.seq == **seq && cut_off(entry))
        }) {
            return Err(wrong(
                id,
                &format!("has no call #{seq} whose outcome is unknown"),
            ));
        }
        let revert_of = |entry: &JournalEntry| {
            entry
                .tool
                .strip_prefix("tools.")
                .and_then(|name| reverts.get(name))
                .filter(|revert| self.get(revert, None).is_some())
                .cloned()
        };
        // Refused before anything is reverted: a rollback that leaves a state change in place
        // must not report the run rolled back.
        let unreverted: Vec<String> = entries
            .iter()
            .filter(|entry| {
                let completed = matches!(
                    &entry.state,
                    EntryState::Finished { outcome } if !outcome.is_error()
                ) && !self.read_only(&entry.tool);
                (completed || (cut_off(entry) && unknown.contains(&entry.seq)))
                    && revert_of(entry).is_none()
            })
            .map(|entry| format!("{} (call #{})", entry.tool, entry.seq))
            .collect();
        if !unreverted.is_empty() {
            return Err(JournalError::NoRevert {
                run_id: id.to_owned(),
                calls: unreverted.join(", "),
            });
        }
        let (mut reports, mut failed) = (Vec::new(), false);
        for mut entry in entries {
            let was_unknown = outcome_unknown(&entry.state);
            let (outcome, result) = match &entry.state {
                EntryState::Finished {
                    outcome: outcome @ CallOutcome::Ok { value },
                } => (outcome.clone(), Some(value.clone())),
                _ if cut_off(&entry) => {
                    let outcome = CallOutcome::Err {
                        message: format!(
                            "the outcome of call #{} is unknown: the run was cut off while it ran",
                            entry.seq
                        ),
                        code: Some(super::OUTCOME_UNKNOWN.to_owned()),
                    };
                    if !unknown.contains(&entry.seq) {
                        failed = true;
                        reports.push(RevertReport {
                            seq: entry.seq,
                            tool: entry.tool.clone(),
                            revert: revert_of(&entry).unwrap_or_default(),
                            outcome,
                            outcome_unknown: true,
                        });
                        continue;
                    }
                    (outcome, None)
                }
                _ => continue,
            };
            let Some(revert) = revert_of(&entry) else {
                continue;
            };
            let arguments: Value = serde_json::from_str(&entry.args)
                .map_err(|error| JournalError::Corrupt(error.to_string()))?;
            // Nested under the rollback like a program's call, so code mode lets it through.
            let rollback = format!("rollback-{id}");
            let executed = self
                .execute(
                    ToolCall::new(
                        format!("{rollback}:revert:{}", entry.seq),
                        revert.clone(),
                        match result {
                            Some(value) => json!({"arguments": arguments, "result": value}),
                            None => json!({"arguments": arguments, "outcome_unknown": true}),
                        },
                    )
                    .with_parent(rollback.clone(), rollback),
                )
                .await;
            let reverted = match &executed {
                ToolResult::Success { value, .. } => CallOutcome::Ok {
                    value: value.clone(),
                },
                ToolResult::Failure { error, .. } => CallOutcome::Err {
                    message: error.message.clone(),
                    code: error.info.as_ref().map(|info| info.code.clone()),
                },
            };
            if reverted.is_error() {
                failed = true;
            } else {
                entry.state = EntryState::Reverted {
                    outcome,
                    revert: reverted.clone(),
                };
                run.store.put(id, &entry).await?;
            }
            self.publish(|| ToolEvent::DurableReverted {
                run_id: id.to_owned(),
                seq: entry.seq,
                name: entry.tool.clone(),
                revert: revert.clone(),
                is_error: reverted.is_error(),
            });
            reports.push(RevertReport {
                seq: entry.seq,
                tool: entry.tool.clone(),
                revert,
                outcome: reverted,
                outcome_unknown: was_unknown,
            });
        }
        if !failed {
            run.store.set_status(id, &RunStatus::RolledBack).await?;
        }
        Ok(reports)
    }
}

/// Whether a call in `state` may or may not have happened: journaled as started and never
/// finished, or answered with `OUTCOME_UNKNOWN` (how a resume records such a call).
fn outcome_unknown(state: &EntryState) -> bool {
    match state {
        EntryState::Started => true,
        EntryState::Finished {
            outcome: CallOutcome::Err { code, .. },
        } => code.as_deref() == Some(super::OUTCOME_UNKNOWN),
        _ => false,
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
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use futures::future::BoxFuture;

    use super::super::{ContinuationSecret, JournalStore, RunRecord, SqliteJournal};
    use super::*;

    /// A SQLite journal that counts claims taken and releases finished.
    struct Counted {
        inner: SqliteJournal,
        claims: AtomicUsize,
        releases: AtomicUsize,
    }

    impl JournalStore for Counted {
        fn open_run<'a>(
            &'a self,
            run_id: &'a str,
            program: &'a Value,
        ) -> BoxFuture<'a, Result<RunRecord, JournalError>> {
            self.inner.open_run(run_id, program)
        }
        fn run<'a>(
            &'a self,
            run_id: &'a str,
        ) -> BoxFuture<'a, Result<Option<RunRecord>, JournalError>> {
            self.inner.run(run_id)
        }
        fn runs(&self) -> BoxFuture<'_, Result<Vec<RunRecord>, JournalError>> {
            self.inner.runs()
        }
        fn set_status<'a>(
            &'a self,
            run_id: &'a str,
            status: &'a RunStatus,
        ) -> BoxFuture<'a, Result<(), JournalError>> {
            self.inner.set_status(run_id, status)
        }
        fn entries<'a>(
            &'a self,
            run_id: &'a str,
        ) -> BoxFuture<'a, Result<Vec<JournalEntry>, JournalError>> {
            self.inner.entries(run_id)
        }
        fn put<'a>(
            &'a self,
            run_id: &'a str,
            entry: &'a JournalEntry,
        ) -> BoxFuture<'a, Result<(), JournalError>> {
            self.inner.put(run_id, entry)
        }
        fn continuation_secret(&self) -> Result<ContinuationSecret, JournalError> {
            self.inner.continuation_secret()
        }
        fn claim<'a>(&'a self, run_id: &'a str) -> BoxFuture<'a, Result<u64, JournalError>> {
            Box::pin(async move {
                let claim = self.inner.claim(run_id).await?;
                self.claims.fetch_add(1, Ordering::SeqCst);
                Ok(claim)
            })
        }
        fn release<'a>(
            &'a self,
            run_id: &'a str,
            claim: u64,
        ) -> BoxFuture<'a, Result<(), JournalError>> {
            Box::pin(async move {
                self.inner.release(run_id, claim).await?;
                self.releases.fetch_add(1, Ordering::SeqCst);
                Ok(())
            })
        }
    }

    /// A store holding run `r`, parked at its second call after a completed first one.
    async fn parked_run(dir: &tempfile::TempDir) -> (Arc<Counted>, DurableRun) {
        let store = Arc::new(Counted {
            inner: SqliteJournal::open(dir.path().join("j.db")).unwrap(),
            claims: AtomicUsize::new(0),
            releases: AtomicUsize::new(0),
        });
        let program = json!({"code": "x", LANGUAGE: "typescript"});
        store.open_run("r", &program).await.unwrap();
        let done = JournalEntry {
            seq: 0,
            tool: "tools.append_line".to_owned(),
            args: r#"{"line":"a"}"#.to_owned(),
            state: EntryState::Finished {
                outcome: CallOutcome::Ok { value: json!(1) },
            },
        };
        store.put("r", &done).await.unwrap();
        let waiting = JournalEntry {
            seq: 1,
            args: r#"{"line":"b"}"#.to_owned(),
            state: EntryState::Parked { reason: None },
            ..done
        };
        store.put("r", &waiting).await.unwrap();
        let status = RunStatus::Parked {
            seq: 1,
            tool: waiting.tool.clone(),
            args: waiting.args.clone(),
            reason: None,
        };
        store.set_status("r", &status).await.unwrap();
        let run = DurableRun::new(store.clone() as Arc<dyn JournalStore>, "r");
        (store, run)
    }

    // Checked the moment each refusal returns, with no await between: a claim left to a
    // background release would make the very next approve, deny or rollback (from this
    // process or another) read `Busy`.
    #[tokio::test]
    async fn a_refused_decision_or_rollback_has_released_its_claim_when_it_returns() {
        let dir = tempfile::tempdir().unwrap();
        let (store, run) = parked_run(&dir).await;
        let registry = Registry::new();
        let settled = |refusal: &Result<(), JournalError>| {
            assert_eq!(
                store.releases.load(Ordering::SeqCst),
                store.claims.load(Ordering::SeqCst),
                "a claim is still held after {refusal:?}"
            );
        };
        let continuation = registry.parked_run(&run).await.unwrap().continuation;
        let approved = registry
            .approve_run(run.store.clone(), &continuation)
            .await
            .map(|_| ());
        settled(&approved);
        assert!(
            matches!(&approved, Err(JournalError::Unresumable { .. })),
            "{approved:?}"
        );
        let denied = registry
            .deny_run(run.store.clone(), &continuation, "no")
            .await
            .map(|_| ());
        settled(&denied);
        assert!(
            matches!(&denied, Err(JournalError::Unresumable { .. })),
            "{denied:?}"
        );
        let rolled_back = registry.rollback_run(run.clone()).await.map(|_| ());
        settled(&rolled_back);
        assert!(
            matches!(&rolled_back, Err(JournalError::NoRevert { .. })),
            "{rolled_back:?}"
        );
        assert_eq!(store.claims.load(Ordering::SeqCst), 3);
    }
}
