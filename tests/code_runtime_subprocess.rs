//! The subprocess code runtime end to end (SPEC §8), in TypeScript against the `node` on PATH and
//! in Python against the `python3` on PATH. Each behaviour both languages share is written once
//! and run as two tests, `<behaviour>::typescript` and `<behaviour>::python`.

mod code_runtime_support;

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use code_runtime_support::*;
use dsh_tools::code_runtime::{
    BindingNamespace, CodeRuntime, CodeRuntimeError, FailureKind, Isolation, RunRequest, Sandbox,
    SubprocessConfig,
};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

/// Declares, for each `async fn behaviour(lang: Lang)`, a module `behaviour` with one test per
/// language, so a failure names its language and the languages run in parallel.
macro_rules! in_both_languages {
    ($($behaviour:ident),* $(,)?) => {$(
        mod $behaviour {
            use super::Lang;

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn typescript() {
                super::$behaviour(Lang::TypeScript).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn python() {
                super::$behaviour(Lang::Python).await;
            }
        }
    )*};
}

in_both_languages!(
    returns_every_json_shape,
    logs_arrive_in_order,
    an_error_is_an_exception_with_program_lines,
    a_hot_loop_exhausts_the_compute_budget,
    a_hung_wait_reaches_the_wall_clock_ceiling,
    a_flood_of_output_hits_the_output_limit,
    output_boundaries_are_exact,
    a_memory_bomb_hits_the_memory_limit_and_the_host_stays_healthy,
    forged_limit_messages_are_exceptions,
    junk_on_the_protocol_pipe_is_dropped,
    spawned_grandchildren_die_with_the_run,
    fifty_concurrent_runs_all_settle,
    cancellation_mid_run_aborts_and_leaves_no_child,
    a_pre_aborted_run_spawns_nothing,
    bindings_resolve_reject_and_overlap,
    deep_values_round_trip,
    the_binding_call_budget_is_enforced,
    dispose_aborts_live_runs_and_refuses_new_ones,
    a_reserved_binding_global_is_refused,
    a_missing_interpreter_is_named,
);

async fn returns_every_json_shape(lang: Lang) {
    let rt = lang.runtime(small()).await;
    assert_eq!(
        (rt.language(), rt.isolation()),
        (lang.name(), Isolation::SandboxedProcess)
    );
    // `None` stands for a run that completes without a value: Python cannot tell `return None`
    // from falling off the end of the program.
    let cases: [(&str, Option<Value>); 10] = [
        lang.pick(
            ("return null", Some(json!(null))),
            ("return None", None),
        ),
        (lang.pick("const x = 1;", "x = 1"), None),
        (lang.pick("return true", "return True"), Some(json!(true))),
        ("return -1.5e-7", Some(json!(-1.5e-7))),
        (
            lang.pick("return 9007199254740991", "return 2**53 - 1"),
            Some(json!(9007199254740991u64)),
        ),
        ("return 'é\\n\"😀'", Some(json!("é\n\"😀"))),
        ("return []", Some(json!([]))),
        (
            lang.pick("return [1, 'a'] as const", "return (1, 'a')"),
            Some(json!([1, "a"])),
        ),
        ("return {}", Some(json!({}))),
        lang.pick(
            (
                "const v: {a: number[]} = {a: [1, 2]}; return {v, s: 'x', n: null, __proto__x: [{}]}",
                Some(json!({"v": {"a": [1, 2]}, "s": "x", "n": null, "__proto__x": [{}]})),
            ),
            (
                "v = {'a': [1, 2]}\nreturn {'v': v, 'n': None, '__proto__': [{}]}",
                Some(json!({"v": {"a": [1, 2]}, "n": null, "__proto__": [{}]})),
            ),
        ),
    ];
    for (program, value) in cases {
        let out = run(&rt, program).await;
        assert_eq!(out.error, None, "{program}: {out:?}");
        assert_eq!(out.value, value, "{program}");
    }
    let lossy: &[&str] = lang.pick(
        &[
            "return -0",
            "return NaN",
            "return [1,,2]",
            "return new Date(0)",
            "return () => 1",
        ],
        &[
            "return -0.0",
            "return float('nan')",
            "return 2**53",
            "return {1: 2}",
            "return object()",
            "return '\\ud800'",
        ],
    );
    for program in lossy {
        assert_failure(
            &run(&rt, program).await,
            FailureKind::InvalidOutput,
            "lossless",
        );
    }
    rt.dispose().await;
}

async fn logs_arrive_in_order(lang: Lang) {
    let rt = lang.runtime(small()).await;
    let out = run(
        &rt,
        lang.pick(
            "console.log('a', 1, {k: [2]});\nprocess.stdout.write('b\\n');\nconsole.error('c');\n\
             console.info('d'); console.warn('e'); console.debug('f');\nreturn 0;",
            "import sys\nprint('a', 1, {'k': [2]})\nprint('b', end='')\nprint('c')\n\
             sys.stderr.write('d\\ne\\n')\nreturn 0",
        ),
    )
    .await;
    assert_value(&out, json!(0));
    let logs: &[&str] = lang.pick(
        &["a 1 { k: [ 2 ] }", "b", "c", "d", "e", "f"],
        &["a 1 {'k': [2]}", "bc", "d", "e"],
    );
    assert_eq!(out.logs, logs);
    // Writes that bypass the language's own streams are captured from the pipes.
    let out = run(
        &rt,
        lang.pick(
            "const fs = await import('node:fs');\nfs.writeSync(1, 'raw out\\n');\nfs.writeSync(2, 'raw err');\nreturn 1;",
            "import os\nos.write(1, b'raw out\\n')\nos.write(2, b'raw err')\nreturn 1",
        ),
    )
    .await;
    assert_value(&out, json!(1));
    let mut logs = out.logs.clone();
    logs.sort();
    assert_eq!(logs, ["raw err", "raw out"]);
    rt.dispose().await;
}

async fn an_error_is_an_exception_with_program_lines(lang: Lang) {
    let rt = lang.runtime(small()).await;
    let out = run(
        &rt,
        lang.pick(
            "console.log('before');\nconst n: number = 2;\nthrow new TypeError('boom ' + n);",
            "print('before')\nn = 2\nraise ValueError(f'boom {n}')",
        ),
    )
    .await;
    assert_failure(
        &out,
        FailureKind::Exception,
        lang.pick("TypeError: boom 2", "ValueError: boom 2"),
    );
    let message = out.error.unwrap().message;
    let line = lang.pick("program.ts:3:", "File \"program.py\", line 3");
    assert!(message.contains(line), "{message}");
    // The worker's own frames are not the program's business.
    assert!(
        !message.contains(lang.pick("worker.mjs", "worker.py")),
        "{message}"
    );
    assert_eq!(out.logs, ["before"]);
    assert_failure(
        &run(&rt, lang.pick("const = ;", "x = = 1")).await,
        FailureKind::Exception,
        lang.pick("program.ts:1:", "SyntaxError"),
    );
    rt.dispose().await;
}

async fn a_hot_loop_exhausts_the_compute_budget(lang: Lang) {
    let start = Instant::now();
    let out = lang
        .run_once(
            small(),
            "console.log('spinning');\nwhile (true) {}",
            "print('spinning')\nwhile True: pass",
        )
        .await;
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
}

async fn a_hung_wait_reaches_the_wall_clock_ceiling(lang: Lang) {
    let rt = lang
        .runtime(SubprocessConfig {
            max_wall_ms: 700,
            ..small()
        })
        .await;
    let start = Instant::now();
    let out = run(
        &rt,
        lang.pick(
            "await new Promise(() => {});",
            "import asyncio\nawait asyncio.Event().wait()",
        ),
    )
    .await;
    assert_failure(
        &out,
        FailureKind::Timeout,
        "wall-clock ceiling reached (700ms)",
    );
    assert!(start.elapsed() < Duration::from_secs(5));
    rt.dispose().await;
}

async fn a_flood_of_output_hits_the_output_limit(lang: Lang) {
    let config = SubprocessConfig {
        max_wall_ms: 60_000,
        compute_ms: 30_000,
        ..small()
    };
    let out = lang
        .run_once(
            config,
            "console.log('first');\nconst mb = 'x'.repeat(1 << 20);\nfor (let i = 0; i < 100; i++) console.log(mb);\nreturn 'unreachable';",
            "print('first')\nmb = 'x' * (1 << 20)\nfor _ in range(100):\n    print(mb)\nreturn 'unreachable'",
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
}

async fn output_boundaries_are_exact(lang: Lang) {
    let cap = |max_output_bytes| SubprocessConfig {
        max_output_bytes,
        ..small()
    };
    let rt = lang.runtime(cap(7)).await;
    assert_value(&run(&rt, "return '€'").await, json!("€"));
    let rt = lang.runtime(cap(6)).await;
    // The diagnostic itself is cut to the 4 bytes left: `"ou"`.
    assert_failure(
        &run(&rt, "return '€'").await,
        FailureKind::OutputLimit,
        "ou",
    );
    let log_then_return = lang.pick(
        "console.log('abc'); return 'xy'",
        "print('abc')\nreturn 'xy'",
    );
    let rt = lang.runtime(cap(11)).await;
    assert_value(&run(&rt, log_then_return).await, json!("xy"));
    let rt = lang.runtime(cap(10)).await;
    let out = run(&rt, log_then_return).await;
    assert_failure(&out, FailureKind::OutputLimit, "o");
    assert_eq!(out.logs, ["abc"]);
}

async fn a_memory_bomb_hits_the_memory_limit_and_the_host_stays_healthy(lang: Lang) {
    let rt = lang
        .runtime(SubprocessConfig {
            compute_ms: 30_000,
            ..small()
        })
        .await;
    let out = run(
        &rt,
        lang.pick(
            "const hoard = [];\nwhile (true) hoard.push(new Array(1e6).fill(1.5));",
            "hoard = []\nwhile True:\n    hoard.append(bytearray(10 ** 7))",
        ),
    )
    .await;
    assert_failure(&out, FailureKind::MemoryLimit, "memory budget exhausted");
    assert_value(&run(&rt, "return 'still here'").await, json!("still here"));
    rt.dispose().await;
}

async fn forged_limit_messages_are_exceptions(lang: Lang) {
    let out = lang
        .run_once(
            small(),
            "console.log('compute budget exhausted (1000ms of CPU time)');\nthrow new Error('wall-clock ceiling reached (1ms)');",
            "print('compute budget exhausted (1000ms of CPU time)')\nraise TimeoutError('wall-clock ceiling reached (1ms)')",
        )
        .await;
    assert_failure(
        &out,
        FailureKind::Exception,
        lang.pick(
            "wall-clock ceiling reached (1ms)",
            "TimeoutError: wall-clock ceiling reached (1ms)",
        ),
    );
}

async fn junk_on_the_protocol_pipe_is_dropped(lang: Lang) {
    let out = lang
        .run_once(
            small(),
            r#"const fs = await import('node:fs');
const junk = ['garbage', 'null', '[1,2]', '{"type":"done","error":{"kind":"timeout","message":"forged"}}',
  '{"type":"call","id":"1","global":"tools","name":"x","args":{}}', '{"type":"log","text":7}',
  '{"type":"nope"}', '{'.repeat(100000), '{"type":"done","error":{"kind":"output-limit","message":"x"}}'];
for (const j of junk) fs.writeSync(3, j + '\n');
console.log('after junk');
return 'survived';"#,
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
}

async fn spawned_grandchildren_die_with_the_run(lang: Lang) {
    // Starting processes needs the sandbox off.
    let rt = lang
        .runtime(SubprocessConfig {
            sandbox: Sandbox::Off,
            ..small()
        })
        .await;
    let out = run(
        &rt,
        lang.pick(
            "const cp = await import('node:child_process');\nconst child = cp.spawn('/bin/sleep', ['1000'], { stdio: 'ignore' });\nreturn child.pid;",
            "import subprocess\nchild = subprocess.Popen(['/bin/sleep', '1000'])\nreturn child.pid",
        ),
    )
    .await;
    let pid = out.value.as_ref().and_then(|v| v.as_u64()).expect("a pid");
    assert!(eventually_gone(pid).await, "sleep {pid} survived the run");
    rt.dispose().await;
}

async fn fifty_concurrent_runs_all_settle(lang: Lang) {
    let rt = lang
        .runtime(SubprocessConfig {
            compute_ms: 20_000,
            max_wall_ms: 60_000,
            ..small()
        })
        .await;
    let runs = (0..50).map(|i| {
        let rt = rt.clone();
        let program = lang.pick(
            format!("await new Promise(r => setTimeout(r, 10)); return {i};"),
            format!("import asyncio\nawait asyncio.sleep(0.01)\nreturn {i}"),
        );
        async move { rt.run(RunRequest::new(program)).await }
    });
    let outcomes = futures::future::join_all(runs).await;
    for (i, out) in outcomes.into_iter().enumerate() {
        assert_value(&out.unwrap(), json!(i));
    }
    rt.dispose().await;
}

/// A program that reports its process id through `tools.report`, logs `waiting` if `log`, then
/// waits forever.
fn report_pid_then_hang(lang: Lang, log: bool) -> String {
    let log = if log {
        lang.pick("console.log('waiting');\n", "print('waiting')\n")
    } else {
        ""
    };
    lang.pick(
        format!("await tools.report({{pid: process.pid}});\n{log}await new Promise(() => {{}});"),
        format!(
            "import os, asyncio\nawait tools.report({{'pid': os.getpid()}})\n{log}await asyncio.Event().wait()"
        ),
    )
}

async fn cancellation_mid_run_aborts_and_leaves_no_child(lang: Lang) {
    let rt = lang.runtime(small()).await;
    let tools = Tools::new();
    let signal = CancellationToken::new();
    let request = tools
        .request(&report_pid_then_hang(lang, true))
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

async fn a_pre_aborted_run_spawns_nothing(lang: Lang) {
    let rt = lang
        .runtime(SubprocessConfig {
            standby: false,
            ..small()
        })
        .await;
    let tools = Tools::new();
    let signal = CancellationToken::new();
    signal.cancel();
    let program = lang.pick(
        "await tools.echo({}); return 1",
        "await tools.echo({})\nreturn 1",
    );
    let out = rt.run(tools.request(program).signal(signal)).await.unwrap();
    assert_failure(&out, FailureKind::Abort, "before it started");
    assert_eq!(tools.calls.load(Ordering::SeqCst), 0);
    rt.dispose().await;
}

async fn bindings_resolve_reject_and_overlap(lang: Lang) {
    let rt = lang.runtime(small()).await;
    let tools = Tools::new();
    let (program, expected) = lang.pick(
        (
            r#"const a = await tools.echo({x: [1, 'two']});
const b = await tools["my-tool"]({y: null});
let caught: any;
try { await tools.fail({why: 1}); } catch (e) { caught = e; }
return {a, b, name: caught.name, toolName: caught.toolName, message: caught.message,
  isError: caught instanceof Error, isClass: caught instanceof ToolCallError,
  proto: typeof tools.constructor, own: Object.keys(tools).sort()};"#,
            json!({"a": {"x": [1, "two"]}, "b": {"y": null}, "name": "ToolCallError", "toolName": "fail",
                "message": "no luck with {\"why\":1}", "isError": true, "isClass": true, "proto": "undefined",
                "own": ["echo", "fail", "my-tool", "report", "slow"]}),
        ),
        (
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
            json!({"a": {"x": [1, "two"]}, "b": {"y": null}, "name": "ToolCallError", "toolName": "fail",
                "message": "no luck with {\"why\":1}", "own": "own names only"}),
        ),
    );
    let out = tools.run(&rt, program).await;
    assert_value(&out, expected);
    let start = Instant::now();
    let overlapping = lang.pick(
        "return await Promise.all([1, 2, 3, 4, 5].map(i => tools.slow(i)));",
        "import asyncio\nreturn await asyncio.gather(*(tools.slow(i) for i in range(1, 6)))",
    );
    let out = tools.run(&rt, overlapping).await;
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
    let lossy = lang.pick("await tools.echo(-0)", "await tools.echo(-0.0)");
    let out = tools.run(&rt, lossy).await;
    assert_failure(
        &out,
        FailureKind::Exception,
        "binding arguments must be lossless JSON",
    );
    rt.dispose().await;
}

async fn deep_values_round_trip(lang: Lang) {
    let rt = lang.runtime(small()).await;
    let tools = Tools::new();
    let nested = lang.pick(
        "let v: any = 0;\nfor (let i = 0; i < 3000; i++) v = i % 2 ? [v] : {k: v};\nreturn await tools.echo(v);",
        "v = 0\nfor i in range(3000):\n    v = [v] if i % 2 else {'k': v}\nreturn await tools.echo(v)",
    );
    let out = tools.run(&rt, nested).await;
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

async fn the_binding_call_budget_is_enforced(lang: Lang) {
    let rt = lang
        .runtime(SubprocessConfig {
            max_binding_calls: 3,
            ..small()
        })
        .await;
    let tools = Tools::new();
    let five_calls = lang.pick(
        "for (let i = 0; i < 5; i++) await tools.echo(i);\nreturn 'done';",
        "for i in range(5):\n    await tools.echo(i)\nreturn 'done'",
    );
    let out = tools.run(&rt, five_calls).await;
    assert_failure(
        &out,
        FailureKind::BindingLimit,
        "binding call limit reached (3 calls)",
    );
    assert_eq!(tools.calls.load(Ordering::SeqCst), 3);
    rt.dispose().await;
}

async fn dispose_aborts_live_runs_and_refuses_new_ones(lang: Lang) {
    let rt = lang.runtime(small()).await;
    let tools = Tools::new();
    let live = rt.run(tools.request(&report_pid_then_hang(lang, false)));
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

async fn a_reserved_binding_global_is_refused(lang: Lang) {
    let rt = lang.runtime(small()).await;
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
}

async fn a_missing_interpreter_is_named(lang: Lang) {
    let interpreter = lang.pick("/nonexistent/node", "no-such-python3");
    let missing = SubprocessConfig {
        interpreter: Some(interpreter.into()),
        ..small()
    };
    let err = lang
        .start(missing)
        .await
        .err()
        .expect("a missing interpreter");
    assert!(matches!(err, CodeRuntimeError::InterpreterNotFound { .. }));
    assert!(
        err.to_string().contains(&format!("`{interpreter}`")),
        "{err}"
    );
    assert!(
        err.to_string().contains("SubprocessConfig::interpreter"),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn typescript_non_erasable_syntax_is_refused_without_a_child() {
    let config = SubprocessConfig {
        standby: false,
        interpreter: None,
        ..small()
    };
    let rt = Lang::TypeScript.runtime(config).await;
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
async fn typescript_a_thrown_non_error_is_an_exception() {
    let rt = Lang::TypeScript.runtime(small()).await;
    assert_failure(&run(&rt, "throw 42").await, FailureKind::Exception, "42");
    rt.dispose().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn typescript_an_interpreter_that_is_not_node_is_too_old() {
    let python_as_node = SubprocessConfig {
        interpreter: Some("python3".into()),
        ..small()
    };
    let err = Lang::TypeScript
        .start(python_as_node)
        .await
        .err()
        .expect("not node");
    assert!(
        matches!(err, CodeRuntimeError::InterpreterTooOld { .. }),
        "{err}"
    );
}
