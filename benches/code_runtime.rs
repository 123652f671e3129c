//! Code runtime latency, side by side with Node.js `worker_threads`.
//!
//! Run: `cargo bench --bench code_runtime`. Before divan's own tables it prints one comparison
//! table, measured in the same process run:
//! (a) start-to-result latency of a trivial program (TypeScript and Python, with and without a
//!     standby child) against starting a `worker_threads` Worker for the same program;
//! (b) the per-call round trip of 1,000 sequential binding calls against a worker-port round
//!     trip, and against the same calls as JSON lines over a pipe pair between two Node.js
//!     processes (the floor of any design that gives each run its own process). The Node.js
//!     figures come from `benches/baseline/worker_threads.mjs`;
//! (c) the same for the embedded TypeScript runtime, QuickJS in this process (whose goals are
//!     ≤ 0.05× the Worker start and ≤ 0.3× the worker-port round trip) and pooled in worker
//!     processes as Monty is (where every budget holds, long built-ins included), and for
//!     Python on Monty:
//!     pooled (the runtime's default: pre-started sandboxed `dsh-monty-worker` processes, each
//!     serving run after run in a fresh interpreter) and in this process (an interpreter thread
//!     per run, as QuickJS runs; not crash-proof, measured to weigh the pool's cost).
//! (d) the sandbox's cost: start-to-result of the trivial program with the default sandbox
//!     (`Sandbox::Auto`, all of it on Linux 6.12+) against `Sandbox::Off`, per language, with and
//!     without a standby child, the two interleaved run by run.

use std::path::Path;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use dsh_tools::code::{
    BindingNamespace, CodeRuntime, EmbeddedConfig, EmbeddedRuntime, RunRequest, Sandbox,
    SubprocessConfig, SubprocessRuntime,
};
use futures::FutureExt;
use tokio::runtime::Runtime;

const TRIVIAL_TS: &str = "return 1 + 1;";
const TRIVIAL_PY: &str = "return 1 + 1";
const CALLS_TS: &str = "for (let i = 0; i < 1000; i++) await tools.echo({i});\nreturn 1;";
const CALLS_PY: &str = "for i in range(1000):\n    await tools.echo({'i': i})\nreturn 1";

fn tokio() -> &'static Runtime {
    static RT: OnceLock<Runtime> = OnceLock::new();
    RT.get_or_init(|| Runtime::new().expect("a tokio runtime"))
}

fn runtime(python: bool, standby: bool) -> SubprocessRuntime {
    runtime_with(python, standby, Sandbox::Auto)
}

fn runtime_with(python: bool, standby: bool, sandbox: Sandbox) -> SubprocessRuntime {
    let config = SubprocessConfig {
        standby,
        sandbox,
        ..SubprocessConfig::default()
    };
    tokio()
        .block_on(async {
            if python {
                SubprocessRuntime::python(config).await
            } else {
                SubprocessRuntime::typescript(config).await
            }
        })
        .expect("the interpreter is installed")
}

fn request(program: &str) -> RunRequest {
    RunRequest::new(program)
        .binding(BindingNamespace::tools(["echo"]))
        .dispatch(Arc::new(|call| async move { Ok(call.args) }.boxed()))
}

fn embedded() -> EmbeddedRuntime {
    EmbeddedRuntime::javascript_in_process(EmbeddedConfig::default()).expect("a valid config")
}

fn embedded_pooled() -> EmbeddedRuntime {
    EmbeddedRuntime::javascript(EmbeddedConfig::default()).expect("the worker is built")
}

fn embedded_python() -> EmbeddedRuntime {
    EmbeddedRuntime::python(EmbeddedConfig::default()).expect("the Monty worker is built")
}

fn embedded_python_in_process() -> EmbeddedRuntime {
    EmbeddedRuntime::python_in_process(EmbeddedConfig::default()).expect("a valid config")
}

fn run_once(rt: &dyn CodeRuntime, program: &str) {
    let out = tokio()
        .block_on(rt.run(request(program)))
        .expect("a valid request");
    assert_eq!(out.error, None, "{out:?}");
}

