//! The order-preserving scheduler, one implementation for both of its callers:
//! [`Registry::execute_batch`] (a model's calls of one step) and the code-mode bridge (the binding
//! calls of one `run_code` program).
//!
//! Calls start strictly in submission order. Each call is classified just before it starts;
//! consecutive parallel-safe calls share a rolling pool of `max_parallel`; an exclusive call is a
//! barrier (it starts once everything before it has committed, and nothing starts until it has
//! committed). Pre-execute and guards run one call at a time; only execute wrappers and bodies
//! overlap; results commit (post-execute, `finalize_content`, observers, then the caller's
//! [`Sink`]) in submission order.
//!
//! # Stopping
//!
//! A schedule stops when its signal fires or when the future awaiting it is dropped (it is
//! *abandoned*). Either way nothing new starts; what becomes of the calls not started yet is the
//! caller's [`Unstarted`] policy. Calls already started are never dropped and never aborted by
//! the scheduler: the schedule runs on its own task, so after an abandonment its started calls
//! still run to completion and commit in order, exactly once each, before that task ends.
//!
//! # Driven in place
//!
//! [`Schedule::run_in_place`] runs the same schedule inside the future the caller polls, for a
//! caller that polls it on a thread of its own (an embedded interpreter's). Each call's first
//! poll happens there too: a call that finishes in it (most do: the tool answers at once) needs
//! no wake-up of a tokio worker; one that is still pending moves to a task of its own, so it
//! never waits for that thread and parallel calls still use every core. That caller must poll
//! the schedule to its end, or hand it to a task.

mod batch;

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::task::Poll;

use tokio::sync::mpsc;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::call::ToolCall;
use crate::pipeline::DispatchedCall;
use crate::registry::Mode;
use crate::registry::{RUN_CODE, Registry, read};
use crate::result::ToolResult;

pub use batch::BatchOptions;

/// How a call may be scheduled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ExecutionMode {
    /// May overlap with other parallel calls.
    Parallel,
    /// Runs alone.
    Exclusive,
}

impl Registry {
    /// Classifies a call: `Parallel` only when the tool is visible, not collapsed by code mode,
    /// and its classifier returns `true` for these arguments. Unknown tools, arguments that do not
    /// parse and panicking classifiers are `Exclusive`.
    pub fn execution_mode(&self, call: &ToolCall) -> ExecutionMode {
        let definition = {
            let state = read(&self.inner.state);
            let collapsed = call.parent.is_none()
                && call.name != RUN_CODE
                && state.mode(call.agent.as_ref()) == Mode::Code;
            if collapsed {
                None
            } else {
                state.resolve(&call.name, call.agent.as_ref())
            }
        };
        let Some(definition) = definition else {
            return ExecutionMode::Exclusive;
        };
        let safe = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            definition.is_concurrency_safe(&call.arguments)
        }));
        if matches!(safe, Ok(true)) {
            ExecutionMode::Parallel
        } else {
            ExecutionMode::Exclusive
        }
    }
}

/// Where a schedule's committed results go, in submission order.
pub trait Sink: Send + 'static {
    /// What the caller attaches to each call (e.g. the channel that answers a program).
    type Ticket: Send + 'static;

    /// Called just before a call enters the pipeline.
    fn starting(&mut self, _call: &ToolCall) {}

    /// Receives the committed result of call number `seq` (0-based, submission order).
    fn committed(&mut self, seq: usize, ticket: Self::Ticket, result: ToolResult);
}

/// What a stopped schedule does with the calls it has not started.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unstarted {
    /// Each still enters the pipeline with a cancelled signal, so it ends as
    /// `ABORTED_BEFORE_DISPATCH` without running any hook, guard, wrapper or body, and its result
    /// still reaches `finalize_content`, observers, subscribers and the sink (a batch: every call
    /// is seen ending exactly once).
    Dispatch,
    /// Each is dropped with its ticket and never reaches the pipeline (a program: its promise
    /// rejects with "tool call abandoned"); submissions stop being read.
    Abandon,
}

type Submission<T> = (ToolCall, T);

/// One schedule: its calls, their source, and where their results go.
#[derive(Debug)]
pub struct Schedule<S: Sink> {
    registry: Registry,
    max_parallel: usize,
    signal: CancellationToken,
    unstarted: Unstarted,
    queue: VecDeque<Submission<S::Ticket>>,
    submissions: Option<mpsc::UnboundedReceiver<Submission<S::Ticket>>>,
    sink: S,
}

impl<S: Sink> Schedule<S> {
    /// A schedule of `max_parallel` (0 is treated as 1) that stops when `signal` fires.
    pub fn new(
        registry: Registry,
        max_parallel: usize,
        signal: CancellationToken,
        unstarted: Unstarted,
        sink: S,
    ) -> Self {
        Schedule {
            registry,
            max_parallel: max_parallel.max(1),
            signal,
            unstarted,
            queue: VecDeque::new(),
            submissions: None,
            sink,
        }
    }

    /// Queues a call known up front.
    pub fn push(&mut self, call: ToolCall, ticket: S::Ticket) {
        self.queue.push_back((call, ticket));
    }

    /// Also takes calls from `submissions` until the schedule stops or every sender is gone.
    pub fn submissions(
        mut self,
        submissions: mpsc::UnboundedReceiver<Submission<S::Ticket>>,
    ) -> Self {
        self.submissions = Some(submissions);
        self
    }

