//! What Python on Monty (`EmbeddedRuntime::python`) promises beyond the shared behaviour suite:
//! a program cannot reach the host, and hostile programs (100,000-deep nesting in source and
//! data, huge literals, recursion and allocation bombs) end in a typed outcome while the host
//! carries on; a worker that dies mid-run reads as `worker-exit` and the next run works; a
//! pooled worker serves run after run with nothing of one run visible to the next, and one
//! whose run was cancelled or overran a budget is ended and replaced.
//!
//! Tests that count or kill this process's worker processes take [`WORKERS`] exclusively; the
//! others share it, so that no test sees (or kills) another's workers.

// The test calls libc directly (`kill` of a worker process), with a SAFETY note at each block.
#![allow(unsafe_code)]

mod code_runtime_support;
#[path = "../src/bin/dsh-tools/toolset.rs"]
mod toolset;

use std::time::Duration;

use code_runtime_support::*;
use dsh_tools::code::{
    Budgets, CodeRuntime, EmbeddedConfig, EmbeddedRuntime, FailureKind, RunOutcome,
};
use dsh_tools::prelude::*;
use serde_json::json;
use tokio::sync::RwLock;
use tokio_util::sync::CancellationToken;

/// Held shared by every test, exclusively by those that look at worker processes.
static WORKERS: RwLock<()> = RwLock::const_new(());

fn config() -> EmbeddedConfig {
    EmbeddedConfig {
        budgets: Budgets {
            compute_ms: 10_000,
            max_wall_ms: 60_000,
            max_memory_mb: 128,
            ..Budgets::default()
        },
        ..EmbeddedConfig::default()
    }
}

fn python() -> EmbeddedRuntime {
    EmbeddedRuntime::python(config()).expect("the Monty worker is built with the tests")
}

/// A pool that keeps only its last warm worker: sequential runs all land on one process.
fn one_worker(compute_ms: u64) -> EmbeddedRuntime {
    let base = config();
    EmbeddedRuntime::python(EmbeddedConfig {
        budgets: Budgets {
            compute_ms,
            ..base.budgets.clone()
        },
        python_idle_workers: 0,
        ..base
    })
    .expect("the Monty worker is built with the tests")
}

