//! What TypeScript on QuickJS in worker processes (`EmbeddedRuntime::javascript`)
//! promises: budgets and cancellation hold even inside a long built-in, which QuickJS runs to
//! its end without polling its interrupt hook (`replaceAll` over a huge string, a sort of
//! millions of elements): the run ends with the limit's kind, its worker process is gone, and
//! the host's memory stays small while a program allocates big strings.
//!
//! The tests of this file look at this process's worker processes and its peak resident size,
//! so they take one lock and run one at a time.
#![cfg(feature = "embedded-python")]

mod code_runtime_support;

use std::time::Duration;

use code_runtime_support::*;
use dsh_tools::code::{
    Budgets, CodeRuntime, EmbeddedConfig, EmbeddedRuntime, FailureKind, Isolation, RunOutcome,
};
use serde_json::json;
use tokio::sync::Mutex;
use tokio_util::sync::CancellationToken;

static ALONE: Mutex<()> = Mutex::const_new(());

/// A built-in that runs for many seconds without polling the interrupt hook.
const LONG_REPLACE: &str = "return 'a'.repeat(2 ** 27).replaceAll('a', 'bc').length;";

/// A sort of three million numbers (by their strings: no program code runs in it).
const LONG_SORT: &str = "const a = new Array(3_000_000);\n\
                         for (let i = 0; i < a.length; i++) a[i] = (i * 7919) % 3_000_000;\n\
                         await tools.report({pid: 1});\n\
                         return a.sort()[0];";

/// One worker serves every run (none is kept idle beside it), with `compute_ms` and
/// `max_wall_ms` as given.
fn pooled(compute_ms: u64, max_wall_ms: u64) -> EmbeddedRuntime {
    EmbeddedRuntime::javascript(EmbeddedConfig {
        budgets: Budgets {
            compute_ms,
            max_wall_ms,
            max_memory_mb: 512,
            ..Budgets::default()
        },
        python_idle_workers: 0,
        ..EmbeddedConfig::default()
    })
    .expect("the worker is built with the tests")
}

/// This process's live `dsh-monty-worker` children.
fn workers() -> Vec<u64> {
    let me = std::process::id().to_string();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u64>().ok())
        .filter(|pid| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            let Some((name, rest)) = stat.split_once(") ") else {
                return false;
            };
            let mut fields = rest.split_whitespace();
            let state = fields.next();
            name.ends_with("(dsh-monty-worke")
                && state != Some("Z")
                && fields.next() == Some(me.as_str())
        })
        .collect()
}

/// The one live worker of this process.
#[track_caller]
fn the_worker() -> u64 {
    let pids = workers();
    assert_eq!(pids.len(), 1, "expected one worker process, found {pids:?}");
    pids[0]
}

/// Waits (bounded by a minute, only to fail) until process `pid` is gone.
async fn wait_gone(pid: u64) -> bool {
    wait_until(|| process_gone(pid)).await
}

/// Waits until `done` holds; false after a minute.
async fn wait_until(done: impl Fn() -> bool) -> bool {
    for _ in 0..6_000 {
        if done() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    false
}

/// Peak resident size of this process in KiB.
fn peak_rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmHWM")
}

