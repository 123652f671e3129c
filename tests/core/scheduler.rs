//! The order-preserving batch scheduler.

use crate::common;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::call;
use dsh_tools::hooks::{PreNext, ToolCallView};
use dsh_tools::registry::{BatchOptions, ExecutionMode};
use dsh_tools::result::ErrorCode;
use dsh_tools::{Registry, ToolCall, ToolDefinition, ToolExec};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

/// Records what ran concurrently with what.
#[derive(Default)]
struct Tracker {
    active: AtomicUsize,
    peak: AtomicUsize,
    /// (call label, active count seen at start) per body.
    starts: Mutex<Vec<(String, usize)>>,
    exclusive_overlap: AtomicBool,
    bodies: AtomicUsize,
    /// Labels of the bodies that have returned, in order.
    ended: Mutex<Vec<String>>,
    /// Notified after every body start and end.
    changed: tokio::sync::Notify,
    /// Releases the bodies of `gate: true` calls, one per permit.
    release: Gate,
}

/// Permits for gated bodies; none at first.
struct Gate(tokio::sync::Semaphore);

impl Default for Gate {
    fn default() -> Self {
        Gate(tokio::sync::Semaphore::new(0))
    }
}

/// A tool whose arguments say how long to sleep, whether it is parallel-safe, and a label.
fn job(tracker: &Arc<Tracker>) -> ToolDefinition {
    let t = tracker.clone();
    ToolDefinition::builder("job")
        .parameters(json!({"type": "object", "properties": {
            "label": {"type": "string"}, "ms": {"type": "integer"}, "parallel": {"type": "boolean"}
        }}))
        .classifier(|args| args["parallel"] == json!(true))
        .handler(move |args: Value, _exec: ToolExec| {
            let t = t.clone();
            async move {
                let now = t.active.fetch_add(1, Ordering::SeqCst) + 1;
                t.peak.fetch_max(now, Ordering::SeqCst);
                t.bodies.fetch_add(1, Ordering::SeqCst);
                let exclusive = args["parallel"] != json!(true);
                if exclusive && now != 1 {
                    t.exclusive_overlap.store(true, Ordering::SeqCst);
                }
                t.starts
                    .lock()
                    .unwrap()
                    .push((args["label"].as_str().unwrap_or("").to_owned(), now));
                t.changed.notify_one();
                if args["gate"] == json!(true) {
                    // Waits for the test, ignoring its signal like the sleeping calls.
                    t.release.0.acquire().await.expect("never closed").forget();
                } else {
                    tokio::time::sleep(Duration::from_millis(args["ms"].as_u64().unwrap_or(0)))
                        .await;
                }
                if exclusive && t.active.load(Ordering::SeqCst) != 1 {
                    t.exclusive_overlap.store(true, Ordering::SeqCst);
                }
                t.active.fetch_sub(1, Ordering::SeqCst);
                t.ended
                    .lock()
                    .unwrap()
                    .push(args["label"].as_str().unwrap_or("").to_owned());
                t.changed.notify_one();
                Ok(args["label"].clone())
            }
        })
        .build()
        .unwrap()
}

/// A registry holding only the `job` tool, and its tracker.
fn job_registry() -> (Registry, Arc<Tracker>) {
    let registry = Registry::new();
    let tracker = Arc::new(Tracker::default());
    registry.register(job(&tracker)).unwrap();
    (registry, tracker)
}

fn job_call(label: &str, ms: u64, parallel: bool) -> ToolCall {
    call(
        label,
        "job",
        json!({"label": label, "ms": ms, "parallel": parallel}),
    )
}

/// A parallel-safe call whose body waits for one `tracker.release` permit.
fn gated_call(label: &str) -> ToolCall {
    call(
        label,
        "job",
        json!({"label": label, "parallel": true, "gate": true}),
    )
}

