//! Helpers shared by the code runtime tests of both languages.
//! Each test binary uses a part of them.

// The test calls libc directly (`clock_gettime` of the process's CPU time), with a SAFETY note at each block.
#![allow(unsafe_code)]
#![allow(dead_code)]

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use dsh_tools::code::{
    BindingCall, BindingDispatch, BindingError, BindingNamespace, Budgets, CodeRuntime,
    CodeRuntimeError, FailureKind, RunOutcome, RunRequest, SubprocessConfig, SubprocessRuntime,
};
use dsh_tools::prelude::*;
use futures::FutureExt;
use serde_json::{Value, json};

/// A language of the subprocess code runtime, so that one test body covers both.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Lang {
    TypeScript,
    Python,
}

impl Lang {
    /// Starts this language's runtime, with the errors `SubprocessRuntime::typescript` and
    /// `SubprocessRuntime::python` return.
    pub(crate) async fn start(
        self,
        config: SubprocessConfig,
    ) -> Result<SubprocessRuntime, CodeRuntimeError> {
        match self {
            Lang::TypeScript => SubprocessRuntime::typescript(config).await,
            Lang::Python => SubprocessRuntime::python(config).await,
        }
    }

    /// Starts this language's runtime against the interpreter on PATH.
    pub(crate) async fn runtime(self, config: SubprocessConfig) -> SubprocessRuntime {
        self.start(config)
            .await
            .unwrap_or_else(|err| panic!("the {} runtime did not start: {err}", self.name()))
    }

    /// Runs this language's program of the two on a fresh runtime with `config`, then disposes
    /// of the runtime.
    pub(crate) async fn run_once(
        self,
        config: SubprocessConfig,
        typescript: &str,
        python: &str,
    ) -> RunOutcome {
        let rt = self.runtime(config).await;
        let out = run(&rt, self.pick(typescript, python)).await;
        rt.dispose().await;
        out
    }

    /// The language name the runtime reports.
    pub(crate) fn name(self) -> &'static str {
        self.pick("typescript", "python")
    }

    /// Whichever of the two is this language's: a program, an expected value or a message.
    pub(crate) fn pick<T>(self, typescript: T, python: T) -> T {
        match self {
            Lang::TypeScript => typescript,
            Lang::Python => python,
        }
    }
}

/// A small configuration so budget tests finish fast.
pub(crate) fn small() -> SubprocessConfig {
    SubprocessConfig {
        budgets: Budgets {
            compute_ms: 1_000,
            max_wall_ms: 20_000,
            max_memory_mb: 128,
            ..Budgets::default()
        },
        ..SubprocessConfig::default()
    }
}

pub(crate) fn dispatch<F, Fut>(f: F) -> BindingDispatch
where
    F: Fn(BindingCall) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<Value, BindingError>> + Send + 'static,
{
    Arc::new(move |call| f(call).boxed())
}

pub(crate) async fn run(rt: &dyn CodeRuntime, program: &str) -> RunOutcome {
    rt.run(RunRequest::new(program))
        .await
        .expect("a valid request")
}

/// A run that must end long before its ten-minute wall-clock ceiling: `run` with a failure
/// bound of one minute.
pub(crate) async fn well_before_the_ceiling(run: impl Future<Output = RunOutcome>) -> RunOutcome {
    tokio::time::timeout(Duration::from_secs(60), run)
        .await
        .expect("the run ends long before the wall-clock ceiling")
}

#[track_caller]
pub(crate) fn assert_failure(out: &RunOutcome, kind: FailureKind, needle: &str) {
    let error = out
        .error
        .as_ref()
        .unwrap_or_else(|| panic!("expected {kind}, got {out:?}"));
    assert_eq!(error.kind, kind, "{out:?}");
    assert!(
        error.message.contains(needle),
        "{needle:?} not in {:?}",
        error.message
    );
    assert_eq!(out.value, None);
}

#[track_caller]
pub(crate) fn assert_value(out: &RunOutcome, value: Value) {
    assert_eq!(out.error, None, "{out:?}");
    assert_eq!(out.value.as_ref().map(|v| v.to_value()), Some(value));
}

/// Whether process `pid` is gone (or only a zombie waiting to be reaped by init).
pub(crate) fn process_gone(pid: u64) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit(')')
            .next()
            .is_some_and(|rest| rest.trim_start().starts_with('Z')),
    }
}