/// Median start-to-result time of `program` over `samples` runs, in ms. Between runs the
/// thread pauses (untimed) so a standby child can finish booting, as it does between an
/// agent's turns.
fn median_ms(rt: &dyn CodeRuntime, program: &str, samples: usize) -> f64 {
    median_ms_pausing(rt, program, samples, Duration::from_millis(300))
}

fn median_ms_pausing(rt: &dyn CodeRuntime, program: &str, samples: usize, pause: Duration) -> f64 {
    let mut times: Vec<Duration> = (0..samples)
        .map(|_| {
            let start = Instant::now();
            run_once(rt, program);
            let elapsed = start.elapsed();
            std::thread::sleep(pause);
            elapsed
        })
        .collect();
    times.sort();
    times[samples / 2].as_secs_f64() * 1e3
}

/// One start-to-result time of `program`, in ms, after the same untimed pause as
/// [`median_ms`].
fn once_ms(rt: &SubprocessRuntime, program: &str) -> f64 {
    let start = Instant::now();
    run_once(rt, program);
    let elapsed = start.elapsed();
    std::thread::sleep(Duration::from_millis(300));
    elapsed.as_secs_f64() * 1e3
}

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    xs[xs.len() / 2]
}

/// (c): sandboxed against `Off`, runs interleaved so both see the same machine load.
fn sandbox_cost() {
    const SAMPLES: usize = 21;
    println!("sandbox cost on start-to-result (median of {SAMPLES} interleaved runs each)");
    println!(
        "{:<28} {:>10} {:>10} {:>10} {:>8}",
        "runtime", "off", "sandboxed", "added", "ratio"
    );
    for (name, python, standby, program) in [
        ("typescript, standby", false, true, TRIVIAL_TS),
        ("typescript, no standby", false, false, TRIVIAL_TS),
        ("python, standby", true, true, TRIVIAL_PY),
        ("python, no standby", true, false, TRIVIAL_PY),
    ] {
        let off = runtime_with(python, standby, Sandbox::Off);
        let on = runtime_with(python, standby, Sandbox::Auto);
        run_once(&off, program);
        run_once(&on, program);
        let (mut t_off, mut t_on) = (Vec::new(), Vec::new());
        for _ in 0..SAMPLES {
            t_off.push(once_ms(&off, program));
            t_on.push(once_ms(&on, program));
        }
        let (m_off, m_on) = (median(t_off), median(t_on));
        println!(
            "{:<28} {:>8.2}ms {:>8.2}ms {:>8.2}ms {:>8.2}",
            name,
            m_off,
            m_on,
            m_on - m_off,
            m_on / m_off
        );
        tokio().block_on(off.dispose());
        tokio().block_on(on.dispose());
    }
    println!();
}