/// A batch signal cancelled as soon as `ready` holds for the tracker, checked after every body
/// start and end: the batch is cancelled at a known point, not after a guessed delay.
fn cancel_when(
    tracker: &Arc<Tracker>,
    ready: impl Fn(&Tracker) -> bool + Send + 'static,
) -> CancellationToken {
    let signal = CancellationToken::new();
    let trigger = signal.clone();
    let tracker = tracker.clone();
    tokio::spawn(async move {
        while !ready(&tracker) {
            tracker.changed.notified().await;
        }
        trigger.cancel();
    });
    signal
}

fn commit_order(registry: &Registry) -> Arc<Mutex<Vec<String>>> {
    let order = Arc::new(Mutex::new(Vec::new()));
    let o = order.clone();
    registry.on_result(move |view: &ToolCallView, _result| {
        o.lock().unwrap().push(view.call_id.clone())
    });
    order
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exclusive_calls_are_barriers_and_commits_keep_model_order() {
    let (registry, tracker) = job_registry();
    let order = commit_order(&registry);
    // Later parallel bodies finish first (shorter sleeps).
    let calls = vec![
        job_call("p1", 80, true),
        job_call("p2", 60, true),
        job_call("p3", 40, true),
        job_call("p4", 20, true),
        job_call("x", 30, false),
        job_call("q1", 60, true),
        job_call("q2", 30, true),
        job_call("q3", 10, true),
    ];
    let results = registry
        .execute_batch(None, calls, BatchOptions::default())
        .await;
    let values: Vec<Value> = results
        .iter()
        .map(|r| r.value().cloned().unwrap_or(Value::Null))
        .collect();
    assert_eq!(
        values,
        ["p1", "p2", "p3", "p4", "x", "q1", "q2", "q3"].map(|s| json!(s))
    );
    assert_eq!(
        *order.lock().unwrap(),
        ["p1", "p2", "p3", "p4", "x", "q1", "q2", "q3"],
        "commits in model order"
    );
    assert!(
        !tracker.exclusive_overlap.load(Ordering::SeqCst),
        "the exclusive call overlapped something"
    );
    assert_eq!(
        tracker.peak.load(Ordering::SeqCst),
        4,
        "the parallel groups overlapped"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_pool_rolls_at_max_parallel() {
    let (registry, tracker) = job_registry();
    let calls = (0..7)
        .map(|i| job_call(&format!("c{i}"), 30, true))
        .collect();
    let results = registry
        .execute_batch(
            None,
            calls,
            BatchOptions {
                max_parallel: 2,
                ..Default::default()
            },
        )
        .await;
    assert_eq!(results.len(), 7);
    assert_eq!(tracker.peak.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn pre_execute_runs_in_model_order_one_at_a_time() {
    let (registry, _) = job_registry();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let in_pre = Arc::new(AtomicUsize::new(0));
    let (s, p) = (seen.clone(), in_pre.clone());
    registry.on_pre_execute(move |view: Arc<ToolCallView>, next: PreNext| {
        let (s, p) = (s.clone(), p.clone());
        async move {
            assert_eq!(
                p.fetch_add(1, Ordering::SeqCst),
                0,
                "two pre-execute hooks overlapped"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
            s.lock().unwrap().push(view.call_id.clone());
            p.fetch_sub(1, Ordering::SeqCst);
            next.run().await
        }
    });
    let calls = (0..6)
        .map(|i| job_call(&format!("c{i}"), 5, true))
        .collect();
    registry
        .execute_batch(None, calls, BatchOptions::default())
        .await;
    assert_eq!(*seen.lock().unwrap(), ["c0", "c1", "c2", "c3", "c4", "c5"]);
}

#[test]
fn classification() {
    let (registry, _) = job_registry();
    let panicky = ToolDefinition::builder("panicky")
        .classifier(|_| panic!("classifier bug"))
        .handler(|_, _| async { Ok(Value::Null) })
        .build()
        .unwrap();
    registry.register(panicky).unwrap();
    registry
        .register(ToolDefinition::from_tool(common::Echo))
        .unwrap();
    assert_eq!(
        registry.execution_mode(&job_call("a", 0, true)),
        ExecutionMode::Parallel
    );
    assert_eq!(
        registry.execution_mode(&job_call("a", 0, false)),
        ExecutionMode::Exclusive
    );
    assert_eq!(
        registry.execution_mode(&call("u", "unknown", json!({}))),
        ExecutionMode::Exclusive
    );
    assert_eq!(
        registry.execution_mode(&call("p", "panicky", json!({}))),
        ExecutionMode::Exclusive
    );
    assert_eq!(
        registry.execution_mode(&call("e", "echo", json!({"text": "hi"}))),
        ExecutionMode::Parallel
    );
    assert_eq!(
        registry.execution_mode(&call("e", "echo", json!({"text": 3}))),
        ExecutionMode::Exclusive,
        "invalid arguments"
    );
    assert_eq!(
        registry.execution_mode(&call("e", "echo", json!("nope"))),
        ExecutionMode::Exclusive
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_are_reclassified_before_they_start() {
    let registry = Registry::new();
    let tracker = Arc::new(Tracker::default());
    let safe = Arc::new(AtomicBool::new(true));
    let t = tracker.clone();
    let s = safe.clone();
    let flip = ToolDefinition::builder("flip")
        .classifier(move |_| s.load(Ordering::SeqCst))
        .handler(move |_, _| {
            let t = t.clone();
            async move {
                let now = t.active.fetch_add(1, Ordering::SeqCst) + 1;
                t.peak.fetch_max(now, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(30)).await;
                t.active.fetch_sub(1, Ordering::SeqCst);
                Ok(Value::Null)
            }
        })
        .build()
        .unwrap();
    registry.register(flip).unwrap();
    let s = safe.clone();
    let toggle = ToolDefinition::builder("toggle")
        .handler(move |_, _| {
            let s = s.clone();
            async move {
                s.store(false, Ordering::SeqCst);
                Ok(Value::Null)
            }
        })
        .build()
        .unwrap();
    registry.register(toggle).unwrap();
    let calls = vec![
        call("t", "toggle", json!({})),
        call("a", "flip", json!({})),
        call("b", "flip", json!({})),
    ];
    registry
        .execute_batch(None, calls, BatchOptions::default())
        .await;
    assert_eq!(
        tracker.peak.load(Ordering::SeqCst),
        1,
        "flip became exclusive after the barrier ran"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn abort_drains_started_calls_and_skips_the_rest() {
    let (registry, tracker) = job_registry();
    // Cancel once both gated bodies run, then let them finish.
    let signal = cancel_when(&tracker, |t| t.bodies.load(Ordering::SeqCst) == 2);
    let release = {
        let (tracker, signal) = (tracker.clone(), signal.clone());
        tokio::spawn(async move {
            signal.cancelled().await;
            tracker.release.0.add_permits(2);
        })
    };
    let calls = vec![
        gated_call("p1"),
        gated_call("p2"),
        job_call("x", 10, false),
        job_call("q1", 10, true),
    ];
    let results = registry
        .execute_batch(
            None,
            calls,
            BatchOptions {
                max_parallel: 10,
                signal,
            },
        )
        .await;
    release.await.unwrap();
    assert_eq!(results.len(), 4);
    // The started bodies ignore the signal and finish, but a cancelled success reads ABORTED.
    assert_eq!(results[0].error_code(), Some(ErrorCode::Aborted));
    assert_eq!(results[1].error_code(), Some(ErrorCode::Aborted));
    assert_eq!(
        results[2].error_code(),
        Some(ErrorCode::AbortedBeforeDispatch),
        "the barrier never ran"
    );
    assert_eq!(
        results[3].error_code(),
        Some(ErrorCode::AbortedBeforeDispatch)
    );
    assert_eq!(tracker.bodies.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn an_empty_batch_is_empty() {
    let registry = Registry::new();
    assert!(
        registry
            .execute_batch(None, Vec::new(), BatchOptions::default())
            .await
            .is_empty()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_cannot_cancel_its_caller_or_siblings() {
    let registry = Registry::new();
    let rogue = ToolDefinition::builder("rogue")
        .concurrency_safe()
        .handler(|_args, exec: ToolExec| async move {
            exec.signal().cancel();
            Ok(json!("cancelled my own token"))
        })
        .build()
        .unwrap();
    registry.register(rogue).unwrap();
    let tracker = Arc::new(Tracker::default());
    registry.register(job(&tracker)).unwrap();
    let batch = CancellationToken::new();
    let calls = vec![
        call("r", "rogue", json!({})),
        job_call("a", 20, true),
        job_call("b", 20, false),
    ];
    let results = registry
        .execute_batch(
            None,
            calls,
            BatchOptions {
                max_parallel: 10,
                signal: batch.clone(),
            },
        )
        .await;
    assert!(!batch.is_cancelled(), "the batch signal survived");
    assert_eq!(results[1].value(), Some(&json!("a")));
    assert_eq!(results[2].value(), Some(&json!("b")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_success_committing_after_an_abort_reads_aborted_without_any_post_hook() {
    let (registry, tracker) = job_registry();
    // `fast` finishes before the abort but commits after `slow`, which is released only after
    // the abort.
    let signal = cancel_when(&tracker, |t| {
        t.ended.lock().unwrap().contains(&"fast".into())
    });
    {
        let (tracker, signal) = (tracker.clone(), signal.clone());
        tokio::spawn(async move {
            signal.cancelled().await;
            tracker.release.0.add_permits(1);
        });
    }
    let calls = vec![gated_call("slow"), job_call("fast", 10, true)];
    let results = registry
        .execute_batch(
            None,
            calls,
            BatchOptions {
                max_parallel: 10,
                signal,
            },
        )
        .await;
    assert_eq!(results[0].error_code(), Some(ErrorCode::Aborted));
    assert_eq!(results[1].error_code(), Some(ErrorCode::Aborted));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_the_batch_future_lets_started_calls_commit_and_aborts_the_rest() {
    use tokio::sync::{Notify, mpsc};
    let registry = Registry::new();
    let (started, mut starts) = mpsc::unbounded_channel::<String>();
    let release = Arc::new(Notify::new());
    let bodies = Arc::new(AtomicUsize::new(0));
    let gate = {
        let release = release.clone();
        let bodies = bodies.clone();
        ToolDefinition::builder("gate")
            .concurrency_safe()
            .handler(move |args: Value, _exec: ToolExec| {
                let (started, release, bodies) = (started.clone(), release.clone(), bodies.clone());
                async move {
                    bodies.fetch_add(1, Ordering::SeqCst);
                    let _ = started.send(args["label"].as_str().unwrap_or("").to_owned());
                    release.notified().await;
                    Ok(args["label"].clone())
                }
            })
            .build()
            .unwrap()
    };
    registry.register(gate).unwrap();
    let (observed, mut results) = mpsc::unbounded_channel();
    registry.on_result(move |view: &ToolCallView, result| {
        let _ = observed.send((view.call_id.clone(), result.error_code()));
    });
    let calls = vec![
        call("a", "gate", json!({"label": "a"})),
        call("b", "gate", json!({"label": "b"})),
    ];
    let batch = registry.execute_batch(
        None,
        calls,
        BatchOptions {
            max_parallel: 1,
            signal: CancellationToken::new(),
        },
    );
    tokio::select! {
        _ = batch => panic!("the batch ended while a call was blocked"),
        label = starts.recv() => assert_eq!(label.as_deref(), Some("a")),
    }
    // The batch future is dropped; its started call must still finish and commit, in order.
    release.notify_one();
    let bound = Duration::from_secs(60);
    let first = tokio::time::timeout(bound, results.recv()).await.unwrap();
    assert_eq!(first, Some(("a".to_owned(), None)));
    let second = tokio::time::timeout(bound, results.recv()).await.unwrap();
    assert_eq!(
        second,
        Some(("b".to_owned(), Some(ErrorCode::AbortedBeforeDispatch)))
    );
    assert_eq!(
        bodies.load(Ordering::SeqCst),
        1,
        "the unstarted call never ran"
    );
}
