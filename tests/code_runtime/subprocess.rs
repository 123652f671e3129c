//! The subprocess code runtime end to end, in TypeScript against the `node` on PATH and in Python
//! against the `python3` on PATH. Each behaviour both languages share is written once and run as
//! two tests, `<behaviour>::typescript` and `<behaviour>::python`. Behaviours every backend shares
//! (the embedded runtime too) live in `code_runtime_backends.rs`; these are the subprocess-only
//! ones: children, the protocol pipe, interpreters.

use crate::code_runtime_support;

use std::sync::atomic::Ordering;
use std::time::Duration;

use code_runtime_support::*;
use dsh_tools::code::{
    Budgets, CodeRuntime, CodeRuntimeError, FailureKind, Sandbox, SubprocessConfig,
};
use serde_json::json;
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
    junk_on_the_protocol_pipe_is_dropped,
    spawned_grandchildren_die_with_the_run,
    cancellation_mid_run_aborts_and_leaves_no_child,
    a_pre_aborted_run_spawns_nothing,
    a_missing_interpreter_is_named,
    a_program_woken_by_its_own_handler_is_not_stuck,
    a_stuck_program_is_reported_after_its_own_code_ran,
    a_long_exception_chain_is_cut,
    an_import_error_names_no_host_path,
    an_ordinary_result_of_a_few_hundred_kb_decodes,
);

/// 50,000 integers (~290 KB of JSON, ~10 times that as decoded values) are an ordinary result:
/// the decode bound is absolute, not a ratio such arrays exceed.
async fn an_ordinary_result_of_a_few_hundred_kb_decodes(lang: Lang) {
    let out = lang
        .run_once(
            small(),
            "return Array.from({ length: 50000 }, (_, i) => 100000 + i);",
            "return [100000 + i for i in range(50000)]",
        )
        .await;
    let expected: Vec<u64> = (100_000..150_000).collect();
    assert_value(&out, json!(expected));
}

/// A failed import names what the program wrote, not the run's temporary directory or the
/// bootstrap (Node.js names the bootstrap as the importer).
async fn an_import_error_names_no_host_path(lang: Lang) {
    let out = lang
        .run_once(
            small(),
            "await import('./nothere.js');",
            "import nothere_at_all",
        )
        .await;
    let expected = lang.pick(
        "Cannot find module './nothere.js' imported from program.ts",
        "No module named 'nothere_at_all'",
    );
    assert_failure(&out, FailureKind::Exception, expected);
    let message = out.error.unwrap().message;
    assert!(!message.contains("dsh-code"), "{message}");
    assert!(!message.contains("worker"), "{message}");
}

/// What the interpreter itself can wake a program with is no stuck wait. Node.js: the
/// program's own `beforeExit` listeners, even one that resumes it only on a later empty loop,
/// and `exit` or `beforeExit` emitted by hand. CPython: a signal handler armed
/// with an interval timer, and a thread started with `_thread` (which no count of the
/// interpreter sees before it runs).
async fn a_program_woken_by_its_own_handler_is_not_stuck(lang: Lang) {
    let rt = lang.runtime(small()).await;
    let out = Tools::new()
        .run(
            &rt,
            lang.pick(
                concat!(
                    "process.emit('exit', 0);\n",
                    "const call = tools.echo({ n: 1 });\n",
                    "process.emit('beforeExit', 0);\nprocess.emit('beforeExit', 0);\n",
                    "const echoed = await call;\n",
                    "let wake: (v: string) => void = () => {};\n",
                    "const woken = new Promise<string>((r) => { wake = r; });\n",
                    "let stage = 0;\n",
                    "process.on('beforeExit', () => {\n",
                    "  if (stage === 0) { stage = 1; setTimeout(() => { stage = 2; }, 5); }\n",
                    "  else if (stage === 2) wake('from beforeExit');\n",
                    "});\n",
                    "return [echoed, await woken];",
                ),
                concat!(
                    "import asyncio, signal, time, _thread\nloop = asyncio.get_running_loop()\n",
                    "raw = loop.create_future()\n",
                    "later = lambda: (time.sleep(0.05), loop.call_soon_threadsafe(raw.set_result, 'raw thread'))\n",
                    "_thread.start_new_thread(later, ())\nthreaded = await raw\n",
                    "woken = loop.create_future()\n",
                    "signal.signal(signal.SIGALRM, lambda *_: loop.call_soon_threadsafe(woken.set_result, 'alarm'))\n",
                    "signal.setitimer(signal.ITIMER_REAL, 0.05)\nreturn [await woken, threaded]",
                ),
            ),
        )
        .await;
    let expected = lang.pick(
        json!([{"n": 1}, "from beforeExit"]),
        json!(["alarm", "raw thread"]),
    );
    assert_value(&out, expected);
    rt.dispose().await;
}

