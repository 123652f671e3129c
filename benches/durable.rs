//! What durability costs, side by side in one run, on QuickJS in this process (the runtime with
//! the least noise of its own): a program making 100 sequential binding calls, plain and durable
//! (each call journaled twice in SQLite: started, finished; a read-only tool's once, finished);
//! and the resume of a run whose
//! journal holds 1,000 finished calls (all answered from the journal) beside the same program
//! run plainly and beside an empty program (the program's start). The journal is a SQLite file
//! in WAL mode with `synchronous = NORMAL`.
//!
//! With the feature `restate`, the same programs as Restate invocations (`DurableRuns/run`
//! through the ingress of a local `restate-server`, the pinned one `.ci/install-tools.sh`
//! installs; the deployment served in this process over the same registry): each binding call
//! a journaled step. SKIPPED when the server cannot be installed. Figures: BENCHMARKS.md.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use dsh_tools::code::{CodeRuntime, EmbeddedConfig, EmbeddedRuntime};
use dsh_tools::definition::ToolAnnotations;
use dsh_tools::durable::{DurableRun, JournalStore, RunStatus, SqliteJournal};
use dsh_tools::prelude::*;
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
const HUNDRED_READ_ONLY: &str =
    "let sum = 0;\nfor (let i = 0; i < 100; i++) sum += await tools.peek({ n: i });\nreturn sum;";

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
    let peek = ToolDefinition::builder("peek")
        .parameters(json!({"type": "object", "properties": {"n": {"type": "integer"}}}))
        .annotations({
            let mut hints = ToolAnnotations::default();
            hints.read_only_hint = Some(true);
            hints
        })
        .handler(|args: Value, _exec| async move { Ok(args["n"].clone()) })
        .build()
        .expect("valid");
    registry.register(peek).expect("registered");
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

