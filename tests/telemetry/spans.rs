//! Each call's `execute_tool` span, pinned attribute by attribute.

use std::collections::BTreeMap;
use std::sync::Arc;

use dsh_tools::code::{Budgets, SubprocessConfig, SubprocessRuntime};
use dsh_tools::hooks::{ApprovalOutcome, PostNext, PreDecision, PreNext, ToolCallView};
use dsh_tools::registry::BatchOptions;
use dsh_tools::{Mode, Registry, ToolDefinition, ToolError};
use serde_json::json;
use tracing::Instrument;

use crate::capture::{Capture, Span};
use crate::common::{call, mirror};
use dsh_tools::prelude::*;

fn fields(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(name, value)| ((*name).to_owned(), (*value).to_owned()))
        .collect()
}

fn failing() -> ToolDefinition {
    ToolDefinition::builder("fails")
        .description("Always fails.")
        .parameters(json!({"type": "object"}))
        .handler(|_args, _exec| async { Err(ToolError::new("boom")) })
        .build()
        .expect("valid definition")
}

#[test]
fn the_convention_version_is_named() {
    assert_eq!(
        dsh_tools::telemetry::SEMCONV,
        "semantic-conventions-genai v0.1.0"
    );
}

/// A call whose span no subscriber takes (none installed, or a filter leaving it out) opens no
/// stage span either: nothing of it is traced, and nothing is built for it.
#[tokio::test]
async fn a_call_span_nobody_takes_has_no_stage_spans() {
    let (capture, _guard) = Capture::install_filtered(|metadata| metadata.name() != "execute_tool");
    let registry = Registry::new();
    registry.register(mirror("echo")).unwrap();
    let result = registry.execute(call("c1", "echo", json!({"n": 1}))).await;
    assert!(!result.is_error());
    assert!(capture.named("execute").is_empty(), "{:?}", capture.spans());
}

#[tokio::test]
async fn a_native_call_is_one_execute_tool_span() {
    let (capture, _guard) = Capture::install();
    let registry = Registry::new();
    registry.register(mirror("echo")).unwrap();
    let result = registry.execute(call("c1", "echo", json!({"n": 1}))).await;
    assert!(!result.is_error());
    let span = capture.call("c1");
    // Exactly these: no arguments or result without the opt-in, no error.
    assert_eq!(
        span.fields,
        fields(&[
            ("otel.name", "execute_tool echo"),
            ("otel.kind", "internal"),
            ("gen_ai.operation.name", "execute_tool"),
            ("gen_ai.tool.name", "echo"),
            ("gen_ai.tool.call.id", "c1"),
            ("gen_ai.tool.type", "function"),
            ("gen_ai.tool.description", "Return the arguments."),
            ("dsh.mode", "native"),
        ])
    );
    let children: Vec<&str> = capture
        .children(&span)
        .iter()
        .map(|child| child.name)
        .collect();
    assert_eq!(children, ["execute"]);
}

/// A tool that does not exist has no type: `gen_ai.tool.type` names what a tool is
/// (`function`, `extension`, `datastore`), and such a call reached none.
#[tokio::test]
async fn an_unknown_tools_span_claims_no_type() {
    let (capture, _guard) = Capture::install();
    let registry = Registry::new();
    registry.execute(call("c1", "missing", json!({}))).await;
    let span = capture.call("c1");
    assert_eq!(
        span.fields,
        fields(&[
            ("otel.name", "execute_tool missing"),
            ("otel.kind", "internal"),
            ("otel.status_code", "error"),
            ("otel.status_description", "unknown tool \"missing\""),
            ("gen_ai.operation.name", "execute_tool"),
            ("gen_ai.tool.name", "missing"),
            ("gen_ai.tool.call.id", "c1"),
            ("error.type", "UNKNOWN_TOOL"),
            ("dsh.mode", "native"),
        ])
    );
}

#[tokio::test]
async fn an_agents_call_names_its_scope_and_mode() {
    let (capture, _guard) = Capture::install();
    let registry = Registry::new();
    registry.register(mirror("echo")).unwrap();
    let agent = registry.agent("planner");
    registry
        .execute(call("c1", "echo", json!({})).with_agent(agent.id().clone()))
        .await;
    let span = capture.call("c1");
    assert_eq!(span.field("dsh.agent.id"), Some("planner"));
    assert_eq!(span.field("dsh.mode"), Some("native"));
}

