//! The worker pool of Python on Monty ([`EmbeddedRuntime::python`]) and of TypeScript on
//! QuickJS ([`EmbeddedRuntime::javascript`], stripped here before it is sent):
//! pre-started, sandboxed `dsh-monty-worker` processes, each serving runs one after another in
//! a fresh interpreter.
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
//! The frame path is one task per run on tokio's workers: frames are read from the worker's
//! ring shared with the worker (`ring.rs`; the pipes are only its doorbells), binding calls
//! dispatched (a call that is ready at once is answered in the same poll)
//! and replies written on that task, without channels or helper tasks in between.
//!
//! [`EmbeddedRuntime::python`]: super::EmbeddedRuntime::python
//! [`EmbeddedRuntime::javascript`]: super::EmbeddedRuntime::javascript

pub(super) mod ring;

use std::os::fd::AsFd;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use futures::FutureExt;
use futures::future::BoxFuture;
use parking_lot::Mutex;
use serde_json::Value;
use tokio::io::AsyncReadExt;
use tokio::net::unix::pipe;
use tokio::process::{ChildStderr, ChildStdout};
use tokio::sync::Semaphore;
use tokio::time::{Instant, MissedTickBehavior};
use tokio_util::sync::CancellationToken;
use tokio_util::task::{AbortOnDropHandle, TaskTracker};

use super::admission::admit;
use super::budget::TreeBudget;
use super::embedded::EmbeddedConfig;
use super::frame::{ChildFrame, FrameDecoder, Inbound};
use super::ledger::OutputLedger;
use super::process::{self, Launch, MemoryLimit, Worker};
use super::sandbox::{Plan, Sandbox};
use super::session::{
    Admitted, Calls, Ending, Lines, Target, costly_call, early_outcome, oversized_call, reply_frame,
};
use super::strip::strip_types;
use super::{CodeRuntimeError, FailureKind, Isolation, RunOutcome, RunRequest};

/// How often the worker's CPU time and resident memory are sampled.
const USAGE_POLL: Duration = Duration::from_millis(10);

/// How long log frames a killed worker had already written may take to arrive.
const DRAIN_GRACE: Duration = Duration::from_millis(100);

/// How long a worker whose doorbell pipe closed may take to show its exit status.
const CLOSE_GRACE: Duration = Duration::from_millis(50);

/// Frame slack beyond `max_output_bytes`: the frame's own keys, and numbers that the worker
/// writes longer than the host does.
const FRAME_SLACK: usize = 64 << 10;

/// Largest binding-call frame (arguments plus a few bytes), as for the subprocess runtimes.
const MAX_CALL_FRAME: usize = 1 << 20;

/// Runs one worker serves before it is replaced: a bound on whatever a long-lived
/// interpreter process might accumulate.
const RUNS_PER_WORKER: u64 = 10_000;

/// Bytes read from a worker's ring at a time.
const READ_CHUNK: usize = 64 << 10;

/// How long a run polls for the worker's next frame after sending it a reply, before it waits
/// on the reactor. The worker polls its side likewise (`REPLY_SPIN` in `monty_worker.rs`),
/// so that a binding round trip needs no scheduler wake-up, which on an idle machine costs tens
/// of microseconds on each side. Bounded: a program that computes between calls costs the host
/// at most this much polling per reply.
const FRAME_SPIN: Duration = Duration::from_micros(30);

/// The longest a run keeps answering calls by polling before it passes through its wait.
const SPIN_SESSION: Duration = Duration::from_millis(2);

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
            args.push(super::quickjs::worker::ENGINE_ARG.into());
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
        let clean = matches!(ending, Ending::Done(_))
            && session.clean
            && session.written == session.unwritten.len();
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

/// One run on one worker: its bookkeeping and the bytes still to write.
struct Session<'r> {
    pool: &'r Pool,
    request: &'r RunRequest,
    decoder: FrameDecoder,
    logs: Vec<String>,
    ledger: OutputLedger,
    calls: Calls,
    /// Bytes for the worker that its ring did not take yet, from `written` on.
    unwritten: Vec<u8>,
    written: usize,
    /// Whether the worker may serve another run: nothing of this run is left in either ring.
    clean: bool,
    /// The output-limit diagnostic, once output overflowed.
    overflow: Option<String>,
    inbound: Vec<Inbound>,
    /// A reply went to the worker since the last wait.
    replied: bool,
    /// The worker wrote ring positions that cannot be.
    broken: bool,
}

