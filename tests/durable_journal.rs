//! The SQLite journal as a trust boundary: its files are private and bounded, a file another
//! connection holds locked stalls nothing but the journaled calls (which fail as busy), and a
//! rollback never reports a run rolled back while a call cut off mid-way may have happened.
//!
//! Programs run on QuickJS in this process. Every wait is on an event (a claim entered, a call
//! answered), bounded only as a failure bound.

// The test calls libc directly (`umask` around a file's creation), with a SAFETY note at each block.
#![allow(unsafe_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Arc;
use std::time::Duration;

use dsh_tools::code::{CodeRuntime, EmbeddedConfig, EmbeddedRuntime};
use dsh_tools::definition::ToolAnnotations;
use dsh_tools::durable::{
    CallOutcome, DurableRun, EntryState, JOURNAL_BUSY, JournalEntry, JournalError, JournalStore,
    OUTCOME_UNKNOWN, RunRecord, RunStatus, SqliteJournal,
};
use dsh_tools::prelude::*;
use dsh_tools::{Mode, Registry, ToolCall, ToolDefinition, ToolError, ToolExec, ToolResult};
use futures::future::BoxFuture;
use serde_json::{Value, json};

/// A failure bound only: every wait ends on an event long before it.
const BOUND: Duration = Duration::from_secs(120);

/// A registry in code mode on QuickJS with `echo` (returns `n`), `fail` (fails, whatever its
/// arguments), `big` (returns `size` bytes of text) and `peek` (returns `n`; read-only).
fn registry() -> Registry {
    let registry = Registry::new();
    let echo = ToolDefinition::builder("echo")
        .handler(|args: Value, _exec: ToolExec| async move { Ok(args["n"].clone()) })
        .build()
        .unwrap();
    let fail = ToolDefinition::builder("fail")
        .handler(|_args: Value, _exec: ToolExec| async {
            Err::<Value, _>(ToolError::new("refused"))
        })
        .build()
        .unwrap();
    let big = ToolDefinition::builder("big")
        .handler(|args: Value, _exec: ToolExec| async move {
            let size = usize::try_from(args["size"].as_u64().unwrap_or(0)).unwrap();
            Ok(Value::from("x".repeat(size)))
        })
        .build()
        .unwrap();
    let peek = ToolDefinition::builder("peek")
        .annotations({
            let mut hints = ToolAnnotations::default();
            hints.read_only_hint = Some(true);
            hints
        })
        .handler(|args: Value, _exec: ToolExec| async move { Ok(args["n"].clone()) })
        .build()
        .unwrap();
    for tool in [echo, fail, big, peek] {
        registry.register(tool).unwrap();
    }
    let runtime: Arc<dyn CodeRuntime> =
        Arc::new(EmbeddedRuntime::javascript_in_process(EmbeddedConfig::default()).unwrap());
    registry.set_code_runtime(runtime);
    registry.set_mode(Mode::Code);
    registry
}

fn program(code: &str) -> ToolCall {
    ToolCall::new(
        "run",
        "run_code",
        json!({"code": code, "description": "A durable run"}),
    )
}

fn code_of(result: &ToolResult) -> Option<String> {
    result
        .error()
        .and_then(|error| error.info.as_ref())
        .map(|info| info.code.clone())
}

/// The size of the journal's file and its write-ahead log together.
fn on_disk(path: &Path) -> u64 {
    [path.to_owned(), sibling(path, "-wal")]
        .iter()
        .map(|file| std::fs::metadata(file).map_or(0, |meta| meta.len()))
        .sum()
}

fn sibling(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(suffix);
    PathBuf::from(name)
}

