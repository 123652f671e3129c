//! What every embedded engine shares: the budget watch its interrupt hook polls, the binding
//! call table, the thread waker and the outcome rules (the same as the subprocess runtime's).

use std::sync::Arc;
use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};
use std::task::{Context, Poll, Wake};
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

pub(crate) use dsh_tool_code_mode::__engines::Ending;
use dsh_tool_code_mode::__engines::calls::{self, Admitted};
pub(crate) use dsh_tool_code_mode::__engines::calls::{CheckedResolution, Target};
use dsh_tool_code_mode::__engines::{Lane, parse_unbounded};
use dsh_tool_code_mode::code_runtime::frame::{self, MAX_DEPTH as MAX_FRAME_DEPTH};
use dsh_tool_code_mode::code_runtime::{OutputLedger, RunOutcome, RunRequest};
use dsh_tool_runtime::json::text_depth;

use crate::config::EmbeddedConfig;

/// Stack of an interpreter thread. Only touched pages are committed; the interpreter's own
/// limit ([`INTERPRETER_STACK_BYTES`]) sits well inside it, leaving room for the host code a
/// binding call runs at the deepest point the interpreter allows.
pub(crate) const THREAD_STACK_BYTES: usize = 64 << 20;

/// The native stack the interpreter may use before it raises a stack overflow in the program.
pub(crate) const INTERPRETER_STACK_BYTES: usize = 8 << 20;

/// CPU time the calling thread has used, in ns.
pub(crate) fn thread_cpu_ns() -> u64 {
    let ts = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
    (ts.tv_sec as u64)
        .saturating_mul(1_000_000_000)
        .saturating_add(ts.tv_nsec as u64)
}

/// Everything an interpreter thread needs for one run.
pub(crate) struct Job {
    /// The program as the engine runs it (TypeScript stripped to JavaScript).
    pub(crate) program: String,
    pub(crate) request: RunRequest,
    pub(crate) config: EmbeddedConfig,
    pub(crate) disposed: CancellationToken,
    pub(crate) handle: tokio::runtime::Handle,
    /// The scheduler of the run's binding calls, when this thread drives it.
    pub(crate) lane: Option<InPlaceLane>,
    /// The host, when the run is in a worker process.
    pub(crate) relay: Option<Box<dyn Relay>>,
}

/// The host of a run inside a worker process: logs leave as they are made (a worker the host
/// kills keeps none), and the interpreter thread waits for replies here instead of parking.
pub(crate) trait Relay: Send {
    /// Sends one line the program logged.
    fn log(&mut self, text: &str);
    /// Blocks until at least one reply has come and hands every reply there is to its call.
    fn wait(&mut self);
}

/// Why a run was stopped. The first reason raised wins.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum Stop {
    /// The request's signal was cancelled.
    Aborted = 1,
    /// The runtime was disposed.
    Disposed,
    /// The wall-clock ceiling was reached.
    Wall,
    /// The compute budget was used up.
    Compute,
    /// The interpreter's allocator refused an allocation.
    Memory,
    /// The host settled the run itself (completion, output overflow, binding limit): the
    /// ending is in the engine's state.
    Settled,
}

impl Stop {
    fn from_u8(n: u8) -> Option<Stop> {
        Some(match n {
            1 => Stop::Aborted,
            2 => Stop::Disposed,
            3 => Stop::Wall,
            4 => Stop::Compute,
            5 => Stop::Memory,
            6 => Stop::Settled,
            _ => return None,
        })
    }
}

/// The budgets of one run, shared by the driver loop, the interrupt hook and the allocator.
pub(crate) struct Watch {
    stop: AtomicU8,
    signal: CancellationToken,
    disposed: CancellationToken,
    wall_deadline: Instant,
    /// Moved later by [`credit`](Watch::credit).
    cpu_deadline_ns: AtomicU64,
    compute_ms: u64,
    max_wall_ms: u64,
    max_memory_mb: u64,
}

impl Watch {
    /// Starts the clocks; call it on the interpreter thread.
    pub(crate) fn new(job: &Job) -> Self {
        let config = &job.config;
        Watch {
            stop: AtomicU8::new(0),
            signal: job.request.signal.clone(),
            disposed: job.disposed.clone(),
            wall_deadline: Instant::now() + Duration::from_millis(config.budgets.max_wall_ms),
            cpu_deadline_ns: AtomicU64::new(
                thread_cpu_ns().saturating_add(config.budgets.compute_ms * 1_000_000),
            ),
            compute_ms: config.budgets.compute_ms,
            max_wall_ms: config.budgets.max_wall_ms,
            max_memory_mb: config.budgets.max_memory_mb,
        }
    }

