//! The execution pipeline.

use crate::common;

use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use common::{call, cancel_on, mirror, sleeper, text};
use dsh_tools::events::ToolEvent;
use dsh_tools::hooks::{
    ApprovalOutcome, ApprovalRequest, DispatchContext, ExecNext, PostDecision, PostNext,
    PreDecision, PreNext, ToolCallView,
};
use dsh_tools::result::{AdditionalContext, ContentBlock, ErrorCode};
use dsh_tools::{AgentId, Registry, ToolDefinition, ToolError, ToolExec, ToolResult};
use serde_json::{Value, json};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

/// Counts how often each stage ran.
#[derive(Default)]
struct Phases {
    pre: AtomicUsize,
    wrapper: AtomicUsize,
    body: AtomicUsize,
    post: AtomicUsize,
    finalize: AtomicUsize,
    observed: AtomicUsize,
}

fn counted(registry: &Registry, phases: &Arc<Phases>) {
    let p = phases.clone();
    registry.on_pre_execute(move |_view: Arc<ToolCallView>, next: PreNext| {
        p.pre.fetch_add(1, Ordering::SeqCst);
        next.run()
    });
    let p = phases.clone();
    registry.on_execute(move |_ctx: DispatchContext, next: ExecNext| {
        p.wrapper.fetch_add(1, Ordering::SeqCst);
        next.run()
    });
    let p = phases.clone();
    registry.on_post_execute(move |_view, _result, next: PostNext| {
        p.post.fetch_add(1, Ordering::SeqCst);
        next.run()
    });
    let p = phases.clone();
    registry.on_result(move |_view, _result| {
        p.observed.fetch_add(1, Ordering::SeqCst);
    });
    let p = phases.clone();
    let f = phases.clone();
    let def = ToolDefinition::builder("work")
        .parameters(json!({"type": "object", "properties": {"mode": {"type": "string"}}}))
        .handler(move |args: Value, exec: ToolExec| {
            let p = p.clone();
            async move {
                p.body.fetch_add(1, Ordering::SeqCst);
                match args["mode"].as_str() {
                    Some("fail") => Err(ToolError::new("it failed")),
                    Some("defer") => {
                        exec.defer_context(AdditionalContext::text("tool", "first"));
                        exec.defer_context(AdditionalContext::text("tool", "second"));
                        exec.conclude_turn();
                        Ok(json!("deferred"))
                    }
                    Some("conclude-fail") => {
                        exec.conclude_turn();
                        Err(ToolError::new("nope"))
                    }
                    _ => Ok(json!("done")),
                }
            }
        })
        .finalize_content(move |_exec, _result| {
            f.finalize.fetch_add(1, Ordering::SeqCst);
            None
        })
        .build()
        .unwrap();
    registry.register(def).unwrap();
}

fn counts(phases: &Phases) -> [usize; 6] {
    [
        &phases.pre,
        &phases.wrapper,
        &phases.body,
        &phases.post,
        &phases.finalize,
        &phases.observed,
    ]
    .map(|count| count.load(Ordering::SeqCst))
}

#[tokio::test]
async fn pre_cancelled_call_runs_no_hook_and_publishes_one_result() {
    let registry = Registry::new();
    let phases = Arc::new(Phases::default());
    counted(&registry, &phases);
    let mut events = registry.subscribe();
    let signal = CancellationToken::new();
    signal.cancel();
    let result = registry
        .execute(call("1", "work", json!({})).with_signal(signal))
        .await;
    assert_eq!(result.error_code(), Some(ErrorCode::AbortedBeforeDispatch));
    assert_eq!(text(&result), "Error: tool call aborted before dispatch");
    // pre, wrapper, body, post: none; finalize and observer: once.
    assert_eq!(counts(&phases), [0, 0, 0, 0, 1, 1]);
    let mut results = 0;
    while let Ok(event) = events.try_recv() {
        match event {
            ToolEvent::Result { .. } => results += 1,
            other => panic!("unexpected event {other:?}"),
        }
    }
    assert_eq!(results, 1);
}