fn mode(path: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

/// Run `run_id` in `store`, failed, with a completed call #0 and call #1 cut off while it ran.
async fn cut_off(store: &dyn JournalStore, run_id: &str, tool: &str) {
    store
        .open_run(run_id, &json!({"code": "x", "language": "typescript"}))
        .await
        .unwrap();
    let done = JournalEntry {
        seq: 0,
        tool: tool.to_owned(),
        args: r#"{"line":"a"}"#.to_owned(),
        state: EntryState::Finished {
            outcome: CallOutcome::Ok { value: json!(1) },
        },
    };
    store.put(run_id, &done).await.unwrap();
    let started = JournalEntry {
        seq: 1,
        args: r#"{"line":"b"}"#.to_owned(),
        state: EntryState::Started,
        ..done
    };
    store.put(run_id, &started).await.unwrap();
    let failed = RunStatus::Finished {
        outcome: CallOutcome::Err {
            message: "the host stopped".to_owned(),
            code: None,
        },
    };
    store.set_status(run_id, &failed).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_cut_off_before_a_rollback_is_not_reverted_unless_its_revert_is_run_for_it() {
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn JournalStore> =
        Arc::new(SqliteJournal::open(dir.path().join("j.db")).unwrap());
    cut_off(store.as_ref(), "cut", "tools.append_line").await;
    let registry = Registry::new();
    let seen = Arc::new(std::sync::Mutex::new(Vec::<Value>::new()));
    for name in ["append_line", "remove_line"] {
        let seen = seen.clone();
        let tool = ToolDefinition::builder(name)
            .handler(move |args: Value, _exec: ToolExec| {
                seen.lock().unwrap().push(args);
                async { Ok(json!(0)) }
            })
            .build()
            .unwrap();
        registry.register(tool).unwrap();
    }
    registry.set_revert("append_line", "remove_line");
    let run = DurableRun::new(store.clone(), "cut");

    // Call #0 is reverted; call #1 may have happened and is reported, not reverted.
    let reports = registry.rollback_run(run.clone()).await.unwrap();
    assert_eq!(reports.len(), 2, "{reports:?}");
    assert_eq!((reports[0].seq, reports[0].outcome_unknown), (1, true));
    assert!(
        matches!(&reports[0].outcome, CallOutcome::Err { code: Some(code), .. } if code == OUTCOME_UNKNOWN),
        "{reports:?}"
    );
    assert_eq!((reports[1].seq, reports[1].outcome.is_error()), (0, false));
    assert_eq!(seen.lock().unwrap().len(), 1, "one revert ran");
    let status = store.run("cut").await.unwrap().unwrap().status;
    assert!(matches!(status, RunStatus::Finished { .. }), "{status:?}");
    let entries = store.entries("cut").await.unwrap();
    assert_eq!(entries[1].state, EntryState::Started);

    // Only a call whose outcome is unknown can be named.
    let refused = registry
        .rollback_run_reverting_unknown(run.clone(), &[0])
        .await;
    assert!(
        matches!(&refused, Err(JournalError::WrongState { problem, .. }) if problem.contains("no call #0 whose outcome is unknown")),
        "{refused:?}"
    );

    // Named, its revert runs (with no result to go by) and the run is rolled back.
    let reports = registry
        .rollback_run_reverting_unknown(run, &[1])
        .await
        .unwrap();
    assert_eq!(reports.len(), 1, "{reports:?}");
    assert!(reports[0].outcome_unknown && !reports[0].outcome.is_error());
    assert_eq!(
        seen.lock().unwrap().last().unwrap(),
        &json!({"arguments": {"line": "b"}, "outcome_unknown": true})
    );
    let status = store.run("cut").await.unwrap().unwrap().status;
    assert_eq!(status, RunStatus::RolledBack);
}

fn dsh(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_dsh-tools"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_rollback_of_a_cut_off_call_exits_non_zero_and_leaves_the_run_in_place() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("j.db");
    let store = SqliteJournal::open(&path).unwrap();
    // `deploy` is a tool of another host, not loaded here: nothing says it only reads.
    cut_off(&store, "cut", "tools.deploy").await;
    store
        .put(
            "cut",
            &JournalEntry {
                seq: 0,
                tool: "tools.deploy".to_owned(),
                args: "{}".to_owned(),
                state: EntryState::Finished {
                    outcome: CallOutcome::Err {
                        message: "no".to_owned(),
                        code: None,
                    },
                },
            },
        )
        .await
        .unwrap();
    let root = env!("CARGO_MANIFEST_DIR");
    let journal = path.to_str().unwrap();
    let rollback = |extra: &[&str]| {
        let mut args = vec![
            "--builtin",
            "repo",
            "--root",
            root,
            "runs",
            "--journal",
            journal,
        ];
        args.extend_from_slice(&["rollback", "cut"]);
        args.extend_from_slice(extra);
        dsh(&args)
    };
    let output = rollback(&[]);
    let (stdout, stderr) = (
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr),
    );
    assert_eq!(output.status.code(), Some(1), "{stdout}\n{stderr}");
    assert!(
        stdout.contains("#1 tools.deploy not reverted: its outcome is unknown"),
        "{stdout}"
    );
    assert!(
        stderr.contains("rollback incomplete")
            && stderr.contains("#1")
            && stderr.contains("--revert-unknown"),
        "{stderr}"
    );
    let status = store.run("cut").await.unwrap().unwrap().status;
    assert!(matches!(status, RunStatus::Finished { .. }), "{status:?}");

    // Asking for its revert needs a revert tool.
    let output = rollback(&["--revert-unknown", "1"]);
    assert_eq!(output.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&output.stderr)
            .contains("no revert tool for tools.deploy (call #1)"),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

#[tokio::test]
async fn a_new_journal_and_its_wal_and_shm_are_private_under_a_permissive_umask() {
    // SAFETY: umask only sets this process's file creation mask; 022 is the common default.
    let before = unsafe { libc::umask(0o022) };
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("j.db");
    let store = SqliteJournal::open(&path).unwrap();
    store.open_run("r", &json!({"code": "x"})).await.unwrap();
    // SAFETY: as above.
    unsafe { libc::umask(before) };
    for file in [path.clone(), sibling(&path, "-wal"), sibling(&path, "-shm")] {
        assert!(
            file.exists(),
            "{} exists while the journal is open",
            file.display()
        );
        assert_eq!(mode(&file), 0o600, "{}", file.display());
    }
    assert!(store.readable_by_others().is_empty());
}

/// Collects the messages of `tracing` warnings.
#[derive(Clone, Default)]
struct Warnings(Arc<std::sync::Mutex<Vec<String>>>);

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for Warnings {
    fn on_event(
        &self,
        event: &tracing::Event<'_>,
        _context: tracing_subscriber::layer::Context<'_, S>,
    ) {
        struct Text(String);
        impl tracing::field::Visit for Text {
            fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
                self.0.push_str(&format!("{}={value:?} ", field.name()));
            }
        }
        if *event.metadata().level() == tracing::Level::WARN {
            let mut text = Text(String::new());
            event.record(&mut text);
            self.0.lock().unwrap().push(text.0);
        }
    }
}

#[test]
fn an_existing_journal_others_can_read_is_warned_about() {
    use std::os::unix::fs::PermissionsExt;
    use tracing_subscriber::layer::SubscriberExt;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("j.db");
    drop(SqliteJournal::open(&path).unwrap());
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
    let warnings = Warnings::default();
    let subscriber = tracing_subscriber::registry().with(warnings.clone());
    let store =
        tracing::subscriber::with_default(subscriber, || SqliteJournal::open(&path).unwrap());
    assert_eq!(store.readable_by_others(), [(path.clone(), 0o644)]);
    let logged = warnings.0.lock().unwrap().clone();
    assert!(
        logged
            .iter()
            .any(|line| line.contains("readable by other users") && line.contains("0644")),
        "{logged:?}"
    );
    drop(store);
    let output = dsh(&["runs", "--journal", path.to_str().unwrap(), "list"]);
    assert!(output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(
        stderr
            .matches("is readable by other users (mode 0644)")
            .count(),
        1,
        "{stderr}"
    );
}

/// Whoever may write the journal may mark a parked call approved: a journal file others can
/// write is refused, and left as it was found.
#[test]
fn a_journal_others_can_write_is_refused() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("j.db");
    drop(SqliteJournal::open(&path).unwrap());
    let before = std::fs::read(&path).unwrap();
    for mode in [0o666, 0o620, 0o602] {
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
        match SqliteJournal::open(&path) {
            Err(JournalError::Unusable(message)) => assert!(
                message.contains("writable by other users") && message.contains("chmod 600"),
                "{message}"
            ),
            other => panic!("mode {mode:o}: expected a refusal, got {other:?}"),
        }
        assert_eq!(std::fs::read(&path).unwrap(), before);
    }
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
    SqliteJournal::open(&path).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_past_its_byte_budget_ends_as_journal_limit_and_the_file_stays_small() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("j.db");
    let store: Arc<dyn JournalStore> = Arc::new(SqliteJournal::open(&path).unwrap());
    let registry = registry();
    // 200 failing calls of 100 KB each: unbounded, some 40 MB of journal.
    let flood = "const pad = 'p'.repeat(100000);\nfor (let i = 0; i < 200; i++) {\n  try { await tools.fail({ i, pad }); } catch (e) {}\n}\nreturn 'done';";
    let run = DurableRun::new(store.clone(), "flood").with_max_run_bytes(1 << 20);
    let result = tokio::time::timeout(BOUND, registry.execute(program(flood).durable(run)))
        .await
        .unwrap();
    let message = result
        .error()
        .map(|e| e.message.clone())
        .unwrap_or_default();
    assert!(
        message.contains("code run failed (journal-limit)"),
        "{result:?}"
    );
    assert!(message.contains("it was not made"), "{message}");
    let entries = store.entries("flood").await.unwrap();
    assert!(
        (5..=12).contains(&entries.len()),
        "{} calls journaled",
        entries.len()
    );
    let status = store.run("flood").await.unwrap().unwrap().status;
    assert!(
        matches!(&status, RunStatus::Finished { outcome: CallOutcome::Err { message, .. } } if message.contains("journal-limit")),
        "{status:?}"
    );
    assert!(on_disk(&path) < 8 << 20, "{} bytes on disk", on_disk(&path));

    // An outcome past the bound is not recorded: the call stays started and the run ends.
    let big =
        "await tools.big({ size: 600000 });\nawait tools.big({ size: 600000 });\nreturn 'done';";
    let run = DurableRun::new(store.clone(), "big").with_max_run_bytes(1 << 20);
    let result = tokio::time::timeout(BOUND, registry.execute(program(big).durable(run)))
        .await
        .unwrap();
    let message = result
        .error()
        .map(|e| e.message.clone())
        .unwrap_or_default();
    assert!(
        message.contains("code run failed (journal-limit)"),
        "{result:?}"
    );
    assert!(message.contains("outcome of call #1"), "{message}");
    let entries = store.entries("big").await.unwrap();
    assert_eq!(entries.len(), 2);
    assert!(matches!(entries[0].state, EntryState::Finished { .. }));
    assert_eq!(entries[1].state, EntryState::Started);
}

#[tokio::test]
async fn a_journal_file_past_its_bound_refuses_new_runs_and_calls_and_records_endings() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("j.db");
    let store = SqliteJournal::open(&path)
        .unwrap()
        .with_max_file_bytes(256 << 10);
    store.open_run("a", &json!({"code": "x"})).await.unwrap();
    let pad = "p".repeat(16 << 10);
    let mut refused = None;
    for seq in 0..64 {
        let entry = JournalEntry {
            seq,
            tool: "tools.echo".to_owned(),
            args: format!("{{\"pad\":\"{pad}\"}}"),
            state: EntryState::Started,
        };
        if let Err(error) = store.put("a", &entry).await {
            refused = Some((seq, error));
            break;
        }
    }
    let Some((seq, error)) = refused else {
        panic!("64 calls of 16 KiB fit a bound of 256 KiB");
    };
    assert!(
        matches!(error, JournalError::Full { max_bytes, .. } if max_bytes == 256 << 10),
        "{error:?}"
    );
    assert!(seq >= 8, "refused at call #{seq}");
    let new_run = store.open_run("b", &json!({"code": pad})).await;
    assert!(
        matches!(new_run, Err(JournalError::Full { .. })),
        "{new_run:?}"
    );
    // The run under way still records how its last call and it itself ended.
    let ended = JournalEntry {
        seq: seq - 1,
        tool: "tools.echo".to_owned(),
        args: format!("{{\"pad\":\"{pad}\"}}"),
        state: EntryState::Finished {
            outcome: CallOutcome::Ok { value: json!(1) },
        },
    };
    store.put("a", &ended).await.unwrap();
    // A new call's only record (a read-only call's, written once it finished) is refused too.
    let only_record = JournalEntry {
        seq: seq + 1,
        ..ended.clone()
    };
    let refused = store.put("a", &only_record).await;
    assert!(
        matches!(refused, Err(JournalError::Full { .. })),
        "{refused:?}"
    );
    let status = RunStatus::Finished {
        outcome: CallOutcome::Ok { value: json!(1) },
    };
    store.set_status("a", &status).await.unwrap();
    assert!(on_disk(&path) < 2 << 20, "{} bytes on disk", on_disk(&path));
}