    /// Records `stop` unless another reason came first.
    pub(crate) fn raise(&self, stop: Stop) {
        let _ = self
            .stop
            .compare_exchange(0, stop as u8, Ordering::AcqRel, Ordering::Acquire);
    }

    /// The reason the run was stopped, if it was.
    pub(crate) fn stopped(&self) -> Option<Stop> {
        Stop::from_u8(self.stop.load(Ordering::Acquire))
    }

    /// Checks every budget; `true` when the run must stop. Called by the interrupt hook on the
    /// interpreter thread (its CPU clock is the one charged).
    pub(crate) fn check(&self) -> bool {
        if self.stopped().is_some() {
            return true;
        }
        if self.signal.is_cancelled() {
            self.raise(Stop::Aborted);
        } else if self.disposed.is_cancelled() {
            self.raise(Stop::Disposed);
        } else if Instant::now() >= self.wall_deadline {
            self.raise(Stop::Wall);
        } else if thread_cpu_ns() >= self.cpu_deadline_ns.load(Ordering::Relaxed) {
            self.raise(Stop::Compute);
        }
        self.stopped().is_some()
    }

    /// Leaves `spent` out of the compute budget: host work the interpreter thread did (its
    /// wall time, an upper bound of the CPU time it took).
    pub(crate) fn credit(&self, spent: Duration) {
        let ns = u64::try_from(spent.as_nanos()).unwrap_or(u64::MAX);
        let _ =
            self.cpu_deadline_ns
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |deadline| {
                    Some(deadline.saturating_add(ns))
                });
    }

    /// Time left until the wall-clock ceiling.
    pub(crate) fn wall_left(&self) -> Duration {
        self.wall_deadline.saturating_duration_since(Instant::now())
    }

    /// The typed failure a limit or cancellation reason ends the run with.
    pub(crate) fn failure(&self, stop: Stop) -> Ending {
        match stop {
            Stop::Aborted => Ending::aborted(),
            Stop::Disposed => Ending::disposed(),
            Stop::Wall => Ending::wall(self.max_wall_ms),
            Stop::Compute => Ending::compute(self.compute_ms),
            Stop::Memory => Ending::allocator_limit(self.max_memory_mb),
            Stop::Settled => Ending::worker_exit("the interpreter stopped before completing"),
        }
    }
}

/// Wakes the interpreter thread when a binding call or a cancellation is ready.
pub(crate) struct Unpark(pub(crate) std::thread::Thread);

impl Wake for Unpark {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.0.unpark();
    }
}

/// What became of a binding call the program made.
pub(crate) enum Submitted {
    /// It is under way with this id, or refused; its reply comes from [`Calls::poll_ready`].
    Dispatched(u64),
    /// It was one call too many: the run ends with this ending.
    Limit(Ending),
}

/// The scheduler of a run's binding calls, driven by the interpreter thread that polls the
/// calls (see [`Lane`]).
pub(crate) struct InPlaceLane {
    /// `None` once it has ended.
    schedule: Option<BoxFuture<'static, ()>>,
    /// The run's signal: cancelled once the run has settled, the scheduler then ends when its
    /// started calls have committed.
    stop: CancellationToken,
    handle: tokio::runtime::Handle,
}

impl InPlaceLane {
    /// Takes `lane`'s scheduler, unless someone has already, to drive it in the context of
    /// `handle`.
    pub(crate) fn take(lane: &Lane, handle: tokio::runtime::Handle) -> Option<Self> {
        Some(InPlaceLane {
            schedule: Some(lane.take()?),
            stop: lane.stop().clone(),
            handle,
        })
    }

    /// Polls the scheduler; `true` once it has ended (only after [`finish`](Self::finish) has
    /// stopped it, or `run_code` abandoned it).
    fn poll(&mut self, cx: &mut Context<'_>) -> bool {
        if let Some(schedule) = &mut self.schedule
            && schedule.as_mut().poll(cx).is_ready()
        {
            self.schedule = None;
        }
        self.schedule.is_none()
    }

