//! [`SubprocessRuntime`]: one fresh interpreter process per run, driven over the frame protocol.
//! Here: its configuration, the runtime with its standby child, and how a run is admitted and
//! handed a child. Finding the interpreter is `interpreter.rs`; the run itself, `run.rs` and
//! `pipes.rs`.

mod interpreter;
mod pipes;
mod run;

use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::Arc;

use futures::FutureExt;
use futures::future::BoxFuture;
use parking_lot::Mutex;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::admission::admit;
use super::budget::Budgets;
use super::ending::early_outcome;
use super::process::{Launch, MemoryLimit, Worker, WorkerIo};
use super::sandbox::{Plan, Sandbox, SandboxStatus};
use super::strip::strip_types;
use super::{CodeRuntime, CodeRuntimeError, FailureKind, Isolation, RunOutcome, RunRequest};
use crate::sdk::Language;
use interpreter::{check_version, locate, resolve_binary};
use run::Session;

static NODE_BOOTSTRAP: std::sync::LazyLock<String> =
    std::sync::LazyLock::new(|| super::javascript_bootstrap(dsh_sdk_templates::WORKER_MJS));
const PYTHON_BOOTSTRAP: &str = dsh_sdk_templates::WORKER_PY;

/// Budgets and options of a [`SubprocessRuntime`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubprocessConfig {
    /// The run's budgets. Here `compute_ms` is the CPU time of the child and its reaped
    /// children, sampled every 10 ms from `/proc/<pid>/stat` and counted from the moment the
    /// program is handed over (a standby's start-up is free, a fresh child's is charged), with
    /// `RLIMIT_CPU` as a per-process backstop; `max_memory_mb` (at least 64) is the resident
    /// memory of the run's whole process tree, sampled every 10 ms from `/proc/<pid>/status`
    /// (`VmRSS`), overrun: `memory-limit` `memory budget exhausted (<resident> MiB resident of
    /// <max_memory_mb> MiB, peak <p> MiB)`. Per-process backstops: Python `RLIMIT_AS` at twice the
    /// budget plus 256 MiB, Node.js a V8 heap of 1.25 × the budget and `RLIMIT_DATA` 512 MiB above
    /// it. Runs past `max_concurrent_runs` wait in arrival order; cancelling a waiting run ends it
    /// as `abort` `run aborted while queued`.
    pub budgets: Budgets,
    /// The interpreter: a path, or a name looked up on the host's `PATH`. Default `node` for
    /// TypeScript (Node.js 18 or newer), `python3` for Python (CPython 3.10 or newer).
    pub interpreter: Option<PathBuf>,
    /// Keep one pre-spawned child waiting for its program (default `true`). It cuts the start
    /// latency; each run still gets a process no program has run in.
    pub standby: bool,
    /// The OS sandbox of each child (default [`Sandbox::Auto`]).
    pub sandbox: Sandbox,
    /// Largest binding-call frame (the call's JSON arguments plus a few bytes), in bytes
    /// (default 1 MiB; at least 1,024). A bigger call rejects in the program with
    /// `binding arguments exceed <max_frame_bytes> bytes` and the host never buffers it whole.
    /// Independently, a call whose arguments would take more than
    /// [`ALLOWANCE_PER_BYTE`](super::frame::ALLOWANCE_PER_BYTE) × its frame's bytes, at least
    /// [`ALLOWANCE_FLOOR`](super::frame::ALLOWANCE_FLOOR) (2 ×, at least 2 MiB), of host memory
    /// as decoded values rejects, so a call frame at the cap costs the host at most about 3 × its
    /// bytes. Logs,
    /// failure messages and completions are never decoded into trees: they are bound by
    /// `max_output_bytes` alone.
    pub max_frame_bytes: u64,
}

impl Default for SubprocessConfig {
    fn default() -> Self {
        SubprocessConfig {
            budgets: Budgets::default(),
            interpreter: None,
            standby: true,
            sandbox: Sandbox::Auto,
            max_frame_bytes: 1 << 20,
        }
    }
}

impl SubprocessConfig {
    fn validate(&self) -> Result<(), CodeRuntimeError> {
        let fail = |m: &str| Err(CodeRuntimeError::InvalidConfig(m.to_owned()));
        self.budgets.validate(64)?;
        if self.max_frame_bytes < 1024 || self.max_frame_bytes > (1 << 53) - 1 {
            return fail("config.max_frame_bytes must be a safe integer of at least 1024");
        }
        Ok(())
    }
}

