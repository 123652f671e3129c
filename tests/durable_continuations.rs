//! Who may decide a parked durable run, in a Rust host: a continuation decides exactly the call
//! it was issued for, once, before it expires, for the principal it was shown to; a run resumes
//! in the agent scope it started in and is refused under another.
//!
//! Programs run on the in-process QuickJS runtime: no child process, nothing to wait for but
//! the calls themselves.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use dsh_tools::code::{EmbeddedConfig, EmbeddedRuntime};
use dsh_tools::durable::{
    CONTINUATION_REFUSED, ContinuationError, DurableRun, JournalError, JournalStore, RunStatus,
    SqliteJournal, runs_command,
};
use dsh_tools::hooks::PreDecision;
use dsh_tools::prelude::*;
use dsh_tools::registry::Filter;
use dsh_tools::{AgentId, Mode, Registry, ToolCall, ToolDefinition, ToolError, ToolExec};
use serde_json::{Value, json};

/// A registry whose `note` tool records its line and asks before every line but `free`, with
/// a `wipe` tool beside it, in code mode on QuickJS.
fn registry(written: &Arc<Mutex<Vec<String>>>) -> Registry {
    let registry = Registry::new();
    let log = written.clone();
    let note = ToolDefinition::builder("note")
        .parameters(json!({
            "type": "object",
            "properties": {"line": {"type": "string"}},
            "required": ["line"],
        }))
        .handler(move |args: Value, _exec: ToolExec| {
            let log = log.clone();
            async move {
                let line = args["line"].as_str().unwrap_or_default().to_owned();
                log.lock().unwrap().push(line.clone());
                Ok::<_, ToolError>(json!(line))
            }
        })
        .build()
        .unwrap();
    registry.register(note).unwrap();
    let log = written.clone();
    let wipe = ToolDefinition::builder("wipe")
        .parameters(json!({"type": "object"}))
        .handler(move |_args: Value, _exec: ToolExec| {
            let log = log.clone();
            async move {
                log.lock().unwrap().push("WIPED".to_owned());
                Ok::<_, ToolError>(json!("wiped"))
            }
        })
        .build()
        .unwrap();
    registry.register(wipe).unwrap();
    registry.on_pre_execute(|view, next| async move {
        if view.name == "note" && view.arguments["line"] != "free" {
            return PreDecision::Ask {
                reason: Some("writes a line".into()),
            };
        }
        next.run().await
    });
    let runtime =
        EmbeddedRuntime::javascript_in_process(EmbeddedConfig::default()).expect("a valid config");
    registry.set_code_runtime(Arc::new(runtime));
    registry.set_mode(Mode::Code);
    registry
}

fn store(dir: &tempfile::TempDir) -> Arc<dyn JournalStore> {
    Arc::new(SqliteJournal::open(dir.path().join("runs.db")).unwrap())
}

const TWO_ASKS: &str = r#"
const a = await tools.note({ line: "first" });
const b = await tools.note({ line: "second" });
return [a, b];
"#;

fn program_call(run: &DurableRun, code: &str) -> ToolCall {
    ToolCall::new(
        "r",
        "run_code",
        json!({"code": code, "description": "Notes"}),
    )
    .durable(run.clone())
}

async fn parked_at(run: &DurableRun) -> u64 {
    match run.store.run(&run.run_id).await.unwrap().unwrap().status {
        RunStatus::Parked { seq, .. } => seq,
        other => panic!("not parked: {other:?}"),
    }
}

fn refusal(result: Result<dsh_tools::ToolResult, JournalError>) -> ContinuationError {
    match result {
        Err(JournalError::Continuation(refusal)) => {
            assert_eq!(refusal.code(), CONTINUATION_REFUSED);
            refusal
        }
        other => panic!("expected a refused continuation, got {other:?}"),
    }
}