impl<'r> Session<'r> {
    fn new(pool: &'r Pool, request: &'r RunRequest) -> Self {
        let cap = pool.config.budgets.max_output_bytes;
        let max_frame = usize::try_from(cap)
            .unwrap_or(usize::MAX)
            .saturating_add(FRAME_SLACK);
        Session {
            pool,
            request,
            decoder: FrameDecoder::new(max_frame).with_call_limit(MAX_CALL_FRAME),
            logs: Vec::new(),
            ledger: OutputLedger::new(cap),
            calls: Calls::new(request, pool.config.budgets.max_binding_calls),
            unwritten: run_frame(request, cap),
            written: 0,
            clean: true,
            overflow: None,
            inbound: Vec::new(),
            replied: false,
            broken: false,
        }
    }

    /// Queues `bytes` for the worker and writes what the ring takes now.
    fn send(&mut self, frames: &mut Channel, bytes: &[u8]) {
        self.replied = true;
        if self.written == self.unwritten.len() {
            self.unwritten.clear();
            self.written = 0;
            let done = match frames.write(bytes) {
                Ok(n) => n,
                Err(ring::Corrupt) => {
                    self.broken = true;
                    0
                }
            };
            self.unwritten.extend_from_slice(&bytes[done..]);
        } else {
            self.unwritten.extend_from_slice(bytes);
        }
    }

    /// Writes queued bytes until the ring is full; `Err` when the worker broke the ring.
    fn write_queued(&mut self, frames: &mut Channel) -> Result<(), ()> {
        while self.written < self.unwritten.len() {
            match frames.write(&self.unwritten[self.written..]) {
                Ok(0) => return Ok(()),
                Ok(n) => self.written += n,
                Err(ring::Corrupt) => {
                    self.broken = true;
                    return Err(());
                }
            }
        }
        self.unwritten.clear();
        self.written = 0;
        Ok(())
    }

    /// Before the run waits: raises this side's flags, so that the worker rings for a frame
    /// (and, with bytes queued, for space). `false` when there is something to do at once.
    fn park(&mut self, frames: &Channel) -> bool {
        let queued = self.written < self.unwritten.len();
        let parked = (|| {
            let frame_ready = frames.up.park()?;
            let room = queued && frames.down.park()?;
            Ok(!(frame_ready || room))
        })();
        parked.unwrap_or_else(|ring::Corrupt| {
            self.broken = true;
            false
        })
    }

    /// The worker wrote positions no ring can have.
    fn broke(&mut self) -> Ending {
        self.clean = false;
        Ending::worker_exit("worker broke the frame protocol")
    }

    async fn wait_for_ending(&mut self, pooled: &mut Pooled) -> Ending {
        let config = &self.pool.config;
        let pid = pooled.worker.pid;
        let budget =
            TreeBudget::start(pid, config.budgets.compute_ms, config.budgets.max_memory_mb);
        if self.write_queued(&mut pooled.frames).is_err() {
            return self.broke();
        }
        let wall = tokio::time::sleep(Duration::from_millis(config.budgets.max_wall_ms));
        tokio::pin!(wall);
        let mut tick = tokio::time::interval_at(Instant::now() + USAGE_POLL, USAGE_POLL);
        tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
        let mut buf = vec![0u8; READ_CHUNK];
        let mut out_buf = [0u8; 4096];
        let mut err_buf = [0u8; 4096];
        let max_line = usize::try_from(config.budgets.max_output_bytes)
            .unwrap_or(usize::MAX)
            .saturating_add(FRAME_SLACK);
        let (mut out_line, mut err_line) = (Lines::new(max_line), Lines::new(max_line));
        let (mut out_open, mut err_open) = (true, true);
        // Registered once, not on every turn of the loop.
        let (request, pool) = (self.request, self.pool);
        let aborted = request.signal.cancelled();
        let disposed = pool.disposed.cancelled();
        tokio::pin!(aborted, disposed);
        loop {
            if std::mem::take(&mut self.replied)
                && self.calls.idle()
                && let Err(ending) = self.answer_by_polling(pooled, &mut buf).await
            {
                return ending;
            }
            if self.broken {
                return self.broke();
            }
            // Something to do at once still comes after the checks above it in the select.
            let at_once = !self.park(&pooled.frames);
            if self.broken {
                return self.broke();
            }
            tokio::select! {
                biased;
                _ = &mut aborted => return Ending::aborted(),
                _ = &mut disposed => return Ending::disposed(),
                _ = &mut wall => return Ending::wall(config.budgets.max_wall_ms),
                _ = tick.tick() => {
                    let tree = process::tree(pid);
                    if let Some(usage) = process::usage(&tree)
                        && let Some(ending) = budget.overrun(&usage)
                    {
                        return ending;
                    }
                }
                ready = pooled.frames.bell_in.readable() => {
                    if ready.is_err() {
                        return self.exited(pooled).await;
                    }
                    if let Err(ending) = self.take_frames(pooled, &mut buf, true).await {
                        return ending;
                    }
                    if self.write_queued(&mut pooled.frames).is_err() {
                        return self.broke();
                    }
                }
                (id, reply) = self.calls.next(), if !self.calls.idle() => {
                    self.send(&mut pooled.frames, &reply_frame(id, reply));
                }
                () = std::future::ready(()), if at_once => {
                    if self.write_queued(&mut pooled.frames).is_err() {
                        return self.broke();
                    }
                    if let Err(ending) = self.take_frames(pooled, &mut buf, false).await {
                        return ending;
                    }
                }
                n = pooled.stdout.read(&mut out_buf), if out_open => {
                    out_open = self.output(n, &out_buf, &mut out_line);
                    if let Some(ending) = self.overflowed() {
                        return ending;
                    }
                }
                n = pooled.stderr.read(&mut err_buf), if err_open => {
                    err_open = self.output(n, &err_buf, &mut err_line);
                    if let Some(ending) = self.overflowed() {
                        return ending;
                    }
                }
            }
            // Awake: the worker need not ring until this side parks again.
            pooled.frames.up.unpark();
            pooled.frames.down.unpark();
        }
    }

