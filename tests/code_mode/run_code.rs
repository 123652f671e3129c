//! Code mode end to end with the real Node.js and Python runtimes, and with the embedded
//! interpreters, whose thread drives the binding calls' scheduler itself.

use crate::common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{call, mirror};
use dsh_tools::code::CodeModeError;
use dsh_tools::code::{Budgets, CodeRuntime, SubprocessConfig, SubprocessRuntime};
use dsh_tools::events::ToolEvent;
use dsh_tools::hooks::{PreNext, ToolCallView};
use dsh_tools::prelude::*;
use dsh_tools::result::ErrorCode;
use dsh_tools::{Mode, Registry, ToolDefinition, ToolError, ToolExec, ToolResult};
use serde_json::{Value, json};

#[derive(Clone, Copy, Debug)]
enum Lang {
    Ts,
    Py,
    /// TypeScript on QuickJS in this process.
    #[cfg(feature = "embedded-js")]
    QuickJs,
    /// Python on Monty on an interpreter thread of this process (the pooled Monty hands its
    /// calls to the scheduler like the subprocess runtimes).
    #[cfg(feature = "embedded-python")]
    MontyInProcess,
}

/// Every TypeScript runtime.
fn typescript() -> Vec<Lang> {
    vec![
        Lang::Ts,
        #[cfg(feature = "embedded-js")]
        Lang::QuickJs,
    ]
}

/// Every Python runtime.
fn python() -> Vec<Lang> {
    vec![
        Lang::Py,
        #[cfg(feature = "embedded-python")]
        Lang::MontyInProcess,
    ]
}

/// Whether `lang` has exceptions with attributes (Monty's have none).
fn is_full_python_or_typescript(lang: Lang) -> bool {
    #[cfg(feature = "embedded-python")]
    if matches!(lang, Lang::MontyInProcess) {
        return false;
    }
    let _ = lang;
    true
}

/// Every runtime with the program for its language.
fn each_with(ts: &'static str, py: &'static str) -> Vec<(Lang, &'static str)> {
    let ts = typescript().into_iter().map(|lang| (lang, ts));
    ts.chain(python().into_iter().map(|lang| (lang, py)))
        .collect()
}

async fn runtime(lang: Lang) -> Arc<dyn CodeRuntime> {
    let config = SubprocessConfig {
        budgets: Budgets {
            compute_ms: 10_000,
            max_wall_ms: 20_000,
            ..Budgets::default()
        },
        ..Default::default()
    };
    match lang {
        Lang::Ts => Arc::new(
            SubprocessRuntime::typescript(config)
                .await
                .expect("node is installed"),
        ),
        Lang::Py => Arc::new(
            SubprocessRuntime::python(config)
                .await
                .expect("python3 is installed"),
        ),
        #[cfg(feature = "embedded-js")]
        Lang::QuickJs => quickjs(embedded()),
        #[cfg(feature = "embedded-python")]
        Lang::MontyInProcess => Arc::new(
            dsh_tools::code::EmbeddedRuntime::python_in_process(embedded())
                .expect("a valid config"),
        ),
    }
}

#[cfg(feature = "embedded-js")]
fn embedded() -> dsh_tools::code::EmbeddedConfig {
    dsh_tools::code::EmbeddedConfig {
        budgets: Budgets {
            compute_ms: 10_000,
            max_wall_ms: 20_000,
            ..Budgets::default()
        },
        ..Default::default()
    }
}

/// A code-mode registry of `tools` on `runtime`.
#[cfg(feature = "embedded-js")]
fn code_mode_with(
    runtime: Arc<dyn CodeRuntime>,
    tools: impl IntoIterator<Item = ToolDefinition>,
) -> Registry {
    let registry = Registry::new();
    for tool in tools {
        registry.register(tool).unwrap();
    }
    registry.set_code_runtime(runtime);
    registry.set_mode(Mode::Code);
    registry
}