#[tokio::test]
async fn every_stage_runs_once_for_a_success_and_events_pair_up() {
    let registry = Registry::new();
    let phases = Arc::new(Phases::default());
    counted(&registry, &phases);
    let mut events = registry.subscribe();
    let result = registry.execute(call("1", "work", json!({}))).await;
    assert_eq!(result.value(), Some(&json!("done")));
    assert_eq!(counts(&phases), [1, 1, 1, 1, 1, 1]);
    assert!(matches!(events.try_recv(), Ok(ToolEvent::Call { .. })));
    match events.try_recv() {
        Ok(ToolEvent::Result {
            result: published, ..
        }) => assert_eq!(*published, result),
        other => panic!("expected the result event, got {other:?}"),
    }
}

#[tokio::test]
async fn an_uncooperative_body_keeps_the_call_pending_then_reads_aborted() {
    let registry = Registry::new();
    let begun = Arc::new(Notify::new());
    let finished = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (notify, done) = (begun.clone(), finished.clone());
    let def = ToolDefinition::builder("stubborn")
        .handler(move |_, _| {
            let (notify, done) = (notify.clone(), done.clone());
            async move {
                notify.notify_one();
                // Never looks at its signal.
                tokio::time::sleep(Duration::from_millis(20)).await;
                done.store(true, Ordering::SeqCst);
                Ok(json!("finished anyway"))
            }
        })
        .build()
        .unwrap();
    registry.register(def).unwrap();
    let signal = cancel_on(&begun);
    let result = registry
        .execute(call("1", "stubborn", json!({})).with_signal(signal))
        .await;
    assert!(
        finished.load(Ordering::SeqCst),
        "the body was awaited, not dropped"
    );
    assert_eq!(result.error_code(), Some(ErrorCode::Aborted));
    assert_eq!(text(&result), "Error: tool call aborted");
}

/// A body cancelled by its caller: whatever it returns without a code of its own (a success,
/// a hand-written `Err(ToolError::new("cancelled"))`, any uncoded error, `ToolError::cancelled()`,
/// a panic) reads `ABORTED`; a failure with its own code is more specific and stays.
#[tokio::test]
async fn a_cancelled_call_reads_aborted_unless_its_failure_has_a_code() {
    let registry = Registry::new();
    let begun = Arc::new(Notify::new());
    for (name, outcome) in [
        ("uncoded", Err(ToolError::new("cancelled"))),
        ("explicit", Err(ToolError::cancelled())),
        (
            "coded",
            Err(ToolError::new("cleanup failed").with_code("ECLEANUP")),
        ),
        ("success", Ok(json!("stopped"))),
    ] {
        let notify = begun.clone();
        let def = ToolDefinition::builder(name)
            .handler(move |_, exec: ToolExec| {
                let notify = notify.clone();
                let outcome = outcome.clone();
                async move {
                    notify.notify_one();
                    exec.signal().cancelled().await;
                    outcome
                }
            })
            .build()
            .unwrap();
        registry.register(def).unwrap();
    }
    let notify = begun.clone();
    let panics = ToolDefinition::builder("panics")
        .handler(move |_, exec: ToolExec| {
            let notify = notify.clone();
            async move {
                notify.notify_one();
                exec.signal().cancelled().await;
                panic!("stopped badly")
            }
        })
        .build()
        .unwrap();
    registry.register(panics).unwrap();
    for name in ["uncoded", "explicit", "success", "panics"] {
        let signal = cancel_on(&begun);
        let result = registry
            .execute(call("1", name, json!({})).with_signal(signal))
            .await;
        assert_eq!(result.error_code(), Some(ErrorCode::Aborted), "{name}");
        assert_eq!(text(&result), "Error: tool call aborted", "{name}");
    }
    let signal = cancel_on(&begun);
    let result = registry
        .execute(call("1", "coded", json!({})).with_signal(signal))
        .await;
    assert_eq!(result.error().unwrap().message, "cleanup failed");
}

