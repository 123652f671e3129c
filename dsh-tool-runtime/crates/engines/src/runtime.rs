//! [`EmbeddedRuntime`]: code runtimes on an interpreter built into this crate (QuickJS, Monty),
//! fresh per run, with no ambient authority — no filesystem, network, processes, environment or
//! modules; only the binding globals and `console` are handed in. Where a program runs depends
//! on the constructor:
//!
//! - [`EmbeddedRuntime::javascript`] (feature `embedded-python`, which brings the worker
//!   program): TypeScript, stripped on the host as for the subprocess runtime, on QuickJS in a
//!   pooled, sandboxed worker process, where the host ends an overdue or cancelled run by
//!   killing its worker.
//! - [`EmbeddedRuntime::javascript_in_process`] (feature `embedded-js`): the same on an
//!   interpreter thread of the host, for trusted programs. QuickJS does not poll its interrupt
//!   hook inside a long built-in (a `replaceAll` over a huge string, a sort of millions of
//!   elements), so there such a call outlives every budget and a cancellation.
//! - [`EmbeddedRuntime::python`] (feature `embedded-python`): Python on Monty, in the same kind
//!   of pool. Monty cannot be made crash-proof inside a process (a native stack overflow or an
//!   allocator abort ends the process) and enforces its memory budget only through the
//!   executable's global allocator, so it runs only in worker processes of ours (the
//!   `dsh-monty-worker` program), sandboxed like the subprocess runtimes and started ahead:
//!   each worker serves runs one after another, each in a fresh interpreter; one that crashed,
//!   overran a budget or was cancelled mid-run is killed (the run reads `worker-exit` or the
//!   budget's kind) and replaced. (A hidden variant runs Monty on a host thread, for the
//!   benchmarks only.)
//!
//! Budgets and failure kinds are those of the subprocess runtimes; the host alone decides limit
//! kinds. Here: the runtime; its configuration is in `config.rs`, a run on a host thread in
//! `driver.rs`; the engines are in `quickjs/` and `monty/`, the pool in `pool/`.

use std::sync::Arc;

use dsh_tool_code_mode::__engines::strip::{oversized, strip_types};
use dsh_tool_code_mode::__engines::{early_outcome, take_lane};
use dsh_tool_code_mode::code_runtime::{
    Budgets, CodeRuntime, CodeRuntimeError, FailureKind, Isolation, RunOutcome, RunRequest,
    validate_namespaces,
};
use futures::FutureExt;
use futures::future::BoxFuture;
use tokio::sync::{Semaphore, oneshot};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::config::EmbeddedConfig;
use crate::driver::{self, Job};
#[cfg(feature = "python")]
use crate::monty;
#[cfg(feature = "python")]
use crate::pool;
use crate::quickjs;

/// Which interpreter a runtime embeds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Engine {
    QuickJs,
    #[cfg(feature = "python")]
    Monty,
    /// Monty on an interpreter thread of the host: for measurement only.
    #[cfg(feature = "python")]
    MontyInProcess,
}

impl Engine {
    fn language(self) -> &'static str {
        match self {
            Engine::QuickJs => "typescript",
            #[cfg(feature = "python")]
            Engine::Monty | Engine::MontyInProcess => "python",
        }
    }
}

/// A [`CodeRuntime`] running each program in a fresh embedded interpreter, in a pooled worker
/// process ([`javascript`](Self::javascript), [`python`](Self::python)) or on a thread of the
/// host ([`javascript_in_process`](Self::javascript_in_process)).
///
/// Nothing outside the interpreter is reachable from a program: there is no `require`,
/// `process`, `fetch`, filesystem or module loader; `import()` rejects. The program's memory
/// is bounded by the interpreter's allocator (`memory-limit` when exceeded), its native stack by
/// the interpreter's stack limit (a catchable `RangeError`, as in Node.js), its time by the
/// interrupt hook and, in a worker, by the host, which kills an overdue worker. Cloning shares
/// the runtime.
#[derive(Clone)]
pub struct EmbeddedRuntime {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for EmbeddedRuntime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EmbeddedRuntime")
            .field("config", &self.inner.config)
            .finish_non_exhaustive()
    }
}