#[tokio::test]
async fn a_continuation_decides_only_its_call_once() {
    let dir = tempfile::tempdir().unwrap();
    let written = Arc::new(Mutex::new(Vec::new()));
    let registry = registry(&written);
    let store = store(&dir);
    let run = DurableRun::new(store.clone(), "notes");
    let parked = registry.execute(program_call(&run, TWO_ASKS)).await;
    assert_eq!(
        parked.error_code().map(|code| code.as_str().to_owned()),
        Some("RUN_PARKED".to_owned())
    );
    let first = registry.parked_run(&run).await.unwrap();
    assert_eq!(
        (first.seq, first.tool.as_str()),
        (0, "tools.note"),
        "{first:?}"
    );
    assert_eq!(first.arguments, json!({"line": "first"}));
    // The parked result, which the model reads, carries no continuation.
    assert!(
        !parked
            .error()
            .unwrap()
            .message
            .contains(&first.continuation)
    );

    // A made-up or altered continuation decides nothing.
    let mut altered = first.continuation.clone();
    let last = altered.pop().unwrap();
    altered.push(if last == 'A' { 'B' } else { 'A' });
    for forged in [altered.as_str(), "run:notes", "dshc1.e30.AAAA"] {
        let refused = refusal(registry.approve_run(store.clone(), forged).await);
        assert_eq!(refused, ContinuationError::Forged, "{forged}");
    }
    // Another journal's secret signed it: forged here.
    let other_dir = tempfile::tempdir().unwrap();
    let elsewhere = self::store(&other_dir);
    let refused = refusal(
        registry
            .approve_run(elsewhere.clone(), &first.continuation)
            .await,
    );
    assert_eq!(refused, ContinuationError::Forged);
    assert_eq!(parked_at(&run).await, 0);
    assert!(written.lock().unwrap().is_empty());

    // The approval runs call #0; the run parks again at #1.
    let again = registry
        .approve_run(store.clone(), &first.continuation)
        .await
        .unwrap();
    assert!(again.is_error(), "{again:?}");
    assert_eq!(*written.lock().unwrap(), ["first"]);
    assert_eq!(parked_at(&run).await, 1);

    // The same approval sent twice (a retry) is used: it never approves call #1.
    let refused = refusal(
        registry
            .approve_run(store.clone(), &first.continuation)
            .await,
    );
    assert!(
        matches!(refused, ContinuationError::Used { seq: 0, .. }),
        "{refused:?}"
    );
    let refused = refusal(
        registry
            .deny_run(store.clone(), &first.continuation, "no")
            .await,
    );
    assert!(matches!(refused, ContinuationError::Used { .. }));
    assert_eq!(parked_at(&run).await, 1);
    assert_eq!(*written.lock().unwrap(), ["first"]);

    // Call #1 needs its own continuation; a denial reads DENIED, naming its source.
    let second = registry.parked_run(&run).await.unwrap();
    assert_eq!(second.arguments, json!({"line": "second"}));
    let done = registry
        .deny_run(store.clone(), &second.continuation, "not today")
        .await
        .unwrap();
    let error = done.error().expect("the program rethrows the denial");
    assert!(
        error
            .message
            .contains("not today (denied by the run's owner)"),
        "{}",
        error.message
    );
    assert_eq!(*written.lock().unwrap(), ["first"]);
}

#[tokio::test]
async fn an_expired_continuation_is_refused_and_the_run_stays_parked() {
    let dir = tempfile::tempdir().unwrap();
    let written = Arc::new(Mutex::new(Vec::new()));
    let registry = registry(&written);
    let store = store(&dir);
    let run = DurableRun::new(store.clone(), "late");
    registry.execute(program_call(&run, TWO_ASKS)).await;
    // Issued already expired: no clock is raced.
    registry.set_continuation_ttl(Duration::ZERO);
    let late = registry.parked_run(&run).await.unwrap();
    let refused = refusal(
        registry
            .approve_run(store.clone(), &late.continuation)
            .await,
    );
    assert!(
        matches!(refused, ContinuationError::Expired { .. }),
        "{refused:?}"
    );
    assert_eq!(parked_at(&run).await, 0);
    assert!(written.lock().unwrap().is_empty());
    // A fresh one decides it.
    registry.set_continuation_ttl(Duration::from_secs(60));
    let fresh = registry.parked_run(&run).await.unwrap();
    registry
        .approve_run(store.clone(), &fresh.continuation)
        .await
        .unwrap();
    assert_eq!(*written.lock().unwrap(), ["first"]);
}