/// Without a cancellation, an uncoded failure is the body's own.
#[tokio::test]
async fn an_uncoded_failure_without_cancellation_is_kept() {
    let registry = Registry::new();
    let def = ToolDefinition::builder("fails")
        .handler(|_, _| async { Err::<Value, _>(ToolError::new("cleanup failed")) })
        .build()
        .unwrap();
    registry.register(def).unwrap();
    let result = registry.execute(call("1", "fails", json!({}))).await;
    assert_eq!(result.error().unwrap().message, "cleanup failed");
    assert_eq!(result.error_code(), None);
}

#[tokio::test]
async fn a_denial_that_settles_after_cancellation_stays_a_denial() {
    let registry = Registry::new();
    registry.register(mirror("m")).unwrap();
    let begun = Arc::new(Notify::new());
    let notify = begun.clone();
    registry.on_pre_execute(move |view: Arc<ToolCallView>, _next| {
        let notify = notify.clone();
        async move {
            notify.notify_one();
            view.signal.cancelled().await;
            PreDecision::Deny {
                reason: "not allowed".into(),
            }
        }
    });
    let post_runs = Arc::new(AtomicUsize::new(0));
    let counter = post_runs.clone();
    registry.on_post_execute(move |_view, _result, next: PostNext| {
        counter.fetch_add(1, Ordering::SeqCst);
        next.run()
    });
    let signal = cancel_on(&begun);
    let result = registry
        .execute(call("1", "m", json!({})).with_signal(signal))
        .await;
    assert_eq!(result.error().unwrap().message, "not allowed");
    assert_eq!(result.error().unwrap().info, None, "denials carry no info");
    assert_eq!(text(&result), "Error: not allowed");
    assert_eq!(
        post_runs.load(Ordering::SeqCst),
        1,
        "denials pass through post-execute"
    );
}

#[tokio::test]
async fn cancellation_after_an_allow_is_aborted_before_dispatch() {
    let registry = Registry::new();
    let phases = Arc::new(Phases::default());
    counted(&registry, &phases);
    let signal = CancellationToken::new();
    let canceller = signal.clone();
    registry.on_pre_execute(move |_view, next: PreNext| {
        canceller.cancel();
        next.run()
    });
    let result = registry
        .execute(call("1", "work", json!({})).with_signal(signal))
        .await;
    assert_eq!(result.error_code(), Some(ErrorCode::AbortedBeforeDispatch));
    assert_eq!(counts(&phases)[2], 0, "no body");
    assert_eq!(counts(&phases)[3], 1, "post-execute still runs");
}

#[tokio::test]
async fn a_guard_denial_cannot_be_overridden_by_a_hook() {
    let registry = Registry::new();
    registry.register(mirror("m")).unwrap();
    registry.guard(|view| (view.name == "m").then(|| "guarded".to_owned()));
    // A hook that forces Allow without consulting anything downstream.
    registry.on_pre_execute(|_view, _next| async { PreDecision::Allow });
    let result = registry.execute(call("1", "m", json!({}))).await;
    assert_eq!(result.error().unwrap().message, "guarded");
}

#[tokio::test]
async fn pre_execute_is_a_waterfall_in_registration_order() {
    let registry = Registry::new();
    registry.register(mirror("m")).unwrap();
    let order = Arc::new(Mutex::new(Vec::new()));
    for label in ["outer", "inner"] {
        let order = order.clone();
        registry.on_pre_execute(move |_view, next: PreNext| {
            let order = order.clone();
            async move {
                order.lock().unwrap().push(format!("{label} before"));
                let decision = next.run().await;
                order.lock().unwrap().push(format!("{label} after"));
                if label == "outer" {
                    PreDecision::Deny {
                        reason: format!("outer saw {decision:?}"),
                    }
                } else {
                    decision
                }
            }
        });
    }
    let result = registry.execute(call("1", "m", json!({}))).await;
    assert_eq!(result.error().unwrap().message, "outer saw Allow");
    assert_eq!(
        *order.lock().unwrap(),
        ["outer before", "inner before", "inner after", "outer after"]
    );
}

