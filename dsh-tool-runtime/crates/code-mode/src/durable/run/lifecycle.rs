//! A durable `run_code` call from start to end: the run opened (or resumed) and replayed, its
//! scope checked, and how it ended recorded.

use std::collections::HashSet;
use std::sync::Arc;

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::call::ToolExec;
use crate::code_runtime::FailureKind;
use crate::durable::{
    CallOutcome, Claim, DurableRun, EntryState, JournalEntry, JournalError, RUN_PARKED, Replay,
    RunStatus,
};
use crate::error::{ErrorCode, ToolError};
use crate::events::ToolEvent;
use crate::registry::{Registry, read};
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
pub(super) const LANGUAGE: &str = "language";

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
        crate::durable::replay::ToolKinds {
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
pub(super) const SCOPE: &str = "scope";

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