/// QuickJS with `config`, in this process.
#[cfg(feature = "embedded-js")]
fn quickjs(config: dsh_tools::code::EmbeddedConfig) -> Arc<dyn CodeRuntime> {
    Arc::new(
        dsh_tools::code::EmbeddedRuntime::javascript_in_process(config).expect("a valid config"),
    )
}

/// Tracks overlap of the `nap` tool's bodies.
#[derive(Default)]
struct Overlap {
    active: AtomicUsize,
    peak: AtomicUsize,
}

fn nap(name: &str, parallel: bool, overlap: &Arc<Overlap>) -> ToolDefinition {
    let overlap = overlap.clone();
    let builder = ToolDefinition::builder(name)
        .parameters(json!({"type": "object", "properties": {"ms": {"type": "integer"}, "i": {"type": "integer"}}}))
        .handler(move |args: Value, exec: ToolExec| {
            let overlap = overlap.clone();
            async move {
                let now = overlap.active.fetch_add(1, Ordering::SeqCst) + 1;
                overlap.peak.fetch_max(now, Ordering::SeqCst);
                let ms = args["ms"].as_u64().unwrap_or(0);
                tokio::select! {
                    _ = tokio::time::sleep(Duration::from_millis(ms)) => {}
                    _ = exec.signal().cancelled() => {}
                }
                overlap.active.fetch_sub(1, Ordering::SeqCst);
                Ok(args["i"].clone())
            }
        });
    let builder = if parallel {
        builder.concurrency_safe()
    } else {
        builder
    };
    builder.build().unwrap()
}

fn failing() -> ToolDefinition {
    ToolDefinition::builder("broken")
        .handler(|_, _| async { Err(ToolError::new("broken on purpose").with_code("EBROKEN")) })
        .build()
        .unwrap()
}

async fn code_registry(lang: Lang, mode: Mode) -> (Registry, Arc<Overlap>) {
    let registry = Registry::new();
    let overlap = Arc::new(Overlap::default());
    registry.register(nap("nap", true, &overlap)).unwrap();
    registry
        .register(nap("exclusive_nap", false, &overlap))
        .unwrap();
    registry.register(failing()).unwrap();
    registry.register(mirror("echo-back")).unwrap();
    registry.set_code_runtime(runtime(lang).await);
    registry.set_mode(mode);
    (registry, overlap)
}

fn run_code(id: &str, code: &str) -> dsh_tools::ToolCall {
    call(
        id,
        "run_code",
        json!({"code": code, "description": "Test program"}),
    )
}

fn output(result: &ToolResult) -> &Value {
    result
        .value()
        .unwrap_or_else(|| panic!("run_code failed: {result:?}"))
}

#[tokio::test]
async fn model_views_per_mode() {
    let registry = Registry::new();
    registry.register(mirror("b")).unwrap();
    registry.register(mirror("a")).unwrap();
    let native = registry.model_view(None).unwrap();
    assert_eq!(
        native
            .tools
            .iter()
            .map(|t| t.name.as_str())
            .collect::<Vec<_>>(),
        ["a", "b"]
    );
    assert!(native.sections.is_empty());
    registry.set_mode(Mode::Code);
    assert_eq!(
        registry.model_view(None).unwrap_err(),
        CodeModeError::NoRuntime(Mode::Code)
    );
    registry.set_code_runtime(runtime(Lang::Ts).await);
    let code = registry.model_view(None).unwrap();
    assert_eq!(
        code.tools
            .iter()
            .map(|t| t.name.as_str())
            .collect::<Vec<_>>(),
        ["run_code"]
    );
    let ids: Vec<(&str, u32)> = code.sections.iter().map(|s| (s.id, s.order)).collect();
    assert_eq!(ids, [("tools:code-only", 99), ("tools:sdk", 150)]);
    assert!(
        code.sections[1].text.contains("```ts"),
        "{}",
        code.sections[1].text
    );
    assert_eq!(code, registry.model_view(None).unwrap(), "deterministic");
    let agent = registry.agent("both");
    agent.present_as(Mode::Both).unwrap();
    let both = registry.model_view(Some(agent.id())).unwrap();
    assert_eq!(
        both.tools
            .iter()
            .map(|t| t.name.as_str())
            .collect::<Vec<_>>(),
        ["a", "b", "run_code"]
    );
    assert_eq!(both.sections.len(), 1);
}