fn asking(reason: Option<&str>) -> Registry {
    let registry = Registry::new();
    registry.register(mirror("m")).unwrap();
    let reason = reason.map(str::to_owned);
    registry.on_pre_execute(move |_view, _next| {
        let reason = reason.clone();
        async move { PreDecision::Ask { reason } }
    });
    registry
}

/// The approver sees the tool's declared hints, so a person can tell a destructive call from a
/// harmless one.
#[tokio::test]
async fn an_approval_request_carries_the_tools_hints() {
    /// Delete a file.
    #[dsh_tools::tool(destructive, title = "Delete File")]
    async fn delete(path: String) -> String {
        path
    }
    let registry = Registry::new();
    registry.register(DeleteTool).unwrap();
    registry.on_pre_execute(|_view, _next| async { PreDecision::Ask { reason: None } });
    let seen = Arc::new(Mutex::new(None::<ApprovalRequest>));
    let saw = seen.clone();
    registry.set_approver(move |request| {
        *saw.lock().unwrap() = Some(request);
        async { ApprovalOutcome::Rejected }
    });
    registry
        .execute(call("1", "delete", json!({"path": "x"})).with_agent(AgentId::new("a")))
        .await;
    let request = seen.lock().unwrap().take().expect("asked");
    let hints = request.annotations.expect("hints");
    assert_eq!(hints.destructive_hint, Some(true));
    assert_eq!(hints.title.as_deref(), Some("Delete File"));
}

#[tokio::test]
async fn ask_without_an_approver_denies() {
    let result = asking(None)
        .execute(call("1", "m", json!({})).with_agent(AgentId::new("a")))
        .await;
    assert_eq!(
        result.error().unwrap().message,
        "tool \"m\" requires approval (not yet supported) (denied: no approver is set)"
    );
    assert_eq!(result.error_code(), Some(ErrorCode::Denied));
    let result = asking(Some("writes files"))
        .execute(call("1", "m", json!({})))
        .await;
    assert_eq!(
        result.error().unwrap().message,
        "writes files (denied: no approver is set)"
    );
    assert_eq!(result.error_code(), Some(ErrorCode::Denied));
}

#[tokio::test]
async fn ask_outcomes_map_to_denial_reasons() {
    let cases = [
        (
            ApprovalOutcome::Rejected,
            Some("the user rejected tool \"m\""),
        ),
        (
            ApprovalOutcome::Cancelled,
            Some("approval for tool \"m\" was cancelled"),
        ),
        (
            ApprovalOutcome::Unavailable,
            Some("tool \"m\" requires approval, but no approval channel is available"),
        ),
        (ApprovalOutcome::AllowedOnce, None),
    ];
    for (outcome, expected) in cases {
        let registry = asking(None);
        let asked = Arc::new(AtomicUsize::new(0));
        let counter = asked.clone();
        registry.set_approver(move |_request| {
            counter.fetch_add(1, Ordering::SeqCst);
            async move { outcome }
        });
        let result = registry
            .execute(call("1", "m", json!({"n": 1})).with_agent(AgentId::new("a")))
            .await;
        // With an agent or without one, the approver is asked; every refusal reads `DENIED`
        // and names the approver as its source.
        let without_agent = registry.execute(call("2", "m", json!({"n": 1}))).await;
        for result in [result, without_agent] {
            match expected {
                Some(message) => {
                    assert_eq!(
                        result.error().unwrap().message,
                        format!("{message} (denied by the approver)")
                    );
                    assert_eq!(result.error_code(), Some(ErrorCode::Denied));
                }
                None => assert_eq!(result.value(), Some(&json!({"n": 1}))),
            }
        }
        assert_eq!(asked.load(Ordering::SeqCst), 2);
    }
}

