//! Rollback of a run that was cut off while a call ran and then resumed: the resume answers
//! that call with `OUTCOME_UNKNOWN` (its effect may have happened), and a rollback afterwards
//! must still report it by call number and leave the run not rolled back, as it does before
//! the resume. (`rollback_run` on the cut-off run itself is refused: "resume it" first.)
//! The host that dies mid-call is this test binary, run again as a child.
#![cfg(feature = "durable")]

use std::sync::Arc;

use dsh_tools::code::{SubprocessConfig, SubprocessRuntime};
use dsh_tools::durable::{DurableRun, JournalStore, RunStatus, SqliteJournal};
use dsh_tools::prelude::*;
use dsh_tools::serde_json::{Value, json};
use dsh_tools::{Mode, Registry, ToolCall, ToolError, tool};

/// Appends a line; the line "crash" kills the process while the call runs.
#[tool]
async fn append_line(line: String) -> Result<String, ToolError> {
    if line == "crash" {
        std::process::abort();
    }
    Ok(format!("appended {line}"))
}

/// Removes a line (the revert of `append_line`); without a result when the call's outcome is
/// unknown.
#[tool]
async fn remove_line(
    arguments: Value,
    result: Option<Value>,
    outcome_unknown: Option<bool>,
) -> Result<String, ToolError> {
    Ok(format!(
        "removed {arguments} {result:?} {outcome_unknown:?}"
    ))
}

async fn host(journal: &str) -> (Registry, Arc<dyn JournalStore>) {
    let registry = Registry::new();
    registry.register(AppendLineTool).unwrap();
    registry.register(RemoveLineTool).unwrap();
    let runtime = SubprocessRuntime::typescript(SubprocessConfig::default())
        .await
        .unwrap();
    registry.set_code_runtime(Arc::new(runtime));
    registry.set_mode(Mode::Code);
    registry.set_revert("append_line", "remove_line");
    (registry, Arc::new(SqliteJournal::open(journal).unwrap()))
}

const PROGRAM: &str =
    "await tools.append_line({line: 'a'}); await tools.append_line({line: 'crash'}); return 1";

/// The host that dies in the middle of call #1 (run as a child by the test below).
#[tokio::test]
#[ignore = "the child host of rollback_reports_a_cut_off_call_after_a_resume"]
async fn crashing_host() {
    let Ok(journal) = std::env::var("DSH_ROLLBACK_JOURNAL") else {
        return;
    };
    let (registry, store) = host(&journal).await;
    let call = ToolCall::new(
        "c1",
        "run_code",
        json!({"code": PROGRAM, "description": "d"}),
    )
    .durable(DurableRun::new(store, "cut-off"));
    registry.execute(call).await;
}

#[tokio::test]
async fn rollback_reports_a_cut_off_call_after_a_resume() {
    let dir = tempfile::tempdir().unwrap();
    let journal = dir.path().join("runs.db").to_str().unwrap().to_owned();
    let status = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--ignored", "--exact", "crashing_host", "--nocapture"])
        .env("DSH_ROLLBACK_JOURNAL", &journal)
        .status()
        .unwrap();
    assert!(!status.success(), "the host died mid-call");

    let (registry, store) = host(&journal).await;
    let run = DurableRun::new(store.clone(), "cut-off");
    let resumed = registry.resume_run(run.clone()).await.unwrap();
    assert!(resumed.text().contains("OUTCOME_UNKNOWN") || resumed.text().contains("unknown"));
    let reports = registry.rollback_run(run.clone()).await.unwrap();
    let status = store.runs().await.unwrap()[0].status.clone();
    assert!(
        reports
            .iter()
            .any(|r| r.seq == 1 && r.outcome_unknown && r.outcome.is_error()),
        "call #1 may have happened and is not reported: {reports:?}"
    );
    assert!(
        reports
            .iter()
            .any(|r| r.seq == 0 && !r.outcome_unknown && !r.outcome.is_error()),
        "call #0 is reverted: {reports:?}"
    );
    assert!(
        !matches!(status, RunStatus::RolledBack),
        "call #1 may have happened, yet the run is {status:?}"
    );

    // Whoever rolls back may decide its revert is safe either way: then the run is rolled back.
    let reports = registry
        .rollback_run_reverting_unknown(run, &[1])
        .await
        .unwrap();
    assert!(
        reports
            .iter()
            .any(|r| r.seq == 1 && r.outcome_unknown && !r.outcome.is_error()),
        "{reports:?}"
    );
    let status = store.runs().await.unwrap()[0].status.clone();
    assert!(matches!(status, RunStatus::RolledBack), "{status:?}");
}