struct Inner {
    engine: Engine,
    config: EmbeddedConfig,
    slots: Arc<Semaphore>,
    disposed: CancellationToken,
    runs: TaskTracker,
    /// The worker pool of an out-of-process engine (Monty).
    #[cfg(feature = "python")]
    pooled: Option<Arc<pool::Pool>>,
}

impl EmbeddedRuntime {
    /// A TypeScript runtime on QuickJS (ES2023), run by a pool of sandboxed worker processes as
    /// [`python`](Self::python)'s programs are (the same worker program,
    /// [`EmbeddedConfig::python_worker`], and the same pool settings). Programs are
    /// type-stripped on the host (erasable syntax only) and run as the body of an async function
    /// with `console` and the binding globals in scope. Static `import`, `require` and Node.js or
    /// browser APIs do not exist.
    ///
    /// Every budget and the cancellation hold for every program: the host watches the worker's
    /// CPU time and resident memory (sampled every 10 ms), the wall clock, binding calls and
    /// output, and kills the worker when a run overruns or is cancelled, even inside a long
    /// built-in that never polls the interpreter's interrupt hook. The heap limit counts the
    /// worker's whole heap. A binding call costs about 90 µs more than in
    /// [`javascript_in_process`](Self::javascript_in_process) (BENCHMARKS.md).
    ///
    /// # Errors
    ///
    /// [`CodeRuntimeError::InvalidConfig`] naming the field out of range (`max_memory_mb` must
    /// be at least 32 here); [`CodeRuntimeError::InterpreterNotFound`] when the worker program
    /// is not found (it comes with feature `embedded-python`).
    #[cfg(feature = "python")]
    pub fn javascript(config: EmbeddedConfig) -> Result<Self, CodeRuntimeError> {
        Self::pooled(pool::PoolEngine::QuickJs, config, 32, "typescript")
    }

    /// TypeScript on QuickJS as [`javascript`](Self::javascript), on an interpreter thread of
    /// this process: a fresh interpreter runtime and context per run, at most
    /// [`Budgets::max_concurrent_runs`] threads at once. For trusted programs only.
    ///
    /// QuickJS does not poll its interrupt hook inside a long built-in
    /// (`'a'.repeat(2 ** 27).replaceAll('a', 'bc')`, a sort of millions of elements): in the host
    /// such a call runs to its end whatever the compute budget, the wall-clock ceiling or a
    /// cancellation says, keeping a core busy meanwhile. Every other budget holds as in
    /// [`javascript`](Self::javascript); the heap limit counts the interpreter's heap only.
    ///
    /// # Errors
    ///
    /// [`CodeRuntimeError::InvalidConfig`] naming the field out of range.
    pub fn javascript_in_process(config: EmbeddedConfig) -> Result<Self, CodeRuntimeError> {
        Self::new(Engine::QuickJs, config)
    }

    /// A Python runtime on Monty (a subset of Python 3: no third-party modules, a few standard
    /// ones such as `asyncio`, `re`, `json`, `math`; no `open`, `os` or `sys` access). Programs
    /// run as the body of an async function with the binding globals and error classes in
    /// scope; `print` output becomes logs; `asyncio.gather` overlaps binding calls.
    ///
    /// Runs are served by a pool of sandboxed worker processes started ahead
    /// ([`EmbeddedConfig::python_idle_workers`]), each run in a fresh interpreter, so
    /// [`isolation`](CodeRuntime::isolation) is that of a (sandboxed) process. Budgets as for
    /// [`javascript`](Self::javascript).
    ///
    /// # Errors
    ///
    /// [`CodeRuntimeError::InvalidConfig`] naming the field out of range;
    /// [`CodeRuntimeError::InterpreterNotFound`] when the worker program is not found.
    #[cfg(feature = "python")]
    pub fn python(config: EmbeddedConfig) -> Result<Self, CodeRuntimeError> {
        Self::pooled(pool::PoolEngine::Monty, config, 64, "python")
    }