/// The approver sees the arguments as the tool will read them, and nobody is asked about
/// arguments the tool refuses.
#[tokio::test]
async fn the_approver_sees_validated_arguments_and_never_invalid_ones() {
    /// Send money.
    #[dsh_tools::tool]
    async fn pay(to: String, cents: u32, memo: Option<String>) -> String {
        format!("{to} {cents} {memo:?}")
    }
    let registry = Registry::new();
    registry.register(PayTool).unwrap();
    registry.on_pre_execute(|_view, _next| async { PreDecision::Ask { reason: None } });
    let seen = Arc::new(Mutex::new(Vec::<ApprovalRequest>::new()));
    let saw = seen.clone();
    registry.set_approver(move |request| {
        saw.lock().unwrap().push(request);
        async { ApprovalOutcome::AllowedOnce }
    });
    // A strict-mode client's `null` for the absent memo: the person sees it absent.
    let paid = registry
        .execute(call(
            "1",
            "pay",
            json!({"to": "ann", "cents": 5, "memo": null}),
        ))
        .await;
    assert!(!paid.is_error(), "{paid:?}");
    {
        let seen = seen.lock().unwrap();
        assert_eq!(seen.len(), 1);
        assert_eq!(*seen[0].arguments, json!({"to": "ann", "cents": 5}));
        assert_eq!(seen[0].agent, None);
        assert_eq!(seen[0].tool_name, "pay");
    }
    for invalid in [
        json!({"to": "ann", "cents": -5}),
        json!({"to": "ann"}),
        json!("ann"),
    ] {
        let refused = registry.execute(call("2", "pay", invalid.clone())).await;
        assert_eq!(
            refused.error_code(),
            Some(ErrorCode::InvalidArgs),
            "{invalid}: {refused:?}"
        );
    }
    assert_eq!(seen.lock().unwrap().len(), 1, "nobody was asked");
}

#[tokio::test]
async fn approval_cancelled_together_with_the_caller_is_aborted_before_dispatch() {
    let registry = asking(None);
    let signal = CancellationToken::new();
    let caller = signal.clone();
    registry.set_approver(move |_request| {
        caller.cancel();
        async { ApprovalOutcome::Cancelled }
    });
    let result = registry
        .execute(
            call("1", "m", json!({}))
                .with_agent(AgentId::new("a"))
                .with_signal(signal),
        )
        .await;
    assert_eq!(result.error_code(), Some(ErrorCode::AbortedBeforeDispatch));
}

#[tokio::test]
async fn a_wrapper_token_is_fused_with_the_caller_signal() {
    let registry = Registry::new();
    let begun = Arc::new(Notify::new());
    let notify = begun.clone();
    let sleep = ToolDefinition::builder("sleep")
        .handler(move |_, exec: ToolExec| {
            let notify = notify.clone();
            async move {
                notify.notify_one();
                tokio::select! {
                    _ = tokio::time::sleep(Duration::from_secs(10)) => Ok(json!("slept")),
                    // Coded, so that it stays the result once the caller cancelled.
                    _ = exec.signal().cancelled() => Err(ToolError::new("sleep cancelled").with_code("ESLEEP")),
                }
            }
        })
        .build()
        .unwrap();
    registry.register(sleep).unwrap();
    // The wrapper installs an unrelated token; the caller's cancel must still reach the body.
    registry.on_execute(|_ctx, next: ExecNext| next.run_with_signal(CancellationToken::new()));
    let signal = cancel_on(&begun);
    let result = registry
        .execute(call("1", "sleep", json!({"ms": 10_000})).with_signal(signal))
        .await;
    assert_eq!(result.error().unwrap().message, "sleep cancelled");

    // And the wrapper's own token reaches the body too.
    let registry = Registry::new();
    registry.register(sleeper("sleep", false)).unwrap();
    registry.on_execute(|_ctx, next: ExecNext| {
        let token = CancellationToken::new();
        token.cancel();
        next.run_with_signal(token)
    });
    let result = registry
        .execute(call("1", "sleep", json!({"ms": 10_000})))
        .await;
    assert_eq!(
        result.error_code(),
        Some(ErrorCode::AbortedBeforeDispatch),
        "already-aborted fused signal"
    );
}

