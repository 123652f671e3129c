//! The pool of worker processes behind [`EmbeddedRuntime::python`] (Python on Monty) and
//! [`EmbeddedRuntime::javascript`] (TypeScript on QuickJS, stripped here before it is sent):
//! pre-started, sandboxed `dsh-monty-worker` processes, each serving runs one after another in
//! a fresh interpreter; and where the worker program is found.
//!
//! A worker goes back to the pool only when its run completed (a value or a program error):
//! one that crashed, ran out of memory, overran a budget, was cancelled or disposed mid-run, or
//! left the protocol in an unknown state is killed, and the pool starts another off the run's
//! path. A run whose worker dies ends as `worker-exit` (or `memory-limit`, by the allocator's
//! exit status), whether or not the program said anything yet: it is never started again on
//! another worker. Every run is watched as a subprocess run is (CPU and resident memory of the
//! worker sampled every 10 ms, the wall clock, binding calls and output counted by the host);
//! the worker's own allocator decides `memory-limit` through an exit status no program can
//! pick.
//!
//! One run over a pooled worker is `run.rs`; the frame rings shared with a worker are
//! `crate::ring`, the worker's side `crate::worker`.
//!
//! [`EmbeddedRuntime::python`]: crate::EmbeddedRuntime::python
//! [`EmbeddedRuntime::javascript`]: crate::EmbeddedRuntime::javascript

mod run;

use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use futures::FutureExt;
use futures::future::BoxFuture;
use parking_lot::Mutex;
use tokio::net::unix::pipe;
use tokio::process::{ChildStderr, ChildStdout};
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tokio_util::task::{AbortOnDropHandle, TaskTracker};

use dsh_tool_code_mode::__engines::process::{self, Launch, MemoryLimit, Worker};
use dsh_tool_code_mode::__engines::strip::strip_types;
use dsh_tool_code_mode::__engines::{Plan, admit, early_outcome};
use dsh_tool_code_mode::code_runtime::{
    CodeRuntimeError, FailureKind, Isolation, RunOutcome, RunRequest, Sandbox,
};

use crate::config::EmbeddedConfig;
use crate::ring;
use run::Session;

/// Runs one worker serves before it is replaced: a bound on whatever a long-lived
/// interpreter process might accumulate.
const RUNS_PER_WORKER: u64 = 10_000;

/// The interpreter a pool's workers run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PoolEngine {
    /// Python on Monty.
    Monty,
    /// TypeScript on QuickJS, type-stripped on the host.
    QuickJs,
}

/// The pool behind one `EmbeddedRuntime::python` or `EmbeddedRuntime::javascript`.
pub(crate) struct Pool {
    engine: PoolEngine,
    config: EmbeddedConfig,
    launch: Launch,
    idle: Mutex<Vec<Pooled>>,
    /// Workers alive: idle, serving a run, or starting.
    live: Arc<AtomicUsize>,
    refilling: AtomicBool,
    slots: Arc<Semaphore>,
    disposed: CancellationToken,
    runs: TaskTracker,
    /// CPU time (ms) past which a worker is retired: its `RLIMIT_CPU` less one run's budget
    /// and a second of margin, so that no run can meet the rlimit instead of the budget.
    retire_cpu_ms: u64,
}

/// A started worker with its frame channel and output pipes.
struct Pooled {
    worker: Worker,
    frames: Channel,
    stdout: ChildStdout,
    stderr: ChildStderr,
    runs: u64,
    live: Arc<AtomicUsize>,
}

/// The frame channel to one worker: the shared rings and their doorbells (`ring.rs`).
struct Channel {
    /// Frames to the worker.
    down: ring::Producer,
    /// Frames from the worker.
    up: ring::Consumer,
    /// The worker rings here (its fd 3); end of file once it is gone.
    bell_in: pipe::Receiver,
    /// Where this side rings the worker (its fd 4).
    bell_out: pipe::Sender,
}

impl Channel {
    /// Writes the pipe itself: tokio's `try_write` answers from the reactor's last readiness,
    /// which a pipe that was never waited on does not have yet. A full pipe means the worker
    /// has rings waiting already; a closed one, that it is gone (its end of file says so).
    fn ring_worker(&self) {
        let _ = rustix::io::write(&self.bell_out, &[1]);
    }

    /// Writes what fits of `bytes` into the ring to the worker; the count written.
    fn write(&mut self, bytes: &[u8]) -> Result<usize, ring::Corrupt> {
        let n = self.down.write(bytes)?;
        if n > 0 && self.down.consumer_needs_bell() {
            self.ring_worker();
        }
        Ok(n)
    }

    /// Reads what the worker published, up to `buf.len()` bytes; the count read.
    fn read(&mut self, buf: &mut [u8]) -> Result<usize, ring::Corrupt> {
        let n = self.up.read(buf)?;
        if n > 0 && self.up.producer_needs_bell() {
            self.ring_worker();
        }
        Ok(n)
    }

