//! The subprocess code runtime end to end (SPEC §8), in TypeScript against the `node` on PATH and
//! in Python against the `python3` on PATH. Each behaviour both languages share is written once
//! and run as two tests, `<behaviour>::typescript` and `<behaviour>::python`. Behaviours every
//! backend shares (the embedded runtime too) live in `code_runtime_backends.rs`; these are the
//! subprocess-only ones: children, the protocol pipe, interpreters.

use crate::code_runtime_support;

use std::sync::atomic::Ordering;
use std::time::Duration;

use code_runtime_support::*;
use dsh_tools::code::{CodeRuntime, CodeRuntimeError, FailureKind, Sandbox, SubprocessConfig};
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
);

/// What the interpreter itself can wake a program with is no stuck wait: a `beforeExit`
/// listener of the program's own (Node.js runs the bootstrap's first), a signal handler armed
/// with an interval timer (CPython's loop knows neither).
async fn a_program_woken_by_its_own_handler_is_not_stuck(lang: Lang) {
    let out = lang
        .run_once(
            small(),
            concat!(
                "let wake: (v: string) => void = () => {};\n",
                "const woken = new Promise<string>((r) => { wake = r; });\n",
                "process.once('beforeExit', () => wake('from beforeExit'));\n",
                "return await woken;",
            ),
            concat!(
                "import asyncio, signal\nloop = asyncio.get_running_loop()\n",
                "woken = loop.create_future()\n",
                "signal.signal(signal.SIGALRM, lambda *_: loop.call_soon_threadsafe(woken.set_result, 'alarm'))\n",
                "signal.setitimer(signal.ITIMER_REAL, 0.05)\nreturn await woken",
            ),
        )
        .await;
    assert_value(&out, json!(lang.pick("from beforeExit", "alarm")));
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