/// A journal that says when a claim is asked for, before asking, and keeps the states of the
/// entries put, in order.
struct Watched {
    inner: SqliteJournal,
    claims: tokio::sync::mpsc::UnboundedSender<()>,
    puts: std::sync::Mutex<Vec<(u64, EntryState)>>,
}

impl JournalStore for Watched {
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
        self.puts
            .lock()
            .unwrap()
            .push((entry.seq, entry.state.clone()));
        self.inner.put(run_id, entry)
    }
    fn claim<'a>(&'a self, run_id: &'a str) -> BoxFuture<'a, Result<u64, JournalError>> {
        let _ = self.claims.send(());
        self.inner.claim(run_id)
    }
    fn release<'a>(
        &'a self,
        run_id: &'a str,
        claim: u64,
    ) -> BoxFuture<'a, Result<(), JournalError>> {
        self.inner.release(run_id, claim)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_write_lock_fails_journaled_calls_as_busy_and_stalls_nothing_else() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("j.db");
    let (claims, mut claimed) = tokio::sync::mpsc::unbounded_channel();
    let store: Arc<dyn JournalStore> = Arc::new(Watched {
        inner: SqliteJournal::open(&path).unwrap(),
        claims,
        puts: Default::default(),
    });
    let registry = registry();
    // Plain calls too, as a server in both modes takes them.
    registry.set_mode(Mode::Both);
    // Another connection (a `sqlite3` shell, a backup) takes the write lock and keeps it.
    let holder = rusqlite::Connection::open(&path).unwrap();
    holder.execute_batch("BEGIN IMMEDIATE").unwrap();

    let runs: Vec<_> = (0..3)
        .map(|i| {
            let (registry, store) = (registry.clone(), store.clone());
            tokio::spawn(async move {
                let run = DurableRun::new(store, format!("run-{i}"));
                registry
                    .execute(program("return await tools.echo({ n: 1 });").durable(run))
                    .await
            })
        })
        .collect();
    for _ in 0..3 {
        tokio::time::timeout(BOUND, claimed.recv())
            .await
            .unwrap()
            .unwrap();
    }
    // All three wait for the journal: a plain call, on the runtime's workers, still answers.
    let plain = {
        let registry = registry.clone();
        tokio::spawn(async move {
            registry
                .execute(ToolCall::new("plain", "echo", json!({"n": 7})))
                .await
        })
    };
    let answered = tokio::time::timeout(BOUND, plain).await.unwrap().unwrap();
    assert_eq!(answered.value(), Some(&json!(7)), "{answered:?}");
    assert!(!registry.tools(None).is_empty());

    for run in runs {
        let result = tokio::time::timeout(BOUND, run).await.unwrap().unwrap();
        assert_eq!(
            code_of(&result).as_deref(),
            Some(JOURNAL_BUSY),
            "{result:?}"
        );
    }

    // Released, the journal works again.
    holder.execute_batch("ROLLBACK").unwrap();
    let run = DurableRun::new(store.clone(), "after");
    let result = registry
        .execute(program("return await tools.echo({ n: 2 });").durable(run))
        .await;
    assert!(!result.is_error(), "{result:?}");
}