#[tokio::test]
async fn code_mode_refuses_direct_calls_before_any_hook() {
    let (registry, _) = code_registry(Lang::Ts, Mode::Code).await;
    let hooks = Arc::new(AtomicUsize::new(0));
    let h = hooks.clone();
    registry.on_pre_execute(move |_view: Arc<ToolCallView>, next: PreNext| {
        h.fetch_add(1, Ordering::SeqCst);
        next.run()
    });
    let result = registry.execute(call("1", "nap", json!({}))).await;
    assert_eq!(result.error_code(), Some(ErrorCode::UnknownTool));
    assert_eq!(
        result.error().unwrap().message,
        "unknown tool \"nap\": only `run_code` is callable directly — call `nap` from inside a `run_code` program instead"
    );
    assert_eq!(hooks.load(Ordering::SeqCst), 0);
    assert!(registry.get("run_code", None).is_some());
}

#[tokio::test]
async fn both_mode_exposes_both_paths() {
    let (registry, _) = code_registry(Lang::Ts, Mode::Both).await;
    let direct = registry.execute(call("1", "nap", json!({"i": 7}))).await;
    assert_eq!(direct.value(), Some(&json!(7)));
    let program = registry
        .execute(run_code("2", "return await tools.nap({ i: 8 });"))
        .await;
    assert_eq!(output(&program)["result"], json!(8));
}

#[tokio::test]
async fn native_mode_has_no_run_code() {
    let registry = Registry::new();
    registry.set_code_runtime(runtime(Lang::Ts).await);
    let result = registry.execute(run_code("1", "return 1;")).await;
    assert_eq!(result.error_code(), Some(ErrorCode::UnknownTool));
}

const TS_PARALLEL: &str = r#"
const started = Date.now();
const values = await Promise.all(Array.from({ length: 20 }, (_, i) => tools.nap({ ms: 50, i })));
console.log(`sum=${values.reduce((a: number, b: number) => a + b, 0)}`);
return { values, elapsed: Date.now() - started };
"#;

const PY_PARALLEL: &str = r#"
import asyncio, time
started = time.monotonic()
values = await asyncio.gather(*[tools.nap({"ms": 50, "i": i}) for i in range(20)])
print(f"sum={sum(values)}")
return {"values": list(values), "elapsed": (time.monotonic() - started) * 1000}
"#;

/// Monty has no `time` module.
#[cfg(feature = "embedded-python")]
const MONTY_PARALLEL: &str = r#"
import asyncio
values = await asyncio.gather(*[tools.nap({"ms": 50, "i": i}) for i in range(20)])
print(f"sum={sum(values)}")
return {"values": list(values)}
"#;

async fn parallel_calls_overlap(lang: Lang, program: &str) {
    let (registry, overlap) = code_registry(lang, Mode::Code).await;
    let result = registry.execute(run_code("run", program)).await;
    let out = output(&result);
    assert_eq!(out["logs"], json!(["sum=190"]));
    assert_eq!(out["result"]["values"], json!((0..20).collect::<Vec<_>>()));
    // Measured inside the program, so interpreter start-up on a busy machine does not count.
    // Monty has no clock for a program: the peak below shows the overlap.
    #[cfg(feature = "embedded-python")]
    let clocked = !matches!(lang, Lang::MontyInProcess);
    #[cfg(not(feature = "embedded-python"))]
    let clocked = true;
    if clocked {
        let elapsed = out["result"]["elapsed"].as_f64().expect("elapsed");
        assert!(
            elapsed < (20 * 50 / 2) as f64,
            "{lang:?}: {elapsed} ms is not well under 1000 ms"
        );
    }
    assert_eq!(
        overlap.peak.load(Ordering::SeqCst),
        10,
        "{lang:?}: pool of max_parallel_sub_calls"
    );
}

