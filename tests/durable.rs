//! Durable `run_code` runs on the SQLite journal: a host killed mid-program resumes with every
//! state change done once, a program that branches on randomness is caught on resume, parked
//! runs are approved, denied and rolled back from another process.
//!
//! The host is `examples/durable_append.rs` (a tool appending lines to a file), started as a
//! child process and SIGKILLed; every wait is on an event (a marker the tool writes before it
//! blocks, a published event), bounded only as a failure bound. One test binary of its own:
//! the park test counts this process's children, so the tests here take one lock each.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use dsh_tools::code::{CodeRuntime, SubprocessConfig, SubprocessRuntime};
use dsh_tools::definition::ToolAnnotations;
use dsh_tools::durable::{
    DurableRun, EntryState, JournalError, JournalStore, RunStatus, SqliteJournal,
};
use dsh_tools::events::ToolEvent;
use dsh_tools::hooks::PreDecision;
use dsh_tools::prelude::*;
use dsh_tools::{Mode, Registry, ToolCall, ToolDefinition, ToolError, ToolExec};
use serde_json::{Value, json};

/// A failure bound only: every wait ends on an event long before it.
const BOUND: Duration = Duration::from_secs(120);

/// One test at a time: children are counted, and CI has two cores.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// The example host, built by Cargo for this test target's features.
fn host() -> PathBuf {
    let mut path = std::env::current_exe().expect("the test's path");
    path.pop();
    if path.ends_with("deps") {
        path.pop();
    }
    path.join("examples").join("durable_append")
}

/// Builds the example once, with the features `cargo test --all-features` builds it with
/// (`--test durable` alone does not build examples).
fn build_host() {
    static BUILT: std::sync::Once = std::sync::Once::new();
    BUILT.call_once(|| {
        let status = Command::new(env!("CARGO"))
            .args(["build", "--example", "durable_append", "--all-features"])
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .status()
            .expect("cargo runs");
        assert!(status.success(), "the example builds");
    });
    assert!(host().exists(), "{} exists", host().display());
}

struct Case {
    dir: tempfile::TempDir,
}

impl Case {
    fn new(program: &str) -> Self {
        build_host();
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("prog.ts"), program).unwrap();
        Case { dir }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn command(&self, run_id: &str, out: &str, extra: &[&str]) -> Command {
        let mut command = Command::new(host());
        command
            .arg(self.path("journal.db"))
            .arg(run_id)
            .arg(self.path("prog.ts"))
            .arg(self.path(out))
            .args(extra)
            .stdin(Stdio::null());
        command
    }

    fn run(&self, run_id: &str, out: &str, extra: &[&str]) -> Output {
        self.command(run_id, out, extra)
            .output()
            .expect("the host runs")
    }

    /// Starts the host, waits for its pause marker, SIGKILLs it.
    fn kill_at_pause(&self, run_id: &str, out: &str, extra: &[&str]) {
        let mut child = self.paused(run_id, out, extra);
        child.kill().expect("SIGKILL");
        child.wait().unwrap();
    }

    /// Starts the host and waits for its pause marker: it is alive, blocked in a call.
    fn paused(&self, run_id: &str, out: &str, extra: &[&str]) -> std::process::Child {
        let mut child = self
            .command(run_id, out, extra)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("the host starts");
        let marker = self.path(out).with_extension("paused");
        let deadline = Instant::now() + BOUND;
        while !marker.exists() {
            if let Some(status) = child.try_wait().unwrap() {
                panic!("the host ended ({status}) before it paused");
            }
            assert!(Instant::now() < deadline, "the host never paused");
            std::thread::sleep(Duration::from_millis(10));
        }
        child
    }

    fn lines(&self, out: &str) -> Vec<String> {
        std::fs::read_to_string(self.path(out))
            .unwrap_or_default()
            .lines()
            .map(str::to_owned)
            .collect()
    }
}

fn stdout(output: &Output) -> Value {
    assert!(
        output.status.success(),
        "the host failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).expect("JSON on stdout")
}

fn expected_lines(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("line-{i}")).collect()
}