/// Runs `program`, then checks that the same runtime still runs a trivial program.
async fn then_healthy(rt: &EmbeddedRuntime, program: &str) -> RunOutcome {
    let out = run(rt, program).await;
    assert_value(&run(rt, "return 'still here'").await, json!("still here"));
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_program_cannot_reach_the_host() {
    let _shared = WORKERS.read().await;
    let rt = python();
    for (program, needle) in [
        ("return open('/etc/passwd').read()", "PermissionError"),
        ("import os\nreturn os.getenv('HOME')", "PermissionError"),
        (
            "from pathlib import Path\nreturn Path('/etc/passwd').read_text()",
            "PermissionError",
        ),
        ("import sys\nreturn sys.argv", "AttributeError"),
        ("import subprocess", "ModuleNotFoundError"),
        ("import socket", "ModuleNotFoundError"),
        ("return __import__('os')", "NameError"),
        ("return globals()", "NameError"),
        ("return eval('1 + 1')", "NameError"),
        ("exec('x = 1')", "NameError"),
        // The exit status by which the worker reports its allocator's refusal is not the
        // program's to choose.
        ("raise SystemExit('65')", "SystemExit"),
        ("import sys\nsys.exit(65)", ""),
    ] {
        assert_failure(&run(&rt, program).await, FailureKind::Exception, needle);
    }
    // The raw call entry point the bindings are built on is no way around the host's check of
    // own names.
    let tools = Tools::new();
    let out = tools
        .run(&rt, "return await _dsh_call('tools', 'rm', {'path': '/'})")
        .await;
    assert_value(&out, json!([false, "unknown binding \"tools.rm\"", null]));
    assert_eq!(tools.calls.load(std::sync::atomic::Ordering::SeqCst), 0);
    rt.dispose().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deep_nesting_in_source_is_a_syntax_error() {
    let _shared = WORKERS.read().await;
    let rt = python();
    // As deep as a program of at most 256 KiB can nest each form.
    for (open, close, depth) in [
        ("[", "]", 100_000),
        ("(", ")", 100_000),
        ("{'k': ", "}", 30_000),
    ] {
        let program = format!(
            "x = {}1{}\nreturn 1",
            open.repeat(depth),
            close.repeat(depth)
        );
        let out = then_healthy(&rt, &program).await;
        assert_failure(&out, FailureKind::Exception, "SyntaxError");
    }
    rt.dispose().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deep_nesting_in_data_is_refused_as_output() {
    let _shared = WORKERS.read().await;
    let rt = python();
    let out = then_healthy(
        &rt,
        "v = []\nfor i in range(100000):\n    v = [v]\nreturn v",
    )
    .await;
    assert_failure(
        &out,
        FailureKind::InvalidOutput,
        "nests deeper than 4096 levels",
    );
    // Built, printed and dropped inside the interpreter: no harm done.
    let out = then_healthy(
        &rt,
        "v = {}\nfor i in range(100000):\n    v = {'k': v}\nprint(str(v)[:6])\nreturn 1",
    )
    .await;
    assert_value(&out, json!(1));
    assert_eq!(out.logs, ["{'k': "]);
    rt.dispose().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_recursion_bomb_is_a_recursion_error() {
    let _shared = WORKERS.read().await;
    let rt = python();
    let out = then_healthy(&rt, "def f(n):\n    return f(n + 1)\nreturn f(0)").await;
    assert_failure(&out, FailureKind::Exception, "RecursionError");
    let message = out.error.unwrap().message;
    assert!(message.contains("[Previous line repeated"), "{message}");
    assert!(message.len() < 1_000, "{message}");
    rt.dispose().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn allocation_bombs_and_huge_literals_end_as_memory_limit() {
    let _shared = WORKERS.read().await;
    let rt = python();
    for program in [
        "x = 'a' * (10 ** 12)\nreturn len(x)",
        "x = [0] * (10 ** 10)\nreturn len(x)",
        "x = 2 ** (10 ** 10)\nreturn 1",
        "hoard = []\nwhile True:\n    hoard.append([0] * 100000)",
    ] {
        let out = then_healthy(&rt, program).await;
        assert_failure(
            &out,
            FailureKind::MemoryLimit,
            "memory limit reached (128 MiB)",
        );
    }
    // A huge literal makes a program too long to run at all.
    let literal = format!("x = '{}'\nreturn len(x)", "a".repeat(50 << 20));
    let out = then_healthy(&rt, &literal).await;
    assert_failure(&out, FailureKind::Exception, "at most 262144 are accepted");
    assert_value(
        &then_healthy(
            &rt,
            &format!("x = '{}'\nreturn len(x)", "a".repeat(200_000)),
        )
        .await,
        json!(200_000),
    );
    rt.dispose().await;
}

/// This process's live `dsh-monty-worker` children.
fn workers() -> Vec<i32> {
    let me = std::process::id().to_string();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_killed_mid_run_reads_as_worker_exit_and_is_replaced() {
    let _exclusive = WORKERS.write().await;
    let rt = python();
    let tools = Tools::new();
    let live = rt.run(tools.request("await tools.report({'pid': 1})\nawait host.forever()"));
    let killer = async {
        while tools.reported.lock().unwrap().is_empty() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        // The run's worker and the idle ones: the crash of any is the host's to absorb.
        let killed = workers();
        for &pid in &killed {
            // SAFETY: a plain signal to a child process of this test.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
        killed
    };
    let (out, killed) = tokio::join!(live, killer);
    assert_failure(&out.unwrap(), FailureKind::WorkerExit, "killed by signal");
    // An idle worker is skipped once it is seen dead; one killed but still exiting is not yet
    // dead to anyone, so the next run waits for the kills to land.
    for pid in killed {
        assert!(
            eventually_dead(pid).await,
            "worker {pid} still running after SIGKILL"
        );
    }
    assert_value(&run(&rt, "return 'still here'").await, json!("still here"));
    rt.dispose().await;
}

/// Whether process `pid` has died (a zombie or gone) within a generous failure bound.
async fn eventually_dead(pid: i32) -> bool {
    for _ in 0..1_000 {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        let state = stat
            .rsplit_once(") ")
            .and_then(|(_, rest)| rest.split_whitespace().next());
        if matches!(state, None | Some("Z") | Some("X")) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    false
}

/// CPU time process `pid` has used, in clock ticks.
fn cpu_ticks(pid: i32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let rest = stat.rsplit_once(") ").map_or("", |(_, rest)| rest);
    // utime and stime: fields 14 and 15 of the line, 12 and 13 after the name.
    rest.split_whitespace()
        .skip(11)
        .take(2)
        .filter_map(|n| n.parse::<u64>().ok())
        .sum()
}

/// A program that computes without calling or printing, and whose worker is killed, ends as
/// `worker-exit`: it is not run again on a fresh worker with a fresh budget (where its loop,
/// seconds of CPU time, would end and its call be made).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_program_whose_worker_dies_ends_as_worker_exit_and_runs_once() {
    let _exclusive = WORKERS.write().await;
    let rt = one_worker(10_000);
    assert_value(&run(&rt, "return 1").await, json!(1));
    let pid = the_worker();
    let idle_ticks = cpu_ticks(pid);
    let tools = Tools::new();
    let live = rt.run(tools.request(
        "for i in range(25_000_000):\n    pass\nawait tools.report({'pid': 1})\nreturn 'finished'",
    ));
    let killer = async {
        // An idle worker waits parked: CPU time it gains is the program's loop running.
        tokio::time::timeout(Duration::from_secs(30), async {
            while cpu_ticks(pid) < idle_ticks + 10 {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        })
        .await
        .expect("the program starts computing on the warm worker");
        // SAFETY: a plain signal to a child process of this test.
        unsafe { libc::kill(pid, libc::SIGKILL) };
    };
    let (out, ()) = tokio::join!(
        well_before_the_ceiling(async { live.await.unwrap() }),
        killer
    );
    assert_failure(&out, FailureKind::WorkerExit, "killed by signal");
    assert_eq!(tools.calls.load(std::sync::atomic::Ordering::SeqCst), 0);
    assert_value(&run(&rt, "return 'still here'").await, json!("still here"));
    rt.dispose().await;
}

/// The Python SDK's calling form, keyword arguments, works on Monty as on CPython
/// (`tools.echo(a=1)` sends `{"a": 1}`, `tools.echo()` sends `{}`); one value works too (`None`
/// is sent as `null`), and mixing the two is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bindings_take_keyword_arguments_like_the_sdk_says() {
    let _shared = WORKERS.read().await;
    let rt = python();
    let tools = Tools::new();
    let out = tools
        .run(
            &rt,
            "a = await tools.echo(path='x', limit=2)\nb = await tools.echo({'path': 'y'})\n\
             c = await tools.echo()\nd = await tools.echo(None)\nreturn [a, b, c, d]",
        )
        .await;
    assert_value(
        &out,
        json!([{"path": "x", "limit": 2}, {"path": "y"}, {}, null]),
    );
    let out = tools
        .run(&rt, "return await tools.echo({'a': 1}, b=2)")
        .await;
    assert_failure(&out, FailureKind::Exception, "not both");
    let out = tools.run(&rt, "return await tools.echo({}, {})").await;
    assert_failure(&out, FailureKind::Exception, "one argument");
}

/// Frames cross between host and worker through two shared rings of 256 KiB: calls, replies and
/// output several times that size stream through them both ways at once, in order, run after
/// run on the same worker.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn frames_larger_than_the_shared_rings_stream_through_them() {
    let _exclusive = WORKERS.write().await;
    let rt = one_worker(10_000);
    let tools = Tools::new();
    let program = "import asyncio\nbig = 'y' * 700000\n\
                   replies = await asyncio.gather(*[tools.echo(s=big + str(i)) for i in range(4)])\n\
                   print('z' * 600000)\nprint('after')\n\
                   return [r['s'][-1] + str(len(r['s'])) for r in replies]";
    let mut pid = None;
    for _ in 0..3 {
        let out = tools.run(&rt, program).await;
        assert_value(&out, json!(["0700001", "1700001", "2700001", "3700001"]));
        assert_eq!(out.logs.len(), 2, "two lines printed");
        assert_eq!(out.logs[0], "z".repeat(600_000));
        assert_eq!(out.logs[1], "after");
        let now = the_worker();
        assert_eq!(*pid.get_or_insert(now), now, "one worker serves every run");
    }
    rt.dispose().await;
}

/// A worker that writes impossible positions into the shared ring (here a stand-in program,
/// built with the C compiler Rust links with, that claims 2^40 bytes are waiting) ends its run
/// as `worker-exit`; the host reads nothing past the ring and carries on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_that_corrupts_the_shared_ring_is_ended() {
    let _shared = WORKERS.read().await;
    let dir = tempfile::tempdir().expect("temporary directory");
    let source = dir.path().join("hostile.c");
    std::fs::write(
        &source,
        "#include <stdint.h>\n#include <sys/mman.h>\n#include <unistd.h>\n\
         int main(void) {\n\
           uint64_t *ring = mmap(0, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, 5, 0);\n\
           if (ring == MAP_FAILED) return 2;\n\
           ring[0] = (uint64_t)1 << 40; /* the tail of the ring to the host */\n\
           write(3, \"\\1\", 1);\n\
           sleep(60);\n\
           return 0;\n\
         }\n",
    )
    .expect("source written");
    let fake = dir.path().join("hostile-worker");
    let built = std::process::Command::new("cc")
        .arg("-o")
        .arg(&fake)
        .arg(&source)
        .status();
    if !built.is_ok_and(|status| status.success()) {
        eprintln!("skipped: no C compiler (`cc`) to build a hostile stand-in worker");
        return;
    }
    let hostile = EmbeddedRuntime::python(EmbeddedConfig {
        python_worker: Some(fake),
        python_idle_workers: 0,
        ..config()
    })
    .expect("a pool of the stand-in worker");
    let out = run(&hostile, "return 1").await;
    assert_failure(
        &out,
        FailureKind::WorkerExit,
        "worker broke the frame protocol",
    );
    hostile.dispose().await;
    let rt = python();
    assert_value(&run(&rt, "return 'still here'").await, json!("still here"));
    rt.dispose().await;
}

/// The one live worker of this process (the caller holds [`WORKERS`] exclusively).
#[track_caller]
fn the_worker() -> i32 {
    let pids = workers();
    assert_eq!(pids.len(), 1, "expected one worker process, found {pids:?}");
    pids[0]
}

/// One worker process serves run after run, each in a fresh interpreter: globals, module-level
/// objects and the binding global's attributes set by one run are gone in the next.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_serves_many_runs_and_no_state_survives_a_run() {
    let _exclusive = WORKERS.write().await;
    let rt = one_worker(10_000);
    let tools = Tools::new();
    assert_value(&tools.run(&rt, "return 0").await, json!(0));
    let pid = the_worker();
    let first = tools
        .run(
            &rt,
            "global counter, cache\ncounter = 41\ncache = {'seen': [1]}\n\
             cache['seen'].append(2)\ntools.leak = 'from run 1'\n\
             return [counter, cache['seen'], tools.leak]",
        )
        .await;
    assert_value(&first, json!([41, [1, 2], "from run 1"]));
    let second = tools
        .run(
            &rt,
            "found = []\ntry:\n    found.append(counter)\nexcept NameError:\n    pass\n\
             try:\n    found.append(cache)\nexcept NameError:\n    pass\n\
             try:\n    found.append(tools.leak)\nexcept AttributeError:\n    pass\n\
             return found",
        )
        .await;
    assert_value(&second, json!([]));
    for i in 0..20 {
        assert_value(&tools.run(&rt, &format!("return {i}")).await, json!(i));
    }
    // All of it on the one process.
    assert_eq!(the_worker(), pid);
    rt.dispose().await;
}

/// A worker whose run was cancelled mid-way, or overran the compute budget, is ended (its
/// process is gone) and the next run gets another one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_or_over_budget_run_ends_its_worker() {
    let _exclusive = WORKERS.write().await;
    let rt = one_worker(1_000);
    let tools = Tools::new();
    assert_value(&tools.run(&rt, "return 0").await, json!(0));
    let pid = the_worker();
    let signal = CancellationToken::new();
    let request = tools
        .request("await tools.report({'pid': 1})\nawait host.forever()")
        .signal(signal.clone());
    let canceller = async {
        while tools.reported.lock().unwrap().is_empty() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        signal.cancel();
    };
    let (out, ()) = tokio::join!(rt.run(request), canceller);
    assert_failure(&out.unwrap(), FailureKind::Abort, "run aborted");
    assert!(
        wait_gone(pid).await,
        "the cancelled run's worker {pid} is still alive"
    );
    assert_value(&tools.run(&rt, "return 1").await, json!(1));
    let pid = the_worker();
    let out = tools.run(&rt, "while True:\n    pass").await;
    assert_failure(&out, FailureKind::Timeout, "compute budget exhausted");
    assert!(
        wait_gone(pid).await,
        "the timed-out run's worker {pid} is still alive"
    );
    assert_value(&tools.run(&rt, "return 2").await, json!(2));
    rt.dispose().await;
}

/// A program whose calls are all answered at once is answered by polling, without the run
/// going back to its wait; the wait's duties (the caller's cancel, the compute budget, the wall
/// clock) still reach it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_of_calls_answered_at_once_still_sees_cancel_and_budget() {
    let _shared = WORKERS.read().await;
    // No call limit: the budget, not the count, must end the second run.
    let rt = EmbeddedRuntime::python(EmbeddedConfig {
        budgets: Budgets {
            compute_ms: 1_000,
            max_binding_calls: u64::MAX,
            ..Budgets::default()
        },
        ..config()
    })
    .expect("the Monty worker is built with the tests");
    let tools = Tools::new();
    let endless = "while True:\n    await tools.echo({'x': 1})";
    let signal = CancellationToken::new();
    let request = tools.request(endless).signal(signal.clone());
    let canceller = async {
        while tools.calls.load(std::sync::atomic::Ordering::SeqCst) < 2_000 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        signal.cancel();
    };
    // A failure bound only: the run ends at the cancel.
    let (out, ()) = tokio::time::timeout(Duration::from_secs(120), async {
        tokio::join!(rt.run(request), canceller)
    })
    .await
    .expect("the cancel reaches a run answering calls by polling");
    assert_failure(&out.unwrap(), FailureKind::Abort, "run aborted");
    let out = tokio::time::timeout(Duration::from_secs(120), tools.run(&rt, endless))
        .await
        .expect("the compute budget reaches a run answering calls by polling");
    assert_failure(&out, FailureKind::Timeout, "compute budget exhausted");
    rt.dispose().await;
    // The wall clock is the host's alone to watch (no rlimit stands in for it).
    let rt = EmbeddedRuntime::python(EmbeddedConfig {
        budgets: Budgets {
            compute_ms: 600_000,
            max_wall_ms: 1_000,
            max_binding_calls: u64::MAX,
            ..Budgets::default()
        },
        ..config()
    })
    .expect("the Monty worker is built with the tests");
    let out = tokio::time::timeout(Duration::from_secs(120), tools.run(&rt, endless))
        .await
        .expect("the wall clock reaches a run answering calls by polling");
    assert_failure(&out, FailureKind::Timeout, "wall-clock ceiling reached");
    rt.dispose().await;
}

/// Waits (bounded) until process `pid` is gone.
async fn wait_gone(pid: i32) -> bool {
    for _ in 0..500 {
        if process_gone(pid as u64) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    false
}

/// A failed call's code (the tool's own, here `E_LUCK`) reaches the interpreter with its
/// message. Monty's exceptions carry one string and no attributes, so `ToolCallError` (another
/// name for `RuntimeError`) cannot hold it: the raw call the bindings are built on shows it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_call_brings_its_code_into_the_interpreter() {
    let _shared = WORKERS.read().await;
    let rt = python();
    let tools = Tools::new();
    let out = tools
        .run(
            &rt,
            "raw = await _dsh_call('tools', 'fail', {'why': 1})\n\
             try:\n    await tools.fail({'why': 2})\nexcept ToolCallError as e:\n    caught = e\n\
             try:\n    caught.code\n    attribute = 'present'\nexcept AttributeError:\n    attribute = 'absent'\n\
             return [raw, str(caught), attribute]",
        )
        .await;
    assert_value(
        &out,
        json!([
            [false, "no luck with {\"why\":1}", "E_LUCK"],
            "no luck with {\"why\":2}",
            "absent"
        ]),
    );
    rt.dispose().await;
}

/// The in-process variant the benchmarks weigh the pool against runs the same programs: bindings,
/// overlapping calls, `print`, failures.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_in_process_variant_runs_the_same_programs() {
    let rt = EmbeddedRuntime::python_in_process(config()).expect("a valid config");
    let tools = Tools::new();
    let out = tools
        .run(
            &rt,
            "import asyncio\nprint('a', 1)\nx = await tools.echo(k=[1, 'two'])\n\
             ys = await asyncio.gather(*(tools.slow(i) for i in range(3)))\n\
             try:\n    await tools.fail({})\nexcept ToolCallError as e:\n    f = str(e)\n\
             return [x, ys, f]",
        )
        .await;
    assert_value(
        &out,
        json!([{"k": [1, "two"]}, [{"slept": 0}, {"slept": 1}, {"slept": 2}], "no luck with {}"]),
    );
    assert_eq!(out.logs, ["a 1"]);
    assert!(
        tools
            .max_in_flight
            .load(std::sync::atomic::Ordering::SeqCst)
            >= 2
    );
    assert_failure(
        &run(&rt, "raise ValueError('boom')").await,
        FailureKind::Exception,
        "ValueError: boom",
    );
    rt.dispose().await;
}

/// The main job's Python program (`examples/programs/crate_summary.py`) answers the same on the
/// pooled Monty runtime as on CPython.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_main_jobs_python_program_gives_identical_results_on_monty_and_cpython() {
    let _shared = WORKERS.read().await;
    let program = include_str!("../examples/programs/crate_summary.py");
    let cpython = dsh_tools::code::SubprocessRuntime::python(Default::default())
        .await
        .expect("python3 on PATH");
    assert_main_job_alike(
        std::sync::Arc::new(python()),
        std::sync::Arc::new(cpython),
        repo_tools,
        program,
    )
    .await;
}

