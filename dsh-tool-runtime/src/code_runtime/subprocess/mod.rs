//! [`SubprocessRuntime`]: one fresh interpreter process per run, driven over the frame protocol.

use std::collections::HashMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::Mutex;
use std::time::Duration;

use futures::FutureExt;
use futures::future::BoxFuture;
use serde_json::Value;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio::time::{Instant, MissedTickBehavior};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::admission::admit;
use super::budget::{Budgets, TreeBudget};
use super::frame::{ChildFrame, FrameDecoder, Inbound};
use super::ledger::OutputLedger;
use super::process::{self, Launch, MemoryLimit, Worker, WorkerIo};
use super::sandbox::{Plan, Sandbox, SandboxStatus};
use super::session::{
    Admitted, Calls, Ending, Lines, Target, costly_call, early_outcome, oversized_call, reply_frame,
};
use super::strip::strip_types;
use super::{CodeRuntime, CodeRuntimeError, FailureKind, Isolation, RunOutcome, RunRequest};
use crate::json::MAX_FRAME_DEPTH;
use crate::sdk::Language;

static NODE_BOOTSTRAP: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    super::javascript_bootstrap(include_str!("../../../../sdk-templates/worker.mjs"))
});
const PYTHON_BOOTSTRAP: &str = include_str!("../../../../sdk-templates/worker.py");

/// How often the tree's CPU time and resident memory are sampled; a compute overrun is caught
/// within one interval plus the kernel's accounting granularity (one clock tick, usually 10 ms).
const USAGE_POLL: Duration = Duration::from_millis(10);

/// How long output already written by a settled child may take to arrive.
const DRAIN_GRACE: Duration = Duration::from_millis(100);

/// How long a child whose protocol channel closed may take to show its exit status.
const CLOSE_GRACE: Duration = Duration::from_millis(20);

/// How long frames may still arrive after the child has exited.
const EXIT_GRACE: Duration = Duration::from_millis(200);