#[tokio::test]
async fn wrapper_authored_results() {
    let registry = Registry::new();
    let def = ToolDefinition::builder("typed")
        .output_schema(json!({"type": "string"}))
        .handler(|_, _| async { Ok(json!("from body")) })
        .build()
        .unwrap();
    registry.register(def).unwrap();
    let mode = Arc::new(Mutex::new("valid"));
    let current = mode.clone();
    registry.on_execute(move |_ctx, next: ExecNext| {
        let mode = *current.lock().unwrap();
        async move {
            match mode {
                "valid" => ToolResult::success(
                    json!("cached"),
                    vec![ContentBlock::text("ignored content")],
                ),
                "invalid" => ToolResult::success(json!({"not": "a string"}), vec![]),
                "failure" => ToolResult::Failure {
                    error: dsh_tools::result::ToolFailure::plain("wrapper says no"),
                    content: vec![ContentBlock::text("custom content")],
                    meta: None,
                    additional_contexts: vec![],
                },
                _ => next.run().await,
            }
        }
    });
    let result = registry.execute(call("1", "typed", json!({}))).await;
    assert_eq!(result.value(), Some(&json!("cached")));
    assert_eq!(
        text(&result),
        "cached",
        "a wrapper success is re-rendered, its content ignored"
    );
    *mode.lock().unwrap() = "invalid";
    let result = registry.execute(call("2", "typed", json!({}))).await;
    assert_eq!(result.error_code(), Some(ErrorCode::InvalidToolOutput));
    *mode.lock().unwrap() = "failure";
    let result = registry.execute(call("3", "typed", json!({}))).await;
    assert_eq!(
        text(&result),
        "custom content",
        "a wrapper failure is kept as authored"
    );
    *mode.lock().unwrap() = "pass";
    let result = registry.execute(call("4", "typed", json!({}))).await;
    assert_eq!(result.value(), Some(&json!("from body")));
}

fn post_hook(registry: &Registry, decision: PostDecision) {
    registry.on_post_execute(move |_view, _result, _next| {
        let decision = decision.clone();
        async move { decision }
    });
}

#[tokio::test]
async fn block_discards_deferred_contexts_and_keeps_its_own() {
    let registry = Registry::new();
    let phases = Arc::new(Phases::default());
    counted(&registry, &phases);
    post_hook(
        &registry,
        PostDecision::Block {
            feedback: vec![
                ContentBlock::text("line one"),
                ContentBlock::text("line two"),
            ],
            contexts: vec![AdditionalContext::text("hook", "from block")],
        },
    );
    let result = registry
        .execute(call("1", "work", json!({"mode": "defer"})))
        .await;
    assert_eq!(result.error().unwrap().message, "line one\nline two");
    assert_eq!(
        result.content(),
        [
            ContentBlock::text("line one"),
            ContentBlock::text("line two")
        ]
    );
    let contexts: Vec<String> = result
        .additional_contexts()
        .iter()
        .map(|c| dsh_tools::__private::blocks_text(&c.content))
        .collect();
    assert_eq!(contexts, ["from block"]);
    assert!(matches!(result, ToolResult::Failure { .. }));

    let registry = Registry::new();
    registry.register(mirror("m")).unwrap();
    post_hook(
        &registry,
        PostDecision::Block {
            feedback: vec![],
            contexts: vec![],
        },
    );
    let result = registry.execute(call("1", "m", json!({}))).await;
    assert_eq!(
        result.error().unwrap().message,
        "tool result blocked by post-execute policy"
    );
}