fn comparison() {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("benches/baseline/worker_threads.mjs");
    let output = std::process::Command::new("node")
        .arg(&script)
        .args(["20", "1000"])
        .output()
        .expect("node runs the baseline");
    let baseline: serde_json::Value =
        serde_json::from_slice(&output.stdout).expect("the baseline prints JSON");
    let worker_start = baseline["worker_start_ms"].as_f64().unwrap_or(f64::NAN);
    let port_rt_us = baseline["port_round_trip_us"].as_f64().unwrap_or(f64::NAN);
    let pipe_rt_us = baseline["pipe_round_trip_us"].as_f64().unwrap_or(f64::NAN);

    println!("code runtime vs Node.js worker_threads (median of 15 runs each)");
    println!("{:<44} {:>10} {:>8}", "measure", "figure", "ratio");
    println!(
        "{:<44} {:>8.2}ms {:>8}",
        "worker_threads Worker start-to-result", worker_start, "1.00"
    );
    for (name, python, standby, program) in [
        ("typescript, standby", false, true, TRIVIAL_TS),
        ("typescript, no standby", false, false, TRIVIAL_TS),
        ("python, standby", true, true, TRIVIAL_PY),
        ("python, no standby", true, false, TRIVIAL_PY),
    ] {
        let rt = runtime(python, standby);
        run_once(&rt, program);
        let ms = median_ms(&rt, program, 15);
        println!(
            "{:<44} {:>8.2}ms {:>8.2}",
            format!("start-to-result, {name}"),
            ms,
            ms / worker_start
        );
        tokio().block_on(rt.dispose());
    }
    for (name, rt) in [("in-process", embedded()), ("pooled", embedded_pooled())] {
        run_once(&rt, TRIVIAL_TS);
        // No standby to wait for: 101 back-to-back runs.
        let ms = median_ms_pausing(&rt, TRIVIAL_TS, 101, Duration::ZERO);
        println!(
            "{:<44} {:>8.3}ms {:>8.3}",
            format!("start-to-result, embedded typescript ({name})"),
            ms,
            ms / worker_start
        );
        tokio().block_on(rt.dispose());
    }
    for (name, rt) in [
        ("pooled", embedded_python()),
        ("in-process", embedded_python_in_process()),
    ] {
        run_once(&rt, TRIVIAL_PY);
        // Back to back: the pool's workers are started and warm.
        let ms = median_ms_pausing(&rt, TRIVIAL_PY, 101, Duration::ZERO);
        println!(
            "{:<44} {:>8.3}ms {:>8.3}",
            format!("start-to-result, embedded python ({name})"),
            ms,
            ms / worker_start
        );
        tokio().block_on(rt.dispose());
    }
    println!(
        "{:<44} {:>8.2}us {:>8}",
        "worker-port round trip", port_rt_us, "1.00"
    );
    // What any process-per-run design pays at least: two Node.js processes, one pipe pair.
    println!(
        "{:<44} {:>8.2}us {:>8.2}",
        "pipe round trip, two Node.js processes",
        pipe_rt_us,
        pipe_rt_us / port_rt_us
    );
    let floor_us = process_pipe_floor_us();
    println!(
        "{:<44} {:>8.2}us {:>8.3}",
        "pipe round trip, this process and `cat`",
        floor_us,
        floor_us / port_rt_us
    );
    for (name, python, calls, trivial) in [
        ("typescript", false, CALLS_TS, TRIVIAL_TS),
        ("python", true, CALLS_PY, TRIVIAL_PY),
    ] {
        let rt = runtime(python, true);
        run_once(&rt, calls);
        let with_calls = median_ms(&rt, calls, 7);
        let without = median_ms(&rt, trivial, 7);
        let us = (with_calls - without) * 1e3 / 1000.0;
        println!(
            "{:<44} {:>8.2}us {:>8.2}",
            format!("binding round trip, {name}"),
            us,
            us / port_rt_us
        );
        tokio().block_on(rt.dispose());
    }
    for (name, rt) in [("in-process", embedded()), ("pooled", embedded_pooled())] {
        run_once(&rt, CALLS_TS);
        let with_calls = median_ms_pausing(&rt, CALLS_TS, 21, Duration::ZERO);
        let without = median_ms_pausing(&rt, TRIVIAL_TS, 21, Duration::ZERO);
        let us = (with_calls - without) * 1e3 / 1000.0;
        println!(
            "{:<44} {:>8.2}us {:>8.3}",
            format!("binding round trip, embedded typescript ({name})"),
            us,
            us / port_rt_us
        );
        tokio().block_on(rt.dispose());
    }
    for (name, rt) in [
        ("pooled", embedded_python()),
        ("in-process", embedded_python_in_process()),
    ] {
        run_once(&rt, CALLS_PY);
        let with_calls = median_ms_pausing(&rt, CALLS_PY, 21, Duration::ZERO);
        let without = median_ms_pausing(&rt, TRIVIAL_PY, 21, Duration::ZERO);
        let us = (with_calls - without) * 1e3 / 1000.0;
        println!(
            "{:<44} {:>8.2}us {:>8.3}",
            format!("binding round trip, embedded python ({name})"),
            us,
            us / port_rt_us
        );
        tokio().block_on(rt.dispose());
    }
    println!();
}

/// The floor of any pooled-process design: one line to a `cat` child and back over a pipe
/// pair, blocking reads and writes, median of 21 batches of 1,000 round trips, in µs.
fn process_pipe_floor_us() -> f64 {
    use std::io::{BufRead, BufReader, Write};
    let mut child = std::process::Command::new("cat")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("cat runs");
    let mut to = child.stdin.take().expect("piped");
    let mut from = BufReader::new(child.stdout.take().expect("piped"));
    let line = b"{\"type\":\"reply\",\"id\":1,\"ok\":true,\"value\":{\"i\":1}}\n";
    let mut back = Vec::new();
    let batches: Vec<f64> = (0..21)
        .map(|_| {
            let start = Instant::now();
            for _ in 0..1000 {
                to.write_all(line).expect("cat reads");
                to.flush().expect("cat reads");
                back.clear();
                from.read_until(b'\n', &mut back).expect("cat writes");
            }
            start.elapsed().as_secs_f64() * 1e6 / 1000.0
        })
        .collect();
    drop(to);
    let _ = child.wait();
    median(batches)
}