#[tokio::test]
async fn typescript_parallel_calls_overlap() {
    for lang in typescript() {
        parallel_calls_overlap(lang, TS_PARALLEL).await;
    }
}

#[tokio::test]
async fn python_parallel_calls_overlap() {
    parallel_calls_overlap(Lang::Py, PY_PARALLEL).await;
    #[cfg(feature = "embedded-python")]
    parallel_calls_overlap(Lang::MontyInProcess, MONTY_PARALLEL).await;
}

#[tokio::test]
async fn exclusive_calls_never_overlap() {
    for (lang, program) in each_with(
        "await Promise.all([1,2,3,4].map(i => tools.exclusive_nap({ ms: 20, i })));\nawait Promise.all([tools.nap({ms: 20}), tools.exclusive_nap({ms: 20}), tools.nap({ms: 20})]);",
        "import asyncio\nawait asyncio.gather(*[tools.exclusive_nap({'ms': 20, 'i': i}) for i in range(4)])\nawait asyncio.gather(tools.nap({'ms': 20}), tools.exclusive_nap({'ms': 20}), tools.nap({'ms': 20}))",
    ) {
        let (registry, overlap) = code_registry(lang, Mode::Code).await;
        let result = registry.execute(run_code("run", program)).await;
        assert!(!result.is_error(), "{lang:?}: {result:?}");
        assert_eq!(
            overlap.peak.load(Ordering::SeqCst),
            1,
            "{lang:?}: an exclusive call overlapped"
        );
    }
}

/// A failed sub-call rejects with `ToolCallError` carrying the tool's name (`toolName`; Python
/// `tool_name`) and its error code (`code`: the author's `EBROKEN`, the runtime's `UNKNOWN_TOOL`).
#[tokio::test]
async fn a_failed_sub_call_rejects_with_tool_call_error_and_the_run_continues() {
    for (lang, program) in each_with(
        "try { await tools.broken({}); } catch (e) { if (e instanceof ToolCallError) console.log(`${e.toolName}: ${e.message} [${e.code}]`); }\nreturn await tools[\"echo-back\"]({ n: 1 });",
        "try:\n    await tools.broken({})\nexcept ToolCallError as e:\n    print(f\"{e.tool_name}: {e} [{e.code}]\")\nreturn await getattr(tools, \"echo-back\")({\"n\": 1})",
    )
    .into_iter()
    .filter(|(lang, _)| is_full_python_or_typescript(*lang))
    {
        let (registry, _) = code_registry(lang, Mode::Code).await;
        let result = registry.execute(run_code("run", program)).await;
        let out = output(&result);
        assert_eq!(
            out["logs"],
            json!(["broken: broken on purpose [EBROKEN]"]),
            "{lang:?}"
        );
        assert_eq!(out["result"], json!({"n": 1}), "{lang:?}");
    }
    // Monty's exceptions carry a message and no attributes (the code-mode chapter): the message still says
    // which tool failed and why.
    #[cfg(feature = "embedded-python")]
    {
        let (registry, _) = code_registry(Lang::MontyInProcess, Mode::Code).await;
        let program = "try:\n    await tools.broken({})\nexcept ToolCallError as e:\n    print(str(e))\nreturn await getattr(tools, \"echo-back\")({\"n\": 1})";
        let result = registry.execute(run_code("run", program)).await;
        let out = output(&result);
        assert_eq!(out["logs"], json!(["broken on purpose"]));
        assert_eq!(out["result"], json!({"n": 1}));
    }
}