    /// A runtime served by a worker pool running `engine`, whose heap needs `min_memory_mb`.
    #[cfg(feature = "python")]
    fn pooled(
        engine: pool::PoolEngine,
        config: EmbeddedConfig,
        min_memory_mb: u64,
        language: &'static str,
    ) -> Result<Self, CodeRuntimeError> {
        config.validate()?;
        if config.budgets.max_memory_mb < min_memory_mb {
            return Err(CodeRuntimeError::InvalidConfig(format!(
                "config.budgets.max_memory_mb must be at least {min_memory_mb} for {language} in worker \
                 processes"
            )));
        }
        let worker = pool::find_worker(config.python_worker.as_deref()).ok_or_else(|| {
            CodeRuntimeError::InterpreterNotFound {
                language,
                binary: pool::WORKER_NAME.to_owned(),
                fix: "build it (`cargo install dsh-tools --bin dsh-monty-worker`, or \
                      `cargo build --bin dsh-monty-worker` in this workspace) and set \
                      `EmbeddedConfig::python_worker` or `$DSH_MONTY_WORKER` to its path",
            }
        })?;
        let pool = pool::Pool::new(engine, config.clone(), worker)?;
        let engine = match engine {
            pool::PoolEngine::Monty => Engine::Monty,
            pool::PoolEngine::QuickJs => Engine::QuickJs,
        };
        let mut runtime = Self::new(engine, config)?;
        if let Some(inner) = Arc::get_mut(&mut runtime.inner) {
            inner.pooled = Some(pool);
        }
        Ok(runtime)
    }

    /// Python on Monty inside this process, on an interpreter thread per run, with the same
    /// bindings, `print` and program wrapping as [`python`](Self::python). For measuring the
    /// pool against: a hostile program can end the host process (Monty is not crash-proof in
    /// a process), the memory budget is not enforced (it needs the executable's allocator), and
    /// the compute budget is Monty's own duration limit.
    #[cfg(feature = "python")]
    #[doc(hidden)]
    pub fn python_in_process(config: EmbeddedConfig) -> Result<Self, CodeRuntimeError> {
        Self::new(Engine::MontyInProcess, config)
    }

    fn new(engine: Engine, config: EmbeddedConfig) -> Result<Self, CodeRuntimeError> {
        config.validate()?;
        Ok(EmbeddedRuntime {
            inner: Arc::new(Inner {
                #[cfg(feature = "python")]
                pooled: None,
                engine,
                slots: Arc::new(Semaphore::new(config.budgets.max_concurrent_runs)),
                config,
                disposed: CancellationToken::new(),
                runs: TaskTracker::new(),
            }),
        })
    }

    /// The configuration this runtime was built with.
    pub fn config(&self) -> &EmbeddedConfig {
        &self.inner.config
    }
}

/// The `tools:runtime` prompt section of the Monty runtimes: where Monty's Python differs from
/// what the Python SDK guide (written for CPython) lets a program expect.
#[cfg(feature = "python")]
const MONTY_NOTE: &str = "Python here is Monty, a subset of CPython:\n\
- `ToolCallError` is another name for `RuntimeError`: read `str(error)`; it has no `tool_name` or `code`.\n\
- Only built-in exceptions can be raised; classes cannot inherit; objects have no `__getitem__`.\n\
- Modules: `asyncio`, `re`, `json`, `math`, `datetime`, `collections`, `itertools`, `functools`, `dataclasses`, `base64`, `typing`; no files, network or processes.";

