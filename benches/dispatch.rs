//! `registry.execute` of a 3-parameter typed tool against calling the same fn after
//! `serde_json::from_value` by hand, plus the invalid-arguments path, and the same call with its
//! spans recorded by `tracing-opentelemetry` into a batch span processor. Figures: BENCHMARKS.md.

use std::future::Future;

use dsh_tools::{Registry, Tool, ToolCall, ToolDefinition, ToolError, ToolExec};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

fn main() {
    divan::main();
}

#[derive(Deserialize, Serialize, JsonSchema)]
struct SumArgs {
    a: i64,
    b: i64,
    label: String,
}

async fn sum(a: i64, b: i64, label: String) -> Result<String, ToolError> {
    Ok(format!("{label}: {}", a + b))
}

struct SumTool;

impl Tool for SumTool {
    type Args = SumArgs;
    type Output = String;
    const NAME: &'static str = "sum";
    const DESCRIPTION: &'static str = "Add two numbers.";

    fn call(
        &self,
        args: SumArgs,
        _exec: ToolExec,
    ) -> impl Future<Output = Result<String, ToolError>> + Send {
        sum(args.a, args.b, args.label)
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("runtime")
}

fn args() -> Value {
    json!({"a": 2, "b": 40, "label": "total"})
}

#[divan::bench]
fn direct_call(bencher: divan::Bencher) {
    let rt = runtime();
    let args = args();
    bencher.bench_local(|| {
        rt.block_on(async {
            let parsed: SumArgs = serde_json::from_value(args.clone()).expect("valid");
            let text = sum(parsed.a, parsed.b, parsed.label).await.expect("ok");
            divan::black_box(text)
        })
    });
}

#[divan::bench]
fn registry_execute(bencher: divan::Bencher) {
    let rt = runtime();
    let registry = Registry::new();
    registry
        .register(ToolDefinition::from_tool(SumTool))
        .expect("registered");
    let args = args();
    bencher.bench_local(|| rt.block_on(registry.execute(ToolCall::new("1", "sum", args.clone()))));
}

#[divan::bench]
fn registry_execute_invalid_arguments(bencher: divan::Bencher) {
    let rt = runtime();
    let registry = Registry::new();
    registry
        .register(ToolDefinition::from_tool(SumTool))
        .expect("registered");
    let args = json!({"a": "two", "label": 3});
    bencher.bench_local(|| rt.block_on(registry.execute(ToolCall::new("1", "sum", args.clone()))));
}

/// Takes the batches the span processor exports and drops them: what is measured is the cost on
/// the calling thread (spans built, attributes recorded, queued), not a network.
#[derive(Debug)]
struct Discard;

impl opentelemetry_sdk::trace::SpanExporter for Discard {
    async fn export(
        &self,
        batch: Vec<opentelemetry_sdk::trace::SpanData>,
    ) -> opentelemetry_sdk::error::OTelSdkResult {
        divan::black_box(batch);
        Ok(())
    }
}

/// Named to run after the rows without a subscriber: no dispatcher exists while they run.
#[divan::bench]
fn registry_execute_with_otel_batch_exporter(bencher: divan::Bencher) {
    use opentelemetry::trace::TracerProvider as _;
    use tracing_subscriber::layer::SubscriberExt;

    let provider = opentelemetry_sdk::trace::SdkTracerProvider::builder()
        .with_batch_exporter(Discard)
        .build();
    let subscriber = tracing_subscriber::registry()
        .with(tracing_opentelemetry::layer().with_tracer(provider.tracer("bench")));
    let _guard = tracing::subscriber::set_default(subscriber);
    let rt = runtime();
    let registry = Registry::new();
    registry
        .register(ToolDefinition::from_tool(SumTool))
        .expect("registered");
    let args = args();
    bencher.bench_local(|| rt.block_on(registry.execute(ToolCall::new("1", "sum", args.clone()))));
}