/// A misspelt key in a program's call to a tool that declares nothing (closed by default)
/// rejects with `ToolCallError` (`INVALID_ARGS`) naming the key it meant, in every runtime.
#[tokio::test]
async fn a_misspelt_key_in_a_program_is_named_in_its_tool_call_error() {
    /// Assign a ticket.
    #[dsh_tools::tool]
    async fn assign(assignee: String) -> String {
        assignee
    }
    for (lang, program) in each_with(
        "try { await tools.assign({ asignee: 'ada' }); } catch (e) { return String(e.message); }",
        "try:\n    await tools.assign({'asignee': 'ada'})\nexcept ToolCallError as e:\n    return str(e)",
    ) {
        let (registry, _) = code_registry(lang, Mode::Code).await;
        registry.register(AssignTool).unwrap();
        let result = registry.execute(run_code("run", program)).await;
        let message = output(&result)["result"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        assert!(
            message.contains("unknown property \"asignee\"; did you mean \"assignee\"?"),
            "{lang:?}: {message}"
        );
    }
}

#[tokio::test]
async fn sub_calls_are_nested_pipeline_calls_with_derived_ids() {
    for lang in typescript() {
        let (registry, _) = code_registry(lang, Mode::Code).await;
        let seen = Arc::new(Mutex::new(Vec::new()));
        let s = seen.clone();
        registry.on_result(move |view: &ToolCallView, _result| {
            s.lock().unwrap().push((
                view.call_id.clone(),
                view.root_call_id.clone(),
                view.parent.clone(),
            ));
        });
        let mut events = registry.subscribe();
        let result = registry
            .execute(run_code(
                "outer",
                "await tools.nap({}); await tools.nap({});",
            ))
            .await;
        assert!(!result.is_error(), "{result:?}");
        let seen = seen.lock().unwrap().clone();
        assert_eq!(
            seen,
            [
                (
                    "outer:code:1".to_owned(),
                    "outer".to_owned(),
                    Some("outer".to_owned())
                ),
                (
                    "outer:code:2".to_owned(),
                    "outer".to_owned(),
                    Some("outer".to_owned())
                ),
                ("outer".to_owned(), "outer".to_owned(), None),
            ]
        );
        let mut starts = 0;
        let mut dispatches = 0;
        while let Ok(event) = events.try_recv() {
            match event {
                ToolEvent::CodeDispatchStart { .. } => starts += 1,
                ToolEvent::CodeDispatch { is_error, .. } => {
                    dispatches += 1;
                    assert!(!is_error);
                }
                _ => {}
            }
        }
        assert_eq!((starts, dispatches), (2, 2));
    }
}

#[tokio::test]
async fn cancelling_the_outer_call_settles_every_sub_call() {
    for (lang, program) in each_with(
        "await Promise.all([tools.nap({ ms: 10000 }), tools.nap({ ms: 10000 })]);\nawait tools.nap({ ms: 10000 });",
        "import asyncio\nawait asyncio.gather(tools.nap({'ms': 10000}), tools.nap({'ms': 10000}))\nawait tools.nap({'ms': 10000})",
    ) {
        let (registry, overlap) = code_registry(lang, Mode::Code).await;
        let mut events = registry.subscribe();
        // Cancel once the program's first two sub-calls have started, not after a guess of
        // how long that takes.
        let signal = tokio_util::sync::CancellationToken::new();
        let mut watch = registry.subscribe();
        let trigger = signal.clone();
        tokio::spawn(async move {
            let mut started = 0;
            while let Ok(event) = watch.recv().await {
                if matches!(event, ToolEvent::CodeDispatchStart { .. }) {
                    started += 1;
                    if started == 2 {
                        trigger.cancel();
                        return;
                    }
                }
            }
        });
        let started = Instant::now();
        let result = registry
            .execute(run_code("run", program).with_signal(signal))
            .await;
        assert!(started.elapsed() < Duration::from_secs(60), "{lang:?}");
        assert_eq!(
            result.error_code(),
            Some(ErrorCode::Aborted),
            "{lang:?}: {result:?}"
        );
        assert_eq!(
            overlap.active.load(Ordering::SeqCst),
            0,
            "{lang:?}: a sub-call body is still running"
        );
        let (mut starts, mut settles) = (0, 0);
        while let Ok(event) = events.try_recv() {
            match event {
                ToolEvent::CodeDispatchStart { .. } => starts += 1,
                ToolEvent::CodeDispatch { .. } => settles += 1,
                _ => {}
            }
        }
        assert_eq!(starts, settles, "{lang:?}: every started sub-call settled");
        assert!(starts >= 2, "{lang:?}: the program had started its calls");
    }
}

#[tokio::test]
async fn failures_and_rendering() {
    let (registry, _) = code_registry(Lang::Ts, Mode::Code).await;
    let failed = registry
        .execute(run_code(
            "1",
            "console.log('before'); throw new Error('kaput');",
        ))
        .await;
    let message = &failed.error().unwrap().message;
    assert_eq!(failed.error_code(), Some(ErrorCode::CodeRunFailed));
    assert!(
        message.starts_with("code run failed (exception): "),
        "{message}"
    );
    assert!(message.contains("kaput"), "{message}");
    assert!(message.ends_with("\nCaptured output:\nbefore"), "{message}");
    assert_eq!(failed.text(), format!("Error: {message}"));

    let rendered = registry
        .execute(run_code(
            "2",
            "console.log('a'); console.log('b'); return { n: [1, 2] };",
        ))
        .await;
    assert_eq!(
        rendered.text(),
        "a\nb\n{\n  \"n\": [\n    1,\n    2\n  ]\n}"
    );
    let empty = registry.execute(run_code("3", "")).await;
    assert_eq!(empty.text(), "(run_code completed with no output)");

    let no_description = registry
        .execute(call(
            "4",
            "run_code",
            json!({"code": "return 1", "description": "  "}),
        ))
        .await;
    assert_eq!(
        no_description.error().unwrap().message,
        "invalid description: expected a non-empty string"
    );
    let missing = registry
        .execute(call("5", "run_code", json!({"code": "return 1"})))
        .await;
    assert_eq!(
        missing.error().unwrap().message,
        "invalid arguments: missing required property \"description\""
    );
}

/// A runtime for a language no SDK renderer knows.
struct Ruby;

impl CodeRuntime for Ruby {
    fn language(&self) -> &'static str {
        "ruby"
    }

    fn isolation(&self) -> dsh_tools::code::Isolation {
        dsh_tools::code::Isolation::Process
    }

    fn run(
        &self,
        _request: dsh_tools::code::RunRequest,
    ) -> futures::future::BoxFuture<
        '_,
        Result<dsh_tools::code::RunOutcome, dsh_tools::code::CodeRuntimeError>,
    > {
        Box::pin(async { Err(dsh_tools::code::CodeRuntimeError::Disposed) })
    }

    fn dispose(&self) -> futures::future::BoxFuture<'_, ()> {
        Box::pin(async {})
    }
}

