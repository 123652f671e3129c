//! One run over a pooled worker. The frame path is one task per run on tokio's workers: frames
//! are read from the ring shared with the worker (`ring.rs`; the pipes are only its doorbells),
//! binding calls dispatched (a call that is ready at once is answered in the same poll) and
//! replies written on that task, without channels or helper tasks in between.

use std::time::Duration;

use tokio::io::AsyncReadExt;
use tokio::time::Instant;

use dsh_tool_code_mode::__engines::calls::{Calls, Step, reply_frame, run_frame};
use dsh_tool_code_mode::__engines::watch::{self, DRAIN_GRACE, FRAME_SLACK, Watch};
use dsh_tool_code_mode::__engines::{Ending, Lines};
use dsh_tool_code_mode::code_runtime::frame::{ChildFrame, FrameDecoder, Inbound};
use dsh_tool_code_mode::code_runtime::{OutputLedger, RunOutcome, RunRequest};

use super::{Channel, Pool, Pooled};
use crate::ring;

/// Largest binding-call frame (arguments plus a few bytes), as for the subprocess runtimes.
const MAX_CALL_FRAME: usize = 1 << 20;

/// Bytes read from a worker's ring at a time.
const READ_CHUNK: usize = 64 << 10;

/// How long a run polls for the worker's next frame after sending it a reply, before it waits
/// on the reactor. The worker polls its side likewise (`REPLY_SPIN` in `monty/channel.rs`),
/// so that a binding round trip needs no scheduler wake-up, which on an idle machine costs tens
/// of microseconds on each side. Bounded: a program that computes between calls costs the host
/// at most this much polling per reply.
const FRAME_SPIN: Duration = Duration::from_micros(30);

/// The longest a run keeps answering calls by polling before it passes through its wait.
const SPIN_SESSION: Duration = Duration::from_millis(2);

/// One run on one worker: its bookkeeping and the bytes still to write.
pub(super) struct Session<'r> {
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
    pub(super) fn new(pool: &'r Pool, request: &'r RunRequest) -> Self {
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
            unwritten: run_frame(&request.program, request, cap, serde_json::Map::new()),
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

    /// Whether the worker may serve another run after `ending`: the run completed, the worker
    /// stayed in a known state and every byte for it was written.
    pub(super) fn leaves_worker_clean(&self, ending: &Ending) -> bool {
        matches!(ending, Ending::Done(_)) && self.clean && self.written == self.unwritten.len()
    }

    pub(super) async fn wait_for_ending(&mut self, pooled: &mut Pooled) -> Ending {
        let config = &self.pool.config;
        let mut watch = Watch::start(
            pooled.worker.pid,
            &config.budgets,
            &self.request.signal,
            &self.pool.disposed,
        );
        if self.write_queued(&mut pooled.frames).is_err() {
            return self.broke();
        }
        let mut buf = vec![0u8; READ_CHUNK];
        let mut out_buf = [0u8; 4096];
        let mut err_buf = [0u8; 4096];
        let max_line = usize::try_from(config.budgets.max_output_bytes)
            .unwrap_or(usize::MAX)
            .saturating_add(FRAME_SLACK);
        let (mut out_line, mut err_line) = (Lines::new(max_line), Lines::new(max_line));
        let (mut out_open, mut err_open) = (true, true);
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
                ending = watch.ending() => return ending,
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
                (id, reply) = self.calls.next_reply(), if !self.calls.idle() => {
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
                    let step = self.calls.on_oversized(id, MAX_CALL_FRAME as u64);
                    self.take(step, out)
                }
                Inbound::Frame(frame) => {
                    let step = self.calls.on_frame(frame);
                    self.take(step, out)
                }
            };
        }
        ending
    }

    /// Does what a frame asked; the ending when the run ends.
    fn take(&mut self, step: Step, out: &mut Channel) -> Option<Ending> {
        match step {
            Step::Log(text) => {
                self.log(&text);
                self.overflowed()
            }
            Step::End(ending) => Some(ending),
            Step::Reply(frame) => {
                self.send(out, &frame);
                None
            }
            Step::Nothing => None,
        }
    }

    /// The worker's doorbell pipe closed: how it ended, once its exit status shows.
    async fn exited(&mut self, pooled: &mut Pooled) -> Ending {
        self.clean = false;
        let status = watch::exit_after_close(&mut pooled.worker.child).await;
        if status.and_then(|status| status.code()) == Some(monty_types::OOM_EXIT_CODE) {
            return Ending::allocator_limit(self.pool.config.budgets.max_memory_mb);
        }
        watch::closed_before_completing(status)
    }

    /// After a kill: takes in the log frames the worker published before it died (all of
    /// them are in the ring once its doorbell pipe has closed).
    pub(super) async fn drain(&mut self, pooled: &mut Pooled) {
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

    pub(super) fn outcome(mut self, ending: Ending) -> RunOutcome {
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
