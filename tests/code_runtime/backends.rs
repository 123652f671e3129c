//! The code runtime contract as one suite over every backend: the subprocess runtimes (Node.js,
//! CPython) and the embedded ones (QuickJS; Python on Monty with feature `embedded-python`). Each
//! behaviour is written once and runs as one test per backend, `<behaviour>::<backend>`; programs
//! differ only by language.

use crate::code_runtime_support;

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use code_runtime_support::*;
use dsh_tools::code::{
    BindingNamespace, Budgets, CodeRuntime, CodeRuntimeError, EmbeddedConfig, EmbeddedRuntime,
    FailureKind, Isolation, RunOutcome, RunRequest, SubprocessConfig,
};
use dsh_tools::prelude::*;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

/// One implementation of [`CodeRuntime`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Backend {
    SubprocessTypeScript,
    SubprocessPython,
    EmbeddedJavaScript,
    /// Python on Monty, in its pool of sandboxed worker processes.
    EmbeddedPython,
}

/// Small budgets so limit tests finish fast.
fn budgets() -> Budgets {
    small().budgets
}

impl Backend {
    fn lang(self) -> Lang {
        match self {
            Backend::SubprocessTypeScript | Backend::EmbeddedJavaScript => Lang::TypeScript,
            Backend::SubprocessPython | Backend::EmbeddedPython => Lang::Python,
        }
    }

    /// Whether the interpreter is QuickJS.
    fn quickjs(self) -> bool {
        matches!(self, Backend::EmbeddedJavaScript)
    }

    /// Whether the runtime is one of `EmbeddedRuntime`'s: the memory budget is the
    /// interpreter's allocator's, with a fixed diagnostic.
    fn interpreter_budget(self) -> bool {
        matches!(self, Backend::EmbeddedJavaScript | Backend::EmbeddedPython)
    }

    fn pick<T>(self, typescript: T, python: T) -> T {
        self.lang().pick(typescript, python)
    }

    /// `monty` on Python on Monty, `other` elsewhere: where Monty's Python subset differs.
    fn on_monty<T>(self, monty: T, other: T) -> T {
        if self == Backend::EmbeddedPython {
            monty
        } else {
            other
        }
    }

    async fn runtime(self, b: Budgets) -> Arc<dyn CodeRuntime> {
        match self {
            Backend::SubprocessTypeScript | Backend::SubprocessPython => {
                let config = SubprocessConfig {
                    budgets: b.clone(),
                    ..SubprocessConfig::default()
                };
                Arc::new(self.lang().runtime(config).await)
            }
            Backend::EmbeddedJavaScript => Arc::new(
                EmbeddedRuntime::javascript(EmbeddedConfig {
                    budgets: b.clone(),
                    ..EmbeddedConfig::default()
                })
                .expect("a valid config"),
            ),
            Backend::EmbeddedPython => Arc::new(
                EmbeddedRuntime::python(EmbeddedConfig {
                    budgets: b.clone(),
                    ..EmbeddedConfig::default()
                })
                .expect("the Monty worker is built with the tests"),
            ),
        }
    }

    async fn run_once(self, b: Budgets, typescript: &str, python: &str) -> RunOutcome {
        let rt = self.runtime(b).await;
        let out = run(rt.as_ref(), self.pick(typescript, python)).await;
        rt.dispose().await;
        out
    }
}