/// The main job's tools: the example toolset over this repository.
fn repo_tools() -> Vec<dsh_tools::ToolDefinition> {
    toolset::definitions(env!("CARGO_MANIFEST_DIR"))
}

/// The prompt tells the model where Monty's Python differs from what the Python SDK guide lets a
/// program expect (no `tool_name` or `code` on a failed call's error); on CPython it adds nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_prompt_says_what_monty_lacks() {
    let _shared = WORKERS.read().await;
    let sections = |runtime: std::sync::Arc<dyn CodeRuntime>| {
        let registry = dsh_tools::Registry::new();
        registry.register_all(repo_tools()).expect("registered");
        registry.set_mode(dsh_tools::Mode::Code);
        registry.set_code_runtime(runtime);
        registry.model_view(None).expect("code-mode view").sections
    };
    let monty = std::sync::Arc::new(python());
    let on_monty = sections(monty.clone());
    let note = on_monty
        .iter()
        .find(|section| section.id == "tools:runtime")
        .expect("a runtime section on Monty");
    assert!(
        note.text.contains("str(error)") && note.text.contains("no `tool_name` or `code`"),
        "{}",
        note.text
    );
    assert!(on_monty.windows(2).all(|w| w[0].order < w[1].order));
    monty.dispose().await;
    let cpython = std::sync::Arc::new(
        dsh_tools::code::SubprocessRuntime::python(Default::default())
            .await
            .expect("python3 on PATH"),
    );
    assert!(
        sections(cpython.clone())
            .iter()
            .all(|section| section.id != "tools:runtime")
    );
    cpython.dispose().await;
}

/// While a program computes without calling or printing, the host waits: it does not spin on
/// the worker's doorbell (Monty flushes its print writer at its checkpoints, which once rang
/// the parked host each time with nothing to read). The host's CPU time over a run that burns
/// its whole compute budget stays a small part of that budget.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_host_waits_while_a_program_computes() {
    let _alone = WORKERS.write().await;
    let rt = one_worker(600);
    assert_value(&run(&rt, "return 1").await, json!(1));
    let before = process_cpu_ms();
    let out = run(&rt, "while True:\n    pass").await;
    let host_ms = process_cpu_ms() - before;
    assert_failure(&out, FailureKind::Timeout, "compute budget");
    assert!(
        host_ms < 150.0,
        "the host used {host_ms:.0} ms of CPU while the program used 600 ms"
    );
    rt.dispose().await;
}