/// 100 sequential calls of a read-only tool, each journaled (once, when finished).
#[divan::bench(sample_count = 30)]
fn hundred_calls_durable_read_only(bencher: divan::Bencher) {
    let bench = setup();
    let next = AtomicU64::new(0);
    bencher.bench_local(|| {
        let id = format!("run-{}", next.fetch_add(1, Ordering::Relaxed));
        let durable = call(HUNDRED_READ_ONLY).durable(DurableRun::new(bench.store.clone(), id));
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

/// Durable runs on Restate: a local `restate-server` (its data in a temporary directory) with
/// this process's registry registered as its deployment.
#[cfg(feature = "restate")]
mod restate {
    use std::path::{Path, PathBuf};
    use std::process::{Child, Command, Stdio};
    use std::time::{Duration, Instant};

    use serde_json::{Value, json};

    use super::{EMPTY, HUNDRED, setup};

    const ROOT: &str = env!("CARGO_MANIFEST_DIR");

    /// A failure bound for the server's start only.
    const BOUND: Duration = Duration::from_secs(120);

    /// The server, killed when the bench ends.
    struct Server {
        child: Child,
        _base: tempfile::TempDir,
        ingress: String,
        http: reqwest::Client,
        bench: super::Bench,
    }

    impl Drop for Server {
        fn drop(&mut self) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }

    fn binary() -> Option<PathBuf> {
        let installed = Command::new(format!("{ROOT}/.ci/install-tools.sh"))
            .stdout(Stdio::null())
            .status()
            .is_ok_and(|status| status.success());
        let scope = Path::new(ROOT).join(".tools/restate/node_modules/@restatedev");
        installed
            .then(|| std::fs::read_dir(&scope).ok())
            .flatten()
            .and_then(|entries| {
                entries
                    .filter_map(Result::ok)
                    .map(|entry| entry.path().join("bin/restate-server"))
                    .find(|path| path.is_file())
            })
    }

    fn port() -> u16 {
        std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|listener| listener.local_addr())
            .map(|addr| addr.port())
            .expect("a free port")
    }

    async fn wait_until<F: std::future::Future<Output = bool>>(
        what: &str,
        mut ready: impl FnMut() -> F,
    ) {
        let deadline = Instant::now() + BOUND;
        while !ready().await {
            assert!(Instant::now() < deadline, "{what} within {BOUND:?}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// The server started, the deployment served and registered; `None` (SKIPPED printed)
    /// without the server.
    fn start() -> Option<Server> {
        let Some(binary) = binary() else {
            eprintln!(
                "SKIPPED: the Restate rows of benches/durable.rs need restate-server \
                 (.ci/install-tools.sh)"
            );
            return None;
        };
        let base = tempfile::tempdir().expect("a temporary directory");
        let (admin, ingress, node, deployment) = (port(), port(), port(), port());
        let child = Command::new(binary)
            .args(["--no-logo", "--node-name", "bench", "--base-dir"])
            .arg(base.path())
            .env("RESTATE_LISTEN_MODE", "tcp")
            .env("RESTATE_ADMIN__BIND_ADDRESS", format!("127.0.0.1:{admin}"))
            .env(
                "RESTATE_INGRESS__BIND_ADDRESS",
                format!("127.0.0.1:{ingress}"),
            )
            .env("RESTATE_BIND_ADDRESS", format!("127.0.0.1:{node}"))
            .env("RESTATE_DISABLE_TELEMETRY", "true")
            .env("RESTATE_DEFAULT_NUM_PARTITIONS", "1")
            .env("RESTATE_ROCKSDB_TOTAL_MEMORY_SIZE", "256MiB")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("restate-server starts");
        let bench = setup();
        let server = Server {
            child,
            _base: base,
            ingress: format!("http://127.0.0.1:{ingress}"),
            http: reqwest::Client::new(),
            bench,
        };
        let registry = server.bench.registry.clone();
        let addr = format!("127.0.0.1:{deployment}")
            .parse()
            .expect("an address");
        server.bench.rt.spawn(async move {
            dsh_tools::durable::restate::serve_deployment(registry, addr, Default::default())
                .await
                .expect("the deployment serves");
        });
        let http = server.http.clone();
        server.bench.rt.block_on(async {
            let health = format!("http://127.0.0.1:{admin}/health");
            wait_until("the admin API is healthy", || {
                let request = http.get(&health).send();
                async move { request.await.is_ok_and(|r| r.status().is_success()) }
            })
            .await;
            let deployments = format!("http://127.0.0.1:{admin}/deployments");
            let uri = format!("http://127.0.0.1:{deployment}");
            wait_until("the deployment is registered", || {
                let request = http.post(&deployments).json(&json!({"uri": uri})).send();
                async move { request.await.is_ok_and(|r| r.status().is_success()) }
            })
            .await;
        });
        // The first invocation waits for the registration to reach the ingress.
        server.bench.rt.block_on(async {
            wait_until("the ingress serves DurableRuns", || run(&server, EMPTY)).await;
        });
        Some(server)
    }

    /// One run of `program` on Restate; whether it succeeded.
    async fn run(server: &Server, program: &str) -> bool {
        let answer = server
            .http
            .post(format!("{}/DurableRuns/run", server.ingress))
            .json(&json!({"code": program, "description": "Bench"}))
            .send()
            .await;
        match answer {
            Ok(response) if response.status().is_success() => response
                .json::<Value>()
                .await
                .is_ok_and(|output| output.get("result").is_some()),
            _ => false,
        }
    }

    /// 100 sequential calls, each a journaled step of a Restate invocation (a new invocation
    /// every time: every call is live).
    #[divan::bench(sample_count = 30)]
    fn hundred_calls_restate(bencher: divan::Bencher) {
        let Some(server) = start() else { return };
        bencher.bench_local(|| assert!(server.bench.rt.block_on(run(&server, HUNDRED))));
    }

    /// The invocation's own cost: an empty program on Restate.
    #[divan::bench(sample_count = 30)]
    fn empty_program_restate(bencher: divan::Bencher) {
        let Some(server) = start() else { return };
        bencher.bench_local(|| assert!(server.bench.rt.block_on(run(&server, EMPTY))));
    }
}
