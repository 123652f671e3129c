//! What durability costs, side by side in one run, on QuickJS in this process (the runtime with
//! the least noise of its own): a program making 100 sequential binding calls, plain and durable
//! (each call journaled twice in SQLite: started, finished); and the resume of a run whose
//! journal holds 1,000 finished calls (all answered from the journal) beside the same program
//! run plainly and beside an empty program (the program's start). The journal is a SQLite file
//! in WAL mode with `synchronous = NORMAL`. Figures: BENCHMARKS.md.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use dsh_tools::code::{CodeRuntime, EmbeddedConfig, EmbeddedRuntime};
use dsh_tools::durable::{DurableRun, JournalStore, RunStatus, SqliteJournal};
use dsh_tools::{Mode, Registry, ToolCall, ToolDefinition};
use serde_json::{Value, json};

fn main() {
    divan::main();
}

const HUNDRED: &str =
    "let sum = 0;\nfor (let i = 0; i < 100; i++) sum += await tools.echo({ n: i });\nreturn sum;";
const THOUSAND: &str =
    "let sum = 0;\nfor (let i = 0; i < 1000; i++) sum += await tools.echo({ n: i });\nreturn sum;";
const EMPTY: &str = "return 0;";

struct Bench {
    rt: tokio::runtime::Runtime,
    registry: Registry,
    store: Arc<dyn JournalStore>,
    _dir: tempfile::TempDir,
}

fn setup() -> Bench {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let registry = Registry::new();
    let echo = ToolDefinition::builder("echo")
        .parameters(json!({"type": "object", "properties": {"n": {"type": "integer"}}}))
        .handler(|args: Value, _exec| async move { Ok(args["n"].clone()) })
        .build()
        .expect("valid");
    registry.register(echo).expect("registered");
    let runtime: Arc<dyn CodeRuntime> = Arc::new(
        EmbeddedRuntime::javascript_in_process(EmbeddedConfig::default()).expect("a valid config"),
    );
    registry.set_code_runtime(runtime);
    registry.set_mode(Mode::Code);
    let dir = tempfile::tempdir().expect("a temporary directory");
    let store: Arc<dyn JournalStore> =
        Arc::new(SqliteJournal::open(dir.path().join("journal.db")).expect("a journal"));
    Bench {
        rt,
        registry,
        store,
        _dir: dir,
    }
}

fn call(program: &str) -> ToolCall {
    ToolCall::new(
        "bench",
        "run_code",
        json!({"code": program, "description": "Bench"}),
    )
}

fn check(result: &dsh_tools::ToolResult) {
    assert!(!result.is_error(), "{result:?}");
}

/// 100 sequential calls, not journaled.
#[divan::bench(sample_count = 30)]
fn hundred_calls_plain(bencher: divan::Bencher) {
    let bench = setup();
    bencher.bench_local(|| check(&bench.rt.block_on(bench.registry.execute(call(HUNDRED)))));
}

/// 100 sequential calls, each journaled (a fresh run every time: every call is live).
#[divan::bench(sample_count = 30)]
fn hundred_calls_durable(bencher: divan::Bencher) {
    let bench = setup();
    let next = AtomicU64::new(0);
    bencher.bench_local(|| {
        let id = format!("run-{}", next.fetch_add(1, Ordering::Relaxed));
        let durable = call(HUNDRED).durable(DurableRun::new(bench.store.clone(), id));
        check(&bench.rt.block_on(bench.registry.execute(durable)));
    });
}

/// The same 1,000-call program run plainly, for comparison with its resume.
#[divan::bench(sample_count = 20)]
fn thousand_calls_plain(bencher: divan::Bencher) {
    let bench = setup();
    bencher.bench_local(|| check(&bench.rt.block_on(bench.registry.execute(call(THOUSAND)))));
}

/// A resume that answers 1,000 calls from the journal (the run is marked running again before
/// each one, so it replays instead of returning its stored result).
#[divan::bench(sample_count = 20)]
fn resume_thousand_journaled_calls(bencher: divan::Bencher) {
    let bench = setup();
    let run = DurableRun::new(bench.store.clone(), "resume");
    check(
        &bench
            .rt
            .block_on(bench.registry.execute(call(THOUSAND).durable(run.clone()))),
    );
    bencher.bench_local(|| {
        bench.rt.block_on(async {
            bench
                .store
                .set_status("resume", &RunStatus::Running)
                .await
                .expect("status");
            check(
                &bench
                    .registry
                    .execute(call(THOUSAND).durable(run.clone()))
                    .await,
            );
        });
    });
}

/// The program's start: an empty program, plain.
#[divan::bench(sample_count = 30)]
fn empty_program(bencher: divan::Bencher) {
    let bench = setup();
    bencher.bench_local(|| check(&bench.rt.block_on(bench.registry.execute(call(EMPTY)))));
}