/// A [`CodeRuntime`] running each program in a fresh Node.js or CPython child process.
///
/// Containment: the child has an empty environment, a fresh owner-only (0700) temporary working
/// directory (removed afterwards), its own process group, stdin closed, the budgets of
/// [`SubprocessConfig`] over its whole process tree (the interpreter is a child subreaper, so
/// descendants stay in the tree whatever group or session they move to; the tree is killed with
/// `SIGKILL` when the run settles) and, unless [`Sandbox::Off`], the OS sandbox ([`Sandbox`]). The
/// program's stdout and stderr become log entries. Protocol frames travel on a separate pipe pair
/// (see [`frame`](super::frame)). Cloning shares the runtime.
#[derive(Clone)]
pub struct SubprocessRuntime {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for SubprocessRuntime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SubprocessRuntime")
            .field("config", &self.inner.config)
            .finish_non_exhaustive()
    }
}

struct Inner {
    language: Language,
    config: SubprocessConfig,
    launch: Launch,
    standby: Mutex<Option<Worker>>,
    disposed: CancellationToken,
    runs: TaskTracker,
    slots: Arc<tokio::sync::Semaphore>,
}

impl SubprocessRuntime {
    /// A TypeScript runtime on Node.js (18 or newer). Programs are type-stripped on the host
    /// (erasable syntax only) and run as the body of an async function with `console` and the
    /// binding globals in scope; dynamic `import()` works, static `import` does not.
    ///
    /// # Errors
    ///
    /// [`CodeRuntimeError::InvalidConfig`], an interpreter error naming the binary and
    /// `SubprocessConfig::interpreter`, or under [`Sandbox::Enforce`]
    /// [`CodeRuntimeError::SandboxUnavailable`].
    pub async fn typescript(config: SubprocessConfig) -> Result<Self, CodeRuntimeError> {
        Self::new(Language::TypeScript, config).await
    }

    /// A Python runtime on CPython (3.10 or newer). Programs run as the body of an async
    /// function under asyncio with the binding globals in scope; `print` output becomes logs.
    ///
    /// # Errors
    ///
    /// As [`typescript`](Self::typescript).
    pub async fn python(config: SubprocessConfig) -> Result<Self, CodeRuntimeError> {
        Self::new(Language::Python, config).await
    }

    async fn new(language: Language, config: SubprocessConfig) -> Result<Self, CodeRuntimeError> {
        config.validate()?;
        let default = match language {
            Language::TypeScript => "node",
            Language::Python => "python3",
        };
        let wanted = config
            .interpreter
            .clone()
            .unwrap_or_else(|| PathBuf::from(default));
        let interpreter =
            resolve_binary(&wanted).ok_or_else(|| CodeRuntimeError::InterpreterNotFound {
                language: language.id(),
                binary: wanted.display().to_string(),
                fix: "install it on PATH or set `SubprocessConfig::interpreter` to its path",
            })?;
        check_version(language, &interpreter).await?;
        let (interpreter, libraries) = locate(language, &interpreter).await?;
        let sandbox = Arc::new(Plan::new(config.sandbox, &interpreter, &libraries)?);
        let mb = config.budgets.max_memory_mb;
        let (args, bootstrap_name, bootstrap, memory): (Vec<OsString>, _, _, _) = match language {
            Language::TypeScript => (
                vec![
                    format!("--max-old-space-size={}", mb * 5 / 4).into(),
                    // The host-wide OpenSSL configuration is outside the sandbox: built-in defaults.
                    "--openssl-config=/dev/null".into(),
                ],
                "worker.mjs",
                NODE_BOOTSTRAP.as_str(),
                (MemoryLimit::Data, (mb * 5 / 4 + 512) << 20),
            ),
            Language::Python => (
                vec!["-I".into(), "-B".into(), "-X".into(), "utf8".into()],
                "worker.py",
                PYTHON_BOOTSTRAP,
                (MemoryLimit::AddressSpace, (mb * 2 + 256) << 20),
            ),
        };
        let launch = Launch {
            interpreter,
            args,
            bootstrap_name,
            bootstrap,
            cpu_seconds: config.budgets.compute_ms.div_ceil(1000) + 2,
            memory,
            sandbox,
        };
        Ok(Self::with_launch(language, config, launch))
    }

