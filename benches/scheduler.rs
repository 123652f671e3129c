//! The batch scheduler against the ideal schedule: 100 parallel-safe calls of 10 ms with
//! `max_parallel = 10` (ideal 100 ms) and 100 exclusive calls of 1 ms (ideal 100 ms).
//! Figures: BENCHMARKS.md.

use std::time::Duration;

use dsh_tools::{BatchOptions, Registry, ToolCall, ToolDefinition};
use serde_json::{Value, json};

fn main() {
    divan::main();
}

fn registry() -> Registry {
    let registry = Registry::new();
    for (name, parallel) in [("parallel", true), ("exclusive", false)] {
        let builder = ToolDefinition::builder(name).handler(|args: Value, _exec| async move {
            work(args["ms"].as_u64().unwrap_or(0)).await;
            Ok(Value::Null)
        });
        let builder = if parallel {
            builder.concurrency_safe()
        } else {
            builder
        };
        registry
            .register(builder.build().expect("valid"))
            .expect("registered");
    }
    registry
}

/// `ms` of off-runtime work: a thread sleep on the blocking pool is precise to well under a
/// millisecond, unlike the runtime's 1 ms timer wheel, so the ideal schedule is reachable.
async fn work(ms: u64) {
    let _ =
        tokio::task::spawn_blocking(move || std::thread::sleep(Duration::from_millis(ms))).await;
}

/// Two workers, as on the machines this runs on.
fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_time()
        .build()
        .expect("runtime")
}

fn batch(name: &str, ms: u64) -> Vec<ToolCall> {
    (0..100)
        .map(|i| ToolCall::new(i.to_string(), name, json!({ "ms": ms })))
        .collect()
}

fn run(bencher: divan::Bencher, name: &str, ms: u64) {
    let rt = runtime();
    let registry = registry();
    bencher.bench_local(|| {
        rt.block_on(registry.execute_batch(
            None,
            batch(name, ms),
            BatchOptions {
                max_parallel: 10,
                ..Default::default()
            },
        ))
    });
}

#[divan::bench(sample_count = 10, sample_size = 1)]
fn parallel_100_x_10ms_pool_10(bencher: divan::Bencher) {
    run(bencher, "parallel", 10);
}

#[divan::bench(sample_count = 10, sample_size = 1)]
fn exclusive_100_x_1ms(bencher: divan::Bencher) {
    run(bencher, "exclusive", 1);
}

/// The same work without a registry: 10 rounds of 10 concurrent 10 ms bodies.
#[divan::bench(sample_count = 10, sample_size = 1)]
fn floor_parallel_rounds(bencher: divan::Bencher) {
    let rt = runtime();
    bencher.bench_local(|| {
        rt.block_on(async {
            for _ in 0..10 {
                futures::future::join_all((0..10).map(|_| work(10))).await;
            }
        })
    });
}

/// The same work without a registry: 100 sequential 1 ms bodies.
#[divan::bench(sample_count = 10, sample_size = 1)]
fn floor_sequential_1ms(bencher: divan::Bencher) {
    let rt = runtime();
    bencher.bench_local(|| {
        rt.block_on(async {
            for _ in 0..100 {
                work(1).await;
            }
        })
    });
}
