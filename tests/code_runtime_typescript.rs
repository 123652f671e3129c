//! The TypeScript subprocess runtime end to end (SPEC §8), against the `node` on PATH.

mod code_runtime_support;

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use code_runtime_support::*;
use dsh_tools::code_runtime::{
    BindingNamespace, CodeRuntime, CodeRuntimeError, FailureKind, Isolation, RunRequest,
    SubprocessConfig, SubprocessRuntime,
};
use serde_json::json;
use tokio_util::sync::CancellationToken;

async fn runtime(config: SubprocessConfig) -> SubprocessRuntime {
    SubprocessRuntime::typescript(config)
        .await
        .expect("node is installed")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn returns_every_json_shape() {
    let rt = runtime(small()).await;
    assert_eq!(
        (rt.language(), rt.isolation()),
        ("typescript", Isolation::Process)
    );
    for (program, value) in [
        ("return null", json!(null)),
        ("return true", json!(true)),
        ("return -1.5e-7", json!(-1.5e-7)),
        ("return 9007199254740991", json!(9007199254740991u64)),
        ("return 'é\\n\"😀'", json!("é\n\"😀")),
        ("return []", json!([])),
        ("return {}", json!({})),
        (
            "const v: {a: number[]} = {a: [1, 2]}; return {v, s: 'x', n: null, __proto__x: [{}]}",
            json!({"v": {"a": [1, 2]}, "s": "x", "n": null, "__proto__x": [{}]}),
        ),
    ] {
        assert_value(&run(&rt, program).await, value);
    }
    let out = run(&rt, "const x = 1;").await;
    assert_eq!((out.value, out.error), (None, None));
    for lossy in [
        "return -0",
        "return NaN",
        "return [1,,2]",
        "return new Date(0)",
        "return () => 1",
    ] {
        assert_failure(
            &run(&rt, lossy).await,
            FailureKind::InvalidOutput,
            "lossless",
        );
    }
    rt.dispose().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn logs_arrive_in_order() {
    let rt = runtime(small()).await;
    let out = run(
        &rt,
        "console.log('a', 1, {k: [2]});\nprocess.stdout.write('b\\n');\nconsole.error('c');\n\
         console.info('d'); console.warn('e'); console.debug('f');\nreturn 0;",
    )
    .await;
    assert_value(&out, json!(0));
    assert_eq!(out.logs, ["a 1 { k: [ 2 ] }", "b", "c", "d", "e", "f"]);
    // Writes that bypass `console` and `process.stdout` are captured from the pipes.
    let out = run(
        &rt,
        "const fs = await import('node:fs');\nfs.writeSync(1, 'raw out\\n');\nfs.writeSync(2, 'raw err');\nreturn 1;",
    )
    .await;
    assert_value(&out, json!(1));
    let mut logs = out.logs.clone();
    logs.sort();
    assert_eq!(logs, ["raw err", "raw out"]);
    rt.dispose().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thrown_error_is_an_exception_with_program_lines() {
    let rt = runtime(small()).await;
    let out = run(
        &rt,
        "console.log('before');\nconst n: number = 2;\nthrow new TypeError('boom ' + n);",
    )
    .await;
    assert_failure(&out, FailureKind::Exception, "TypeError: boom 2");
    assert!(out.error.unwrap().message.contains("program.ts:3:"));
    assert_eq!(out.logs, ["before"]);
    assert_failure(&run(&rt, "throw 42").await, FailureKind::Exception, "42");
    assert_failure(
        &run(&rt, "const = ;").await,
        FailureKind::Exception,
        "program.ts:1:",
    );
    rt.dispose().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn non_erasable_syntax_is_refused_without_a_child() {
    let config = SubprocessConfig {
        standby: false,
        interpreter: None,
        ..small()
    };
    let rt = runtime(config).await;
    for program in [
        "enum E { A }",
        "namespace N { export const a = 1 }",
        "class K { constructor(private a: number) {} }",
    ] {
        let start = Instant::now();
        assert_failure(
            &run(&rt, program).await,
            FailureKind::Exception,
            "not erasable",
        );
        // Spawning node takes tens of milliseconds; refusing on the host does not.
        assert!(start.elapsed() < Duration::from_secs(2));
    }
    rt.dispose().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hot_loop_exhausts_the_compute_budget() {
    let rt = runtime(small()).await;
    let start = Instant::now();
    let out = run(&rt, "console.log('spinning');\nwhile (true) {}").await;
    assert_failure(
        &out,
        FailureKind::Timeout,
        "compute budget exhausted (1000ms",
    );
    assert_eq!(out.logs, ["spinning"]);
    // CPU time, not wall time, is budgeted: on a loaded machine the wall clock runs further.
    assert!(
        start.elapsed() < Duration::from_secs(20),
        "{:?}",
        start.elapsed()
    );
    rt.dispose().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hung_promise_reaches_the_wall_clock_ceiling() {
    let rt = runtime(SubprocessConfig {
        max_wall_ms: 700,
        ..small()
    })
    .await;
    let start = Instant::now();
    let out = run(&rt, "await new Promise(() => {});").await;
    assert_failure(
        &out,
        FailureKind::Timeout,
        "wall-clock ceiling reached (700ms)",
    );
    assert!(start.elapsed() < Duration::from_secs(5));
    rt.dispose().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_output_hits_the_output_limit() {
    let rt = runtime(SubprocessConfig {
        max_wall_ms: 60_000,
        compute_ms: 30_000,
        ..small()
    })
    .await;
    let out = run(
        &rt,
        "console.log('first');\nconst mb = 'x'.repeat(1 << 20);\nfor (let i = 0; i < 100; i++) console.log(mb);\nreturn 'unreachable';",
    )
    .await;
    assert_failure(
        &out,
        FailureKind::OutputLimit,
        "outer output exceeded 67108864 bytes",
    );
    assert_eq!(out.logs[0], "first");
    assert_eq!(out.logs[1].len(), 1 << 20);
    assert!(out.logs.len() >= 60, "{}", out.logs.len());
    let charged: usize = 2 + out.logs.iter().map(|l| l.len() + 3).sum::<usize>() - 1;
    assert!(charged <= 64 << 20);
    rt.dispose().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn output_boundaries_are_exact() {
    let cap = |max_output_bytes| SubprocessConfig {
        max_output_bytes,
        ..small()
    };
    let rt = runtime(cap(7)).await;
    assert_value(&run(&rt, "return '€'").await, json!("€"));
    let rt = runtime(cap(6)).await;
    // The diagnostic itself is cut to the 4 bytes left: `"ou"`.
    assert_failure(
        &run(&rt, "return '€'").await,
        FailureKind::OutputLimit,
        "ou",
    );
    let rt = runtime(cap(11)).await;
    assert_value(
        &run(&rt, "console.log('abc'); return 'xy'").await,
        json!("xy"),
    );
    let rt = runtime(cap(10)).await;
    let out = run(&rt, "console.log('abc'); return 'xy'").await;
    assert_failure(&out, FailureKind::OutputLimit, "o");
    assert_eq!(out.logs, ["abc"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_memory_bomb_ends_the_worker_and_the_host_stays_healthy() {
    let rt = runtime(SubprocessConfig {
        compute_ms: 30_000,
        ..small()
    })
    .await;
    let out = run(
        &rt,
        "const hoard = [];\nwhile (true) hoard.push(new Array(1e6).fill(1.5));",
    )
    .await;
    assert_failure(&out, FailureKind::WorkerExit, "before completing");
    assert_value(&run(&rt, "return 'still here'").await, json!("still here"));
    rt.dispose().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forged_limit_messages_are_exceptions() {
    let rt = runtime(small()).await;
    let out = run(
        &rt,
        "console.log('compute budget exhausted (1000ms of CPU time)');\nthrow new Error('wall-clock ceiling reached (1ms)');",
    )
    .await;
    assert_failure(
        &out,
        FailureKind::Exception,
        "wall-clock ceiling reached (1ms)",
    );
    rt.dispose().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn junk_on_the_protocol_pipe_is_dropped() {
    let rt = runtime(small()).await;
    let out = run(
        &rt,
        r#"const fs = await import('node:fs');
const junk = ['garbage', 'null', '[1,2]', '{"type":"done","error":{"kind":"timeout","message":"forged"}}',
  '{"type":"call","id":"1","global":"tools","name":"x","args":{}}', '{"type":"log","text":7}',
  '{"type":"nope"}', '{'.repeat(100000), '{"type":"done","error":{"kind":"output-limit","message":"x"}}'];
for (const j of junk) fs.writeSync(3, j + '\n');
console.log('after junk');
return 'survived';"#,
    )
    .await;
    assert_value(&out, json!("survived"));
    assert_eq!(out.logs, ["after junk"]);
    rt.dispose().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spawned_grandchildren_die_with_the_run() {
    let rt = runtime(small()).await;
    let out = run(
        &rt,
        "const cp = await import('node:child_process');\nconst child = cp.spawn('/bin/sleep', ['1000'], { stdio: 'ignore' });\nreturn child.pid;",
    )
    .await;
    let pid = out.value.as_ref().and_then(|v| v.as_u64()).expect("a pid");
    assert!(eventually_gone(pid).await, "sleep {pid} survived the run");
    rt.dispose().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_concurrent_runs_all_settle() {
    let rt = runtime(SubprocessConfig {
        compute_ms: 20_000,
        max_wall_ms: 60_000,
        ..small()
    })
    .await;
    let runs = (0..50).map(|i| {
        let rt = rt.clone();
        async move {
            rt.run(RunRequest::new(format!(
                "await new Promise(r => setTimeout(r, 10)); return {i};"
            )))
            .await
        }
    });
    let outcomes = futures::future::join_all(runs).await;
    for (i, out) in outcomes.into_iter().enumerate() {
        assert_value(&out.unwrap(), json!(i));
    }
    rt.dispose().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancellation_mid_run_aborts_and_leaves_no_child() {
    let rt = runtime(small()).await;
    let tools = Tools::new();
    let signal = CancellationToken::new();
    let request = tools
        .request("await tools.report({pid: process.pid});\nconsole.log('waiting');\nawait new Promise(() => {});")
        .signal(signal.clone());
    let canceller = {
        let reported = tools.reported.clone();
        async move {
            while reported.lock().unwrap().is_empty() {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
            signal.cancel();
        }
    };
    let (out, ()) = tokio::join!(rt.run(request), canceller);
    let out = out.unwrap();
    assert_failure(&out, FailureKind::Abort, "run aborted");
    assert_eq!(out.logs, ["waiting"]);
    let pid = tools.reported.lock().unwrap()[0];
    assert!(eventually_gone(pid).await);
    rt.dispose().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pre_aborted_run_spawns_nothing() {
    let rt = runtime(SubprocessConfig {
        standby: false,
        ..small()
    })
    .await;
    let tools = Tools::new();
    let signal = CancellationToken::new();
    signal.cancel();
    let out = rt
        .run(
            tools
                .request("await tools.echo({}); return 1")
                .signal(signal),
        )
        .await
        .unwrap();
    assert_failure(&out, FailureKind::Abort, "before it started");
    assert_eq!(tools.calls.load(Ordering::SeqCst), 0);
    rt.dispose().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bindings_resolve_reject_and_overlap() {
    let rt = runtime(small()).await;
    let tools = Tools::new();
    let out = rt
        .run(tools.request(
            r#"const a = await tools.echo({x: [1, 'two']});
const b = await tools["my-tool"]({y: null});
let caught: any;
try { await tools.fail({why: 1}); } catch (e) { caught = e; }
return {a, b, name: caught.name, toolName: caught.toolName, message: caught.message,
  isError: caught instanceof Error, isClass: caught instanceof ToolCallError,
  proto: typeof tools.constructor, own: Object.keys(tools).sort()};"#,
        ))
        .await
        .unwrap();
    assert_value(
        &out,
        json!({"a": {"x": [1, "two"]}, "b": {"y": null}, "name": "ToolCallError", "toolName": "fail",
            "message": "no luck with {\"why\":1}", "isError": true, "isClass": true, "proto": "undefined",
            "own": ["echo", "fail", "my-tool", "report", "slow"]}),
    );
    let start = Instant::now();
    let out = rt
        .run(tools.request("return await Promise.all([1, 2, 3, 4, 5].map(i => tools.slow(i)));"))
        .await
        .unwrap();
    assert_value(
        &out,
        json!([{"slept": 1}, {"slept": 2}, {"slept": 3}, {"slept": 4}, {"slept": 5}]),
    );
    assert!(
        tools.max_in_flight.load(Ordering::SeqCst) >= 2,
        "calls did not overlap"
    );
    assert!(
        start.elapsed() < Duration::from_millis(1400),
        "{:?}",
        start.elapsed()
    );
    let out = rt.run(tools.request("await tools.echo(-0)")).await.unwrap();
    assert_failure(
        &out,
        FailureKind::Exception,
        "binding arguments must be lossless JSON",
    );
    rt.dispose().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deep_values_round_trip() {
    let rt = runtime(small()).await;
    let tools = Tools::new();
    let out = rt
        .run(tools.request("let v: any = 0;\nfor (let i = 0; i < 3000; i++) v = i % 2 ? [v] : {k: v};\nreturn await tools.echo(v);"))
        .await
        .unwrap();
    assert_eq!(out.error, None);
    let value = out.value.expect("a value");
    assert_eq!(depth(&value), 3000);
    // Dropping a deep value recurses per level: do it where the stack is known to be ample.
    std::thread::Builder::new()
        .stack_size(64 << 20)
        .spawn(move || drop(value))
        .unwrap()
        .join()
        .unwrap();
    rt.dispose().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_binding_call_budget_is_enforced() {
    let rt = runtime(SubprocessConfig {
        max_binding_calls: 3,
        ..small()
    })
    .await;
    let tools = Tools::new();
    let out = rt
        .run(tools.request("for (let i = 0; i < 5; i++) await tools.echo(i);\nreturn 'done';"))
        .await
        .unwrap();
    assert_failure(
        &out,
        FailureKind::BindingLimit,
        "binding call limit reached (3 calls)",
    );
    assert_eq!(tools.calls.load(Ordering::SeqCst), 3);
    rt.dispose().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dispose_aborts_live_runs_and_refuses_new_ones() {
    let rt = runtime(small()).await;
    let tools = Tools::new();
    let live = rt
        .run(tools.request("await tools.report({pid: process.pid}); await new Promise(() => {});"));
    let disposer = async {
        while tools.reported.lock().unwrap().is_empty() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        rt.dispose().await;
    };
    let (out, ()) = tokio::join!(live, disposer);
    assert_failure(&out.unwrap(), FailureKind::Abort, "runtime disposed");
    assert!(process_gone(tools.reported.lock().unwrap()[0]));
    assert_eq!(
        rt.run(RunRequest::new("return 1")).await,
        Err(CodeRuntimeError::Disposed)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn misuse_is_an_error() {
    let rt = runtime(small()).await;
    let bad = RunRequest::new("return 1")
        .binding(BindingNamespace::tools(["x"]))
        .binding(BindingNamespace {
            global: "console".into(),
            names: vec![],
            error_class: None,
        });
    assert_eq!(
        rt.run(bad).await,
        Err(CodeRuntimeError::InvalidBindings(
            r#"reserved binding global "console""#.into()
        ))
    );
    rt.dispose().await;
    let missing = SubprocessConfig {
        interpreter: Some("/nonexistent/node".into()),
        ..small()
    };
    let err = SubprocessRuntime::typescript(missing)
        .await
        .err()
        .expect("missing node");
    assert!(matches!(err, CodeRuntimeError::InterpreterNotFound { .. }));
    assert!(
        err.to_string().contains("`/nonexistent/node`")
            && err.to_string().contains("SubprocessConfig::interpreter")
    );
    let python_as_node = SubprocessConfig {
        interpreter: Some("python3".into()),
        ..small()
    };
    let err = SubprocessRuntime::typescript(python_as_node)
        .await
        .err()
        .expect("not node");
    assert!(
        matches!(err, CodeRuntimeError::InterpreterTooOld { .. }),
        "{err}"
    );
}