const HUNDRED_WITH_CHECKPOINT: &str = r#"
const counts = [];
for (let i = 0; i < 100; i++) {
  if (i === 50) await tools.checkpoint({ label: "mid" });
  counts.push(await tools.append_line({ line: `line-${i}` }));
}
return counts;
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_killed_between_calls_resumes_and_appends_every_line_once() {
    let _serial = SERIAL.lock().await;
    let case = Case::new(HUNDRED_WITH_CHECKPOINT);
    let reference = stdout(&case.run("reference", "reference.txt", &[]));
    assert_eq!(case.lines("reference.txt"), expected_lines(100));

    case.kill_at_pause("killed", "out.txt", &["--pause-at", "mid"]);
    // Killed while the read-only checkpoint ran: the first 50 appends are done, no more.
    assert_eq!(case.lines("out.txt"), expected_lines(50));
    let resumed = stdout(&case.run("killed", "out.txt", &["--pause-at", "mid"]));
    assert_eq!(case.lines("out.txt"), expected_lines(100));
    assert_eq!(
        resumed, reference,
        "the resumed run's result is an uninterrupted run's"
    );
    // A finished run returns its stored result and runs nothing again.
    let again = stdout(&case.run("killed", "out.txt", &[]));
    assert_eq!(again, reference);
    assert_eq!(case.lines("out.txt"), expected_lines(100));
}

