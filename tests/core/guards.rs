//! The timeout policy and the repeat-call reminder.

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use common::{call, cancel_on, mirror, sleeper};
use dsh_tools::__private::blocks_text;
use dsh_tools::guards::{ReminderConfig, ReminderConfigError, RepeatCallReminder, TimeoutPolicy};
use dsh_tools::hooks::{PostDecision, PostNext};
use dsh_tools::result::ErrorCode;
use dsh_tools::{AgentId, Registry, ToolDefinition, ToolError, ToolExec, ToolResult};
use serde_json::{Value, json};
use tokio::sync::Notify;

fn timed(name: &str, timeout_ms: u64, cooperative: bool) -> ToolDefinition {
    ToolDefinition::builder(name)
        .timeout_ms(timeout_ms)
        .handler(move |_args: Value, exec: ToolExec| async move {
            if cooperative {
                tokio::select! {
                    _ = tokio::time::sleep(Duration::from_secs(30)) => Ok(json!("late")),
                    _ = exec.signal().cancelled() => Ok(json!("stopped but claims success")),
                }
            } else {
                // Ignores its signal, for far longer than any failure bound below.
                tokio::time::sleep(Duration::from_secs(3600)).await;
                Ok(json!("late"))
            }
        })
        .build()
        .unwrap()
}

#[tokio::test]
async fn a_cooperative_tool_times_out_with_tool_timeout() {
    let registry = Registry::new();
    TimeoutPolicy::new().install(&registry);
    registry.register(timed("slow", 50, true)).unwrap();
    let result = registry.execute(call("1", "slow", json!({}))).await;
    assert_eq!(result.error_code(), Some(ErrorCode::ToolTimeout));
    assert_eq!(result.text(), "Error: tool call timed out after 50ms");
    assert_eq!(
        result.error().unwrap().info.as_ref().unwrap().name,
        "ToolTimeoutError"
    );
}

#[tokio::test]
async fn a_caller_cancel_before_the_deadline_is_an_ordinary_cancel() {
    let registry = Registry::new();
    TimeoutPolicy::new().install(&registry);
    let begun = Arc::new(Notify::new());
    let notify = begun.clone();
    let slow = ToolDefinition::builder("slow")
        .timeout_ms(5_000)
        .handler(move |_args: Value, exec: ToolExec| {
            let notify = notify.clone();
            async move {
                notify.notify_one();
                exec.signal().cancelled().await;
                Ok(json!("stopped but claims success"))
            }
        })
        .build()
        .unwrap();
    registry.register(slow).unwrap();
    let signal = cancel_on(&begun);
    let result = registry
        .execute(call("1", "slow", json!({})).with_signal(signal))
        .await;
    assert_eq!(result.error_code(), Some(ErrorCode::Aborted));
}

#[tokio::test]
async fn tools_without_a_timeout_are_untouched() {
    let registry = Registry::new();
    TimeoutPolicy::with_grace(1).install(&registry);
    registry.register(sleeper("sleep", false)).unwrap();
    let result = registry
        .execute(call("1", "sleep", json!({"ms": 30})))
        .await;
    assert_eq!(result.value(), Some(&json!("slept")));
}

/// On tokio's paused clock: the deadline (50 ms) and the grace (100 ms) pass exactly, with no
/// real waiting, and the hour-long body is dropped instead of awaited.
#[tokio::test(start_paused = true)]
async fn with_grace_drops_a_tool_that_ignores_its_signal() {
    let registry = Registry::new();
    TimeoutPolicy::with_grace(100).install(&registry);
    registry.register(timed("stubborn", 50, false)).unwrap();
    let started = tokio::time::Instant::now();
    let result = registry.execute(call("1", "stubborn", json!({}))).await;
    assert_eq!(result.error_code(), Some(ErrorCode::ToolTimeout));
    assert_eq!(started.elapsed(), Duration::from_millis(150));
    let ToolResult::Failure { meta, .. } = result else {
        panic!("failure expected")
    };
    assert_eq!(
        meta,
        Some(json!({"timeout": {"abandoned": true, "grace_ms": 100}}))
    );
}

#[test]
fn reminder_config_is_checked() {
    let bad = |thresholds: Vec<u32>| {
        RepeatCallReminder::new(ReminderConfig {
            thresholds,
            ..Default::default()
        })
        .unwrap_err()
    };
    assert_eq!(bad(vec![]), ReminderConfigError::EmptyThresholds);
    assert_eq!(bad(vec![3, 1]), ReminderConfigError::InvalidThreshold(1));
    assert_eq!(bad(vec![3, 3]), ReminderConfigError::DuplicateThreshold);
    let err = RepeatCallReminder::new(ReminderConfig {
        arguments_preview_chars: 0,
        ..Default::default()
    })
    .unwrap_err();
    assert_eq!(err, ReminderConfigError::InvalidPreviewChars);
    assert!(
        RepeatCallReminder::new(ReminderConfig {
            thresholds: vec![8, 2],
            ..Default::default()
        })
        .is_ok()
    );
}