#[test]
fn a_runtime_language_without_a_renderer_is_a_view_error() {
    let registry = Registry::new();
    registry.set_code_runtime(Arc::new(Ruby));
    registry.set_mode(Mode::Both);
    let err = registry.model_view(None).unwrap_err();
    assert_eq!(err, CodeModeError::UnknownLanguage("ruby".into()));
    assert_eq!(
        err.to_string(),
        "dsh-tools: no SDK renderer registered for runtime language \"ruby\" (known: \"typescript\", \"python\")"
    );
}

#[tokio::test]
async fn images_contexts_and_conclude_turn_carry_over_to_the_outer_call() {
    for lang in typescript() {
        let (registry, _) = code_registry(lang, Mode::Code).await;
        let camera = ToolDefinition::builder("camera")
            .render(|_args, _value| {
                vec![
                    dsh_tools::result::ContentBlock::text("a picture"),
                    dsh_tools::result::ContentBlock::Image {
                        media_type: "image/png".into(),
                        data: "iVBORw0KGgo=".into(),
                    },
                ]
            })
            .handler(|_args, exec: ToolExec| async move {
                exec.defer_context(dsh_tools::result::AdditionalContext::text(
                    "tool",
                    "camera context",
                ));
                exec.conclude_turn();
                Ok(json!({"shot": 1}))
            })
            .build()
            .unwrap();
        registry.register(camera).unwrap();
        let result = registry
            .execute(run_code(
                "run",
                "const shot = await tools.camera({});\nreturn shot;",
            ))
            .await;
        assert_eq!(
            output(&result)["result"],
            json!({"shot": 1}),
            "the program gets the value, not the content"
        );
        let contexts = result.additional_contexts();
        assert_eq!(contexts.len(), 2, "{contexts:?}");
        assert_eq!(contexts[0].source.name.as_deref(), Some("tools-code-mode"));
        assert!(
            matches!(
                contexts[0].content[1],
                dsh_tools::result::ContentBlock::Image { .. }
            ),
            "the image content is deferred"
        );
        assert_eq!(
            dsh_tools::__private::blocks_text(&contexts[1].content),
            "camera context"
        );
        assert!(
            matches!(
                result,
                ToolResult::Success {
                    concludes_turn: true,
                    ..
                }
            ),
            "forwarded from the nested success"
        );
    }
}