/// A call of a read-only tool is journaled once, when it has finished (it changes nothing, and
/// cut off it runs again); any other call twice, started before it runs and finished after.
/// Resumed, the finished run answers both from the journal.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_only_call_is_journaled_once_and_any_other_twice() {
    let dir = tempfile::tempdir().unwrap();
    let (claims, _claimed) = tokio::sync::mpsc::unbounded_channel();
    let watched = Arc::new(Watched {
        inner: SqliteJournal::open(dir.path().join("j.db")).unwrap(),
        claims,
        puts: Default::default(),
    });
    let store: Arc<dyn JournalStore> = watched.clone();
    let registry = registry();
    let code = "return (await tools.peek({ n: 1 })) + (await tools.echo({ n: 2 }));";
    let run = || DurableRun::new(store.clone(), "once");
    let done = registry.execute(program(code).durable(run())).await;
    assert_eq!(done.value().unwrap()["result"], 3, "{done:?}");
    let kinds: Vec<(u64, &str)> = watched
        .puts
        .lock()
        .unwrap()
        .iter()
        .map(|(seq, state)| {
            let kind = match state {
                EntryState::Started => "started",
                EntryState::Finished { .. } => "finished",
                _ => "other",
            };
            (*seq, kind)
        })
        .collect();
    assert_eq!(
        kinds,
        [(0, "finished"), (1, "started"), (1, "finished")],
        "the records put"
    );
    let again = registry.execute(program(code).durable(run())).await;
    assert_eq!(again.value().unwrap()["result"], 3, "{again:?}");
    assert_eq!(
        watched.puts.lock().unwrap().len(),
        3,
        "nothing more was put"
    );
}