fn reminder_registry(config: ReminderConfig) -> (Registry, RepeatCallReminder) {
    let registry = Registry::new();
    for name in ["grep", "read", "todo_write"] {
        registry.register(mirror(name)).unwrap();
    }
    let reminder = RepeatCallReminder::new(config).unwrap();
    reminder.install(&registry);
    (registry, reminder)
}

async fn run(registry: &Registry, agent: &str, name: &str, args: Value) -> ToolResult {
    registry
        .execute(call("c", name, args).with_agent(AgentId::new(agent)))
        .await
}

fn reminders(result: &ToolResult) -> Vec<String> {
    result
        .additional_contexts()
        .iter()
        .filter(|context| context.source.name.as_deref() == Some("repeat-call-reminder"))
        .map(|context| blocks_text(&context.content))
        .collect()
}

#[tokio::test]
async fn reminders_fire_at_exactly_the_thresholds() {
    let (registry, _) = reminder_registry(ReminderConfig::default());
    let mut fired = Vec::new();
    for count in 1..=10 {
        let result = run(
            &registry,
            "a",
            "grep",
            json!({"b": 1, "a": [2, {"y": 1, "x": 0}]}),
        )
        .await;
        if !reminders(&result).is_empty() {
            fired.push(count);
        }
    }
    assert_eq!(fired, [3, 5, 8], "silent past the highest threshold");
}

#[tokio::test]
async fn key_order_does_not_matter_but_values_do() {
    let (registry, _) = reminder_registry(ReminderConfig {
        thresholds: vec![2],
        ..Default::default()
    });
    run(&registry, "a", "grep", json!({"x": 1, "y": 2})).await;
    let second = run(&registry, "a", "grep", json!({"y": 2, "x": 1})).await;
    assert_eq!(
        reminders(&second).len(),
        1,
        "canonical arguments are deep-sorted"
    );
    run(&registry, "b", "grep", json!({"x": 1})).await;
    let changed = run(&registry, "b", "grep", json!({"x": 2})).await;
    assert!(reminders(&changed).is_empty());
}

#[tokio::test]
async fn untracked_calls_are_transparent() {
    let config = ReminderConfig {
        thresholds: vec![2],
        exclude: vec!["todo_*".into()],
        ..Default::default()
    };
    let (registry, _) = reminder_registry(config);
    run(&registry, "a", "grep", json!({"q": "X"})).await;
    run(&registry, "a", "todo_write", json!({})).await;
    let result = run(&registry, "a", "grep", json!({"q": "X"})).await;
    assert_eq!(
        reminders(&result).len(),
        1,
        "grep X → excluded tool → grep X counts 2"
    );
    // A tracked different call breaks the chain.
    run(&registry, "b", "grep", json!({"q": "X"})).await;
    run(&registry, "b", "read", json!({})).await;
    let result = run(&registry, "b", "grep", json!({"q": "X"})).await;
    assert!(reminders(&result).is_empty());
}

#[tokio::test]
async fn include_patterns_limit_tracking() {
    let config = ReminderConfig {
        thresholds: vec![2],
        include: vec!["gr*".into()],
        ..Default::default()
    };
    let (registry, _) = reminder_registry(config);
    run(&registry, "a", "read", json!({})).await;
    assert!(reminders(&run(&registry, "a", "read", json!({})).await).is_empty());
    run(&registry, "a", "grep", json!({})).await;
    assert_eq!(
        reminders(&run(&registry, "a", "grep", json!({})).await).len(),
        1
    );
}

#[tokio::test]
async fn denied_calls_count_and_agentless_calls_are_ignored() {
    let (registry, _) = reminder_registry(ReminderConfig {
        thresholds: vec![2],
        ..Default::default()
    });
    registry.guard(|view| (view.name == "read").then(|| "read is off".to_owned()));
    run(&registry, "a", "read", json!({})).await;
    let denied = run(&registry, "a", "read", json!({})).await;
    assert_eq!(denied.error().unwrap().message, "read is off");
    assert_eq!(reminders(&denied).len(), 1);
    registry.execute(call("1", "grep", json!({}))).await;
    let direct = registry.execute(call("2", "grep", json!({}))).await;
    assert!(reminders(&direct).is_empty());
}

#[tokio::test]
async fn reset_starts_a_fresh_chain() {
    let (registry, reminder) = reminder_registry(ReminderConfig {
        thresholds: vec![2],
        ..Default::default()
    });
    run(&registry, "a", "grep", json!({})).await;
    reminder.reset(&AgentId::new("a"));
    assert!(reminders(&run(&registry, "a", "grep", json!({})).await).is_empty());
    assert_eq!(
        reminders(&run(&registry, "a", "grep", json!({})).await).len(),
        1
    );
}