/// Frame slack beyond `max_output_bytes`: the frame's own keys, and numbers that the child
/// writes longer than the host does.
const FRAME_SLACK: usize = 64 << 10;

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
    /// Independently, any frame whose decoded form would take more than 12 MiB of host memory
    /// is refused (a call rejects, a completion is `invalid-output`); every frame up to
    /// ~384 KiB decodes whatever it holds.
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
        if self.budgets.compute_ms == 0 {
            return fail("config.budgets.compute_ms must be positive");
        }
        if self.budgets.max_wall_ms == 0 || self.budgets.max_wall_ms > i32::MAX as u64 {
            return fail("config.budgets.max_wall_ms must be between 1 and 2147483647");
        }
        if self.budgets.max_output_bytes < 4 || self.budgets.max_output_bytes > (1 << 53) - 1 {
            return fail("config.budgets.max_output_bytes must be a safe integer of at least 4");
        }
        if self.budgets.max_memory_mb < 64 || self.budgets.max_memory_mb > 1 << 20 {
            return fail("config.budgets.max_memory_mb must be between 64 and 1048576");
        }
        if self.max_frame_bytes < 1024 || self.max_frame_bytes > (1 << 53) - 1 {
            return fail("config.max_frame_bytes must be a safe integer of at least 1024");
        }
        if self.budgets.max_concurrent_runs == 0 {
            return fail("config.budgets.max_concurrent_runs must be positive");
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

fn resolve_binary(wanted: &Path) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let executable = |p: &Path| {
        std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    if wanted.components().count() > 1 {
        return executable(wanted).then(|| wanted.to_path_buf());
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(wanted))
        .find(|candidate| executable(candidate))
}

/// The interpreter's real executable (not a launcher script or shim: the sandbox lets the child
/// execute that one file) and the directories of its own libraries.
async fn locate(
    language: Language,
    binary: &Path,
) -> Result<(PathBuf, Vec<PathBuf>), CodeRuntimeError> {
    let args: &[&str] = match language {
        Language::TypeScript => &["-p", "process.execPath"],
        Language::Python => &[
            "-I",
            "-c",
            "import sys, sysconfig\nprint(sys.executable)\nprint(sys.base_prefix + '/lib')\n\
             for k in ('stdlib', 'platstdlib'): print(sysconfig.get_paths()[k])",
        ],
    };
    let unusable = |reason: String| CodeRuntimeError::InterpreterUnusable {
        language: language.id(),
        binary: binary.display().to_string(),
        reason,
    };
    let output = tokio::time::timeout(
        Duration::from_secs(30),
        tokio::process::Command::new(binary)
            .args(args)
            .env_clear()
            .kill_on_drop(true)
            .output(),
    )
    .await
    .map_err(|_| unusable("it did not report its executable within 30 s".to_owned()))?
    .map_err(|e| unusable(e.to_string()))?;
    let text = String::from_utf8_lossy(&output.stdout).into_owned();
    let mut lines = text.lines().map(str::trim).filter(|l| !l.is_empty());
    let executable = lines
        .next()
        .map(PathBuf::from)
        .and_then(|p| std::fs::canonicalize(p).ok())
        .ok_or_else(|| unusable("it did not report its executable".to_owned()))?;
    let libraries = lines
        .map(PathBuf::from)
        .filter_map(|p| std::fs::canonicalize(p).ok())
        .collect();
    Ok((executable, libraries))
}

async fn check_version(language: Language, binary: &Path) -> Result<(), CodeRuntimeError> {
    let shown = binary.display().to_string();
    let output = tokio::time::timeout(
        Duration::from_secs(30),
        tokio::process::Command::new(binary)
            .arg("--version")
            .env_clear()
            .kill_on_drop(true)
            .output(),
    )
    .await
    .map_err(|_| "it did not answer `--version` within 30 s".to_owned())
    .and_then(|r| r.map_err(|e| e.to_string()))
    .map_err(|reason| CodeRuntimeError::InterpreterUnusable {
        language: language.id(),
        binary: shown.clone(),
        reason,
    })?;
    let text = String::from_utf8_lossy(&output.stdout).trim().to_owned()
        + String::from_utf8_lossy(&output.stderr).trim();
    let numbers: Vec<u64> = text
        .trim_start_matches(|c: char| !c.is_ascii_digit())
        .split(|c: char| !c.is_ascii_digit())
        .take(2)
        .map_while(|n| n.parse().ok())
        .collect();
    let (ok, minimum) = match language {
        Language::TypeScript => (numbers.first().is_some_and(|&major| major >= 18), "18"),
        Language::Python => (matches!(numbers[..], [3, minor, ..] if minor >= 10), "3.10"),
    };
    if ok {
        Ok(())
    } else {
        Err(CodeRuntimeError::InterpreterTooOld {
            language: language.id(),
            binary: shown,
            found: text,
            minimum,
        })
    }
}

/// Everything the run loop reacts to besides timers and binding completions.
enum Event {
    Inbound(Inbound),
    FramesClosed,
    /// The child's end of the host-to-child pipe is gone.
    RepliesClosed,
    Output(String),
    OutputClosed,
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

/// One run in flight: the worker, its reader and writer tasks and the run's bookkeeping.
struct Session<'r> {
    inner: &'r Inner,
    request: &'r RunRequest,
    worker: Worker,
    events: mpsc::Receiver<Event>,
    replies: mpsc::UnboundedSender<Vec<u8>>,
    tasks: Vec<JoinHandle<()>>,
    logs: Vec<String>,
    ledger: OutputLedger,
    calls: Calls,
    outputs_open: usize,
    /// Descendants seen so far, killed at settle even if re-parented away.
    seen: HashMap<i32, u64>,
}

impl<'r> Session<'r> {
    fn new(
        inner: &'r Inner,
        worker: Worker,
        io: WorkerIo,
        request: &'r RunRequest,
        program: &str,
    ) -> Self {
        let cap = inner.config.budgets.max_output_bytes;
        let max_frame = usize::try_from(cap)
            .unwrap_or(usize::MAX)
            .saturating_add(FRAME_SLACK);
        let (tx, events) = mpsc::channel(256);
        let (replies, reply_rx) = mpsc::unbounded_channel();
        let tx_replies = tx.clone();
        let run_frame = run_frame(program, request, cap, inner.config.max_frame_bytes);
        // Replies were queued before the writer existed: the run frame is always first.
        let _ = replies.send(run_frame);
        let tasks = vec![
            tokio::spawn(read_frames(
                io.frames_in,
                FrameDecoder::new(max_frame).with_call_limit(
                    usize::try_from(inner.config.max_frame_bytes).unwrap_or(usize::MAX),
                ),
                tx.clone(),
            )),
            tokio::spawn(read_output(io.stdout, max_frame, tx.clone())),
            tokio::spawn(read_output(io.stderr, max_frame, tx.clone())),
            tokio::spawn(write_frames(io.frames_out, reply_rx, tx_replies)),
        ];
        Session {
            inner,
            request,
            worker,
            events,
            replies,
            tasks,
            logs: Vec::new(),
            ledger: OutputLedger::new(cap),
            calls: Calls::new(request, inner.config.budgets.max_binding_calls),
            outputs_open: 2,
            seen: HashMap::new(),
        }
    }

    async fn drive(mut self) -> RunOutcome {
        let ending = self.wait_for_ending().await;
        self.settle(ending).await
    }

    async fn wait_for_ending(&mut self) -> Ending {
        let config = &self.inner.config;
        let pid = self.worker.pid;
        let budget =
            TreeBudget::start(pid, config.budgets.compute_ms, config.budgets.max_memory_mb);
        let wall = tokio::time::sleep(Duration::from_millis(config.budgets.max_wall_ms));
        tokio::pin!(wall);
        let mut tick = tokio::time::interval(USAGE_POLL);
        tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
        let mut exited: Option<(String, Instant)> = None;
        let mut frames_closed = false;
        let mut events_done = false;
        loop {
            let grace = exited.as_ref().map(|(_, at)| *at);
            tokio::select! {
                biased;
                _ = self.request.signal.cancelled() => return Ending::aborted(),
                _ = self.inner.disposed.cancelled() => return Ending::disposed(),
                _ = &mut wall => return Ending::wall(config.budgets.max_wall_ms),
                _ = tick.tick(), if exited.is_none() => {
                    let tree = process::tree(pid);
                    self.remember(&tree);
                    let Some(usage) = process::usage(&tree) else { continue };
                    if let Some(ending) = budget.overrun(&usage) {
                        return ending;
                    }
                }
                event = self.events.recv(), if !events_done => match event {
                    None => events_done = true,
                    Some(Event::FramesClosed) => {
                        // Nothing more can come from the program: settle now, not at the
                        // wall-clock ceiling. A dying child closes its descriptors just before
                        // its exit status exists: wait a moment for it, to say how it ended.
                        if exited.is_none() {
                            let status =
                                tokio::time::timeout(CLOSE_GRACE, self.worker.child.wait()).await;
                            let message = match status {
                                Ok(Ok(status)) => format!(
                                    "worker {} before completing",
                                    process::describe_exit(status)
                                ),
                                _ => "worker closed its protocol channel before completing"
                                    .to_owned(),
                            };
                            return Ending::worker_exit(message);
                        }
                        frames_closed = true;
                    }
                    Some(Event::RepliesClosed) => {
                        return Ending::worker_exit(
                            "worker closed its protocol channel before completing",
                        );
                    }
                    Some(Event::OutputClosed) => self.outputs_open -= 1,
                    Some(Event::Output(text)) => {
                        if let Err(diagnostic) = self.ledger.push_log(&mut self.logs, &text) {
                            return Ending::Overflow(diagnostic);
                        }
                    }
                    Some(Event::Inbound(Inbound::OutputOverflow)) => {
                        return Ending::Overflow(self.ledger.overflow_message(&mut self.logs));
                    }
                    Some(Event::Inbound(Inbound::OversizedCall { id })) => {
                        let message = oversized_call(self.inner.config.max_frame_bytes);
                        let admitted = self.calls.refuse(id, message);
                        if let Some(ending) = self.admitted(id, admitted) {
                            return ending;
                        }
                    }
                    Some(Event::Inbound(Inbound::Frame(frame))) => {
                        if let Some(ending) = self.on_frame(frame) {
                            return ending;
                        }
                    }
                },
                (id, reply) = self.calls.next(), if !self.calls.idle() => {
                    self.send(reply_frame(id, reply));
                }
                status = self.worker.child.wait(), if exited.is_none() => {
                    let how = status.map_or_else(|e| format!("ended ({e})"), process::describe_exit);
                    exited = Some((how, Instant::now() + EXIT_GRACE));
                }
                _ = sleep_until_opt(grace), if grace.is_some() && !frames_closed => {
                    frames_closed = true;
                }
            }
            if frames_closed && let Some((how, _)) = &exited {
                return Ending::worker_exit(format!("worker {how} before completing"));
            }
        }
    }

    fn on_frame(&mut self, frame: ChildFrame) -> Option<Ending> {
        match frame {
            ChildFrame::Log { text } => self
                .ledger
                .push_log(&mut self.logs, &text)
                .err()
                .map(Ending::Overflow),
            ChildFrame::Done(completion) => Some(completion.into()),
            ChildFrame::Costly { id } => {
                let admitted = self.calls.refuse(id, costly_call());
                self.admitted(id, admitted)
            }
            ChildFrame::Call {
                id,
                global,
                name,
                args,
            } => {
                let admitted = self.calls.call(id, Target::Named(&global, &name), args);
                self.admitted(id, admitted)
            }
        }
    }

    /// Answers call `id` as the session admitted it; the ending when it was one too many.
    fn admitted(&mut self, id: u64, admitted: Admitted) -> Option<Ending> {
        match admitted {
            Admitted::Repeated | Admitted::Pending => None,
            Admitted::Limit(ending) => Some(ending),
            Admitted::Answer(reply) => {
                self.send(reply_frame(id, reply));
                None
            }
        }
    }

    /// Records the descendants of a tree sample (the root is the worker itself).
    fn remember(&mut self, tree: &[i32]) {
        for &pid in tree.iter().skip(1) {
            if !self.seen.contains_key(&pid)
                && let Some(started) = process::start_time(pid)
            {
                self.seen.insert(pid, started);
            }
        }
        // Processes that are gone need no killing: keep the record small.
        if self.seen.len() > 4 * 4096 {
            self.seen
                .retain(|&pid, &mut started| process::start_time(pid) == Some(started));
        }
    }

    fn send(&self, frame: Vec<u8>) {
        // The writer only stops when the child's end is gone; the run is then ending anyway.
        let _ = self.replies.send(frame);
    }

    async fn settle(mut self, mut ending: Ending) -> RunOutcome {
        self.calls.settle();
        self.worker.kill();
        process::kill_seen(&self.seen);
        // Output the program wrote before the end is still in the pipes: take it in.
        let deadline = Instant::now() + DRAIN_GRACE;
        while self.outputs_open > 0 {
            match tokio::time::timeout_at(deadline, self.events.recv()).await {
                Ok(Some(Event::Output(text))) => {
                    if matches!(ending, Ending::Overflow(_)) {
                        continue;
                    }
                    if let Err(diagnostic) = self.ledger.push_log(&mut self.logs, &text) {
                        ending = Ending::Overflow(diagnostic);
                    }
                }
                Ok(Some(Event::OutputClosed)) => self.outputs_open -= 1,
                Ok(Some(_)) => {}
                Ok(None) | Err(_) => break,
            }
        }
        for task in &self.tasks {
            task.abort();
        }
        let _ = tokio::time::timeout(Duration::from_secs(5), self.worker.child.wait()).await;
        let logs = std::mem::take(&mut self.logs);
        let sandbox = Some(self.inner.launch.sandbox.status().clone());
        ending.into_outcome(&mut self.ledger, logs, sandbox)
    }
}

async fn sleep_until_opt(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

fn run_frame(program: &str, request: &RunRequest, cap: u64, max_frame_bytes: u64) -> Vec<u8> {
    let namespaces: Vec<Value> = request
        .bindings
        .iter()
        .map(super::BindingNamespace::bootstrap_form)
        .collect();
    let mut out = serde_json::to_vec(&serde_json::json!({
        "type": "run",
        "program": program,
        "namespaces": namespaces,
        "maxOutputBytes": cap,
        "maxFrameBytes": max_frame_bytes,
        "maxDepth": MAX_FRAME_DEPTH,
    }))
    .unwrap_or_default();
    out.push(b'\n');
    out
}

async fn read_frames(
    mut pipe: tokio::net::unix::pipe::Receiver,
    mut decoder: FrameDecoder,
    tx: mpsc::Sender<Event>,
) {
    let mut buf = vec![0u8; 64 << 10];
    let mut out = Vec::new();
    loop {
        let n = pipe.read(&mut buf).await.unwrap_or(0);
        if n == 0 {
            decoder.finish(&mut out);
        } else {
            decoder.feed(&buf[..n], &mut out);
        }
        for inbound in out.drain(..) {
            if tx.send(Event::Inbound(inbound)).await.is_err() {
                return;
            }
        }
        if n == 0 {
            let _ = tx.send(Event::FramesClosed).await;
            return;
        }
    }
}

/// Turns a raw output stream into log entries, one per line (a final unterminated line too).
/// A line longer than `max` bytes is cut there: it cannot fit the ledger anyway.
async fn read_output(mut stream: impl AsyncRead + Unpin, max: usize, tx: mpsc::Sender<Event>) {
    let mut buf = vec![0u8; 64 << 10];
    let mut lines = Lines::new(max);
    let mut out = Vec::new();
    loop {
        let n = stream.read(&mut buf).await.unwrap_or(0);
        if n == 0 {
            break;
        }
        lines.feed(&buf[..n], &mut out);
        for text in out.drain(..) {
            if tx.send(Event::Output(text)).await.is_err() {
                return;
            }
        }
    }
    if let Some(text) = lines.finish() {
        let _ = tx.send(Event::Output(text)).await;
    }
    let _ = tx.send(Event::OutputClosed).await;
}

async fn write_frames(
    mut pipe: tokio::net::unix::pipe::Sender,
    mut rx: mpsc::UnboundedReceiver<Vec<u8>>,
    tx: mpsc::Sender<Event>,
) {
    while let Some(frame) = rx.recv().await {
        if pipe.write_all(&frame).await.is_err() {
            let _ = tx.send(Event::RepliesClosed).await;
            return;
        }
    }
}
