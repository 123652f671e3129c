//! Rolling a run back: its completed calls reverted in reverse order with each tool's revert
//! tool, each reversal journaled, calls of unknown outcome reported unless asked for.

use serde_json::{Value, json};

use super::{DurableExt, wrong};
use crate::call::ToolCall;
use crate::durable::{
    CallOutcome, DurableRun, EntryState, JournalEntry, JournalError, RevertReport, RunStatus,
};
use crate::events::ToolEvent;
use crate::registry::Registry;
use crate::result::ToolResult;

pub(super) async fn revert_calls(
    registry: &Registry,
    run: &DurableRun,
    id: &str,
    unknown: &[u64],
) -> Result<Vec<RevertReport>, JournalError> {
    let reverts = registry
        .slot::<crate::durable::DurableSettings>()
        .reverts
        .lock()
        .clone();
    let mut entries = run.store.entries(id).await?;
    entries.sort_by_key(|entry| std::cmp::Reverse(entry.seq));
    // A call cut off while it ran may have changed state, unless its tool only reads:
    // still journaled as started, or — once a resume replayed it — as failed with
    // `OUTCOME_UNKNOWN`, which says just that and nothing of whether it happened.
    let cut_off =
        |entry: &JournalEntry| outcome_unknown(&entry.state) && !registry.read_only(&entry.tool);
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
            .filter(|revert| registry.get(revert, None).is_some())
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
            ) && !registry.read_only(&entry.tool);
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
                    code: Some(crate::durable::OUTCOME_UNKNOWN.to_owned()),
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
        let executed = registry
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
        registry.publish(|| ToolEvent::DurableReverted {
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

/// Whether a call in `state` may or may not have happened: journaled as started and never
/// finished, or answered with `OUTCOME_UNKNOWN` (how a resume records such a call).
fn outcome_unknown(state: &EntryState) -> bool {
    match state {
        EntryState::Started => true,
        EntryState::Finished {
            outcome: CallOutcome::Err { code, .. },
        } => code.as_deref() == Some(crate::durable::OUTCOME_UNKNOWN),
        _ => false,
    }
}
