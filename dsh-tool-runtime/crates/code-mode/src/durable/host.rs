//! The decisions about durable runs a host makes from its own command line, over its own
//! tools: what `dsh-tools runs` does for the tools it loads, for a registry of any host.

use std::sync::Arc;

use super::{DurableRun, JournalStore, RunStatus};
use crate::durable::run::DurableExt;
use crate::registry::Registry;
use crate::result::ToolResult;

/// What `dsh-tools runs --journal FILE ACTION` does, over `registry` (a host's own tools and code
/// runtime) and the journal `store`; `args` is the action and its operands:
///
/// - `show ID`: the run's status, then on a line `scope: …` the agent scope and mode it runs
///   in (`agent "support" (mode code)`, `the registry (mode both)`); for a parked run the waiting call (tool, arguments, reason) and,
///   on a line `continuation: …`, the continuation that decides exactly that call;
/// - `approve CONTINUATION`, `deny CONTINUATION REASON`: decide the call and resume the run here
///   ([`crate::DurableExt::approve_run`], [`crate::DurableExt::deny_run`]);
/// - `resume ID`: run a run cut off by a crash again ([`crate::DurableExt::resume_run`]).
///
/// Returns what to print: a status, or the resumed `run_code` output as JSON (parked again, the
/// new waiting call). A host passes what follows its own `runs` word:
///
/// ```no_run
/// # #[cfg(feature = "durable")] // `SqliteJournal` is the `durable` feature's.
/// # async fn host(registry: dsh_tool_runtime::Registry) -> Result<(), String> {
/// use std::sync::Arc;
/// use dsh_tool_code_mode::durable::{SqliteJournal, runs_command};
/// let store = Arc::new(SqliteJournal::open("runs.db").map_err(|e| e.to_string())?);
/// let args: Vec<String> = std::env::args().skip(2).collect(); // e.g. `host runs approve dshc1.…`
/// println!("{}", runs_command(&registry, store, &args).await?);
/// # Ok(())
/// # }
/// ```
///
/// # Errors
/// One line: an unknown action or missing operand, and every refusal of the journal
/// ([`JournalError`](super::JournalError)'s text; a refused continuation starts with its code,
/// `CONTINUATION_REFUSED`).
pub async fn runs_command(
    registry: &Registry,
    store: Arc<dyn JournalStore>,
    args: &[String],
) -> Result<String, String> {
    let refused = |error: super::JournalError| match &error {
        super::JournalError::Continuation(refusal) => format!("{}: {error}", refusal.code()),
        _ => error.to_string(),
    };
    let run = |id: &String| DurableRun::new(store.clone(), id.clone());
    match args {
        [action, id] if action == "show" => show(registry, &run(id)).await.map_err(refused),
        [action, continuation] if action == "approve" => registry
            .approve_run(store.clone(), continuation)
            .await
            .map(|result| outcome(&result))
            .map_err(refused),
        [action, continuation, reason] if action == "deny" => registry
            .deny_run(store.clone(), continuation, reason.clone())
            .await
            .map(|result| outcome(&result))
            .map_err(refused),
        [action, id] if action == "resume" => registry
            .resume_run(run(id))
            .await
            .map(|result| outcome(&result))
            .map_err(refused),
        _ => Err(
            "runs: expected show ID, approve CONTINUATION, deny CONTINUATION REASON or resume ID"
                .to_owned(),
        ),
    }
}

/// `show ID`.
async fn show(registry: &Registry, run: &DurableRun) -> Result<String, super::JournalError> {
    let id = run.checked_id()?;
    let record = run
        .store
        .run(id)
        .await?
        .ok_or_else(|| super::JournalError::UnknownRun(id.to_owned()))?;
    let scope = super::run::program_scope_text(&record.program);
    Ok(match record.status {
        RunStatus::Parked { .. } => {
            let parked = registry.parked_run(run).await?;
            format!(
                "{id:?} parked at call #{} {}({}): {}\nscope: {scope}\ncontinuation: {}",
                parked.seq,
                parked.tool,
                parked.arguments,
                parked.reason.as_deref().unwrap_or("approval required"),
                parked.continuation
            )
        }
        RunStatus::Running => format!("{id:?} running (or cut off: resume it)\nscope: {scope}"),
        RunStatus::Finished { outcome } if outcome.is_error() => {
            format!("{id:?} failed\nscope: {scope}")
        }
        RunStatus::Finished { .. } => format!("{id:?} finished\nscope: {scope}"),
        RunStatus::RolledBack => format!("{id:?} rolled back\nscope: {scope}"),
    })
}

/// A resumed run's `run_code` result as printed: its output as JSON, or `CODE: message`.
fn outcome(result: &ToolResult) -> String {
    match result {
        ToolResult::Success { value, .. } => value.to_string(),
        ToolResult::Failure { error, .. } => match &error.info {
            Some(info) => format!("{}: {}", info.code, error.message),
            None => error.message.clone(),
        },
    }
}