    /// Takes the rings waiting on the doorbell: `Err` once the worker's end is closed.
    fn take_bells(&self) -> Result<(), ()> {
        let mut buf = [0u8; 64];
        loop {
            match self.bell_in.try_read(&mut buf) {
                Ok(0) => return Err(()),
                Ok(_) => {}
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return Ok(()),
                Err(_) => return Err(()),
            }
        }
    }
}

impl Drop for Pooled {
    fn drop(&mut self) {
        // `Worker`'s own drop kills its process tree.
        self.live.fetch_sub(1, Ordering::Relaxed);
    }
}

impl Pool {
    /// A pool of `worker` (the `dsh-monty-worker` program) processes under `config`'s
    /// budgets, sandboxed as the subprocess runtimes' children are ([`Sandbox::Auto`]).
    pub(crate) fn new(
        engine: PoolEngine,
        config: EmbeddedConfig,
        worker: PathBuf,
    ) -> Result<Arc<Pool>, CodeRuntimeError> {
        let sandbox = Arc::new(Plan::new(Sandbox::Auto, &worker, &[])?);
        let mb = config.budgets.max_memory_mb;
        let compute_s = config.budgets.compute_ms.div_ceil(1000);
        // A worker serves several runs: its rlimit covers at least three full budgets.
        let cpu_seconds = compute_s * 4 + 2;
        // The heap stops short of the budget, so that the allocator (exact, at the first
        // allocation past it) rather than the 10 ms resident-size sample decides.
        let mut args = vec![((mb << 20) / 8 * 7).to_string().into()];
        if engine == PoolEngine::QuickJs {
            args.push(crate::worker::quickjs::ENGINE_ARG.into());
        }
        let launch = Launch {
            interpreter: worker,
            args,
            bootstrap_name: match engine {
                PoolEngine::Monty => "program.py",
                PoolEngine::QuickJs => "program.js",
            },
            bootstrap: "",
            cpu_seconds,
            memory: (MemoryLimit::AddressSpace, (mb * 2 + 256) << 20),
            sandbox,
        };
        let pool = Arc::new(Pool {
            engine,
            slots: Arc::new(Semaphore::new(config.budgets.max_concurrent_runs)),
            retire_cpu_ms: (cpu_seconds * 1000).saturating_sub(config.budgets.compute_ms + 1000),
            config,
            launch,
            idle: Mutex::new(Vec::new()),
            live: Arc::new(AtomicUsize::new(0)),
            refilling: AtomicBool::new(false),
            disposed: CancellationToken::new(),
            runs: TaskTracker::new(),
        });
        // A runtime built outside tokio starts its workers with its first run.
        if tokio::runtime::Handle::try_current().is_ok() {
            pool.refill();
        }
        Ok(pool)
    }

    pub(crate) fn isolation(&self) -> Isolation {
        if self.launch.sandbox.status().is_active() {
            Isolation::SandboxedProcess
        } else {
            Isolation::Process
        }
    }

    /// Idle workers the pool keeps started.
    fn idle_target(&self) -> usize {
        self.config
            .python_idle_workers
            .min(self.config.budgets.max_concurrent_runs)
    }

    fn spawn(&self) -> std::io::Result<Pooled> {
        let (region, fd) = ring::Region::create()?;
        let mut worker = Worker::spawn_with(&self.launch, Some((fd.as_fd(), ring::REGION_FD)))?;
        drop(fd);
        let io = worker
            .io
            .take()
            .ok_or_else(|| std::io::Error::other("the worker's pipes are missing"))?;
        let (down, up) = region.host_ends();
        self.live.fetch_add(1, Ordering::Relaxed);
        Ok(Pooled {
            worker,
            frames: Channel {
                down,
                up,
                bell_in: io.frames_in,
                bell_out: io.frames_out,
            },
            stdout: io.stdout,
            stderr: io.stderr,
            runs: 0,
            live: Arc::clone(&self.live),
        })
    }

    /// Starts workers until enough are idle, off the caller's path (a process start blocks).
    fn refill(self: &Arc<Self>) {
        if self.disposed.is_cancelled()
            || self.idle.lock().len() >= self.idle_target()
            || self.refilling.swap(true, Ordering::AcqRel)
        {
            return;
        }
        let pool = Arc::clone(self);
        tokio::task::spawn_blocking(move || {
            loop {
                let wanted = pool.idle.lock().len() < pool.idle_target()
                    && pool.live.load(Ordering::Relaxed)
                        < pool.config.budgets.max_concurrent_runs + pool.idle_target();
                if !wanted || pool.disposed.is_cancelled() {
                    break;
                }
                let Ok(started) = pool.spawn() else { break };
                let mut idle = pool.idle.lock();
                // Checked under the lock: `dispose` cancels before it empties the pool.
                if pool.disposed.is_cancelled() {
                    break;
                }
                idle.push(started);
            }
            pool.refilling.store(false, Ordering::Release);
        });
    }

