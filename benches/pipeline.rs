//! A call through one pre-execute hook, one guard, one wrapper, one post-execute hook and one
//! observer, against the bare pipeline. Figures: BENCHMARKS.md.

use std::sync::Arc;

use dsh_tools::hooks::{DispatchContext, ExecNext, PostNext, PreNext, ToolCallView};
use dsh_tools::{Registry, ToolCall, ToolDefinition};
use serde_json::{Value, json};

fn main() {
    divan::main();
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("runtime")
}

fn registry() -> Registry {
    let registry = Registry::new();
    let def = ToolDefinition::builder("echo")
        .parameters(json!({"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}))
        .handler(|args: Value, _exec| async move { Ok(args["text"].clone()) })
        .build()
        .expect("valid");
    registry.register(def).expect("registered");
    registry
}

#[divan::bench]
fn bare(bencher: divan::Bencher) {
    let rt = runtime();
    let registry = registry();
    let args = json!({"text": "hi"});
    bencher.bench_local(|| rt.block_on(registry.execute(ToolCall::new("1", "echo", args.clone()))));
}

#[divan::bench]
fn hooked(bencher: divan::Bencher) {
    let rt = runtime();
    let registry = registry();
    registry.on_pre_execute(|_view: Arc<ToolCallView>, next: PreNext| next.run());
    registry.guard(|view: &ToolCallView| (view.name == "forbidden").then(|| "no".to_owned()));
    registry.on_execute(|_context: DispatchContext, next: ExecNext| next.run());
    registry.on_post_execute(|_view, _result, next: PostNext| next.run());
    registry.on_result(|_view, result| {
        divan::black_box(result);
    });
    let args = json!({"text": "hi"});
    bencher.bench_local(|| rt.block_on(registry.execute(ToolCall::new("1", "echo", args.clone()))));
}
