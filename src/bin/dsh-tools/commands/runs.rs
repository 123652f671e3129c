//! `runs`: the durable runs of a journal (SQLite or Restate) listed, shown, decided, resumed
//! and rolled back.

use std::sync::Arc;

use dsh_tools::durable::{CallOutcome, DurableRun, EntryState, JournalStore, OpenMode, RunStatus};
use dsh_tools::{Mode, Registry};
use serde_json::{Value, json};

use super::{
    RESTATE_SECRET_REPLACED, durable_run, failure_text, open_journal, settle, with_progress,
};
use crate::args::{RunsAction, RunsArgs};
use crate::sources::mount_runtime;
use crate::terminal::{escaped, pretty};
use dsh_tools::prelude::*;

/// `runs list` and `runs show`, which need no tool source and only read the journal; `None`
/// for the other actions.
pub(crate) async fn runs_offline(
    args: &RunsArgs,
    json_output: bool,
) -> Result<Option<String>, String> {
    if args.restate_secret.is_some() {
        return Err(RESTATE_SECRET_REPLACED.to_owned());
    }
    let journal = match (&args.journal, &args.restate) {
        (_, Some(ingress)) => {
            return crate::restate_runs::runs(
                ingress,
                args.restate_admin.as_deref(),
                args.restate_secret_file.as_deref(),
                &args.action,
                json_output,
            )
            .await
            .map(Some);
        }
        (Some(journal), None) => journal,
        (None, None) => return Err("runs: give --journal FILE or --restate INGRESS_URL".to_owned()),
    };
    if !matches!(args.action, RunsAction::List | RunsAction::Show { .. }) {
        // Checked before the tool source is loaded: a mistyped path is not a new journal.
        open_journal(journal, OpenMode::Existing)?;
        return Ok(None);
    }
    let store: Arc<dyn JournalStore> = Arc::new(open_journal(journal, OpenMode::ReadOnly)?);
    match &args.action {
        RunsAction::List => {
            let runs = store.runs().await.map_err(|error| error.to_string())?;
            if json_output {
                return Ok(Some(pretty(
                    &serde_json::to_value(&runs).map_err(|e| e.to_string())?,
                )));
            }
            let lines: Vec<String> = runs
                .iter()
                .map(|run| {
                    let mut line = format!("{} {}", escaped(&run.run_id), status_line(&run.status));
                    if run.status == RunStatus::Running {
                        line.push_str(&format!(
                            " (or cut off: resume it with `dsh-tools <tool source> runs --journal \
                             {} resume {}`)",
                            escaped(&journal.display().to_string()),
                            escaped(&run.run_id)
                        ));
                    }
                    line
                })
                .collect();
            Ok(Some(if lines.is_empty() {
                "no runs".to_owned()
            } else {
                lines.join("\n")
            }))
        }
        RunsAction::Show { id } => {
            let run = store
                .run(id)
                .await
                .map_err(|error| error.to_string())?
                .ok_or_else(|| format!("no run {id:?}"))?;
            let entries = store.entries(id).await.map_err(|error| error.to_string())?;
            if json_output {
                return Ok(Some(pretty(&json!({"run": run, "calls": entries}))));
            }
            let mut out = format!("{} {}\n", escaped(&run.run_id), status_line(&run.status));
            out.push_str(&format!("scope: {}\n", scope_line(&run.program)));
            if let RunStatus::Parked { .. } = &run.status {
                // Issued to the journal's owner (who alone can read its secret) for exactly the
                // waiting call: a later call of the run needs another.
                let parked = Registry::new()
                    .parked_run(&DurableRun::new(store.clone(), id.clone()))
                    .await
                    .map_err(|error| error.to_string())?;
                out.push_str(&format!("continuation: {}\n", parked.continuation));
            }
            if let RunStatus::Finished {
                outcome: CallOutcome::Err { message, code },
            } = &run.status
            {
                out.push_str(&format!(
                    "failure: {}\n",
                    failure_text(message, code.as_deref())
                ));
            }
            for entry in &entries {
                let state = match &entry.state {
                    EntryState::Started => "started (outcome unknown)".to_owned(),
                    EntryState::Finished {
                        outcome: CallOutcome::Err { message, code },
                    } => format!("failed: {}", failure_text(message, code.as_deref())),
                    EntryState::Finished { .. } => "ok".to_owned(),
                    EntryState::Parked { .. } => "parked".to_owned(),
                    EntryState::Approved => "approved".to_owned(),
                    EntryState::Reverted { .. } => "reverted".to_owned(),
                };
                out.push_str(&format!(
                    "#{} {}({}) {state}\n",
                    entry.seq,
                    escaped(&entry.tool),
                    escaped(&entry.args)
                ));
            }
            Ok(Some(out.trim_end().to_owned()))
        }
        _ => Ok(None),
    }
}

/// The agent scope and mode a run's journaled program records (`agent "support" (mode
/// code)`, `the registry (mode both)`): where its calls resolve and where it resumes.
fn scope_line(program: &Value) -> String {
    let Some(scope) = program.get("scope") else {
        return "not recorded (it resumes in any scope)".to_owned();
    };
    let mode = escaped(scope["mode"].as_str().unwrap_or("unknown"));
    match scope["agent"].as_str() {
        Some(agent) => format!("agent \"{}\" (mode {mode})", escaped(agent)),
        None => format!("the registry (mode {mode})"),
    }
}

fn status_line(status: &RunStatus) -> String {
    match status {
        RunStatus::Running => "running".to_owned(),
        RunStatus::Parked {
            seq, tool, reason, ..
        } => format!(
            "parked at call #{seq} {}: {}",
            escaped(tool),
            escaped(reason.as_deref().unwrap_or("approval required"))
        ),
        RunStatus::Finished { outcome } if outcome.is_error() => "failed".to_owned(),
        RunStatus::Finished { .. } => "finished".to_owned(),
        RunStatus::RolledBack => "rolled back".to_owned(),
    }
}