/// A stuck program is reported once nothing of its own can run any more: after its
/// `beforeExit` listener (Node.js), after its threads have ended (CPython).
async fn a_stuck_program_is_reported_after_its_own_code_ran(lang: Lang) {
    let rt = lang
        .runtime(SubprocessConfig {
            budgets: Budgets {
                max_wall_ms: 600_000,
                ..Budgets::default()
            },
            ..small()
        })
        .await;
    let program = lang.pick(
        "process.on('beforeExit', () => console.log('tick'));\nawait new Promise(() => {});",
        concat!(
            "import asyncio, threading\n",
            "t = threading.Thread(target=lambda: print('tick'))\nt.start()\nt.join()\n",
            "await asyncio.get_running_loop().create_future()",
        ),
    );
    let out = well_before_the_ceiling(run(&rt, program)).await;
    assert_failure(&out, FailureKind::Exception, "nothing can");
    assert_eq!(out.logs, ["tick"]);
    rt.dispose().await;
}

/// A failure's chain is cut past its first 64 exceptions (JavaScript: 64 causes), saying so:
/// CPython would format every one (a program chaining 100,000 took 15 s and 20 MB).
async fn a_long_exception_chain_is_cut(lang: Lang) {
    let out = lang
        .run_once(
            small(),
            concat!(
                "let e: Error | undefined;\n",
                "for (let i = 0; i < 1000; i++) e = new Error(String(i), { cause: e });\n",
                "throw e;",
            ),
            concat!(
                "e = None\nfor i in range(100000):\n",
                "    try:\n        raise ValueError(i) from e\n",
                "    except ValueError as x:\n        e = x\n",
                "raise e",
            ),
        )
        .await;
    assert_failure(&out, FailureKind::Exception, lang.pick("999", "99999"));
    let message = out.error.unwrap().message;
    assert!(message.len() < 64 << 10, "{} bytes", message.len());
    if lang == Lang::TypeScript {
        assert!(message.contains("Caused by: Error: 935"), "{message}");
        assert!(!message.contains("Caused by: Error: 934"), "{message}");
        assert!(message.ends_with("(further causes not shown)"), "{message}");
        // A cycle ends where it closes, even with the arrays' methods replaced by the program.
        let program = concat!(
            "Array.prototype.push = () => 0;\nArray.prototype.includes = () => false;\n",
            "const a: any = new Error('a');\na.cause = new Error('b', { cause: a });\nthrow a;",
        );
        let out = lang.run_once(small(), program, "").await;
        assert_failure(&out, FailureKind::Exception, "Error: a");
        let message = out.error.unwrap().message;
        assert_eq!(message.matches("Caused by: ").count(), 1, "{message}");
        assert!(message.contains("Caused by: Error: b"), "{message}");
    } else {
        assert!(message.contains("ValueError: 99936"), "{message}");
        assert!(!message.contains("ValueError: 99935"), "{message}");
        assert!(
            message.ends_with("(further chained exceptions not shown)"),
            "{message}"
        );
    }
}

/// Threads started with `_thread` that start the next one and end, 15,000 times, never look
/// like a stuck wait (a thread may start the next and end between two counts of the others),
/// and the wrapper that counts them keeps `_thread`'s own behaviour: its errors, a callable
/// answering every attribute.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_threads_relayed_through_thread_are_no_stuck_wait() {
    let program = concat!(
        "import asyncio, sys, _thread\nsys.setswitchinterval(1e-6)\n",
        "loop = asyncio.get_running_loop()\nrelayed = loop.create_future()\n",
        "def hop(i):\n",
        "    loop.call_soon_threadsafe(int)\n",
        "    if i == 15000:\n        loop.call_soon_threadsafe(relayed.set_result, i)\n",
        "    else:\n        _thread.start_new_thread(hop, (i + 1,))\n",
        "_thread.start_new_thread(hop, (0,))\nhops = await relayed\n",
        "class Anything:\n",
        "    def __getattr__(self, name):\n        return 1\n",
        "    def __call__(self):\n        loop.call_soon_threadsafe(ran.set_result, 'ran')\n",
        "ran = loop.create_future()\n_thread.start_new_thread(Anything(), ())\n",
        "errors = []\n",
        "for bad in [(print,), (print, [], {}, 1), (1, ())]:\n",
        "    try:\n        _thread.start_new_thread(*bad)\n",
        "    except TypeError as e:\n        errors.append(str(e))\n",
        "return [hops, await ran, errors]",
    );
    // Failure bounds only: 15,000 threads take about 3 s of an idle machine.
    let config = SubprocessConfig {
        budgets: Budgets {
            compute_ms: 300_000,
            max_wall_ms: 300_000,
            ..Budgets::default()
        },
        ..small()
    };
    let out = Lang::Python.run_once(config, "", program).await;
    assert_value(
        &out,
        json!([
            15000,
            "ran",
            [
                "start_new_thread expected at least 2 arguments, got 1",
                "start_new_thread expected at most 3 arguments, got 4",
                "first arg must be callable",
            ]
        ]),
    );
}

