//! The batch scheduler against the ideal schedule: 100 parallel-safe calls of 10 ms with
//! `max_parallel = 10` (ideal 100 ms) and 100 exclusive calls of 1 ms (ideal 100 ms).
//! Figures: BENCHMARKS.md.

use std::time::Duration;

use dsh_tools::registry::BatchOptions;
use dsh_tools::{Registry, ToolCall, ToolDefinition};
use serde_json::{Value, json};

fn main() {
    divan::main();
}

fn registry() -> Registry {
    let registry = Registry::new();
    for (name, parallel) in [("parallel", true), ("exclusive", false)] {
        let builder = ToolDefinition::builder(name).handler(move |args: Value, _exec| async move {
            let ms = args["ms"].as_u64().unwrap_or(0);
            if parallel {
                wait(ms).await
            } else {
                compute(ms)
            }
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

/// `ms` of waiting off the runtime (I/O-like): a thread sleep on the blocking pool is precise to
/// well under a millisecond, unlike the runtime's 1 ms timer wheel, so the ideal is reachable.
async fn wait(ms: u64) {
    let _ =
        tokio::task::spawn_blocking(move || std::thread::sleep(Duration::from_millis(ms))).await;
}

/// `ms` of CPU work on the calling thread (an exclusive call runs alone, so it may).
fn compute(ms: u64) {
    let until = std::time::Instant::now() + Duration::from_millis(ms);
    while std::time::Instant::now() < until {
        std::hint::spin_loop();
    }
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
                futures::future::join_all((0..10).map(|_| wait(10))).await;
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
                compute(1);
            }
        })
    });
}