    /// After a reply the worker's next frame usually comes within microseconds: polls for it
    /// (up to [`FRAME_SPIN`] each) instead of going to sleep, which costs a scheduler wake-up,
    /// for as long as every frame is a call answered at once and written whole. Returns to the
    /// wait (aborts, the wall clock, the budget tick) at least every [`SPIN_SESSION`].
    async fn answer_by_polling(
        &mut self,
        pooled: &mut Pooled,
        buf: &mut [u8],
    ) -> Result<(), Ending> {
        let now = std::time::Instant::now();
        let (mut until, session_end) = (now + FRAME_SPIN, now + SPIN_SESSION);
        loop {
            let got = self.take_frames(pooled, buf, false).await?;
            let now = std::time::Instant::now();
            if got {
                let answered_whole = std::mem::take(&mut self.replied)
                    && self.calls.idle()
                    && self.written == self.unwritten.len();
                if !answered_whole || now >= session_end {
                    return Ok(());
                }
                until = now + FRAME_SPIN;
            } else if now >= until {
                return Ok(());
            }
            std::hint::spin_loop();
        }
    }

    /// Reads and handles what the worker has published, without waiting: `Ok(true)` if anything
    /// was there, `Err` with the ending when the run ends. `bells`: woken by the doorbell, whose
    /// rings are taken first; its end of file is the worker's end, read after the frames the
    /// worker published before it.
    async fn take_frames(
        &mut self,
        pooled: &mut Pooled,
        buf: &mut [u8],
        bells: bool,
    ) -> Result<bool, Ending> {
        let closed = bells && pooled.frames.take_bells().is_err();
        let mut got = false;
        loop {
            let n = match pooled.frames.read(buf) {
                Ok(0) => break,
                Ok(n) => n,
                Err(ring::Corrupt) => return Err(self.broke()),
            };
            got = true;
            let mut inbound = std::mem::take(&mut self.inbound);
            self.decoder.feed(&buf[..n], &mut inbound);
            let ending = self.on_inbound(&mut inbound, &mut pooled.frames);
            self.inbound = inbound;
            if let Some(ending) = ending {
                return Err(ending);
            }
            if self.broken {
                return Err(self.broke());
            }
            // A worker that is gone published all it will: read it to the end.
            if n < buf.len() && !closed {
                break;
            }
        }
        if closed {
            return Err(self.exited(pooled).await);
        }
        Ok(got)
    }

    /// Takes in what the worker printed outside the protocol (a crash report); `false` once
    /// the stream has ended.
    fn output(&mut self, n: std::io::Result<usize>, buf: &[u8], lines: &mut Lines) -> bool {
        let n = n.unwrap_or(0);
        if n == 0 {
            if let Some(text) = lines.finish() {
                self.log(&text);
            }
            return false;
        }
        // Output outside the protocol means the worker is not in a state to serve again.
        self.clean = false;
        let mut entries = Vec::new();
        lines.feed(&buf[..n], &mut entries);
        for text in entries {
            self.log(&text);
        }
        true
    }

    fn log(&mut self, text: &str) {
        if self.overflow.is_none()
            && let Err(diagnostic) = self.ledger.push_log(&mut self.logs, text)
        {
            self.overflow = Some(diagnostic);
        }
    }

    fn overflowed(&mut self) -> Option<Ending> {
        self.overflow.take().map(Ending::Overflow)
    }