    fn with_launch(language: Language, config: SubprocessConfig, launch: Launch) -> Self {
        let slots = Arc::new(tokio::sync::Semaphore::new(
            config.budgets.max_concurrent_runs,
        ));
        let inner = Arc::new(Inner {
            language,
            config,
            launch,
            standby: Mutex::new(None),
            disposed: CancellationToken::new(),
            runs: TaskTracker::new(),
            slots,
        });
        // A runtime built outside tokio starts its standby with its first run.
        if tokio::runtime::Handle::try_current().is_ok() {
            inner.refill_standby();
        }
        SubprocessRuntime { inner }
    }

    /// The configuration this runtime was built with.
    pub fn config(&self) -> &SubprocessConfig {
        &self.inner.config
    }

    /// What the sandbox gives each child on this kernel ([`SandboxStatus::missing`] lists what
    /// [`Sandbox::Auto`] could not apply). Every [`RunOutcome`] of a started child carries it too.
    pub fn sandbox(&self) -> &SandboxStatus {
        self.inner.launch.sandbox.status()
    }
}

impl CodeRuntime for SubprocessRuntime {
    fn language(&self) -> &'static str {
        self.inner.language.id()
    }

    fn budgets(&self) -> Option<&Budgets> {
        Some(&self.inner.config.budgets)
    }

    fn isolation(&self) -> Isolation {
        if self.sandbox().is_active() {
            Isolation::SandboxedProcess
        } else {
            Isolation::Process
        }
    }

    fn run(&self, request: RunRequest) -> BoxFuture<'_, Result<RunOutcome, CodeRuntimeError>> {
        let inner = Arc::clone(&self.inner);
        self.inner.runs.track_future(inner.run(request)).boxed()
    }

    fn dispose(&self) -> BoxFuture<'_, ()> {
        async move {
            let inner = &self.inner;
            inner.disposed.cancel();
            let standby = inner.standby.lock().take();
            if let Some(mut worker) = standby {
                worker.kill();
                let _ = worker.child.wait().await;
            }
            inner.runs.close();
            inner.runs.wait().await;
        }
        .boxed()
    }
}

impl Inner {
    fn refill_standby(&self) {
        if !self.config.standby {
            return;
        }
        let mut slot = self.standby.lock();
        // Checked under the lock: `dispose` cancels before it empties the slot.
        if slot.is_none() && !self.disposed.is_cancelled() {
            *slot = Worker::spawn(&self.launch).ok();
        }
    }

    /// A child no program has run in, with its pipes: the standby if it is still alive. The
    /// next standby is spawned off the run's path.
    fn take_worker(self: &Arc<Self>) -> std::io::Result<(Worker, WorkerIo)> {
        let standby = self.standby.lock().take();
        // A standby that died while waiting is dropped (and its group killed).
        let mut worker = match standby.and_then(|mut w| w.is_alive().then_some(w)) {
            Some(worker) => worker,
            None => Worker::spawn(&self.launch)?,
        };
        let inner = Arc::clone(self);
        tokio::spawn(async move { inner.refill_standby() });
        // Pipes are taken exactly once, by the one run the worker serves.
        let io = worker
            .io
            .take()
            .ok_or_else(|| std::io::Error::other("the worker's pipes were already taken"))?;
        Ok((worker, io))
    }

    /// The outcome of a run that ends before a child exists; its message still has to fit the
    /// output cap.
    fn early(&self, kind: FailureKind, message: String) -> RunOutcome {
        early_outcome(self.config.budgets.max_output_bytes, kind, message)
    }

    async fn run(self: Arc<Self>, request: RunRequest) -> Result<RunOutcome, CodeRuntimeError> {
        if self.disposed.is_cancelled() {
            return Err(CodeRuntimeError::Disposed);
        }
        let admitted = admit(&request, &self.slots, &self.disposed, |kind, message| {
            self.early(kind, message)
        });
        let _permit = match admitted.await? {
            Ok(permit) => permit,
            Err(outcome) => return Ok(outcome),
        };
        let program = match self.language {
            Language::TypeScript => match strip_types(request.program.clone()).await {
                Ok(js) => js,
                Err(message) => return Ok(self.early(FailureKind::Exception, message)),
            },
            Language::Python => request.program.clone(),
        };
        if request.signal.is_cancelled() {
            return Ok(self.early(
                FailureKind::Abort,
                "run aborted before it started".to_owned(),
            ));
        }
        let (worker, io) = match self.take_worker() {
            Ok(taken) => taken,
            Err(e) => {
                return Ok(self.early(
                    FailureKind::WorkerExit,
                    format!("could not start the worker: {e}"),
                ));
            }
        };
        Ok(Session::new(&self, worker, io, &request, &program)
            .drive()
            .await)
    }
}