    /// Runs the schedule on its own task and returns the sink once every started call has
    /// committed. Dropping the returned future abandons the schedule (see the module docs).
    ///
    /// `None` only when that task could not finish (the runtime is shutting down).
    pub async fn run(self) -> Option<S> {
        let abandoned = CancellationToken::new();
        let _abandon_on_drop = abandoned.clone().drop_guard();
        let task = tokio::spawn(self.drive(abandoned, Running::Spawned(JoinSet::new())));
        match task.await {
            Ok(sink) => Some(sink),
            Err(join_error) => {
                tracing::error!("tool schedule task failed: {join_error}");
                None
            }
        }
    }

    /// Runs the schedule inside the returned future, with each call's first poll (see the module
    /// docs); it stops like [`run`](Self::run) when `abandoned` is cancelled. It must be polled
    /// in a tokio runtime's context (tools use its timers), and to its end or on a task: its
    /// pending calls are tasks it owns.
    pub async fn run_in_place(self, abandoned: CancellationToken) -> S {
        let running = Running::InPlace {
            finished: VecDeque::new(),
            pending: JoinSet::new(),
        };
        self.drive(abandoned, running).await
    }

    async fn drive(mut self, abandoned: CancellationToken, mut running: Running) -> S {
        let mut done: BTreeMap<usize, DispatchedCall> = BTreeMap::new();
        let mut tickets: HashMap<usize, S::Ticket> = HashMap::new();
        let mut started = 0;
        let mut committed = 0;
        // A started exclusive call that has not committed yet.
        let mut barrier: Option<usize> = None;
        loop {
            let stopping = self.signal.is_cancelled() || abandoned.is_cancelled();
            if stopping && self.unstarted == Unstarted::Abandon {
                self.queue.clear();
                self.submissions = None;
            }
            while barrier.is_none() {
                let Some((front, _)) = self.queue.front() else {
                    break;
                };
                let exclusive =
                    !stopping && self.registry.execution_mode(front) == ExecutionMode::Exclusive;
                if exclusive && committed < started {
                    break;
                }
                if !exclusive && running.len() >= self.max_parallel {
                    break;
                }
                let Some((mut call, ticket)) = self.queue.pop_front() else {
                    break;
                };
                let seq = started;
                started += 1;
                if exclusive {
                    barrier = Some(seq);
                }
                if abandoned.is_cancelled() {
                    call.signal = abandoned.clone();
                }
                self.sink.starting(&call);
                tickets.insert(seq, ticket);
                let prepared = self.registry.prepare(call).await;
                let registry = self.registry.clone();
                running
                    .start(async move { (seq, registry.dispatch(prepared).await) })
                    .await;
            }
            if running.is_empty() && self.queue.is_empty() && self.submissions.is_none() {
                break;
            }
            tokio::select! {
                submission = recv(&mut self.submissions) => match submission {
                    Some(submission) => self.queue.push_back(submission),
                    None => self.submissions = None,
                },
                joined = running.next(), if !running.is_empty() => match joined {
                    Some(Some((seq, dispatched))) => {
                        done.insert(seq, dispatched);
                    }
                    Some(None) => break,
                    None => {}
                },
                () = self.signal.cancelled(), if !stopping => {}
                () = abandoned.cancelled(), if !abandoned.is_cancelled() => {}
            }
            while let Some(dispatched) = done.remove(&committed) {
                let result = self.registry.commit(dispatched).await;
                if let Some(ticket) = tickets.remove(&committed) {
                    self.sink.committed(committed, ticket, result);
                }
                if barrier == Some(committed) {
                    barrier = None;
                }
                committed += 1;
            }
        }
        self.sink
    }
}

/// The calls a schedule has started and not yet seen finish.
enum Running {
    /// Each on a task of its own, so they run on all of the runtime's workers.
    Spawned(JoinSet<(usize, DispatchedCall)>),
    /// Each polled once where the schedule is polled: those that finished there, in order, and
    /// the tasks of those that did not.
    InPlace {
        finished: VecDeque<(usize, DispatchedCall)>,
        pending: JoinSet<(usize, DispatchedCall)>,
    },
}

impl Running {
    fn len(&self) -> usize {
        match self {
            Running::Spawned(set) => set.len(),
            Running::InPlace { finished, pending } => finished.len() + pending.len(),
        }
    }

    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    async fn start(
        &mut self,
        call: impl Future<Output = (usize, DispatchedCall)> + Send + 'static,
    ) {
        match self {
            Running::Spawned(set) => {
                set.spawn(call);
            }
            Running::InPlace { finished, pending } => {
                let mut call = Box::pin(call);
                match std::future::poll_fn(|cx| Poll::Ready(call.as_mut().poll(cx))).await {
                    Poll::Ready(done) => finished.push_back(done),
                    // Its next poll, on the task, registers the task's waker.
                    Poll::Pending => {
                        pending.spawn(call);
                    }
                }
            }
        }
    }

    /// The next finished call; `Some(None)` when its task failed, `None` when none is running.
    async fn next(&mut self) -> Option<Option<(usize, DispatchedCall)>> {
        let set = match self {
            Running::Spawned(set) => set,
            Running::InPlace { finished, pending } => match finished.pop_front() {
                Some(done) => return Some(Some(done)),
                None => pending,
            },
        };
        match set.join_next().await? {
            Ok(finished) => Some(Some(finished)),
            // Dispatch contains panics itself, so only a runtime shutdown lands here.
            Err(join_error) => {
                tracing::error!("tool dispatch task failed: {join_error}");
                Some(None)
            }
        }
    }
}

/// The next submission, or never when there is no source.
async fn recv<T>(submissions: &mut Option<mpsc::UnboundedReceiver<T>>) -> Option<T> {
    match submissions {
        Some(receiver) => receiver.recv().await,
        None => std::future::pending().await,
    }
}