    /// An idle worker that is still alive, or a new one. An idle worker found dead here never
    /// had this run's program: skipping it is the only retry a run gets.
    fn take(self: &Arc<Self>) -> std::io::Result<Pooled> {
        let found = loop {
            let next = self.idle.lock().pop();
            match next {
                Some(mut pooled) => {
                    if pooled.worker.is_alive() {
                        break Some(pooled);
                    }
                }
                None => break None,
            }
        };
        let taken = match found {
            Some(pooled) => pooled,
            None => self.spawn()?,
        };
        self.refill();
        Ok(taken)
    }

    /// Puts a worker whose run completed back, unless it has served long enough or enough
    /// are idle.
    fn give_back(self: &Arc<Self>, mut pooled: Pooled) {
        pooled.runs += 1;
        let spent = process::cpu_time_ms(pooled.worker.pid).unwrap_or(u64::MAX);
        if pooled.runs >= RUNS_PER_WORKER || spent > self.retire_cpu_ms {
            drop(pooled);
            self.refill();
            return;
        }
        // The warm worker goes on top, so that the next run takes it; one beyond the target
        // is kept for that, more are ended.
        let mut idle = self.idle.lock();
        if !self.disposed.is_cancelled() && idle.len() <= self.idle_target() {
            idle.push(pooled);
        }
    }

    fn early(&self, kind: FailureKind, message: String) -> RunOutcome {
        early_outcome(self.config.budgets.max_output_bytes, kind, message)
    }

    /// Runs `request` on a pooled worker. The run's loop is a task of its own on tokio's
    /// workers (where the worker's doorbell readiness is delivered), aborted if the caller drops
    /// the returned future.
    pub(crate) fn run(
        self: &Arc<Self>,
        request: RunRequest,
    ) -> BoxFuture<'static, Result<RunOutcome, CodeRuntimeError>> {
        let pool = Arc::clone(self);
        async move {
            if pool.disposed.is_cancelled() {
                return Err(CodeRuntimeError::Disposed);
            }
            let task = AbortOnDropHandle::new(pool.runs.spawn(Arc::clone(&pool).serve(request)));
            task.await.unwrap_or_else(|_| {
                Ok(pool.early(
                    FailureKind::WorkerExit,
                    "the run's task ended before completing".to_owned(),
                ))
            })
        }
        .boxed()
    }

    async fn serve(
        self: Arc<Self>,
        mut request: RunRequest,
    ) -> Result<RunOutcome, CodeRuntimeError> {
        let admitted = admit(&request, &self.slots, &self.disposed, |kind, message| {
            self.early(kind, message)
        });
        let _permit = match admitted.await? {
            Ok(permit) => permit,
            Err(outcome) => return Ok(outcome),
        };
        // Stripped once admitted (the admission refuses an oversized program unstripped).
        if self.engine == PoolEngine::QuickJs {
            match strip_types(std::mem::take(&mut request.program)).await {
                Ok(js) => request.program = js,
                Err(message) => return Ok(self.early(FailureKind::Exception, message)),
            }
        }
        if request.signal.is_cancelled() {
            return Ok(self.early(
                FailureKind::Abort,
                "run aborted before it started".to_owned(),
            ));
        }
        let mut pooled = match self.take() {
            Ok(pooled) => pooled,
            Err(e) => {
                return Ok(self.early(
                    FailureKind::WorkerExit,
                    format!("could not start the worker: {e}"),
                ));
            }
        };
        // Once its frame is written the program may be running: however the worker ends, the
        // run ends with it and is never started again elsewhere (no second budget, no second
        // round of side effects through the bindings).
        let mut session = Session::new(&self, &request);
        let ending = session.wait_for_ending(&mut pooled).await;
        // A reply half written when the run completed would be read as the next run's start.
        let clean = session.leaves_worker_clean(&ending);
        if !clean {
            pooled.worker.kill();
            session.drain(&mut pooled).await;
        }
        let outcome = session.outcome(ending);
        if clean {
            self.give_back(pooled);
        } else {
            drop(pooled);
            self.refill();
        }
        Ok(outcome)
    }

    pub(crate) async fn dispose(&self) {
        self.disposed.cancel();
        let idle = std::mem::take(&mut *self.idle.lock());
        for mut pooled in idle {
            pooled.worker.kill();
            let _ = pooled.worker.child.wait().await;
        }
        self.runs.close();
        self.runs.wait().await;
    }
}

/// The worker program's file name.
pub(crate) const WORKER_NAME: &str = "dsh-monty-worker";

/// The worker program: `configured`, else `$DSH_MONTY_WORKER`, else next to the running
/// executable or one directory up (Cargo's `deps/` and `examples/`).
pub(crate) fn find_worker(configured: Option<&Path>) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let usable = |p: &Path| {
        std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    let exe = std::env::current_exe().ok();
    let dir = exe.as_deref().and_then(Path::parent);
    configured
        .map(Path::to_path_buf)
        .into_iter()
        .chain(std::env::var_os("DSH_MONTY_WORKER").map(Into::into))
        .chain(dir.map(|d| d.join(WORKER_NAME)))
        .chain(dir.and_then(Path::parent).map(|d| d.join(WORKER_NAME)))
        .find(|p| usable(p))
        .and_then(|p| std::fs::canonicalize(p).ok())
}