#[tokio::test]
async fn accept_rules() {
    let registry = Registry::new();
    let phases = Arc::new(Phases::default());
    counted(&registry, &phases);
    let decision = Arc::new(Mutex::new(PostDecision::accept()));
    let current = decision.clone();
    registry.on_post_execute(move |_view, _result, _next| {
        let decision = current.lock().unwrap().clone();
        async move { decision }
    });
    let set = |d: PostDecision| *decision.lock().unwrap() = d;

    set(PostDecision::Accept {
        content: Some(vec![ContentBlock::text("x")]),
        value: Some(json!(1)),
        contexts: vec![],
    });
    let result = registry.execute(call("1", "work", json!({}))).await;
    assert_eq!(
        result.error().unwrap().message,
        "tools/post-execute accept decision cannot replace both value and content"
    );

    set(PostDecision::Accept {
        content: None,
        value: Some(json!("new")),
        contexts: vec![],
    });
    let result = registry
        .execute(call("2", "work", json!({"mode": "fail"})))
        .await;
    assert_eq!(
        result.error().unwrap().message,
        "tools/post-execute cannot replace the value of a failed result"
    );
    let result = registry
        .execute(call("3", "work", json!({"mode": "defer"})))
        .await;
    assert_eq!(result.value(), Some(&json!("new")));
    assert_eq!(text(&result), "new", "re-rendered");
    assert_eq!(
        result.additional_contexts().len(),
        2,
        "deferred contexts kept on accept"
    );

    set(PostDecision::Accept {
        content: Some(vec![ContentBlock::text("shown")]),
        value: None,
        contexts: vec![AdditionalContext::text("hook", "added")],
    });
    let result = registry
        .execute(call("4", "work", json!({"mode": "defer"})))
        .await;
    assert_eq!(result.value(), Some(&json!("deferred")), "value preserved");
    assert_eq!(text(&result), "shown");
    let contexts: Vec<String> = result
        .additional_contexts()
        .iter()
        .map(|c| dsh_tools::__private::blocks_text(&c.content))
        .collect();
    assert_eq!(
        contexts,
        ["first", "second", "added"],
        "deferred first, in call order, then hook contexts"
    );
}

#[tokio::test]
async fn conclude_turn_only_on_a_final_success() {
    let registry = Registry::new();
    let phases = Arc::new(Phases::default());
    counted(&registry, &phases);
    let ok = registry
        .execute(call("1", "work", json!({"mode": "defer"})))
        .await;
    assert!(matches!(
        ok,
        ToolResult::Success {
            concludes_turn: true,
            ..
        }
    ));
    let failed = registry
        .execute(call("2", "work", json!({"mode": "conclude-fail"})))
        .await;
    assert!(failed.is_error());
    let plain = registry.execute(call("3", "work", json!({}))).await;
    assert!(matches!(
        plain,
        ToolResult::Success {
            concludes_turn: false,
            ..
        }
    ));
}

#[tokio::test]
async fn finalize_content_runs_once_for_every_outcome() {
    let registry = Registry::new();
    let phases = Arc::new(Phases::default());
    counted(&registry, &phases);
    registry.guard(|view| (view.arguments["mode"] == "deny").then(|| "denied".to_owned()));
    for (i, mode) in ["ok", "fail", "deny", "defer"].into_iter().enumerate() {
        registry
            .execute(call(&i.to_string(), "work", json!({ "mode": mode })))
            .await;
        assert_eq!(phases.finalize.load(Ordering::SeqCst), i + 1, "{mode}");
    }
    let replaced = Registry::new();
    let def = ToolDefinition::builder("f")
        .handler(|_, _| async { Ok(json!("raw")) })
        .finalize_content(|_, result| {
            Some(vec![ContentBlock::text(format!(
                "final: {}",
                result.text()
            ))])
        })
        .build()
        .unwrap();
    replaced.register(def).unwrap();
    let result = replaced.execute(call("1", "f", json!({}))).await;
    assert_eq!(text(&result), "final: raw");
    assert_eq!(
        result.value(),
        Some(&json!("raw")),
        "finalize replaces content only"
    );
}

