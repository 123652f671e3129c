//! One subprocess run: the loop that waits for the run's ending (the child's frames and output,
//! its binding calls, the budgets, the wall clock, cancellation), then settles it.

use std::collections::HashMap;
use std::time::Duration;

use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio::time::{Instant, MissedTickBehavior};

use super::super::budget::TreeBudget;
use super::super::frame::{FrameDecoder, Inbound};
use super::super::ledger::OutputLedger;
use super::super::process::{self, Worker, WorkerIo};
use super::super::session::{self, Calls, Ending, Step, reply_frame};
use super::super::{RunOutcome, RunRequest};
use super::Inner;
use super::pipes::{Event, read_frames, read_output, write_frames};
use crate::json::MAX_FRAME_DEPTH;

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

/// One run in flight: the worker, its reader and writer tasks and the run's bookkeeping.
pub(super) struct Session<'r> {
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
    pub(super) fn new(
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
        let limits = serde_json::json!({
            "maxFrameBytes": inner.config.max_frame_bytes,
            "maxDepth": MAX_FRAME_DEPTH,
        });
        let run_frame = session::run_frame(
            program,
            request,
            cap,
            limits.as_object().cloned().unwrap_or_default(),
        );
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

    pub(super) async fn drive(mut self) -> RunOutcome {
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
                        let step = self.calls.on_oversized(id, self.inner.config.max_frame_bytes);
                        if let Some(ending) = self.take(step) {
                            return ending;
                        }
                    }
                    Some(Event::Inbound(Inbound::Frame(frame))) => {
                        let step = self.calls.on_frame(frame);
                        if let Some(ending) = self.take(step) {
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

    /// Does what a frame asked; the ending when the run ends.
    fn take(&mut self, step: Step) -> Option<Ending> {
        match step {
            Step::Log(text) => self
                .ledger
                .push_log(&mut self.logs, &text)
                .err()
                .map(Ending::Overflow),
            Step::End(ending) => Some(ending),
            Step::Reply(frame) => {
                self.send(frame);
                None
            }
            Step::Nothing => None,
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