const HUNDRED_TOLERATING_UNKNOWN: &str = r#"
const unknown = [];
for (let i = 0; i < 100; i++) {
  try {
    await tools.append_line({ line: `line-${i}` });
  } catch (e) {
    if (e.code !== "OUTCOME_UNKNOWN") throw e;
    unknown.push(i);
  }
}
return unknown;
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_cut_off_reads_outcome_unknown_unless_its_tool_is_idempotent() {
    let _serial = SERIAL.lock().await;
    let case = Case::new(HUNDRED_TOLERATING_UNKNOWN);
    // Not idempotent: the call that was running when the host died is not run again.
    case.kill_at_pause("plain", "plain.txt", &["--pause-in", "line-50"]);
    assert_eq!(case.lines("plain.txt"), expected_lines(51));
    let resumed = stdout(&case.run("plain", "plain.txt", &["--pause-in", "line-50"]));
    assert_eq!(resumed, json!([50]), "call 50 reads OUTCOME_UNKNOWN");
    assert_eq!(case.lines("plain.txt"), expected_lines(100));

    // Idempotent: it runs again (and, being idempotent, appends nothing twice).
    let flags = ["--pause-in", "line-50", "--idempotent"];
    case.kill_at_pause("idem", "idem.txt", &flags);
    let resumed = stdout(&case.run("idem", "idem.txt", &flags));
    assert_eq!(resumed, json!([]), "no call reads OUTCOME_UNKNOWN");
    assert_eq!(case.lines("idem.txt"), expected_lines(100));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_is_made_by_one_process_at_a_time_and_taken_over_when_its_owner_dies() {
    let _serial = SERIAL.lock().await;
    let case = Case::new(HUNDRED_WITH_CHECKPOINT);
    let flags = ["--pause-at", "mid"];
    let mut owner = case.paused("dup1", "out.txt", &flags);
    // The owner lives (blocked in the read-only checkpoint): a second process is refused and
    // makes no call.
    let second = case.run("dup1", "out.txt", &flags);
    assert!(!second.status.success());
    let error = String::from_utf8_lossy(&second.stderr);
    assert!(
        error.contains(&format!(
            "run \"dup1\" is being run by process {}",
            owner.id()
        )),
        "{error}"
    );
    assert_eq!(case.lines("out.txt"), expected_lines(50));
    owner.kill().expect("SIGKILL");
    owner.wait().unwrap();
    // Its owner gone, the run is taken over and finished once.
    stdout(&case.run("dup1", "out.txt", &flags));
    assert_eq!(case.lines("out.txt"), expected_lines(100));
}

const RANDOM_BRANCH: &str = r#"
await tools.append_line({ line: "first" });
const r = Math.random();
await tools.append_line({ line: r < 0.5 ? `heads-${r}` : `tails-${r}` });
await tools.append_line({ line: "gate" });
await tools.append_line({ line: "last" });
return "done";
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_program_branching_on_randomness_is_caught_on_resume() {
    let _serial = SERIAL.lock().await;
    let case = Case::new(RANDOM_BRANCH);
    let parked = case.run("random", "out.txt", &["--ask", "gate"]);
    assert!(!parked.status.success());
    assert!(
        String::from_utf8_lossy(&parked.stderr).contains("RUN_PARKED"),
        "{}",
        String::from_utf8_lossy(&parked.stderr)
    );
    assert_eq!(case.lines("out.txt").len(), 2, "first and the random line");
    let resumed = case.run(
        "random",
        "out.txt",
        &["--ask", "gate", "--decide", "approve"],
    );
    let error = String::from_utf8_lossy(&resumed.stderr);
    assert!(!resumed.status.success());
    assert!(error.contains("replay-diverged"), "{error}");
    assert!(error.contains("call #1 diverged"), "{error}");
    // Nothing after the divergence ran: neither the approved call nor the last one.
    let lines = case.lines("out.txt");
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert_eq!(lines[0], "first");
}

const GATED: &str = r#"
const counts = [];
for (const line of ["a", "b", "c"]) counts.push(await tools.append_line({ line }));
try {
  counts.push(await tools.append_line({ line: "gate" }));
} catch (e) {
  return { denied: e.message, code: e.code, counts };
}
counts.push(await tools.append_line({ line: "d" }));
return { counts };
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deny_gives_the_program_the_reason_and_rollback_reverts_in_reverse_order() {
    let _serial = SERIAL.lock().await;
    let case = Case::new(GATED);
    let ask = ["--ask", "gate"];
    assert!(!case.run("deny", "deny.txt", &ask).status.success());
    let denied = stdout(&case.run(
        "deny",
        "deny.txt",
        &["--ask", "gate", "--decide", "deny:not today"],
    ));
    assert_eq!(
        denied,
        json!({
            "denied": "not today (denied by the run's owner)",
            "code": "DENIED",
            "counts": [1, 2, 3]
        })
    );
    assert_eq!(case.lines("deny.txt"), ["a", "b", "c"]);

    assert!(!case.run("undo", "undo.txt", &ask).status.success());
    assert_eq!(case.lines("undo.txt"), ["a", "b", "c"]);
    let report = stdout(&case.run("undo", "undo.txt", &["--decide", "rollback"]));
    let order: Vec<u64> = report
        .as_array()
        .unwrap()
        .iter()
        .map(|revert| revert["seq"].as_u64().unwrap())
        .collect();
    assert_eq!(order, [2, 1, 0], "newest first");
    assert!(
        report
            .as_array()
            .unwrap()
            .iter()
            .all(|revert| revert["outcome"]["outcome"] == "ok"),
        "{report}"
    );
    assert!(case.lines("undo.txt").is_empty());
    let store = SqliteJournal::open(case.path("journal.db")).unwrap();
    let run = store.run("undo").await.unwrap().unwrap();
    assert_eq!(run.status, RunStatus::RolledBack);
    let reverted = store
        .entries("undo")
        .await
        .unwrap()
        .iter()
        .filter(|entry| matches!(entry.state, EntryState::Reverted { .. }))
        .count();
    assert_eq!(reverted, 3, "each reversal is journaled");
}

/// Processes whose parent is this test process.
fn children() -> Vec<u32> {
    let me = std::process::id();
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        let ppid = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(1))
            .and_then(|p| p.parse::<u32>().ok());
        if ppid == Some(me) {
            found.push(pid);
        }
    }
    found
}