#[tokio::test]
async fn panics_in_hooks_are_contained() {
    let registry = Registry::new();
    let phases = Arc::new(Phases::default());
    counted(&registry, &phases);
    let which = Arc::new(Mutex::new(""));
    let w = which.clone();
    registry.on_pre_execute(move |_view, next: PreNext| {
        if *w.lock().unwrap() == "pre" {
            panic!("pre hook bug");
        }
        next.run()
    });
    let w = which.clone();
    registry.on_execute(move |_ctx, next: ExecNext| {
        if *w.lock().unwrap() == "wrapper" {
            panic!("wrapper bug");
        }
        next.run()
    });
    let w = which.clone();
    registry.guard(move |_view| {
        if *w.lock().unwrap() == "guard" {
            panic!("guard bug")
        } else {
            None
        }
    });
    let w = which.clone();
    registry.on_result(move |_view, _result| {
        if *w.lock().unwrap() == "observer" {
            panic!("observer bug");
        }
    });
    for (stage, expected) in [
        ("pre", Some("pre-execute hook failed: pre hook bug")),
        ("guard", Some("guard failed: guard bug")),
        ("wrapper", Some("execute wrapper failed: wrapper bug")),
        ("observer", None),
    ] {
        *which.lock().unwrap() = stage;
        let before = phases.post.load(Ordering::SeqCst);
        let result = registry.execute(call("1", "work", json!({}))).await;
        match expected {
            Some(message) => {
                assert_eq!(result.error().unwrap().message, message);
                assert_eq!(
                    phases.post.load(Ordering::SeqCst),
                    before,
                    "pipeline failures skip post-execute"
                );
            }
            None => assert_eq!(
                result.value(),
                Some(&json!("done")),
                "an observer panic changes nothing"
            ),
        }
    }
    *which.lock().unwrap() = "";
    let result = registry.execute(call("2", "work", json!({}))).await;
    assert_eq!(
        result.value(),
        Some(&json!("done")),
        "the registry stays usable"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_thousand_concurrent_calls_with_random_cancellation_each_end_once() {
    let registry = Registry::new();
    let live = Arc::new(AtomicUsize::new(0));
    let started = Arc::new(AtomicUsize::new(0));
    struct Live(Arc<AtomicUsize>);
    impl Drop for Live {
        fn drop(&mut self) {
            self.0.fetch_sub(1, Ordering::SeqCst);
        }
    }
    let (l, s) = (live.clone(), started.clone());
    let def = ToolDefinition::builder("job")
        .parameters(json!({"type": "object", "properties": {"ms": {"type": "integer"}}}))
        .handler(move |args: Value, exec: ToolExec| {
            l.fetch_add(1, Ordering::SeqCst);
            s.fetch_add(1, Ordering::SeqCst);
            let guard = Live(l.clone());
            async move {
                let _guard = guard;
                let ms = args["ms"].as_u64().unwrap_or(0);
                tokio::select! {
                    _ = tokio::time::sleep(Duration::from_millis(ms)) => Ok(json!(ms)),
                    _ = exec.signal().cancelled() => Err(ToolError::new("stopped")),
                }
            }
        })
        .build()
        .unwrap();
    registry.register(def).unwrap();
    let observed = Arc::new(AtomicUsize::new(0));
    let o = observed.clone();
    registry.on_result(move |_view, _result| {
        o.fetch_add(1, Ordering::SeqCst);
    });
    // A small deterministic PRNG (xorshift) drives delays and cancellations.
    let mut seed: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..10_000 {
        let signal = CancellationToken::new();
        let ms = next() % 20;
        let cancel_after = next() % 30;
        let cancel = next() % 2 == 0;
        if cancel {
            let s = signal.clone();
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_millis(cancel_after)).await;
                s.cancel();
            });
        }
        let registry = registry.clone();
        tasks.spawn(async move {
            registry
                .execute(call(&i.to_string(), "job", json!({ "ms": ms })).with_signal(signal))
                .await
        });
    }
    let mut results = 0;
    while let Some(result) = tasks.join_next().await {
        let result = result.expect("no task panicked");
        if let Some(code) = result.error_code() {
            assert!(
                matches!(code, ErrorCode::Aborted | ErrorCode::AbortedBeforeDispatch),
                "{result:?}"
            );
        }
        results += 1;
    }
    assert_eq!(results, 10_000);
    assert_eq!(
        observed.load(Ordering::SeqCst),
        10_000,
        "exactly one observed result per call"
    );
    assert_eq!(live.load(Ordering::SeqCst), 0, "no body is left running");
    assert!(started.load(Ordering::SeqCst) > 0);
}