pub(crate) async fn eventually_gone(pid: u64) -> bool {
    for _ in 0..50 {
        if process_gone(pid) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    false
}

/// The depth of a value, computed without recursion.
pub(crate) fn depth(value: &Value) -> usize {
    let mut max = 0;
    let mut stack = vec![(value, 0)];
    while let Some((v, d)) = stack.pop() {
        match v {
            Value::Array(items) => {
                max = max.max(d + 1);
                stack.extend(items.iter().map(|i| (i, d + 1)));
            }
            Value::Object(map) => {
                max = max.max(d + 1);
                stack.extend(map.values().map(|i| (i, d + 1)));
            }
            _ => {}
        }
    }
    max
}

/// Binding namespace `tools` with `echo` (returns its arguments), `fail` (rejects), `slow`
/// (sleeps 300 ms, tracking how many calls overlap) and `report` (records a number).
pub(crate) struct Tools {
    pub in_flight: Arc<AtomicUsize>,
    pub max_in_flight: Arc<AtomicUsize>,
    pub calls: Arc<AtomicUsize>,
    pub reported: Arc<std::sync::Mutex<Vec<u64>>>,
}

impl Tools {
    pub(crate) fn new() -> Self {
        Tools {
            in_flight: Arc::default(),
            max_in_flight: Arc::default(),
            calls: Arc::default(),
            reported: Arc::default(),
        }
    }

    /// Runs `program` on `rt` with these bindings.
    pub(crate) async fn run(&self, rt: &dyn CodeRuntime, program: &str) -> RunOutcome {
        rt.run(self.request(program))
            .await
            .expect("a valid request")
    }

    pub(crate) fn request(&self, program: &str) -> RunRequest {
        let (in_flight, max_in_flight, calls, reported) = (
            self.in_flight.clone(),
            self.max_in_flight.clone(),
            self.calls.clone(),
            self.reported.clone(),
        );
        RunRequest::new(program)
            .binding(BindingNamespace::tools([
                "echo", "fail", "slow", "report", "my-tool",
            ]))
            // A binding that never answers: a program waiting on the host with a call in
            // flight (a wait on nothing at all fails at once as a stuck program).
            .binding(BindingNamespace {
                global: "host".into(),
                names: vec!["forever".into()],
                error_class: None,
            })
            .dispatch(dispatch(move |call: BindingCall| {
                calls.fetch_add(1, Ordering::SeqCst);
                let (in_flight, max_in_flight, reported) =
                    (in_flight.clone(), max_in_flight.clone(), reported.clone());
                async move {
                    match call.name.as_str() {
                        "echo" | "my-tool" => Ok(call.args),
                        "forever" => std::future::pending().await,
                        "fail" => Err(BindingError::new(format!("no luck with {}", call.args))
                            .with_code("E_LUCK")),
                        "slow" => {
                            let now = in_flight.fetch_add(1, Ordering::SeqCst) + 1;
                            max_in_flight.fetch_max(now, Ordering::SeqCst);
                            tokio::time::sleep(Duration::from_millis(300)).await;
                            in_flight.fetch_sub(1, Ordering::SeqCst);
                            Ok(json!({"slept": call.args}))
                        }
                        "report" => {
                            if let Some(n) = call.args.get("pid").and_then(Value::as_u64) {
                                reported.lock().unwrap().push(n);
                            }
                            Ok(Value::Null)
                        }
                        other => Err(BindingError::new(format!("unexpected {other}"))),
                    }
                }
            }))
    }
}

/// Runs the main job's `program` on `embedded` and on `subprocess`, each with `tools()`, and
/// checks that both answer the same non-empty result.
pub(crate) async fn assert_main_job_alike(
    embedded: Arc<dyn CodeRuntime>,
    subprocess: Arc<dyn CodeRuntime>,
    tools: impl Fn() -> Vec<dsh_tools::ToolDefinition>,
    program: &str,
) {
    let inside = run_main_job(embedded, tools(), program).await;
    let child = run_main_job(subprocess, tools(), program).await;
    assert!(
        inside["result"].as_array().is_some_and(|a| !a.is_empty()),
        "{inside}"
    );
    assert_eq!(inside, child);
}

/// Runs `program` through `run_code` on a registry holding `tools` (the main job's: the
/// example toolset over this repository), mounted on `runtime`, then disposes the runtime; the
/// value of the successful result.
pub(crate) async fn run_main_job(
    runtime: Arc<dyn CodeRuntime>,
    tools: Vec<dsh_tools::ToolDefinition>,
    program: &str,
) -> Value {
    let registry = dsh_tools::Registry::new();
    registry.register_all(tools).expect("registered");
    registry.set_mode(dsh_tools::Mode::Code);
    registry.set_code_runtime(runtime.clone());
    let call = dsh_tools::ToolCall::new(
        "run-1",
        "run_code",
        json!({"code": program, "description": "Summarise Rust sources per folder"}),
    );
    let result = registry.execute(call).await;
    runtime.dispose().await;
    match result {
        dsh_tools::ToolResult::Success { value, .. } => value,
        other => panic!("run_code failed: {other:?}"),
    }
}

/// CPU time this process has used so far, in ms.
pub(crate) fn process_cpu_ms() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid timespec and a constant clock id.
    unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut ts) };
    ts.tv_sec as f64 * 1e3 + ts.tv_nsec as f64 / 1e6
}