/// A store that keeps deferred records until a statement of its own or `settle` writes them:
/// SQLite's journal thread running late, as on a loaded machine.
struct Holding {
    inner: SqliteJournal,
    held: std::sync::Mutex<Vec<(String, JournalEntry)>>,
}

impl Holding {
    fn write_held(&self) -> BoxFuture<'_, Result<(), JournalError>> {
        let held = std::mem::take(&mut *self.held.lock().unwrap());
        Box::pin(async move {
            for (run_id, entry) in &held {
                self.inner.put(run_id, entry).await?;
            }
            Ok(())
        })
    }
}

impl JournalStore for Holding {
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
        Box::pin(async move {
            self.write_held().await?;
            self.inner.set_status(run_id, status).await
        })
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
        Box::pin(async move {
            self.write_held().await?;
            self.inner.put(run_id, entry).await
        })
    }
    fn put_deferred<'a>(
        &'a self,
        run_id: &'a str,
        entry: &'a JournalEntry,
    ) -> BoxFuture<'a, Result<(), JournalError>> {
        let held = (run_id.to_owned(), entry.clone());
        self.held.lock().unwrap().push(held);
        Box::pin(std::future::ready(Ok(())))
    }
    fn settle<'a>(&'a self, _run_id: &'a str) -> BoxFuture<'a, Result<(), JournalError>> {
        self.write_held()
    }
    fn claim<'a>(&'a self, run_id: &'a str) -> BoxFuture<'a, Result<u64, JournalError>> {
        self.inner.claim(run_id)
    }
    fn release<'a>(
        &'a self,
        run_id: &'a str,
        claim: u64,
    ) -> BoxFuture<'a, Result<(), JournalError>> {
        self.inner.release(run_id, claim)
    }
}

