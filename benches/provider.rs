//! A provider step's overhead beyond `execute_batch`: 10 cheap calls read from a Chat
//! Completions response, run, and turned into the next request's messages, against the same 10
//! calls handed to `execute_batch` directly, each run after the same answer is built (untimed).
//! Figures: BENCHMARKS.md.
//!
//! Allocations are counted beside the times (divan's `AllocProfiler`), as they are what a step
//! adds to the batch.

use dsh_tools::provider::{Provider, ToolLoop};
use dsh_tools::registry::BatchOptions;
use dsh_tools::{Registry, ToolCall, ToolDefinition};
use serde_json::{Value, json};

#[global_allocator]
static ALLOC: divan::AllocProfiler = divan::AllocProfiler::system();

fn main() {
    divan::main();
}

const CALLS: usize = 10;

fn registry() -> Registry {
    let registry = Registry::new();
    let add = ToolDefinition::builder("add")
        .parameters(json!({"type": "object", "properties": {
            "a": {"type": "integer"}, "b": {"type": "integer"}}, "required": ["a", "b"]}))
        .concurrency_safe()
        .handler(|args: Value, _| async move {
            Ok(json!(
                args["a"].as_i64().unwrap_or(0) + args["b"].as_i64().unwrap_or(0)
            ))
        })
        .build()
        .expect("valid");
    registry.register(add).expect("registered");
    registry
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("runtime")
}

/// The baseline: the calls built by hand and run with `execute_batch`.
///
/// It is given the same input as [`step_10`] (the model's answer, built before each run and not
/// timed), which it hands back unread: building an answer leaves the heap and the caches as a
/// step finds them, and that alone slows the code run next by about 6 % (see BENCHMARKS.md), which
/// is not the step's work.
#[divan::bench]
fn execute_batch_10(bencher: divan::Bencher) {
    let registry = registry();
    let runtime = runtime();
    bencher.with_inputs(response).bench_local_values(|answer| {
        let calls = (0..CALLS)
            .map(|i| ToolCall::new(format!("call_{i}"), "add", json!({"a": i, "b": 1})))
            .collect();
        let results =
            runtime.block_on(registry.execute_batch(None, calls, BatchOptions::default()));
        (answer, results)
    });
}

/// [`execute_batch_10`] with no input built before it: the baseline as measured until
/// 2026-12-07.
#[divan::bench]
fn execute_batch_10_no_input(bencher: divan::Bencher) {
    let registry = registry();
    let runtime = runtime();
    bencher.bench_local(|| {
        let calls = (0..CALLS)
            .map(|i| ToolCall::new(format!("call_{i}"), "add", json!({"a": i, "b": 1})))
            .collect();
        runtime.block_on(registry.execute_batch(None, calls, BatchOptions::default()))
    });
}

/// A Chat Completions answer making the 10 calls.
fn response() -> Value {
    let tool_calls: Vec<Value> = (0..CALLS)
        .map(|i| {
            json!({"id": format!("call_{i}"), "type": "function", "function": {
            "name": "add", "arguments": format!("{{\"a\": {i}, \"b\": 1}}")}})
        })
        .collect();
    json!({"choices": [{"index": 0, "finish_reason": "tool_calls",
        "message": {"role": "assistant", "content": null, "tool_calls": tool_calls}}]})
}

/// A loop over [`registry`] whose `tools()` has run (so `add` is strict, as in a real loop).
fn tool_loop(registry: &Registry) -> ToolLoop {
    let mut tool_loop = ToolLoop::new(registry, None, Provider::OpenAiChat);
    tool_loop.tools().expect("tools");
    tool_loop
}

/// The same calls as a model's answer: parsed (argument strings), run, and the next messages
/// built. The answer is handed over as a client gives it (deserialized before the step, not
/// timed), since the step takes it by value.
#[divan::bench]
fn step_10(bencher: divan::Bencher) {
    let registry = registry();
    let runtime = runtime();
    let tool_loop = tool_loop(&registry);
    bencher
        .with_inputs(response)
        .bench_local_values(|response| runtime.block_on(tool_loop.step(response)).expect("a step"));
}

/// The step's first part alone: the calls read from the answer (and the model's turn kept).
#[divan::bench]
fn step_part_parse_10(bencher: divan::Bencher) {
    let registry = registry();
    let tool_loop = tool_loop(&registry);
    bencher
        .with_inputs(response)
        .bench_local_values(|response| tool_loop.parse(response).expect("parsed"));
}

/// The step's last part alone: the next request's messages from the calls and their results.
#[divan::bench]
fn step_part_messages_10(bencher: divan::Bencher) {
    let registry = registry();
    let runtime = runtime();
    let tool_loop = tool_loop(&registry);
    let step = runtime
        .block_on(tool_loop.step(response()))
        .expect("a step");
    let parsed = tool_loop.parse(response()).expect("parsed");
    bencher.bench_local(|| tool_loop.next_messages(&parsed, &step.results));
}
