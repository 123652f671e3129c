//! End-to-end cost of one `run_code` call whose program makes 100 sequential, or 100 parallel,
//! trivial tool calls — per language, with the real subprocess runtimes, the embedded
//! TypeScript runtime (QuickJS in this process; goal: 100 sequential calls ≤ 5 ms) and Python on
//! Monty, pooled (the runtime's default) and, for comparison, in this process. Figures:
//! BENCHMARKS.md.

use std::sync::Arc;

use dsh_tools::code::{
    CodeRuntime, EmbeddedConfig, EmbeddedRuntime, SubprocessConfig, SubprocessRuntime,
};
use dsh_tools::prelude::*;
use dsh_tools::{Mode, Registry, ToolCall, ToolDefinition};
use serde_json::{Value, json};

fn main() {
    divan::main();
}

const TS_SEQUENTIAL: &str =
    "let sum = 0;\nfor (let i = 0; i < 100; i++) sum += await tools.echo({ n: i });\nreturn sum;";
const TS_PARALLEL: &str = "const all = await Promise.all(Array.from({ length: 100 }, (_, i) => tools.echo({ n: i })));\nreturn all.length;";
const PY_SEQUENTIAL: &str =
    "total = 0\nfor i in range(100):\n    total += await tools.echo({'n': i})\nreturn total";
const PY_PARALLEL: &str = "import asyncio\nvalues = await asyncio.gather(*[tools.echo({'n': i}) for i in range(100)])\nreturn len(values)";

#[derive(Clone, Copy)]
enum Backend {
    SubprocessTypeScript,
    SubprocessPython,
    EmbeddedTypeScript,
    EmbeddedPython,
    /// Monty on an interpreter thread of this process, for comparison with the pool.
    EmbeddedPythonInProcess,
}

fn setup(backend: Backend, rt: &tokio::runtime::Runtime) -> Registry {
    let registry = Registry::new();
    let echo = ToolDefinition::builder("echo")
        .parameters(json!({"type": "object", "properties": {"n": {"type": "integer"}}}))
        .concurrency_safe()
        .handler(|args: Value, _exec| async move { Ok(args["n"].clone()) })
        .build()
        .expect("valid");
    registry.register(echo).expect("registered");
    let runtime: Arc<dyn CodeRuntime> = rt.block_on(async {
        let config = SubprocessConfig::default();
        let runtime: Arc<dyn CodeRuntime> = match backend {
            Backend::SubprocessPython => {
                Arc::new(SubprocessRuntime::python(config).await.expect("python3"))
            }
            Backend::SubprocessTypeScript => {
                Arc::new(SubprocessRuntime::typescript(config).await.expect("node"))
            }
            Backend::EmbeddedTypeScript => Arc::new(
                EmbeddedRuntime::javascript_in_process(EmbeddedConfig::default())
                    .expect("a valid config"),
            ),
            Backend::EmbeddedPython => Arc::new(
                EmbeddedRuntime::python(EmbeddedConfig::default()).expect("the Monty worker"),
            ),
            Backend::EmbeddedPythonInProcess => Arc::new(
                EmbeddedRuntime::python_in_process(EmbeddedConfig::default())
                    .expect("a valid config"),
            ),
        };
        runtime
    });
    registry.set_code_runtime(runtime);
    registry.set_mode(Mode::Code);
    registry
}

fn run(bencher: divan::Bencher, backend: Backend, program: &'static str) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let registry = setup(backend, &rt);
    bencher.bench_local(|| {
        let call = ToolCall::new(
            "bench",
            "run_code",
            json!({"code": program, "description": "Benchmark program"}),
        );
        let result = rt.block_on(registry.execute(call));
        assert!(!result.is_error(), "{result:?}");
    });
}

#[divan::bench(sample_count = 20, sample_size = 1)]
fn typescript_100_sequential(bencher: divan::Bencher) {
    run(bencher, Backend::SubprocessTypeScript, TS_SEQUENTIAL);
}

#[divan::bench(sample_count = 20, sample_size = 1)]
fn typescript_100_parallel(bencher: divan::Bencher) {
    run(bencher, Backend::SubprocessTypeScript, TS_PARALLEL);
}

#[divan::bench(sample_count = 20, sample_size = 1)]
fn python_100_sequential(bencher: divan::Bencher) {
    run(bencher, Backend::SubprocessPython, PY_SEQUENTIAL);
}

#[divan::bench(sample_count = 20, sample_size = 1)]
fn python_100_parallel(bencher: divan::Bencher) {
    run(bencher, Backend::SubprocessPython, PY_PARALLEL);
}

#[divan::bench(sample_count = 50, sample_size = 1)]
fn embedded_typescript_100_sequential(bencher: divan::Bencher) {
    run(bencher, Backend::EmbeddedTypeScript, TS_SEQUENTIAL);
}

#[divan::bench(sample_count = 50, sample_size = 1)]
fn embedded_typescript_100_parallel(bencher: divan::Bencher) {
    run(bencher, Backend::EmbeddedTypeScript, TS_PARALLEL);
}

#[divan::bench(sample_count = 50, sample_size = 1)]
fn embedded_python_100_sequential(bencher: divan::Bencher) {
    run(bencher, Backend::EmbeddedPython, PY_SEQUENTIAL);
}

#[divan::bench(sample_count = 50, sample_size = 1)]
fn embedded_python_100_parallel(bencher: divan::Bencher) {
    run(bencher, Backend::EmbeddedPython, PY_PARALLEL);
}

#[divan::bench(sample_count = 50, sample_size = 1)]
fn embedded_python_in_process_100_sequential(bencher: divan::Bencher) {
    run(bencher, Backend::EmbeddedPythonInProcess, PY_SEQUENTIAL);
}

#[divan::bench(sample_count = 50, sample_size = 1)]
fn embedded_python_in_process_100_parallel(bencher: divan::Bencher) {
    run(bencher, Backend::EmbeddedPythonInProcess, PY_PARALLEL);
}