/// A read-only call writes no record before it runs, so nothing carries the outcome kept
/// before it: it waits until that outcome is durable (a host cut off while it runs must find
/// the call before it finished, not its outcome unknown).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_only_call_runs_once_the_outcome_before_it_is_durable() {
    let dir = tempfile::tempdir().unwrap();
    let holding = Arc::new(Holding {
        inner: SqliteJournal::open(dir.path().join("j.db")).unwrap(),
        held: Default::default(),
    });
    let registry = registry();
    let seen = Arc::new(std::sync::Mutex::new(None));
    let look = {
        let (holding, seen) = (holding.clone(), seen.clone());
        ToolDefinition::builder("look")
            .annotations({
                let mut hints = ToolAnnotations::default();
                hints.read_only_hint = Some(true);
                hints
            })
            .handler(move |_args: Value, _exec: ToolExec| {
                let (holding, seen) = (holding.clone(), seen.clone());
                async move {
                    let entries = holding.inner.entries("settled").await.unwrap();
                    *seen.lock().unwrap() = Some(entries);
                    Ok(Value::from(true))
                }
            })
            .build()
            .unwrap()
    };
    registry.register(look).unwrap();
    let store: Arc<dyn JournalStore> = holding.clone();
    let code = "await tools.echo({ n: 1 }); return await tools.look({});";
    let done = registry
        .execute(program(code).durable(DurableRun::new(store, "settled")))
        .await;
    assert_eq!(done.value().unwrap()["result"], true, "{done:?}");
    let entries = seen.lock().unwrap().take().expect("look ran");
    assert!(
        matches!(
            entries.first().map(|entry| &entry.state),
            Some(EntryState::Finished { .. })
        ),
        "the echo before look was durable as finished when look ran: {entries:?}"
    );
}

