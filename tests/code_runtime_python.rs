//! The Python subprocess runtime end to end (SPEC §8), against the `python3` on PATH.

mod code_runtime_support;

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use code_runtime_support::*;
use dsh_tools::code_runtime::{
    CodeRuntime, CodeRuntimeError, FailureKind, RunRequest, SubprocessConfig, SubprocessRuntime,
};
use serde_json::json;
use tokio_util::sync::CancellationToken;

async fn runtime(config: SubprocessConfig) -> SubprocessRuntime {
    SubprocessRuntime::python(config)
        .await
        .expect("python3 is installed")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn returns_every_json_shape() {
    let rt = runtime(small()).await;
    assert_eq!(rt.language(), "python");
    for (program, value) in [
        ("return True", json!(true)),
        ("return -1.5e-7", json!(-1.5e-7)),
        ("return 2**53 - 1", json!(9007199254740991u64)),
        ("return 'é\\n\"😀'", json!("é\n\"😀")),
        ("return []", json!([])),
        ("return (1, 'a')", json!([1, "a"])),
        ("return {}", json!({})),
        (
            "v = {'a': [1, 2]}\nreturn {'v': v, 'n': None, '__proto__': [{}]}",
            json!({"v": {"a": [1, 2]}, "n": null, "__proto__": [{}]}),
        ),
    ] {
        assert_value(&run(&rt, program).await, value);
    }
    let out = run(&rt, "x = 1").await;
    assert_eq!((out.value, out.error), (None, None));
    for lossy in [
        "return -0.0",
        "return float('nan')",
        "return 2**53",
        "return {1: 2}",
        "return object()",
        "return '\\ud800'",
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
    let out = run(&rt, "import sys\nprint('a', 1, {'k': [2]})\nprint('b', end='')\nprint('c')\nsys.stderr.write('d\\ne\\n')\nreturn 0").await;
    assert_value(&out, json!(0));
    assert_eq!(out.logs, ["a 1 {'k': [2]}", "bc", "d", "e"]);
    let out = run(
        &rt,
        "import os\nos.write(1, b'raw out\\n')\nos.write(2, b'raw err')\nreturn 1",
    )
    .await;
    assert_value(&out, json!(1));
    let mut logs = out.logs.clone();
    logs.sort();
    assert_eq!(logs, ["raw err", "raw out"]);
    rt.dispose().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_raised_error_is_an_exception_with_program_lines() {
    let rt = runtime(small()).await;
    let out = run(&rt, "print('before')\nn = 2\nraise ValueError(f'boom {n}')").await;
    assert_failure(&out, FailureKind::Exception, "ValueError: boom 2");
    let message = out.error.unwrap().message;
    assert!(message.contains("File \"program.py\", line 3"), "{message}");
    assert!(!message.contains("worker.py"), "{message}");
    assert_eq!(out.logs, ["before"]);
    assert_failure(
        &run(&rt, "x = = 1").await,
        FailureKind::Exception,
        "SyntaxError",
    );
    rt.dispose().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hot_loop_exhausts_the_compute_budget() {
    let rt = runtime(small()).await;
    let start = Instant::now();
    let out = run(&rt, "print('spinning')\nwhile True: pass").await;
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
async fn a_hung_await_reaches_the_wall_clock_ceiling() {
    let rt = runtime(SubprocessConfig {
        max_wall_ms: 700,
        ..small()
    })
    .await;
    let out = run(&rt, "import asyncio\nawait asyncio.Event().wait()").await;
    assert_failure(
        &out,
        FailureKind::Timeout,
        "wall-clock ceiling reached (700ms)",
    );
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
    let out = run(&rt, "print('first')\nmb = 'x' * (1 << 20)\nfor _ in range(100):\n    print(mb)\nreturn 'unreachable'").await;
    assert_failure(
        &out,
        FailureKind::OutputLimit,
        "outer output exceeded 67108864 bytes",
    );
    assert_eq!(out.logs[0], "first");
    assert_eq!(out.logs[1].len(), 1 << 20);
    assert!(out.logs.len() >= 60, "{}", out.logs.len());
    rt.dispose().await;
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
        "hoard = []\nwhile True:\n    hoard.append(bytearray(10 ** 7))",
    )
    .await;
    assert_failure(&out, FailureKind::WorkerExit, "before completing");
    assert_value(&run(&rt, "return 'still here'").await, json!("still here"));
    rt.dispose().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forged_limit_messages_are_exceptions() {
    let rt = runtime(small()).await;
    let out = run(&rt, "print('compute budget exhausted (1000ms of CPU time)')\nraise TimeoutError('wall-clock ceiling reached (1ms)')").await;
    assert_failure(
        &out,
        FailureKind::Exception,
        "TimeoutError: wall-clock ceiling reached (1ms)",
    );
    rt.dispose().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn junk_on_the_protocol_pipe_is_dropped() {
    let rt = runtime(small()).await;
    let out = run(
        &rt,
        r#"import os
junk = ['garbage', 'null', '[1,2]', '{"type":"done","error":{"kind":"timeout","message":"forged"}}',
        '{"type":"call","id":"1","global":"tools","name":"x","args":{}}', '{"type":"log","text":7}',
        '{"type":"nope"}', '{' * 100000, '\xff\xfe']
for j in junk:
    os.write(3, j.encode('utf-8', 'surrogateescape') + b'\n')
print('after junk')
return 'survived'"#,
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
        "import subprocess\nchild = subprocess.Popen(['/bin/sleep', '1000'])\nreturn child.pid",
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
                "import asyncio\nawait asyncio.sleep(0.01)\nreturn {i}"
            )))
            .await
        }
    });
    for (i, out) in futures::future::join_all(runs)
        .await
        .into_iter()
        .enumerate()
    {
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
        .request("import os, asyncio\nawait tools.report({'pid': os.getpid()})\nprint('waiting')\nawait asyncio.Event().wait()")
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
async fn bindings_resolve_reject_and_overlap() {
    let rt = runtime(small()).await;
    let tools = Tools::new();
    let out = rt
        .run(tools.request(
            r#"a = await tools.echo({'x': [1, 'two']})
b = await tools['my-tool']({'y': None})
try:
    await tools.fail({'why': 1})
except ToolCallError as e:
    caught = e
try:
    tools.constructor
    own = 'leaked'
except AttributeError:
    own = 'own names only'
return {'a': a, 'b': b, 'name': type(caught).__name__, 'toolName': caught.toolName,
        'message': str(caught), 'own': own}"#,
        ))
        .await
        .unwrap();
    assert_value(
        &out,
        json!({"a": {"x": [1, "two"]}, "b": {"y": null}, "name": "ToolCallError", "toolName": "fail",
            "message": "no luck with {\"why\":1}", "own": "own names only"}),
    );
    let start = Instant::now();
    let out = rt
        .run(tools.request(
            "import asyncio\nreturn await asyncio.gather(*(tools.slow(i) for i in range(1, 6)))",
        ))
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
    rt.dispose().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deep_values_round_trip() {
    let rt = runtime(small()).await;
    let tools = Tools::new();
    let out = rt
        .run(tools.request("v = 0\nfor i in range(3000):\n    v = [v] if i % 2 else {'k': v}\nreturn await tools.echo(v)"))
        .await
        .unwrap();
    assert_eq!(out.error, None);
    let value = out.value.expect("a value");
    assert_eq!(depth(&value), 3000);
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
        .run(tools.request("for i in range(5):\n    await tools.echo(i)\nreturn 'done'"))
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
async fn a_missing_interpreter_is_named() {
    let missing = SubprocessConfig {
        interpreter: Some("no-such-python3".into()),
        ..small()
    };
    let err = SubprocessRuntime::python(missing)
        .await
        .err()
        .expect("missing python");
    assert!(matches!(err, CodeRuntimeError::InterpreterNotFound { .. }));
    assert!(err.to_string().contains("`no-such-python3`"), "{err}");
    assert!(
        err.to_string().contains("SubprocessConfig::interpreter"),
        "{err}"
    );
}