/// A refused approval or denial; a refused continuation says where a valid one comes from.
fn decision_error(error: &dsh_tools::durable::JournalError) -> String {
    match error {
        dsh_tools::durable::JournalError::Continuation(refusal) => format!(
            "{} ({}; `runs show ID` prints the continuation of a parked run)",
            error,
            refusal.code()
        ),
        other => other.to_string(),
    }
}

/// `runs approve|deny|rollback`: over the loaded tools; a resumed run prints as `run` does.
pub(crate) async fn runs(
    registry: &Registry,
    args: &RunsArgs,
    json_output: bool,
) -> Result<String, String> {
    let Some(journal) = &args.journal else {
        return Err("runs: give --journal FILE or --restate INGRESS_URL".to_owned());
    };
    registry.set_mode(Mode::Code);
    let runtime =
        mount_runtime(registry, args.lang, args.runtime, Default::default(), false).await?;
    let run = |id: &str| durable_run(journal, id, OpenMode::Existing);
    let store = || {
        open_journal(journal, OpenMode::Existing)
            .map(|store| Arc::new(store) as Arc<dyn JournalStore>)
    };
    let outcome = match &args.action {
        RunsAction::Approve { id } => match store() {
            Ok(store) => with_progress(registry, registry.approve_run(store, id))
                .await
                .map_err(|error| decision_error(&error))
                .and_then(|result| settle(&result, json_output)),
            Err(error) => Err(error),
        },
        RunsAction::Deny { id, reason } => match store() {
            Ok(store) => with_progress(registry, registry.deny_run(store, id, reason.clone()))
                .await
                .map_err(|error| decision_error(&error))
                .and_then(|result| settle(&result, json_output)),
            Err(error) => Err(error),
        },
        RunsAction::Resume { id } => match run(id) {
            Ok(run) => with_progress(registry, registry.resume_run(run))
                .await
                .map_err(|error| error.to_string())
                .and_then(|result| settle(&result, json_output)),
            Err(error) => Err(error),
        },
        RunsAction::Rollback {
            id,
            revert,
            revert_unknown,
        } => {
            let mut unknown = None;
            for (tool, revert_tool) in revert {
                if registry.get(revert_tool, None).is_none() {
                    unknown = Some(format!(
                        "--revert {tool}={revert_tool}: no tool named {revert_tool:?} is loaded"
                    ));
                }
                registry.set_revert(tool.clone(), revert_tool.clone());
            }
            match unknown.map_or_else(|| run(id), Err) {
                Ok(run) => registry
                    .rollback_run_reverting_unknown(run, revert_unknown)
                    .await
                    .map_err(|error| {
                        let mut message = error.to_string();
                        if matches!(error, dsh_tools::durable::JournalError::NoRevert { .. }) {
                            message.push_str(" (name one with --revert TOOL=REVERT_TOOL)");
                        }
                        message
                    })
                    .and_then(|reverts| {
                        let text = rollback_text(&reverts, json_output);
                        let failed = reverts
                            .iter()
                            .filter(|r| r.outcome.is_error() && !skipped(r))
                            .count();
                        let unknown: Vec<String> = reverts
                            .iter()
                            .filter(|r| skipped(r))
                            .map(|r| format!("#{}", r.seq))
                            .collect();
                        if failed == 0 && unknown.is_empty() {
                            return Ok(text);
                        }
                        // The reports still print: they say which calls stay in place.
                        println!("{text}");
                        let mut problems = Vec::new();
                        if failed > 0 {
                            problems.push(format!(
                                "{failed} revert(s) failed (rolling back again retries them)"
                            ));
                        }
                        if !unknown.is_empty() {
                            problems.push(format!(
                                "call(s) {} were cut off while they ran and may have happened: \
                                 not reverted (--revert-unknown N runs the revert tool for call N)",
                                unknown.join(", ")
                            ));
                        }
                        Err(format!(
                            "rollback incomplete: {}; the run is not rolled back",
                            problems.join("; ")
                        ))
                    }),
                Err(error) => Err(error),
            }
        }
        RunsAction::List | RunsAction::Show { .. } => Err("runs: nothing to do".to_owned()),
    };
    runtime.dispose().await;
    outcome
}

/// A call a rollback left in place because its outcome is unknown and its revert was not asked
/// for.
fn skipped(report: &dsh_tools::durable::RevertReport) -> bool {
    report.outcome_unknown
        && matches!(&report.outcome, CallOutcome::Err { code: Some(code), .. }
            if code == dsh_tools::durable::OUTCOME_UNKNOWN)
}

/// What a rollback prints: each reverted call, or the reports as JSON.
fn rollback_text(reverts: &[dsh_tools::durable::RevertReport], json_output: bool) -> String {
    if json_output {
        return pretty(&serde_json::to_value(reverts).unwrap_or_default());
    }
    let lines: Vec<String> = reverts
        .iter()
        .map(|revert| {
            if skipped(revert) {
                return format!(
                    "#{} {} not reverted: its outcome is unknown (cut off while it ran)",
                    revert.seq, revert.tool
                );
            }
            let how = if revert.outcome.is_error() {
                "failed"
            } else {
                "ok"
            };
            format!(
                "#{} {} reverted by {}: {how}",
                revert.seq, revert.tool, revert.revert
            )
        })
        .collect();
    let reverted = reverts.iter().filter(|r| !r.outcome.is_error()).count();
    format!("{reverted} call(s) reverted\n{}", lines.join("\n"))
        .trim_end()
        .to_owned()
}