impl CodeRuntime for EmbeddedRuntime {
    fn language(&self) -> &'static str {
        self.inner.engine.language()
    }

    fn budgets(&self) -> Option<&Budgets> {
        Some(&self.inner.config.budgets)
    }

    fn isolation(&self) -> Isolation {
        #[cfg(feature = "python")]
        if let Some(pooled) = &self.inner.pooled {
            return pooled.isolation();
        }
        Isolation::InProcessInterpreter
    }

    fn prompt_note(&self) -> Option<&'static str> {
        match self.inner.engine {
            Engine::QuickJs => None,
            #[cfg(feature = "python")]
            Engine::Monty | Engine::MontyInProcess => Some(MONTY_NOTE),
        }
    }

    fn run(&self, mut request: RunRequest) -> BoxFuture<'_, Result<RunOutcome, CodeRuntimeError>> {
        #[cfg(feature = "python")]
        if let Some(pooled) = &self.inner.pooled {
            return pooled.run(request);
        }
        // The interpreter thread polls the binding calls, so it drives their scheduler too.
        let lane = take_lane(&mut request).and_then(|lane| {
            driver::InPlaceLane::take(&lane, tokio::runtime::Handle::try_current().ok()?)
        });
        let inner = Arc::clone(&self.inner);
        self.inner
            .runs
            .track_future(inner.run(request, lane))
            .boxed()
    }

    fn dispose(&self) -> BoxFuture<'_, ()> {
        async move {
            #[cfg(feature = "python")]
            if let Some(pooled) = &self.inner.pooled {
                pooled.dispose().await;
            }
            self.inner.disposed.cancel();
            self.inner.runs.close();
            self.inner.runs.wait().await;
        }
        .boxed()
    }
}

impl Inner {
    fn early(&self, kind: FailureKind, message: String) -> RunOutcome {
        early_outcome(self.config.budgets.max_output_bytes, kind, message)
    }

    async fn run(
        self: Arc<Self>,
        request: RunRequest,
        lane: Option<driver::InPlaceLane>,
    ) -> Result<RunOutcome, CodeRuntimeError> {
        if self.disposed.is_cancelled() {
            return Err(CodeRuntimeError::Disposed);
        }
        validate_namespaces(&request.bindings).map_err(CodeRuntimeError::InvalidBindings)?;
        let before = || request.signal.is_cancelled() || self.disposed.is_cancelled();
        let aborted = || {
            self.early(
                FailureKind::Abort,
                "run aborted before it started".to_owned(),
            )
        };
        if before() {
            return Ok(aborted());
        }
        // The in-process engines take no admission slot (`admit`), so the size limit is here.
        if let Some(refusal) = oversized(&request.program) {
            return Ok(self.early(FailureKind::Exception, refusal));
        }
        let program = match self.engine {
            Engine::QuickJs => match strip_types(request.program.clone()).await {
                Ok(js) => js,
                Err(message) => return Ok(self.early(FailureKind::Exception, message)),
            },
            // `Monty` is served by its worker pool and never reaches an interpreter thread.
            #[cfg(feature = "python")]
            Engine::Monty | Engine::MontyInProcess => request.program.clone(),
        };
        let slot = tokio::select! {
            biased;
            _ = request.signal.cancelled() => return Ok(aborted()),
            _ = self.disposed.cancelled() => return Ok(aborted()),
            slot = Arc::clone(&self.slots).acquire_owned() => match slot {
                Ok(slot) => slot,
                Err(_) => return Ok(aborted()),
            },
        };
        if before() {
            return Ok(aborted());
        }
        let job = Job {
            program,
            request,
            config: self.config.clone(),
            disposed: self.disposed.clone(),
            handle: tokio::runtime::Handle::current(),
            lane,
            relay: None,
        };
        let (tx, rx) = oneshot::channel();
        let engine = self.engine;
        // The thread is tracked too: a caller may drop the run's future, but `dispose` still
        // waits until the interpreter is gone.
        let token = self.runs.token();
        let spawned = std::thread::Builder::new()
            .name("dsh-embedded".to_owned())
            .stack_size(driver::THREAD_STACK_BYTES)
            .spawn(move || {
                // A panic drops `tx`: the run reads `worker-exit`.
                let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| match engine {
                    Engine::QuickJs => quickjs::run(job, tx),
                    #[cfg(feature = "python")]
                    Engine::MontyInProcess => monty::inline::run(job, tx),
                    #[cfg(feature = "python")]
                    Engine::Monty => drop((job, tx)),
                }));
                // The interpreter and its heap are gone before the slot is given back.
                drop(slot);
                drop(token);
            });
        if let Err(e) = spawned {
            return Ok(self.early(
                FailureKind::WorkerExit,
                format!("could not start the interpreter thread: {e}"),
            ));
        }
        Ok(rx.await.unwrap_or_else(|_| {
            self.early(
                FailureKind::WorkerExit,
                "the interpreter stopped before completing".to_owned(),
            )
        }))
    }
}
