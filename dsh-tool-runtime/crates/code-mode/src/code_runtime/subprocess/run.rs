//! One subprocess run: the loop that waits for the run's ending (the child's frames and output,
//! its binding calls, the budgets, the wall clock, cancellation), then settles it.

use std::time::Duration;

use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use super::super::calls::{self, Calls, Step, reply_frame};
use super::super::ending::Ending;
use super::super::frame::{FrameDecoder, Inbound};
use super::super::ledger::OutputLedger;
use super::super::process::{self, Worker, WorkerIo};
use super::super::value_text::MAX_FRAME_DEPTH;
use super::super::watch::{self, DRAIN_GRACE, FRAME_SLACK, Watch};
use super::super::{RunOutcome, RunRequest};
use super::Inner;
use super::pipes::{Event, read_frames, read_output, write_frames};

/// How long frames may still arrive after the child has exited.
const EXIT_GRACE: Duration = Duration::from_millis(200);

/// One run in flight: the worker, its reader and writer tasks and the run's bookkeeping.
pub(super) struct Session<'r> {
    inner: &'r Inner,
    worker: Worker,
    events: mpsc::Receiver<Event>,
    replies: mpsc::UnboundedSender<Vec<u8>>,
    tasks: Vec<JoinHandle<()>>,
    logs: Vec<String>,
    ledger: OutputLedger,
    calls: Calls,
    outputs_open: usize,
    /// Abort, disposal, the wall clock and the budgets; remembers the child's descendants.
    watch: Watch,
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
        let watch = Watch::start(
            worker.pid,
            &inner.config.budgets,
            &request.signal,
            &inner.disposed,
        )
        .remembering_descendants();
        let (tx, events) = mpsc::channel(256);
        let (replies, reply_rx) = mpsc::unbounded_channel();
        let tx_replies = tx.clone();
        let limits = serde_json::json!({
            "maxFrameBytes": inner.config.max_frame_bytes,
            "maxDepth": MAX_FRAME_DEPTH,
        });
        let run_frame = calls::run_frame(
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
            worker,
            events,
            replies,
            tasks,
            logs: Vec::new(),
            ledger: OutputLedger::new(cap),
            calls: Calls::new(request, inner.config.budgets.max_binding_calls),
            outputs_open: 2,
            watch,
        }
    }

    pub(super) async fn drive(mut self) -> RunOutcome {
        let ending = self.wait_for_ending().await;
        self.settle(ending).await
    }

    async fn wait_for_ending(&mut self) -> Ending {
        let mut exited: Option<(String, Instant)> = None;
        let mut frames_closed = false;
        let mut events_done = false;
        loop {
            let grace = exited.as_ref().map(|(_, at)| *at);
            tokio::select! {
                biased;
                ending = self.watch.ending() => return ending,
                event = self.events.recv(), if !events_done => match event {
                    None => events_done = true,
                    Some(Event::FramesClosed) => {
                        // Nothing more can come from the program: settle now, not at the
                        // wall-clock ceiling. A dying child closes its descriptors just before
                        // its exit status exists: wait a moment for it, to say how it ended.
                        if exited.is_none() {
                            let status = watch::exit_after_close(&mut self.worker.child).await;
                            return watch::closed_before_completing(status);
                        }
                        frames_closed = true;
                    }
                    Some(Event::RepliesClosed) => return watch::closed_before_completing(None),
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
                (id, reply) = self.calls.next_reply(), if !self.calls.idle() => {
                    self.send(reply_frame(id, reply));
                }
                status = self.worker.child.wait(), if exited.is_none() => {
                    let how = status.map_or_else(|e| format!("ended ({e})"), process::describe_exit);
                    self.watch.child_exited();
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

    fn send(&self, frame: Vec<u8>) {
        // The writer only stops when the child's end is gone; the run is then ending anyway.
        let _ = self.replies.send(frame);
    }

    async fn settle(mut self, mut ending: Ending) -> RunOutcome {
        self.calls.settle();
        self.worker.kill();
        self.watch.kill_descendants();
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