fn main() {
    sandbox_cost();
    comparison();
    divan::main();
}

#[divan::bench(args = [false, true], sample_count = 10, sample_size = 1)]
fn typescript_trivial(bencher: divan::Bencher, standby: bool) {
    let rt = runtime(false, standby);
    bencher.bench_local(|| run_once(&rt, TRIVIAL_TS));
    tokio().block_on(rt.dispose());
}

#[divan::bench(args = [false, true], sample_count = 10, sample_size = 1)]
fn python_trivial(bencher: divan::Bencher, standby: bool) {
    let rt = runtime(true, standby);
    bencher.bench_local(|| run_once(&rt, TRIVIAL_PY));
    tokio().block_on(rt.dispose());
}

#[divan::bench(sample_count = 5, sample_size = 1)]
fn typescript_1000_binding_calls(bencher: divan::Bencher) {
    let rt = runtime(false, true);
    bencher.bench_local(|| run_once(&rt, CALLS_TS));
    tokio().block_on(rt.dispose());
}

#[divan::bench(sample_count = 5, sample_size = 1)]
fn python_1000_binding_calls(bencher: divan::Bencher) {
    let rt = runtime(true, true);
    bencher.bench_local(|| run_once(&rt, CALLS_PY));
    tokio().block_on(rt.dispose());
}

#[divan::bench(sample_count = 100, sample_size = 1)]
fn embedded_typescript_trivial(bencher: divan::Bencher) {
    let rt = embedded();
    bencher.bench_local(|| run_once(&rt, TRIVIAL_TS));
    tokio().block_on(rt.dispose());
}

#[divan::bench(sample_count = 20, sample_size = 1)]
fn embedded_typescript_1000_binding_calls(bencher: divan::Bencher) {
    let rt = embedded();
    bencher.bench_local(|| run_once(&rt, CALLS_TS));
    tokio().block_on(rt.dispose());
}

#[divan::bench(sample_count = 100, sample_size = 1)]
fn embedded_typescript_pooled_trivial(bencher: divan::Bencher) {
    let rt = embedded_pooled();
    bencher.bench_local(|| run_once(&rt, TRIVIAL_TS));
    tokio().block_on(rt.dispose());
}

#[divan::bench(sample_count = 20, sample_size = 1)]
fn embedded_typescript_pooled_1000_binding_calls(bencher: divan::Bencher) {
    let rt = embedded_pooled();
    bencher.bench_local(|| run_once(&rt, CALLS_TS));
    tokio().block_on(rt.dispose());
}

#[divan::bench(sample_count = 100, sample_size = 1)]
fn embedded_python_trivial(bencher: divan::Bencher) {
    let rt = embedded_python();
    bencher.bench_local(|| run_once(&rt, TRIVIAL_PY));
    tokio().block_on(rt.dispose());
}

#[divan::bench(sample_count = 20, sample_size = 1)]
fn embedded_python_1000_binding_calls(bencher: divan::Bencher) {
    let rt = embedded_python();
    bencher.bench_local(|| run_once(&rt, CALLS_PY));
    tokio().block_on(rt.dispose());
}

#[divan::bench(sample_count = 100, sample_size = 1)]
fn embedded_python_in_process_trivial(bencher: divan::Bencher) {
    let rt = embedded_python_in_process();
    bencher.bench_local(|| run_once(&rt, TRIVIAL_PY));
    tokio().block_on(rt.dispose());
}

#[divan::bench(sample_count = 20, sample_size = 1)]
fn embedded_python_in_process_1000_binding_calls(bencher: divan::Bencher) {
    let rt = embedded_python_in_process();
    bencher.bench_local(|| run_once(&rt, CALLS_PY));
    tokio().block_on(rt.dispose());
}