#[tokio::test]
async fn an_output_limit_keeps_the_runtime_text_and_the_captured_output() {
    let registry = Registry::new();
    let config = SubprocessConfig {
        budgets: Budgets {
            max_output_bytes: 200,
            ..Budgets::default()
        },
        ..Default::default()
    };
    registry.set_code_runtime(Arc::new(
        SubprocessRuntime::typescript(config).await.unwrap(),
    ));
    registry.set_mode(Mode::Code);
    let result = registry
        .execute(run_code(
            "1",
            "console.log('line 0'); return 'x'.repeat(500);",
        ))
        .await;
    let message = &result.error().unwrap().message;
    // The runtime's own text stays, with the captured output after it.
    assert_eq!(
        message,
        "code run failed (output-limit): outer output exceeded 200 bytes\nCaptured output:\nline 0"
    );
}

#[tokio::test]
async fn queued_calls_are_abandoned_when_the_run_settles() {
    for lang in typescript() {
        let registry = Registry::new();
        let overlap = Arc::new(Overlap::default());
        registry.register(nap("nap", true, &overlap)).unwrap();
        registry.set_code_runtime_with(
            runtime(lang).await,
            dsh_tools::code::RunCodeConfig {
                max_parallel_sub_calls: 1,
            },
        );
        registry.set_mode(Mode::Code);
        for round in 0..10 {
            let mut events = registry.subscribe();
            // The program returns without awaiting its calls: only the first may have started. It
            // outlives the run (and is cancelled with it), so its slot frees only after settle,
            // whatever the machine's load.
            let result = registry
                .execute(run_code(
                    "run",
                    "tools.nap({ms: 5000}); tools.nap({}); tools.nap({}); return 1;",
                ))
                .await;
            assert_eq!(output(&result)["result"], json!(1));
            let mut starts = 0;
            while let Ok(event) = events.try_recv() {
                if let ToolEvent::CodeDispatchStart { .. } = event {
                    starts += 1;
                }
            }
            assert!(
                starts <= 1,
                "round {round}: {starts} sub-calls started after the run settled"
            );
        }
    }
}