/// The example's `append_line`, in this process.
fn appender(out: &Path) -> ToolDefinition {
    let out = out.to_owned();
    ToolDefinition::builder("append_line")
        .parameters(json!({"type": "object", "properties": {"line": {"type": "string"}}, "required": ["line"]}))
        .handler(move |args: Value, _exec: ToolExec| {
            let out = out.clone();
            async move {
                use std::io::Write;
                let mut file = std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(&out)
                    .map_err(|error| ToolError::new(error.to_string()))?;
                writeln!(file, "{}", args["line"].as_str().unwrap_or_default())
                    .map_err(|error| ToolError::new(error.to_string()))?;
                drop(file);
                let count = std::fs::read_to_string(&out).unwrap_or_default().lines().count();
                Ok(json!(count))
            }
        })
        .build()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_parked_run_holds_no_process_and_another_process_approves_it() {
    let _serial = SERIAL.lock().await;
    let case = Case::new(GATED);
    let reference = stdout(&case.run("reference", "reference.txt", &[]));

    let registry = Registry::new();
    registry.register(appender(&case.path("out.txt"))).unwrap();
    registry.on_pre_execute(|view, next| async move {
        if view.arguments["line"] == "gate" {
            return PreDecision::Ask {
                reason: Some("append the gate?".to_owned()),
            };
        }
        next.run().await
    });
    let runtime = Arc::new(
        SubprocessRuntime::typescript(SubprocessConfig {
            standby: false,
            ..SubprocessConfig::default()
        })
        .await
        .unwrap(),
    );
    registry.set_code_runtime(runtime.clone());
    registry.set_mode(Mode::Code);
    let mut events = registry.subscribe();
    let store: Arc<dyn JournalStore> =
        Arc::new(SqliteJournal::open(case.path("journal.db")).unwrap());
    let program = std::fs::read_to_string(case.path("prog.ts")).unwrap();
    // The example host passes this description too: the run is the same program.
    let call = ToolCall::new(
        "durable",
        "run_code",
        json!({"code": program, "description": "Append lines"}),
    )
    .durable(DurableRun::new(store.clone(), "parked"));
    let result = tokio::time::timeout(BOUND, registry.execute(call))
        .await
        .unwrap();
    let error = result.error().expect("the run parks");
    assert_eq!(
        error.code().map(|code| code.as_str().to_owned()).as_deref(),
        Some("RUN_PARKED")
    );
    assert!(
        error.message.contains("append the gate?"),
        "{}",
        error.message
    );
    let parked = loop {
        match events.try_recv() {
            Ok(ToolEvent::DurableParked { seq, name, .. }) => break (seq, name),
            Ok(_) => {}
            Err(error) => panic!("no park event: {error:?}"),
        }
    };
    assert_eq!(parked, (3, "tools.append_line".to_owned()));
    assert!(
        children().is_empty(),
        "a parked run holds no process: {:?}",
        children()
    );
    assert_eq!(case.lines("out.txt"), ["a", "b", "c"]);
    let status = store.run("parked").await.unwrap().unwrap().status;
    assert!(
        matches!(status, RunStatus::Parked { seq: 3, .. }),
        "{status:?}"
    );
    // A registry without the journal's tools cannot decide: nothing is recorded, the run
    // stays parked.
    let bare = Registry::new();
    bare.set_code_runtime(runtime.clone());
    bare.set_mode(Mode::Code);
    let continuation = bare
        .parked_run(&DurableRun::new(store.clone(), "parked"))
        .await
        .unwrap()
        .continuation;
    let refused = bare.approve_run(store.clone(), &continuation).await;
    assert!(
        matches!(&refused, Err(JournalError::Unresumable { problem, .. }) if problem.contains("tools.append_line")),
        "{refused:?}"
    );
    let refused = bare.deny_run(store.clone(), &continuation, "no").await;
    assert!(
        matches!(refused, Err(JournalError::Unresumable { .. })),
        "{refused:?}"
    );
    let status = store.run("parked").await.unwrap().unwrap().status;
    assert!(
        matches!(status, RunStatus::Parked { seq: 3, .. }),
        "{status:?}"
    );
    runtime.dispose().await;

    // Another process approves: the run resumes there, to the uninterrupted run's result.
    let approved = stdout(&case.run(
        "parked",
        "out.txt",
        &["--ask", "gate", "--decide", "approve"],
    ));
    assert_eq!(approved, reference);
    assert_eq!(case.lines("out.txt"), ["a", "b", "c", "gate", "d"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resumed_run_publishes_its_replayed_calls_on_every_runtime() {
    let _serial = SERIAL.lock().await;
    for python in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("out.txt");
        let registry = Registry::new();
        registry.register(appender(&out)).unwrap();
        let gate = ToolDefinition::builder("gate")
            .annotations({
                let mut hints = ToolAnnotations::default();
                hints.read_only_hint = Some(true);
                hints
            })
            .handler(|_args: Value, _exec: ToolExec| async move { Ok(json!("open")) })
            .build()
            .unwrap();
        registry.register(gate).unwrap();
        registry.on_pre_execute(|view, next| async move {
            if view.name == "gate" {
                return PreDecision::Ask { reason: None };
            }
            next.run().await
        });
        let runtime: Arc<dyn CodeRuntime> = if python {
            Arc::new(
                SubprocessRuntime::python(SubprocessConfig::default())
                    .await
                    .unwrap(),
            )
        } else {
            Arc::new(
                SubprocessRuntime::typescript(SubprocessConfig::default())
                    .await
                    .unwrap(),
            )
        };
        registry.set_code_runtime(runtime.clone());
        registry.set_mode(Mode::Code);
        let program = if python {
            "a = await tools.append_line({'line': 'one'})\nb = await tools.gate({})\nc = await tools.append_line({'line': 'two'})\nreturn [a, b, c]"
        } else {
            "const a = await tools.append_line({line: 'one'});\nconst b = await tools.gate({});\nconst c = await tools.append_line({line: 'two'});\nreturn [a, b, c];"
        };
        let store: Arc<dyn JournalStore> =
            Arc::new(SqliteJournal::open(dir.path().join("journal.db")).unwrap());
        let run = DurableRun::new(store.clone(), "events");
        let call = ToolCall::new(
            "r",
            "run_code",
            json!({"code": program, "description": "Two lines"}),
        )
        .durable(run.clone());
        let parked = tokio::time::timeout(BOUND, registry.execute(call))
            .await
            .unwrap();
        assert!(parked.is_error());
        let mut events = registry.subscribe();
        let continuation = registry.parked_run(&run).await.unwrap().continuation;
        let resumed =
            tokio::time::timeout(BOUND, registry.approve_run(store.clone(), &continuation))
                .await
                .unwrap()
                .unwrap();
        assert_eq!(
            resumed.value().unwrap()["result"],
            json!([1, "open", 2]),
            "{resumed:?}"
        );
        let mut replayed = Vec::new();
        let mut decided = false;
        while let Ok(event) = events.try_recv() {
            match event {
                ToolEvent::DurableReplayed { seq, name, .. } => replayed.push((seq, name)),
                ToolEvent::DurableDecided { approved, .. } => decided = approved,
                _ => {}
            }
        }
        assert!(decided, "the approval is published");
        assert_eq!(
            replayed,
            [(0, "tools.append_line".to_owned())],
            "python: {python}"
        );
        assert_eq!(std::fs::read_to_string(&out).unwrap(), "one\ntwo\n");
        runtime.dispose().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_python_program_branching_on_randomness_diverges() {
    let _serial = SERIAL.lock().await;
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out.txt");
    let registry = Registry::new();
    registry.register(appender(&out)).unwrap();
    registry.on_pre_execute(|view, next| async move {
        if view.arguments["line"] == "gate" {
            return PreDecision::Ask { reason: None };
        }
        next.run().await
    });
    let runtime = Arc::new(
        SubprocessRuntime::python(SubprocessConfig::default())
            .await
            .unwrap(),
    );
    registry.set_code_runtime(runtime.clone());
    registry.set_mode(Mode::Code);
    let program = "import random\nif random.random() < 0.5:\n    await tools.append_line({'line': 'heads'})\nelse:\n    await tools.append_line({'line': 'tails'})\nawait tools.append_line({'line': 'gate'})\nawait tools.append_line({'line': 'after'})";
    let store: Arc<dyn JournalStore> =
        Arc::new(SqliteJournal::open(dir.path().join("j.db")).unwrap());
    // Park, approve; a run that took the other branch on resume diverges at call #0. Either
    // branch is possible each time: resume until one diverges (each try has a 1/2 chance).
    for attempt in 0..64 {
        let run = DurableRun::new(store.clone(), format!("coin-{attempt}"));
        let call = ToolCall::new(
            "r",
            "run_code",
            json!({"code": program, "description": "Coin"}),
        )
        .durable(run.clone());
        let parked = tokio::time::timeout(BOUND, registry.execute(call))
            .await
            .unwrap();
        assert!(parked.is_error(), "{parked:?}");
        let before = std::fs::read_to_string(&out).unwrap();
        let continuation = registry.parked_run(&run).await.unwrap().continuation;
        let resumed =
            tokio::time::timeout(BOUND, registry.approve_run(store.clone(), &continuation))
                .await
                .unwrap()
                .unwrap();
        let message = resumed
            .error()
            .map(|e| e.message.clone())
            .unwrap_or_default();
        if message.contains("replay-diverged") {
            assert!(message.contains("call #0 diverged"), "{message}");
            assert_eq!(
                std::fs::read_to_string(&out).unwrap(),
                before,
                "nothing after the divergence ran"
            );
            runtime.dispose().await;
            return;
        }
        assert!(!resumed.is_error(), "{resumed:?}");
    }
    panic!("64 resumes took the same branch as their first run");
}

#[test]
fn the_replay_page_shows_what_became_of_a_durable_run() {
    use dsh_tools::events::LoggedEvent;
    let events = [
        ToolEvent::DurableReplayed {
            parent: "r".into(),
            run_id: "run-7".into(),
            seq: 0,
            name: "tools.append_line".into(),
            is_error: false,
            outcome_unknown: false,
        },
        ToolEvent::DurableReplayed {
            parent: "r".into(),
            run_id: "run-7".into(),
            seq: 1,
            name: "tools.append_line".into(),
            is_error: true,
            outcome_unknown: true,
        },
        ToolEvent::DurableParked {
            parent: "r".into(),
            run_id: "run-7".into(),
            seq: 2,
            name: "tools.pay".into(),
            reason: Some("pay <100> EUR?".into()),
        },
        ToolEvent::DurableDecided {
            run_id: "run-7".into(),
            seq: 2,
            name: "tools.pay".into(),
            approved: false,
            reason: Some("too much".into()),
        },
        ToolEvent::DurableDiverged {
            parent: "r".into(),
            run_id: "run-7".into(),
            seq: 3,
            message: "call #3 diverged from the journal".into(),
        },
        ToolEvent::DurableReverted {
            run_id: "run-7".into(),
            seq: 0,
            name: "tools.append_line".into(),
            revert: "revert_line".into(),
            is_error: false,
        },
    ]
    .map(LoggedEvent::Tool);
    let page = dsh_tools::presentation::render_html(&events);
    for needle in [
        "durable run run-7: call #0 tools.append_line replayed from the journal: ok",
        "call #1 tools.append_line replayed from the journal: outcome unknown (OUTCOME_UNKNOWN)",
        "parked at call #2 tools.pay for approval: pay &lt;100&gt; EUR?",
        "call #2 tools.pay denied: too much",
        "replay diverged: call #3 diverged from the journal",
        "call #0 tools.append_line reverted by revert_line: ok",
    ] {
        assert!(page.contains(needle), "{needle} missing");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rollback_without_a_revert_tool_is_refused_and_a_runtime_of_another_language_cannot_resume()
{
    let _serial = SERIAL.lock().await;
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out.txt");
    let registry = Registry::new();
    registry.register(appender(&out)).unwrap();
    let runtime = Arc::new(
        SubprocessRuntime::typescript(SubprocessConfig::default())
            .await
            .unwrap(),
    );
    registry.set_code_runtime(runtime.clone());
    registry.set_mode(Mode::Code);
    let store: Arc<dyn JournalStore> =
        Arc::new(SqliteJournal::open(dir.path().join("journal.db")).unwrap());
    let run = DurableRun::new(store.clone(), "failing");
    let program = "await tools.append_line({line: 'a'});\nthrow new Error('after the change');";
    let call = ToolCall::new(
        "r",
        "run_code",
        json!({"code": program, "description": "Fails"}),
    )
    .durable(run.clone());
    let failed = tokio::time::timeout(BOUND, registry.execute(call))
        .await
        .unwrap();
    assert!(failed.is_error());
    assert_eq!(std::fs::read_to_string(&out).unwrap(), "a\n");

    // append_line changes state and has no revert tool: nothing is reverted or marked.
    let refused = registry.rollback_run(run.clone()).await;
    assert!(
        matches!(&refused, Err(JournalError::NoRevert { calls, .. }) if calls == "tools.append_line (call #0)"),
        "{refused:?}"
    );
    let status = store.run("failing").await.unwrap().unwrap().status;
    assert!(matches!(status, RunStatus::Finished { .. }), "{status:?}");
    assert_eq!(std::fs::read_to_string(&out).unwrap(), "a\n");

    // A code runtime of another language cannot resume it.
    let python = Registry::new();
    python.register(appender(&out)).unwrap();
    let py_runtime = Arc::new(
        SubprocessRuntime::python(SubprocessConfig::default())
            .await
            .unwrap(),
    );
    python.set_code_runtime(py_runtime.clone());
    let refused = python.resume_run(run.clone()).await;
    assert!(
        matches!(&refused, Err(JournalError::Unresumable { problem, .. }) if problem.contains("typescript")),
        "{refused:?}"
    );
    py_runtime.dispose().await;

    // A revert that fails leaves its call in place and the run not rolled back; a second
    // rollback retries it.
    let broken = ToolDefinition::builder("broken_revert")
        .handler(|_args: Value, _exec: ToolExec| async {
            Err::<Value, _>(ToolError::new("the disk is read-only"))
        })
        .build()
        .unwrap();
    registry.register(broken).unwrap();
    registry.set_revert("append_line", "broken_revert");
    let reports = registry.rollback_run(run.clone()).await.unwrap();
    assert_eq!(reports.len(), 1);
    assert!(reports[0].outcome.is_error(), "{reports:?}");
    assert_eq!(std::fs::read_to_string(&out).unwrap(), "a\n");
    let status = store.run("failing").await.unwrap().unwrap().status;
    assert!(matches!(status, RunStatus::Finished { .. }), "{status:?}");
    let entries = store.entries("failing").await.unwrap();
    assert!(
        matches!(entries[0].state, EntryState::Finished { .. }),
        "{entries:?}"
    );

    let emptied = out.clone();
    let revert = ToolDefinition::builder("remove_line")
        .handler(move |_args: Value, _exec: ToolExec| {
            let out = emptied.clone();
            async move {
                std::fs::write(&out, "").map_err(|error| ToolError::new(error.to_string()))?;
                Ok(json!(0))
            }
        })
        .build()
        .unwrap();
    registry.register(revert).unwrap();
    registry.set_revert("append_line", "remove_line");
    let reports = registry.rollback_run(run).await.unwrap();
    assert_eq!(reports.len(), 1);
    assert_eq!(std::fs::read_to_string(&out).unwrap(), "");
    let status = store.run("failing").await.unwrap().unwrap().status;
    assert_eq!(status, RunStatus::RolledBack);
    runtime.dispose().await;
}