/// Whoever owns a journal file can write it, whatever its mode: a journal, `-wal` or `-shm`
/// that another user owns, or a symbolic link in the journal's place, is refused for writing
/// and left as it was found.
#[test]
fn a_journal_another_user_owns_or_a_link_to_one_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let real = dir.path().join("real.db");
    drop(SqliteJournal::open(&real).unwrap());
    let link = dir.path().join("link.db");
    std::os::unix::fs::symlink(&real, &link).unwrap();
    for (path, why) in [
        (&link, "a symbolic link"),
        (&dir.path().join("fresh-link.db"), "a symbolic link"),
    ] {
        if !path.exists() {
            std::os::unix::fs::symlink(dir.path().join("nowhere.db"), path).unwrap();
        }
        match SqliteJournal::open(path) {
            Err(JournalError::Unusable(message)) => assert!(message.contains(why), "{message}"),
            other => panic!("{}: expected a refusal, got {other:?}", path.display()),
        }
    }
    assert!(
        !dir.path().join("nowhere.db").exists(),
        "a dangling link is not followed to create its target"
    );
    // Read-only too, SQLite is not let follow the link.
    assert!(matches!(
        SqliteJournal::open_with(&link, dsh_tools::durable::OpenMode::ReadOnly),
        Err(JournalError::Store(_))
    ));

    if !rustix::process::geteuid().is_root() {
        println!("SKIPPED: giving a journal file to another user needs root");
        return;
    }
    let nobody = Some(rustix::fs::Uid::from_raw(65534));
    for suffix in ["", "-wal", "-shm"] {
        let base = dir.path().join(format!("given{suffix}.db"));
        drop(SqliteJournal::open(&base).unwrap());
        let mut given = base.as_os_str().to_owned();
        given.push(suffix);
        let given = std::path::PathBuf::from(given);
        if !given.exists() {
            std::fs::write(&given, b"").unwrap();
        }
        rustix::fs::chown(&given, nobody, None).unwrap();
        let before = std::fs::read(&base).unwrap();
        match SqliteJournal::open(&base) {
            Err(JournalError::Unusable(message)) => assert!(
                message.contains("owned by another user (uid 65534)"),
                "{message}"
            ),
            other => panic!("{suffix}: expected a refusal, got {other:?}"),
        }
        assert_eq!(std::fs::read(&base).unwrap(), before);
    }
}