/// Errors nothing awaits — a callback's, a thread's (started with `threading` or `_thread`), a
/// destructor's — are logged with the program's frames only, as failures are.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unawaited_python_errors_are_logged_with_program_frames() {
    let program = concat!(
        "import asyncio, gc, threading, time, _thread\n",
        "def bad(where):\n    raise ValueError(where)\n",
        "asyncio.get_running_loop().call_soon(bad, 'callback')\nawait asyncio.sleep(0)\n",
        "t = threading.Thread(target=bad, args=('thread',))\nt.start()\nt.join()\n",
        "done = threading.Event()\n",
        "_thread.start_new_thread(lambda: (done.set(), bad('raw thread')), ())\n",
        "done.wait()\ntime.sleep(0.2)\n",
        "class D:\n    def __del__(self):\n        bad('destructor')\n",
        "d = D()\ndel d\ngc.collect()\n",
        // A library function as the callback: its repr would name the host's file.
        "import json\nasyncio.get_running_loop().call_soon(json.loads, '{bad')\nawait asyncio.sleep(0)\n",
        // A program resetting the loop's handler, or whose own thread hook fails, falls back
        // on the bootstrap's reports.
        "asyncio.get_running_loop().set_exception_handler(None)\n",
        "asyncio.get_running_loop().call_soon(bad, 'default handler')\nawait asyncio.sleep(0)\n",
        "def hook(args):\n    raise RuntimeError('hook')\n",
        "threading.excepthook = hook\n",
        "t = threading.Thread(target=bad, args=('failing hook',))\nt.start()\nt.join()\n",
        "return 'ok'",
    );
    let out = Lang::Python.run_once(small(), "", program).await;
    assert_value(&out, json!("ok"));
    let logs = out.logs.join("\n");
    for what in [
        "callback",
        "thread",
        "raw thread",
        "destructor",
        "default handler",
    ] {
        assert!(logs.contains(&format!("ValueError: {what}")), "{logs}");
    }
    // As in CPython, a failing hook's own error is what is reported.
    assert!(logs.contains("RuntimeError: hook"), "{logs}");
    assert!(
        logs.contains("File \"program.py\", line 3, in bad"),
        "{logs}"
    );
    for line in logs.lines().filter(|line| line.contains("File \"")) {
        assert!(line.contains("File \"program.py\""), "{line:?} in {logs}");
    }
    assert!(logs.contains("JSONDecodeError"), "{logs}");
    assert!(!logs.contains("json/__init__.py"), "{logs}");
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
    let pid = out
        .value
        .as_ref()
        .and_then(|v| v.to_value().as_u64())
        .expect("a pid");
    assert!(eventually_gone(pid).await, "sleep {pid} survived the run");
    rt.dispose().await;
}

/// A program that reports its process id through `tools.report`, logs `waiting` if `log`, then
/// waits forever on a call the host never answers.
fn report_pid_then_hang(lang: Lang, log: bool) -> String {
    let log = if log {
        lang.pick("console.log('waiting');\n", "print('waiting')\n")
    } else {
        ""
    };
    lang.pick(
        format!("await tools.report({{pid: process.pid}});\n{log}await host.forever({{}});"),
        format!("import os\nawait tools.report({{'pid': os.getpid()}})\n{log}await host.forever()"),
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

async fn a_missing_interpreter_is_named(lang: Lang) {
    let interpreter = lang.pick("/nonexistent/node", "no-such-python3");
    let missing = SubprocessConfig {
        interpreter: Some(interpreter.into()),
        ..small()
    };
    let err = lang
        .start(missing)
        .await
        .expect_err("a missing interpreter");
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
        .expect_err("not node");
    assert!(
        matches!(err, CodeRuntimeError::InterpreterTooOld { .. }),
        "{err}"
    );
}