    /// Stops the scheduler and drives it on this thread until its started calls have committed
    /// (queued ones are abandoned), as `run_code` would before returning.
    fn finish(mut self) {
        self.stop.cancel();
        let waker = std::task::Waker::from(Arc::new(Unpark(std::thread::current())));
        let mut cx = Context::from_waker(&waker);
        while !self.poll(&mut cx) {
            std::thread::park();
        }
    }
}

impl Drop for InPlaceLane {
    /// A lane not driven to its end (the run ended before it started, or the interpreter thread
    /// panicked) finishes on a task, as a lane `run_code` drives: started calls still commit,
    /// and it stops with the run's signal.
    fn drop(&mut self) {
        if let Some(schedule) = self.schedule.take() {
            drop(self.handle.spawn(schedule));
        }
    }
}

/// The binding calls of one run on an interpreter thread: the run session's
/// ([`calls::Calls`]) with the ids this side gives them, the answers it gave at once and the
/// lane this thread drives.
pub(crate) struct Calls {
    calls: calls::Calls,
    last_id: u64,
    answered: Vec<(u64, CheckedResolution)>,
    lane: Option<InPlaceLane>,
}

impl Calls {
    /// The calls of `job`, whose lane (if it came with one) the caller has taken out of it.
    pub(crate) fn new(job: &Job, lane: Option<InPlaceLane>) -> Self {
        Calls {
            calls: calls::Calls::new(&job.request, job.config.budgets.max_binding_calls),
            last_id: 0,
            answered: Vec::new(),
            lane,
        }
    }

    /// Takes one call to `target` whose arguments are `args` (`None`: they were not lossless
    /// JSON). A refusal or an answer ready at once comes with the next
    /// [`poll_ready`](Self::poll_ready), as every reply does.
    pub(crate) fn submit(&mut self, target: Target<'_>, args: Option<Value>) -> Submitted {
        self.last_id += 1;
        let id = self.last_id;
        match self.calls.call(id, target, args) {
            Admitted::Limit(ending) => Submitted::Limit(ending),
            Admitted::Answer(reply) => {
                self.answered.push((id, reply));
                Submitted::Dispatched(id)
            }
            Admitted::Repeated | Admitted::Pending => Submitted::Dispatched(id),
        }
    }

    /// Moves the calls that have finished since the last poll into `ready`. With a lane, the
    /// calls are submitted to it, it runs what it can, and the replies it committed are read;
    /// the time that took is host work, not the program's, and is given back to its compute
    /// budget.
    pub(crate) fn poll_ready(
        &mut self,
        cx: &mut Context<'_>,
        watch: &Watch,
        ready: &mut Vec<(u64, CheckedResolution)>,
    ) {
        ready.append(&mut self.answered);
        self.poll_pending(cx, ready);
        if let Some(lane) = &mut self.lane {
            let started = Instant::now();
            if lane.poll(cx) {
                self.lane = None;
            }
            watch.credit(started.elapsed());
            self.poll_pending(cx, ready);
        }
    }

    fn poll_pending(&mut self, cx: &mut Context<'_>, ready: &mut Vec<(u64, CheckedResolution)>) {
        while let Poll::Ready(reply) = self.calls.poll_next(cx) {
            ready.push(reply);
        }
    }

    /// Stops every call in flight: the run has settled. With a lane, this also stops it and
    /// waits on this thread until its started calls have committed (queued ones are abandoned),
    /// as `run_code` would before returning.
    pub(crate) fn settle(&mut self) {
        self.calls.settle();
        self.answered.clear();
        if let Some(lane) = self.lane.take() {
            lane.finish();
        }
    }
}

/// Parses JSON text from the interpreter: `None` unless it is lossless and at most
/// [`MAX_FRAME_DEPTH`] deep. Deep values are parsed on a stack sized for them.
pub(crate) fn parse_json(text: &str) -> Option<Value> {
    let depth = text_depth(text.as_bytes());
    if depth > MAX_FRAME_DEPTH {
        return None;
    }
    frame::with_stack_for(depth, || {
        let value = parse_unbounded(text.as_bytes())?;
        frame::inspect(&value).is_ok().then_some(value)
    })
}

/// The outcome of an ending, with the same output rules as the subprocess runtime.
pub(crate) fn outcome(ledger: &mut OutputLedger, logs: Vec<String>, ending: Ending) -> RunOutcome {
    ending.into_outcome(ledger, logs, None)
}