/// Declares, for each `async fn behaviour(backend: Backend)`, a module `behaviour` with one test
/// per backend.
macro_rules! on_every_backend {
    ($($behaviour:ident),* $(,)?) => {$(
        mod $behaviour {
            use super::Backend;

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn subprocess_typescript() {
                super::$behaviour(Backend::SubprocessTypeScript).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn subprocess_python() {
                super::$behaviour(Backend::SubprocessPython).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn embedded_javascript() {
                super::$behaviour(Backend::EmbeddedJavaScript).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn embedded_python() {
                super::$behaviour(Backend::EmbeddedPython).await;
            }
        }
    )*};
}

mod output_limit;

on_every_backend!(
    reports_language_and_isolation,
    returns_every_json_shape,
    logs_arrive_in_order,
    an_error_is_an_exception_with_program_lines,
    a_chained_error_shows_only_program_frames,
    a_group_of_errors_shows_its_members,
    a_failure_is_reported_as_it_happened_whatever_the_program_replaced,
    a_hot_loop_exhausts_the_compute_budget,
    a_hung_wait_reaches_the_wall_clock_ceiling,
    a_wait_on_nothing_fails_at_once,
    a_wait_on_a_call_or_a_timer_is_not_stuck,
    a_flood_of_output_hits_the_output_limit,
    output_boundaries_are_exact,
    a_memory_bomb_ends_the_run_and_the_host_stays_healthy,
    forged_limit_messages_are_exceptions,
    fifty_concurrent_runs_all_settle,
    cancellation_mid_run_aborts,
    a_pre_aborted_run_calls_nothing,
    bindings_resolve_reject_and_overlap,
    deep_values_round_trip,
    run_code_returns_completions_nested_to_the_runtime_depth,
    the_binding_call_budget_is_enforced,
    dispose_aborts_live_runs_and_refuses_new_ones,
    a_reserved_binding_global_is_refused,
    non_erasable_typescript_is_refused,
    a_program_over_256_kib_is_refused_in_either_language,
);

/// Programs have one size limit, 256 KiB, in both languages: a longer one is refused before it
/// runs (a 2 MB expression once overflowed Monty's parser), and one at the limit runs.
async fn a_program_over_256_kib_is_refused_in_either_language(backend: Backend) {
    const LIMIT: usize = 256 << 10;
    let rt = backend.runtime(budgets()).await;
    let comment = backend.pick("//", "#");
    let program = |bytes: usize| {
        let body = "return 1";
        format!(
            "{}\n{comment}{}",
            body,
            "x".repeat(bytes - body.len() - 1 - comment.len())
        )
    };
    let over = run(rt.as_ref(), &program(LIMIT + 1)).await;
    assert_failure(
        &over,
        FailureKind::Exception,
        &format!(
            "program is {} bytes; at most {LIMIT} are accepted",
            LIMIT + 1
        ),
    );
    assert_value(&run(rt.as_ref(), &program(LIMIT)).await, json!(1));
    rt.dispose().await;
}

async fn reports_language_and_isolation(backend: Backend) {
    let rt = backend.runtime(budgets()).await;
    assert_eq!(rt.language(), backend.lang().name());
    // Every backend runs programs outside the host: child processes or the embedded runtimes'
    // worker pool, whose label depends on the sandbox.
    assert_ne!(rt.isolation(), Isolation::InProcessInterpreter);
    rt.dispose().await;
}

async fn returns_every_json_shape(backend: Backend) {
    let rt = backend.runtime(budgets()).await;
    // `None` stands for a run that completes without a value: Python cannot tell `return None`
    // from falling off the end of the program.
    let cases: [(&str, Option<Value>); 10] = [
        backend.pick(
            ("return null", Some(json!(null))),
            ("return None", None),
        ),
        (backend.pick("const x = 1;", "x = 1"), None),
        (backend.pick("return true", "return True"), Some(json!(true))),
        ("return -1.5e-7", Some(json!(-1.5e-7))),
        (
            backend.pick("return 9007199254740991", "return 2**53 - 1"),
            Some(json!(9007199254740991u64)),
        ),
        ("return 'é\\n\"😀'", Some(json!("é\n\"😀"))),
        ("return []", Some(json!([]))),
        (
            backend.pick("return [1, 'a'] as const", "return (1, 'a')"),
            Some(json!([1, "a"])),
        ),
        ("return {}", Some(json!({}))),
        backend.pick(
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
        let out = run(rt.as_ref(), program).await;
        assert_eq!(out.error, None, "{program}: {out:?}");
        assert_eq!(out.value.as_ref().map(|v| v.to_value()), value, "{program}");
    }
    let lossy: &[&str] = backend.pick(
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
            "return '\\ud800'",
        ],
    );
    // Monty's parser turns a lone surrogate escape into U+FFFD: there is nothing lossy left.
    let lossy = &lossy[..backend.on_monty(4, lossy.len())];
    for program in lossy {
        assert_failure(
            &run(rt.as_ref(), program).await,
            FailureKind::InvalidOutput,
            "lossless",
        );
    }
    rt.dispose().await;
}

async fn logs_arrive_in_order(backend: Backend) {
    let rt = backend.runtime(budgets()).await;
    let out = run(
        rt.as_ref(),
        backend.pick(
            "console.log('a', 1, {k: [2]});\nconsole.error('c');\n\
             console.info('d'); console.warn('e'); console.debug('f');\nreturn 0;",
            "print('a', 1, {'k': [2]})\nprint('b', end='')\nprint('c')\nprint('d')\nreturn 0",
        ),
    )
    .await;
    assert_value(&out, json!(0));
    let logs: &[&str] = backend.pick(
        &["a 1 { k: [ 2 ] }", "c", "d", "e", "f"],
        &["a 1 {'k': [2]}", "bc", "d"],
    );
    assert_eq!(out.logs, logs);
    rt.dispose().await;
}

async fn an_error_is_an_exception_with_program_lines(backend: Backend) {
    let rt = backend.runtime(budgets()).await;
    let out = run(
        rt.as_ref(),
        backend.pick(
            "console.log('before');\nconst n: number = 2;\nthrow new TypeError('boom ' + n);",
            "print('before')\nn = 2\nraise ValueError(f'boom {n}')",
        ),
    )
    .await;
    assert_failure(
        &out,
        FailureKind::Exception,
        backend.pick("TypeError: boom 2", "ValueError: boom 2"),
    );
    let message = out.error.unwrap().message;
    let line = backend.pick("program.ts:3:", "line 3");
    assert!(message.contains(line), "{message}");
    // The bootstrap's own frames are not the program's business.
    for bootstrap in ["worker.mjs", "worker.py", "bootstrap.js"] {
        assert!(!message.contains(bootstrap), "{message}");
    }
    assert_eq!(out.logs, ["before"]);
    // A throw on the first line is placed in the program's own columns, not the shell's.
    if backend.lang() == Lang::TypeScript {
        let program = "const n = 2; throw new TypeError('boom ' + n);";
        let message = run(rt.as_ref(), program).await.error.unwrap().message;
        let at = message
            .split("program.ts:1:")
            .nth(1)
            .expect("a line-1 position");
        let column: usize = at
            .split(|c: char| !c.is_ascii_digit())
            .next()
            .and_then(|digits| digits.parse().ok())
            .expect("a column");
        assert!((1..=program.len()).contains(&column), "{message}");
    }
    assert_failure(
        &run(rt.as_ref(), backend.pick("const = ;", "x = = 1")).await,
        FailureKind::Exception,
        backend.pick("program.ts:1:", "SyntaxError"),
    );
    // A syntax error the type stripper lets through is the interpreter's to report; QuickJS
    // names its line (Node.js does not).
    if backend.lang() == Lang::TypeScript {
        assert_failure(
            &run(rt.as_ref(), "\nlet a = 1;\nlet a = 2;").await,
            FailureKind::Exception,
            "SyntaxError",
        );
        if backend.quickjs() {
            assert_failure(
                &run(rt.as_ref(), "\nlet a = 1;\nlet a = 2;").await,
                FailureKind::Exception,
                "program.ts:3",
            );
        }
    }
    assert_failure(
        &run(
            rt.as_ref(),
            backend.pick(
                "throw 42",
                // Monty's exceptions take one string argument.
                backend.on_monty("raise Exception('42')", "raise Exception(42)"),
            ),
        )
        .await,
        FailureKind::Exception,
        "42",
    );
    rt.dispose().await;
}

/// An error raised while handling a failed call keeps the chain (JavaScript: each `cause`, up to
/// 64), and every traceback in it shows only the program's frames (not the bootstrap's binding,
/// nor library paths of the host).
async fn a_chained_error_shows_only_program_frames(backend: Backend) {
    let rt = backend.runtime(budgets()).await;
    let out = Tools::new()
        .run(
            rt.as_ref(),
            backend.pick(
                "try {\n  await tools.fail({});\n} catch (e) {\n  throw new Error('wrapped', { cause: e });\n}",
                "try:\n    await tools.fail({})\nexcept ToolCallError:\n    raise RuntimeError('wrapped')",
            ),
        )
        .await;
    assert_failure(&out, FailureKind::Exception, "wrapped");
    let message = out.error.unwrap().message;
    let (frame, own) = backend.pick(
        ("    at ", "program.ts"),
        ("File \"", "File \"program.py\""),
    );
    for line in message.lines().filter(|line| line.contains(frame)) {
        assert!(line.contains(own), "{line:?} in {message}");
    }
    assert!(!message.contains("worker"), "{message}");
    // The failed call is shown too: CPython's chain, JavaScript's `cause`.
    match backend {
        Backend::SubprocessPython => {
            assert!(
                message.contains("ToolCallError: no luck with {}"),
                "{message}"
            );
            assert!(message.contains("line 2, in __dsh_main__"), "{message}");
        }
        Backend::SubprocessTypeScript | Backend::EmbeddedJavaScript => {
            assert!(
                message.contains("\nCaused by: ToolCallError: no luck with {}"),
                "{message}"
            );
        }
        Backend::EmbeddedPython => {}
    }
    rt.dispose().await;
}

/// A failure that groups errors shows its members: an `AggregateError`'s (the first 15, as
/// CPython shows an exception group's).
async fn a_group_of_errors_shows_its_members(backend: Backend) {
    if backend == Backend::EmbeddedPython {
        eprintln!("skipped: Monty's Python has no exception groups");
        return;
    }
    let rt = backend.runtime(budgets()).await;
    let out = run(
        rt.as_ref(),
        backend.pick(
            "const more = Array.from({ length: 18 }, (_, i) => new Error('more ' + i));\nthrow new AggregateError([new Error('one'), new TypeError('two'), ...more], 'both');",
            "raise ExceptionGroup('both', [ValueError('one'), TypeError('two')])",
        ),
    )
    .await;
    let (group, first, second) = backend.pick(
        (
            "AggregateError: both",
            "[1] Error: one",
            "[2] TypeError: two",
        ),
        ("ExceptionGroup: both", "ValueError: one", "TypeError: two"),
    );
    for needle in [group, first, second] {
        assert_failure(&out, FailureKind::Exception, needle);
    }
    if backend.lang() == Lang::TypeScript {
        assert_failure(&out, FailureKind::Exception, "[15] Error: more 12");
        assert_failure(&out, FailureKind::Exception, "(5 more errors not shown)");
    }
    rt.dispose().await;
}

/// A TypeScript program that replaced the built-ins a failure is rendered with (string and array
/// methods, `RegExp.prototype.exec`, `JSON.stringify`) still gets its failure reported as it
/// happened, with its own frames only, and a function it names `program.ts` passes for none of
/// them.
async fn a_failure_is_reported_as_it_happened_whatever_the_program_replaced(backend: Backend) {
    if backend.lang() == Lang::Python {
        eprintln!("skipped: Python's built-in types cannot be changed by a program");
        return;
    }
    let rt = backend.runtime(budgets()).await;
    let tools = Tools::new();
    let program = concat!(
        "String.prototype.split = () => { throw new Error('split'); };\n",
        "String.prototype.includes = () => true;\nString.prototype.replace = () => ({ length: 0 });\n",
        "Array.prototype.filter = function () { return this; };\n",
        "Array.prototype.join = () => { throw new Error('join'); };\n",
        "RegExp.prototype.exec = () => null;\nRegExp.prototype.test = () => false;\n",
        "JSON.stringify = () => { throw new Error('stringify'); };\n",
        "throw new Error('original \\uD800 end');",
    );
    let out = tools.run(rt.as_ref(), program).await;
    assert_failure(&out, FailureKind::Exception, "Error: original \u{FFFD} end");
    let message = out.error.unwrap().message;
    assert!(message.contains("(program.ts:9:"), "{message}");
    for foreign in ["worker", "bootstrap", "node:", "dsh-code", "file:"] {
        assert!(!message.contains(foreign), "{foreign} in {message}");
    }
    let program = concat!(
        "const call = tools.echo;\n",
        "Object.defineProperty(call, 'name', { value: 'program.ts' });\n",
        "await call({ f: () => 1 });",
    );
    let out = tools.run(rt.as_ref(), program).await;
    assert_failure(
        &out,
        FailureKind::Exception,
        "binding arguments must be lossless JSON",
    );
    let message = out.error.unwrap().message;
    for line in message
        .lines()
        .filter(|line| line.trim_start().starts_with("at "))
    {
        assert!(line.contains("(program.ts:3:"), "{line:?} in {message}");
    }
    rt.dispose().await;
}

async fn a_hot_loop_exhausts_the_compute_budget(backend: Backend) {
    let out = backend
        .run_once(
            budgets(),
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
}

async fn a_hung_wait_reaches_the_wall_clock_ceiling(backend: Backend) {
    let rt = backend
        .runtime(Budgets {
            max_wall_ms: 700,
            ..budgets()
        })
        .await;
    let tools = Tools::new();
    // A binding call that never answers: the program waits on the host, using no CPU.
    let out = rt
        .run(
            tools
                .request(backend.pick("await host.forever({});", "await host.forever()"))
                .signal(CancellationToken::new()),
        )
        .await
        .unwrap();
    assert_failure(
        &out,
        FailureKind::Timeout,
        "wall-clock ceiling reached (700ms)",
    );
    rt.dispose().await;
}

/// A program that awaits what nothing can settle (no call in flight, no timer, no I/O) fails at
/// once as an exception, keeping its logs, instead of sitting out the wall-clock ceiling.
async fn a_wait_on_nothing_fails_at_once(backend: Backend) {
    if backend == Backend::EmbeddedPython {
        eprintln!("skipped: Monty's Python has nothing to await but a binding call");
        return;
    }
    let rt = backend
        .runtime(Budgets {
            max_wall_ms: 600_000,
            ..budgets()
        })
        .await;
    let tools = Tools::new();
    let program = backend.pick(
        "await tools.echo({});\nconsole.log('waiting');\nawait new Promise(() => {});",
        "import asyncio\nawait tools.echo({})\nprint('waiting')\nawait asyncio.get_running_loop().create_future()",
    );
    let out = well_before_the_ceiling(tools.run(rt.as_ref(), program)).await;
    assert_failure(
        &out,
        FailureKind::Exception,
        backend.pick(
            "the program waits for a promise that nothing can settle",
            "the program waits for a future that nothing can complete",
        ),
    );
    assert_eq!(out.logs, ["waiting"]);
    rt.dispose().await;
}

/// A call the host has not answered yet, a timer or (in CPython) another thread is something to
/// wait for: the program is not stuck while it waits on one.
async fn a_wait_on_a_call_or_a_timer_is_not_stuck(backend: Backend) {
    let rt = backend
        .runtime(Budgets {
            max_wall_ms: 600_000,
            ..budgets()
        })
        .await;
    let (started, mut calls) = tokio::sync::mpsc::unbounded_channel();
    let (release, released) = tokio::sync::watch::channel(false);
    let request = RunRequest::new(match backend {
        Backend::SubprocessTypeScript => {
            "await new Promise((r) => setTimeout(r, 20));\nreturn await host.gate({});"
        }
        Backend::SubprocessPython => concat!(
            "import asyncio, threading, time\nawait asyncio.sleep(0.02)\n",
            "opened = await host.gate()\n",
            "loop = asyncio.get_running_loop()\ndone = loop.create_future()\n",
            "later = lambda: (time.sleep(0.05), loop.call_soon_threadsafe(done.set_result, 1))\n",
            "threading.Thread(target=later).start()\nawait done\nreturn opened",
        ),
        Backend::EmbeddedJavaScript => "return await host.gate({});",
        Backend::EmbeddedPython => "return await host.gate()",
    })
    .binding(BindingNamespace {
        global: "host".into(),
        names: vec!["gate".into()],
        error_class: None,
    })
    .dispatch(dispatch(move |_call| {
        let (started, mut released) = (started.clone(), released.clone());
        async move {
            // Sent once the call is under way (the embedded runtimes make the call
            // before they first poll it).
            let _ = started.send(());
            let _ = released.wait_for(|open| *open).await;
            Ok(json!("opened"))
        }
    }));
    let run = tokio::spawn({
        let rt = Arc::clone(&rt);
        async move { rt.run(request).await.expect("a valid request") }
    });
    // A check that missed the call in flight would fire as soon as the program went idle on
    // it, long before this answer.
    calls.recv().await.expect("the program calls the gate");
    release.send_replace(true);
    assert_value(&run.await.expect("the run"), json!("opened"));
    rt.dispose().await;
}

async fn a_flood_of_output_hits_the_output_limit(backend: Backend) {
    let b = Budgets {
        max_wall_ms: 60_000,
        compute_ms: 30_000,
        max_memory_mb: 512,
        ..budgets()
    };
    let out = backend
        .run_once(
            b,
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

async fn output_boundaries_are_exact(backend: Backend) {
    let cap = |max_output_bytes| Budgets {
        max_output_bytes,
        ..budgets()
    };
    let rt = backend.runtime(cap(7)).await;
    assert_value(&run(rt.as_ref(), "return '€'").await, json!("€"));
    let rt = backend.runtime(cap(6)).await;
    // The diagnostic itself is cut to the 4 bytes left: `"ou"`.
    assert_failure(
        &run(rt.as_ref(), "return '€'").await,
        FailureKind::OutputLimit,
        "ou",
    );
    let log_then_return = backend.pick(
        "console.log('abc'); return 'xy'",
        "print('abc')\nreturn 'xy'",
    );
    let rt = backend.runtime(cap(11)).await;
    assert_value(&run(rt.as_ref(), log_then_return).await, json!("xy"));
    let rt = backend.runtime(cap(10)).await;
    let out = run(rt.as_ref(), log_then_return).await;
    assert_failure(&out, FailureKind::OutputLimit, "o");
    assert_eq!(out.logs, ["abc"]);
}

async fn a_memory_bomb_ends_the_run_and_the_host_stays_healthy(backend: Backend) {
    let rt = backend
        .runtime(Budgets {
            compute_ms: 30_000,
            ..budgets()
        })
        .await;
    let out = run(
        rt.as_ref(),
        backend.pick(
            "const hoard = [];\nwhile (true) hoard.push(new Array(1e6).fill(1.5));",
            // Monty has no `bytearray`.
            backend.on_monty(
                "hoard = []\nwhile True:\n    hoard.append('x' * 10 ** 7 + str(len(hoard)))",
                "hoard = []\nwhile True:\n    hoard.append(bytearray(10 ** 7))",
            ),
        ),
    )
    .await;
    if backend.interpreter_budget() {
        // The interpreter's allocator refuses past the budget, or (on a busy machine, where the
        // program outruns the allocator's headroom between two samples) the host's resident-size
        // sample ends it first: either way it is the memory budget, named with its size.
        assert_failure(&out, FailureKind::MemoryLimit, "(128 MiB");
    } else {
        let kind = out.error.as_ref().map(|e| e.kind);
        assert!(
            matches!(
                kind,
                Some(FailureKind::WorkerExit | FailureKind::MemoryLimit)
            ),
            "{out:?}"
        );
    }
    assert_value(
        &run(rt.as_ref(), "return 'still here'").await,
        json!("still here"),
    );
    rt.dispose().await;
}

async fn forged_limit_messages_are_exceptions(backend: Backend) {
    let out = backend
        .run_once(
            budgets(),
            "console.log('compute budget exhausted (1000ms of CPU time)');\nthrow new Error('memory limit reached (128 MiB)');",
            "print('compute budget exhausted (1000ms of CPU time)')\nraise MemoryError('memory limit reached (128 MiB)')",
        )
        .await;
    let kind = out.error.as_ref().map(|e| e.kind);
    assert!(
        matches!(kind, Some(FailureKind::Exception | FailureKind::WorkerExit)),
        "{out:?}"
    );
    if backend.lang() == Lang::TypeScript {
        assert_failure(
            &out,
            FailureKind::Exception,
            "memory limit reached (128 MiB)",
        );
    }
}

async fn fifty_concurrent_runs_all_settle(backend: Backend) {
    let rt = backend
        .runtime(Budgets {
            compute_ms: 20_000,
            max_wall_ms: 60_000,
            ..budgets()
        })
        .await;
    let tools = Arc::new(Tools::new());
    let runs = (0..50).map(|i| {
        let rt = rt.clone();
        let tools = tools.clone();
        let program = backend.pick(
            format!("return await tools.echo({i});"),
            format!("return await tools.echo({i})"),
        );
        async move { rt.run(tools.request(&program)).await }
    });
    let outcomes = futures::future::join_all(runs).await;
    for (i, out) in outcomes.into_iter().enumerate() {
        assert_value(&out.unwrap(), json!(i));
    }
    rt.dispose().await;
}

/// A program that calls `tools.report`, logs `waiting` if `log`, then waits forever
/// on a call the host never answers.
fn report_then_hang(backend: Backend, log: bool) -> String {
    let log = if log {
        backend.pick("console.log('waiting');\n", "print('waiting')\n")
    } else {
        ""
    };
    backend.pick(
        format!("await tools.report({{pid: 1}});\n{log}await host.forever({{}});"),
        format!("await tools.report({{'pid': 1}})\n{log}await host.forever()"),
    )
}

async fn cancellation_mid_run_aborts(backend: Backend) {
    let rt = backend.runtime(budgets()).await;
    let tools = Tools::new();
    let signal = CancellationToken::new();
    let request = tools
        .request(&report_then_hang(backend, true))
        .signal(signal.clone());
    let canceller = {
        let reported = tools.reported.clone();
        async move {
            while reported.lock().unwrap().is_empty() {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            signal.cancel();
        }
    };
    let (out, ()) = tokio::join!(rt.run(request), canceller);
    let out = out.unwrap();
    assert_failure(&out, FailureKind::Abort, "run aborted");
    // Whatever the program logged before the cancel is kept.
    assert!(out.logs.len() <= 1, "{:?}", out.logs);
    rt.dispose().await;
}

async fn a_pre_aborted_run_calls_nothing(backend: Backend) {
    let rt = backend.runtime(budgets()).await;
    let tools = Tools::new();
    let signal = CancellationToken::new();
    signal.cancel();
    let program = backend.pick(
        "await tools.echo({}); return 1",
        "await tools.echo({})\nreturn 1",
    );
    let out = rt.run(tools.request(program).signal(signal)).await.unwrap();
    assert_failure(&out, FailureKind::Abort, "before it started");
    assert_eq!(tools.calls.load(Ordering::SeqCst), 0);
    rt.dispose().await;
}

async fn bindings_resolve_reject_and_overlap(backend: Backend) {
    let rt = backend.runtime(budgets()).await;
    let tools = Tools::new();
    let (program, expected) = backend.pick(
        (
            r#"const a = await tools.echo({x: [1, 'two']});
const b = await tools["my-tool"]({y: null});
let caught: any;
try { await tools.fail({why: 1}); } catch (e) { caught = e; }
return {a, b, name: caught.name, toolName: caught.toolName, message: caught.message,
  code: caught.code, isError: caught instanceof Error, isClass: caught instanceof ToolCallError,
  proto: typeof tools.constructor, own: Object.keys(tools).sort()};"#,
            json!({"a": {"x": [1, "two"]}, "b": {"y": null}, "name": "ToolCallError", "toolName": "fail",
                "message": "no luck with {\"why\":1}", "code": "E_LUCK", "isError": true, "isClass": true, "proto": "undefined",
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
        'message': str(caught), 'code': caught.code, 'own': own}"#,
            json!({"a": {"x": [1, "two"]}, "b": {"y": null}, "name": "ToolCallError", "toolName": "fail",
                "message": "no luck with {\"why\":1}", "code": "E_LUCK", "own": "own names only"}),
        ),
    );
    // Monty has no class inheritance, no `__getitem__` and its exceptions carry one string: a
    // failed binding call raises `RuntimeError`, which `ToolCallError` names, and a name that
    // is not an identifier is an attribute for `getattr`.
    let (program, expected) = backend.on_monty(
        (
            r#"a = await tools.echo({'x': [1, 'two']})
b = await getattr(tools, 'my-tool')({'y': None})
try:
    await tools.fail({'why': 1})
except ToolCallError as e:
    caught = e
try:
    tools.constructor
    own = 'leaked'
except AttributeError:
    own = 'own names only'
return {'a': a, 'b': b, 'name': type(caught).__name__, 'message': str(caught), 'own': own}"#,
            json!({"a": {"x": [1, "two"]}, "b": {"y": null}, "name": "RuntimeError",
                "message": "no luck with {\"why\":1}", "own": "own names only"}),
        ),
        (program, expected),
    );
    let out = tools.run(rt.as_ref(), program).await;
    assert_value(&out, expected);
    let overlapping = backend.pick(
        "return await Promise.all([1, 2, 3, 4, 5].map(i => tools.slow(i)));",
        "import asyncio\nreturn await asyncio.gather(*(tools.slow(i) for i in range(1, 6)))",
    );
    let out = tools.run(rt.as_ref(), overlapping).await;
    assert_value(
        &out,
        json!([{"slept": 1}, {"slept": 2}, {"slept": 3}, {"slept": 4}, {"slept": 5}]),
    );
    assert!(
        tools.max_in_flight.load(Ordering::SeqCst) >= 2,
        "calls did not overlap"
    );
    let lossy = backend.pick("await tools.echo(-0)", "await tools.echo(-0.0)");
    let out = tools.run(rt.as_ref(), lossy).await;
    assert_failure(
        &out,
        FailureKind::Exception,
        "binding arguments must be lossless JSON",
    );
    rt.dispose().await;
}

async fn deep_values_round_trip(backend: Backend) {
    let rt = backend.runtime(budgets()).await;
    let tools = Tools::new();
    let nested = backend.pick(
        "let v: any = 0;\nfor (let i = 0; i < 3000; i++) v = i % 2 ? [v] : {k: v};\nreturn await tools.echo(v);",
        "v = 0\nfor i in range(3000):\n    v = [v] if i % 2 else {'k': v}\nreturn await tools.echo(v)",
    );
    let out = tools.run(rt.as_ref(), nested).await;
    assert_eq!(out.error, None);
    let value = out.value.expect("a value").to_value();
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

/// Through `run_code` on a code-mode registry, a completion nested as deep as the runtimes
/// return (4,096 levels) is a result, handed on as its compact JSON text (`resultJson`: deeper
/// than the pipeline's tool values may nest), and one level more is `invalid-output`. Neither
/// takes the host's stack.
async fn run_code_returns_completions_nested_to_the_runtime_depth(backend: Backend) {
    use dsh_tools::result::ErrorCode;
    use dsh_tools::{Mode, Registry, ToolCall};

    let registry = Registry::new();
    registry.set_code_runtime(backend.runtime(budgets()).await);
    registry.set_mode(Mode::Code);
    let nested = |depth: usize| {
        backend.pick(
            format!("let v: any = 1;\nfor (let i = 0; i < {depth}; i++) v = [v];\nreturn v;"),
            format!("v = 1\nfor _ in range({depth}):\n    v = [v]\nreturn v"),
        )
    };
    let call = |depth: usize| {
        ToolCall::new(
            format!("deep-{depth}"),
            "run_code",
            json!({"code": nested(depth), "description": "deep"}),
        )
    };
    let result = registry.execute(call(4_096)).await;
    assert_eq!(result.error_code(), None, "{}", result.text());
    let value = result.value().expect("a value");
    let text = value["resultJson"].as_str().expect("the completion's text");
    assert_eq!(text, format!("{}1{}", "[".repeat(4_096), "]".repeat(4_096)));
    assert_eq!(value.get("result"), None);
    let result = registry.execute(call(4_097)).await;
    assert_eq!(result.error_code(), Some(ErrorCode::CodeRunFailed));
    let text = result.text();
    assert!(
        text.contains("code run failed (invalid-output): ")
            && text.contains("nests deeper than 4096 levels"),
        "{text}"
    );
    registry.code_runtime().expect("a runtime").dispose().await;
}

async fn the_binding_call_budget_is_enforced(backend: Backend) {
    let rt = backend
        .runtime(Budgets {
            max_binding_calls: 3,
            ..budgets()
        })
        .await;
    let tools = Tools::new();
    let five_calls = backend.pick(
        "for (let i = 0; i < 5; i++) { try { await tools.echo(i); } catch {} }\nreturn 'done';",
        "for i in range(5):\n    try:\n        await tools.echo(i)\n    except Exception:\n        pass\nreturn 'done'",
    );
    let out = tools.run(rt.as_ref(), five_calls).await;
    assert_failure(
        &out,
        FailureKind::BindingLimit,
        "binding call limit reached (3 calls)",
    );
    assert_eq!(tools.calls.load(Ordering::SeqCst), 3);
    rt.dispose().await;
}

async fn dispose_aborts_live_runs_and_refuses_new_ones(backend: Backend) {
    let rt = backend.runtime(budgets()).await;
    let tools = Tools::new();
    let live = rt.run(tools.request(&report_then_hang(backend, false)));
    let disposer = async {
        while tools.reported.lock().unwrap().is_empty() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        rt.dispose().await;
    };
    let (out, ()) = tokio::join!(live, disposer);
    assert_failure(&out.unwrap(), FailureKind::Abort, "runtime disposed");
    assert_eq!(
        rt.run(RunRequest::new("return 1")).await,
        Err(CodeRuntimeError::Disposed)
    );
}

async fn a_reserved_binding_global_is_refused(backend: Backend) {
    let rt = backend.runtime(budgets()).await;
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

async fn non_erasable_typescript_is_refused(backend: Backend) {
    if backend.lang() != Lang::TypeScript {
        return;
    }
    let rt = backend.runtime(budgets()).await;
    let tools = Tools::new();
    for program in [
        "await tools.echo(1);\nenum E { A }",
        "namespace N { export const a = 1 }",
        "class K { constructor(private a: number) {} }",
    ] {
        assert_failure(
            &tools.run(rt.as_ref(), program).await,
            FailureKind::Exception,
            "not erasable",
        );
    }
    // Refused on the host: the program never started, so it called nothing.
    assert_eq!(tools.calls.load(Ordering::SeqCst), 0);
    rt.dispose().await;
}