#[tokio::test]
async fn a_failing_call_records_its_error_code_and_status() {
    let (capture, _guard) = Capture::install();
    let registry = Registry::new();
    registry.register(mirror("echo")).unwrap();
    registry.register(failing()).unwrap();
    let invalid = registry
        .execute(call("bad", "echo", json!({"n": "x"})))
        .await;
    let span = capture.call("bad");
    assert_eq!(span.field("error.type"), Some("INVALID_ARGS"));
    assert_eq!(span.field("otel.status_code"), Some("error"));
    assert_eq!(
        span.field("otel.status_description"),
        Some(invalid.error().unwrap().message.as_str())
    );
    registry.execute(call("boom", "fails", json!({}))).await;
    let span = capture.call("boom");
    // An error without a code is the conventions' fallback.
    assert_eq!(span.field("error.type"), Some("_OTHER"));
    assert_eq!(span.field("otel.status_description"), Some("boom"));
    registry.execute(call("none", "missing", json!({}))).await;
    let span = capture.call("none");
    assert_eq!(span.field("error.type"), Some("UNKNOWN_TOOL"));
    assert_eq!(span.field("gen_ai.tool.description"), None);
}

#[tokio::test]
async fn arguments_and_results_only_when_opted_in() {
    let (capture, _guard) = Capture::install();
    let registry = Registry::new();
    registry.register(mirror("echo")).unwrap();
    registry.register(failing()).unwrap();
    registry.execute(call("off", "echo", json!({"n": 1}))).await;
    let off = capture.call("off");
    assert_eq!(off.field("gen_ai.tool.call.arguments"), None);
    assert_eq!(off.field("gen_ai.tool.call.result"), None);

    registry.set_span_content(true);
    registry.execute(call("on", "echo", json!({"n": 1}))).await;
    let on = capture.call("on");
    assert_eq!(on.field("gen_ai.tool.call.arguments"), Some(r#"{"n":1}"#));
    assert_eq!(on.field("gen_ai.tool.call.result"), Some(r#"{"n":1}"#));
    registry.execute(call("err", "fails", json!({}))).await;
    assert_eq!(
        capture.call("err").field("gen_ai.tool.call.result"),
        Some(r#""boom""#)
    );
}

#[tokio::test]
async fn the_stages_are_child_spans_of_the_call() {
    let (capture, _guard) = Capture::install();
    let registry = Registry::new();
    registry.register(mirror("echo")).unwrap();
    registry.on_pre_execute(|view: Arc<ToolCallView>, next: PreNext| async move {
        if view.call_id == "deny" {
            PreDecision::Deny {
                reason: "no".into(),
            }
        } else if view.call_id == "ask" {
            PreDecision::Ask { reason: None }
        } else {
            next.run().await
        }
    });
    registry.on_post_execute(|_view, _result, next: PostNext| next.run());
    registry.set_approver(|_request| async { ApprovalOutcome::AllowedOnce });

    registry.execute(call("ask", "echo", json!({}))).await;
    let span = capture.call("ask");
    let children = capture.children(&span);
    let named: Vec<&str> = children.iter().map(|child| child.name).collect();
    assert_eq!(
        named,
        ["pre_execute", "approval", "execute", "post_execute"]
    );
    assert_eq!(children[0].field("dsh.decision"), Some("ask"));
    assert_eq!(children[1].field("dsh.approval"), Some("allowed"));

    registry.execute(call("allow", "echo", json!({}))).await;
    let span = capture.call("allow");
    let children = capture.children(&span);
    assert_eq!(children[0].field("dsh.decision"), Some("allow"));

    registry.execute(call("deny", "echo", json!({}))).await;
    let span = capture.call("deny");
    let children = capture.children(&span);
    let named: Vec<&str> = children.iter().map(|child| child.name).collect();
    // Denied: the body never runs, post-execute still does.
    assert_eq!(named, ["pre_execute", "post_execute"]);
    assert_eq!(children[0].field("dsh.decision"), Some("deny"));
    assert_eq!(span.field("otel.status_code"), Some("error"));
}

#[tokio::test]
async fn a_batch_goes_under_the_callers_span() {
    let (capture, _guard) = Capture::install();
    let registry = Registry::new();
    registry.register(mirror("echo")).unwrap();
    let step = tracing::info_span!("agent_step");
    registry
        .execute_batch(
            None,
            vec![call("a", "echo", json!({})), call("b", "echo", json!({}))],
            BatchOptions::default(),
        )
        .instrument(step)
        .await;
    let step = &capture.named("agent_step")[0];
    assert_eq!(capture.call("a").parent, Some(step.seq));
    assert_eq!(capture.call("b").parent, Some(step.seq));
}

/// A code-mode registry on Node.js with `echo`.
async fn code_mode() -> Registry {
    let registry = Registry::new();
    registry.register(mirror("echo")).unwrap();
    let config = SubprocessConfig {
        budgets: Budgets {
            compute_ms: 10_000,
            max_wall_ms: 20_000,
            ..Budgets::default()
        },
        ..Default::default()
    };
    registry.set_code_runtime(Arc::new(
        SubprocessRuntime::typescript(config)
            .await
            .expect("node is installed"),
    ));
    registry.set_mode(Mode::Code);
    registry
}

#[tokio::test]
async fn a_program_is_one_tree_under_run_code() {
    let (capture, _guard) = Capture::install();
    let registry = code_mode().await;
    let program = "const a = await tools.echo({ n: 1 });\n\
                   const [b, c] = await Promise.all([tools.echo({ n: 2 }), tools.echo({ n: 3 })]);\n\
                   return [a.n, b.n, c.n];";
    let result = registry
        .execute(call(
            "run",
            "run_code",
            json!({"code": program, "description": "Three calls"}),
        ))
        .await;
    assert!(!result.is_error(), "{result:?}");
    let run = capture.call("run");
    assert_eq!(run.field("otel.name"), Some("execute_tool run_code"));
    assert_eq!(run.field("dsh.mode"), Some("code"));
    assert_eq!(run.field("dsh.code.language"), Some("typescript"));
    assert_eq!(run.field("dsh.code.binding_calls"), Some("3"));
    assert_eq!(run.field("dsh.code.outcome"), Some("ok"));
    assert!(run.field("dsh.code.max_parallel_sub_calls").is_some());
    // The runtime's budgets, as configured.
    assert_eq!(run.field("dsh.code.budget.compute_ms"), Some("10000"));
    assert_eq!(run.field("dsh.code.budget.max_wall_ms"), Some("20000"));
    let defaults = Budgets::default();
    for (field, value) in [
        ("dsh.code.budget.max_memory_mb", defaults.max_memory_mb),
        (
            "dsh.code.budget.max_output_bytes",
            defaults.max_output_bytes,
        ),
        (
            "dsh.code.budget.max_binding_calls",
            defaults.max_binding_calls,
        ),
    ] {
        assert_eq!(
            run.field(field),
            Some(value.to_string().as_str()),
            "{field}"
        );
    }
    let calls: Vec<Span> = capture
        .named("execute_tool")
        .into_iter()
        .filter(|span| span.parent == Some(run.seq))
        .collect();
    let mut ids: Vec<&str> = calls
        .iter()
        .map(|span| span.field("gen_ai.tool.call.id").unwrap())
        .collect();
    ids.sort_unstable();
    assert_eq!(ids, ["run:code:1", "run:code:2", "run:code:3"]);
    for span in &calls {
        assert_eq!(span.field("gen_ai.tool.name"), Some("echo"));
        assert_eq!(span.field("dsh.parent_call.id"), Some("run"));
        assert_eq!(span.field("dsh.replayed"), None);
    }
    // Nothing else in the capture is an `execute_tool` span.
    assert_eq!(capture.named("execute_tool").len(), 4);
}

/// A binding call answered from a durable run's journal still has its span, marked replayed.
#[cfg(feature = "durable")]
#[tokio::test]
async fn a_replayed_call_is_marked() {
    use dsh_tools::durable::{DurableRun, JournalStore, SqliteJournal};

    let (capture, _guard) = Capture::install();
    let registry = code_mode().await;
    registry.register(mirror("gate")).unwrap();
    registry.on_pre_execute(|view: Arc<ToolCallView>, next: PreNext| async move {
        if view.name == "gate" {
            return PreDecision::Ask { reason: None };
        }
        next.run().await
    });
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn JournalStore> =
        Arc::new(SqliteJournal::open(dir.path().join("journal.db")).unwrap());
    let run = DurableRun::new(store.clone(), "traced");
    let program = "const a = await tools.echo({ n: 1 });\nawait tools.gate({});\nreturn a.n;";
    let parked = registry
        .execute(
            call(
                "r",
                "run_code",
                json!({"code": program, "description": "Park once"}),
            )
            .durable(run.clone()),
        )
        .await;
    assert!(parked.is_error(), "the run parks: {parked:?}");
    let continuation = registry.parked_run(&run).await.unwrap().continuation;
    let resumed = registry
        .approve_run(store.clone(), &continuation)
        .await
        .unwrap();
    assert!(!resumed.is_error(), "{resumed:?}");
    let replayed: Vec<Span> = capture
        .named("execute_tool")
        .into_iter()
        .filter(|span| span.field("dsh.replayed") == Some("true"))
        .collect();
    assert_eq!(replayed.len(), 1, "{replayed:?}");
    assert_eq!(replayed[0].field("gen_ai.tool.name"), Some("echo"));
    assert_eq!(
        replayed[0].field("gen_ai.tool.call.id"),
        Some("resume-traced:journal:0")
    );
    assert_eq!(replayed[0].field("otel.name"), Some("execute_tool echo"));
    // Under the resumed run's `run_code` span.
    let parent = capture
        .spans()
        .into_iter()
        .find(|span| Some(span.seq) == replayed[0].parent)
        .expect("a parent span");
    assert_eq!(parent.field("gen_ai.tool.name"), Some("run_code"));
}