/// Runs `program` with `tools`; once it has reported, notes the pid of the worker running it
/// and cancels the run. The outcome and that pid.
async fn cancel_once_reported(
    rt: &EmbeddedRuntime,
    tools: &Tools,
    program: &str,
) -> (RunOutcome, u64) {
    let signal = CancellationToken::new();
    let request = tools.request(program).signal(signal.clone());
    let watcher = async {
        while tools.reported.lock().unwrap().is_empty() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let pid = the_worker();
        signal.cancel();
        pid
    };
    let run = well_before_the_ceiling(async { rt.run(request).await.expect("a valid request") });
    tokio::join!(run, watcher)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_builtin_under_a_small_cpu_budget_ends_as_over_budget_and_its_worker_is_gone() {
    let _alone = ALONE.lock().await;
    let rt = pooled(500, 600_000);
    assert_value(&run(&rt, "return 1").await, json!(1));
    let pid = the_worker();
    let tools = Tools::new();
    let program = format!("console.log('before');\n{LONG_REPLACE}");
    let out = well_before_the_ceiling(tools.run(&rt, &program)).await;
    assert_failure(
        &out,
        FailureKind::Timeout,
        "compute budget exhausted (500ms of CPU time)",
    );
    // The log made before the built-in reached the host before the worker was killed.
    assert_eq!(out.logs, ["before"]);
    assert!(
        wait_gone(pid).await,
        "the over-budget worker {pid} is alive"
    );
    // A sort is stopped as well.
    let out = well_before_the_ceiling(tools.run(&rt, LONG_SORT)).await;
    assert_failure(&out, FailureKind::Timeout, "compute budget exhausted");
    assert_value(&run(&rt, "return 'still here'").await, json!("still here"));
    rt.dispose().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelling_a_long_builtin_ends_the_run_and_its_worker() {
    let _alone = ALONE.lock().await;
    let rt = pooled(600_000, 600_000);
    let tools = Tools::new();
    let program = format!("await tools.report({{pid: 1}});\n{LONG_REPLACE}");
    let (out, pid) = cancel_once_reported(&rt, &tools, &program).await;
    assert_failure(&out, FailureKind::Abort, "run aborted");
    // Nothing keeps computing: the process that ran the built-in is gone.
    assert!(
        wait_gone(pid).await,
        "the cancelled run's worker {pid} is alive"
    );
    assert_value(&run(&rt, "return 2").await, json!(2));
    rt.dispose().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_wall_clock_ceiling_ends_a_long_builtin_and_its_worker() {
    let _alone = ALONE.lock().await;
    let rt = pooled(600_000, 1_000);
    let tools = Tools::new();
    // The worker is noted once it exists, not once the program reports: on a busy machine the
    // second can run out before the program gets that far, or before the worker is seen.
    let ended = CancellationToken::new();
    let timed_out = async {
        let out = well_before_the_ceiling(tools.run(&rt, LONG_SORT)).await;
        ended.cancel();
        out
    };
    let watcher = async {
        loop {
            if let [pid] = workers()[..] {
                return Some(pid);
            }
            if ended.is_cancelled() {
                return None;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    };
    let (out, pid) = tokio::join!(timed_out, watcher);
    assert_failure(
        &out,
        FailureKind::Timeout,
        "wall-clock ceiling reached (1000ms)",
    );
    match pid {
        Some(pid) => assert!(
            wait_gone(pid).await,
            "the timed-out run's worker {pid} is alive"
        ),
        None => assert!(
            wait_until(|| workers().is_empty()).await,
            "a worker outlived the timed-out run: {:?}",
            workers()
        ),
    }
    assert_value(&run(&rt, "return 3").await, json!(3));
    rt.dispose().await;
}

/// Big strings live in the worker: the host's peak resident size stays under 128 MiB while a
/// program holds a 256 MiB string, and one that asks for more than the budget reads as
/// `memory-limit` even if it catches the error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn big_strings_stay_in_the_worker_and_the_memory_budget_holds() {
    let _alone = ALONE.lock().await;
    let rt = pooled(60_000, 600_000);
    let out = run(&rt, "const s = 'a'.repeat(2 ** 28);\nreturn s.length;").await;
    assert_value(&out, json!(1u64 << 28));
    let peak = peak_rss_kib();
    assert!(
        peak < 128 << 10,
        "the host's peak resident size is {peak} KiB"
    );
    let out = run(
        &rt,
        "let s = '';\ntry { s = 'ab'.repeat(2 ** 28); } catch (e) {}\nreturn 'caught';",
    )
    .await;
    assert_failure(
        &out,
        FailureKind::MemoryLimit,
        "memory limit reached (512 MiB)",
    );
    assert_value(&run(&rt, "return 'still here'").await, json!("still here"));
    rt.dispose().await;
}

/// Bindings, logs, values and program errors cross the worker's protocol as they do in the
/// host.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn programs_run_in_the_worker_as_in_the_host() {
    let _alone = ALONE.lock().await;
    let rt = pooled(10_000, 600_000);
    let tools = Tools::new();
    let program = "const n: number = 2;\nconsole.log('n is', n);\n\
                   const echoed = await tools.echo({deep: [[{x: n}]], s: 'é'});\n\
                   let failed = '';\n\
                   try { await tools.fail({a: 1}); } catch (e) { failed = (e as any).code; }\n\
                   return {echoed, failed};";
    let out = tools.run(&rt, program).await;
    assert_value(
        &out,
        json!({"echoed": {"deep": [[{"x": 2}]], "s": "é"}, "failed": "E_LUCK"}),
    );
    assert_eq!(out.logs, ["n is 2"]);
    let out = run(&rt, "throw new TypeError('nope');").await;
    assert_failure(&out, FailureKind::Exception, "TypeError: nope");
    let out = run(&rt, "return 1 +;").await;
    assert_failure(&out, FailureKind::Exception, "");
    assert!(matches!(
        rt.isolation(),
        Isolation::SandboxedProcess | Isolation::Process
    ));
    rt.dispose().await;
}