#[tokio::test]
async fn short_then_detailed_reminders_with_a_truncated_preview() {
    let config = ReminderConfig {
        thresholds: vec![2, 3],
        arguments_preview_chars: 10,
        ..Default::default()
    };
    let (registry, _) = reminder_registry(config);
    let args = json!({"query": "a long query string"});
    run(&registry, "a", "grep", args.clone()).await;
    let short = reminders(&run(&registry, "a", "grep", args.clone()).await);
    assert!(
        !short[0].contains("Repeated tool call detected"),
        "{short:?}"
    );
    let detailed = reminders(&run(&registry, "a", "grep", args.clone()).await);
    let lines: Vec<&str> = detailed[0].lines().collect();
    assert_eq!(lines[0], "Repeated tool call detected:");
    assert_eq!(lines[1], "- tool: grep");
    assert_eq!(lines[2], "- consecutive_calls: 3");
    // `{"query":"a long query string"}` is 31 UTF-16 units: 10 shown, 21 omitted.
    assert_eq!(
        lines[3],
        "- arguments: {\"query\":\"\u{2026} (+21 more chars)"
    );
}

#[tokio::test]
async fn the_reminder_is_prepended_without_disturbing_downstream_decisions() {
    let (registry, _) = reminder_registry(ReminderConfig {
        thresholds: vec![2],
        ..Default::default()
    });
    registry.on_post_execute(|_view, _result, _next: PostNext| async {
        PostDecision::Block {
            feedback: vec![dsh_tools::result::ContentBlock::text("blocked")],
            contexts: vec![dsh_tools::result::AdditionalContext::text(
                "hook",
                "downstream",
            )],
        }
    });
    run(&registry, "a", "grep", json!({})).await;
    let result = run(&registry, "a", "grep", json!({})).await;
    assert_eq!(result.text(), "blocked");
    let sources: Vec<String> = result
        .additional_contexts()
        .iter()
        .map(|c| c.source.kind.clone())
        .collect();
    assert_eq!(sources, ["plugin", "hook"]);
    assert_eq!(
        result.additional_contexts()[0].source.summary.as_deref(),
        Some("grep \u{d7} 2")
    );
}

#[tokio::test]
async fn a_failure_before_the_deadline_is_kept() {
    let registry = Registry::new();
    TimeoutPolicy::new().install(&registry);
    let def = ToolDefinition::builder("fails")
        .timeout_ms(1_000)
        .handler(|_, _| async { Err(ToolError::new("own failure")) })
        .build()
        .unwrap();
    registry.register(def).unwrap();
    let result = registry.execute(call("1", "fails", json!({}))).await;
    assert_eq!(
        result.error().unwrap().message,
        "own failure",
        "a failure before the deadline is kept"
    );
}

/// On tokio's paused clock, so the body's 300 ms pass without real waiting; the flag it sets
/// when done shows it was awaited, not dropped.
#[tokio::test(start_paused = true)]
async fn a_caller_cancel_before_the_deadline_is_never_a_timeout_even_for_a_stubborn_body() {
    for policy in [TimeoutPolicy::new(), TimeoutPolicy::with_grace(50)] {
        let registry = Registry::new();
        policy.install(&registry);
        let begun = Arc::new(Notify::new());
        let finished = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (notify, done) = (begun.clone(), finished.clone());
        let def = ToolDefinition::builder("stubborn")
            .timeout_ms(100)
            .handler(move |_args: Value, _exec: ToolExec| {
                let (notify, done) = (notify.clone(), done.clone());
                async move {
                    notify.notify_one();
                    // Ignores its signal for 300 ms.
                    tokio::time::sleep(Duration::from_millis(300)).await;
                    done.store(true, std::sync::atomic::Ordering::SeqCst);
                    Ok(json!("late"))
                }
            })
            .build()
            .unwrap();
        registry.register(def).unwrap();
        let signal = cancel_on(&begun);
        let result = registry
            .execute(call("1", "stubborn", json!({})).with_signal(signal))
            .await;
        assert_eq!(
            result.error_code(),
            Some(ErrorCode::Aborted),
            "{policy:?}: {result:?}"
        );
        assert!(
            finished.load(std::sync::atomic::Ordering::SeqCst),
            "{policy:?}: the body was awaited, not dropped"
        );
    }
}

/// A guard's denial carries the `DENIED` code (so a code-mode program reads it in
/// `ToolCallError.code`), and the model text stays `Error: <reason>`.
#[tokio::test]
async fn guard_denials_carry_the_denied_code() {
    let registry = Registry::new();
    registry.register(mirror("read")).unwrap();
    registry.guard(|view| (view.name == "read").then(|| "read is off".to_owned()));
    let result = registry.execute(call("1", "read", json!({}))).await;
    assert_eq!(result.error_code(), Some(ErrorCode::Denied));
    assert_eq!(
        result.error().unwrap().info.as_ref().unwrap().code,
        "DENIED"
    );
    assert_eq!(result.text(), "Error: read is off");
}