/// An embedded interpreter's thread drives its run's scheduler: a call that finishes in its first
/// poll runs on that thread, without waking a tokio worker; one that has to wait goes on to a
/// worker. A subprocess runtime's calls all run on the workers.
#[cfg(feature = "embedded-js")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn embedded_runs_drive_their_binding_calls_on_the_interpreter_thread() {
    let here = || json!(std::thread::current().name().unwrap_or("unnamed"));
    let thread = ToolDefinition::builder("thread")
        .concurrency_safe()
        .handler(move |_, _| async move { Ok(here()) })
        .build()
        .unwrap();
    // The first call of a pair waits for the second; the second's wait ends at once.
    let barrier = Arc::new(tokio::sync::Barrier::new(2));
    let pair = ToolDefinition::builder("pair")
        .concurrency_safe()
        .handler(move |_, _| {
            let barrier = barrier.clone();
            async move {
                barrier.wait().await;
                Ok(here())
            }
        })
        .build()
        .unwrap();
    let ts = "const alone = await tools.thread({});\nconst both = await Promise.all([tools.pair({}), tools.pair({})]);\nreturn [alone, ...both];";
    let mut cases = vec![(Lang::Ts, ts, false), (Lang::QuickJs, ts, true)];
    #[cfg(feature = "embedded-python")]
    cases.push((
        Lang::MontyInProcess,
        "import asyncio\nalone = await tools.thread({})\nboth = await asyncio.gather(tools.pair({}), tools.pair({}))\nreturn [alone, *both]",
        true,
    ));
    for (lang, program, embedded) in cases {
        let registry = code_mode_with(runtime(lang).await, [thread.clone(), pair.clone()]);
        let result = registry.execute(run_code("run", program)).await;
        let names = output(&result)["result"].clone();
        let on_interpreter: Vec<bool> = names
            .as_array()
            .expect("three thread names")
            .iter()
            .map(|name| name == "dsh-embedded")
            .collect();
        let expected = if embedded {
            [true, false, true]
        } else {
            [false, false, false]
        };
        assert_eq!(
            on_interpreter, expected,
            "{lang:?}: the calls ran on {names}"
        );
    }
}

/// The host's work on an embedded interpreter's thread (a tool body run there, the pipeline
/// around it) is not charged to the program's compute budget.
#[cfg(feature = "embedded-js")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn host_work_on_the_interpreter_thread_is_not_charged_to_the_compute_budget() {
    let busy = ToolDefinition::builder("busy")
        .handler(|_, _| async {
            // Burns CPU without yielding, so it all happens in the call's first poll.
            let started = Instant::now();
            let mut spins = 0u64;
            while started.elapsed() < Duration::from_millis(300) {
                spins = std::hint::black_box(spins + 1);
            }
            Ok(json!(spins > 0))
        })
        .build()
        .unwrap();
    let runtime = quickjs(dsh_tools::code::EmbeddedConfig {
        budgets: Budgets {
            compute_ms: 200,
            ..Budgets::default()
        },
        ..embedded()
    });
    let registry = code_mode_with(runtime, [busy]);
    let result = registry
        .execute(run_code(
            "run",
            // The loop after the calls meets the interrupt hook, which checks the budget.
            "const a = await tools.busy({});\nconst b = await tools.busy({});\nlet n = 0;\nfor (let i = 0; i < 2e6; i++) n += i % 3;\nreturn a && b && n > 0;",
        ))
        .await;
    assert_eq!(output(&result)["result"], json!(true), "{result:?}");
}

/// Dropping `run_code`'s future abandons an embedded run's lane as it abandons a spawned one:
/// the program's next call rejects, so a program calling tools forever ends and gives its run
/// slot back.
#[cfg(feature = "embedded-js")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_run_code_abandons_the_calls_of_an_embedded_run() {
    let overlap = Arc::new(Overlap::default());
    let runtime = quickjs(dsh_tools::code::EmbeddedConfig {
        budgets: Budgets {
            max_concurrent_runs: 1,
            compute_ms: 1_000_000,
            max_wall_ms: 1_000_000,
            max_binding_calls: u64::MAX,
            ..Budgets::default()
        },
        // No budget ends the endless program before the test's own bound.
        ..embedded()
    });
    let registry = code_mode_with(runtime, [nap("nap", true, &overlap)]);
    let mut events = registry.subscribe();
    let endless = registry.execute(run_code("endless", "for (;;) await tools.nap({});"));
    tokio::select! {
        result = endless => panic!("the endless program ended: {result:?}"),
        () = async {
            while let Ok(event) = events.recv().await {
                if matches!(event, ToolEvent::CodeDispatchStart { .. }) {
                    return;
                }
            }
        } => {}
    }
    // `endless` is dropped: the only run slot frees once that program has ended.
    let next = tokio::time::timeout(
        Duration::from_secs(120),
        registry.execute(run_code("next", "return 1;")),
    )
    .await
    .expect("the abandoned program ended and freed its run slot");
    assert_eq!(output(&next)["result"], json!(1));
}