    /// Acts on decoded frames in order; a completion must be the last thing of a run.
    fn on_inbound(&mut self, inbound: &mut Vec<Inbound>, out: &mut Channel) -> Option<Ending> {
        let mut ending = None;
        for item in inbound.drain(..) {
            if ending.is_some() {
                // Frames after the completion: this worker is not in a known state.
                self.clean = false;
                continue;
            }
            ending = match item {
                Inbound::OutputOverflow => Some(Ending::Overflow(
                    self.ledger.overflow_message(&mut self.logs),
                )),
                Inbound::OversizedCall { id } => {
                    let admitted = self.calls.refuse(id, oversized_call(MAX_CALL_FRAME as u64));
                    self.admitted(id, admitted, out)
                }
                Inbound::Frame(frame) => self.on_frame(frame, out),
            };
        }
        ending
    }

    fn on_frame(&mut self, frame: ChildFrame, out: &mut Channel) -> Option<Ending> {
        match frame {
            ChildFrame::Log { text } => {
                self.log(&text);
                self.overflowed()
            }
            ChildFrame::Done(completion) => Some(completion.into()),
            ChildFrame::Costly { id } => {
                let admitted = self.calls.refuse(id, costly_call());
                self.admitted(id, admitted, out)
            }
            ChildFrame::Call {
                id,
                global,
                name,
                args,
            } => {
                let admitted = self.calls.call(id, Target::Named(&global, &name), args);
                self.admitted(id, admitted, out)
            }
        }
    }

    /// Answers call `id` as the session admitted it; the ending when it was one too many.
    fn admitted(&mut self, id: u64, admitted: Admitted, out: &mut Channel) -> Option<Ending> {
        match admitted {
            Admitted::Repeated | Admitted::Pending => None,
            Admitted::Limit(ending) => Some(ending),
            Admitted::Answer(reply) => {
                self.send(out, &reply_frame(id, reply));
                None
            }
        }
    }

    /// The worker's doorbell pipe closed: how it ended, once its exit status shows.
    async fn exited(&mut self, pooled: &mut Pooled) -> Ending {
        self.clean = false;
        let status = tokio::time::timeout(CLOSE_GRACE, pooled.worker.child.wait()).await;
        let message = match status {
            Ok(Ok(status)) => {
                if status.code() == Some(monty_types::OOM_EXIT_CODE) {
                    return Ending::allocator_limit(self.pool.config.budgets.max_memory_mb);
                }
                format!(
                    "worker {} before completing",
                    process::describe_exit(status)
                )
            }
            _ => "worker closed its protocol channel before completing".to_owned(),
        };
        Ending::worker_exit(message)
    }

    /// After a kill: takes in the log frames the worker published before it died (all of
    /// them are in the ring once its doorbell pipe has closed).
    async fn drain(&mut self, pooled: &mut Pooled) {
        self.calls.settle();
        let deadline = Instant::now() + DRAIN_GRACE;
        while let Ok(Ok(())) =
            tokio::time::timeout_at(deadline, pooled.frames.bell_in.readable()).await
        {
            if pooled.frames.take_bells().is_err() {
                break;
            }
        }
        let mut buf = vec![0u8; READ_CHUNK];
        let mut inbound = Vec::new();
        while let Ok(n) = pooled.frames.read(&mut buf)
            && n > 0
        {
            self.decoder.feed(&buf[..n], &mut inbound);
            for item in inbound.drain(..) {
                if let Inbound::Frame(ChildFrame::Log { text }) = item {
                    self.log(&text);
                }
            }
        }
    }

    fn outcome(mut self, ending: Ending) -> RunOutcome {
        self.calls.settle();
        let sandbox = Some(self.pool.launch.sandbox.status().clone());
        let logs = std::mem::take(&mut self.logs);
        // Output that overflowed while draining still ends the run as `output-limit`.
        let ending = match (self.overflow.take(), ending) {
            (_, Ending::Overflow(message)) | (Some(message), _) => Ending::Overflow(message),
            (None, ending) => ending,
        };
        ending.into_outcome(&mut self.ledger, logs, sandbox)
    }
}

/// The frame that hands a worker its run.
fn run_frame(request: &RunRequest, cap: u64) -> Vec<u8> {
    let namespaces: Vec<Value> = request
        .bindings
        .iter()
        .map(super::BindingNamespace::bootstrap_form)
        .collect();
    let mut out = serde_json::to_vec(&serde_json::json!({
        "type": "run",
        "program": request.program,
        "namespaces": namespaces,
        "maxOutputBytes": cap,
    }))
    .unwrap_or_default();
    out.push(b'\n');
    out
}