const SCOPED: &str = r#"
await tools.note({ line: "gate" });
try {
  await tools.wipe({});
  return "wiped";
} catch (error) {
  return "hidden: " + String(error);
}
"#;

#[tokio::test]
async fn a_run_resumes_in_the_scope_it_started_in_and_nowhere_else() {
    let dir = tempfile::tempdir().unwrap();
    let written = Arc::new(Mutex::new(Vec::new()));
    let registry = registry(&written);
    let support = registry.agent("support");
    support.restrict(Filter::deny(["wipe"])).unwrap();
    registry.agent("ops");
    let store = store(&dir);
    let run = DurableRun::new(store.clone(), "scoped");
    let call = program_call(&run, SCOPED).with_agent(AgentId::new("support"));
    let parked = registry.execute(call).await;
    assert!(parked.is_error(), "{parked:?}");
    // `runs show` names the scope it will resume in.
    let args = ["show".to_owned(), "scoped".to_owned()];
    let shown = runs_command(&registry, store.clone(), &args).await.unwrap();
    assert!(
        shown
            .lines()
            .any(|line| line == r#"scope: agent "support" (mode code)"#),
        "{shown}"
    );

    // Approved from the registry (no agent on the approval): the run goes on in "support",
    // where `wipe` stays hidden.
    let continuation = registry.parked_run(&run).await.unwrap().continuation;
    let done = registry
        .approve_run(store.clone(), &continuation)
        .await
        .unwrap();
    let result = done.value().expect("the run ends")["result"].clone();
    assert!(
        result
            .as_str()
            .is_some_and(|text| text.starts_with("hidden:")),
        "{result}"
    );
    assert_eq!(*written.lock().unwrap(), ["gate"]);

    // Run again under another scope (or none): refused by name, nothing runs.
    for agent in [Some("ops"), None] {
        let mut call = program_call(&run, SCOPED);
        if let Some(agent) = agent {
            call = call.with_agent(AgentId::new(agent));
        }
        let refused = registry.execute(call).await;
        let message = &refused.error().expect("refused").message;
        assert!(
            message.contains("was started in scope agent \"support\" (mode code)"),
            "{message}"
        );
    }
    assert_eq!(*written.lock().unwrap(), ["gate"]);
}

/// A run parked in code mode is decided by a registry in `both` mode (a command line or another
/// host that offers native calls too): the decision is taken and the run resumes, the
/// continuation is not spent on a refusal.
#[tokio::test]
async fn a_run_parked_in_code_mode_resumes_from_a_registry_in_both_mode() {
    let dir = tempfile::tempdir().unwrap();
    let written = Arc::new(Mutex::new(Vec::new()));
    let registry = registry(&written);
    let store = store(&dir);
    let run = DurableRun::new(store.clone(), "modes");
    registry.execute(program_call(&run, TWO_ASKS)).await;
    assert_eq!(parked_at(&run).await, 0);

    registry.set_mode(Mode::Both);
    let continuation = registry.parked_run(&run).await.unwrap().continuation;
    let resumed = registry
        .approve_run(store.clone(), &continuation)
        .await
        .unwrap();
    // It went on to the second ask: the first call ran, the run is parked again at #1.
    assert!(resumed.is_error(), "{resumed:?}");
    assert_eq!(*written.lock().unwrap(), ["first"]);
    assert_eq!(parked_at(&run).await, 1);
}

/// `runs_command`: a host's own command line shows, approves, denies and resumes its runs.
#[tokio::test]
async fn a_host_decides_its_runs_from_its_own_command_line() {
    let dir = tempfile::tempdir().unwrap();
    let written = Arc::new(Mutex::new(Vec::new()));
    let registry = registry(&written);
    let store = store(&dir);
    let run = DurableRun::new(store.clone(), "cli-run");
    registry.execute(program_call(&run, TWO_ASKS)).await;
    let command = |words: &[&str]| {
        let args: Vec<String> = words.iter().map(|word| (*word).to_owned()).collect();
        let (registry, store) = (registry.clone(), store.clone());
        async move { runs_command(&registry, store, &args).await }
    };
    let continuation_of = |shown: &str| {
        shown
            .lines()
            .find_map(|line| line.strip_prefix("continuation: "))
            .unwrap_or_else(|| panic!("no continuation in {shown}"))
            .to_owned()
    };
    let shown = command(&["show", "cli-run"]).await.unwrap();
    assert!(
        shown.starts_with(
            r#""cli-run" parked at call #0 tools.note({"line":"first"}): writes a line"#
        ),
        "{shown}"
    );
    let first = continuation_of(&shown);
    let parked_again = command(&["approve", &first]).await.unwrap();
    assert!(parked_again.starts_with("RUN_PARKED: "), "{parked_again}");
    let replayed = command(&["approve", &first]).await.unwrap_err();
    assert!(
        replayed.starts_with("CONTINUATION_REFUSED: ") && replayed.contains("used already"),
        "{replayed}"
    );
    let second = continuation_of(&command(&["show", "cli-run"]).await.unwrap());
    let denied = command(&["deny", &second, "no"]).await.unwrap();
    assert!(
        denied.contains("no (denied by the run's owner)"),
        "{denied}"
    );
    assert_eq!(*written.lock().unwrap(), ["first"]);
    // Ended: resuming returns its stored result again; nothing runs.
    assert_eq!(command(&["resume", "cli-run"]).await.unwrap(), denied);
    assert_eq!(
        command(&["show", "cli-run"]).await.unwrap(),
        "\"cli-run\" failed\nscope: the registry (mode code)"
    );
    assert!(
        command(&["approve"])
            .await
            .unwrap_err()
            .contains("expected show ID")
    );
}

/// The host's approver decides a durable run's `Ask` as it decides any other: its yes runs the
/// call and its no denies it, neither parks the run; only "unavailable" parks it, for the
/// run's owner to decide.
#[tokio::test]
async fn the_hosts_approver_decides_a_durable_runs_ask_before_anything_parks() {
    use dsh_tools::hooks::ApprovalOutcome;

    let dir = tempfile::tempdir().unwrap();
    let written = Arc::new(Mutex::new(Vec::new()));
    let registry = registry(&written);
    let asked = Arc::new(Mutex::new(Vec::new()));
    let seen = asked.clone();
    registry.set_approver(move |request| {
        let line = request.arguments["line"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        seen.lock().unwrap().push(line.clone());
        async move {
            match line.as_str() {
                "first" => ApprovalOutcome::AllowedOnce,
                "second" => ApprovalOutcome::Rejected,
                _ => ApprovalOutcome::Unavailable,
            }
        }
    });
    let store = store(&dir);

    let run = DurableRun::new(store.clone(), "decided");
    let program = r#"
const a = await tools.note({ line: "first" });
let b;
try { b = await tools.note({ line: "second" }); } catch (e) { b = e.code + ": " + e.message; }
return [a, b];
"#;
    let result = registry.execute(program_call(&run, program)).await;
    assert!(result.error().is_none(), "{result:?}");
    let value = result.value().expect("the run ends")["result"].clone();
    assert_eq!(value[0], "first", "{value}");
    let denial = value[1].as_str().unwrap_or_default();
    assert!(
        denial.starts_with("DENIED") && denial.contains("(denied by the approver)"),
        "{denial}"
    );
    assert_eq!(*written.lock().unwrap(), ["first"]);
    assert!(
        matches!(
            store.run("decided").await.unwrap().unwrap().status,
            RunStatus::Finished { .. }
        ),
        "nothing parked"
    );

    // An approver that cannot decide now parks the run; the owner's continuation decides it,
    // and the resumed run asks the approver again before it uses the owner's approval.
    let later = DurableRun::new(store.clone(), "later");
    let parked = registry
        .execute(program_call(
            &later,
            r#"return await tools.note({ line: "third" });"#,
        ))
        .await;
    assert_eq!(
        parked.error_code().map(|code| code.as_str().to_owned()),
        Some("RUN_PARKED".to_owned())
    );
    let waiting = registry.parked_run(&later).await.unwrap();
    let resumed = registry
        .approve_run(store.clone(), &waiting.continuation)
        .await
        .unwrap();
    assert!(resumed.error().is_none(), "{resumed:?}");
    assert_eq!(*written.lock().unwrap(), ["first", "third"]);
    assert_eq!(
        *asked.lock().unwrap(),
        ["first", "second", "third", "third"]
    );
}
